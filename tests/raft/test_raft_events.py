"""The core reports its transitions as events in Ready.events, in the words the node log shows."""

from __future__ import annotations

from raft_cluster import Cluster, Store, log_of

from odradek.controller.raft import PersistentState, Role
from odradek.controller.raft.events import (
    BecameCandidate,
    BecameFollower,
    BecameLeader,
    BecameProspective,
    LogTruncated,
    SnapshotInstalled,
    SteppedDown,
    Voted,
)


def events(c: Cluster, node_id: int) -> list:
    return [e for r in c.stores[node_id].readies for e in r.events]


def test_an_election_reports_pre_vote_candidacy_and_leadership() -> None:
    c = Cluster()
    c.campaign(1)
    assert events(c, 1) == [
        BecameProspective(0, "election timeout"),
        BecameCandidate(1, (1, 2)),
        BecameLeader(1, (1, 2)),
    ]
    assert events(c, 1)[-1].describe() == "became leader of epoch 1 (votes from 1,2)"
    assert Voted(1, 1) in events(c, 2) and events(c, 2)[-1] == BecameFollower(1, 1)
    assert events(c, 2)[-1].describe() == "became follower of 1 in epoch 1"


def test_a_leader_cut_off_reports_check_quorum() -> None:
    c = Cluster()
    c.campaign(1)
    c.isolate(1)
    c.tick(c.config.fetch_timeout_ticks + 2, only=(1,))
    assert c.nodes[1].role is Role.RESIGNED
    [down] = [e for e in events(c, 1) if isinstance(e, SteppedDown)]
    assert down.describe() == (
        "stepped down as leader of epoch 1: check-quorum lost (1 of 3 voters fetched in the last 10 ticks)"
    )


def test_a_snapshot_install_and_a_truncation_are_reported() -> None:
    stores = {
        1: Store(PersistentState(2), log_of([1, 2, 2])),
        2: Store(PersistentState(2), log_of([1, 1, 1, 1])),
        3: Store(PersistentState(2)),
    }
    c = Cluster(stores=stores)
    c.campaign(1)
    assert LogTruncated(1, 1) in events(c, 2)
    c.isolate(3)
    c.propose(b"x")
    sid = c.take_snapshot(1)
    c.heal()
    c.tick(4)
    assert SnapshotInstalled(sid, 1) in events(c, 3)
    assert SnapshotInstalled(sid, 1).describe() == f"installed snapshot up to offset {sid.end_offset} (epoch 3) from 1"

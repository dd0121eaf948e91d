"""Focused deterministic tests of RaftNode behaviour, one Raft rule at a time."""

from __future__ import annotations

import random

import pytest
from raft_cluster import Cluster, Store, log_of

from odradek.controller.raft import Faults, NotLeaderError, PersistentState, RaftConfig, RaftNode, Role
from odradek.controller.raft.messages import (
    FENCED_LEADER_EPOCH,
    INCONSISTENT_VOTER_SET,
    NONE,
    NOT_LEADER_OR_FOLLOWER,
    UNKNOWN_LEADER_EPOCH,
    BeginQuorumEpoch,
    DivergingEpoch,
    EndQuorumEpoch,
    Fetch,
    FetchResponse,
    FetchSnapshot,
    Message,
    Vote,
    VoteResponse,
)
from odradek.controller.raft.snapshot import SnapshotId

VOTERS = (1, 2, 3)


def node(node_id: int = 1, state: PersistentState | None = None, epochs: list[int] = (), **kw) -> RaftNode:
    return RaftNode(node_id, VOTERS, rng=random.Random(node_id), state=state, entries=log_of(list(epochs)), **kw)


def lead(n: RaftNode) -> None:
    """Drive a lone node to leadership by granting its pre-votes and votes by hand."""
    while n.role is not Role.PROSPECTIVE:
        n.tick()
    others = [v for v in VOTERS if v != n.node_id]
    n.step(VoteResponse(others[0], n.node_id, n.epoch, None, True, True))
    n.step(VoteResponse(others[0], n.node_id, n.epoch, None, True, False))
    assert n.role is Role.LEADER
    n.advance(n.ready())


def reply(n: RaftNode, request: Message):
    """Step one request, hand its Ready over and return the response sent back to the requester."""
    n.step(request)
    r = n.ready()
    n.advance(r)
    (response,) = [m for m in r.messages if m.dst == request.src]
    return response


# ---------------------------------------------------------------------- elections


def test_election_makes_one_leader_that_commits_its_epoch_entry() -> None:
    c = Cluster()
    c.campaign(1)
    leader = c.nodes[1]
    assert (leader.role, leader.epoch) == (Role.LEADER, 1)
    for i in (2, 3):
        assert (c.nodes[i].role, c.nodes[i].leader_id) == (Role.FOLLOWER, 1)
        assert c.stores[i].state == PersistentState(epoch=1, voted_for=1, leader_id=1)
    # The leader-change entry of epoch 1 is committed and every follower learned it from a fetch.
    assert [n.high_watermark for n in c.nodes.values()] == [1, 1, 1]
    assert c.stores[2].entries[0].control


def test_single_voter_commits_only_what_it_has_persisted() -> None:
    n = RaftNode(1, (1,), rng=random.Random(0))
    while n.role is not Role.LEADER:
        n.tick()
    n.advance(n.ready())
    assert n.high_watermark == 1
    assert n.propose([b"a", b"b"]) == 2
    r = n.ready()
    assert [e.data for e in r.entries] == [b"a", b"b"]
    assert n.high_watermark == 1  # not durable yet
    n.advance(r)
    assert n.high_watermark == 3
    assert [e.data for e in n.ready().committed] == [b"a", b"b"]


def test_followers_campaign_when_the_leader_dies() -> None:
    c = Cluster()
    c.campaign(1)
    c.propose(b"x")
    c.crash(1)
    for _ in range(60):
        c.tick()
        if c.leader() is not None:
            break
    leader = c.leader()
    assert leader is not None and leader.node_id in (2, 3) and leader.epoch == 2
    c.propose(b"y")
    assert c.stores[2].applied == c.stores[3].applied == [b"x", b"y"]


def test_candidate_persists_its_vote_in_the_same_ready_as_its_vote_requests() -> None:
    c = Cluster()
    c.campaign(1)
    (ready,) = [r for r in c.stores[1].readies if any(type(m) is Vote and not m.pre_vote for m in r.messages)]
    assert ready.persist_state == PersistentState(epoch=1, voted_for=1)
    pre_vote_ready = next(r for r in c.stores[1].readies if any(type(m) is Vote for m in r.messages))
    assert pre_vote_ready.persist_state is None  # a pre-vote changes nothing durable
    for i in (2, 3):
        (granting,) = [
            r for r in c.stores[i].readies if any(type(m) is VoteResponse and not m.pre_vote for m in r.messages)
        ]
        assert granting.persist_state == PersistentState(epoch=1, voted_for=1)


def test_a_vote_survives_a_restart() -> None:
    voter = node(1)
    assert reply(voter, Vote(2, 1, candidate_epoch=1, last_epoch=0, end_offset=0)).granted
    persisted = voter.quorum_state.persistent()
    restarted = node(1, state=persisted)
    assert not reply(restarted, Vote(3, 1, 1, 0, 0)).granted
    assert reply(restarted, Vote(2, 1, 1, 0, 0)).granted  # the same candidate retrying is fine


@pytest.mark.parametrize(
    ("case", "state", "epochs", "vote", "granted", "error", "epoch_after", "voted_after"),
    [
        ("stale epoch", PersistentState(3), [1, 2], Vote(2, 1, 2, 2, 2), False, FENCED_LEADER_EPOCH, 3, None),
        ("newer epoch, log as long", PersistentState(1), [1, 1], Vote(2, 1, 2, 1, 2), True, NONE, 2, 2),
        ("newer epoch, older last epoch", PersistentState(2), [1, 2], Vote(2, 1, 3, 1, 9), False, NONE, 3, None),
        ("same last epoch, shorter log", PersistentState(1), [1, 1, 1], Vote(2, 1, 2, 1, 2), False, NONE, 2, None),
        ("already voted for another", PersistentState(2, 3), [1], Vote(2, 1, 2, 1, 1), False, NONE, 2, 3),
        ("retry from the same candidate", PersistentState(2, 2), [1], Vote(2, 1, 2, 1, 1), True, NONE, 2, 2),
        ("leader known in the epoch", PersistentState(2, None, 3), [1], Vote(2, 1, 2, 1, 5), False, NONE, 2, None),
        ("not a voter", PersistentState(1), [], Vote(100, 1, 2, 0, 0), False, INCONSISTENT_VOTER_SET, 1, None),
        ("pre-vote changes nothing", PersistentState(1), [1], Vote(2, 1, 2, 1, 1, True), True, NONE, 1, None),
        ("pre-vote, older log", PersistentState(1), [1, 1], Vote(2, 1, 2, 1, 1, True), False, NONE, 1, None),
    ],
)
def test_vote_rules(case, state, epochs, vote, granted, error, epoch_after, voted_after) -> None:
    n = node(1, state=state, epochs=epochs)
    response = reply(n, vote)
    assert (response.granted, response.error, response.pre_vote) == (granted, error, vote.pre_vote), case
    assert (n.epoch, n.voted_for) == (epoch_after, voted_after), case


def test_observer_refuses_vote_requests() -> None:
    observer = RaftNode(100, VOTERS, rng=random.Random(0))
    response = reply(observer, Vote(2, 100, 1, 0, 0))
    assert (response.granted, response.error, observer.epoch) == (False, INCONSISTENT_VOTER_SET, 0)


def test_pre_vote_does_not_disrupt_a_stable_leader() -> None:
    """Node 3 loses the leader but still reaches node 2: its pre-votes fail and no epoch is burnt."""
    c = Cluster()
    c.campaign(1)
    c.propose(b"a")
    c.cut |= {(1, 3), (3, 1)}
    for _ in range(60):
        c.tick()
    pre_votes = [m for m in c.sent if type(m) is VoteResponse and (m.src, m.dst) == (2, 3)]
    assert pre_votes and not any(m.granted for m in pre_votes)
    assert not any(type(m) is Vote and m.src == 3 and not m.pre_vote for m in c.sent)
    assert [n.epoch for n in c.nodes.values()] == [1, 1, 1]
    assert c.leader() is c.nodes[1]
    c.heal()
    c.tick(4)
    c.propose(b"b")
    assert c.stores[3].applied == [b"a", b"b"]


# ---------------------------------------------------------------------- replication


@pytest.mark.parametrize(
    ("case", "leader_log", "follower_log", "truncate_to"),
    [
        ("extra entries of an old epoch", [1, 1, 2, 3, 3], [1, 1, 2, 2, 2, 2], 3),
        ("an epoch the leader never had", [1, 1, 3, 3], [1, 1, 2, 2], 2),
        ("longer tail of the same epoch", [1, 1, 1], [1, 1, 1, 1, 1], 3),
        ("only behind", [1, 1, 2, 2], [1, 1], None),
    ],
)
def test_follower_truncates_to_the_diverging_epoch_end(case, leader_log, follower_log, truncate_to) -> None:
    top = max(leader_log + follower_log)
    stores = {
        1: Store(PersistentState(top), log_of(leader_log)),
        2: Store(PersistentState(top), log_of(follower_log)),
        3: Store(PersistentState(top)),
    }
    c = Cluster(stores=stores)
    c.campaign(1)
    truncations = [r.truncate_to for r in c.stores[2].readies if r.truncate_to is not None]
    assert truncations == ([] if truncate_to is None else [truncate_to]), case
    c.propose(b"new")
    assert c.stores[2].entries == c.stores[1].entries, case
    assert c.stores[2].applied == c.stores[1].applied, case


def test_duplicate_answer_to_an_older_fetch_is_ignored() -> None:
    follower = node(1, state=PersistentState(1, None, 2), epochs=[1, 1, 1])
    follower.step(FetchResponse(2, 1, 1, 2, 1, 1, 0, diverging_epoch=DivergingEpoch(1, 1)))
    assert follower.log.end_offset == 3


@pytest.mark.parametrize("faults", [None, Faults(commit_previous_epoch_by_count=True)])
def test_leader_commits_older_epochs_only_through_its_own(faults: Faults | None) -> None:
    """Raft's figure 8: a majority holding an older epoch's entry is not enough to commit it."""
    leader = node(1, state=PersistentState(1), epochs=[1, 1, 1], faults=faults)
    lead(leader)
    assert (leader.epoch, leader.log.end_offset) == (2, 4)  # offset 3 is the epoch-2 leader-change entry
    reply(leader, Fetch(2, 1, 2, fetch_offset=3, last_fetched_epoch=1, high_watermark=0))
    assert leader.high_watermark == (3 if faults else 0)
    reply(leader, Fetch(2, 1, 2, fetch_offset=4, last_fetched_epoch=2, high_watermark=0))
    assert leader.high_watermark == 4


def test_leader_needs_a_majority_of_voters() -> None:
    c = Cluster(observers=(100,))
    c.campaign(1)
    c.tick(3)
    hw = c.nodes[1].high_watermark
    c.isolate(2)
    c.isolate(3)
    c.cut -= {(1, 100), (100, 1)}
    c.propose(b"x")
    assert c.nodes[100].log.end_offset == c.nodes[1].log.end_offset  # the observer has it...
    assert c.nodes[1].high_watermark == hw  # ...and does not count
    c.heal()
    c.tick(3)
    assert c.nodes[1].high_watermark == hw + 1
    assert c.stores[100].applied == [b"x"]


def test_high_watermark_reaches_followers_and_only_grows() -> None:
    c = Cluster()
    c.campaign(1)
    seen = {i: 0 for i in VOTERS}
    for k in range(5):
        c.propose(f"v{k}".encode())
        for i, n in c.nodes.items():
            assert n.high_watermark >= seen[i]
            seen[i] = n.high_watermark
    assert set(seen.values()) == {6}


def test_leader_parks_fetches_that_would_bring_nothing_new() -> None:
    c = Cluster()
    c.campaign(1)
    assert {f.src for f in c.parked[1]} == {2, 3}
    c.propose(b"x")  # no tick: the append itself completes the parked fetches
    assert c.stores[2].applied == c.stores[3].applied == [b"x"]


def test_proposals_only_on_the_leader() -> None:
    c = Cluster()
    c.campaign(1)
    with pytest.raises(NotLeaderError) as err:
        c.nodes[2].propose([b"x"])
    assert (err.value.leader_id, err.value.epoch) == (1, 1)


# ---------------------------------------------------------------------- observers


def test_observer_finds_the_leader_and_never_campaigns() -> None:
    c = Cluster(observers=(100,))
    c.tick(40, only=(100,))  # no leader anywhere: the observer only keeps asking
    assert (c.nodes[100].role, c.nodes[100].epoch) == (Role.UNATTACHED, 0)
    c.campaign(1)
    c.tick(3)
    assert (c.nodes[100].role, c.nodes[100].leader_id) == (Role.FOLLOWER, 1)
    c.propose(b"x")
    assert c.stores[100].applied == [b"x"]
    assert not any(type(m) is Vote and m.src == 100 for m in c.sent)


# ---------------------------------------------------------------------- snapshots


def test_lagging_follower_installs_the_leader_snapshot_in_chunks() -> None:
    c = Cluster()
    c.campaign(1)
    c.isolate(3)
    for k in range(6):
        c.propose(f"value-{k}".encode())
    sid = c.take_snapshot(1)
    assert c.nodes[1].log.start_offset == sid.end_offset == 7
    c.heal()
    c.tick(4)
    readies = c.stores[3].readies
    assert len([ch for r in readies for ch in r.snapshot_chunks]) > 1
    assert [r.install_snapshot for r in readies if r.install_snapshot] == [sid]
    assert c.nodes[3].log.start_offset == 7
    c.propose(b"after")
    assert c.stores[3].applied == c.stores[1].applied
    assert c.stores[3].applied[-1] == b"after"


def test_follower_that_diverged_below_the_leader_snapshot_gets_the_snapshot() -> None:
    stores = {
        1: Store(PersistentState(3), log_of([1, 3, 3])),
        2: Store(PersistentState(3), log_of([1, 2, 2, 2])),
        3: Store(PersistentState(3)),
    }
    c = Cluster(stores=stores)
    c.isolate(2)
    c.campaign(1)
    c.propose(b"x")
    c.take_snapshot(1)  # covers offsets 0..4; node 2's epoch-2 entries diverge inside it
    c.heal()
    c.tick(4)
    assert [r.install_snapshot for r in c.stores[2].readies if r.install_snapshot] == [SnapshotId(5, 4)]
    assert c.stores[2].applied == c.stores[1].applied == [b"0@1", b"1@3", b"2@3", b"x"]


def test_snapshot_must_cover_only_applied_entries() -> None:
    c = Cluster()
    c.campaign(1)
    with pytest.raises(ValueError):
        c.nodes[1].snapshot_taken(5, 1)


# ---------------------------------------------------------------------- resignation and check-quorum


def test_resign_hands_leadership_to_the_preferred_successor_quickly() -> None:
    c = Cluster()
    c.campaign(1)
    c.propose(b"x")
    c.nodes[1].resign()
    c.deliver()
    assert c.nodes[1].role is Role.RESIGNED
    ends = [m for m in c.sent if type(m) is EndQuorumEpoch]
    assert {m.dst for m in ends} == {2, 3} and ends[0].preferred_successors == (2, 3)
    with pytest.raises(NotLeaderError):
        c.nodes[1].propose([b"y"])
    c.tick(2)  # well under the election timeout (5..9 ticks)
    assert c.leader() is c.nodes[2] and c.nodes[2].epoch == 2
    c.propose(b"y")
    assert c.stores[1].applied == [b"x", b"y"]


def test_leader_cut_off_from_the_majority_resigns() -> None:
    c = Cluster()
    c.campaign(1)
    c.isolate(1)
    c.tick(c.config.fetch_timeout_ticks + 2, only=(1,))  # +1: the parked fetches are answered at the first
    assert c.nodes[1].role is Role.RESIGNED
    with pytest.raises(NotLeaderError):
        c.nodes[1].propose([b"x"])


def test_a_new_leader_gives_silent_voters_a_fetch_timeout_before_resigning() -> None:
    leader = node(1)
    lead(leader)
    for _ in range(RaftConfig().fetch_timeout_ticks):
        leader.tick()
    assert leader.role is Role.LEADER
    leader.tick()
    assert leader.role is Role.RESIGNED


# ---------------------------------------------------------------------- quorum progress (DescribeQuorum)


def progress(n: RaftNode) -> dict[int, tuple[int, int | None, int | None]]:
    """Each fetcher's end offset, last fetch tick and last caught-up tick, as the leader knows them."""
    return {r.node_id: (r.end_offset, r.last_fetch_tick, r.last_caught_up_tick) for r in n.peer_progress()}


def test_a_new_leader_knows_no_fetch_time_until_a_voter_fetches_from_it() -> None:
    """Kafka's LeaderState: fetch and caught-up times are unknown until the voter fetches from this leader; a fetch
    that does not match the leader's log (it diverges) records none."""
    leader = node(1, state=PersistentState(1), epochs=[1, 1, 1])
    lead(leader)
    assert progress(leader) == {2: (-1, None, None), 3: (-1, None, None)}
    reply(leader, Fetch(2, 1, 2, fetch_offset=6, last_fetched_epoch=2, high_watermark=0))  # past the leader's end
    reply(leader, Fetch(3, 1, 2, fetch_offset=3, last_fetched_epoch=1, high_watermark=0))
    assert progress(leader) == {2: (-1, None, None), 3: (3, leader.now, None)}


def test_a_voter_caught_up_when_it_held_the_leaders_whole_log_or_at_its_fetch_before_that() -> None:
    """Kafka's ReplicaState.updateFollowerState: a fetch at the leader's log end offset caught up now; one that
    reaches the end offset the leader had at the previous fetch caught up at that previous fetch."""
    leader = node(1, state=PersistentState(1), epochs=[1, 1, 1])
    lead(leader)  # the leader's log ends at 4 (its epoch-2 leader-change entry)
    start = leader.now
    reply(leader, Fetch(2, 1, 2, fetch_offset=3, last_fetched_epoch=1, high_watermark=0))
    assert progress(leader)[2] == (3, start, None)  # behind the leader's end
    leader.tick()
    leader.propose([b"x"])  # the log ends at 5
    leader.advance(leader.ready())
    reply(leader, Fetch(2, 1, 2, fetch_offset=4, last_fetched_epoch=2, high_watermark=0))
    assert progress(leader)[2] == (4, start + 1, start)  # holds what the leader held at its previous fetch
    leader.tick()
    reply(leader, Fetch(2, 1, 2, fetch_offset=5, last_fetched_epoch=2, high_watermark=4))
    assert progress(leader)[2] == (5, start + 2, start + 2)  # holds the leader's whole log
    assert progress(leader)[3] == (-1, None, None)


def test_restarted_leader_comes_back_resigned_and_rejoins() -> None:
    c = Cluster()
    c.campaign(1)
    c.propose(b"x")
    c.crash(1)
    assert c.start(1).role is Role.RESIGNED
    for _ in range(60):
        c.tick()
        if c.leader() is not None and c.leader().epoch > 1:
            break
    c.propose(b"y")
    assert c.stores[1].applied == c.stores[2].applied == [b"x", b"y"]


# ---------------------------------------------------------------------- stale epochs


FOLLOWER_OF_2_IN_EPOCH_3 = PersistentState(epoch=3, voted_for=None, leader_id=2)


@pytest.mark.parametrize(
    "request_",
    [
        Fetch(3, 1, 2, 0, 0, 0),
        BeginQuorumEpoch(3, 1, 2),
        EndQuorumEpoch(3, 1, 2, (1,)),
        Vote(3, 1, 2, 0, 0),
        FetchSnapshot(3, 1, 2, SnapshotId(5, 2), 0, 8),
    ],
    ids=type,
)
def test_requests_from_an_older_epoch_are_fenced(request_: Message) -> None:
    n = node(1, state=FOLLOWER_OF_2_IN_EPOCH_3)
    response = reply(n, request_)
    assert (response.error, response.epoch, response.leader_id) == (FENCED_LEADER_EPOCH, 3, 2)
    assert (n.role, n.epoch, n.leader_id) == (Role.FOLLOWER, 3, 2)


def test_fetch_to_a_non_leader_names_the_leader() -> None:
    response = reply(node(1, state=FOLLOWER_OF_2_IN_EPOCH_3), Fetch(100, 1, 3, 0, 0, 0))
    assert (response.error, response.leader_id) == (NOT_LEADER_OR_FOLLOWER, 2)


def test_fetch_from_a_newer_epoch_tells_the_stale_leader() -> None:
    leader = node(1)
    lead(leader)
    response = reply(leader, Fetch(2, 1, 7, 0, 0, 0))
    assert (response.error, response.epoch) == (UNKNOWN_LEADER_EPOCH, 1)


def test_a_higher_epoch_vote_deposes_the_leader() -> None:
    leader = node(1)
    lead(leader)
    response = reply(leader, Vote(2, 1, 5, 1, 1))
    assert response.granted and (leader.role, leader.epoch) == (Role.UNATTACHED, 5)

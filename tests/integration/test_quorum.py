"""The controller quorum with real processes: election, failover, minority partitions, broker fencing."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import grpc
import pytest

from odradek.client.admin import Admin
from odradek.client.errors import ErrorCode, OdradekError
from odradek.deploy.local import DevCluster
from odradek.proto import controller_pb2, controller_pb2_grpc, raft_pb2, raft_pb2_grpc

from .conftest import start_cluster, wait_for

pytestmark = pytest.mark.integration


def controller_admin(cluster: DevCluster, node_id: int) -> Admin:
    """An admin client talking only to one controller (its own view of the metadata)."""
    return Admin(
        {"bootstrap.servers": f"127.0.0.1:{cluster.node(node_id).controller_port}", "request.timeout.ms": 3000}
    )


def test_three_controllers_elect_a_leader_in_their_first_election(tmp_path: Path) -> None:
    """Three controllers started together agree on one leader at once: pre-vote keeps a controller whose peers are
    not up yet from raising the epoch, and randomized timeouts keep candidates from splitting the vote round after
    round, so the leader comes out of the first election rounds. (How long an election takes is a figure for a
    benchmark: on a loaded machine the processes alone may take seconds to start.)"""
    cluster = DevCluster.create(tmp_path, controllers=3, brokers=0)
    start = time.monotonic()
    cluster.start_all()
    try:
        with Admin({"bootstrap.servers": cluster.controller_servers, "request.timeout.ms": 1000}) as admin:
            quorum = wait_for(lambda: (q := admin.describe_quorum()).leader_id >= 0 and q, 30, 0.05, "a leader")
            print(f"leader {quorum.leader_id} in epoch {quorum.leader_epoch} after {time.monotonic() - start:.2f}s")
        assert quorum.leader_id in (1, 2, 3) and 1 <= quorum.leader_epoch <= 3
    finally:
        cluster.stop_all(timeout=5)


def test_leader_kill_elects_a_new_leader_and_the_old_one_catches_up(tmp_path: Path) -> None:
    cluster = start_cluster(tmp_path)
    try:
        with Admin({"bootstrap.servers": cluster.admin_servers, "request.timeout.ms": 10000}) as admin:
            before = admin.describe_quorum()
            admin.create_topic("written-before-kill", 3, 3, {"retention.ms": "60000"})
            cluster.signal(before.leader_id, signal.SIGKILL)
            killed_at = time.monotonic()
            after = wait_for(
                lambda: (q := admin.describe_quorum()).leader_id not in (-1, before.leader_id) and q,
                10,
                0.05,
                "a new leader",
            )
            failover = time.monotonic() - killed_at
            assert failover < 5.0, f"new leader after {failover:.2f}s"
            assert after.leader_epoch > before.leader_epoch
            topic = admin.describe_topic("written-before-kill")
            assert len(topic.partitions) == 3 and topic.configs == {"retention.ms": "60000"}
            admin.create_topic("written-after-kill", 1, 3)

            cluster.start(before.leader_id)

            def caught_up():
                q = admin.describe_quorum()
                old = next(v for v in q.voters if v.node_id == before.leader_id)
                return q.leader_id == after.leader_id and old.log_end_offset >= q.high_watermark

            wait_for(caught_up, 20, 0.2, "the old leader to catch up as a follower")
        with controller_admin(cluster, before.leader_id) as old:
            assert {"written-before-kill", "written-after-kill"} <= set(old.list_topics())
    finally:
        cluster.stop_all(timeout=10)


def test_a_minority_cannot_commit_and_a_paused_leader_is_replaced(tmp_path: Path) -> None:
    cluster = start_cluster(tmp_path, brokers=1)
    try:
        with Admin({"bootstrap.servers": cluster.controller_servers, "request.timeout.ms": 10000}) as admin:
            leader = admin.describe_quorum().leader_id
        followers = [n for n in (1, 2, 3) if n != leader]
        for f in followers:
            cluster.signal(f, signal.SIGSTOP)
        try:
            with controller_admin(cluster, leader) as minority:
                with pytest.raises(OdradekError) as e:
                    minority.create_topic("minority-write", 1, 1)
                assert e.value.code in (
                    ErrorCode.REQUEST_TIMED_OUT,
                    ErrorCode.NOT_CONTROLLER,
                    ErrorCode.NETWORK_EXCEPTION,
                )
                assert "minority-write" not in minority.list_topics()
        finally:
            for f in followers:
                cluster.signal(f, signal.SIGCONT)

        with Admin({"bootstrap.servers": cluster.controller_servers, "request.timeout.ms": 10000}) as admin:
            wait_for(lambda: admin.describe_quorum().leader_id >= 0, 15, 0.2, "a leader after healing")
            before = admin.describe_quorum()
            cluster.signal(before.leader_id, signal.SIGSTOP)
            try:
                wait_for(
                    lambda: (
                        (q := admin.describe_quorum()).leader_id not in (-1, before.leader_id)
                        and q.leader_epoch > before.leader_epoch
                    ),
                    10,
                    0.1,
                    "a new leader while the old one is paused",
                )
            finally:
                cluster.signal(before.leader_id, signal.SIGCONT)
            new = admin.describe_quorum()
            admin.create_topic("after-pause", 1, 1)
        with controller_admin(cluster, before.leader_id) as resumed:
            # The resumed leader learns the new epoch and serves the new leader's metadata, not its own.
            wait_for(lambda: "after-pause" in resumed.list_topics(), 15, 0.2, "the resumed node to follow")
            q = resumed.describe_quorum()
            assert q.leader_id != before.leader_id and q.leader_epoch >= new.leader_epoch
    finally:
        cluster.stop_all(timeout=10)


def broker_state(admin: Admin, broker_id: int):
    return next(b for b in admin.describe_cluster().brokers if b.node_id == broker_id)


def test_silent_broker_is_fenced_within_session_timeout_and_unfenced_after_restart(
    cluster: DevCluster, admin: Admin
) -> None:
    broker = 4
    admin.create_topic("fencing", 3, 3)
    cluster.signal(broker, signal.SIGSTOP)
    stopped_at = time.monotonic()
    try:
        wait_for(lambda: broker_state(admin, broker).fenced, 10, 0.05, "the broker to be fenced")
        fenced_after = time.monotonic() - stopped_at
        assert fenced_after <= 3.0 + 1.0, f"fenced after {fenced_after:.2f}s"
        topic = admin.describe_topic("fencing")
        assert all(p.leader != broker and broker not in p.isr for p in topic.partitions)
    finally:
        cluster.signal(broker, signal.SIGCONT)
    wait_for(lambda: not broker_state(admin, broker).fenced, 10, 0.1, "the resumed broker to be unfenced")

    epoch = broker_state(admin, broker).epoch
    cluster.signal(broker, signal.SIGKILL)
    wait_for(lambda: broker_state(admin, broker).fenced, 10, 0.1, "the killed broker to be fenced")
    cluster.start(broker)
    restarted = wait_for(lambda: not (b := broker_state(admin, broker)).fenced and b, 20, 0.1, "unfencing")
    assert restarted.epoch > epoch  # a new incarnation registers anew


def test_bad_admin_requests_get_typed_errors_and_change_nothing(admin: Admin) -> None:
    admin.create_topic("existing", 1, 1)
    before = admin.describe_quorum().high_watermark
    cases = [
        (lambda: admin.create_topic("existing", 1, 1), ErrorCode.TOPIC_ALREADY_EXISTS),
        (lambda: admin.create_topic("no/slashes", 1, 1), ErrorCode.INVALID_TOPIC_EXCEPTION),
        (lambda: admin.create_topic("too-many-replicas", 1, 4), ErrorCode.INVALID_REPLICATION_FACTOR),
        (lambda: admin.create_topic("bad-config", 1, 1, {"retention.ms": "x"}), ErrorCode.INVALID_CONFIG),
        (lambda: admin.describe_topic("missing"), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        (lambda: admin.delete_topic("missing"), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    ]
    for call, code in cases:
        with pytest.raises(OdradekError) as e:
            call()
        assert e.value.code == code
    assert admin.describe_quorum().high_watermark == before
    assert not {"no/slashes", "too-many-replicas", "bad-config"} & set(admin.list_topics())


def test_stale_broker_epoch_and_non_voter_vote_are_rejected(cluster: DevCluster, admin: Admin) -> None:
    quorum = admin.describe_quorum()
    leader = cluster.node(quorum.leader_id)
    channel = grpc.insecure_channel(f"127.0.0.1:{leader.controller_port}")
    try:
        heartbeat = controller_pb2_grpc.ControllerStub(channel).BrokerHeartbeat(
            controller_pb2.BrokerHeartbeatRequest(broker_id=5, broker_epoch=0, current_metadata_offset=0), timeout=5
        )
        assert heartbeat.error == ErrorCode.STALE_BROKER_EPOCH
        vote = raft_pb2_grpc.RaftStub(channel).Vote(
            raft_pb2.VoteRequest(
                cluster_id=cluster.cluster_id,
                candidate_id=99,
                voter_id=leader.node_id,
                candidate_epoch=quorum.leader_epoch + 5,
                last_offset_epoch=quorum.leader_epoch + 5,
                last_offset=10**9,
            ),
            timeout=5,
        )
        assert vote.error == ErrorCode.INCONSISTENT_VOTER_SET and not vote.vote_granted
        stale = raft_pb2_grpc.RaftStub(channel).Fetch(
            raft_pb2.RaftFetchRequest(
                cluster_id=cluster.cluster_id,
                replica_id=99,
                leader_epoch=quorum.leader_epoch - 1,
                fetch_offset=0,
                last_fetched_epoch=0,
            ),
            timeout=5,
        )
        assert stale.error == ErrorCode.FENCED_LEADER_EPOCH and not stale.entries
        assert stale.leader_id == quorum.leader_id and stale.leader_epoch == quorum.leader_epoch
        foreign = raft_pb2_grpc.RaftStub(channel).Fetch(
            raft_pb2.RaftFetchRequest(cluster_id="another-cluster", replica_id=99, leader_epoch=quorum.leader_epoch),
            timeout=5,
        )
        assert foreign.error == ErrorCode.INCONSISTENT_CLUSTER_ID and not foreign.entries
    finally:
        channel.close()
    after = admin.describe_quorum()
    assert after.leader_id == quorum.leader_id and after.leader_epoch == quorum.leader_epoch
    assert not broker_state(admin, 5).fenced

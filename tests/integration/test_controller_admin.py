"""Controller-side replication admin on a real 3-controller, 3-broker cluster: ElectLeaders after a broker was
fenced and came back, AlterPartition epochs (INVALID_UPDATE_VERSION), and partition reassignment.

Only what the controller does itself is relied on: a fenced broker leaves every ISR, and this test plays the
partition leader to bring it back (AlterPartition), as the leader's replication would once it caught up.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator

import grpc
import pytest

from odradek.client.errors import ErrorCode
from odradek.deploy.local import DevCluster
from odradek.proto import admin_pb2 as apb
from odradek.proto import admin_pb2_grpc, controller_pb2_grpc
from odradek.proto import controller_pb2 as cpb

from .conftest import start_cluster, wait_for

pytestmark = pytest.mark.integration

TIMEOUT = 10


class Rpc:
    """Raw gRPC stubs: Admin through a broker (so writes are forwarded), Controller on the active controller."""

    def __init__(self, cluster: DevCluster) -> None:
        self.cluster = cluster
        self._channels: dict[int, grpc.Channel] = {}

    def _channel(self, port: int) -> grpc.Channel:
        if port not in self._channels:
            self._channels[port] = grpc.insecure_channel(f"127.0.0.1:{port}")
        return self._channels[port]

    def admin(self, node_id: int = 4) -> admin_pb2_grpc.AdminStub:
        node = self.cluster.node(node_id)
        return admin_pb2_grpc.AdminStub(self._channel(node.broker_port or node.controller_port))

    def active_controller(self) -> int:
        leader = self.admin(1).DescribeQuorum(apb.DescribeQuorumRequest(), timeout=TIMEOUT).leader_id
        assert leader > 0
        return leader

    def controller(self) -> controller_pb2_grpc.ControllerStub:
        port = self.cluster.node(self.active_controller()).controller_port
        return controller_pb2_grpc.ControllerStub(self._channel(port))

    def partition(self, topic: str, index: int) -> apb.PartitionDescription:
        """As the active controller sees it (it has every committed change)."""
        stub = self.admin(self.active_controller())
        [t] = stub.DescribeTopics(apb.DescribeTopicsRequest(names=[topic]), timeout=TIMEOUT).topics
        assert t.error == ErrorCode.NONE, t.error_message
        return next(p for p in t.partitions if p.partition == index)

    def broker(self, broker_id: int) -> apb.BrokerInfo:
        brokers = self.admin(self.active_controller()).DescribeCluster(apb.DescribeClusterRequest(), timeout=TIMEOUT)
        return next(b for b in brokers.brokers if b.node_id == broker_id)

    def elect(self, election_type: int, *partitions: tuple[str, int]) -> list[apb.ElectionResult]:
        refs = [apb.PartitionRef(topic=t, partition=p) for t, p in partitions]
        r = self.admin().ElectLeaders(apb.ElectLeadersRequest(election_type=election_type, partitions=refs), timeout=30)
        assert r.error == ErrorCode.NONE
        return list(r.results)

    def reassign(self, topic: str, index: int, replicas: list[int]) -> apb.ElectionResult:
        request = apb.AlterPartitionReassignmentsRequest(
            reassignments=[apb.Reassignment(topic=topic, partition=index, replicas=replicas)]
        )
        r = self.admin().AlterPartitionReassignments(request, timeout=30)
        assert r.error == ErrorCode.NONE
        return r.results[0]

    def alter_isr(self, topic: str, p: apb.PartitionDescription, new_isr: list[int], partition_epoch: int):
        """AlterPartition as the partition's leader would send it."""
        item = cpb.AlterPartitionItem(
            partition=p.partition, leader_epoch=p.leader_epoch, partition_epoch=partition_epoch, new_isr=new_isr
        )
        request = cpb.AlterPartitionRequest(
            broker_id=p.leader,
            broker_epoch=self.broker(p.leader).epoch,
            topics=[cpb.AlterPartitionTopic(name=topic, partitions=[item])],
        )
        r = self.controller().AlterPartition(request, timeout=TIMEOUT)
        assert r.error == ErrorCode.NONE
        return r.topics[0].partitions[0]

    def close(self) -> None:
        for channel in self._channels.values():
            channel.close()


@pytest.fixture(scope="module")
def rpc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rpc]:
    # No automatic rebalance: this test decides when leadership moves back.
    cluster = start_cluster(tmp_path_factory.mktemp("controller-admin"), **{"auto.leader.rebalance.enable": False})
    r = Rpc(cluster)
    yield r
    r.close()
    cluster.stop_all(timeout=10)


def test_preferred_election_after_a_fenced_broker_returns(rpc: Rpc) -> None:
    create = apb.CreateTopicsRequest(
        topics=[apb.CreatableTopic(name="elect", num_partitions=3, replication_factor=3)], timeout_ms=30000
    )
    assert rpc.admin().CreateTopics(create, timeout=30).topics[0].error == ErrorCode.NONE
    parts = [("elect", i) for i in range(3)]
    results = wait_for(lambda: rpc.elect(apb.PREFERRED, *parts), TIMEOUT, what="the topic on the active controller")
    assert [r.error for r in results] == [ErrorCode.ELECTION_NOT_NEEDED] * 3  # placement made them preferred
    [r] = rpc.elect(apb.UNCLEAN, ("elect", 0))
    assert r.error == ErrorCode.ELECTION_NOT_NEEDED
    [r] = rpc.elect(apb.PREFERRED, ("no-such-topic", 0))
    assert r.error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    before = rpc.partition("elect", 0)
    preferred = before.replicas[0]
    rpc.cluster.signal(preferred, signal.SIGSTOP)
    try:
        wait_for(lambda: rpc.broker(preferred).fenced, TIMEOUT, what="the stopped broker to be fenced")
        moved = rpc.partition("elect", 0)
        assert moved.leader not in (preferred, -1) and preferred not in moved.isr
        assert moved.leader_epoch == before.leader_epoch + 1
    finally:
        rpc.cluster.signal(preferred, signal.SIGCONT)
    wait_for(lambda: not rpc.broker(preferred).fenced, TIMEOUT, what="the resumed broker to be unfenced")

    p = rpc.partition("elect", 0)
    stale = rpc.alter_isr("elect", p, list(p.isr), p.partition_epoch - 1)
    assert stale.error == ErrorCode.INVALID_UPDATE_VERSION
    # The answer carries the current state; the leader may have re-expanded the ISR meanwhile (a newer epoch).
    now = rpc.partition("elect", 0)
    assert stale.leader == p.leader and p.partition_epoch <= stale.partition_epoch <= now.partition_epoch
    if preferred not in p.isr:  # (a replicating leader re-expands the ISR by itself once the broker catches up)
        [r] = rpc.elect(apb.PREFERRED, ("elect", 0))
        assert r.error in (ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE, ErrorCode.NONE)
        if r.error == ErrorCode.NONE:  # it rejoined in the meantime
            assert r.leader == preferred
        else:
            assert r.leader == p.leader

        def rejoin():
            p = rpc.partition("elect", 0)
            if preferred in p.isr:
                return True
            r = rpc.alter_isr("elect", p, [*p.isr, preferred], p.partition_epoch)
            assert r.error in (ErrorCode.NONE, ErrorCode.INVALID_UPDATE_VERSION), r
            assert r.error != ErrorCode.NONE or (preferred in r.isr and r.partition_epoch == p.partition_epoch + 1)
            return r.error == ErrorCode.NONE

        wait_for(rejoin, TIMEOUT, what="the resumed broker back in the ISR")

    p = rpc.partition("elect", 0)
    if p.leader != preferred:
        [r] = rpc.elect(apb.PREFERRED, ("elect", 0))
        assert (r.error, r.leader) == (ErrorCode.NONE, preferred)
        after = rpc.partition("elect", 0)
        assert after.leader == preferred and after.leader_epoch == p.leader_epoch + 1
    assert [r.error for r in rpc.elect(apb.PREFERRED, *parts)] == [ErrorCode.ELECTION_NOT_NEEDED] * 3


def test_reassignment_adds_then_cancels_or_shrinks_at_once(rpc: Rpc) -> None:
    create = apb.CreateTopicsRequest(
        topics=[apb.CreatableTopic(name="moving", num_partitions=1, replication_factor=2)], timeout_ms=30000
    )
    assert rpc.admin().CreateTopics(create, timeout=30).topics[0].error == ErrorCode.NONE
    original = list(wait_for(lambda: rpc.partition("moving", 0), TIMEOUT, what="the topic").replicas)
    spare = next(b for b in (4, 5, 6) if b not in original)

    bad = rpc.reassign("moving", 0, [original[1], 99])
    assert bad.error == ErrorCode.INVALID_REPLICA_ASSIGNMENT and "99" in bad.error_message
    target = [original[1], spare]
    assert rpc.reassign("moving", 0, target).error == ErrorCode.NONE
    p = rpc.partition("moving", 0)
    cancel = None
    if p.adding_replicas:  # (completes by itself only once brokers replicate and re-expand the ISR)
        assert list(p.replicas) == [*target, original[0]] and list(p.adding_replicas) == [spare]
        assert list(p.removing_replicas) == [original[0]] and not p.under_replicated
        cancel = rpc.reassign("moving", 0, []).error  # it may also have completed since the read
        assert cancel in (ErrorCode.NONE, ErrorCode.NO_REASSIGNMENT_IN_PROGRESS)
    if cancel == ErrorCode.NONE:
        p = rpc.partition("moving", 0)
        assert sorted(p.replicas) == sorted(original) and not p.adding_replicas and not p.removing_replicas
        assert rpc.reassign("moving", 0, []).error == ErrorCode.NO_REASSIGNMENT_IN_PROGRESS
        target = [p.replicas[1]]
    else:
        assert list(rpc.partition("moving", 0).replicas) == target
        target = [target[0]]

    r = rpc.reassign("moving", 0, target)  # a shrink has nothing to add: it completes at once
    p = rpc.partition("moving", 0)
    assert (r.error, r.leader) == (ErrorCode.NONE, target[0])
    assert list(p.replicas) == target and list(p.isr) == target and p.leader == target[0]

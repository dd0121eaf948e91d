"""The active controller's rebalance timer and the AlterPartition / ElectLeaders / reassignment services, on a
fake Raft driver that commits every proposal at once (no processes, no network)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from controller_images import brokers, build, epoch_of, partition, topic

from odradek.broker.topic_defaults import topic_defaults
from odradek.client.common.metadata_image import MetadataImage
from odradek.client.errors import ErrorCode
from odradek.controller.active import ActiveController
from odradek.controller.admin.grpc_adapter import AdminGrpcService
from odradek.controller.admin.service import NodeAdmin
from odradek.controller.admin.topics import topic_description
from odradek.controller.brokers import BrokerControl
from odradek.controller.metadata.state_machine import MetadataStateMachine, encode_batch
from odradek.controller.raft import LeaderAndEpoch, Role
from odradek.controller.raft.log import Entry
from odradek.controller.services import ControllerService
from odradek.proto import admin_pb2 as apb
from odradek.proto import controller_pb2 as cpb


class FakeDriver:
    """Just what ActiveController and the services use of RaftDriver: this node leads, proposals commit at once."""

    node_id = 1

    def __init__(self, sm: MetadataStateMachine) -> None:
        self.sm = sm
        self.node = SimpleNamespace(log=SimpleNamespace(end_offset=0), high_watermark=0, epoch=1)
        self.leader = LeaderAndEpoch(1, 1, Role.LEADER)

    async def propose_and_wait(self, data: list[bytes], timeout: float = 10.0) -> int:
        offset = self.node.log.end_offset
        entries = [Entry(offset + i, 1, d) for i, d in enumerate(data)]
        self.node.log.end_offset += len(data)
        self.node.high_watermark = self.node.log.end_offset
        self.sm.apply(entries)
        return offset


def controller_for(image: MetadataImage, **kw) -> tuple[ActiveController, FakeDriver]:
    sm = MetadataStateMachine("c1")
    driver = FakeDriver(sm)
    sm.apply([Entry(0, 1, encode_batch(image.to_records()))])
    driver.node.log.end_offset = driver.node.high_watermark = 1
    controller = ActiveController(driver, sm, BrokerControl("c1", 60_000, lambda _t: False), **kw)
    sm.leader_changed(driver.leader)
    assert controller.is_active
    return controller, driver


def imbalanced() -> MetadataImage:
    """Broker 1 prefers both partitions and leads neither."""
    return build(brokers(1, 2, 3), topic(), partition(0, (1, 2, 3), (2, 1)), partition(1, (1, 3, 2), (3, 1)))


def leaders(controller: ActiveController) -> list[int]:
    return [controller.image.partition("t", i).leader for i in (0, 1)]


async def test_the_rebalance_timer_elects_preferred_leaders() -> None:
    controller, _ = controller_for(imbalanced(), rebalance_interval_s=0.02, imbalance_percentage=10)
    controller.start()
    try:
        for _ in range(100):
            if leaders(controller) == [1, 1]:
                break
            await asyncio.sleep(0.02)
        assert leaders(controller) == [1, 1]
    finally:
        await controller.stop()


async def test_no_rebalance_when_disabled() -> None:
    controller, _ = controller_for(imbalanced(), rebalance_interval_s=None)
    controller.start()
    await asyncio.sleep(0.2)
    await controller.stop()
    assert leaders(controller) == [2, 3]


def alter(broker: int, partition_epoch: int, new_isr: list[int], leader_epoch: int = 0) -> cpb.AlterPartitionRequest:
    item = cpb.AlterPartitionItem(
        partition=0, leader_epoch=leader_epoch, partition_epoch=partition_epoch, new_isr=new_isr
    )
    return cpb.AlterPartitionRequest(
        broker_id=broker, broker_epoch=epoch_of(broker), topics=[cpb.AlterPartitionTopic(name="t", partitions=[item])]
    )


async def test_alter_partition_service_commits_and_answers_the_new_state() -> None:
    controller, _ = controller_for(build(brokers(1, 2, 3), topic(), partition(0, (1, 2, 3), (1, 2))))
    service = ControllerService(controller)
    stale = await service.AlterPartition(alter(1, 5, [1, 2, 3]), None)
    assert stale.error == ErrorCode.NONE
    assert stale.topics[0].partitions[0].error == ErrorCode.INVALID_UPDATE_VERSION
    ok = await service.AlterPartition(alter(1, 0, [1, 2, 3]), None)
    [r] = ok.topics[0].partitions
    assert (r.error, r.leader, r.leader_epoch, list(r.isr), r.partition_epoch) == (ErrorCode.NONE, 1, 0, [1, 2, 3], 1)
    assert controller.image.partition("t", 0).isr == (1, 2, 3)
    wrong_epoch = cpb.AlterPartitionRequest(broker_id=1, broker_epoch=3, topics=alter(1, 1, [1]).topics)
    assert (await service.AlterPartition(wrong_epoch, None)).error == ErrorCode.STALE_BROKER_EPOCH


def admin_for(controller: ActiveController | None, driver: FakeDriver) -> AdminGrpcService:
    """The Admin service over gRPC's messages (its adapter over the node's typed service)."""
    return AdminGrpcService(NodeAdmin(driver.sm, driver, {}, {}, controller, topic_defaults=topic_defaults()))


async def test_elect_leaders_service() -> None:
    controller, driver = controller_for(imbalanced())
    admin = admin_for(controller, driver)
    request = apb.ElectLeadersRequest(
        election_type=apb.PREFERRED, partitions=[apb.PartitionRef(topic="t", partition=0)]
    )
    r = await admin.ElectLeaders(request, None)
    assert r.error == ErrorCode.NONE
    assert [(x.topic, x.partition, x.error, x.leader) for x in r.results] == [("t", 0, ErrorCode.NONE, 1)]
    everything = await admin.ElectLeaders(apb.ElectLeadersRequest(election_type=apb.PREFERRED), None)
    assert [(x.partition, x.error) for x in everything.results] == [(1, ErrorCode.NONE)]
    assert leaders(controller) == [1, 1]
    r = await admin.ElectLeaders(apb.ElectLeadersRequest(election_type=apb.UNCLEAN), None)
    assert r.error == ErrorCode.NONE and list(r.results) == []  # every partition has a leader: nothing to report


async def test_reassignment_service_and_describe_during_it() -> None:
    controller, driver = controller_for(build(brokers(1, 2, 3, 4), topic(), partition(0, (1, 2, 3))))
    admin = admin_for(controller, driver)
    start = apb.AlterPartitionReassignmentsRequest(
        reassignments=[apb.Reassignment(topic="t", partition=0, replicas=[2, 3, 4])]
    )
    r = await admin.AlterPartitionReassignments(start, None)
    assert [(x.error, x.leader) for x in r.results] == [(ErrorCode.NONE, 1)]
    [d] = topic_description(controller.image, "t").partitions
    assert (list(d.replicas), list(d.adding_replicas), list(d.removing_replicas)) == ([2, 3, 4, 1], [4], [1])
    assert not d.under_replicated  # the replica being added is catching up by design
    cancel = apb.AlterPartitionReassignmentsRequest(reassignments=[apb.Reassignment(topic="t", partition=0)])
    r = await admin.AlterPartitionReassignments(cancel, None)
    assert [x.error for x in r.results] == [ErrorCode.NONE]
    r = await admin.AlterPartitionReassignments(cancel, None)
    assert [x.error for x in r.results] == [ErrorCode.NO_REASSIGNMENT_IN_PROGRESS]
    assert controller.image.partition("t", 0).replicas == (2, 3, 1)


async def test_a_node_without_a_known_controller_answers_not_controller() -> None:
    _, driver = controller_for(imbalanced())
    driver.leader = LeaderAndEpoch(None, 2, Role.UNATTACHED)
    admin = admin_for(None, driver)
    r = await admin.ElectLeaders(apb.ElectLeadersRequest(), None)
    assert r.error == ErrorCode.NOT_CONTROLLER
    r = await admin.AlterPartitionReassignments(apb.AlterPartitionReassignmentsRequest(), None)
    assert r.error == ErrorCode.NOT_CONTROLLER
    await admin.service.close()  # type: ignore[attr-defined]

"""Read-your-writes for Admin writes: the active controller names the metadata offset that covers a write in the
answer's trailing metadata, and a node that forwarded the write answers once its own image has applied that offset.

The controller runs on test_active's fake Raft driver (proposals commit at once), served over a real in-process
gRPC server; the forwarding broker's image advances only when the test replays the controller's entries into it.
"""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace

import grpc
import pytest
from controller_images import brokers, build
from test_active import FakeDriver, controller_for

from odradek.broker.topic_defaults import topic_defaults
from odradek.client.common.call_context import request_context_of
from odradek.client.common.request_context import RequestContext
from odradek.client.errors import ErrorCode
from odradek.controller.admin.forwarding import METADATA_OFFSET_KEY, READ_YOUR_WRITES_WAIT_S, wait_budget
from odradek.controller.admin.grpc_adapter import AdminGrpcService
from odradek.controller.admin.service import NodeAdmin
from odradek.controller.metadata.state_machine import MetadataStateMachine
from odradek.controller.raft import LeaderAndEpoch, Role
from odradek.controller.raft.log import Entry
from odradek.proto import admin_pb2 as apb
from odradek.proto import admin_pb2_grpc

CONTROLLER = 1


class Context:
    """The part of a gRPC servicer context the Admin service uses for read-your-writes."""

    def __init__(self, remaining: float | None = None) -> None:
        self.remaining = remaining
        self.trailing: tuple[tuple[str, str], ...] = ()

    def set_trailing_metadata(self, metadata: tuple[tuple[str, str], ...]) -> None:
        self.trailing = metadata

    def time_remaining(self) -> float | None:
        return self.remaining


class RecordingDriver(FakeDriver):
    """Keeps what it commits, for a broker's state machine to replay when the test says so."""

    def __init__(self, sm: MetadataStateMachine) -> None:
        super().__init__(sm)
        self.committed: list[Entry] = []

    async def propose_and_wait(self, data: list[bytes], timeout: float = 10.0) -> int:
        offset = await super().propose_and_wait(data, timeout)
        self.committed.extend(Entry(offset + i, 1, d) for i, d in enumerate(data))
        return offset


def acl(name: str) -> apb.AclBinding:
    return apb.AclBinding(
        resource_type=apb.ACL_RESOURCE_TYPE_TOPIC,
        resource_name=name,
        pattern_type=apb.ACL_PATTERN_TYPE_LITERAL,
        principal="User:alice",
        host="*",
        operation=apb.ACL_OPERATION_READ,
        permission_type=apb.ACL_PERMISSION_TYPE_ALLOW,
    )


def create(name: str) -> apb.CreateAclsRequest:
    return apb.CreateAclsRequest(creations=[acl(name)])


def describe(name: str) -> apb.DescribeAclsRequest:
    return apb.DescribeAclsRequest(filter=apb.AclBindingFilter(resource_name=name))


@pytest.fixture
def controller() -> tuple[AdminGrpcService, RecordingDriver]:
    """The active controller's Admin, its log holding one entry (offset 0), on a driver that keeps its commits."""
    active, fake = controller_for(build(brokers(2)))
    driver = RecordingDriver(fake.sm)
    driver.node = fake.node
    active.driver = driver  # type: ignore[assignment]
    admin = NodeAdmin(fake.sm, driver, {}, {}, active, topic_defaults=topic_defaults())  # type: ignore[arg-type]
    return AdminGrpcService(admin), driver


class QuorumOnly(admin_pb2_grpc.AdminServicer):
    """An active controller that answers DescribeQuorum, a read: its answer names no offset."""

    async def DescribeQuorum(self, request: apb.DescribeQuorumRequest, context: object) -> apb.DescribeQuorumResponse:
        return apb.DescribeQuorumResponse(leader_id=CONTROLLER)


async def serve(admin: admin_pb2_grpc.AdminServicer) -> tuple[grpc.aio.Server, str]:
    server = grpc.aio.server()
    admin_pb2_grpc.add_AdminServicer_to_server(admin, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    return server, f"127.0.0.1:{port}"


def broker_of(address: str) -> AdminGrpcService:
    """A broker's Admin (no controller here) whose image has applied the controller's first entry only."""
    sm = MetadataStateMachine("c1")
    sm.apply([Entry(0, 1, b"")])
    sm.leader_changed(LeaderAndEpoch(CONTROLLER, 1, Role.FOLLOWER))
    driver = SimpleNamespace(node_id=2, leader=sm.leader)
    return AdminGrpcService(NodeAdmin(sm, driver, {CONTROLLER: address}, {}, None, topic_defaults=topic_defaults()))  # type: ignore[arg-type]


async def test_wait_for_offset_returns_once_the_image_has_applied_it() -> None:
    sm = MetadataStateMachine("c1")
    waiting = asyncio.ensure_future(sm.wait_for_offset(1, 5))
    await asyncio.sleep(0.01)
    assert not waiting.done()
    sm.apply([Entry(0, 1, b"")])
    await asyncio.sleep(0.01)
    assert not waiting.done()
    sm.apply([Entry(1, 1, b"")])
    assert await asyncio.wait_for(waiting, 1) is True
    assert await sm.wait_for_offset(0, 0) is True  # applied already: no wait at all
    assert await sm.wait_for_offset(2, 0.01) is False
    assert sm._offset_waiters == []


async def test_the_active_controller_names_the_committed_offset_of_each_write(
    controller: tuple[AdminGrpcService, RecordingDriver],
) -> None:
    admin, driver = controller
    context = Context()
    assert [r.error for r in (await admin.CreateAcls(create("a"), context)).results] == [ErrorCode.NONE]
    assert context.trailing == ((METADATA_OFFSET_KEY, "1"),)
    assert admin.service.sm.image.offset == driver.node.high_watermark - 1 == 1  # type: ignore[attr-defined]
    again = Context()  # nothing new to commit: the answer still covers everything committed before it
    assert [r.error for r in (await admin.CreateAcls(create("a"), again)).results] == [ErrorCode.NONE]
    assert again.trailing == ((METADATA_OFFSET_KEY, "1"),)
    read = Context()
    await admin.DescribeAcls(describe("a"), read)
    assert read.trailing == ()


async def test_a_broker_answers_a_forwarded_write_once_its_image_has_it(
    controller: tuple[AdminGrpcService, RecordingDriver],
) -> None:
    active, driver = controller
    server, address = await serve(active)
    broker = broker_of(address)
    try:
        context = Context(remaining=30)
        answer = asyncio.ensure_future(broker.CreateAcls(create("a"), context))
        while not driver.committed:  # the controller committed it at offset 1
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.05)
        assert not answer.done()  # the broker's image is still at offset 0
        broker.service.sm.apply(driver.committed)  # type: ignore[attr-defined]
        assert [r.error for r in (await asyncio.wait_for(answer, 5)).results] == [ErrorCode.NONE]
        assert [b.resource_name for b in (await broker.DescribeAcls(describe("a"), None)).bindings] == ["a"]
        assert context.trailing == ((METADATA_OFFSET_KEY, "1"),)  # for a node that forwarded to this one
    finally:
        await broker.service.close()  # type: ignore[attr-defined]
        await server.stop(None)


async def test_a_broker_whose_image_lags_answers_within_the_callers_time() -> None:
    """The write is done: past half the caller's remaining time the broker answers without it in its image."""
    active, driver = controller_for(build(brokers(2)))
    server, address = await serve(
        AdminGrpcService(NodeAdmin(driver.sm, driver, {}, {}, active, topic_defaults=topic_defaults()))
    )
    broker = broker_of(address)
    try:
        created = await asyncio.wait_for(broker.CreateAcls(create("a"), Context(remaining=0.2)), 2)
        assert [r.error for r in created.results] == [ErrorCode.NONE]
        assert list((await broker.DescribeAcls(describe("a"), None)).bindings) == []
    finally:
        await broker.service.close()  # type: ignore[attr-defined]
        await server.stop(None)


async def test_a_forwarded_read_waits_for_nothing() -> None:
    server, address = await serve(QuorumOnly())
    broker = broker_of(address)
    try:
        context = Context()
        quorum = await asyncio.wait_for(broker.DescribeQuorum(apb.DescribeQuorumRequest(), context), 2)
        assert (quorum.error, quorum.leader_id, context.trailing) == (ErrorCode.NONE, CONTROLLER, ())
    finally:
        await broker.service.close()  # type: ignore[attr-defined]
        await server.stop(None)


def test_the_wait_is_bounded_by_the_callers_deadline() -> None:
    """A gRPC call's deadline reaches the service in its RequestContext, and bounds the read-your-writes wait."""
    assert wait_budget(request_context_of(None)) == READ_YOUR_WRITES_WAIT_S  # an in-process caller (the HTTP API)
    assert wait_budget(request_context_of(Context(remaining=None))) == READ_YOUR_WRITES_WAIT_S  # no deadline
    assert wait_budget(request_context_of(Context(remaining=60))) == READ_YOUR_WRITES_WAIT_S
    assert 0.49 < wait_budget(request_context_of(Context(remaining=1))) <= 0.5
    assert wait_budget(RequestContext(deadline=time.monotonic() - 1)) == 0  # past its deadline: no wait

"""The per-API ACL matrix: each API refused without the ACL Kafka's check for it needs (with Kafka's error code and
nothing written), and allowed with it; deny beating allow across literal, prefixed and wildcard patterns; implied
Describe; super users; allow.everyone.if.no.acl.found; audit lines for denials; the controller listener's
inter-node APIs gated by ClusterAction.

A real node runs in-process (controller and broker) with the authorizer on; the node itself and the test's admin
connect in plaintext as ``User:ANONYMOUS``, a super user here. Requests as other principals go through the node's
own Kafka dispatcher on a connection whose SASL session names the principal (SASL itself is tested elsewhere), so
every check runs in the real handlers and services, with the ACLs written through the metadata log.
"""

from __future__ import annotations

import asyncio
import logging
import struct
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from kafka.protocol.admin.acl import CreateAclsRequest, DescribeAclsRequest
from kafka.protocol.admin.groups import DeleteGroupsRequest, DescribeGroupsRequest, ListGroupsRequest
from kafka.protocol.admin.topics import (
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteRecordsRequest,
    DeleteTopicsRequest,
)
from kafka.protocol.consumer.fetch import FetchRequest
from kafka.protocol.consumer.group import JoinGroupRequest, OffsetCommitRequest, OffsetFetchRequest
from kafka.protocol.consumer.offsets import ListOffsetsRequest
from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest
from kafka.protocol.metadata.metadata import MetadataRequest
from kafka.protocol.producer.produce import ProduceRequest
from kafka.protocol.producer.transaction import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    EndTxnRequest,
    InitProducerIdRequest,
)

from odradek.broker.config import ConfigError, NodeConfig
from odradek.broker.kafka.dispatch import KafkaDispatcher
from odradek.broker.kafka.wire import ConnectionInfo
from odradek.broker.node import Node
from odradek.broker.storage import format_storage
from odradek.client.acls import AclBinding, AclBindingFilter
from odradek.client.admin import AsyncAdmin
from odradek.client.common.file_slice import FileSlice
from odradek.client.errors import ErrorCode
from odradek.client.record.builder import encode_batch
from odradek.deploy.process import free_port
from odradek.proto import controller_pb2, controller_pb2_grpc

ALICE = "User:alice"
CLIENT_ID = b"matrix"


async def start_node(tmp_path: Path, registered: bool = True, **extra: object) -> Node:
    controller, broker, kafka = free_port(), free_port(), free_port()
    config = NodeConfig(
        {
            "process.roles": "broker,controller",
            "node.id": 1,
            "controller.quorum.voters": f"1@127.0.0.1:{controller}",
            "listeners": f"PLAINTEXT://127.0.0.1:{broker},CONTROLLER://127.0.0.1:{controller},"
            f"KAFKA://127.0.0.1:{kafka}",
            "log.dirs": str(tmp_path / "data"),
            "authorizer.class.name": "odradek",
            "super.users": "User:ANONYMOUS;User:root",
            **extra,
        }
    )
    format_storage(config, "authz-test")
    node = Node(config)
    await node.start()
    if not registered:
        return node
    try:
        async with asyncio.timeout(20):
            await node.broker.lifecycle.registered.wait()  # type: ignore[union-attr]
            while (b := node.sm.image.brokers.get(1)) is None or b.fenced:  # unfenced: topics can be placed
                await asyncio.sleep(0.02)
    except BaseException:
        await node.stop()
        raise
    return node


@pytest.fixture
async def node(tmp_path: Path) -> AsyncIterator[Node]:
    n = await start_node(tmp_path)
    try:
        yield n
    finally:
        await n.stop()


def admin(node: Node) -> AsyncAdmin:
    return AsyncAdmin({"bootstrap.servers": str(node.config.broker_listener), "request.timeout.ms": 20_000})


async def grant(node: Node, *bindings: AclBinding) -> None:
    """Write ACLs through the metadata log and wait until this node's authorizer has them."""
    before = len(node.sm.image.acls)
    async with admin(node) as a:
        await a.create_acls(bindings)
    async with asyncio.timeout(10):
        while len(node.sm.image.acls) < before + len(bindings):
            await asyncio.sleep(0.02)


async def revoke_all(node: Node) -> None:
    async with admin(node) as a:
        await a.delete_acls([AclBindingFilter()])
    async with asyncio.timeout(10):
        while node.sm.image.acls:
            await asyncio.sleep(0.02)


def allow(resource_type: str, name: str, operation: str, **kw: str) -> AclBinding:
    principal = kw.pop("principal", ALICE)
    return AclBinding(resource_type=resource_type, resource_name=name, principal=principal, operation=operation, **kw)


async def new_topic(node: Node, partitions: int = 1) -> str:
    topic = f"t-{uuid.uuid4().hex[:8]}"
    async with admin(node) as a:
        await a.create_topic(topic, partitions, 1)
    async with asyncio.timeout(10):
        while (
            node.broker.replicas.partitions.get((topic, 0)) is None
            or not node.broker.replicas.partitions[  # type: ignore[union-attr]
                (topic, 0)
            ].is_leader
        ):
            await asyncio.sleep(0.02)
    return topic


def end_offset(node: Node, topic: str) -> int:
    return node.broker.replicas.partitions[(topic, 0)].log.log_end_offset  # type: ignore[union-attr]


class Session:
    """The SASL session of an authenticated connection, as the dispatcher reads it."""

    def __init__(self, principal: str) -> None:
        self.principal = principal
        self.authenticated = True
        self.close_reason = None

    def check(self, key: int, name: str) -> None:
        pass


async def call(node: Node, request: Any, version: int, principal: str = ALICE) -> Any:
    """``request`` (kafka-python) through the node's Kafka dispatcher as ``principal``: the decoded response."""
    assert node.kafka is not None
    dispatcher = node.kafka.dispatch
    assert isinstance(dispatcher, KafkaDispatcher)
    key = int(request.API_KEY)
    found = dispatcher.registry.get(key)
    assert found is not None
    spec = found[0]
    header = struct.pack(">hhih", key, version, 7, len(CLIENT_ID)) + CLIENT_ID
    if spec.flexible(version):
        header += b"\x00"
    connection = ConnectionInfo(1, "KAFKA", "127.0.0.1", 50000)
    connection.state.sasl = Session(principal)  # type: ignore[assignment]
    response = await dispatcher(connection, memoryview(header + request.encode(version=version)))
    assert response is not None
    data = b"".join(c.read() if isinstance(c, FileSlice) else bytes(c) for c in response.chunks)
    body = data[4 + spec.response_header_version(version) :]
    response_cls = type(request).__name__.removesuffix("Request") + "Response"
    module = __import__(type(request).__module__, fromlist=[response_cls])
    return getattr(module, response_cls).decode(body, version=version)


async def call_until_coordinated(node: Node, request: Any, version: int) -> Any:
    """``call``, again while the coordinator is still loading (its internal topic is created at first use)."""
    async with asyncio.timeout(20):
        while True:
            response = await call(node, request, version)
            if response.error_code not in (ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS):
                return response
            await asyncio.sleep(0.1)


async def find_coordinator(node: Node, group: str) -> None:
    async with asyncio.timeout(20):
        while (await call(node, FindCoordinatorRequest(key_type=0, coordinator_keys=[group]), 4)).coordinators[
            0
        ].error_code != ErrorCode.NONE:
            await asyncio.sleep(0.1)


def produce(topic: str, transactional_id: str | None = None) -> Any:
    topic_data, partition_data = ProduceRequest.TopicProduceData, ProduceRequest.TopicProduceData.PartitionProduceData
    return ProduceRequest(
        transactional_id=transactional_id,
        acks=1,
        timeout_ms=5000,
        topic_data=[topic_data(name=topic, partition_data=[partition_data(index=0, records=encode_batch([b"x"]))])],
    )


def produce_error(response: Any) -> int:
    return response.responses[0].partition_responses[0].error_code


def fetch(topic: str, replica_id: int = -1) -> Any:
    t, p = FetchRequest.FetchTopic, FetchRequest.FetchTopic.FetchPartition
    return FetchRequest(
        replica_id=replica_id,
        max_wait_ms=0,
        min_bytes=0,
        max_bytes=1 << 20,
        isolation_level=0,
        topics=[t(topic=topic, partitions=[p(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])],
    )


# ---- data plane ----


async def test_produce_needs_topic_write_and_writes_nothing_without_it(node: Node, caplog: Any) -> None:
    topic = await new_topic(node)
    caplog.set_level(logging.INFO, logger="odradek.audit")
    assert produce_error(await call(node, produce(topic), 7)) == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert end_offset(node, topic) == 0
    assert any("denied User:alice from 127.0.0.1: Write on Topic:" + topic in r.getMessage() for r in caplog.records), (
        "the denial is audited"
    )
    await grant(node, allow("TOPIC", topic, "WRITE"))
    assert produce_error(await call(node, produce(topic), 7)) == ErrorCode.NONE
    assert end_offset(node, topic) == 1


async def test_a_transactional_produce_needs_transactional_id_write(node: Node) -> None:
    topic = await new_topic(node)
    await grant(node, allow("TOPIC", topic, "WRITE"))
    response = await call(node, produce(topic, transactional_id="tx-a"), 7)
    assert produce_error(response) == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert end_offset(node, topic) == 0


async def test_fetch_needs_topic_read_and_a_replica_fetch_cluster_action(node: Node) -> None:
    topic = await new_topic(node)
    await grant(node, allow("TOPIC", topic, "WRITE"))
    await call(node, produce(topic), 7)
    denied = await call(node, fetch(topic), 12)
    assert denied.responses[0].partitions[0].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert not denied.responses[0].partitions[0].records
    await grant(node, allow("TOPIC", topic, "READ"))
    allowed = await call(node, fetch(topic), 12)
    assert allowed.responses[0].partitions[0].error_code == ErrorCode.NONE
    assert allowed.responses[0].partitions[0].records
    replica = fetch(topic, replica_id=1)
    replica.replica_state = FetchRequest.ReplicaState(replica_id=1, replica_epoch=1)
    replica.replica_id = -1
    as_replica = await call(node, replica, 15)
    assert as_replica.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert not as_replica.responses


async def test_list_offsets_and_metadata_need_describe_which_read_implies(node: Node) -> None:
    topic, other = await new_topic(node), await new_topic(node)
    t, p = ListOffsetsRequest.ListOffsetsTopic, ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition
    request = ListOffsetsRequest(
        replica_id=-1, isolation_level=0, topics=[t(name=topic, partitions=[p(partition_index=0, timestamp=-1)])]
    )
    denied = await call(node, request, 5)
    assert denied.topics[0].partitions[0].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    named = await call(node, MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)]), 8)
    assert named.topics[0].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    await grant(node, allow("TOPIC", topic, "READ"))  # READ implies DESCRIBE
    allowed = await call(node, request, 5)
    assert allowed.topics[0].partitions[0].error_code == ErrorCode.NONE
    listing = await call(node, MetadataRequest(topics=None), 8)
    names = {t.name for t in listing.topics}
    assert topic in names and other not in names  # every topic: only those the caller may describe


async def test_delete_records_needs_topic_delete(node: Node) -> None:
    topic = await new_topic(node)
    await grant(node, allow("TOPIC", topic, "WRITE"))
    await call(node, produce(topic), 7)
    t, p = DeleteRecordsRequest.DeleteRecordsTopic, DeleteRecordsRequest.DeleteRecordsTopic.DeleteRecordsPartition
    request = DeleteRecordsRequest(topics=[t(name=topic, partitions=[p(partition_index=0, offset=1)])], timeout_ms=5000)
    denied = await call(node, request, 2)
    assert denied.topics[0].partitions[0].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert node.broker.replicas.partitions[(topic, 0)].log.log_start_offset == 0  # type: ignore[union-attr]
    await grant(node, allow("TOPIC", topic, "DELETE"))
    allowed = await call(node, request, 2)
    assert allowed.topics[0].partitions[0].error_code == ErrorCode.NONE


async def test_init_producer_id_idempotent_needs_idempotent_write_or_some_topic_write(node: Node) -> None:
    request = InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=-1)
    assert (await call(node, request, 4)).error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    await grant(node, allow("TOPIC", "orders-", "WRITE", pattern_type="PREFIXED"))  # KIP-679: Write on some topic
    answer = await call(node, request, 4)
    assert answer.error_code == ErrorCode.NONE and answer.producer_id >= 0
    await revoke_all(node)
    await grant(node, allow("CLUSTER", "kafka-cluster", "IDEMPOTENT_WRITE"))
    assert (await call(node, request, 4)).error_code == ErrorCode.NONE


async def test_transaction_apis_need_transactional_id_write(node: Node) -> None:
    init = InitProducerIdRequest(transactional_id="tx-b", transaction_timeout_ms=10_000)
    assert (await call(node, init, 4)).error_code == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    topic = await new_topic(node)
    add = AddPartitionsToTxnRequest(
        v3_and_below_transactional_id="tx-b",
        v3_and_below_producer_id=1,
        v3_and_below_producer_epoch=0,
        v3_and_below_topics=[AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name=topic, partitions=[0])],
    )
    added = await call(node, add, 3)
    assert added.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == (
        ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    )
    offsets = AddOffsetsToTxnRequest(transactional_id="tx-b", producer_id=1, producer_epoch=0, group_id="g")
    assert (await call(node, offsets, 3)).error_code == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    end = EndTxnRequest(transactional_id="tx-b", producer_id=1, producer_epoch=0, committed=True)
    assert (await call(node, end, 3)).error_code == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    await grant(node, allow("TRANSACTIONAL_ID", "tx-b", "WRITE"))
    assert (await call_until_coordinated(node, init, 4)).error_code == ErrorCode.NONE
    # With the transactional id but without Write on the topic, nothing is added to the transaction.
    added = await call(node, add, 3)
    assert added.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == (
        ErrorCode.TOPIC_AUTHORIZATION_FAILED
    )
    assert (await call(node, offsets, 3)).error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED


# ---- groups ----


async def test_find_coordinator_needs_describe_on_the_group_or_transactional_id(node: Node) -> None:
    group = await call(node, FindCoordinatorRequest(key_type=0, coordinator_keys=["g1"]), 4)
    assert group.coordinators[0].error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
    txn = await call(node, FindCoordinatorRequest(key_type=1, coordinator_keys=["tx-c"]), 4)
    assert txn.coordinators[0].error_code == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    await grant(node, allow("GROUP", "g1", "READ"), allow("TRANSACTIONAL_ID", "tx-c", "DESCRIBE"))
    group = await call(node, FindCoordinatorRequest(key_type=0, coordinator_keys=["g1"]), 4)
    txn = await call(node, FindCoordinatorRequest(key_type=1, coordinator_keys=["tx-c"]), 4)
    assert group.coordinators[0].error_code != ErrorCode.GROUP_AUTHORIZATION_FAILED
    assert txn.coordinators[0].error_code != ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


def join(group: str) -> Any:
    return JoinGroupRequest(
        group_id=group,
        session_timeout_ms=10_000,
        rebalance_timeout_ms=10_000,
        member_id="",
        protocol_type="consumer",
        protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"")],
    )


def commit(group: str, topic: str) -> Any:
    t, p = (
        OffsetCommitRequest.OffsetCommitRequestTopic,
        OffsetCommitRequest.OffsetCommitRequestTopic.OffsetCommitRequestPartition,
    )
    return OffsetCommitRequest(
        group_id=group,
        generation_id_or_member_epoch=-1,
        member_id="",
        topics=[t(name=topic, partitions=[p(partition_index=0, committed_offset=5)])],
    )


async def test_joining_and_committing_need_group_read_and_topic_read(node: Node) -> None:
    topic = await new_topic(node)
    assert (await call(node, join("g2"), 5)).error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
    refused = await call(node, commit("g2", topic), 8)
    assert refused.topics[0].partitions[0].error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
    await grant(node, allow("GROUP", "g2", "READ"))
    refused = await call(node, commit("g2", topic), 8)
    assert refused.topics[0].partitions[0].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    await find_coordinator(node, "g2")  # as a client does first: the offsets topic is created at first use
    fetched = await call_until_coordinated(node, OffsetFetchRequest(group_id="g2", topics=None), 7)
    assert fetched.error_code == ErrorCode.NONE and not fetched.topics  # nothing was committed
    await grant(node, allow("TOPIC", topic, "READ"))
    assert (await call(node, commit("g2", topic), 8)).topics[0].partitions[0].error_code == ErrorCode.NONE
    fetched = await call(node, OffsetFetchRequest(group_id="g2", topics=None), 7)
    assert [(t.name, t.partitions[0].committed_offset) for t in fetched.topics] == [(topic, 5)]
    joined = await call(node, join("g2"), 5)
    assert joined.error_code != ErrorCode.GROUP_AUTHORIZATION_FAILED


async def test_offset_fetch_describe_and_delete_groups_need_their_group_acls(node: Node) -> None:
    denied = await call(node, OffsetFetchRequest(group_id="g3", topics=None), 7)
    assert denied.error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
    described = await call(node, DescribeGroupsRequest(groups=["g3"]), 5)
    assert described.groups[0].error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
    deleted = await call(node, DeleteGroupsRequest(groups_names=["g3"]), 2)
    assert deleted.results[0].error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
    # A group the caller may not describe is left out of ListGroups.
    topic = await new_topic(node)
    async with admin(node) as a:  # the super user commits for two groups
        from odradek.client.structs import TopicPartition

        for group in ("g3", "g4"):
            await a.alter_group_offsets(group, {TopicPartition(topic, 0): 1})
    await grant(node, allow("GROUP", "g3", "DESCRIBE"))
    listed = await call(node, ListGroupsRequest(), 4)
    assert [g.group_id for g in listed.groups] == ["g3"]
    assert (await call(node, OffsetFetchRequest(group_id="g3", topics=None), 7)).error_code == ErrorCode.NONE


# ---- admin ----


async def test_create_topics_needs_cluster_create_or_topic_create_and_creates_nothing_without(node: Node) -> None:
    t = CreateTopicsRequest.CreatableTopic
    request = CreateTopicsRequest(
        topics=[t(name="mine-1", num_partitions=1, replication_factor=1, assignments=[], configs=[])], timeout_ms=5000
    )
    denied = await call(node, request, 5)
    assert denied.topics[0].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert node.sm.image.topic("mine-1") is None
    await grant(node, allow("TOPIC", "mine-", "CREATE", pattern_type="PREFIXED"))
    assert (await call(node, request, 5)).topics[0].error_code == ErrorCode.NONE
    other = CreateTopicsRequest(
        topics=[t(name="other-1", num_partitions=1, replication_factor=1, assignments=[], configs=[])], timeout_ms=5000
    )
    assert (await call(node, other, 5)).topics[0].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    await grant(node, allow("CLUSTER", "kafka-cluster", "CREATE"))
    assert (await call(node, other, 5)).topics[0].error_code == ErrorCode.NONE


async def test_metadata_creates_a_missing_topic_only_with_describe_and_create_on_the_cluster_or_the_topic(
    node: Node,
) -> None:
    """auto.create.topics.enable is on by default: a Metadata request naming a missing topic creates it as Kafka
    does, when the caller may describe it and create it (cluster Create, or Create on the topic); otherwise
    TOPIC_AUTHORIZATION_FAILED and nothing is created."""

    def ask(name: str) -> MetadataRequest:
        return MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=name)], allow_auto_topic_creation=True)

    async def error(name: str) -> int:
        return (await call(node, ask(name), 12)).topics[0].error_code

    async def created(name: str) -> bool:
        async with asyncio.timeout(10):
            while node.sm.image.topic(name) is None:
                await asyncio.sleep(0.02)
        return True

    assert await error("auto-1") == ErrorCode.TOPIC_AUTHORIZATION_FAILED  # no Describe: not even its existence
    await grant(node, allow("TOPIC", "auto-", "DESCRIBE", pattern_type="PREFIXED"))
    assert await error("auto-1") == ErrorCode.TOPIC_AUTHORIZATION_FAILED  # no Create
    assert node.sm.image.topic("auto-1") is None
    await grant(node, allow("TOPIC", "auto-1", "CREATE"))
    assert await error("auto-1") == ErrorCode.LEADER_NOT_AVAILABLE  # created: its partitions come next
    assert await created("auto-1")
    assert await error("auto-2") == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    await grant(node, allow("CLUSTER", "kafka-cluster", "CREATE"))
    assert await error("auto-2") == ErrorCode.LEADER_NOT_AVAILABLE
    assert await created("auto-2")


async def test_delete_topics_and_create_partitions_need_delete_and_alter(node: Node) -> None:
    topic = await new_topic(node)
    deleted = await call(node, DeleteTopicsRequest(topic_names=[topic], timeout_ms=5000), 4)
    assert deleted.responses[0].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    grown = await call(
        node,
        CreatePartitionsRequest(
            topics=[CreatePartitionsRequest.CreatePartitionsTopic(name=topic, count=2, assignments=None)],
            timeout_ms=5000,
            validate_only=False,
        ),
        2,
    )
    assert grown.results[0].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert len(node.sm.image.topic(topic).partitions) == 1  # type: ignore[union-attr]
    await grant(node, allow("TOPIC", topic, "DELETE"))
    assert (await call(node, DeleteTopicsRequest(topic_names=[topic], timeout_ms=5000), 4)).responses[
        0
    ].error_code == ErrorCode.NONE


async def test_acl_apis_need_cluster_alter_and_describe(node: Node) -> None:
    described = await call(
        node,
        DescribeAclsRequest(
            resource_type_filter=1,
            resource_name_filter=None,
            pattern_type_filter=1,
            principal_filter=None,
            host_filter=None,
            operation=1,
            permission_type=1,
        ),
        2,
    )
    assert described.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    creation = CreateAclsRequest.AclCreation(
        resource_type=2,
        resource_name="x",
        resource_pattern_type=3,
        principal=ALICE,
        host="*",
        operation=2,
        permission_type=3,
    )
    created = await call(node, CreateAclsRequest(creations=[creation]), 2)
    assert created.results[0].error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert not node.sm.image.acls  # alice could not grant herself anything


# ---- semantics across the APIs ----


@pytest.mark.parametrize(
    ("allowed", "denied"),
    [
        (("orders", "LITERAL"), ("ord", "PREFIXED")),
        (("*", "LITERAL"), ("orders", "LITERAL")),
        (("ord", "PREFIXED"), ("*", "LITERAL")),
    ],
    ids=["prefixed-deny-beats-literal-allow", "literal-deny-beats-wildcard-allow", "wildcard-deny-beats-prefix"],
)
async def test_deny_beats_allow_across_pattern_types(
    node: Node, allowed: tuple[str, str], denied: tuple[str, str]
) -> None:
    async with admin(node) as a:
        await a.create_topic("orders", 1, 1)
    await grant(node, allow("TOPIC", allowed[0], "WRITE", pattern_type=allowed[1]))
    assert produce_error(await call(node, produce("orders"), 7)) == ErrorCode.NONE
    await grant(node, allow("TOPIC", denied[0], "WRITE", pattern_type=denied[1], permission="DENY"))
    assert produce_error(await call(node, produce("orders"), 7)) == ErrorCode.TOPIC_AUTHORIZATION_FAILED


async def test_user_wildcard_bindings_and_host_bindings(node: Node) -> None:
    topic = await new_topic(node)
    await grant(node, allow("TOPIC", topic, "WRITE", principal="User:*", host="10.1.2.3"))
    assert produce_error(await call(node, produce(topic), 7)) == ErrorCode.TOPIC_AUTHORIZATION_FAILED  # other host
    await grant(node, allow("TOPIC", topic, "WRITE", principal="User:*", host="127.0.0.1"))
    assert produce_error(await call(node, produce(topic), 7)) == ErrorCode.NONE
    assert produce_error(await call(node, produce(topic), 7, principal="User:bob")) == ErrorCode.NONE


async def test_super_users_are_allowed_everything_without_acls(node: Node) -> None:
    topic = await new_topic(node)
    assert produce_error(await call(node, produce(topic), 7, principal="User:root")) == ErrorCode.NONE
    created = await call(
        node,
        CreateTopicsRequest(
            topics=[
                CreateTopicsRequest.CreatableTopic(
                    name="root-made", num_partitions=1, replication_factor=1, assignments=[], configs=[]
                )
            ],
            timeout_ms=5000,
        ),
        5,
        principal="User:root",
    )
    assert created.topics[0].error_code == ErrorCode.NONE


async def test_allow_everyone_if_no_acl_found(tmp_path: Path) -> None:
    node = await start_node(tmp_path, **{"allow.everyone.if.no.acl.found": "true"})
    try:
        topic, guarded = await new_topic(node), await new_topic(node)
        assert produce_error(await call(node, produce(topic), 7)) == ErrorCode.NONE  # no ACL on it: allowed
        await grant(node, allow("TOPIC", guarded, "WRITE", principal="User:bob"))
        assert produce_error(await call(node, produce(guarded), 7)) == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    finally:
        await node.stop()


async def test_the_controllers_inter_node_apis_need_cluster_action(node: Node, tmp_path: Path) -> None:
    """A process that reaches the controller listener but is not a node (here: not a super user) cannot register
    a broker."""
    other = await start_node(tmp_path / "b", registered=False, **{"super.users": "User:root"})
    try:
        address = f"127.0.0.1:{other.config.controller_listener.port}"  # type: ignore[union-attr]
        async with grpc.aio.insecure_channel(address) as channel:
            stub = controller_pb2_grpc.ControllerStub(channel)
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await stub.RegisterBroker(controller_pb2.BrokerRegistrationRequest(broker_id=9), timeout=10)
        assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED
        assert "CLUSTER_AUTHORIZATION_FAILED" in (refused.value.details() or "")
    finally:
        await other.stop()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"}, "not available"),
        ({"super.users": "User:root"}, "only applies with an authorizer"),
        ({"allow.everyone.if.no.acl.found": "true"}, "only applies with an authorizer"),
        ({"authorizer.class.name": "odradek", "super.users": "root"}, "Type:name"),
    ],
)
def test_authorizer_settings_are_refused_when_they_cannot_take_effect(extra: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        NodeConfig(
            {
                "process.roles": "broker,controller",
                "node.id": 1,
                "controller.quorum.voters": "1@127.0.0.1:9093",
                "listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
                **extra,
            }
        )


async def test_a_request_over_several_topics_answers_each_in_order_and_serves_the_allowed(node: Node) -> None:
    from kafka.protocol.admin.configs import DescribeConfigsRequest

    t = CreateTopicsRequest.CreatableTopic
    request = CreateTopicsRequest(
        topics=[
            t(name=name, num_partitions=1, replication_factor=1, assignments=[], configs=[])
            for name in ("open-1", "shut-1", "open-2")
        ],
        timeout_ms=5000,
    )
    await grant(node, allow("TOPIC", "open-", "CREATE", pattern_type="PREFIXED"))
    created = await call(node, request, 5)
    assert [(r.name, r.error_code) for r in created.topics] == [
        ("open-1", ErrorCode.NONE),
        ("shut-1", ErrorCode.TOPIC_AUTHORIZATION_FAILED),
        ("open-2", ErrorCode.NONE),
    ]
    assert node.sm.image.topic("shut-1") is None
    await grant(node, allow("TOPIC", "open-1", "DESCRIBE_CONFIGS"))
    resource = DescribeConfigsRequest.DescribeConfigsResource
    described = await call(
        node,
        DescribeConfigsRequest(
            resources=[
                resource(resource_type=2, resource_name=name, configuration_keys=None) for name in ("open-2", "open-1")
            ],
            include_synonyms=False,
        ),
        1,
    )
    assert [(r.resource_name, r.error_code, bool(r.configs)) for r in described.results] == [
        ("open-2", ErrorCode.TOPIC_AUTHORIZATION_FAILED, False),
        ("open-1", ErrorCode.NONE, True),
    ]


async def test_describe_configs_over_topics_and_refused_cluster_defaults_answers_the_topics(node: Node) -> None:
    """Over gRPC one DescribeConfigs may ask for topics and the cluster defaults: a caller without cluster
    DescribeConfigs still gets the topics it may describe, and the refusal for the defaults on its own field."""
    from types import SimpleNamespace

    from odradek.client.connection import CLIENT_ID_KEY
    from odradek.proto import admin_pb2 as apb

    name = await new_topic(node)
    await grant(node, allow("TOPIC", name, "DESCRIBE_CONFIGS"))
    assert node.admin is not None
    # The servicer context of Alice's call, as the gRPC listener's interceptors leave it.
    context = SimpleNamespace(
        principal=ALICE, peer=lambda: "ipv4:127.0.0.1:50000", invocation_metadata=lambda: ((CLIENT_ID_KEY, "c"),)
    )

    async def describe(request: apb.DescribeConfigsRequest) -> apb.DescribeConfigsResponse:
        return await node.admin.DescribeConfigs(request, context)  # type: ignore[union-attr,arg-type]

    mixed = await describe(apb.DescribeConfigsRequest(topics=[name], cluster_defaults=True))
    assert mixed.error == ErrorCode.NONE and mixed.cluster_defaults_error == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert [(t.topic, t.error, bool(t.configs)) for t in mixed.topics] == [(name, ErrorCode.NONE, True)]
    assert not mixed.cluster_defaults
    alone = await describe(apb.DescribeConfigsRequest(cluster_defaults=True))
    assert alone.error == alone.cluster_defaults_error == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    await grant(node, allow("CLUSTER", "kafka-cluster", "DESCRIBE_CONFIGS"))
    both = await describe(apb.DescribeConfigsRequest(topics=[name], cluster_defaults=True))
    assert both.cluster_defaults_error == ErrorCode.NONE and both.cluster_defaults and both.topics[0].configs

"""OffsetCommit's version rule of KIP-848 through the Kafka codec, down to a real group coordinator on an offsets
partition: a member of the consumer protocol must commit with version 9 or above (Kafka answers every partition
UNSUPPORTED_VERSION otherwise, ConsumerGroup.validateOffsetCommit), while an administrator's commit (no member,
generation -1) to a group without members is accepted at any version, and TxnOffsetCommit is not concerned."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from kafka.protocol.consumer.group import OffsetCommitRequest, OffsetCommitResponse

from odradek.broker.groups.consumer_messages import ConsumerHeartbeatRequest
from odradek.broker.groups.coordinator import GroupCoordinator
from odradek.broker.groups.group_service import GroupService
from odradek.broker.kafka import group_apis
from odradek.broker.kafka.apis import ApiRegistry
from odradek.broker.kafka.backend import KafkaBackend
from odradek.broker.kafka.wire import ConnectionInfo, KafkaContext, RequestHeader
from odradek.client.errors import ErrorCode

_TESTS = Path(__file__).resolve().parent.parent
for _path in (str(_TESTS / "groups"), str(_TESTS / "controller")):  # the offsets partition helpers
    if _path not in sys.path:
        sys.path.insert(0, _path)

from test_coordinator_appends import ManualClock, OffsetsReplicas, committed, coordinator, loaded, until  # noqa: E402

CTX = KafkaContext(ConnectionInfo(1, "KAFKA", "10.0.0.5", 5555), "app-7")


@pytest.fixture
async def groups(tmp_path: Path) -> AsyncIterator[GroupCoordinator]:
    replicas = OffsetsReplicas(tmp_path)
    pump = asyncio.create_task(replicas.keep_replicating())
    c = coordinator(replicas, ManualClock())
    try:
        c.on_leadership(replicas.leading)
        await until(lambda: loaded(c), "loaded")
        yield c
    finally:
        await c.close()
        pump.cancel()
        replicas.close()


def registry_with(groups: GroupCoordinator) -> ApiRegistry:
    backend = KafkaBackend(
        broker_id=1,
        cluster_id="c",
        listener="KAFKA",
        image=lambda: None,  # type: ignore[arg-type,return-value]
        controller_id=lambda: 1,
        endpoint=lambda node: None,
        data=None,  # type: ignore[arg-type]
        groups=GroupService(groups),
        transactions=None,  # type: ignore[arg-type]
        admin=None,  # type: ignore[arg-type]
    )
    registry = ApiRegistry()
    group_apis.register(registry, backend)
    return registry


async def commit(registry: ApiRegistry, version: int, group: str, member: str, epoch: int, offset: int) -> list[int]:
    """One OffsetCommit of ``t``-0 in Kafka's encoding at ``version``; each partition's error code."""
    Topic = OffsetCommitRequest.OffsetCommitRequestTopic
    Partition = Topic.OffsetCommitRequestPartition
    request = OffsetCommitRequest(
        group_id=group,
        generation_id_or_member_epoch=epoch,
        member_id=member,
        group_instance_id=None,
        retention_time_ms=-1,
        topics=[Topic(name="t", partitions=[Partition(partition_index=0, committed_offset=offset)])],
    )
    found = registry.get(request.API_KEY)
    assert found is not None
    _, handler = found
    header = RequestHeader(request.API_KEY, version, 7, CTX.client_id, 0)
    reply = await handler(CTX, header, memoryview(bytes(request.encode(version=version))))
    assert reply is not None
    decoded: Any = OffsetCommitResponse.decode(b"".join(bytes(c) for c in reply.encode(0)), version=version)  # type: ignore[arg-type]
    return [p.error_code for t in decoded.topics for p in t.partitions]


async def test_a_consumer_protocol_member_must_commit_with_version_9(groups: GroupCoordinator) -> None:
    registry = registry_with(groups)
    joined = await groups.consumer_heartbeat(
        "g",
        ConsumerHeartbeatRequest("m", 0, rebalance_timeout_ms=30_000, subscribed_topic_names=("t",), owned=frozenset()),
    )
    assert joined.error == ErrorCode.NONE
    epoch = joined.member_epoch
    for version in range(2, 9):
        assert await commit(registry, version, "g", "m", epoch, 10 + version) == [ErrorCode.UNSUPPORTED_VERSION]
    assert committed(groups, "g") == -1
    assert await commit(registry, 9, "g", "m", epoch, 42) == [ErrorCode.NONE]
    assert committed(groups, "g") == 42
    # The other checks come first, as Kafka's: an unknown member, and an administrator's commit to a group with
    # members.
    assert await commit(registry, 8, "g", "who", epoch, 1) == [ErrorCode.UNKNOWN_MEMBER_ID]
    assert await commit(registry, 8, "g", "", -1, 1) == [ErrorCode.UNKNOWN_MEMBER_ID]
    # TxnOffsetCommit of a member is not concerned (it has its own versions).
    cg = next(iter(groups.partitions.values())).shard.consumer_groups["g"]
    assert cg.validate_offset_commit("m", epoch, transactional=True, api_version=3) == ErrorCode.NONE
    # Once the member left, the group is empty: an administrator's commit works at any version.
    assert (await groups.consumer_heartbeat("g", ConsumerHeartbeatRequest("m", -1))).error == ErrorCode.NONE
    for version in (2, 8, 9):
        assert await commit(registry, version, "g", "", -1, 100 + version) == [ErrorCode.NONE]
    assert committed(groups, "g") == 109


async def test_classic_groups_commit_at_any_version(groups: GroupCoordinator) -> None:
    registry = registry_with(groups)
    for version in (2, 8, 9):  # an administrator's commit to a new (classic) group
        assert await commit(registry, version, "c", "", -1, version) == [ErrorCode.NONE]
    assert committed(groups, "c") == 9

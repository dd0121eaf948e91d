"""The group coordinator's shell over a real offsets partition: two replicas on real logs, the follower's fetches
driven by the test, and a simulated clock. This reaches the instants that depend on replication: a commit whose
append is not replicated within ``offsets.commit.timeout.ms``, a partition that cannot finish loading because its
log end is not committed yet (COORDINATOR_LOAD_IN_PROGRESS), and the retention loop running every
``offsets.retention.check.interval.ms``. And what writes tombstones besides retention: OffsetDelete (through the
coordinator and its gRPC service, as Kafka answers it) and the deletion of a topic (Kafka's onPartitionsDeleted)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from controller_images import brokers, partition, topic

from odradek.broker.groups.coordinator import CoordinatorConfig, CoordinatorError, GroupCoordinator
from odradek.broker.groups.group import GroupConfig
from odradek.broker.groups.group_service import GroupService
from odradek.broker.groups.loader import encode_records
from odradek.broker.groups.messages import JoinGroupRequest, SyncGroupRequest
from odradek.broker.groups.offsets import OffsetAndMetadata
from odradek.broker.groups.records import OFFSETS_TOPIC, OffsetCommitKey, OffsetCommitValue
from odradek.broker.groups.requests import OffsetDelete, TopicPartitions
from odradek.broker.log.log import Log
from odradek.broker.partition import Partition
from odradek.client.common.access import AccessControl, AuthorizerSettings
from odradek.client.common.acls import AclBinding, AclOperation, AclPermissionType, PatternType, ResourceType
from odradek.client.common.metadata_image import MetadataImage, PartitionRegistration, image_from_records
from odradek.client.common.request_context import RequestContext
from odradek.client.consumer.protocol import Subscription
from odradek.client.errors import ErrorCode
from odradek.client.record.batch import read_batches
from odradek.client.structs import TopicPartition

OFFSETS_ID = b"\x05" * 16
DATA_ID = b"\x06" * 16
OTHER_ID = b"\x07" * 16
TP = TopicPartition("t", 0)
UP = TopicPartition("u", 0)
MAX = 1 << 20
MINUTE = 60_000


def offsets_image(**data_topics: bytes) -> MetadataImage:
    """Brokers 1 and 2, ``__consumer_offsets-0`` led by broker 1 at epoch 1, and one partition of each data topic
    (name=topic id)."""
    records = [
        *brokers(1, 2),
        topic(OFFSETS_TOPIC, OFFSETS_ID),
        partition(0, [1, 2], topic_id=OFFSETS_ID, leader_epoch=1),
    ]
    for name, topic_id in data_topics.items():
        records += [topic(name, topic_id), partition(0, [1, 2], topic_id=topic_id)]
    return image_from_records(records)


class OffsetsReplicas:
    """``__consumer_offsets-0`` on brokers 1 (leader) and 2, topics ``t`` and ``u``; nothing replicates unless the
    test says so."""

    def __init__(self, root: Path) -> None:
        self.parts = {
            b: Partition(OFFSETS_TOPIC, 0, Log.open(root / f"b{b}" / f"{OFFSETS_TOPIC}-0"), b) for b in (1, 2)
        }
        state = PartitionRegistration(OFFSETS_ID, 0, (1, 2), (1, 2), 1, 1, 1)
        for p in self.parts.values():
            p.update(state, 1, 0)
        self.image = offsets_image(t=DATA_ID, u=OTHER_ID)

    @property
    def leader(self) -> Partition:
        return self.parts[1]

    @property
    def leading(self) -> dict[tuple[str, int], Partition]:
        """What the replica manager's leadership listener is called with."""
        return {(OFFSETS_TOPIC, 0): self.leader}

    def replicate(self) -> None:
        """Two follower fetches: the first copies the leader's log, the second tells the leader it has it (the
        high watermark moves) and brings the follower the new high watermark."""
        follower = self.parts[2]
        for _ in range(2):
            offset, epoch = follower.fetch_position()
            read = self.leader.read_for_follower(2, offset, epoch, MAX, follower.leader_epoch, 0)
            assert read.diverging is None and read.data is not None
            follower.append_as_follower(bytes(read.data.records), read.high_watermark)

    async def keep_replicating(self) -> None:
        while True:
            self.replicate()
            await asyncio.sleep(0.01)

    def offsets_in_log(self) -> list[tuple[int, bool]]:
        """(committed offset or -1, is a tombstone) of each offset commit record in the leader's log."""
        log, out, offset = self.leader.log, [], self.leader.log.log_start_offset
        while offset < log.log_end_offset:
            data = log.read(offset, MAX)
            for batch in read_batches(bytes(data.records)):
                out += [(-1, True) if r.value is None else (0, False) for r in batch.records()]
            offset = data.next_offset
        return out

    def close(self) -> None:
        for p in self.parts.values():
            p.log.close()


class ManualClock:
    def __init__(self) -> None:
        self.now = 1_700_000_000_000

    def __call__(self) -> int:
        return self.now


@pytest.fixture
async def replicas(tmp_path: Path) -> AsyncIterator[OffsetsReplicas]:
    r = OffsetsReplicas(tmp_path)
    yield r
    r.close()


def coordinator(replicas: OffsetsReplicas, clock: Callable[[], int], **config: Any) -> GroupCoordinator:
    async def create(partitions: int, replication_factor: int) -> None:
        raise AssertionError("the offsets topic exists")

    return GroupCoordinator(1, lambda: replicas.image, CoordinatorConfig(**config), create, clock)  # type: ignore[arg-type]


async def until(condition: Callable[[], bool], what: str, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.01)


def committed(c: GroupCoordinator, group: str) -> int:
    error, offsets = c.fetch_offsets(group, [TP])
    assert error == ErrorCode.NONE
    return offsets[TP].offset


def loaded(c: GroupCoordinator) -> bool:
    return all(cp.loaded for cp in c.partitions.values())


def offsets(c: GroupCoordinator, group: str) -> dict[TopicPartition, int]:
    error, found = c.fetch_offsets(group, None)
    assert error == ErrorCode.NONE
    return {tp: v.offset for tp, v in found.items()}


@contextlib.asynccontextmanager
async def serving(
    replicas: OffsetsReplicas, clock: Callable[[], int], **config: Any
) -> AsyncIterator[GroupCoordinator]:
    """A coordinator that has loaded the partition, with the follower replicating all along."""
    pump = asyncio.create_task(replicas.keep_replicating())
    c = coordinator(replicas, clock, **config)
    try:
        c.on_leadership(replicas.leading)
        await until(lambda: loaded(c), "loaded")
        yield c
    finally:
        await c.close()
        pump.cancel()


async def test_a_commit_not_replicated_in_time_is_request_timed_out_and_not_visible(replicas) -> None:
    c = coordinator(replicas, ManualClock(), commit_timeout_ms=200)
    c.on_leadership({(OFFSETS_TOPIC, 0): replicas.leader})
    await until(lambda: loaded(c), "the empty partition loads")
    started = time.monotonic()
    errors = await c.commit_offsets("g", "", None, -1, {TP: OffsetAndMetadata(5)})
    assert errors == {TP: ErrorCode.REQUEST_TIMED_OUT}
    assert 0.2 <= time.monotonic() - started < 2  # offsets.commit.timeout.ms, not the default 5 s
    assert committed(c, "g") == -1  # never acknowledged, never served
    pump = asyncio.create_task(replicas.keep_replicating())
    try:
        assert await c.commit_offsets("g", "", None, -1, {TP: OffsetAndMetadata(6)}) == {TP: ErrorCode.NONE}
        assert committed(c, "g") == 6
    finally:
        pump.cancel()
        await c.close()


async def test_a_partition_whose_log_end_is_not_committed_answers_load_in_progress(replicas) -> None:
    """The previous coordinator appended a commit that no follower has yet: the new one must not serve it (it may
    still be truncated away), so it answers COORDINATOR_LOAD_IN_PROGRESS until the high watermark reaches it."""
    clock = ManualClock()
    replicas.leader.append_as_leader(
        encode_records([(OffsetCommitKey("g", "t", 0), OffsetCommitValue(9, commit_timestamp=clock.now))], clock.now),
        acks=-1,
    )
    c = coordinator(replicas, clock)
    c.on_leadership({(OFFSETS_TOPIC, 0): replicas.leader})
    await asyncio.sleep(0.05)  # the load has replayed the log and waits for the high watermark
    for call in (
        lambda: c.fetch_offsets("g", [TP]),
        lambda: c.describe("g"),
        lambda: c.list_groups(),
    ):
        with pytest.raises(CoordinatorError) as e:
            result = call()
            if isinstance(result, tuple) and result[0] != ErrorCode.NONE:  # list_groups answers with a code
                raise CoordinatorError("listed", code=result[0])
        assert e.value.code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    with pytest.raises(CoordinatorError) as e:
        await c.commit_offsets("g", "", None, -1, {TP: OffsetAndMetadata(10)})
    assert e.value.code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    replicas.replicate()
    await until(lambda: loaded(c), "the load completes once the high watermark reaches the log end")
    assert committed(c, "g") == 9  # the loaded commit, and the refused one changed nothing
    await c.close()


async def test_offsets_expire_on_the_retention_check_interval(replicas) -> None:
    clock = ManualClock()
    pump = asyncio.create_task(replicas.keep_replicating())
    fast = coordinator(replicas, clock, retention_ms=MINUTE, retention_check_interval_ms=50)
    try:
        fast.on_leadership({(OFFSETS_TOPIC, 0): replicas.leader})
        await until(lambda: loaded(fast), "loaded")
        assert await fast.commit_offsets("g", "", None, -1, {TP: OffsetAndMetadata(3)}) == {TP: ErrorCode.NONE}
        await asyncio.sleep(0.2)  # several checks pass: nothing is old enough yet
        assert committed(fast, "g") == 3
        clock.now += MINUTE + 1
        await until(lambda: committed(fast, "g") == -1, "the commit expires at the next check")
        assert replicas.offsets_in_log()[-1] == (-1, True)  # a tombstone, so the next coordinator agrees
        assert fast.list_groups()[1] == []  # the empty group without offsets is gone
    finally:
        await fast.close()

    slow = coordinator(replicas, clock, retention_ms=MINUTE, retention_check_interval_ms=600_000)
    try:
        slow.on_leadership({(OFFSETS_TOPIC, 0): replicas.leader})
        await until(lambda: loaded(slow), "loaded")
        assert await slow.commit_offsets("h", "", None, -1, {TP: OffsetAndMetadata(4)}) == {TP: ErrorCode.NONE}
        clock.now += MINUTE + 1
        await asyncio.sleep(0.3)  # as long as the fast coordinator needed, and more
        assert committed(slow, "h") == 4  # no check has run yet: the interval is ten minutes
    finally:
        await slow.close()
        pump.cancel()


async def stable_member(c: GroupCoordinator, protocol_type: str, metadata: bytes) -> None:
    """One member joined group "g" with ``metadata`` and synced: the group is Stable."""

    def join(member_id: str) -> JoinGroupRequest:
        return JoinGroupRequest(
            0, member_id, None, "c", "/10.0.0.1", 10_000, 30_000, protocol_type, (("range", metadata),)
        )

    answer = await c.join("g", join(""))
    if answer.error == ErrorCode.MEMBER_ID_REQUIRED:
        answer = await c.join("g", join(answer.member_id))
    assert answer.error == ErrorCode.NONE
    member = answer.member_id
    sync = SyncGroupRequest(0, member, None, answer.generation_id, protocol_type, "range", ((member, b""),))
    assert (await c.sync("g", sync)).error == ErrorCode.NONE


SUBSCRIBED = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC


@pytest.mark.parametrize(
    ("protocol_type", "metadata", "answer"),
    [
        ("consumer", Subscription(("t",)).encode(), (ErrorCode.NONE, {TP: SUBSCRIBED, UP: ErrorCode.NONE})),
        # Kafka's ClassicGroup.isSubscribedToTopic: subscriptions it cannot read cover every topic
        ("consumer", b"not a subscription", (ErrorCode.NONE, {TP: SUBSCRIBED, UP: SUBSCRIBED})),
        # ClassicGroup.validateOffsetDelete: only a consumer group may have members
        ("connect", b"not a subscription", (ErrorCode.NON_EMPTY_GROUP, {})),
    ],
)
async def test_offset_delete_spares_the_topics_a_live_group_subscribes_to(
    replicas, protocol_type: str, metadata: bytes, answer: tuple[int, dict[TopicPartition, int]]
) -> None:
    async with serving(replicas, ManualClock(), group=GroupConfig(initial_rebalance_delay_ms=0)) as c:
        commit = {TP: OffsetAndMetadata(5), UP: OffsetAndMetadata(7)}
        assert await c.commit_offsets("g", "", None, -1, commit) == dict.fromkeys(commit, ErrorCode.NONE)
        await stable_member(c, protocol_type, metadata)
        assert await c.delete_offsets("g", [TP, UP]) == answer
        kept = {tp: o.offset for tp, o in commit.items() if answer[1].get(tp) != ErrorCode.NONE}
        assert offsets(c, "g") == kept


CALLER = RequestContext(peer="ipv4:10.0.0.5:5555")  # User:ANONYMOUS


def allow(kind: ResourceType, name: str, operation: AclOperation) -> AclBinding:
    return AclBinding(kind, name, PatternType.LITERAL, "User:ANONYMOUS", "*", operation, AclPermissionType.ALLOW)


async def test_offset_delete_answers_partitions_the_metadata_lacks_after_the_topic_acl(replicas) -> None:
    """Kafka's KafkaApis.handleOffsetDeleteRequest, on both listeners: a topic the caller may not read is
    TOPIC_AUTHORIZATION_FAILED whether it exists or not, then a partition the metadata lacks is
    UNKNOWN_TOPIC_OR_PARTITION; the others are deleted."""
    async with serving(replicas, ManualClock()) as c:
        commit = {TP: OffsetAndMetadata(5), UP: OffsetAndMetadata(7)}
        assert await c.commit_offsets("g", "", None, -1, commit) == dict.fromkeys(commit, ErrorCode.NONE)
        bindings = {
            b"1": allow(ResourceType.GROUP, "g", AclOperation.DELETE),
            b"2": allow(ResourceType.TOPIC, "t", AclOperation.READ),
            b"3": allow(ResourceType.TOPIC, "ghost", AclOperation.READ),
        }
        service = GroupService(c, access=AccessControl(AuthorizerSettings(), lambda: bindings))
        asked = {"t": (0, 9), "ghost": (0,), "u": (0,), "nowhere": (0,)}
        request = OffsetDelete("g", tuple(TopicPartitions(n, ps) for n, ps in asked.items()))
        response = await service.offset_delete(request, CALLER)
        assert response.error == ErrorCode.NONE
        assert {(t.name, p.partition): p.error for t in response.topics for p in t.partitions} == {
            ("t", 0): ErrorCode.NONE,
            ("t", 9): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            ("ghost", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            ("u", 0): ErrorCode.TOPIC_AUTHORIZATION_FAILED,
            ("nowhere", 0): ErrorCode.TOPIC_AUTHORIZATION_FAILED,
        }
        assert offsets(c, "g") == {UP: 7}


async def test_a_deleted_topics_offsets_go_and_a_topic_recreated_under_its_name_starts_without_them(replicas) -> None:
    """Kafka's onPartitionsDeleted: when the image loses a topic, every group's offsets of it get tombstones, so
    OffsetFetch no longer shows them, the next coordinator agrees, and a new topic of that name inherits nothing."""
    clock = ManualClock()
    async with serving(replicas, clock) as c:
        for group, commit in (("g", {TP: 5, UP: 7}), ("h", {TP: 3})):
            made = await c.commit_offsets(group, "", None, -1, {tp: OffsetAndMetadata(o) for tp, o in commit.items()})
            assert made == dict.fromkeys(commit, ErrorCode.NONE)
        replicas.image = offsets_image(u=OTHER_ID)
        c.on_leadership(replicas.leading)  # the replica manager calls it after every metadata change
        await until(lambda: offsets(c, "g") == {UP: 7} and offsets(c, "h") == {}, "the tombstones")
        assert replicas.offsets_in_log()[-2:] == [(-1, True), (-1, True)]
        written = len(replicas.offsets_in_log())
        replicas.image = offsets_image(t=b"\x08" * 16, u=OTHER_ID)  # "t" again, a new topic
        c.on_leadership(replicas.leading)
        await asyncio.sleep(0.05)
        assert committed(c, "g") == -1 and len(replicas.offsets_in_log()) == written
    async with serving(replicas, clock) as again:
        assert (offsets(again, "g"), offsets(again, "h")) == ({UP: 7}, {})


async def test_a_topic_deleted_while_the_partition_loads_loses_its_offsets_once_loaded(replicas) -> None:
    clock = ManualClock()
    replicas.leader.append_as_leader(
        encode_records([(OffsetCommitKey("g", "t", 0), OffsetCommitValue(9, commit_timestamp=clock.now))], clock.now),
        acks=-1,
    )
    c = coordinator(replicas, clock)
    c.on_leadership(replicas.leading)
    await asyncio.sleep(0.05)  # the load has replayed the log and waits for the high watermark
    assert not loaded(c)
    replicas.image = offsets_image(u=OTHER_ID)
    c.on_leadership(replicas.leading)
    pump = asyncio.create_task(replicas.keep_replicating())
    try:
        await until(lambda: loaded(c) and offsets(c, "g") == {}, "the tombstone once loaded")
        assert replicas.offsets_in_log()[-1] == (-1, True)
    finally:
        await c.close()
        pump.cancel()

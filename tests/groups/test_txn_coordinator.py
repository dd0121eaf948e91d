"""TxnOffsetCommit through the group coordinator's shell and its gRPC service: the KIP-447 checks against the live
group, the transactional batch it appends, the marker that commits or aborts it, OffsetFetch with require_stable,
and a coordinator that loads a log with a transaction still open.

The offsets partition here is an in-memory stand-in that takes every append and acknowledges it at once (the
real log's side of a coordinator's transactional append is the log's own tests'); the rules themselves are
checked on a ``ClassicGroup`` through the group harness."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from controller_images import brokers, partition, topic
from group_harness import Harness

from odradek.broker.groups.coordinator import CoordinatorConfig, GroupCoordinator
from odradek.broker.groups.group import GroupConfig
from odradek.broker.groups.group_service import GroupService
from odradek.broker.groups.loader import encode_records
from odradek.broker.groups.messages import JoinGroupRequest, SyncGroupRequest
from odradek.broker.groups.offsets import OffsetAndMetadata
from odradek.broker.groups.records import OFFSETS_TOPIC, OffsetCommitKey, OffsetCommitValue
from odradek.broker.groups.requests import CommitPartition, CommitTopic, OffsetFetch, TopicPartitions, TxnOffsetCommit
from odradek.broker.log.log import AppendInfo, FetchData
from odradek.client.common.metadata_image import MetadataImage, image_from_records
from odradek.client.common.request_context import internal
from odradek.client.errors import ErrorCode
from odradek.client.record.batch import read_batches
from odradek.client.record.control import ControlType, build_control_batch
from odradek.client.structs import TopicPartition

TP = TopicPartition("t", 0)
PID, EPOCH = 7, 2


class MemoryLog:
    """One offset per batch; everything appended is committed at once."""

    def __init__(self) -> None:
        self.batches: list[bytes] = []
        self.log_start_offset = 0

    @property
    def log_end_offset(self) -> int:
        return len(self.batches)

    @property
    def high_watermark(self) -> int:
        return len(self.batches)

    def read(self, offset: int, max_bytes: int, max_offset: int | None = None) -> FetchData:
        end = self.log_end_offset if max_offset is None else max_offset
        return FetchData(b"".join(self.batches[offset:end]), offset, end, end, 0, end)


class MemoryPartition:
    is_leader = True
    leader_epoch = 1

    def __init__(self, log: MemoryLog) -> None:
        self.log = log

    def append_as_leader(self, records: bytes, acks: int = 1, **kwargs: Any) -> AppendInfo:
        self.log.batches.append(bytes(records))
        last = self.log.log_end_offset - 1
        return AppendInfo(last, last, 0, last, 1, 1, len(records), 0)

    def wait_for_commit(self, offset: int) -> asyncio.Future[int]:
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        future.set_result(ErrorCode.NONE)
        return future

    def add_waiter(self, future: asyncio.Future[None]) -> None:
        future.set_result(None)

    def remove_waiter(self, future: asyncio.Future[None]) -> None:
        pass


def image() -> MetadataImage:
    offsets_id, data_id = b"\x05" * 16, b"\x06" * 16
    return image_from_records(
        [
            *brokers(1),
            topic(OFFSETS_TOPIC, offsets_id),
            partition(0, [1], topic_id=offsets_id, leader_epoch=1),
            topic("t", data_id),
            partition(0, [1], topic_id=data_id),
        ]
    )


async def until(condition: Callable[[], bool], what: str, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.005)


async def start(log: MemoryLog) -> GroupCoordinator:
    async def create(partitions: int, replication_factor: int) -> None:
        raise AssertionError("the offsets topic exists")

    snapshot = image()
    config = CoordinatorConfig(num_partitions=1, group=GroupConfig(initial_rebalance_delay_ms=0))
    c = GroupCoordinator(1, lambda: snapshot, config, create)
    c.on_leadership({(OFFSETS_TOPIC, 0): MemoryPartition(log)})  # type: ignore[dict-item]
    await until(lambda: all(cp.loaded for cp in c.partitions.values()), "loaded")
    return c


def committed(c: GroupCoordinator, group: str = "g") -> int:
    error, offsets = c.fetch_offsets(group, [TP])
    assert error == ErrorCode.NONE
    return offsets[TP].offset


async def fetch_stable(service: GroupService, group: str = "g") -> tuple[int, int]:
    """(offset, error) of TP through OffsetFetch with require_stable."""
    response = await service.offset_fetch(OffsetFetch(group, (TopicPartitions("t", (0,)),), True), internal())
    [p] = response.topics[0].partitions
    return p.committed_offset, p.error


def txn_request(offset: int, generation: int = -1, member: str = "", instance: str | None = None) -> TxnOffsetCommit:
    return TxnOffsetCommit(
        transactional_id="tx",
        group_id="g",
        producer_id=PID,
        producer_epoch=EPOCH,
        generation_id=generation,
        member_id=member,
        group_instance_id=instance,
        topics=(CommitTopic("t", (CommitPartition(0, offset),)),),
    )


async def test_txn_offset_commit_is_pending_until_the_commit_marker() -> None:
    log = MemoryLog()
    c = await start(log)
    service = GroupService(c)
    try:
        response = await service.txn_offset_commit(txn_request(10), internal())
        assert response.topics[0].partitions[0].error == ErrorCode.NONE
        [batch] = list(read_batches(log.batches[-1]))
        h = batch.header
        assert (h.is_transactional, h.producer_id, h.producer_epoch, h.base_sequence) == (True, PID, EPOCH, -1)
        assert committed(c) == -1
        assert await fetch_stable(service) == (-1, ErrorCode.UNSTABLE_OFFSET_COMMIT)
        assert c.unstable_partitions("g", None) == {TP}
        c.on_txn_marker(0, PID, committed=True)
        assert committed(c) == 10
        assert await fetch_stable(service) == (10, ErrorCode.NONE)
        assert c.commits["g"] == 1

        await c.txn_commit_offsets("g", "tx", PID, EPOCH + 1, -1, "", None, {TP: OffsetAndMetadata(20)})
        c.on_txn_marker(0, PID, committed=False)
        assert committed(c) == 10  # aborted
        assert await fetch_stable(service) == (10, ErrorCode.NONE)
        c.on_txn_marker(5, PID, committed=True)  # a partition not coordinated here: ignored
    finally:
        await c.close()


async def test_bad_producer_ids_and_unknown_partitions_are_refused_per_partition() -> None:
    log = MemoryLog()
    c = await start(log)
    try:
        ghost = TopicPartition("ghost", 0)
        assert await c.txn_commit_offsets("g", "tx", -1, 0, -1, "", None, {TP: OffsetAndMetadata(1)}) == {
            TP: ErrorCode.INVALID_REQUEST
        }
        errors = await c.txn_commit_offsets(
            "g", "tx", PID, EPOCH, -1, "", None, {TP: OffsetAndMetadata(1), ghost: OffsetAndMetadata(1)}
        )
        assert errors == {TP: ErrorCode.NONE, ghost: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
        assert len(log.batches) == 1
    finally:
        await c.close()


async def stable_group(c: GroupCoordinator, instance: str | None = None) -> tuple[str, int]:
    """One consumer joined and synced: (member id, generation)."""

    def join(member_id: str) -> JoinGroupRequest:
        return JoinGroupRequest(
            0, member_id, instance, "c", "/10.0.0.1", 10_000, 30_000, "consumer", (("range", b"topics=t"),)
        )

    answer = await c.join("g", join(""))
    if answer.error == ErrorCode.MEMBER_ID_REQUIRED:
        answer = await c.join("g", join(answer.member_id))
    assert answer.error == ErrorCode.NONE
    member, generation = answer.member_id, answer.generation_id
    sync = SyncGroupRequest(0, member, instance, generation, "consumer", "range", ((member, b"a"),))
    assert (await c.sync("g", sync)).error == ErrorCode.NONE
    return member, generation


async def test_kip_447_a_zombie_of_an_earlier_generation_is_refused_and_writes_nothing() -> None:
    log = MemoryLog()
    c = await start(log)
    service = GroupService(c)
    try:
        member, generation = await stable_group(c)
        written = len(log.batches)
        for request, error in (
            (txn_request(5, generation - 1, member), ErrorCode.ILLEGAL_GENERATION),
            (txn_request(5, generation, "ghost"), ErrorCode.UNKNOWN_MEMBER_ID),
        ):
            response = await service.txn_offset_commit(request, internal())
            assert response.topics[0].partitions[0].error == error
        assert len(log.batches) == written and not c.unstable_partitions("g", None)
        for request in (txn_request(6, generation, member), txn_request(7)):  # the member's, and a check-free one
            assert (await service.txn_offset_commit(request, internal())).topics[0].partitions[
                0
            ].error == ErrorCode.NONE
        c.on_txn_marker(0, PID, committed=True)
        assert committed(c) == 7
    finally:
        await c.close()


async def test_a_coordinator_loading_an_open_transaction_keeps_it_pending_until_the_marker() -> None:
    log = MemoryLog()
    key = OffsetCommitKey("g", "t", 0)
    log.batches += [
        encode_records([(key, OffsetCommitValue(5, commit_timestamp=1))], 1),
        encode_records([(key, OffsetCommitValue(9, commit_timestamp=1))], 2, 8, 0),  # producer 8: aborted
        build_control_batch(ControlType.ABORT, 8, 1, 0, 3),
        encode_records([(key, OffsetCommitValue(10, commit_timestamp=1))], 4, PID, EPOCH),  # still open
    ]
    c = await start(log)
    service = GroupService(c)
    try:
        assert committed(c) == 5
        assert await fetch_stable(service) == (-1, ErrorCode.UNSTABLE_OFFSET_COMMIT)
        assert c.describe("g").state == "Empty"  # the group exists for its offsets
        c.on_txn_marker(0, PID, committed=True)
        assert committed(c) == 10
    finally:
        await c.close()


async def test_a_marker_reported_while_the_partition_loads_is_applied_after_the_replay() -> None:
    log = MemoryLog()
    log.batches.append(
        encode_records([(OffsetCommitKey("g", "t", 0), OffsetCommitValue(10, commit_timestamp=1))], 1, PID, EPOCH)
    )

    async def create(partitions: int, replication_factor: int) -> None:
        raise AssertionError("the offsets topic exists")

    snapshot = image()
    c = GroupCoordinator(1, lambda: snapshot, CoordinatorConfig(num_partitions=1), create)
    c.on_leadership({(OFFSETS_TOPIC, 0): MemoryPartition(log)})  # type: ignore[dict-item]
    c.on_txn_marker(0, PID, committed=True)  # the load task has not read anything yet
    try:
        await until(lambda: all(cp.loaded for cp in c.partitions.values()), "loaded")
        assert committed(c) == 10
    finally:
        await c.close()


# ---- the KIP-447 rules on the group itself ----


def test_txn_offset_commit_names_the_current_member_and_generation_or_nothing() -> None:
    """Kafka's rule (GroupCoordinator.validateOffsetCommit with isTransactional): a request that sets a member, an
    instance or a generation must be the current member at the current generation."""
    h = Harness()
    assert h.group.validate_txn_offset_commit("", None, -1) == ErrorCode.NONE  # a new, empty group
    assert h.group.validate_txn_offset_commit("ghost", None, -1) == ErrorCode.UNKNOWN_MEMBER_ID
    assert h.group.validate_txn_offset_commit("", None, 3) == ErrorCode.UNKNOWN_MEMBER_ID
    leader, follower = h.stable_group(2)
    assert h.group.validate_txn_offset_commit(leader, None, 1) == ErrorCode.NONE
    assert h.group.validate_txn_offset_commit(follower, None, 0) == ErrorCode.ILLEGAL_GENERATION
    assert h.group.validate_txn_offset_commit("ghost", None, 1) == ErrorCode.UNKNOWN_MEMBER_ID
    assert h.group.validate_txn_offset_commit("", None, -1) == ErrorCode.NONE  # no group metadata sent
    # a member without its generation, a generation without its member
    assert h.group.validate_txn_offset_commit(leader, None, -1) == ErrorCode.ILLEGAL_GENERATION
    assert h.group.validate_txn_offset_commit("", None, 1) == ErrorCode.UNKNOWN_MEMBER_ID
    # a rebalance in progress does not refuse it (the generation still must match)
    h.join(leader)
    assert h.group.state.value == "PreparingRebalance"
    assert h.group.validate_txn_offset_commit(leader, None, 1) == ErrorCode.NONE


def test_txn_offset_commit_of_a_replaced_static_member_is_fenced() -> None:
    h = Harness()
    _, follower = h.stable_group(2, instances=("i0", "i1"))
    assert h.group.validate_txn_offset_commit(follower, "i1", 1) == ErrorCode.NONE
    h.join(instance="i1", client="c1")  # a new process with the same instance id replaces it
    h.persisted()
    assert h.group.validate_txn_offset_commit(follower, "i1", 1) == ErrorCode.FENCED_INSTANCE_ID

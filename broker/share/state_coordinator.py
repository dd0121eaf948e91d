"""The share coordinator: share-partitions' durable state (``ShareStateStore``) on the coordinator runtime, in the
internal topic ``__share_group_state`` (Kafka's ShareCoordinator), and its ShareCoordinator gRPC service.

A broker keeps the states of the share-partitions whose key (``group:topic id:partition``, Kafka's coordinator key)
hashes to a partition of the topic it leads. The runtime (broker/coordinator/runtime.py) loads such a partition by
replaying its records into a store, routes requests to it (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS), and
appends each record the store asks for with acks=all up to ``share.coordinator.write.timeout.ms`` before the answer
goes out. The store changes as it answers, in the order the records are appended; a failed append leaves it ahead of
the log, so the shard is rebuilt from the log then, as a load would (the failed record is there only if it was
written, and a later leader reads the same).

The topic is created on first use like ``__transaction_state``, but not compacted (``internal_topic_request``): a
share-partition's last snapshot and the updates after it are all needed. Records older than every key's latest
snapshot are not deleted yet (Kafka prunes them with DeleteRecords).
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any

from odradek.broker.config import NodeConfig
from odradek.broker.coordinator.clock import Clock
from odradek.broker.coordinator.runtime import CoordinatorPartition, CoordinatorRuntime
from odradek.broker.groups.record_codec import OffsetsRecordError
from odradek.broker.partition import Partition
from odradek.broker.share.state_records import (
    RecordState,
    SharePartitionKey,
    ShareState,
    ShareStateRecord,
    ShareStateStore,
    StateBatch,
    StateWrite,
    decode_record,
    encode_record,
)
from odradek.client.common.access import OPEN, AccessControl
from odradek.client.common.acls import AclOperation
from odradek.client.common.caller import caller_of
from odradek.client.common.metadata_image import MetadataImage
from odradek.client.common.topic_rules import SHARE_STATE_TOPIC
from odradek.client.errors import ErrorCode
from odradek.client.record.batch import Bytes, read_batches
from odradek.client.record.builder import BatchBuilder
from odradek.proto import share_pb2 as spb
from odradek.proto import share_pb2_grpc

logger = logging.getLogger(__name__)

LOAD_READ_BYTES = 1 << 20


@dataclass(frozen=True, slots=True)
class ShareStateConfig:
    """The node settings of the share coordinator (Kafka's names and defaults)."""

    num_partitions: int = 50  # share.coordinator.state.topic.num.partitions
    replication_factor: int = 3  # share.coordinator.state.topic.replication.factor
    min_isr: int = 2  # share.coordinator.state.topic.min.isr
    snapshot_every: int = 500  # share.coordinator.snapshot.update.records.per.snapshot
    write_timeout_ms: int = 5000  # share.coordinator.write.timeout.ms

    @classmethod
    def from_node(cls, c: NodeConfig) -> ShareStateConfig:
        return cls(
            num_partitions=c["share.coordinator.state.topic.num.partitions"],
            replication_factor=c["share.coordinator.state.topic.replication.factor"],
            min_isr=c["share.coordinator.state.topic.min.isr"],
            snapshot_every=c["share.coordinator.snapshot.update.records.per.snapshot"],
            write_timeout_ms=c["share.coordinator.write.timeout.ms"],
        )


def coordinator_key(key: SharePartitionKey) -> str:
    """Kafka's coordinator key of a share-partition: ``group:topic id:partition``, the id as Kafka prints a Uuid
    (URL-safe base64, unpadded); it picks the partition of ``__share_group_state``."""
    topic = base64.urlsafe_b64encode(key.topic_id).rstrip(b"=").decode()
    return f"{key.group_id}:{topic}:{key.partition}"


class StateShard:
    """The states of one ``__share_group_state`` partition this broker leads."""

    def __init__(self, snapshot_every: int) -> None:
        self.store = ShareStateStore(snapshot_every)
        self.skipped = 0  # records this reader could not decode


StatePartition = CoordinatorPartition[StateShard, None]


@dataclass(frozen=True, slots=True)
class StateAnswer:
    """A request's outcome: its error, and a read's state (None: nothing stored) or an initialization's epoch; a
    summary's leader epoch."""

    error: ErrorCode.ValueType
    message: str = ""
    state: ShareState | None = None
    state_epoch: int = 0
    leader_epoch: int = -1


class ShareStateCoordinator:
    """Every share-partition state this broker coordinates. ``on_leadership`` is the replica manager's leadership
    listener; ``create_topic(partitions, replication_factor)`` asks the active controller for the topic."""

    def __init__(
        self,
        image: Callable[[], MetadataImage],
        config: ShareStateConfig,
        create_topic: Callable[[int, int], Coroutine[Any, Any, None]],
        clock: Callable[[], int] | None = None,
    ) -> None:
        self.config = config
        self.clock = clock or Clock()
        self.runtime: CoordinatorRuntime[StateShard, None] = CoordinatorRuntime(
            self, SHARE_STATE_TOPIC, image, config.num_partitions, config.replication_factor, create_topic,
            config.write_timeout_ms,
        )  # fmt: skip

    # -- what the runtime calls ------------------------------------------------------------------------------------

    def on_leadership(self, partitions: Mapping[tuple[str, int], Partition]) -> None:
        self.runtime.on_leadership(partitions)

    def new_shard(self, index: int) -> StateShard:
        return StateShard(self.config.snapshot_every)

    def replay(self, cp: StatePartition, records: Bytes) -> None:
        _replay(cp.shard, records)

    def on_replayed(self, cp: StatePartition) -> None:
        if cp.shard.skipped:
            logger.warning("%s-%d: %d records skipped", SHARE_STATE_TOPIC, cp.index, cp.shard.skipped)

    def on_loaded(self, cp: StatePartition) -> None:
        pass

    def on_unloaded(self, cp: StatePartition) -> None:
        pass

    def fire_timers(self, cp: StatePartition) -> float | None:
        return None  # no timers: the states change only by requests

    def summary(self, shard: StateShard) -> str:
        return f"{len(shard.store)} share-partition states"

    async def close(self) -> None:
        await self.runtime.close()

    # -- routing ---------------------------------------------------------------------------------------------------

    def find(self, key: SharePartitionKey) -> tuple[ErrorCode.ValueType, int, str, int]:
        """(error, node id, broker listener host, port) of the key's coordinator; creates the topic on first use."""
        return self.runtime.find_coordinator(coordinator_key(key))

    def _route(self, key: SharePartitionKey) -> StatePartition | StateAnswer:
        error, cp = self.runtime.owner(coordinator_key(key))
        if cp is None:
            return StateAnswer(
                error,
                f"not the share coordinator of {SHARE_STATE_TOPIC}-{self.runtime.partition_of(coordinator_key(key))}",
            )
        return cp

    # -- requests --------------------------------------------------------------------------------------------------

    async def read(self, key: SharePartitionKey, leader_epoch: int) -> StateAnswer:
        """ReadShareGroupState by a leader starting to serve the share-partition."""
        cp = self._route(key)
        if isinstance(cp, StateAnswer):
            return cp
        answer = cp.shard.store.read(key, leader_epoch)
        if answer.error != ErrorCode.NONE:
            return StateAnswer(answer.error, "a newer leader read this share-partition")
        if answer.record is not None:
            code = await self._append(cp, answer.record)
            if code != ErrorCode.NONE:
                return StateAnswer(code, "the leader epoch could not be stored")
        return StateAnswer(ErrorCode.NONE, state=answer.state)

    async def read_summary(self, key: SharePartitionKey) -> StateAnswer:
        """ReadShareGroupStateSummary (DescribeShareGroupOffsets): the state as stored, no leader fenced."""
        cp = self._route(key)
        if isinstance(cp, StateAnswer):
            return cp
        store = cp.shard.store
        return StateAnswer(ErrorCode.NONE, state=store.state(key), leader_epoch=store.leader_epoch(key))

    async def write(
        self, key: SharePartitionKey, state_epoch: int, leader_epoch: int, write: StateWrite
    ) -> StateAnswer:
        """WriteShareGroupState: a leader's change, answered once stored."""
        cp = self._route(key)
        if isinstance(cp, StateAnswer):
            return cp
        answer = cp.shard.store.write(key, state_epoch, leader_epoch, write)
        if answer.error != ErrorCode.NONE:
            return StateAnswer(answer.error, "the write is from an older leader or state epoch")
        assert answer.record is not None
        return StateAnswer(await self._append(cp, answer.record))

    async def initialize(self, key: SharePartitionKey, start_offset: int) -> StateAnswer:
        """InitializeShareGroupState: start over at ``start_offset`` (-1: share.auto.offset.reset) at the next state
        epoch."""
        cp = self._route(key)
        if isinstance(cp, StateAnswer):
            return cp
        stored = cp.shard.store.state(key)
        epoch = stored.state_epoch + 1 if stored is not None else 1
        answer = cp.shard.store.initialize(key, epoch, start_offset)
        if answer.error != ErrorCode.NONE:
            return StateAnswer(answer.error)
        assert answer.record is not None
        return StateAnswer(await self._append(cp, answer.record), state_epoch=epoch)

    async def _append(self, cp: StatePartition, record: ShareStateRecord) -> ErrorCode.ValueType:
        """Append one record (already applied to the store); on failure the shard is rebuilt from the log."""
        key, value = encode_record(record)
        builder = BatchBuilder()
        builder.append(self.clock(), key, value)
        code = cp.acknowledged(await self.runtime.append(cp, builder.build()))
        if code != ErrorCode.NONE and cp.current():
            logger.warning(
                "%s-%d: an append failed (%s): the states are read again from the log",
                SHARE_STATE_TOPIC,
                cp.index,
                ErrorCode.Name(ErrorCode.ValueType(code)),
            )
            cp.shard = self._reloaded(cp)
        return ErrorCode.ValueType(code)

    def _reloaded(self, cp: StatePartition) -> StateShard:
        shard = self.new_shard(cp.index)
        log = cp.partition.log
        offset, end = log.log_start_offset, log.log_end_offset
        while offset < end:
            data = log.read(offset, LOAD_READ_BYTES, max_offset=end)
            if not len(data.records):
                break
            _replay(shard, data.records)
            offset = data.next_offset
        return shard


def _replay(shard: StateShard, records: Bytes) -> None:
    for batch in read_batches(records):
        if batch.header.is_control:
            continue
        for record in batch.records():
            if record.key is None:
                shard.skipped += 1
                continue
            try:
                shard.store.replay(
                    decode_record(bytes(record.key), None if record.value is None else bytes(record.value))
                )
            except OffsetsRecordError as e:
                shard.skipped += 1
                logger.warning("%s record at offset %d skipped: %s", SHARE_STATE_TOPIC, record.offset, e)


# -- the gRPC service ------------------------------------------------------------------------------------------------


def key_of(message: spb.SharePartitionKey) -> SharePartitionKey:
    return SharePartitionKey(message.group_id, message.topic_id, message.partition)


def key_message(key: SharePartitionKey) -> spb.SharePartitionKey:
    return spb.SharePartitionKey(group_id=key.group_id, topic_id=key.topic_id, partition=key.partition)


def batches_of(messages: Any) -> tuple[StateBatch, ...]:
    """Stored batches from their messages; a state that cannot be stored (acquired, unknown) raises ValueError."""
    out = []
    for b in messages:
        if b.state not in RecordState._value2member_map_ or b.state == RecordState.ACQUIRED:
            raise ValueError(f"delivery state {b.state} cannot be stored")
        if b.first_offset > b.last_offset:
            raise ValueError(f"batch {b.first_offset}..{b.last_offset} is empty")
        out.append(StateBatch(b.first_offset, b.last_offset, RecordState(b.state), b.delivery_count))
    return tuple(out)


def batch_messages(batches: tuple[StateBatch, ...]) -> list[spb.ShareStateBatch]:
    return [
        spb.ShareStateBatch(
            first_offset=b.first, last_offset=b.last, state=int(b.state), delivery_count=b.delivery_count
        )
        for b in batches
    ]


class ShareCoordinatorService(share_pb2_grpc.ShareCoordinatorServicer):
    """The share coordinator on the broker listener, for the other brokers (cluster ClusterAction under an
    authorizer, as Kafka requires of these inter-broker APIs)."""

    def __init__(self, coordinator: ShareStateCoordinator, access: AccessControl = OPEN) -> None:
        self.coordinator = coordinator
        self.access = access

    def _refused(self, context: Any, api: str) -> bool:
        access = self.access
        return access.enabled and not access.allows_cluster(caller_of(context), AclOperation.CLUSTER_ACTION, api=api)

    async def ReadShareGroupState(self, request, context):
        if self._refused(context, "ReadShareGroupState"):
            return spb.ReadShareGroupStateResponse(error=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        answer = await self.coordinator.read(key_of(request.key), request.leader_epoch)
        response = spb.ReadShareGroupStateResponse(error=answer.error, error_message=answer.message)
        if answer.state is not None:
            response.found = True
            response.state_epoch = answer.state.state_epoch
            response.start_offset = answer.state.start_offset
            response.batches.extend(batch_messages(answer.state.batches))
        return response

    async def ReadShareGroupStateSummary(self, request, context):
        if self._refused(context, "ReadShareGroupStateSummary"):
            return spb.ReadShareGroupStateSummaryResponse(error=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        answer = await self.coordinator.read_summary(key_of(request.key))
        response = spb.ReadShareGroupStateSummaryResponse(
            error=answer.error, error_message=answer.message, leader_epoch=answer.leader_epoch
        )
        if answer.state is not None:
            response.found = True
            response.state_epoch = answer.state.state_epoch
            response.start_offset = answer.state.start_offset
        return response

    async def WriteShareGroupState(self, request, context):
        if self._refused(context, "WriteShareGroupState"):
            return spb.WriteShareGroupStateResponse(error=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        try:
            batches = batches_of(request.batches)
        except ValueError as e:
            return spb.WriteShareGroupStateResponse(error=ErrorCode.INVALID_REQUEST, error_message=str(e))
        answer = await self.coordinator.write(
            key_of(request.key), request.state_epoch, request.leader_epoch, StateWrite(request.start_offset, batches)
        )
        return spb.WriteShareGroupStateResponse(error=answer.error, error_message=answer.message)

    async def InitializeShareGroupState(self, request, context):
        if self._refused(context, "InitializeShareGroupState"):
            return spb.InitializeShareGroupStateResponse(error=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        answer = await self.coordinator.initialize(key_of(request.key), request.start_offset)
        return spb.InitializeShareGroupStateResponse(
            error=answer.error, error_message=answer.message, state_epoch=answer.state_epoch
        )

"""The ``Broker`` gRPC service's data plane: Metadata, Produce, Fetch, ListOffsets and InitProducerId (and
GetReplicaLogInfo, the controller's look at a replica's log for unclean recovery, and DescribeLogDirs).

Requests carry many partitions each (a Python gRPC server pays ~0.3 ms of CPU per RPC whatever its
size, so the clients batch). Every partition gets its own typed error; a partition this broker does not lead
answers NOT_LEADER_OR_FOLLOWER with the current leader from the metadata image, so clients can re-route without
a metadata round trip. Fetches long-poll in a purgatory: a fetch that finds less than ``min_bytes`` parks a
future on each of its partitions and is completed when the high watermark moves (consumers) or by the next append
(followers, whose fetches with ``replica_id`` >= 0 read up to the log end offset and report their progress), or by
``max_wait_ms``. Consumer and follower fetches share one read loop; what differs (the read bound, progress
reporting, error answers, bytes-out accounting) is a ``_FetchKind``. ``acks=all`` produces wait in the same way
until the high watermark covers their batches.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import grpc

from odradek.broker import delete_records, describe_log_dirs
from odradek.broker.auto_create import TopicAutoCreation
from odradek.broker.fetch_sessions import SessionRound
from odradek.broker.log.producer_state import NO_VERIFICATION, VerificationGuard
from odradek.broker.log.rewrite import LOG_APPEND_TIME
from odradek.broker.log_dir_moves import LogDirMoves
from odradek.broker.metrics import NodeMetrics
from odradek.broker.partition import FollowerRead, LowWatermark, Partition
from odradek.broker.producer_ids import ProducerIdManager
from odradek.broker.replica_manager import ReplicaManager, monotonic_ms
from odradek.broker.throttling import BrokerQuotas, current_client
from odradek.broker.transactions.coordinator import TransactionCoordinator
from odradek.broker.txn_verifier import TxnVerifier
from odradek.client.common.access import OPEN, AccessControl, denial
from odradek.client.common.acls import AclOperation, ResourceType
from odradek.client.common.caller import Caller, caller_of
from odradek.client.common.metadata_image import MetadataImage
from odradek.client.common.topic_rules import INTERNAL_TOPICS, validate_topic_name
from odradek.client.errors import (
    ErrorCode,
    InvalidRequestError,
    InvalidTxnStateError,
    NotLeaderOrFollowerError,
    OdradekError,
    error_for_code,
    error_name,
)
from odradek.client.record.header import HEADER_SIZE, TRANSACTIONAL_FLAG, parse_header
from odradek.client.structs import TopicPartition
from odradek.proto import broker_pb2 as pb
from odradek.proto import broker_pb2_grpc, common_pb2

logger = logging.getLogger(__name__)

EARLIEST, LATEST = -2, -1
# Kafka's other ListOffsets specs: the record with the largest timestamp (KIP-734), the start of the local log and
# the end of what tiered storage holds (KIP-405; odradek keeps every segment local).
MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED = -3, -4, -5
CONSUMER_REPLICA_ID = -1
NO_PRODUCER_ID = NO_PRODUCER_EPOCH = -1
# As Kafka: an epoch is bumped only below int16 max - 1; past that the producer gets a fresh id at epoch 0.
MAX_PRODUCER_EPOCH = 32766


# Fetch errors answered with the current leader, so the consumer need not ask for metadata (OFFSET_NOT_AVAILABLE:
# the leader is right, only its high watermark is catching up).
_HINTED_FETCH_ERRORS = frozenset(
    {ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.OFFSET_NOT_AVAILABLE}
)


def _leader_hint(image: MetadataImage, topic: str, partition: int) -> common_pb2.LeaderHint | None:
    state = image.partition(topic, partition)
    if state is None:
        return None
    return common_pb2.LeaderHint(leader_id=state.leader, leader_epoch=state.leader_epoch)


DEFAULT_FETCH_MAX_BYTES = 57_671_680
# ListOffsets errors answered without the leader: re-routing cannot help with these.
_UNHINTED_LIST_OFFSETS_ERRORS = frozenset({ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.TOPIC_AUTHORIZATION_FAILED})
_NONE_DENIED: Mapping[str, OdradekError] = {}


_ATTRIBUTES_LOW_BYTE = 22  # the low byte of a batch's attributes, which holds the transactional flag

Records = bytes | bytearray | memoryview
ProduceTopics = Sequence[tuple[str, Sequence[tuple[int, Records]]]]
"""A produce request's data, whatever the listener: (topic, [(partition, record batches)]) in request order."""


class ProduceResult:
    """One partition's answer to a produce request (``error`` None: appended at ``base_offset``)."""

    __slots__ = ("base_offset", "error", "log_append_time_ms", "log_start_offset", "partition")

    def __init__(
        self,
        partition: int,
        error: OdradekError | None = None,
        base_offset: int = -1,
        log_append_time_ms: int = -1,
        log_start_offset: int = -1,
    ) -> None:
        self.partition = partition
        self.error = error
        self.base_offset = base_offset
        self.log_append_time_ms = log_append_time_ms
        self.log_start_offset = log_start_offset

    def fail(self, error: OdradekError) -> None:
        self.error, self.base_offset, self.log_append_time_ms = error, -1, -1


def _transactional_without_id(topics: ProduceTopics) -> dict[tuple[str, int], OdradekError]:
    """Transactional batches in a request without a transactional id are refused: no coordinator could verify or
    end their transaction. One byte per partition, so plain produce requests pay next to nothing."""
    refused: dict[tuple[str, int], OdradekError] = {}
    for name, partitions in topics:
        for index, records in partitions:
            if len(records) > _ATTRIBUTES_LOW_BYTE and records[_ATTRIBUTES_LOW_BYTE] & TRANSACTIONAL_FLAG:
                refused[(name, index)] = InvalidTxnStateError(
                    "a transactional batch needs the producer's transactional id in the request"
                )
    return refused


class _FetchKind(NamedTuple):
    """What differs between a consumer's and a follower's pass over a Fetch request's partitions."""

    read: Callable[[Partition, Any, int], FollowerRead]  # one partition, at most ``int`` bytes
    max_bytes: int  # the request's byte budget
    count_bytes_out: bool  # whether record bytes count as the topic's bytes out


class FetchOutcome(NamedTuple):
    """One partition's answer to a fetch, whatever the listener: what was read, or the error."""

    partition: int
    read: FollowerRead | None
    error: OdradekError | None = None


FetchOutcomes = list[tuple[str, list[FetchOutcome]]]


class FetchAnswer(NamedTuple):
    """A fetch request's answer: each partition's outcome in request order (none when the client was throttled
    before the read), the fetch quota's throttle (ms), whether a follower's broker epoch was stale, and an error of
    the whole request (a replica fetch without cluster ClusterAction)."""

    outcomes: FetchOutcomes
    throttle_ms: int = 0
    stale_epoch: bool = False
    error: int = 0


class _FetchPass(NamedTuple):
    outcomes: FetchOutcomes | None  # None: the follower's broker epoch is stale
    total: int  # bytes found (an error or a divergence counts 1: worth answering now)
    waiting: list[Partition]  # partitions that had nothing, to wait on
    sizes: dict[str, int]  # record bytes per topic, counted as bytes out for consumers


def close_outcomes(outcomes: FetchOutcomes | None) -> None:
    """Close the file slices of a pass that is not sent (the purgatory read again)."""
    for _, parts in outcomes or ():
        for o in parts:
            if o.read is not None and o.read.data is not None:
                close = getattr(o.read.data.records, "close", None)
                if close is not None:
                    close()


class BrokerService(broker_pb2_grpc.BrokerServicer):
    def __init__(
        self,
        broker_id: int,
        cluster_id: str,
        replicas: ReplicaManager,
        metrics: NodeMetrics | None = None,
        *,
        controller_id: Callable[[], int] = lambda: -1,
        session_valid: Callable[[], bool] = lambda: True,
        producer_ids: ProducerIdManager | None = None,
        fetch_max_bytes: int = DEFAULT_FETCH_MAX_BYTES,
        uncleanable: Callable[[], Mapping[tuple[str, int], str]] = dict,
        verifier: TxnVerifier | None = None,
        transactions: TransactionCoordinator | None = None,
        quotas: BrokerQuotas | None = None,
        access: AccessControl = OPEN,
        auto_create: TopicAutoCreation | None = None,
        log_dir_moves: LogDirMoves | None = None,
    ) -> None:
        self.metrics = metrics or NodeMetrics(broker_id)
        self.broker_id = broker_id
        self.cluster_id = cluster_id
        self.replicas = replicas
        # The active controller's id as this broker knows it (-1: none), for Metadata answers.
        self.controller_id = controller_id
        # False while this broker cannot know it still leads: no controller session for a whole session timeout
        # (e.g. the process was paused). Writes are refused then; the controller has fenced it or soon will.
        self.session_valid = session_valid
        # Given by the node (it needs the controller connection); without it InitProducerId is refused.
        self.producer_ids = producer_ids
        # The node's fetch.max.bytes: the most record bytes one consumer Fetch answer carries (beyond one batch).
        self.fetch_max_bytes = fetch_max_bytes
        # The log cleaner's uncleanable partitions and why (DescribeLogDirs reports them).
        self.uncleanable = uncleanable
        # Asks transaction coordinators about a producer's first transactional batch on a partition.
        self.verifier = verifier
        # This broker's transaction coordinator: InitProducerId with a transactional id goes there.
        self.transactions = transactions
        # Client quotas: produce bytes are charged after the append, fetch bytes checked before the read.
        self.quotas = quotas
        # Authorization (ACLs): what each API needs is checked here, for both listeners.
        self.access = access
        # Creates the missing topics a Metadata request names and allows creating (auto.create.topics.enable);
        # None: the node does not.
        self.auto_create = auto_create
        # Replicas moving between this broker's log dirs (AlterReplicaLogDirs); the broker passes its own.
        self._log_dir_moves = log_dir_moves

    def caller(self, context: Any) -> Caller | None:
        """The request's caller when an authorizer decides, else None (no check, no cost)."""
        return caller_of(context) if self.access.enabled else None

    def _topic_denials(self, context: Any, operation: AclOperation, topics: Any, api: str) -> dict[str, OdradekError]:
        """The topics of a request (anything with ``.name``) the caller may not perform ``operation`` on, with the
        error each of their partitions answers."""
        caller = self.caller(context)
        if caller is None:
            return {}
        names = self.access.denied(caller, operation, ResourceType.TOPIC, (t.name for t in topics), api=api)
        return {name: denial(caller, operation, ResourceType.TOPIC, name) for name in names}

    def _cluster_allowed(self, context: Any, operation: AclOperation, api: str) -> bool:
        caller = self.caller(context)
        return caller is None or self.access.allows_cluster(caller, operation, api=api)

    def _init_producer_id_refusal(self, caller: Caller, transactional_id: str) -> ErrorCode.ValueType:
        """A transactional producer needs Write on its transactional id; an idempotent one cluster IdempotentWrite
        or, as Kafka since KIP-679, Write on some topic."""
        access = self.access
        if transactional_id:
            if access.allows(
                caller, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id, api="InitProducerId"
            ):
                return ErrorCode.NONE
            return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        if access.allows_some(caller, AclOperation.WRITE, ResourceType.TOPIC) or access.allows_cluster(
            caller, AclOperation.IDEMPOTENT_WRITE, api="InitProducerId"
        ):
            return ErrorCode.NONE
        return ErrorCode.CLUSTER_AUTHORIZATION_FAILED

    @property
    def image(self) -> MetadataImage:
        return self.replicas.image

    # ---- Metadata ----

    async def Metadata(
        self, request: pb.MetadataRequest, context: grpc.aio.ServicerContext[pb.MetadataRequest, pb.MetadataResponse]
    ) -> pb.MetadataResponse:
        image = self.image
        brokers = [
            common_pb2.Node(node_id=b.broker_id, host=b.host, port=b.port, rack=b.rack)
            for b in sorted(image.brokers.values(), key=lambda b: b.broker_id)
            if not b.fenced
        ]
        live = {b.node_id for b in brokers}
        caller = self.caller(context)
        every = request.all_topics or not request.topics
        names = sorted(image.topic_ids) if every else list(request.topics)
        # Only topics named one by one are created (as Kafka: never for a request for every topic).
        auto_create = self.auto_create if request.allow_auto_topic_creation and not every else None
        missing: list[str] = []
        topics = []
        for name in names:
            if caller is not None and not self.access.allows(
                caller, AclOperation.DESCRIBE, ResourceType.TOPIC, name, api="Metadata", audit_denial=not every
            ):
                if not every:  # a listing of every topic leaves out those the caller may not describe
                    topics.append(pb.TopicMetadata(name=name, error=ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                continue
            topic = image.topic(name)
            if topic is None:
                # As Kafka: a name no topic may have is INVALID_TOPIC_EXCEPTION, not unknown.
                invalid = validate_topic_name(name) is not None
                error = ErrorCode.INVALID_TOPIC_EXCEPTION if invalid else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                topics.append(pb.TopicMetadata(name=name, error=error))
                missing.append(name)
                continue
            partitions = []
            for p in sorted(topic.partitions.values(), key=lambda p: p.partition):
                offline = [r for r in p.replicas if r not in live]
                partitions.append(
                    pb.PartitionMetadata(
                        partition=p.partition,
                        error=ErrorCode.NONE if p.leader in live else ErrorCode.LEADER_NOT_AVAILABLE,
                        leader=p.leader if p.leader in live else -1,
                        leader_epoch=p.leader_epoch,
                        replicas=p.replicas,
                        isr=p.isr,
                        offline_replicas=offline,
                    )
                )
            topics.append(
                pb.TopicMetadata(
                    name=name, topic_id=topic.topic_id, is_internal=name in INTERNAL_TOPICS, partitions=partitions
                )
            )
        if auto_create is not None and missing:
            created = await auto_create.create(missing, context)
            for t in topics:
                if t.name in created and not t.partitions:
                    t.error = created[t.name]
        return pb.MetadataResponse(
            brokers=brokers,
            cluster_id=self.cluster_id,
            controller_id=self.controller_id(),
            topics=topics,
            metadata_offset=image.offset,
        )

    # ---- Produce ----

    def leader_hint(self, topic: str, partition: int, error: OdradekError) -> common_pb2.LeaderHint | None:
        """The current leader, for an error after which the client must re-route (so it need not ask for
        metadata first)."""
        if error.code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH):
            return _leader_hint(self.image, topic, partition)
        return None

    async def Produce(
        self, request: pb.ProduceRequest, context: grpc.aio.ServicerContext[pb.ProduceRequest, pb.ProduceResponse]
    ) -> pb.ProduceResponse:
        topics = [(t.name, [(p.partition, p.records) for p in t.partitions]) for t in request.topics]
        answers, throttle = await self.produce(
            request.acks, request.timeout_ms, request.transactional_id, topics, self.caller(context)
        )
        # Responses are built in place (``add``) rather than from lists of messages: upb deep-copies every
        # message passed to a constructor, once per nesting level.
        response = pb.ProduceResponse(throttle_time_ms=throttle)
        for name, results in answers:
            add = response.topics.add(name=name).partitions.add
            for r in results:
                e = r.error
                if e is None:
                    add(
                        partition=r.partition,
                        base_offset=r.base_offset,
                        log_append_time_ms=r.log_append_time_ms,
                        log_start_offset=r.log_start_offset,
                    )
                    continue
                out = add(
                    partition=r.partition,
                    error=ErrorCode.ValueType(e.code),
                    base_offset=-1,
                    log_append_time_ms=-1,
                    error_message=str(e),
                )
                hint = self.leader_hint(name, r.partition, e)
                if hint is not None:
                    out.current_leader.CopyFrom(hint)
        return response

    async def produce(
        self,
        acks: int,
        timeout_ms: int,
        transactional_id: str | None,
        topics: ProduceTopics,
        caller: Caller | None = None,
    ) -> tuple[list[tuple[str, list[ProduceResult]]], int]:
        """Append a produce request's batches as the leader: each partition's result, in request order, and the
        produce quota's throttle (ms). The one implementation behind both listeners (gRPC and Kafka). ``caller``:
        who asks, when an authorizer decides (topic Write, and transactional-id Write for a transactional request).

        ``acks=-1`` waits until every batch is below its partition's high watermark (the produce purgatory); a
        batch not committed in ``timeout_ms`` answers REQUEST_TIMED_OUT."""
        if acks not in (0, 1, -1):
            invalid = OdradekError(f"acks must be 0, 1 or -1, not {acks}", code=ErrorCode.INVALID_REQUIRED_ACKS)
            return [(name, [ProduceResult(index, invalid) for index, _ in parts]) for name, parts in topics], 0
        unauthorized: dict[tuple[str, int], OdradekError] = {}
        if caller is not None:
            refusals = self._produce_refusals(caller, transactional_id, topics)
            if isinstance(refusals, list):
                return refusals, 0
            unauthorized = refusals
        get = self.replicas.get
        lost_session = not self.session_valid()
        guards: dict[tuple[str, int], VerificationGuard] | None = None  # None: no transactional id, nothing verified
        if transactional_id:
            denied = {name for name, _ in unauthorized}
            allowed = [(name, parts) for name, parts in topics if name not in denied] if denied else topics
            refused, guards = (
                await self._verify_transactional(transactional_id, allowed) if not lost_session else ({}, {})
            )
        else:
            refused = _transactional_without_id(topics)
        answers: list[tuple[str, list[ProduceResult]]] = []
        waits: list[tuple[ProduceResult, asyncio.Future]] = []
        size = 0
        for name, parts in topics:
            results: list[ProduceResult] = []
            answers.append((name, results))
            appended = records = 0
            for index, batches in parts:
                size += len(batches)
                try:
                    if unauthorized and (error := unauthorized.get((name, index))) is not None:
                        raise error
                    if name in INTERNAL_TOPICS:  # written only by the cluster itself (the group coordinator)
                        raise OdradekError(
                            f"cannot append to internal topic {name}", code=ErrorCode.INVALID_TOPIC_EXCEPTION
                        )
                    if lost_session:
                        raise NotLeaderOrFollowerError(f"broker {self.broker_id} has no controller session")
                    if refused and (error := refused.get((name, index))) is not None:
                        raise error
                    partition = get(name, index)
                    verification = None if guards is None else guards.get((name, index), NO_VERIFICATION)
                    info = partition.append_as_leader(batches, acks=acks, verification=verification)
                except OdradekError as e:
                    results.append(ProduceResult(index, e))
                    continue
                appended += info.size
                records += info.record_count
                log_append_time = partition.log.config.message_timestamp_type == LOG_APPEND_TIME
                r = ProduceResult(
                    index,
                    base_offset=info.first_offset,
                    log_append_time_ms=info.max_timestamp if log_append_time else -1,
                    log_start_offset=info.log_start_offset,
                )
                results.append(r)
                if acks == -1:
                    waits.append((r, partition.wait_for_commit(info.last_offset + 1)))
            if appended:
                self.metrics.bytes_in.labels(name).inc(appended)
                self.metrics.messages_in.labels(name).inc(records)
        throttle = 0
        if self.quotas is not None and self.quotas.produce.enabled:
            throttle = self._charge_produce(size)
        if waits:
            await self._wait_for_commit(waits, timeout_ms)
        return answers, throttle

    def _produce_refusals(
        self, caller: Caller, transactional_id: str | None, topics: ProduceTopics
    ) -> dict[tuple[str, int], OdradekError] | list[tuple[str, list[ProduceResult]]]:
        """What the caller may not write, as Kafka decides: without transactional-id Write the whole request fails
        (the answer itself); without topic Write on a topic, that topic's partitions fail (the refusals) and the
        others are written."""
        access = self.access
        if transactional_id and not access.allows(
            caller, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id, api="Produce"
        ):
            error = denial(caller, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id)
            return [(name, [ProduceResult(index, error) for index, _ in parts]) for name, parts in topics]
        denied = access.denied(caller, AclOperation.WRITE, ResourceType.TOPIC, (n for n, _ in topics), api="Produce")
        return {
            (name, index): denial(caller, AclOperation.WRITE, ResourceType.TOPIC, name)
            for name, parts in topics
            if name in denied
            for index, _ in parts
        }

    def _charge_produce(self, size: int) -> int:
        """Charge a request's record bytes to its client's produce quota, after the append (as Kafka: the
        records are kept, and the client is held back afterwards); the throttle in ms."""
        who, quotas = current_client(), self.quotas
        if who is None or quotas is None:
            return 0
        quota, now = quotas.produce, quotas.clock()
        throttle = quota.record(who.user, who.client_id, size, now)
        if throttle > 0:
            quota.record_throttle(who.user, who.client_id, throttle, now)
        return throttle

    async def _verify_transactional(
        self, transactional_id: str, topics: ProduceTopics
    ) -> tuple[dict[tuple[str, int], OdradekError], dict[tuple[str, int], VerificationGuard]]:
        """The partitions of a transactional produce request that must not be appended, with their errors: a
        producer's first transactional batch on a partition that its coordinator does not list in the producer's ongoing
        transaction (txn_verifier.py). Anything else is left to the append, which has the right errors.

        Also the verification guards of the partitions asked about, taken before asking: the append presents them
        (a partition not among them presents NO_VERIFICATION), so a marker written while the coordinator answers,
        or while this request waits for it, makes the append refuse the batch rather than open a transaction after
        the marker (Log.append_as_leader)."""
        refused: dict[tuple[str, int], OdradekError] = {}
        guards: dict[tuple[str, int], VerificationGuard] = {}
        pending: dict[tuple[int, int], list[TopicPartition]] = {}
        partitions = self.replicas.partitions
        for name, parts in topics:
            for index, records in parts:
                if len(records) < HEADER_SIZE:
                    continue
                header = parse_header(records)
                if not header.is_transactional:
                    continue
                partition = partitions.get((name, index))
                if partition is None or not partition.is_leader:
                    continue
                pid, epoch = header.producer_id, header.producer_epoch
                guard = partition.log.start_transaction_verification(pid, epoch)
                if guard is not NO_VERIFICATION:
                    guards[(name, index)] = guard
                    pending.setdefault((pid, epoch), []).append(TopicPartition(name, index))
        if pending and self.verifier is None:
            for tps in pending.values():
                for tp in tps:
                    refused[(tp.topic, tp.partition)] = OdradekError(
                        "this broker cannot verify transactions", code=ErrorCode.NOT_ENOUGH_REPLICAS
                    )
        elif pending:
            assert self.verifier is not None
            for (pid, epoch), tps in pending.items():
                answers = await self.verifier.verify(transactional_id, pid, epoch, tps)
                for tp, code in answers.items():
                    if code != ErrorCode.NONE:
                        refused[(tp.topic, tp.partition)] = error_for_code(
                            code,
                            f"{tp.topic}-{tp.partition} is not in the ongoing transaction of producer {pid}"
                            f" at epoch {epoch} ({error_name(code)})",
                        )
        return refused, guards

    async def _wait_for_commit(self, waits: list[tuple[ProduceResult, asyncio.Future]], timeout_ms: int) -> None:
        """acks=all: hold the answer until every batch is below its partition's high watermark (the produce
        purgatory); a batch not committed in ``timeout_ms`` answers REQUEST_TIMED_OUT."""
        futures = [f for _, f in waits]
        await asyncio.wait(futures, timeout=(timeout_ms if timeout_ms > 0 else 30000) / 1000)
        for r, future in waits:
            if not future.done():
                future.cancel()
                code, message = ErrorCode.REQUEST_TIMED_OUT, "not replicated to the ISR in time"
            else:
                code, message = future.result(), ""
            if code != ErrorCode.NONE:
                r.fail(error_for_code(code, message or ErrorCode.Name(code)))

    # ---- Fetch ----

    def _read(
        self, request, cap: int | None = None, as_file: bool = False, denied: Mapping[str, OdradekError] = _NONE_DENIED
    ) -> _FetchPass:
        """One pass over the requested partitions. Consumers and followers share this loop; ``_FetchKind`` holds
        what differs between them. ``as_file``: records as file slices of the segments (the Kafka listener sends
        them with sendfile) rather than bytes. ``denied``: topics the consumer may not read."""
        kind = (
            self._follower_fetch(request, as_file)
            if request.replica_id >= 0
            else self._consumer_fetch(request, cap, as_file)
        )
        if kind is None:
            return _FetchPass(None, 1, [], {})
        get = self.replicas.get
        read_one, count_bytes_out = kind.read, kind.count_bytes_out
        remaining = kind.max_bytes
        total = 0
        outcomes: FetchOutcomes = []
        waiting: list[Partition] = []
        sizes: dict[str, int] = {}
        follower = request.replica_id >= 0
        for t in request.topics:
            name = t.name
            results: list[FetchOutcome] = []
            outcomes.append((name, results))
            refusal = denied.get(name) if denied else None
            for fp in t.partitions:
                index = fp.partition
                try:
                    if refusal is not None:
                        raise refusal
                    partition = get(name, index)
                    read = read_one(partition, fp, min(fp.partition_max_bytes, remaining))
                except OdradekError as e:
                    results.append(FetchOutcome(index, None, e))
                    total += 1  # an error is worth answering now
                    continue
                results.append(FetchOutcome(index, read))
                if read.diverging is not None:
                    total += 1
                    continue
                if follower and fp.log_start_offset < read.log_start_offset:
                    total += 1  # a follower behind our log start (DeleteRecords) learns it now, not at max_wait_ms
                assert read.data is not None  # set whenever no divergence is reported
                size = len(read.data.records)
                total += size
                remaining = max(1, remaining - size)
                if size:
                    if count_bytes_out:
                        sizes[name] = sizes.get(name, 0) + size
                else:
                    waiting.append(partition)
        return _FetchPass(outcomes, total, waiting, sizes)

    def _fetch_response(self, request, answer: FetchAnswer) -> pb.FetchResponse:
        """The gRPC answer. Built in place (``add``): upb deep-copies messages passed to a constructor, which for
        lists of partition responses meant copying every record payload once per nesting level."""
        response = pb.FetchResponse(throttle_time_ms=answer.throttle_ms)
        if answer.stale_epoch:
            response.error = ErrorCode.STALE_BROKER_EPOCH
            return response
        if answer.error:
            response.error = ErrorCode.ValueType(answer.error)
            return response
        follower = request.replica_id >= 0
        for name, outcomes in answer.outcomes:
            add = response.topics.add(name=name).partitions.add
            for o in outcomes:
                read, e = o.read, o.error
                if read is None:
                    assert e is not None
                    r = add(partition=o.partition, error=e.code, high_watermark=-1, last_stable_offset=-1)
                    if follower:
                        r.log_start_offset, r.log_end_offset = self.replica_error_bounds(name, o.partition, e)
                    else:
                        r.log_start_offset = -1
                        hint = self.fetch_leader_hint(name, o.partition, e)
                        if hint is not None:
                            r.current_leader.CopyFrom(hint)
                    continue
                r = add(
                    partition=o.partition,
                    high_watermark=read.high_watermark,
                    last_stable_offset=read.high_watermark if read.last_stable_offset < 0 else read.last_stable_offset,
                    log_start_offset=read.log_start_offset,
                    log_end_offset=read.log_end_offset,
                    all_replicas_offset=read.all_replicas_offset,
                )
                if read.aborted:
                    add_aborted = r.aborted_transactions.add
                    for txn in read.aborted:
                        add_aborted(producer_id=txn.producer_id, first_offset=txn.first_offset)
                if read.diverging is not None:
                    r.diverging_epoch.epoch = read.diverging.epoch
                    r.diverging_epoch.end_offset = read.diverging.end_offset
                    continue
                assert read.data is not None
                records = read.data.records
                if len(records):
                    # upb takes only bytes; bytes() of a bytes object is that object, so only a view is copied.
                    r.records = bytes(records)
        return response

    def replica_error_bounds(self, topic: str, partition: int, error: OdradekError) -> tuple[int, int]:
        """(log start, log end offset) a follower's error answer carries: the partition's own for OFFSET_OUT_OF_RANGE
        (the follower restarts at the start or truncates to the end), else (0, 0), unused."""
        if error.code == ErrorCode.OFFSET_OUT_OF_RANGE:
            p = self.replicas.partitions.get((topic, partition))
            if p is not None:
                return p.log.log_start_offset, p.log.log_end_offset
        return 0, 0

    def fetch_leader_hint(self, topic: str, partition: int, error: OdradekError) -> common_pb2.LeaderHint | None:
        """The current leader for a consumer's fetch error that re-routes it (OFFSET_NOT_AVAILABLE: the leader
        is right, only its high watermark is catching up)."""
        return _leader_hint(self.image, topic, partition) if error.code in _HINTED_FETCH_ERRORS else None

    def _consumer_fetch(self, request, cap: int | None = None, as_file: bool = False) -> _FetchKind:
        """A consumer's fetch: records below the (visible) high watermark, capped by the broker's fetch.max.bytes
        too (as Kafka; a follower's is not)."""
        options = {"as_file": True} if as_file else {}

        def read(partition: Partition, fp: Any, max_bytes: int) -> FollowerRead:
            data = partition.read(fp.fetch_offset, max_bytes, fp.current_leader_epoch, **options)
            lso = min(data.high_watermark, partition.log.last_stable_offset)
            return FollowerRead(data, None, data.high_watermark, data.log_start_offset, data.log_end_offset, -1, lso)

        def read_committed(partition: Partition, fp: Any, max_bytes: int) -> FollowerRead:
            data, lso, aborted = partition.read_committed(
                fp.fetch_offset, max_bytes, fp.current_leader_epoch, **options
            )
            return FollowerRead(
                data, None, data.high_watermark, data.log_start_offset, data.log_end_offset, -1, lso, aborted
            )

        max_bytes = min(request.max_bytes if request.max_bytes > 0 else 1 << 62, self.fetch_max_bytes, cap or 1 << 62)
        committed = request.isolation_level == pb.READ_COMMITTED
        return _FetchKind(read_committed if committed else read, max_bytes, count_bytes_out=True)

    def _follower_fetch(self, request, as_file: bool = False) -> _FetchKind | None:
        """A follower's fetch: records up to the log end offset, divergence answers, and its progress recorded
        (which may move the high watermark and the ISR). None if the follower's broker epoch is stale. ``as_file``:
        records as file slices (the Kafka listener)."""
        replica = request.replica_id
        registered = self.image.brokers.get(replica)
        if registered is None or request.replica_epoch < registered.epoch:
            return None
        now = monotonic_ms()

        def read(partition: Partition, fp: Any, max_bytes: int) -> FollowerRead:
            return partition.read_for_follower(
                replica,
                fp.fetch_offset,
                fp.last_fetched_epoch,
                max_bytes,
                fp.current_leader_epoch,
                now,
                fp.log_start_offset,
                fp.durable_offset,
                as_file=as_file,
            )

        max_bytes = request.max_bytes if request.max_bytes > 0 else 1 << 62
        return _FetchKind(read, max_bytes, count_bytes_out=False)

    async def Fetch(
        self, request: pb.FetchRequest, context: grpc.aio.ServicerContext[pb.FetchRequest, pb.FetchResponse]
    ) -> pb.FetchResponse:
        return self._fetch_response(request, await self.fetch(request, caller=self.caller(context)))

    async def fetch(
        self, request, as_file: bool = False, caller: Caller | None = None, session: SessionRound | None = None
    ) -> FetchAnswer:
        """Serve a fetch (consumer or follower), the one implementation behind both listeners. ``request`` is a
        gRPC FetchRequest or anything with its field names. A consumer's fetch quota is checked before the read (a
        client over it gets no data and is not charged) and charged after; one answer exceeds it by one window
        at most. ``caller``: who asks, when an authorizer decides (a follower needs cluster ClusterAction, a
        consumer topic Read on each topic). ``session``: an incremental fetch session's round (fetch_sessions.py),
        which reads and waits in place of the per-partition long poll."""
        denied: Mapping[str, OdradekError] = _NONE_DENIED
        if caller is not None:
            if request.replica_id >= 0:
                if not self.access.allows_cluster(caller, AclOperation.CLUSTER_ACTION, api="Fetch"):
                    return FetchAnswer([], 0, error=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
            else:
                names = session.topic_names() if session is not None else (t.name for t in request.topics)
                unreadable = self.access.denied(caller, AclOperation.READ, ResourceType.TOPIC, names, api="Fetch")
                denied = {n: denial(caller, AclOperation.READ, ResourceType.TOPIC, n) for n in unreadable}
        quotas = self.quotas
        who = current_client() if quotas is not None and quotas.fetch.enabled and request.replica_id < 0 else None
        cap = None
        if quotas is not None and who is not None:
            now = quotas.clock()
            throttle = quotas.fetch.throttle_time(who.user, who.client_id, now)
            if throttle > 0:
                quotas.fetch.record_throttle(who.user, who.client_id, throttle, now)
                return FetchAnswer([], throttle)
            window = quotas.fetch.max_value_in_window(who.user, who.client_id)
            cap = None if window is None else max(1, int(window))
        if session is not None:
            done = await session.run(lambda r: self._read(r, cap, as_file, denied), request)
        else:
            done = await self._fetch(request, cap, as_file, denied)
        if done.outcomes is None:
            return FetchAnswer([], 0, stale_epoch=True)
        for topic, size in done.sizes.items():
            self.metrics.bytes_out.labels(topic).inc(size)
        throttle = 0
        if quotas is not None and who is not None:
            now = quotas.clock()
            throttle = quotas.fetch.record(who.user, who.client_id, sum(done.sizes.values()), now)
            if throttle > 0:
                quotas.fetch.record_throttle(who.user, who.client_id, throttle, now)
        return FetchAnswer(done.outcomes, throttle)

    async def _fetch(self, request, cap: int | None, as_file: bool, denied: Mapping[str, OdradekError]) -> _FetchPass:
        """Read, and long-poll in the purgatory while less than ``min_bytes`` was found. ``cap``: the most record
        bytes this answer may carry (a consumer's fetch quota), beyond one batch."""
        done = self._read(request, cap, as_file, denied)
        min_bytes = max(1, request.min_bytes)
        if done.total >= min_bytes or request.max_wait_ms <= 0 or not done.waiting:
            return done
        loop = asyncio.get_running_loop()
        deadline = time.monotonic() + request.max_wait_ms / 1000
        replica = request.replica_id >= 0
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return done
            future = loop.create_future()
            waiting = done.waiting
            for partition in waiting:
                partition.add_waiter(future, replica)
            try:
                async with asyncio.timeout(remaining):
                    await future
            except TimeoutError:
                close_outcomes(done.outcomes)
                return self._read(request, cap, as_file, denied)
            finally:
                for partition in waiting:
                    partition.remove_waiter(future, replica)
            close_outcomes(done.outcomes)
            done = self._read(request, cap, as_file, denied)
            if done.total >= min_bytes or not done.waiting:
                return done

    # ---- ListOffsets ----

    async def ListOffsets(
        self,
        request: pb.ListOffsetsRequest,
        context: grpc.aio.ServicerContext[pb.ListOffsetsRequest, pb.ListOffsetsResponse],
    ) -> pb.ListOffsetsResponse:
        denied = self._topic_denials(context, AclOperation.DESCRIBE, request.topics, "ListOffsets")
        topics = []
        for t in request.topics:
            results = []
            for lp in t.partitions:
                try:
                    if t.name in denied:
                        raise denied[t.name]
                    partition = self.replicas.get(t.name, lp.partition)
                    partition.check_leader(lp.current_leader_epoch)
                    offset, timestamp = self._offset_for(
                        partition, lp.timestamp, request.isolation_level == pb.READ_COMMITTED
                    )
                    results.append(
                        pb.ListOffsetsPartitionResponse(
                            partition=lp.partition,
                            offset=offset,
                            timestamp=timestamp,
                            leader_epoch=partition.leader_epoch,
                        )
                    )
                except OdradekError as e:
                    r = pb.ListOffsetsPartitionResponse(
                        partition=lp.partition, error=ErrorCode.ValueType(e.code), offset=-1, timestamp=-1
                    )
                    hint = _leader_hint(self.image, t.name, lp.partition)
                    if hint is not None and e.code not in _UNHINTED_LIST_OFFSETS_ERRORS:
                        r.current_leader.CopyFrom(hint)
                    results.append(r)
            topics.append(pb.ListOffsetsTopicResponse(name=t.name, partitions=results))
        return pb.ListOffsetsResponse(topics=topics)

    @staticmethod
    def _offset_for(partition: Partition, timestamp: int, read_committed: bool = False) -> tuple[int, int]:
        """The answer for one partition. While a new leader's high watermark catches up, LATEST (and a timestamp
        not found below it) is OFFSET_NOT_AVAILABLE rather than an end older than one already given out. For
        read_committed the end is the last stable offset, as Kafka answers."""
        log_ = partition.log
        if timestamp in (EARLIEST, EARLIEST_LOCAL):
            return log_.log_start_offset, -1
        if timestamp == LATEST:
            return (partition.last_stable_offset() if read_committed else partition.visible_high_watermark()), -1
        if timestamp == LATEST_TIERED:
            return -1, -1  # nothing is in tiered storage, as Kafka answers for a topic without it
        if timestamp == MAX_TIMESTAMP:
            found = log_.max_timestamp_offset()
        elif timestamp < 0:
            raise InvalidRequestError(f"unsupported ListOffsets timestamp {timestamp}")
        else:
            found = log_.offset_for_timestamp(timestamp)
        end = log_.last_stable_offset if read_committed else log_.high_watermark
        if found is None or found.offset >= end:
            partition.visible_high_watermark()  # -1 only once the high watermark is the real one
            return -1, -1
        return found.offset, found.timestamp  # the record's own timestamp, as Kafka answers

    # ---- DeleteRecords ----

    async def DeleteRecords(
        self,
        request: pb.DeleteRecordsRequest,
        context: grpc.aio.ServicerContext[pb.DeleteRecordsRequest, pb.DeleteRecordsResponse],
    ) -> pb.DeleteRecordsResponse:
        """Advance each partition's log start offset as its leader (``kafka-delete-records``), then answer once
        every ISR replica's log starts there too (or REQUEST_TIMED_OUT after ``timeout_ms``); the new log start is
        written to the log-start checkpoint first, so it survives a crash of this broker."""
        response = pb.DeleteRecordsResponse()
        waits: list[tuple[pb.DeleteRecordsPartitionResponse, asyncio.Future[LowWatermark]]] = []
        denied = self._topic_denials(context, AclOperation.DELETE, request.topics, "DeleteRecords")
        for t in request.topics:
            add = response.topics.add(name=t.name).partitions.add
            for dp in t.partitions:
                r = add(partition=dp.partition, low_watermark=-1)
                try:
                    if t.name in denied:
                        raise denied[t.name]
                    delete_records.check_topic(t.name, self.replicas.cleanup_policy(t.name))
                    partition = self.replicas.get(t.name, dp.partition)
                    target = partition.delete_records(dp.offset)
                except OdradekError as e:
                    r.error, r.error_message = ErrorCode.ValueType(e.code), str(e)
                    if e.code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH):
                        hint = _leader_hint(self.image, t.name, dp.partition)
                        if hint is not None:
                            r.current_leader.CopyFrom(hint)
                    continue
                waits.append((r, partition.wait_for_low_watermark(target)))
        if waits:
            await asyncio.to_thread(self.replicas.logs.checkpoint_log_start_offsets)
            futures = [f for _, f in waits]
            await asyncio.wait(futures, timeout=(request.timeout_ms if request.timeout_ms > 0 else 30000) / 1000)
            for r, future in waits:
                if not future.done():
                    future.cancel()
                    r.error = ErrorCode.REQUEST_TIMED_OUT
                    r.error_message = "not every in-sync replica reached the new log start offset in time"
                elif (done := future.result()).error != ErrorCode.NONE:
                    r.error = ErrorCode.ValueType(done.error)
                else:
                    r.low_watermark = done.low_watermark
        return response

    # ---- Unclean recovery ----

    async def GetReplicaLogInfo(
        self,
        request: pb.ReplicaLogInfoRequest,
        context: grpc.aio.ServicerContext[pb.ReplicaLogInfoRequest, pb.ReplicaLogInfoResponse],
    ) -> pb.ReplicaLogInfoResponse:
        """Each replica's last leader epoch and log end offset, for the controller to elect the most complete log
        of a partition that no replica is known to hold entirely. The broker epoch says which incarnation
        answered: one that restarts before the election may have lost what it reported."""
        if not self._cluster_allowed(context, AclOperation.CLUSTER_ACTION, "GetReplicaLogInfo"):
            return pb.ReplicaLogInfoResponse(error=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        epoch = self.replicas.registered_epoch()
        if request.broker_id != self.broker_id:
            return pb.ReplicaLogInfoResponse(error=ErrorCode.INVALID_REQUEST)
        if epoch < 0:
            return pb.ReplicaLogInfoResponse(error=ErrorCode.STALE_BROKER_EPOCH)
        topics = []
        for t in request.topics:
            known = self.image.topic_ids.get(t.name) == t.topic_id
            results = [self._replica_log_info(t.name, index, known) for index in t.partitions]
            topics.append(pb.ReplicaLogInfoTopicResponse(name=t.name, partitions=results))
        return pb.ReplicaLogInfoResponse(broker_epoch=epoch, topics=topics)

    def _replica_log_info(self, topic: str, index: int, known: bool) -> pb.ReplicaLogInfoPartition:
        p = self.replicas.partitions.get((topic, index)) if known else None
        if p is None:
            return pb.ReplicaLogInfoPartition(partition=index, error=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        if (topic, index) in self.replicas.offline or p.log.offline:
            return pb.ReplicaLogInfoPartition(partition=index, error=ErrorCode.KAFKA_STORAGE_ERROR)
        try:
            last_epoch, end = p.log.latest_epoch, p.log.log_end_offset
        except OdradekError as e:
            return pb.ReplicaLogInfoPartition(partition=index, error=ErrorCode.ValueType(e.code))
        return pb.ReplicaLogInfoPartition(
            partition=index, last_leader_epoch=-1 if last_epoch is None else last_epoch, log_end_offset=end
        )

    # ---- Log dirs ----

    async def DescribeLogDirs(
        self,
        request: pb.DescribeLogDirsRequest,
        context: grpc.aio.ServicerContext[pb.DescribeLogDirsRequest, pb.DescribeLogDirsResponse],
    ) -> pb.DescribeLogDirsResponse:
        """Each log dir's state and disk figures and the replicas it holds (``odradek broker log-dirs``)."""
        if not self._cluster_allowed(context, AclOperation.DESCRIBE, "DescribeLogDirs"):
            return pb.DescribeLogDirsResponse(error=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, broker_id=self.broker_id)
        return await describe_log_dirs.answer(self.broker_id, self.replicas, request.topics, self.uncleanable())

    @property
    def log_dir_moves(self) -> LogDirMoves:
        """The broker's mover, or one made on first use (a service built on stand-in replicas never asks)."""
        if self._log_dir_moves is None:
            self._log_dir_moves = LogDirMoves(self.replicas)
        return self._log_dir_moves

    async def AlterReplicaLogDirs(
        self,
        request: pb.AlterReplicaLogDirsRequest,
        context: grpc.aio.ServicerContext[pb.AlterReplicaLogDirsRequest, pb.AlterReplicaLogDirsResponse],
    ) -> pb.AlterReplicaLogDirsResponse:
        """Move replicas between this broker's log dirs (cluster Alter, as Kafka requires): each partition's answer
        says whether its move started (or it is there already); the move itself runs in the background."""
        destinations = {(t.name, index): d.path for d in request.dirs for t in d.topics for index in t.partitions}
        error = ErrorCode.NONE
        if self._cluster_allowed(context, AclOperation.ALTER, "AlterReplicaLogDirs"):
            codes = self.log_dir_moves.alter(destinations)
        else:
            error = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
            codes = dict.fromkeys(destinations, error)
        by_topic: dict[str, list[pb.AlterReplicaLogDirsPartitionResult]] = {}
        for (topic, index), code in codes.items():
            result = pb.AlterReplicaLogDirsPartitionResult(partition=index, error=ErrorCode.ValueType(code))
            by_topic.setdefault(topic, []).append(result)
        topics = [pb.AlterReplicaLogDirsTopicResult(name=name, partitions=parts) for name, parts in by_topic.items()]
        return pb.AlterReplicaLogDirsResponse(error=error, topics=topics)

    # ---- Producer ids ----

    async def InitProducerId(
        self,
        request: pb.InitProducerIdRequest,
        context: grpc.aio.ServicerContext[pb.InitProducerIdRequest, pb.InitProducerIdResponse],
    ) -> pb.InitProducerIdResponse:
        """An idempotent producer (empty ``transactional_id``) gets a new id at epoch 0, or, after an unrecoverable
        sequence error (KIP-360), its id at the next epoch, so it can restart its sequences without the partitions
        mistaking its new batches for duplicates or gaps. A transactional producer is answered by its transactional
        id's coordinator (this broker, or NOT_COORDINATOR), which fences its older incarnations."""

        def error(code: ErrorCode.ValueType) -> pb.InitProducerIdResponse:
            return pb.InitProducerIdResponse(error=code, producer_id=NO_PRODUCER_ID, producer_epoch=NO_PRODUCER_EPOCH)

        caller = self.caller(context)
        if caller is not None:
            refused = self._init_producer_id_refusal(caller, request.transactional_id)
            if refused:
                return error(refused)
        if request.transactional_id:
            if self.transactions is None:
                return error(ErrorCode.COORDINATOR_NOT_AVAILABLE)
            code, pid, epoch = await self.transactions.init_producer_id(
                request.transactional_id, request.transaction_timeout_ms, request.producer_id, request.producer_epoch
            )
            if code != ErrorCode.NONE:
                return error(ErrorCode.ValueType(code))
            return pb.InitProducerIdResponse(producer_id=pid, producer_epoch=epoch)
        pid, epoch = request.producer_id, request.producer_epoch
        # Kafka refuses an id without an epoch and vice versa; here producer_id -1 alone asks for a new id, as
        # proto3 cannot tell an epoch left unset from epoch 0 (and a new id is always a safe answer).
        if pid < NO_PRODUCER_ID or (pid != NO_PRODUCER_ID and not 0 <= epoch <= 32767):
            return error(ErrorCode.INVALID_REQUEST)
        # An id above every allocated block was never handed out: bumping it would let a client squat on an id
        # another producer will get, so it gets a fresh one instead (the metadata of this broker may lag another
        # broker's newest block; a fresh id is always a valid answer to a bump).
        if pid != NO_PRODUCER_ID and epoch < MAX_PRODUCER_EPOCH and pid < self.image.next_producer_id:
            return pb.InitProducerIdResponse(producer_id=pid, producer_epoch=epoch + 1)
        if self.producer_ids is None:
            return error(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        try:
            return pb.InitProducerIdResponse(producer_id=await self.producer_ids.next_id(), producer_epoch=0)
        except OdradekError as e:
            return error(ErrorCode.ValueType(e.code))

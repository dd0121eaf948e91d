"""Produce and fetch, whatever the listener: the one implementation the gRPC servicer (``BrokerService``) and the
Kafka listener's handlers call with a typed request and the caller's ``RequestContext``.

Produce appends a request's batches as the partitions' leader (authorization, transactional verification,
acks=all's wait for the high watermark, the produce quota); fetch serves consumers and followers in one pass
over the requested partitions, with the long poll (or a fetch session's round), the fetch quota and the topic
Read or cluster ClusterAction checks.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from odradek.broker.fetch_session import PartitionRead
from odradek.broker.log.producer_state import NO_VERIFICATION, VerificationGuard
from odradek.broker.log.rewrite import LOG_APPEND_TIME
from odradek.broker.metrics import NodeMetrics
from odradek.broker.partition import FollowerRead, Partition
from odradek.broker.replica_manager import ReplicaManager, monotonic_ms
from odradek.broker.throttling import BrokerQuotas, ClientIdentity, quota_user
from odradek.broker.txn_verifier import TxnVerifier
from odradek.client.common.access import OPEN, AccessControl, denial
from odradek.client.common.acls import AclOperation, ResourceType
from odradek.client.common.caller import Caller
from odradek.client.common.metadata_image import MetadataImage
from odradek.client.common.request_context import RequestContext
from odradek.client.common.topic_rules import INTERNAL_TOPICS
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

if TYPE_CHECKING:
    from odradek.broker.fetch_sessions import SessionRound

READ_COMMITTED = 1  # a fetch's or ListOffsets' isolation level: only below the last stable offset
EARLIEST, LATEST = -2, -1
# Kafka's other ListOffsets specs: the record with the largest timestamp (KIP-734), the start of the local log and
# the end of what tiered storage holds (KIP-405; odradek keeps every segment local).
MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED = -3, -4, -5

# ListOffsets errors answered without the leader: re-routing cannot help with these.
_UNHINTED_LIST_OFFSETS_ERRORS = frozenset({ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.TOPIC_AUTHORIZATION_FAILED})
DEFAULT_FETCH_MAX_BYTES = 57_671_680

# Fetch errors answered with the current leader, so the consumer need not ask for metadata (OFFSET_NOT_AVAILABLE:
# the leader is right, only its high watermark is catching up).
_HINTED_FETCH_ERRORS = frozenset(
    {ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.OFFSET_NOT_AVAILABLE}
)


class LeaderHint(NamedTuple):
    """The leader a client is pointed to with an error that re-routes it (Kafka's CurrentLeader)."""

    leader_id: int
    leader_epoch: int


def _leader_hint(image: MetadataImage, topic: str, partition: int) -> LeaderHint | None:
    state = image.partition(topic, partition)
    return None if state is None else LeaderHint(state.leader, state.leader_epoch)


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


@dataclass(frozen=True, slots=True)
class FetchTopic:
    name: str
    partitions: Sequence[PartitionRead]


@dataclass(frozen=True, slots=True)
class FetchRequest:
    """A consumer's (``replica_id`` -1) or a follower's fetch, whatever the listener."""

    replica_id: int
    replica_epoch: int
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    isolation_level: int  # 0 read uncommitted, READ_COMMITTED
    topics: Sequence[FetchTopic]


@dataclass(frozen=True, slots=True)
class OffsetQuery:
    """One partition of a ListOffsets request: ``timestamp`` a time in ms, or EARLIEST, LATEST, MAX_TIMESTAMP,
    EARLIEST_LOCAL or LATEST_TIERED."""

    partition: int
    timestamp: int
    current_leader_epoch: int = -1


@dataclass(frozen=True, slots=True)
class ListOffsetsRequest:
    isolation_level: int  # 0 read uncommitted, READ_COMMITTED
    topics: Sequence[tuple[str, Sequence[OffsetQuery]]]


class ListedOffset(NamedTuple):
    """One partition's answer: the offset (and the record's timestamp, for a time) and the leader epoch, or the
    error with the leader to re-route to where that helps."""

    partition: int
    offset: int = -1
    timestamp: int = -1
    leader_epoch: int = -1
    error: OdradekError | None = None
    leader: LeaderHint | None = None


@dataclass(frozen=True, slots=True)
class EpochQuery:
    """One partition of an OffsetForLeaderEpoch request: the end of ``leader_epoch`` as the leader at
    ``current_leader_epoch`` knows it."""

    partition: int
    leader_epoch: int
    current_leader_epoch: int = -1


class EpochEndOffset(NamedTuple):
    partition: int
    leader_epoch: int = -1
    end_offset: int = -1
    error: OdradekError | None = None


class DataService:
    """Produce and fetch on this broker's partition replicas. The attributes are the broker's: its replicas,
    metrics, controller session, fetch.max.bytes, transaction verifier, quotas and authorization."""

    def __init__(
        self,
        broker_id: int,
        replicas: ReplicaManager,
        metrics: NodeMetrics,
        image: Callable[[], MetadataImage],
        *,
        session_valid: Callable[[], bool] = lambda: True,
        fetch_max_bytes: int = DEFAULT_FETCH_MAX_BYTES,
        verifier: TxnVerifier | None = None,
        quotas: BrokerQuotas | None = None,
        access: AccessControl = OPEN,
    ) -> None:
        self.broker_id = broker_id
        self.replicas = replicas
        self.metrics = metrics
        self._image = image
        # False while this broker cannot know it still leads: no controller session for a whole session timeout
        # (e.g. the process was paused). Writes are refused then; the controller has fenced it or soon will.
        self.session_valid = session_valid
        # The node's fetch.max.bytes: the most record bytes one consumer Fetch answer carries (beyond one batch).
        self.fetch_max_bytes = fetch_max_bytes
        # Asks transaction coordinators about a producer's first transactional batch on a partition.
        self.verifier = verifier
        # Client quotas: produce bytes are charged after the append, fetch bytes checked before the read.
        self.quotas = quotas
        # Authorization (ACLs): what produce and fetch need is checked here, for every listener.
        self.access = access

    @property
    def image(self) -> MetadataImage:
        return self._image()

    def _caller(self, ctx: RequestContext) -> Caller | None:
        """The request's caller when an authorizer decides, else None (no check, no cost)."""
        return ctx.caller if self.access.enabled else None

    @staticmethod
    def _quota_client(ctx: RequestContext) -> ClientIdentity | None:
        """Whom the byte quotas charge for the request; None for requests quotas do not apply to."""
        return ClientIdentity(ctx.peer, quota_user(ctx.principal), ctx.client_id) if ctx.quotas_apply else None

    def leader_hint_of(self, topic: str, partition: int) -> LeaderHint | None:
        """The partition's leader and epoch as this broker's metadata has them."""
        return _leader_hint(self.image, topic, partition)

    def leader_hint(self, topic: str, partition: int, error: OdradekError) -> LeaderHint | None:
        """The current leader, for an error after which the client must re-route (so it need not ask for
        metadata first)."""
        if error.code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH):
            return _leader_hint(self.image, topic, partition)
        return None

    async def produce(
        self,
        acks: int,
        timeout_ms: int,
        transactional_id: str | None,
        topics: ProduceTopics,
        ctx: RequestContext,
    ) -> tuple[list[tuple[str, list[ProduceResult]]], int]:
        """Append a produce request's batches as the leader: each partition's result, in request order, and the
        produce quota's throttle (ms), charged to ``ctx``'s client. An authorizer checks topic Write, and
        transactional-id Write for a transactional request, as ``ctx``'s caller.

        ``acks=-1`` waits until every batch is below its partition's high watermark (the produce purgatory); a
        batch not committed in ``timeout_ms`` answers REQUEST_TIMED_OUT."""
        if acks not in (0, 1, -1):
            invalid = OdradekError(f"acks must be 0, 1 or -1, not {acks}", code=ErrorCode.INVALID_REQUIRED_ACKS)
            return [(name, [ProduceResult(index, invalid) for index, _ in parts]) for name, parts in topics], 0
        unauthorized: dict[tuple[str, int], OdradekError] = {}
        caller = self._caller(ctx)
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
            throttle = self._charge_produce(self._quota_client(ctx), size)
        if waits:
            if ctx.appended is not None and throttle == 0:
                ctx.appended()  # the connection's next request may be appended while these replicate
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

    def _charge_produce(self, who: ClientIdentity | None, size: int) -> int:
        """Charge a request's record bytes to its client's produce quota, after the append (as Kafka: the
        records are kept, and the client is held back afterwards); the throttle in ms."""
        quotas = self.quotas
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

    def _read(
        self,
        request: FetchRequest,
        cap: int | None = None,
        as_file: bool = False,
        denied: Mapping[str, OdradekError] = _NONE_DENIED,
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

    def replica_error_bounds(self, topic: str, partition: int, error: OdradekError) -> tuple[int, int]:
        """(log start, log end offset) a follower's error answer carries: the partition's own for OFFSET_OUT_OF_RANGE
        (the follower restarts at the start or truncates to the end), else (0, 0), unused."""
        if error.code == ErrorCode.OFFSET_OUT_OF_RANGE:
            p = self.replicas.partitions.get((topic, partition))
            if p is not None:
                return p.log.log_start_offset, p.log.log_end_offset
        return 0, 0

    def fetch_leader_hint(self, topic: str, partition: int, error: OdradekError) -> LeaderHint | None:
        """The current leader for a consumer's fetch error that re-routes it (OFFSET_NOT_AVAILABLE: the leader
        is right, only its high watermark is catching up)."""
        return _leader_hint(self.image, topic, partition) if error.code in _HINTED_FETCH_ERRORS else None

    def _consumer_fetch(self, request: FetchRequest, cap: int | None = None, as_file: bool = False) -> _FetchKind:
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
        committed = request.isolation_level == READ_COMMITTED
        return _FetchKind(read_committed if committed else read, max_bytes, count_bytes_out=True)

    def _follower_fetch(self, request: FetchRequest, as_file: bool = False) -> _FetchKind | None:
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

    async def fetch(
        self, request: FetchRequest, ctx: RequestContext, as_file: bool = False, session: SessionRound | None = None
    ) -> FetchAnswer:
        """Serve a fetch (consumer or follower). A consumer's fetch quota (``ctx``'s client's) is checked before the
        read (a client over it gets no data and is not charged) and charged after; one answer exceeds it by one
        window at most. An authorizer checks ``ctx``'s caller: a follower needs cluster ClusterAction, a consumer
        topic Read on each topic. ``session``: an incremental fetch session's round (fetch_sessions.py), which reads
        and waits in place of the per-partition long poll."""
        denied: Mapping[str, OdradekError] = _NONE_DENIED
        caller = self._caller(ctx)
        if caller is not None:
            if request.replica_id >= 0:
                if not self.access.allows_cluster(caller, AclOperation.CLUSTER_ACTION, api="Fetch"):
                    return FetchAnswer([], 0, error=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
            else:
                names = session.topic_names() if session is not None else (t.name for t in request.topics)
                unreadable = self.access.denied(caller, AclOperation.READ, ResourceType.TOPIC, names, api="Fetch")
                denied = {n: denial(caller, AclOperation.READ, ResourceType.TOPIC, n) for n in unreadable}
        quotas = self.quotas
        consumer = quotas is not None and quotas.fetch.enabled and request.replica_id < 0
        who = self._quota_client(ctx) if consumer else None
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

    # ---- ListOffsets, OffsetForLeaderEpoch ----

    def _topic_denials(
        self, ctx: RequestContext, operation: AclOperation, names: Iterable[str], api: str
    ) -> dict[str, OdradekError]:
        """The topics the caller may not perform ``operation`` on, with the error each of their partitions answers."""
        caller = self._caller(ctx)
        if caller is None:
            return {}
        denied = self.access.denied(caller, operation, ResourceType.TOPIC, names, api=api)
        return {name: denial(caller, operation, ResourceType.TOPIC, name) for name in denied}

    async def list_offsets(
        self, request: ListOffsetsRequest, ctx: RequestContext
    ) -> list[tuple[str, list[ListedOffset]]]:
        """Each partition's offset for its timestamp spec, as its leader (topic Describe needed)."""
        denied = self._topic_denials(ctx, AclOperation.DESCRIBE, (name for name, _ in request.topics), "ListOffsets")
        read_committed = request.isolation_level == READ_COMMITTED
        answer = []
        for name, queries in request.topics:
            results = []
            for q in queries:
                try:
                    if name in denied:
                        raise denied[name]
                    partition = self.replicas.get(name, q.partition)
                    partition.check_leader(q.current_leader_epoch)
                    offset, timestamp = self._offset_for(partition, q.timestamp, read_committed)
                    results.append(ListedOffset(q.partition, offset, timestamp, partition.leader_epoch))
                except OdradekError as e:
                    hint = None if e.code in _UNHINTED_LIST_OFFSETS_ERRORS else self.leader_hint_of(name, q.partition)
                    results.append(ListedOffset(q.partition, error=e, leader=hint))
            answer.append((name, results))
        return answer

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

    async def end_offsets_for_epochs(
        self, topics: Sequence[tuple[str, Sequence[EpochQuery]]], ctx: RequestContext
    ) -> list[tuple[str, list[EpochEndOffset]]]:
        """OffsetForLeaderEpoch: each partition's end offset of the largest epoch <= the one asked, as its leader
        knows it, after the same current-leader-epoch check as ListOffsets and Fetch (FENCED_ / UNKNOWN_LEADER_EPOCH,
        NOT_LEADER_OR_FOLLOWER); topic Describe needed, as Kafka."""
        denied = self._topic_denials(ctx, AclOperation.DESCRIBE, (name for name, _ in topics), "OffsetForLeaderEpoch")
        answer = []
        for name, queries in topics:
            results = []
            for q in queries:
                try:
                    if name in denied:
                        raise denied[name]
                    partition = self.replicas.get(name, q.partition)
                    partition.check_leader(q.current_leader_epoch)
                    epoch, end = partition.log.end_offset_for_epoch(q.leader_epoch)
                except OdradekError as e:
                    results.append(EpochEndOffset(q.partition, error=e))
                    continue
                results.append(EpochEndOffset(q.partition, epoch, end))
            answer.append((name, results))
        return answer

"""The admin client's transaction requests (Kafka's Admin listTransactions, describeTransactions,
describeProducers, abortTransaction and fenceProducers, and kafka-transactions.sh's find-hanging).

Coordinators answer for the transactional ids of the ``__transaction_state`` partitions they lead: ListTransactions
goes to every broker and the answers are merged (as ListGroups); DescribeTransactions and InitProducerId go to the
id's coordinator, found with FindCoordinator (key type TRANSACTION), looked up again while it moves or loads.
DescribeProducers and WriteTxnMarkers go to the partition's leader, asked again while leadership moves.

A hanging transaction is one a partition holds open (its last stable offset cannot pass it) although no coordinator
will ever end it: a coordinator lost it, or a batch reached the partition outside the transaction. Finding them
compares each partition's open transactions with what the coordinators say (``hanging_transactions``, pure);
``abort_transaction`` ends one by writing an ABORT marker straight to the partition.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import grpc

from odradek.client.connection import ChannelPool
from odradek.client.errors import ErrorCode, OdradekError, error_for_code, error_name
from odradek.client.structs import TopicPartition
from odradek.proto import broker_pb2 as bpb
from odradek.proto import broker_pb2_grpc, group_pb2_grpc, transaction_pb2_grpc
from odradek.proto import group_pb2 as gpb
from odradek.proto import transaction_pb2 as tpb

if TYPE_CHECKING:
    from odradek.client.admin import ClusterDescription, TopicInfo
    from odradek.proto.broker_pb2_grpc import BrokerAsyncStub
    from odradek.proto.group_pb2_grpc import GroupCoordinatorAsyncStub
    from odradek.proto.transaction_pb2_grpc import TransactionsAsyncStub

R = TypeVar("R")

# Kafka's transaction states, as coordinators name them.
TXN_STATES = (
    "Empty",
    "Ongoing",
    "PrepareCommit",
    "PrepareAbort",
    "CompleteCommit",
    "CompleteAbort",
    "PrepareEpochFence",
    "Dead",
)
# The states of a transaction under way, until its marker is written (its start time then tells how long it ran).
OPEN_STATES = frozenset({"Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence"})
NO_DURATION_FILTER = -1  # ListTransactions: every transaction, however long it has run
DEFAULT_MAX_TRANSACTION_TIMEOUT_MS = 900_000  # the brokers' transaction.max.timeout.ms default
_COORDINATOR_RETRY = frozenset(
    {ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE}
)
# InitProducerId while the coordinator still completes the transaction it aborts: ask again.
_INIT_RETRY = _COORDINATOR_RETRY | {ErrorCode.CONCURRENT_TRANSACTIONS}
_LEADER_MOVED = frozenset(
    {
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.REQUEST_TIMED_OUT,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    }
)


@dataclass(frozen=True)
class TransactionListing:
    transactional_id: str
    producer_id: int
    state: str
    coordinator: int  # the node id of the broker that answered for it

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class TransactionDescription:
    """A transactional id as its coordinator sees it. ``transaction_start_time_ms`` is when its current or last
    transaction started (kept once it completed, as Kafka keeps it; -1 before the first); ``partitions`` are those
    added to the current transaction."""

    transactional_id: str
    state: str
    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    transaction_start_time_ms: int
    last_update_time_ms: int
    coordinator: int
    partitions: list[TopicPartition] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["partitions"] = [{"topic": tp.topic, "partition": tp.partition} for tp in self.partitions]
        return d


@dataclass(frozen=True)
class ProducerState:
    """One active producer of a partition, as its leader tracks it. ``current_txn_start_offset`` is the first
    offset of the producer's open transaction there (-1: none); ``coordinator_epoch`` is that of the last marker
    written for it (-1: none); ``last_sequence`` -1 when unknown."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    current_txn_start_offset: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class PartitionProducers:
    topic: str
    partition: int
    leader: int  # the broker that answered
    producers: list[ProducerState] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class OpenTransaction:
    """A transaction a partition holds open: the producer state with ``current_txn_start_offset`` >= 0."""

    topic: str
    partition: int
    producer: ProducerState

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    def to_dict(self, now_ms: int) -> dict[str, Any]:
        p = self.producer
        return {
            "topic": self.topic,
            "partition": self.partition,
            "producer_id": p.producer_id,
            "producer_epoch": p.producer_epoch,
            "coordinator_epoch": p.coordinator_epoch,
            "start_offset": p.current_txn_start_offset,
            "last_timestamp": p.last_timestamp,
            "duration_ms": max(0, now_ms - p.last_timestamp) if p.last_timestamp >= 0 else None,
        }


@dataclass(frozen=True)
class AbortedTransaction:
    """What ``abort_transaction`` wrote: an ABORT marker for this producer to this partition."""

    topic: str
    partition: int
    start_offset: int
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class FencedTransactionalId:
    """What ``fence_transactional_id`` left: the id's new producer epoch (an older producer is fenced) and the
    state its transaction was in before (an Ongoing one was aborted by the coordinator)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    previous_state: str
    coordinator: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def canonical_states(states: Iterable[str]) -> list[str]:
    """Kafka's names of ``states`` (case-insensitive); an unknown one raises INVALID_REQUEST."""
    by_lower = {s.lower(): s for s in TXN_STATES}
    out = []
    for s in states:
        if s.lower() not in by_lower:
            raise error_for_code(
                ErrorCode.INVALID_REQUEST, f"unknown transaction state {s!r} (one of {', '.join(TXN_STATES)})"
            )
        out.append(by_lower[s.lower()])
    return out


def open_transactions(partitions: Iterable[PartitionProducers]) -> list[OpenTransaction]:
    return [
        OpenTransaction(pp.topic, pp.partition, p)
        for pp in partitions
        for p in pp.producers
        if p.current_txn_start_offset >= 0
    ]


def hanging_candidates(
    txns: Iterable[OpenTransaction], now_ms: int, max_transaction_timeout_ms: int
) -> list[OpenTransaction]:
    """Open transactions whose producer last wrote longer ago than any transaction may run (Kafka's filter: a
    coordinator would have aborted them by now). An unknown last timestamp counts as old."""
    return [t for t in txns if now_ms - t.producer.last_timestamp > max_transaction_timeout_ms]


def hanging_transactions(
    candidates: Iterable[OpenTransaction], owners: Mapping[int, TransactionDescription | None]
) -> list[OpenTransaction]:
    """The candidates no coordinator will end (Kafka's find-hanging): their producer id belongs to no transactional
    id (``owners`` maps it to None or lacks it), its id now has another producer id, or its id's transaction is not
    Ongoing with that partition."""
    out = []
    for t in candidates:
        owner = owners.get(t.producer.producer_id)
        if (
            owner is None
            or owner.producer_id != t.producer.producer_id
            or owner.state != "Ongoing"
            or t.tp not in set(owner.partitions)
        ):
            out.append(t)
    return sorted(out, key=lambda t: (t.topic, t.partition, t.producer.current_txn_start_offset))


def _producer_state(p: tpb.ProducerDescription) -> ProducerState:
    return ProducerState(
        p.producer_id,
        p.producer_epoch,
        p.last_sequence,
        p.last_timestamp,
        p.coordinator_epoch,
        p.current_txn_start_offset,
    )


def _description(d: tpb.TransactionDescription, coordinator: int) -> TransactionDescription:
    return TransactionDescription(
        transactional_id=d.transactional_id,
        state=d.state,
        producer_id=d.producer_id,
        producer_epoch=d.producer_epoch,
        transaction_timeout_ms=d.transaction_timeout_ms,
        transaction_start_time_ms=d.transaction_start_time_ms,
        last_update_time_ms=d.last_update_time_ms,
        coordinator=coordinator,  # the broker that answered: it coordinates the id
        partitions=sorted(TopicPartition(t.name, p) for t in d.topics for p in t.partitions),
    )


class _Retry(Exception):
    def __init__(self, code: int, detail: str = "") -> None:
        super().__init__(detail or error_name(code))
        self.code = code
        self.detail = detail or error_name(code)


def _unsupported(address: str, e: grpc.aio.AioRpcError) -> OdradekError:
    return OdradekError(
        f"{address} does not implement this request ({e.details() or 'UNIMPLEMENTED'})",
        code=ErrorCode.UNSUPPORTED_VERSION,
    )


class TransactionAdmin:
    """The transaction requests; ``AsyncAdmin`` inherits them. Needs the pool, the timeout, the backoff,
    ``describe_cluster`` and ``describe_topics`` of its host class."""

    _pool: ChannelPool
    _timeout: float
    _backoff: float

    if TYPE_CHECKING:

        async def describe_cluster(self) -> ClusterDescription: ...

        async def describe_topics(
            self, names: Sequence[str] | None = None, include_internal: bool = True
        ) -> list[TopicInfo]: ...

        def _rpc_timeout(self) -> float: ...

    # -- plumbing -----------------------------------------------------------------------------------------------

    def _txn_coordinator_cache(self) -> dict[str, tuple[int, str]]:
        cache: dict[str, tuple[int, str]] | None = getattr(self, "_txn_coordinators", None)
        if cache is None:
            cache = {}
            self._txn_coordinators = cache
        return cache

    async def _txn_brokers(self) -> dict[int, str]:
        cluster = await self.describe_cluster()
        return {b.node_id: f"{b.host}:{b.port}" for b in cluster.brokers if not b.fenced}

    def _txn_stub(self, address: str) -> TransactionsAsyncStub:
        stub: TransactionsAsyncStub = transaction_pb2_grpc.TransactionsStub(self._pool.get(address))
        return stub

    def _txn_broker_stub(self, address: str) -> BrokerAsyncStub:
        stub: BrokerAsyncStub = broker_pb2_grpc.BrokerStub(self._pool.get(address))
        return stub

    async def _find_txn_coordinator(self, transactional_id: str) -> tuple[int, str]:
        cached = self._txn_coordinator_cache().get(transactional_id)
        if cached is not None:
            return cached
        request = gpb.FindCoordinatorRequest(key_type=gpb.TRANSACTION, keys=[transactional_id])
        for address in (await self._txn_brokers()).values():
            stub: GroupCoordinatorAsyncStub = group_pb2_grpc.GroupCoordinatorStub(self._pool.get(address))
            try:
                r = await stub.FindCoordinator(request, timeout=self._rpc_timeout())
            except grpc.aio.AioRpcError as e:
                if e.code() == grpc.StatusCode.UNIMPLEMENTED:
                    raise _unsupported(address, e) from None
                continue
            for found in r.coordinators:
                if found.key != transactional_id:
                    continue
                if found.error == ErrorCode.NONE:
                    self._txn_coordinator_cache()[transactional_id] = (found.node_id, f"{found.host}:{found.port}")
                    return found.node_id, f"{found.host}:{found.port}"
                if found.error not in _COORDINATOR_RETRY:
                    raise error_for_code(found.error, found.error_message or error_name(found.error))
                raise _Retry(found.error)
            break
        raise _Retry(ErrorCode.COORDINATOR_NOT_AVAILABLE)

    async def _txn_call(
        self,
        transactional_id: str,
        invoke: Callable[[str, float], Awaitable[R]],
        error_of: Callable[[R], int],
        retry: frozenset[int] = _COORDINATOR_RETRY,
    ) -> tuple[int, R]:
        """Send one request to ``transactional_id``'s coordinator (``invoke(address, timeout)``), looking it up
        again while it moves or loads and asking again while it answers a code of ``retry``; return the
        coordinator's node id and the answer."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._timeout
        while True:
            try:
                node, address = await self._find_txn_coordinator(transactional_id)
                try:
                    response = await invoke(address, max(0.1, min(self._rpc_timeout(), deadline - loop.time())))
                except grpc.aio.AioRpcError as e:
                    if e.code() == grpc.StatusCode.UNIMPLEMENTED:
                        raise _unsupported(address, e) from None
                    raise _Retry(
                        ErrorCode.COORDINATOR_NOT_AVAILABLE, f"{address}: {e.details() or e.code().name}"
                    ) from e
                code = error_of(response)
                if code not in retry:
                    return node, response
                raise _Retry(code)
            except _Retry as e:
                if e.code in _COORDINATOR_RETRY:
                    self._txn_coordinator_cache().pop(transactional_id, None)
                last = error_for_code(e.code, f"transactional id {transactional_id}: {e.detail}")
            if loop.time() + self._backoff >= deadline:
                raise last
            await asyncio.sleep(self._backoff)

    async def _leaders(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, tuple[int, str | None]]:
        """Each partition's leader id and address (None when it has no live leader); an unknown topic or partition
        raises UNKNOWN_TOPIC_OR_PARTITION."""
        wanted = sorted(set(partitions))
        topics, brokers = await asyncio.gather(
            self.describe_topics(sorted({tp.topic for tp in wanted})), self._txn_brokers()
        )
        leaders = {TopicPartition(t.name, p.partition): p.leader for t in topics for p in t.partitions}
        out = {}
        for tp in wanted:
            if tp not in leaders:
                raise error_for_code(
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"unknown partition {tp.topic}:{tp.partition}"
                )
            out[tp] = (leaders[tp], brokers.get(leaders[tp]))
        return out

    # -- coordinators ---------------------------------------------------------------------------------------------

    async def list_transactions(
        self,
        states: Iterable[str] | None = None,
        producer_ids: Iterable[int] | None = None,
        duration_ms: int = 0,
    ) -> list[TransactionListing]:
        """Every transactional id of the cluster (only in ``states``, Kafka's names, case-insensitive; only of
        ``producer_ids``; only transactions running longer than ``duration_ms`` when > 0), asking each broker for
        the ids it coordinates and merging. A broker still loading is asked again until the timeout; one that stays
        unreachable raises its error (a partial list would hide transactions)."""
        if duration_ms < 0:
            raise error_for_code(ErrorCode.INVALID_REQUEST, f"duration {duration_ms} ms is negative")
        request = tpb.ListTransactionsRequest(
            state_filters=canonical_states(states or ()),
            producer_id_filters=sorted(set(producer_ids or ())),
            duration_filter_ms=duration_ms if duration_ms > 0 else NO_DURATION_FILTER,
        )
        brokers = await self._txn_brokers()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._timeout

        async def ask(node: int, address: str) -> list[TransactionListing]:
            while True:
                try:
                    r = await self._txn_stub(address).ListTransactions(
                        request, timeout=max(0.1, min(self._rpc_timeout(), deadline - loop.time()))
                    )
                    code = r.error
                except grpc.aio.AioRpcError as e:
                    if e.code() == grpc.StatusCode.UNIMPLEMENTED:
                        raise _unsupported(address, e) from None
                    code, detail = ErrorCode.COORDINATOR_NOT_AVAILABLE, e.details() or e.code().name
                else:
                    detail = error_name(code)
                    if code == ErrorCode.NONE:
                        if r.unknown_state_filters:
                            raise error_for_code(
                                ErrorCode.INVALID_REQUEST,
                                f"broker {node} does not know the states {', '.join(r.unknown_state_filters)}",
                            )
                        return [
                            TransactionListing(t.transactional_id, t.producer_id, t.state, node) for t in r.transactions
                        ]
                    if code not in _COORDINATOR_RETRY:
                        raise error_for_code(code, f"broker {node}: ListTransactions: {detail}")
                if loop.time() + self._backoff >= deadline:
                    raise error_for_code(code, f"broker {node} ({address}): ListTransactions: {detail}")
                await asyncio.sleep(self._backoff)

        found = await asyncio.gather(*(ask(n, a) for n, a in sorted(brokers.items())))
        merged = {t.transactional_id: t for listing in found for t in listing}
        return sorted(merged.values(), key=lambda t: t.transactional_id)

    async def describe_transactions(self, ids: Sequence[str]) -> list[TransactionDescription]:
        """Each transactional id's state, producer id and epoch, timeout, start and last update time and the
        partitions of its transaction, from its coordinator. An unknown id raises ``TransactionalIdNotFoundError``."""

        async def one(transactional_id: str) -> TransactionDescription:
            request = tpb.DescribeTransactionsRequest(transactional_ids=[transactional_id])

            def error_of(r: tpb.DescribeTransactionsResponse) -> int:
                return r.transactions[0].error if r.transactions else ErrorCode.UNKNOWN_SERVER_ERROR

            node, r = await self._txn_call(
                transactional_id,
                lambda address, t: self._txn_stub(address).DescribeTransactions(request, timeout=t),
                error_of,
            )
            code = error_of(r)
            if code != ErrorCode.NONE:
                message = r.transactions[0].error_message if r.transactions else ""
                raise error_for_code(code, f"{error_name(code)}: transactional id {transactional_id} {message}".strip())
            return _description(r.transactions[0], node)

        return list(await asyncio.gather(*(one(i) for i in ids)))

    async def fence_transactional_id(self, transactional_id: str) -> FencedTransactionalId:
        """Fence ``transactional_id``'s current producer (Kafka's fenceProducers): InitProducerId to its coordinator
        bumps the id's epoch, so the producer's next request is refused with PRODUCER_FENCED, and an Ongoing
        transaction is aborted by the coordinator. The id keeps its transaction timeout. An unknown id raises
        ``TransactionalIdNotFoundError`` (and is not created)."""
        [before] = await self.describe_transactions([transactional_id])
        request = bpb.InitProducerIdRequest(
            transactional_id=transactional_id,
            transaction_timeout_ms=before.transaction_timeout_ms,
            producer_id=-1,
            producer_epoch=-1,
        )
        node, r = await self._txn_call(
            transactional_id,
            lambda address, t: self._txn_broker_stub(address).InitProducerId(request, timeout=t),
            lambda r: r.error,
            retry=_INIT_RETRY,
        )
        if r.error != ErrorCode.NONE:
            raise error_for_code(r.error, f"{error_name(r.error)}: fencing transactional id {transactional_id}")
        return FencedTransactionalId(transactional_id, r.producer_id, r.producer_epoch, before.state, node)

    # -- partition leaders -----------------------------------------------------------------------------------------

    async def describe_producers(self, partitions: Iterable[TopicPartition]) -> list[PartitionProducers]:
        """Each partition's active producers, with the offset their open transaction starts at, from its leader
        (asked again while leadership moves). An unknown partition raises UNKNOWN_TOPIC_OR_PARTITION; a partition
        whose leader cannot answer before the timeout raises its error."""
        pending = sorted(set(partitions))
        done: dict[TopicPartition, PartitionProducers] = {}
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._timeout
        while pending:
            leaders = await self._leaders(pending)
            by_leader: dict[int, list[TopicPartition]] = {}
            for tp, (leader, _) in leaders.items():
                by_leader.setdefault(leader, []).append(tp)
            answers = await asyncio.gather(
                *(self._describe_producers_at(leader, leaders[tps[0]][1], tps) for leader, tps in by_leader.items())
            )
            retry: list[TopicPartition] = []
            for answer in answers:
                for tp, result in answer.items():
                    if isinstance(result, PartitionProducers):
                        done[tp] = result
                        continue
                    code, message = result
                    if code not in _LEADER_MOVED or loop.time() + self._backoff >= deadline:
                        raise error_for_code(code, f"{error_name(code)}: {tp.topic}:{tp.partition}: {message}")
                    retry.append(tp)
            pending = retry
            if pending:
                await asyncio.sleep(self._backoff)
        return [done[tp] for tp in sorted(done)]

    async def _describe_producers_at(
        self, leader: int, address: str | None, partitions: list[TopicPartition]
    ) -> dict[TopicPartition, PartitionProducers | tuple[int, str]]:
        if address is None:
            return {tp: (ErrorCode.LEADER_NOT_AVAILABLE, "no live leader") for tp in partitions}
        by_topic: dict[str, list[int]] = {}
        for tp in partitions:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        request = tpb.DescribeProducersRequest(
            topics=[tpb.TxnTopic(name=t, partitions=ps) for t, ps in sorted(by_topic.items())]
        )
        try:
            r = await self._txn_stub(address).DescribeProducers(request, timeout=self._rpc_timeout())
        except grpc.aio.AioRpcError as e:
            if e.code() == grpc.StatusCode.UNIMPLEMENTED:
                raise _unsupported(address, e) from None
            return {tp: (ErrorCode.NETWORK_EXCEPTION, f"{address}: {e.code().name}") for tp in partitions}
        out: dict[TopicPartition, PartitionProducers | tuple[int, str]] = {
            tp: (ErrorCode.UNKNOWN_SERVER_ERROR, "no answer for the partition") for tp in partitions
        }
        for t in r.topics:
            for p in t.partitions:
                tp = TopicPartition(t.name, p.partition)
                if p.error != ErrorCode.NONE:
                    out[tp] = (p.error, p.error_message or error_name(p.error))
                else:
                    producers = sorted((_producer_state(x) for x in p.active_producers), key=lambda x: x.producer_id)
                    out[tp] = PartitionProducers(t.name, p.partition, leader, producers)
        return out

    async def abort_transaction(self, topic: str, partition: int, start_offset: int) -> AbortedTransaction:
        """Abort the transaction a partition holds open from ``start_offset`` (Kafka's abortTransaction, for a
        hanging transaction no coordinator will end): the leader's DescribeProducers names its producer, then an
        ABORT marker is written to the leader with that producer's id, epoch and coordinator epoch. The partition's
        last stable offset moves past it. No open transaction starting there raises INVALID_TXN_STATE."""
        if start_offset < 0:
            raise error_for_code(ErrorCode.INVALID_REQUEST, f"start offset {start_offset} is negative")
        tp = TopicPartition(topic, partition)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._timeout
        while True:
            [described] = await self.describe_producers([tp])
            found = [p for p in described.producers if p.current_txn_start_offset == start_offset]
            if not found:
                open_at = sorted(
                    p.current_txn_start_offset for p in described.producers if p.current_txn_start_offset >= 0
                )
                where = f"open transactions start at {', '.join(map(str, open_at))}" if open_at else "none is open"
                raise error_for_code(
                    ErrorCode.INVALID_TXN_STATE,
                    f"INVALID_TXN_STATE: no open transaction of {topic}:{partition} starts at offset {start_offset}"
                    f" ({where})",
                )
            producer = found[0]
            aborted = AbortedTransaction(
                topic,
                partition,
                start_offset,
                producer.producer_id,
                producer.producer_epoch,
                max(0, producer.coordinator_epoch),
            )
            code, message = await self._write_abort_marker(described.leader, aborted)
            if code == ErrorCode.NONE:
                return aborted
            if code not in _LEADER_MOVED or loop.time() + self._backoff >= deadline:
                raise error_for_code(
                    code, f"{error_name(code)}: aborting {topic}:{partition} at {start_offset}: {message}"
                )
            await asyncio.sleep(self._backoff)

    async def _write_abort_marker(self, leader: int, a: AbortedTransaction) -> tuple[int, str]:
        address = (await self._txn_brokers()).get(leader)
        if address is None:
            return ErrorCode.LEADER_NOT_AVAILABLE, f"leader {leader} is not live"
        marker = tpb.TxnMarker(
            producer_id=a.producer_id,
            producer_epoch=a.producer_epoch,
            committed=False,
            topics=[tpb.TxnTopic(name=a.topic, partitions=[a.partition])],
            coordinator_epoch=a.coordinator_epoch,
        )
        timeout = self._rpc_timeout()
        request = tpb.WriteTxnMarkersRequest(markers=[marker], timeout_ms=int(timeout * 1000))
        try:
            r = await self._txn_stub(address).WriteTxnMarkers(request, timeout=timeout + 1)
        except grpc.aio.AioRpcError as e:
            if e.code() == grpc.StatusCode.UNIMPLEMENTED:
                raise _unsupported(address, e) from None
            return ErrorCode.NETWORK_EXCEPTION, f"{address}: {e.code().name}"
        for m in r.markers:
            for t in m.topics:
                for p in t.partitions:
                    if t.name == a.topic and p.partition == a.partition:
                        return p.error, p.error_message or error_name(p.error)
        return ErrorCode.UNKNOWN_SERVER_ERROR, "no answer for the partition"

    # -- find-hanging ------------------------------------------------------------------------------------------------

    async def find_hanging_transactions(
        self,
        broker: int | None = None,
        topics: Sequence[str] | None = None,
        partition: int | None = None,
        max_transaction_timeout_ms: int = DEFAULT_MAX_TRANSACTION_TIMEOUT_MS,
        now_ms: int | None = None,
    ) -> list[OpenTransaction]:
        """Open transactions no coordinator will end (kafka-transactions.sh find-hanging): of the partitions of
        ``topics`` (all topics when None; only ``partition`` of them when set) that have ``broker`` among their
        replicas (any when None), the open transactions whose producer last wrote more than
        ``max_transaction_timeout_ms`` ago and whose producer id the coordinators do not list as Ongoing with that
        partition. Each partition is asked of its leader."""
        if max_transaction_timeout_ms < 0:
            raise error_for_code(ErrorCode.INVALID_REQUEST, "the max transaction timeout is negative")
        infos = await self.describe_topics(list(topics) if topics else None)
        if broker is not None and broker not in await self._txn_brokers():
            raise error_for_code(ErrorCode.INVALID_REQUEST, f"no live broker {broker}")
        wanted = [
            TopicPartition(t.name, p.partition)
            for t in infos
            for p in t.partitions
            if (partition is None or p.partition == partition) and (broker is None or broker in p.replicas)
        ]
        if partition is not None and not wanted and topics:
            raise error_for_code(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no partition {partition} of {', '.join(topics)}"
            )
        now = int(time.time() * 1000) if now_ms is None else now_ms
        candidates = hanging_candidates(
            open_transactions(await self.describe_producers(wanted)), now, max_transaction_timeout_ms
        )
        if not candidates:
            return []
        pids = {t.producer.producer_id for t in candidates}
        listed = await self.list_transactions(producer_ids=pids)
        owners: dict[int, TransactionDescription | None] = dict.fromkeys(pids)
        for listing in listed:
            try:
                [owner] = await self.describe_transactions([listing.transactional_id])
            except OdradekError as e:
                if e.code != ErrorCode.TRANSACTIONAL_ID_NOT_FOUND:
                    raise
                continue
            owners[listing.producer_id] = owner
        return hanging_transactions(candidates, owners)

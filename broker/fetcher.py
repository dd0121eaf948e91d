"""Follower fetchers: one task per leader broker, pulling every partition this broker follows from that leader.

Each round is one Fetch RPC carrying all of the leader's partitions (few, large RPCs) with this broker's replica id
and epoch, each partition's fetch offset (our log end offset), last fetched epoch and durable offset (our recovery
point: the leader removes a tombstone only once every replica has fsynced it). The leader long-polls until it has
new data. Per partition the answer is applied by ``apply_fetched`` (fetch_response.py) against the position the
request was sent at: an answer to a position the partition has since left (truncation, restart, new leader epoch) is
dropped and asked again; otherwise truncate on a diverging epoch, append, take the high watermark. A partition whose
leader or epoch changed leaves its fetcher at once and joins the new leader's (``assign``); one the leader refuses
(not leader, epoch mismatch) pauses for ``replica.fetch.backoff.ms`` or until new metadata moves it, whichever comes
first. A partition whose log went offline (a disk error) leaves the fetcher; the others keep replicating. A log
start offset taken from the leader (its DeleteRecords or retention) is written to the checkpoint before the next
fetch reports it: the leader counts a replica as trimmed (DeleteRecords' answer) only once the trim survives that
replica's crash.

The request goes over a transport chosen per leader (``replica.fetch.protocol``): the leader's gRPC listener, or
its Kafka listener (``broker/kafka/replica_connection.py``, whose answers the leader sends with sendfile). A
transport only carries the request and turns the answer into ``FetchedPartition`` values; everything after
(``apply_fetched``, parking, backoff) is the same code whatever the transport.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

import grpc

from odradek.broker.fetch_response import (
    Append,
    FetchedPartition,
    FetchFailedError,
    FetchPosition,
    FetchRefusedError,
    PartitionFetch,
    Refused,
    ReplicaFetchRequest,
    Stale,
    apply_fetched,
)
from odradek.broker.kafka.replica_connection import KafkaTransport
from odradek.broker.partition import Partition
from odradek.client.common.metadata_image import MetadataImage
from odradek.client.connection import ChannelPool
from odradek.client.errors import ErrorCode, OdradekError
from odradek.proto import broker_pb2 as pb
from odradek.proto import broker_pb2_grpc

logger = logging.getLogger(__name__)

Key = tuple[str, int]

# Errors that mean the leader and this follower are at different metadata versions, settled within moments.
_METADATA_LAG = frozenset(
    {
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    }
)


GRPC, KAFKA = "grpc", "kafka"
POSITION_REFRESH_S = 5.0  # how often every partition's position is read again from its log
FETCH_PROTOCOLS = (GRPC, KAFKA)


@dataclass(frozen=True, slots=True)
class FetcherConfig:
    max_wait_ms: int = 500
    min_bytes: int = 1
    partition_max_bytes: int = 1048576
    response_max_bytes: int = 10485760
    backoff_ms: int = 1000
    # replica.fetch.protocol: "kafka" (a node's default) fetches from a leader's Kafka listener (one of these names)
    # when it advertises one, else over gRPC; "grpc" (this class's default, for tests of the fetcher alone).
    protocol: str = GRPC
    kafka_listener_names: frozenset[str] = field(default_factory=lambda: frozenset({"KAFKA"}))
    # The TLS context for a connection to a leader's Kafka listener (None: plaintext), asked per connection.
    kafka_tls: Callable[[], ssl.SSLContext | None] = field(default=lambda: None, compare=False)
    # Why this follower cannot authenticate on the leaders' Kafka listener (a SASL one that takes no certificate:
    # nodes have no SASL credentials), making "kafka" fetch over gRPC; "" = it can.
    kafka_refused: str = ""

    def __post_init__(self) -> None:
        if self.protocol not in FETCH_PROTOCOLS:
            raise ValueError(f"replica.fetch.protocol must be one of {', '.join(FETCH_PROTOCOLS)}: {self.protocol!r}")


class FetchTransport(Protocol):
    """Carries one follower fetch to a leader and brings back each partition's answer. Raises FetchFailedError or
    FetchRefusedError; an answer for a partition not asked for is the caller's to ignore."""

    target: tuple[str, str]  # (protocol, address): a new target gets a new transport

    async def send(
        self, request: ReplicaFetchRequest, timeout: float, changes: Mapping[Key, PartitionFetch] | None = None
    ) -> dict[Key, FetchedPartition]:
        """``changes``: the entries of ``request`` whose position moved since the previous request, the partitions
        being the same (None: unknown); a transport in a fetch session sends only those."""
        ...

    async def close(self) -> None: ...


def fetch_request_proto(request: ReplicaFetchRequest) -> pb.FetchRequest:
    return pb.FetchRequest(
        replica_id=request.replica_id,
        replica_epoch=request.replica_epoch,
        max_wait_ms=request.max_wait_ms,
        min_bytes=request.min_bytes,
        max_bytes=request.max_bytes,
        topics=[
            pb.FetchTopic(
                name=name,
                partitions=[
                    pb.FetchPartition(
                        partition=p.partition,
                        current_leader_epoch=p.current_leader_epoch,
                        fetch_offset=p.fetch_offset,
                        last_fetched_epoch=p.last_fetched_epoch,
                        log_start_offset=p.log_start_offset,
                        partition_max_bytes=p.partition_max_bytes,
                        durable_offset=p.durable_offset,
                    )
                    for p in parts
                ],
            )
            for name, parts in request.topics
        ],
    )


class GrpcTransport:
    """The leader's gRPC listener (the Broker service's Fetch), over the manager's shared channel pool."""

    def __init__(self, pool: ChannelPool, address: str) -> None:
        self.pool = pool
        self.address = address
        self.target = (GRPC, address)

    async def send(
        self, request: ReplicaFetchRequest, timeout: float, changes: Mapping[Key, PartitionFetch] | None = None
    ) -> dict[Key, FetchedPartition]:
        stub = broker_pb2_grpc.BrokerStub(self.pool.get(self.address))
        try:
            response = await stub.Fetch(fetch_request_proto(request), timeout=timeout)
        except grpc.aio.AioRpcError as e:
            raise FetchFailedError(e.code().name) from e
        if response.error != ErrorCode.NONE:
            raise FetchRefusedError(response.error)
        answers: dict[Key, FetchedPartition] = {}
        for t in response.topics:
            for r in t.partitions:
                # A partition answered twice (never, from a correct leader): the first answer counts; a second
                # would have been dropped as stale once the first was applied.
                answers.setdefault((t.name, r.partition), FetchedPartition.from_proto(r))
        return answers

    async def close(self) -> None:
        """The channel belongs to the manager's pool."""


class LeaderFetcher:
    """Fetches from one leader broker for as long as this broker follows some partition there."""

    def __init__(self, manager: ReplicaFetcherManager, leader_id: int) -> None:
        self.manager = manager
        self.leader_id = leader_id
        self.partitions: dict[Key, Partition] = {}
        self.parked: set[Key] = set()  # refused by the leader: wait for metadata
        # Each fetched partition's position (``_sent``) and request entry (``_fetches``), read from its log only when
        # it may have moved (added, an answer applied, or, checked every POSITION_REFRESH_S, a flush moved its
        # recovery point): an idle round reads no log.
        self._sent: dict[Key, FetchPosition] = {}
        self._fetches: dict[Key, PartitionFetch] = {}
        self._stale: set[Key] = set()
        # The request's partition list, kept between rounds: a moved position replaces its entry in place (at
        # ``_slots``), and only a partition joining or leaving rebuilds it. ``_changes`` holds the entries moved
        # since the last request, which is all a fetch session sends (None: the partitions changed, compare all):
        # a round of a fetcher following thousands of partitions costs what moved, not what it follows.
        self._topics: list[tuple[str, list[PartitionFetch]]] = []
        self._slots: dict[Key, tuple[list[PartitionFetch], int]] | None = None
        self._changes: dict[Key, PartitionFetch] | None = None
        self._refresh_at = 0.0
        self._changed = asyncio.Event()
        self._log_start_moved = False  # a partition's log start moved in the last answer: checkpoint it
        self._transport: FetchTransport | None = None
        self._task = asyncio.create_task(self._run(), name=f"fetcher-{leader_id}")

    def add(self, p: Partition) -> None:
        key = (p.topic, p.partition)
        self.partitions[key] = p
        self.parked.discard(key)
        self._stale.add(key)
        self._changed.set()

    def remove(self, key: Key) -> None:
        self.partitions.pop(key, None)
        self.parked.discard(key)
        self._forget(key)

    def _forget(self, key: Key) -> None:
        self._sent.pop(key, None)
        if self._fetches.pop(key, None) is not None:
            self._slots = None

    async def stop(self) -> None:
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)
        if self._transport is not None:
            transport, self._transport = self._transport, None
            await transport.close()

    async def _transport_for(self, target: tuple[str, str]) -> FetchTransport:
        """The transport to ``target``, replacing the one to a former target (the leader re-registered elsewhere,
        or moved to or from its Kafka listener)."""
        if self._transport is not None and self._transport.target != target:
            transport, self._transport = self._transport, None
            await transport.close()
        if self._transport is None:
            self._transport = self.manager.transport(self.leader_id, target)
        return self._transport

    def _request(self) -> tuple[ReplicaFetchRequest, dict[Key, FetchPosition], dict[Key, PartitionFetch] | None] | None:
        """The next request, per partition the position it was sent at, and the entries moved since the previous
        request (None when partitions joined or left); None when there is nothing to fetch. The position map is
        the fetcher's own, updated in place by the next call (after the answer to this one is applied)."""
        config = self.manager.config
        now = time.monotonic()
        if now >= self._refresh_at:
            self._refresh_at = now + POSITION_REFRESH_S
            self._stale.update(self._moved_outside_answers())
        stale, self._stale = self._stale, set()
        changes = self._changes
        sent, fetches, slots = self._sent, self._fetches, self._slots
        max_bytes = config.partition_max_bytes
        for key in stale:
            p = self.partitions.get(key)
            if p is None or key in self.parked:
                continue
            try:
                offset, epoch = p.fetch_position()  # raises the log's error once it is offline
                log = p.log
                log_start, durable = log.log_start_offset, log.recovery_point
            except Exception as e:
                self._forget(key)
                self._failed(key, p, e)
                slots = self._slots
                continue
            leader_epoch = p.leader_epoch
            fetch = PartitionFetch(key[1], leader_epoch, offset, epoch, log_start, max_bytes, durable)
            if fetches.get(key) == fetch:
                continue
            sent[key] = FetchPosition(offset, epoch, leader_epoch)
            fetches[key] = fetch
            slot = None if slots is None else slots.get(key)
            if slot is None:
                slots = self._slots = None  # a partition joined: rebuild the list
            else:
                slot[0][slot[1]] = fetch
                if changes is not None:
                    changes[key] = fetch
        if slots is None:
            topics: dict[str, list[PartitionFetch]] = {}
            slots = {}
            for key, fetch in fetches.items():
                parts = topics.get(key[0])
                if parts is None:
                    parts = topics[key[0]] = []
                slots[key] = (parts, len(parts))
                parts.append(fetch)
            self._topics, self._slots, changes = list(topics.items()), slots, None
        self._changes = {}
        if not self._topics:
            return None
        request = ReplicaFetchRequest(
            self.manager.broker_id,
            self.manager.broker_epoch(),
            config.max_wait_ms,
            config.min_bytes,
            config.response_max_bytes,
            self._topics,
        )
        return request, sent, changes

    def _moved_outside_answers(self) -> list[Key]:
        """The partitions whose position moved other than by an answer: a flush moved the recovery point (sent
        as the durable offset), or the log went offline. Compared on plain attributes, without the logs' locks:
        a follower of thousands of idle partitions reads none of them."""
        moved = []
        for key, fetch in self._fetches.items():
            p = self.partitions.get(key)
            if p is None:
                continue
            log = p.log
            durable, start = log.recovery_point, log.log_start_offset
            if durable != fetch.durable_offset or start != fetch.log_start_offset or log.offline:
                moved.append(key)
        return moved

    async def _run(self) -> None:
        backoff = self.manager.config.backoff_ms / 1000
        while True:
            built = self._request()
            target = self.manager.target_of(self.leader_id)
            if built is None or target is None:
                self._changed.clear()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(backoff):  # not wait_for: in 3.11 it can swallow a cancel
                        await self._changed.wait()
                continue
            request, sent, changes = built
            transport = await self._transport_for(target)
            timeout = self.manager.config.max_wait_ms / 1000 + 10
            try:
                answers = await transport.send(request, timeout, changes)
            except FetchFailedError as e:
                logger.debug("fetch from broker %d failed: %s", self.leader_id, e)
                await asyncio.sleep(backoff)
                continue
            except FetchRefusedError as e:
                logger.warning("broker %d refused our fetch: %s", self.leader_id, e)
                await asyncio.sleep(backoff)
                continue
            self._apply(answers, sent)
            if self._log_start_moved:
                self._log_start_moved = False
                try:
                    await asyncio.to_thread(self.manager.persist_log_starts)
                except Exception:  # a failed dir is taken offline by the log manager; keep replicating the rest
                    logger.exception("writing the log start offsets failed")

    def _apply(self, answers: dict[Key, FetchedPartition], sent: dict[Key, FetchPosition]) -> None:
        for key, r in answers.items():
            p = self.partitions.get(key)
            position = sent.get(key)
            if p is None or position is None:
                continue  # moved to another leader while the fetch was out, or not asked for
            try:
                self._apply_partition(key, p, position, r)
            except Exception as e:
                self._failed(key, p, e)

    def _failed(self, key: Key, p: Partition, error: Exception) -> None:
        """One partition failed; the others keep replicating. An offline log (a disk error) leaves the fetcher
        (new metadata may assign it again); anything else pauses the partition for the backoff."""
        if p.log.offline:
            logger.error("%s: log offline, no longer fetched from broker %d: %s", p, self.leader_id, error)
            self.remove(key)
            self.manager.lag.pop(key, None)
        elif isinstance(error, OdradekError):
            logger.warning("%s: cannot apply fetched data: %s", p, error)
            self._park(key, p)
        else:  # a bug must not stop replication of the other partitions from this leader
            logger.error("%s: fetching from broker %d failed", p, self.leader_id, exc_info=error)
            self._park(key, p)

    def _park(self, key: Key, p: Partition) -> None:
        self.parked.add(key)
        self._forget(key)
        self.manager.retry_later(key, p)

    def _apply_partition(self, key: Key, p: Partition, sent: FetchPosition, r: FetchedPartition) -> None:
        self._stale.add(key)  # an answer may move the position: read it again for the next request
        log_start = p.log.log_start_offset
        action = apply_fetched(p, sent, r)
        if p.log.log_start_offset != log_start:
            self._log_start_moved = True
        if isinstance(action, Append):
            self.manager.lag[key] = max(0, action.leader_log_end_offset - p.log.log_end_offset)
        elif isinstance(action, Stale):
            logger.debug("%s: dropped an answer for %s, now at %s", p, action.sent, action.current)
        elif isinstance(action, Refused):
            # Typically one of us has not applied the latest metadata yet (NOT_LEADER_OR_FOLLOWER, a leader epoch
            # mismatch, a partition not created yet): new metadata moves the partition (``assign``), and if none
            # comes because we are the ones ahead, the retry after the backoff finds the leader caught up.
            level = logging.DEBUG if action.error in _METADATA_LAG else logging.WARNING
            logger.log(level, "%s: broker %d answered %s", p, self.leader_id, ErrorCode.Name(action.error))
            self._park(key, p)


class ReplicaFetcherManager:
    def __init__(
        self,
        broker_id: int,
        broker_epoch: Callable[[], int],
        image: Callable[[], MetadataImage],
        config: FetcherConfig,
        persist_log_starts: Callable[[], None] = lambda: None,
    ) -> None:
        self.broker_id = broker_id
        # Writes every log's start offset durably (the log manager's checkpoint); run in a thread.
        self.persist_log_starts = persist_log_starts
        self.broker_epoch = broker_epoch
        self.image = image
        self.config = config
        self.pool = ChannelPool(inter_broker=True)
        self.fetchers: dict[int, LeaderFetcher] = {}
        self._following: dict[Key, tuple[int, int]] = {}  # key -> (leader id, leader epoch)
        self.lag: dict[Key, int] = {}
        self._no_kafka_listener: set[int] = set()  # leaders already logged as fetched from over gRPC
        if config.protocol == KAFKA and config.kafka_refused:
            logger.warning("replica.fetch.protocol=kafka: fetching over gRPC instead, since %s", config.kafka_refused)

    def address_of(self, broker_id: int) -> str | None:
        b = self.image().brokers.get(broker_id)
        return None if b is None else f"{b.host}:{b.port}"

    def target_of(self, broker_id: int) -> tuple[str, str] | None:
        """(protocol, address) to fetch from ``broker_id``: its Kafka listener under ``replica.fetch.protocol =
        kafka`` when it advertises one, else its gRPC listener; None while it is not registered."""
        b = self.image().brokers.get(broker_id)
        if b is None:
            return None
        if self.config.protocol == KAFKA and not self.config.kafka_refused:
            found = next(
                (f"{host}:{port}" for name, host, port in b.listeners if name in self.config.kafka_listener_names),
                None,
            )
            if found is not None:
                self._no_kafka_listener.discard(broker_id)
                return KAFKA, found
            if broker_id not in self._no_kafka_listener:
                self._no_kafka_listener.add(broker_id)
                logger.info("broker %d advertises no Kafka listener: fetching from it over gRPC", broker_id)
        return GRPC, f"{b.host}:{b.port}"

    def transport(self, leader_id: int, target: tuple[str, str]) -> FetchTransport:
        protocol, address = target
        if protocol == KAFKA:
            logger.info("fetching from broker %d over its Kafka listener at %s", leader_id, address)
            return KafkaTransport(address, self.broker_id, self.image, self.config.kafka_tls)
        return GrpcTransport(self.pool, address)

    def assign(self, p: Partition) -> None:
        """Fetch ``p`` from its current leader (idempotent; a new leader or epoch restarts it)."""
        key = (p.topic, p.partition)
        target = (p.leader_id, p.leader_epoch)
        current = self._following.get(key)
        if current == target:
            return
        self.remove(key)
        self._following[key] = target
        fetcher = self.fetchers.get(p.leader_id)
        if fetcher is None:
            fetcher = self.fetchers[p.leader_id] = LeaderFetcher(self, p.leader_id)
        fetcher.add(p)

    def remove(self, key: Key) -> None:
        current = self._following.pop(key, None)
        self.lag.pop(key, None)
        if current is not None and (fetcher := self.fetchers.get(current[0])) is not None:
            fetcher.remove(key)

    def retry_later(self, key: Key, p: Partition) -> None:
        """Unpark a partition after the backoff (errors that new metadata would not settle)."""

        def unpark() -> None:
            current = self._following.get(key)
            if current is not None and (fetcher := self.fetchers.get(current[0])) is not None:
                fetcher.add(p)

        asyncio.get_running_loop().call_later(self.config.backoff_ms / 1000, unpark)

    async def close(self) -> None:
        fetchers, self.fetchers = list(self.fetchers.values()), {}
        await asyncio.gather(*(f.stop() for f in fetchers))
        self._following.clear()
        await self.pool.close()

"""Follower fetchers: one task per leader broker, pulling every partition this broker follows from that leader.

Each round is one Fetch RPC carrying all of the leader's partitions (few, large RPCs) with this
broker's replica id and epoch, each partition's fetch offset (our log end offset) and last fetched epoch. The
leader long-polls until it has new data. Per partition the answer is applied by ``apply_fetched``
(fetch_response.py) against the position the request was sent at: an answer to a position the partition has
since left (truncation, restart, new leader epoch) is dropped and asked again; otherwise truncate on a diverging
epoch, append, take the high watermark. A partition whose leader or epoch changed leaves its fetcher at once and
joins the new leader's (``assign``); one the leader refuses (not leader, epoch mismatch) pauses for
``replica.fetch.backoff.ms`` or until new metadata moves it, whichever comes first. A partition whose log went
offline (a disk error) leaves the fetcher; the others keep replicating. A log start offset taken from the leader
(its DeleteRecords or retention) is written to the checkpoint before the next fetch reports it: the leader counts
a replica as trimmed (DeleteRecords' answer) only once the trim survives that replica's crash.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass

import grpc

from odradek.broker.fetch_response import Append, FetchedPartition, FetchPosition, Refused, Stale, apply_fetched
from odradek.broker.partition import Partition
from odradek.client.connection import ChannelPool
from odradek.client.errors import ErrorCode, OdradekError
from odradek.controller.metadata.image import MetadataImage
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


@dataclass(frozen=True, slots=True)
class FetcherConfig:
    max_wait_ms: int = 500
    min_bytes: int = 1
    partition_max_bytes: int = 1048576
    response_max_bytes: int = 10485760
    backoff_ms: int = 1000


class LeaderFetcher:
    """Fetches from one leader broker for as long as this broker follows some partition there."""

    def __init__(self, manager: ReplicaFetcherManager, leader_id: int) -> None:
        self.manager = manager
        self.leader_id = leader_id
        self.partitions: dict[Key, Partition] = {}
        self.parked: set[Key] = set()  # refused by the leader: wait for metadata
        self._changed = asyncio.Event()
        self._log_start_moved = False  # a partition's log start moved in the last answer: checkpoint it
        self._task = asyncio.create_task(self._run(), name=f"fetcher-{leader_id}")

    def add(self, p: Partition) -> None:
        key = (p.topic, p.partition)
        self.partitions[key] = p
        self.parked.discard(key)
        self._changed.set()

    def remove(self, key: Key) -> None:
        self.partitions.pop(key, None)
        self.parked.discard(key)

    async def stop(self) -> None:
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)

    def _request(self) -> tuple[pb.FetchRequest, dict[Key, FetchPosition]] | None:
        """The next request and, per partition, the position it was sent at (None when nothing to fetch)."""
        config = self.manager.config
        topics: dict[str, list[pb.FetchPartition]] = {}
        sent: dict[Key, FetchPosition] = {}
        for key, p in list(self.partitions.items()):
            if key in self.parked:
                continue
            try:
                offset, epoch = p.fetch_position()  # raises the log's error once it is offline
                log_start = p.log.log_start_offset
            except Exception as e:
                self._failed(key, p, e)
                continue
            sent[key] = FetchPosition(offset, epoch, p.leader_epoch)
            topics.setdefault(key[0], []).append(
                pb.FetchPartition(
                    partition=key[1],
                    current_leader_epoch=p.leader_epoch,
                    fetch_offset=offset,
                    last_fetched_epoch=epoch,
                    log_start_offset=log_start,
                    partition_max_bytes=config.partition_max_bytes,
                )
            )
        if not topics:
            return None
        request = pb.FetchRequest(
            replica_id=self.manager.broker_id,
            replica_epoch=self.manager.broker_epoch(),
            max_wait_ms=config.max_wait_ms,
            min_bytes=config.min_bytes,
            max_bytes=config.response_max_bytes,
            topics=[pb.FetchTopic(name=name, partitions=parts) for name, parts in topics.items()],
        )
        return request, sent

    async def _run(self) -> None:
        backoff = self.manager.config.backoff_ms / 1000
        while True:
            built = self._request()
            address = self.manager.address_of(self.leader_id)
            if built is None or address is None:
                self._changed.clear()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(backoff):  # not wait_for: in 3.11 it can swallow a cancel
                        await self._changed.wait()
                continue
            request, sent = built
            stub = broker_pb2_grpc.BrokerStub(self.manager.pool.get(address))
            timeout = self.manager.config.max_wait_ms / 1000 + 10
            try:
                response = await stub.Fetch(request, timeout=timeout)
            except grpc.aio.AioRpcError as e:
                logger.debug("fetch from broker %d failed: %s", self.leader_id, e.code().name)
                await asyncio.sleep(backoff)
                continue
            if response.error != ErrorCode.NONE:
                logger.warning("broker %d refused our fetch: %s", self.leader_id, ErrorCode.Name(response.error))
                await asyncio.sleep(backoff)
                continue
            self._apply(response, sent)
            if self._log_start_moved:
                self._log_start_moved = False
                try:
                    await asyncio.to_thread(self.manager.persist_log_starts)
                except Exception:  # a failed dir is taken offline by the log manager; keep replicating the rest
                    logger.exception("writing the log start offsets failed")

    def _apply(self, response: pb.FetchResponse, sent: dict[Key, FetchPosition]) -> None:
        for t in response.topics:
            for r in t.partitions:
                key = (t.name, r.partition)
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
        self.manager.retry_later(key, p)

    def _apply_partition(self, key: Key, p: Partition, sent: FetchPosition, r: pb.FetchPartitionResponse) -> None:
        log_start = p.log.log_start_offset
        action = apply_fetched(p, sent, FetchedPartition.from_proto(r))
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

    def address_of(self, broker_id: int) -> str | None:
        b = self.image().brokers.get(broker_id)
        return None if b is None else f"{b.host}:{b.port}"

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

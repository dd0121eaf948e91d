"""The client's view of the cluster: brokers, and each partition's leader and leader epoch.

Producer and consumer send every partition's requests straight to its leader, so they read this
cache on every batch and refresh it when it proves wrong: after NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION,
FENCED_LEADER_EPOCH or a connection error (``request_refresh``), and every ``metadata.max.age.ms``. Concurrent
refreshes share one ``Metadata`` RPC, and a leader hint carried by a response moves a partition without any.
Leader epochs only move forward, so a lagging broker's older answer cannot undo a newer leader.

Requests that name topics let the broker create the missing ones (``allow_auto_topic_creation``) when the client
asks for it: the producer does, as Kafka's producers do; the consumer only with ``allow.auto.create.topics``. A
topic being created answers LEADER_NOT_AVAILABLE until it has partitions, and is waited for like any other.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Callable, Iterable
from typing import NamedTuple

import grpc

from odradek.client.config import ClientConfig
from odradek.client.connection import ChannelPool, tls_hint
from odradek.client.errors import (
    ClientTimeoutError,
    ErrorCode,
    NetworkError,
    OdradekError,
    RequestTimedOutError,
    TopicAuthorizationFailedError,
    UnknownTopicOrPartitionError,
    error_for_code,
)
from odradek.proto import broker_pb2 as pb
from odradek.proto import broker_pb2_grpc, common_pb2

logger = logging.getLogger(__name__)

NO_LEADER = -1
# A metadata request unanswered this long makes the refresh ask the next node as well (see Metadata._fetch).
HEDGE_S = 0.25


class PartitionLeader(NamedTuple):
    leader: int  # node id, NO_LEADER when offline or on a broker we do not know
    epoch: int


def rpc_error(address: str, e: grpc.aio.AioRpcError, pool: ChannelPool | None = None) -> OdradekError:
    """The typed error for a failed RPC: a deadline is a timeout, anything else a network failure (both
    retriable). With the ``pool`` the call went through, a plaintext channel closed at once names TLS."""
    details = e.details() or e.code().name
    if pool is not None:
        details = tls_hint(details, pool.security_for(address))
    message = f"{address}: {details}"
    if e.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
        return RequestTimedOutError(message)
    return NetworkError(message)


class Metadata:
    """Must be created on the event loop it is used from; ``partition_counts`` may be read from any thread."""

    def __init__(self, config: ClientConfig, pool: ChannelPool, *, allow_auto_topic_creation: bool = False) -> None:
        self._bootstrap = list(config.bootstrap_servers)
        self._allow_auto_topic_creation = allow_auto_topic_creation
        self._pool = pool
        self._timeout = config.request_timeout_ms / 1000
        self._max_age = config.metadata_max_age_ms / 1000
        self._backoff = config.retry_backoff_ms / 1000
        self.brokers: dict[int, str] = {}
        # Updated in place, never replaced: the producer's send() reads it from the caller's thread.
        self.partition_counts: dict[str, int] = {}
        self._leaders: dict[str, list[PartitionLeader]] = {}
        self._topic_ids: dict[str, bytes] = {}
        self._topic_errors: dict[str, int] = {}
        self._wanted: set[str] = set()
        self._all_topics = False  # a pattern subscription needs every topic's name
        self._stubs: dict[str, broker_pb2_grpc.BrokerAsyncStub] = {}
        self._listeners: list[Callable[[], None]] = []
        self._inflight: asyncio.Future[None] | None = None
        self._updated = 0.0
        self._attempted = 0.0
        self._last_error: OdradekError | None = None  # the last refresh's failure; None once one succeeds
        self._needed = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(self._maintain())

    # ---- reading ----

    def leader(self, topic: str, partition: int) -> int:
        leaders = self._leaders.get(topic)
        return leaders[partition].leader if leaders is not None and partition < len(leaders) else NO_LEADER

    def leader_epoch(self, topic: str, partition: int) -> int:
        leaders = self._leaders.get(topic)
        return leaders[partition].epoch if leaders is not None and partition < len(leaders) else -1

    def available_partitions(self, topic: str) -> list[int]:
        """Partitions with a reachable leader: where records without a key should go."""
        return [p for p, leader in enumerate(self._leaders.get(topic, ())) if leader.leader != NO_LEADER]

    def stub(self, node_id: int) -> broker_pb2_grpc.BrokerAsyncStub | None:
        address = self.brokers.get(node_id)
        return None if address is None else self._stub(address)

    def _stub(self, address: str) -> broker_pb2_grpc.BrokerAsyncStub:
        stub = self._stubs.get(address)
        if stub is None:
            stub = self._stubs[address] = broker_pb2_grpc.BrokerStub(self._pool.get(address))
        return stub

    def on_update(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` (on the loop) after every refresh and leader hint, e.g. to re-route waiting batches."""
        self._listeners.append(callback)

    # ---- refreshing ----

    def add_topics(self, topics: Iterable[str]) -> None:
        """Topics this client uses: each refresh asks for them. A new one triggers a refresh."""
        new = set(topics) - self._wanted
        if new:
            self._wanted |= new
            self.request_refresh()

    def want_all_topics(self) -> None:
        """Ask every refresh for all topics (a consumer subscribed to a pattern matches them), and refresh now."""
        if not self._all_topics:
            self._all_topics = True
            self.request_refresh()

    def request_refresh(self) -> None:
        """Refresh soon (at most once per ``retry.backoff.ms``), without waiting for it."""
        self._needed.set()

    async def refresh(self) -> None:
        """Fetch metadata now; concurrent callers share the RPC in flight. Raises the last node's error if no node
        answers."""
        if self._inflight is None:
            self._inflight = asyncio.ensure_future(self._fetch())
            self._inflight.add_done_callback(self._refreshed)
        await asyncio.shield(self._inflight)

    def _refreshed(self, future: asyncio.Future[None]) -> None:
        self._inflight = None
        if not future.cancelled() and future.exception() is not None:
            logger.debug("metadata refresh failed: %s", future.exception())
            error = future.exception()
            self._last_error = error if isinstance(error, OdradekError) else None

    async def wait_for_topic(self, topic: str, timeout: float, budget: float | None = None) -> int:
        """The topic's partition count, refreshing until it is known. TopicAuthorizationFailedError at once when
        the caller may not describe the topic; after ``timeout`` seconds raise
        UnknownTopicOrPartitionError if the cluster says it does not exist, the connection failure (NetworkError
        "no node reachable: ...") if no node answered, else ClientTimeoutError. The errors name ``budget`` (default
        ``timeout``): the whole wait the caller allowed (max.block.ms), of which ``timeout`` may be what is left."""
        self.add_topics((topic,))
        deadline = time.monotonic() + timeout
        while (count := self.partition_counts.get(topic)) is None:
            if self._topic_errors.get(topic) == ErrorCode.TOPIC_AUTHORIZATION_FAILED:
                # As Kafka's clients: waiting cannot help, an ACL has to change first.
                raise TopicAuthorizationFailedError(f"not authorized to describe topic '{topic}'")
            if self._topic_errors.get(topic) == ErrorCode.INVALID_TOPIC_EXCEPTION:
                # As Kafka's clients: no topic can have that name.
                raise error_for_code(ErrorCode.INVALID_TOPIC_EXCEPTION, f"invalid topic name '{topic}'")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                allowed_ms = (timeout if budget is None else budget) * 1000
                message = f"topic '{topic}' not present in metadata after {allowed_ms:.0f} ms"
                if self._topic_errors.get(topic) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                    raise UnknownTopicOrPartitionError(message)
                if self._last_error is not None:  # the cluster could not be asked: do not blame the topic
                    raise self._last_error
                if not self._updated:
                    nodes = ", ".join(self._candidates())
                    raise NetworkError(f"no node reachable: no answer from {nodes} within {allowed_ms:.0f} ms")
                raise ClientTimeoutError(message)
            await self._refresh_or_back_off(deadline, lambda: topic in self.partition_counts)
        return count

    async def _refresh_or_back_off(self, deadline: float, done: Callable[[], bool]) -> None:
        """One refresh before ``deadline`` (its failure only logged: the waiter decides at its deadline), then the
        retry backoff unless ``done()``."""
        with contextlib.suppress(OdradekError, TimeoutError):
            async with asyncio.timeout(deadline - time.monotonic()):
                await self.refresh()
        if not done():
            await asyncio.sleep(min(self._backoff, max(0.0, deadline - time.monotonic())))

    async def wait_for_partition(self, topic: str, partition: int, timeout: float) -> int:
        """The topic's partition count once it includes ``partition`` (a topic grows with CreatePartitions),
        refreshing until then; after ``timeout`` seconds UnknownTopicOrPartitionError, in the words of Kafka's
        producer, which waits the same way (max.block.ms)."""
        deadline = time.monotonic() + timeout
        count = await self.wait_for_topic(topic, timeout)
        while (count := self.partition_counts.get(topic, count)) <= partition:
            if deadline - time.monotonic() <= 0:
                raise UnknownTopicOrPartitionError(
                    f"Partition {partition} of topic {topic} with partition count {count} is not present in metadata"
                    f" after {timeout * 1000:.0f} ms."
                )
            await self._refresh_or_back_off(deadline, lambda: self.partition_counts.get(topic, 0) > partition)
        return count

    def apply_leader_hint(self, topic: str, partition: int, hint: common_pb2.LeaderHint) -> None:
        """Move a partition to the leader a NOT_LEADER_OR_FOLLOWER / FENCED_LEADER_EPOCH response named, if it is
        newer than ours and on a broker we know; otherwise fall back to a refresh."""
        leaders = self._leaders.get(topic)
        if leaders is None or partition >= len(leaders) or hint.leader_id not in self.brokers:
            self.request_refresh()
            return
        if hint.leader_epoch > leaders[partition].epoch:
            leaders[partition] = PartitionLeader(hint.leader_id, hint.leader_epoch)
            self._notify()

    async def close(self) -> None:
        for task in (self._task, self._inflight):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, OdradekError):
                    await task

    async def _maintain(self) -> None:
        """Refresh when asked (no more often than ``retry.backoff.ms``) and when the cache is older than
        ``metadata.max.age.ms``; retry failed refreshes after the backoff."""
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(max(0.0, self._updated + self._max_age - time.monotonic())):
                    await self._needed.wait()
            self._needed.clear()
            delay = self._attempted + self._backoff - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            try:
                await self.refresh()
            except OdradekError:
                self._needed.set()
            except Exception:
                logger.exception("metadata refresh failed")
                self._needed.set()

    def nodes(self) -> list[str]:
        """Addresses to ask a cluster-wide question (FindCoordinator): known brokers, then the bootstrap list."""
        return self._candidates()

    def _candidates(self) -> list[str]:
        """Known brokers first (they reflect the cluster now), then the bootstrap list; each in random order to
        spread the load."""
        known = list(self.brokers.values())
        random.shuffle(known)
        bootstrap = [a for a in self._bootstrap if a not in known]
        random.shuffle(bootstrap)
        return known + bootstrap

    async def _fetch(self) -> None:
        self._attempted = time.monotonic()
        request = (
            pb.MetadataRequest(all_topics=True)
            if self._all_topics
            else pb.MetadataRequest(
                topics=sorted(self._wanted), allow_auto_topic_creation=self._allow_auto_topic_creation
            )
        )
        failures: list[str] = []
        # Hedged: a node that has not answered within HEDGE_S (paused, overloaded, half-dead) does not hold the
        # refresh for a whole request timeout; the next one is asked too and the first answer wins.
        pending: dict[asyncio.Future[pb.MetadataResponse], str] = {}
        candidates = self._candidates()
        try:
            while candidates or pending:
                if candidates:
                    address = candidates.pop(0)
                    pending[asyncio.ensure_future(self._stub(address).Metadata(request, timeout=self._timeout))] = (
                        address
                    )
                done, _ = await asyncio.wait(
                    pending, timeout=HEDGE_S if candidates else None, return_when=asyncio.FIRST_COMPLETED
                )
                for future in done:
                    address = pending.pop(future)
                    try:
                        response = future.result()
                    except grpc.aio.AioRpcError as e:
                        failures.append(str(rpc_error(address, e, self._pool)))
                        continue
                    self._last_error = None
                    self._apply(response, request.all_topics)
                    return
        finally:
            for future in pending:
                future.cancel()
        raise NetworkError("no node reachable: " + ("; ".join(failures) or "no bootstrap server"))

    def _apply(self, response: pb.MetadataResponse, all_topics: bool = False) -> None:
        """Update the caches; an answer for every topic (``all_topics``) also drops the topics it no longer lists,
        which were deleted, so that a pattern subscription stops matching them."""
        brokers = {b.node_id: f"{b.host}:{b.port}" for b in response.brokers}
        if brokers:
            self.brokers = brokers
        if all_topics:
            listed = {t.name for t in response.topics}
            for name in [n for n in self.partition_counts if n not in listed]:
                self._leaders.pop(name, None)
                self._topic_ids.pop(name, None)
                self.partition_counts.pop(name, None)
        for t in response.topics:
            if not t.partitions:  # an error, or a topic still being created
                self._topic_errors[t.name] = t.error
                if t.error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:  # deleted, or never existed
                    self._leaders.pop(t.name, None)
                    self.partition_counts.pop(t.name, None)
                continue
            self._topic_errors.pop(t.name, None)
            # Same topic id: keep any partition whose cached epoch is newer (a hint, or a fresher broker's answer).
            old = self._leaders.get(t.name) if self._topic_ids.get(t.name) == t.topic_id else None
            leaders = [PartitionLeader(NO_LEADER, -1)] * (max(p.partition for p in t.partitions) + 1)
            for p in t.partitions:
                leader = PartitionLeader(p.leader if p.leader in self.brokers else NO_LEADER, p.leader_epoch)
                if old is not None and p.partition < len(old) and old[p.partition].epoch > p.leader_epoch:
                    leader = old[p.partition]
                leaders[p.partition] = leader
            self._leaders[t.name] = leaders
            self._topic_ids[t.name] = t.topic_id
            self.partition_counts[t.name] = len(leaders)
        self._updated = time.monotonic()
        self._notify()

    def _notify(self) -> None:
        for callback in self._listeners:
            callback()

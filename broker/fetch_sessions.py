"""The asyncio shell of fetch sessions (fetch_session.py): partition watching, one waiter per session, metrics.

A session round reads only the partitions its request lists and those its partitions marked dirty (``Partition``
calls ``FetchSession.changed`` on every change a fetch could see), and parks one future on the session when that
found too little: an idle round costs no read and no waiter per partition.

The leader's follower bookkeeping stays Kafka's: every partition a round reads records the follower's position
(``read_for_follower``), and a partition left out of rounds because nothing changed still counts the follower as
fetching from its cached position (``Partition.follower_still_at``), replayed every ``refresh_ms`` (a quarter of
``replica.lag.time.max.ms``): a caught-up follower that keeps fetching stays caught up without re-listing, and one
that stops fetching stops refreshing, so the ISR drops it once it falls behind for the lag time.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING

from prometheus_client.core import CounterMetricFamily

from odradek.broker.api.data import FetchRequest, FetchTopic
from odradek.broker.fetch_session import FetchSession, FetchSessionCache, Key, PartitionRead, Seen, SessionError
from odradek.broker.metrics import gauge
from odradek.broker.replica_manager import monotonic_ms

if TYPE_CHECKING:
    from prometheus_client.core import Metric

    from odradek.broker.api.data import FetchOutcome, FetchOutcomes, _FetchPass
    from odradek.broker.replica_manager import ReplicaManager


def seen_of(outcome: FetchOutcome) -> Seen:
    """What a partition's answer tells the fetcher."""
    read, error = outcome.read, outcome.error
    if read is None:
        assert error is not None
        return Seen(error.code, -1, -1, -1, False, False)
    lso = read.high_watermark if read.last_stable_offset < 0 else read.last_stable_offset
    records = read.data is not None and len(read.data.records) > 0
    return Seen(
        0,
        read.high_watermark,
        lso,
        read.log_start_offset,
        records,
        read.diverging is not None,
        read.all_replicas_offset,
    )


def _close(outcomes: Iterable[FetchOutcome]) -> None:
    for o in outcomes:
        if o.read is not None and o.read.data is not None:
            close = getattr(o.read.data.records, "close", None)
            if close is not None:
                close()


class FetchSessions:
    """The broker's session cache with its partitions' watching; one per Kafka listener's backend."""

    def __init__(self, cache: FetchSessionCache, replicas: ReplicaManager, refresh_ms: int) -> None:
        self.cache = cache
        self.replicas = replicas
        self.refresh_ms = max(1, refresh_ms)

    def close(self, session_id: int) -> None:
        session = self.cache.remove(session_id)
        if session is not None:
            self._unwatch(session, list(session.partitions))

    def create(
        self, replica_id: int, uses_topic_ids: bool, partitions: Iterable[tuple[str, bytes, PartitionRead, Seen]]
    ) -> int:
        """A session for a full answer's partitions; its id (0: none was created)."""
        evicted = self.cache.evictions
        sessions = dict(self.cache.sessions)
        session = self.cache.create(replica_id, uses_topic_ids, partitions, monotonic_ms())
        if self.cache.evictions != evicted:
            for gone in sessions.values():
                if gone.closed:
                    self._unwatch(gone, list(gone.partitions))
        if session is None:
            return 0
        self.watch(session, session.partitions)
        return session.id

    def continue_session(
        self, session_id: int, epoch: int, uses_topic_ids: bool, replica_id: int
    ) -> FetchSession | SessionError:
        return self.cache.continue_session(session_id, epoch, uses_topic_ids, replica_id, monotonic_ms())

    def update(
        self, session: FetchSession, listed: Iterable[tuple[str, bytes, PartitionRead]], forgotten: Iterable[Key]
    ) -> None:
        listed = list(listed)
        removed = session.update(listed, forgotten, monotonic_ms())
        self._unwatch(session, removed)
        self.watch(session, ((name, read.partition) for name, _, read in listed))
        if not session.partitions:
            self.cache.remove(session.id)

    def round(self, session: FetchSession) -> SessionRound:
        return SessionRound(self, session)

    def watch(self, session: FetchSession, keys: Iterable[Key]) -> None:
        get = self.replicas.partitions.get
        for key in keys:
            p = get(key)
            if p is not None:
                p.watch(session)

    def _unwatch(self, session: FetchSession, keys: Iterable[Key]) -> None:
        get = self.replicas.partitions.get
        for key in keys:
            p = get(key)
            if p is not None:
                p.unwatch(session)

    def refresh(self, session: FetchSession, now_ms: int) -> None:
        """Replay a follower's idle partitions at their cached positions (see the module's docstring)."""
        get = self.replicas.partitions.get
        dirty = session.dirty
        for key, cached in session.partitions.items():
            if key in dirty:
                continue
            p = get(key)
            if p is not None:
                r = cached.read
                p.follower_still_at(
                    session.replica_id,
                    r.fetch_offset,
                    r.current_leader_epoch,
                    now_ms,
                    r.log_start_offset,
                    r.durable_offset,
                )

    def collect(self) -> Iterator[Metric]:
        """Kafka's FetchSessionCache metrics, at scrape time."""
        cache = self.cache
        g = gauge("odradek_incremental_fetch_sessions", "fetch sessions cached (num-incremental-fetch-sessions)")
        g.add_metric([], len(cache.sessions))
        yield g
        g = gauge(
            "odradek_incremental_fetch_partitions_cached",
            "partitions held by the cached fetch sessions (num-incremental-fetch-partitions-cached)",
        )
        g.add_metric([], cache.partitions_cached())
        yield g
        c = CounterMetricFamily(
            "odradek_incremental_fetch_session_evictions",
            "fetch sessions evicted to make room for another (incremental-fetch-session-evictions)",
        )
        c.add_metric([], cache.evictions)
        yield c
        c = CounterMetricFamily(
            "odradek_incremental_fetch_requests", "incremental fetch requests served, by fetcher", labels=["fetcher"]
        )
        for fetcher, count in cache.incremental_rounds.items():
            c.add_metric([fetcher], count)
        yield c


class SessionRound:
    """One incremental request's long poll, run by BrokerService.fetch in place of its per-partition one."""

    def __init__(self, sessions: FetchSessions, session: FetchSession) -> None:
        self.sessions = sessions
        self.session = session
        self._seen: dict[Key, Seen] = {}  # what the last pass's outcomes tell

    def topic_names(self) -> set[str]:
        """The topics this round may read (a consumer's Read ACL is checked on each)."""
        return {name for name, _ in self.session.partitions}

    async def run(self, read: Callable[[FetchRequest], _FetchPass], request: FetchRequest) -> _FetchPass:
        """Read, and wait on the session while less than ``min_bytes`` of news was found. ``read`` is the broker's
        pass over a request's partitions; the answer holds only the partitions with news."""
        session = self.session
        try:
            done = self._pass(read, request)
            if done.outcomes is None:  # a stale broker epoch: the whole request is refused
                session.abandon_round()
                return done
            now = monotonic_ms()
            if session.refresh_due(now, self.sessions.refresh_ms):
                self.sessions.refresh(session, now)
            min_bytes = max(1, request.min_bytes)
            deadline = time.monotonic() + max(0, request.max_wait_ms) / 1000
            while done.total < min_bytes:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                if not session.dirty:
                    future = asyncio.get_running_loop().create_future()

                    def wake(future: asyncio.Future[None] = future) -> None:
                        if not future.done():
                            future.set_result(None)

                    session.wakeup = wake
                    try:
                        async with asyncio.timeout(remaining):
                            await future
                    except TimeoutError:
                        pass
                    finally:
                        session.wakeup = None
                _close(o for _, parts in done.outcomes or () for o in parts)
                done = self._pass(read, request)
                if done.outcomes is None:
                    session.abandon_round()
                    return done
        except BaseException:
            session.abandon_round()
            raise
        session.answered(self._seen)
        return done

    def _pass(self, read: Callable[[FetchRequest], _FetchPass], request: FetchRequest) -> _FetchPass:
        """One read of the partitions that may have news; the outcomes without news are closed and left out."""
        session = self.session
        topics = [FetchTopic(name, parts) for name, parts in session.next_pass()]
        done = read(dataclasses.replace(request, topics=topics))
        if done.outcomes is None:
            return done
        # What the read itself changed (a follower's position moving the high watermark) is in this answer
        # already: not dirty again, or the next round would read it once more for nothing. Nothing else runs
        # during the read, so every other change is still marked.
        get, dirty = self.sessions.replicas.partitions.get, session.dirty
        for t in topics:
            name = t.name
            for part in t.partitions:
                key = (name, part.partition)
                dirty.discard(key)
                p = get(key)
                if p is not None:
                    p.watch(session)
        kept: FetchOutcomes = []
        seen: dict[Key, Seen] = {}  # what the kept outcomes tell, for ``answered`` should this pass be the last
        for name, parts in done.outcomes:
            news = []
            for o in parts:
                key = (name, o.partition)
                told = seen_of(o)
                if session.has_news(key, told):
                    news.append(o)
                    seen[key] = told
                else:
                    _close((o,))
            if news:
                kept.append((name, news))
        self._seen = seen
        return done._replace(outcomes=kept)

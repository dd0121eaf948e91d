"""Fetch sessions (KIP-227) on the leader's side, sans-I/O: the cache of sessions and what each round reads.

A fetcher (a follower or a consumer on the Kafka listener) that fetches the same partitions over and over sends
them once, in a full request that creates a session, then only what changed: partitions added or whose fetch
position moved, and the ones it forgets. The session remembers each partition's position and what the last answer
told (high watermark, last stable offset, log start offset), so an incremental answer carries only the partitions
with something new for the fetcher, as Kafka's: records, a changed high watermark / last stable offset / log start
offset, an error or a diverging epoch.

Beyond Kafka, which still reads every partition of a session each round, a session here reads only the partitions
that may have news: the ones the request lists, and those marked *dirty* since the last answer. The shell marks a
partition dirty in every session holding it when its log end, high watermark, last stable offset, log start or role
changes (``changed``), so an idle round reads nothing and waits on one callback per session, not one per partition.
A partition stays dirty after an answer that carried records, an error or a divergence, so it is read again next
round, as Kafka would re-send it.

Request rules (Kafka's FetchSession.scala): session id 0 and epoch 0 asks for a new session (a full request);
epoch -1 is a full request without one (and closes the session it names); a session id with epoch 0 closes that
session and opens a new one; a session id with an epoch > 0 continues it (FETCH_SESSION_ID_NOT_FOUND when it is
gone, INVALID_FETCH_SESSION_EPOCH when the epoch is not the next one, FETCH_SESSION_TOPIC_ID_ERROR when the request
names topics by id and the session by name or the other way round). Sessions do not belong to a connection: a
fetcher may reconnect and go on.

Cache rules (``max.incremental.fetch.session.cache.slots`` sessions at most, 0 = no sessions): when full, a new
session takes the slot of the least recently used session idle for ``eviction_ms``; failing that a follower's new
session takes the smallest (then least recently used) consumer session, or a follower session older than
``eviction_ms``; a consumer's new session takes only a session older than ``eviction_ms`` that is a consumer's
and smaller than it. Otherwise no session is created and the answer's session id is 0 (the fetcher keeps sending
full requests). Follower sessions are preferred since losing one costs a full fetch of hundreds of partitions.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import NamedTuple

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
FETCH_SESSION_ID_NOT_FOUND = 70
INVALID_FETCH_SESSION_EPOCH = 71
FETCH_SESSION_TOPIC_ID_ERROR = 106
DEFAULT_EVICTION_MS = 120_000  # Kafka's min.incremental.fetch.session.eviction.ms
MAX_EPOCH = 0x7FFFFFFF

Key = tuple[str, int]


def next_epoch(epoch: int) -> int:
    """The epoch after ``epoch``: epochs wrap to 1, never to 0 (a new session) or -1 (a sessionless fetch)."""
    return 1 if epoch >= MAX_EPOCH else epoch + 1


class PartitionRead(NamedTuple):
    """One partition to read under the broker's fetch field names (what BrokerService.fetch reads of a request)."""

    partition: int
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int
    last_fetched_epoch: int
    log_start_offset: int
    durable_offset: int


class Seen(NamedTuple):
    """What a read of one partition found, as the answer would tell it."""

    error_code: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    has_records: bool
    diverging: bool
    all_replicas_offset: int = -1  # odradek's followers: the offset every replica holds durably


@dataclass(slots=True)
class CachedPartition:
    """A session's partition: the fetcher's position as its requests last gave it, and what the last answer said
    (-1 until one did, so a partition's first answer always carries it)."""

    read: PartitionRead
    topic_id: bytes
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    all_replicas_offset: int = -1

    def has_news(self, seen: Seen) -> bool:
        """Whether an incremental answer must carry the partition (Kafka's rule, plus odradek's follower value)."""
        return (
            seen.has_records
            or seen.error_code != 0
            or seen.diverging
            or seen.high_watermark != self.high_watermark
            or seen.last_stable_offset != self.last_stable_offset
            or seen.log_start_offset != self.log_start_offset
            or seen.all_replicas_offset != self.all_replicas_offset
        )

    def remember(self, seen: Seen) -> None:
        # An error answers a high watermark of -1, so the partition goes out again once the error is gone.
        self.high_watermark = -1 if seen.error_code else seen.high_watermark
        self.last_stable_offset = seen.last_stable_offset
        self.log_start_offset = seen.log_start_offset
        self.all_replicas_offset = seen.all_replicas_offset


class FetchSession:
    """One fetcher's session. ``changed`` is what partitions call (through the shell) when they move; ``wakeup``,
    set by the shell while a round waits, is called on the first change."""

    def __init__(self, session_id: int, replica_id: int, uses_topic_ids: bool, now_ms: int) -> None:
        self.id = session_id
        self.replica_id = replica_id  # -1: a consumer
        self.uses_topic_ids = uses_topic_ids
        self.epoch = 1  # the epoch the next request must carry
        self.created_ms = now_ms
        self.last_used_ms = now_ms
        self.last_refresh_ms = now_ms  # followers: when the idle partitions' positions were last replayed
        self.partitions: dict[Key, CachedPartition] = {}
        self.topic_names: dict[bytes, str] = {}  # topic id -> name, for forgotten topics named by id
        self.topic_ids: dict[str, bytes] = {}  # and back, for answers naming topics by id
        self.dirty: set[Key] = set()
        self.wakeup: Callable[[], None] | None = None
        self.closed = False
        self._listed: set[Key] = set()  # the current round's request listed these, not read yet
        self._taken: set[Key] = set()  # listed and dirty keys this round has read (dirty again if it fails)
        self._news: set[Key] = set()  # keys with news so far this round: read again in the next pass

    @property
    def privileged(self) -> bool:
        return self.replica_id >= 0

    def __len__(self) -> int:
        return len(self.partitions)

    def add_topic(self, name: str, topic_id: bytes) -> None:
        if topic_id != bytes(16):
            self.topic_names[topic_id] = name
            self.topic_ids[name] = topic_id

    def changed(self, key: Key, wake_replica: bool = True) -> None:
        """``key`` may have news. ``wake_replica`` False (a new high watermark alone) marks it for a follower's
        next pass without waking the round: as in Kafka, a follower's fetch waits for bytes, and the high
        watermark rides along with the next data (or the round's max wait), so one append does not cost each
        follower an extra round."""
        if self.closed or key not in self.partitions:
            return
        self.dirty.add(key)
        if not wake_replica and self.replica_id >= 0:
            return
        wakeup, self.wakeup = self.wakeup, None
        if wakeup is not None:
            wakeup()

    # -- a round ----------------------------------------------------------------------------------------------------

    def update(
        self, listed: Iterable[tuple[str, bytes, PartitionRead]], forgotten: Iterable[Key], now_ms: int
    ) -> list[Key]:
        """Apply an incremental request: listed partitions are added or take their new position, forgotten ones
        leave. Returns the forgotten keys that were in the session (the shell stops watching them). What a previous
        round took without answering (a throttled or refused request never reads) is dirty again first."""
        self.abandon_round()
        removed = []
        for key in forgotten:
            if self.partitions.pop(key, None) is not None:
                removed.append(key)
                self.dirty.discard(key)
        for name, topic_id, read in listed:
            key = (name, read.partition)
            cached = self.partitions.get(key)
            if cached is None:
                self.partitions[key] = CachedPartition(read, topic_id)
            else:
                cached.read = read
            self.add_topic(name, topic_id)
            self._listed.add(key)
        self.epoch = next_epoch(self.epoch)
        self.last_used_ms = now_ms
        return removed

    def next_pass(self) -> list[tuple[str, list[PartitionRead]]]:
        """The partitions one pass of this round reads: the first pass the listed and dirty ones, later passes
        (after a wakeup) the newly dirty ones and those that already had news (read again for fresh values)."""
        keys = self._listed | self.dirty | self._news
        self._taken |= self._listed | self.dirty
        self._listed = set()
        self.dirty = set()
        by_topic: dict[str, list[PartitionRead]] = {}
        for key in keys:
            cached = self.partitions.get(key)
            if cached is not None:
                by_topic.setdefault(key[0], []).append(cached.read)
        return list(by_topic.items())

    def has_news(self, key: Key, seen: Seen) -> bool:
        """Whether ``seen`` is news for the fetcher (noted, so the next pass reads the partition again)."""
        cached = self.partitions.get(key)
        if cached is None or not cached.has_news(seen):
            return False
        self._news.add(key)
        return True

    def answered(self, seen: dict[Key, Seen]) -> None:
        """The round's answer carries ``seen``: remember what it told. A partition answered with records, an error
        or a divergence is read again next round (Kafka re-sends it until the fetcher moves on)."""
        for key, s in seen.items():
            cached = self.partitions.get(key)
            if cached is None:
                continue
            cached.remember(s)
            if s.has_records or s.error_code or s.diverging:
                self.dirty.add(key)
        self._taken = set()
        self._news = set()

    def abandon_round(self) -> None:
        """The round failed or was cancelled before answering: what it took stays to be read."""
        self.dirty |= {k for k in self._taken | self._news | self._listed if k in self.partitions}
        self._taken = set()
        self._news = set()
        self._listed = set()

    def refresh_due(self, now_ms: int, interval_ms: int) -> bool:
        """Whether a follower's idle partitions should have their positions replayed now (the leader's caught-up
        times; see FetchSessionShell). True at most once per ``interval_ms``."""
        if not self.privileged or now_ms - self.last_refresh_ms < interval_ms:
            return False
        self.last_refresh_ms = now_ms
        return True


class SessionError(NamedTuple):
    code: int


class FetchSessionCache:
    """The broker's sessions; at most ``max_slots``. ``ids`` draws new session ids (tests give a seeded one)."""

    def __init__(
        self, max_slots: int, eviction_ms: int = DEFAULT_EVICTION_MS, ids: random.Random | None = None
    ) -> None:
        self.max_slots = max_slots
        self.eviction_ms = eviction_ms
        self._ids = ids or random.Random()
        self.sessions: dict[int, FetchSession] = {}
        self.evictions = 0
        self.incremental_rounds = {"follower": 0, "consumer": 0}  # incremental requests served, by fetcher

    def partitions_cached(self) -> int:
        return sum(len(s) for s in self.sessions.values())

    def remove(self, session_id: int) -> FetchSession | None:
        session = self.sessions.pop(session_id, None)
        if session is not None:
            session.closed = True
            session.wakeup = None
        return session

    def create(
        self,
        replica_id: int,
        uses_topic_ids: bool,
        partitions: Iterable[tuple[str, bytes, PartitionRead, Seen]],
        now_ms: int,
    ) -> FetchSession | None:
        """A new session holding ``partitions`` as a full answer just told them; None when no slot is free (or
        none may be taken) or the answer is empty."""
        parts = list(partitions)
        if not parts or self.max_slots <= 0:
            return None
        if len(self.sessions) >= self.max_slots and not self._evict(replica_id >= 0, len(parts), now_ms):
            return None
        session_id = 0
        while session_id == INVALID_SESSION_ID or session_id in self.sessions:
            session_id = self._ids.randint(1, MAX_EPOCH)
        session = FetchSession(session_id, replica_id, uses_topic_ids, now_ms)
        for name, topic_id, read, seen in parts:
            cached = CachedPartition(read, topic_id)
            cached.remember(seen)
            session.partitions[(name, read.partition)] = cached
            session.add_topic(name, topic_id)
            if seen.has_records or seen.error_code or seen.diverging:
                session.dirty.add((name, read.partition))
        self.sessions[session_id] = session
        return session

    def continue_session(
        self, session_id: int, epoch: int, uses_topic_ids: bool, replica_id: int, now_ms: int
    ) -> FetchSession | SessionError:
        """The session an incremental request (``epoch`` > 0) continues, or the error to answer."""
        session = self.sessions.get(session_id)
        if session is None or session.replica_id != replica_id:
            return SessionError(FETCH_SESSION_ID_NOT_FOUND)
        if session.epoch != epoch:
            return SessionError(INVALID_FETCH_SESSION_EPOCH)
        if session.uses_topic_ids != uses_topic_ids:
            return SessionError(FETCH_SESSION_TOPIC_ID_ERROR)
        session.last_used_ms = now_ms
        self.incremental_rounds["follower" if replica_id >= 0 else "consumer"] += 1
        return session

    def _evict(self, privileged: bool, size: int, now_ms: int) -> bool:
        sessions = list(self.sessions.values())
        stale = [s for s in sessions if now_ms - s.last_used_ms > self.eviction_ms]
        victim: FetchSession | None = None
        if stale:
            victim = min(stale, key=lambda s: s.last_used_ms)
        else:
            old = [s for s in sessions if now_ms - s.created_ms > self.eviction_ms]
            if privileged:
                candidates = [s for s in sessions if not s.privileged] or old
            else:
                candidates = [s for s in old if not s.privileged and len(s) < size]
            if candidates:
                victim = min(candidates, key=lambda s: (s.privileged, len(s), s.last_used_ms))
        if victim is None:
            return False
        self.remove(victim.id)
        self.evictions += 1
        return True

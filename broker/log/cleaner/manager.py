"""The cleaner's bookkeeping across logs and passes (Kafka's LogCleanerManager), sans-I/O.

It holds each log's first dirty offset (the caller loads and saves them with ``read_checkpoint`` /
``write_checkpoint`` in each log dir's ``cleaner-offset-checkpoint``), which logs a thread is cleaning, which are
uncleanable, and the figures the broker exports as metrics. Thread-safe: several cleaner threads share one.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field, replace

from odradek.broker.log.cleaner.policy import NEVER, Cleanable, LogSnapshot, choose
from odradek.broker.log.cleaner.stats import PassStats


@dataclass
class LogCleanerState:
    first_dirty: int = 0
    tombstone_due_ms: int = NEVER
    tombstone_blocked_offset: int = NEVER
    last_clean_ms: int = -1
    last_pass: PassStats | None = None


@dataclass
class CleanerMetrics:
    """What the broker exports (Kafka's kafka.log:type=LogCleaner* metrics)."""

    max_dirty_ratio: float = 0.0
    time_since_last_run_ms: int = -1
    last_pass: PassStats | None = None
    uncleanable: list[Hashable] = field(default_factory=list)
    passes: int = 0
    aborted_passes: int = 0
    bytes_read: int = 0  # over every pass since the start
    bytes_written: int = 0


class CleanerManager:
    def __init__(self, now_ms: int, first_dirty: Mapping[Hashable, int] | None = None) -> None:
        """``first_dirty``: the checkpointed offsets. Tombstones written before a restart were stamped with a
        horizon at most ``delete.retention.ms`` after ``now_ms``: each log is due again by then (``snapshot``)."""
        self._lock = threading.Lock()
        self._states: dict[Hashable, LogCleanerState] = {}
        self._started_ms = now_ms
        self._in_progress: set[Hashable] = set()
        self._uncleanable: dict[Hashable, str] = {}
        self._max_ratio = 0.0
        self._last_run_ms = -1
        self._last_pass: PassStats | None = None
        self._passes = self._aborted = 0
        self._bytes_read = self._bytes_written = 0
        for key, offset in (first_dirty or {}).items():
            self._states[key] = LogCleanerState(first_dirty=offset)

    def _state(self, key: Hashable) -> LogCleanerState:
        state = self._states.get(key)
        if state is None:
            state = self._states[key] = LogCleanerState()
        return state

    def snapshot(self, snapshot: LogSnapshot, tombstone_horizon_offset: int) -> LogSnapshot:
        """``snapshot`` with this manager's first dirty offset and tombstone deadlines filled in."""
        with self._lock:
            state = self._state(snapshot.key)
            due = state.tombstone_due_ms
            if state.last_pass is None and state.first_dirty > 0:  # cleaned before a restart
                due = min(due, self._started_ms + snapshot.config.delete_retention_ms)
            if tombstone_horizon_offset > state.tombstone_blocked_offset:
                due = 0
            return replace(snapshot, first_dirty_offset=state.first_dirty, tombstone_due_ms=due)

    def grab(self, snapshots: Iterable[LogSnapshot], now_ms: int) -> Cleanable | None:
        """Pick the log to clean (snapshots made with ``snapshot``) and mark it in progress; None if none is due."""
        with self._lock:
            self._last_run_ms = now_ms
            chosen, self._max_ratio = choose(snapshots, now_ms, self._in_progress | self._uncleanable.keys())
            if chosen is not None:
                self._in_progress.add(chosen.key)
            return chosen

    def done(self, key: Hashable, stats: PassStats, now_ms: int) -> None:
        """A pass finished (or was aborted because the log changed under it)."""
        with self._lock:
            self._in_progress.discard(key)
            self._passes += 1
            self._bytes_read += stats.bytes_read
            self._bytes_written += stats.bytes_written
            self._last_pass = stats
            state = self._state(key)
            state.last_pass = stats
            if stats.aborted:
                self._aborted += 1
                return
            state.first_dirty = max(state.first_dirty, stats.end)
            state.tombstone_due_ms = stats.tombstone_due_ms
            state.tombstone_blocked_offset = stats.tombstone_blocked_offset
            state.last_clean_ms = now_ms

    def failed(self, key: Hashable, error: BaseException) -> bool:
        """A pass raised: the log is uncleanable until ``reset``. True the first time (the caller logs it once)."""
        with self._lock:
            self._in_progress.discard(key)
            first = key not in self._uncleanable
            self._uncleanable[key] = f"{type(error).__name__}: {error}"
            return first

    def released(self, key: Hashable) -> None:
        """The grabbed log was not cleaned after all (closed, deleted, the cleaner stopping)."""
        with self._lock:
            self._in_progress.discard(key)

    def truncated(self, key: Hashable, offset: int) -> None:
        """The log was truncated to ``offset`` (a follower diverged): what is appended from there on is dirty."""
        with self._lock:
            state = self._states.get(key)
            if state is not None and state.first_dirty > offset:
                state.first_dirty = offset

    def forget(self, key: Hashable) -> None:
        """The log was deleted (or moved away from this broker)."""
        with self._lock:
            self._states.pop(key, None)
            self._uncleanable.pop(key, None)

    def reset(self, key: Hashable) -> None:
        """Make an uncleanable log cleanable again (its replica was rebuilt)."""
        with self._lock:
            self._uncleanable.pop(key, None)

    def uncleanable(self) -> dict[Hashable, str]:
        with self._lock:
            return dict(self._uncleanable)

    def first_dirty_offsets(self) -> dict[Hashable, int]:
        """For the checkpoint file (group them by log dir)."""
        with self._lock:
            return {key: s.first_dirty for key, s in self._states.items()}

    def log_state(self, key: Hashable) -> LogCleanerState | None:
        with self._lock:
            state = self._states.get(key)
            return None if state is None else replace(state)

    def metrics(self, now_ms: int) -> CleanerMetrics:
        with self._lock:
            return CleanerMetrics(
                max_dirty_ratio=self._max_ratio,
                time_since_last_run_ms=-1 if self._last_run_ms < 0 else now_ms - self._last_run_ms,
                last_pass=self._last_pass,
                uncleanable=list(self._uncleanable),
                passes=self._passes,
                aborted_passes=self._aborted,
                bytes_read=self._bytes_read,
                bytes_written=self._bytes_written,
            )

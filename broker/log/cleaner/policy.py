"""Which log to clean next and how far: pure functions over a snapshot of each log, with the clock passed in.

A compacted log has a *clean* section (cleaned before, below the first dirty offset kept in the cleaner's
checkpoint) and a *dirty* one after it. A log is eligible when its cleanable dirty bytes make up at least
``min.cleanable.dirty.ratio`` of its clean plus cleanable dirty bytes, or when its oldest dirty record is older
than ``max.compaction.lag.ms`` (then regardless of the ratio). Among eligible logs the one due by the max lag goes
first, then the dirtiest. A log whose retained tombstones may now be removed (their delete horizon passed, or the
replicas reached them) is eligible too, even with nothing dirty: its pass recopies the clean section.

The cleanable section ends, as Kafka's does, at a segment boundary: the base offset of the first segment that is
the active one, or holds offsets at or above the high watermark (those may still be truncated away: a record that
will not survive must not supersede one that will), or holds the first unstable offset (an open transaction, or one
whose marker is not replicated yet: whether its records stay is not decided), or holds a record younger than
``min.compaction.lag.ms`` (judged by the segment's largest timestamp).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass

NEVER = 2**63 - 1


@dataclass(frozen=True, slots=True)
class CompactionConfig:
    """A compacted log's topic settings, named as Kafka's."""

    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = NEVER
    delete_retention_ms: int = 86_400_000

    def __post_init__(self) -> None:
        if not 0 <= self.min_cleanable_dirty_ratio <= 1:
            raise ValueError(f"min.cleanable.dirty.ratio must be in [0, 1], got {self.min_cleanable_dirty_ratio}")
        if self.min_compaction_lag_ms < 0 or self.delete_retention_ms < 0:
            raise ValueError("min.compaction.lag.ms and delete.retention.ms must be >= 0")
        if self.max_compaction_lag_ms < 1:
            raise ValueError(f"max.compaction.lag.ms must be >= 1, got {self.max_compaction_lag_ms}")


@dataclass(frozen=True, slots=True)
class SegmentInfo:
    """One segment as the policy sees it. ``first_timestamp`` is the max timestamp of its first batch (-1 if
    unknown); ``max_timestamp`` the largest of the segment (its file's mtime when no record has one)."""

    base_offset: int
    end_offset: int
    size: int
    max_timestamp: int
    first_timestamp: int = -1


@dataclass(frozen=True, slots=True)
class LogSnapshot:
    """What the policy needs of one compacted log; ``segments`` in offset order, the last one active."""

    key: Hashable
    segments: Sequence[SegmentInfo]
    log_start_offset: int
    high_watermark: int
    first_dirty_offset: int  # from the cleaner checkpoint (0 when never cleaned)
    config: CompactionConfig
    # When retained tombstones may go (CleanerManager.snapshot): a log with no new dirty record is cleaned then.
    tombstone_due_ms: int = NEVER
    first_unstable_offset: int | None = None  # the log's (None: no transaction holds it back)


@dataclass(frozen=True, slots=True)
class Cleanable:
    """A log's cleanable section [first_dirty, end) and the figures that rank it."""

    key: Hashable
    first_dirty: int
    end: int
    clean_bytes: int
    dirty_bytes: int
    oldest_dirty_timestamp: int  # -1 when there is no cleanable dirty record
    due_by_max_lag: bool
    due_by_tombstones: bool = False

    @property
    def dirty_ratio(self) -> float:
        total = self.clean_bytes + self.dirty_bytes
        return self.dirty_bytes / total if total else 0.0

    def eligible(self, min_ratio: float) -> bool:
        if self.due_by_tombstones:
            return True
        return self.end > self.first_dirty and (self.due_by_max_lag or self.dirty_ratio >= min_ratio)


def first_uncleanable_offset(snapshot: LogSnapshot, now_ms: int) -> int:
    """The base offset of the first segment that must not be cleaned (see the module docstring)."""
    segments = snapshot.segments
    lag = snapshot.config.min_compaction_lag_ms
    stable = snapshot.high_watermark
    if snapshot.first_unstable_offset is not None:
        stable = min(stable, snapshot.first_unstable_offset)
    for seg in segments[:-1]:
        if seg.end_offset > stable or (lag > 0 and seg.max_timestamp > now_ms - lag):
            return seg.base_offset
    return segments[-1].base_offset if segments else snapshot.log_start_offset


def cleanable(snapshot: LogSnapshot, now_ms: int) -> Cleanable:
    """The log's cleanable section and its ranking figures."""
    first_dirty = max(snapshot.first_dirty_offset, snapshot.log_start_offset)
    end = max(first_dirty, first_uncleanable_offset(snapshot, now_ms))
    clean_bytes = dirty_bytes = 0
    oldest = -1
    for seg in snapshot.segments:
        if seg.base_offset >= end:
            break
        if seg.end_offset <= first_dirty:
            clean_bytes += seg.size
            continue
        dirty_bytes += seg.size
        ts = seg.first_timestamp if seg.first_timestamp >= 0 else seg.max_timestamp
        if ts >= 0 and (oldest < 0 or ts < oldest):
            oldest = ts
    max_lag = snapshot.config.max_compaction_lag_ms
    due = dirty_bytes > 0 and oldest >= 0 and max_lag != NEVER and now_ms - oldest > max_lag
    tombstones = clean_bytes + dirty_bytes > 0 and now_ms >= snapshot.tombstone_due_ms
    return Cleanable(snapshot.key, first_dirty, end, clean_bytes, dirty_bytes, oldest, due, tombstones)


def choose(
    snapshots: Iterable[LogSnapshot], now_ms: int, skip: frozenset[Hashable] | set[Hashable] = frozenset()
) -> tuple[Cleanable | None, float]:
    """The log to clean now (None if none is eligible) and the largest dirty ratio seen (a metric).

    ``skip`` holds logs not to pick: uncleanable ones and those another cleaner thread is working on."""
    best: Cleanable | None = None
    max_ratio = 0.0
    for snapshot in snapshots:
        if snapshot.key in skip:
            continue
        c = cleanable(snapshot, now_ms)
        max_ratio = max(max_ratio, c.dirty_ratio)
        if not c.eligible(snapshot.config.min_cleanable_dirty_ratio):
            continue
        if best is None or _rank(c) > _rank(best):
            best = c
    return best, max_ratio


def _rank(c: Cleanable) -> tuple[bool, float, bool]:
    return c.due_by_max_lag, c.dirty_ratio, c.due_by_tombstones

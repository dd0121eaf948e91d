"""The I/O shell around the cleaner: snapshots of live logs for the policy, the per-log-dir
``cleaner-offset-checkpoint`` file, and ``CleanerThread``, one of the ``log.cleaner.threads`` threads.

The broker gives the thread a ``source`` callable returning the compacted logs it hosts now, each as a
``CompactedLog`` (the log, its compaction settings and its tombstone horizon offset). The thread never touches the
event loop: everything it calls on a ``Log`` takes the log's own lock briefly.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from pathlib import Path

from odradek.broker.log.checkpoint import OffsetCheckpoint
from odradek.broker.log.cleaner.cleaner import Cleaner
from odradek.broker.log.cleaner.manager import CleanerManager
from odradek.broker.log.cleaner.policy import CompactionConfig, LogSnapshot, SegmentInfo
from odradek.broker.log.log import Log, wall_clock_ms
from odradek.client.errors import OdradekError

logger = logging.getLogger(__name__)

CHECKPOINT_FILE = "cleaner-offset-checkpoint"


@dataclass(frozen=True)
class CompactedLog:
    """A log the cleaner should compact. ``tombstone_horizon_offset``: the offset every replica of the partition
    holds durably (the leader: the minimum of its high watermark, its own recovery point and its followers' as they
    reported them; a follower: the one its leader last told, capped by its high watermark). ``tombstone_horizon``:
    that offset as of now, read again before each swap, since a replica added during a pass lowers it (None: the
    offset cannot change). ``paused``: whether the log's cleaning is paused now (its replica moving to another log
    dir): a paused log is not picked, and a pass under way stops before its next swap (None: never paused)."""

    log: Log
    config: CompactionConfig
    tombstone_horizon_offset: int
    tombstone_horizon: Callable[[], int] | None = None
    paused: Callable[[], bool] | None = None


def log_snapshot(key: Hashable, log: Log, config: CompactionConfig) -> LogSnapshot:
    """The policy's view of ``log`` (first dirty offset 0: CleanerManager.snapshot fills it in)."""
    view = log.compaction_view()
    segments = [
        SegmentInfo(s.base_offset, s.end_offset, s.size, s.max_timestamp, s.first_timestamp) for s in view.sealed
    ]
    segments.append(SegmentInfo(view.active_base_offset, view.active_end_offset, view.active_size, -1))
    return LogSnapshot(
        key,
        segments,
        view.log_start_offset,
        view.high_watermark,
        0,
        config,
        first_unstable_offset=view.first_unstable_offset,
    )


def read_checkpoint(log_dir: Path) -> dict[tuple[str, int], int]:
    return OffsetCheckpoint(log_dir / CHECKPOINT_FILE).read()


def write_checkpoint(log_dir: Path, offsets: Mapping[tuple[str, int], int]) -> None:
    OffsetCheckpoint(log_dir / CHECKPOINT_FILE).write(dict(offsets))


class CleanerThread:
    """Loops: snapshot the compacted logs, grab the filthiest, clean it, report; waits ``backoff_ms``
    (``log.cleaner.backoff.ms``) when nothing is due. ``on_pass`` is called after each pass with the log's key
    (the broker writes that log dir's checkpoint and updates metrics there)."""

    def __init__(
        self,
        name: str,
        manager: CleanerManager,
        cleaner: Cleaner,
        source: Callable[[], Mapping[Hashable, CompactedLog]],
        *,
        backoff_ms: int = 15_000,
        on_pass: Callable[[Hashable], None] | None = None,
        clock: Callable[[], int] = wall_clock_ms,
    ) -> None:
        self.manager = manager
        self.cleaner = cleaner
        self._source = source
        self._backoff = backoff_ms / 1000
        self._on_pass = on_pass
        self._clock = clock
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float | None = None) -> None:
        """Stop after the current pass (a pass is not interrupted: its swaps are crash-safe anyway)."""
        self._stop.set()
        self._thread.join(timeout)

    def run_once(self) -> bool:
        """One round; True if a log was cleaned (or failed)."""
        logs = self._source()
        snapshots = []
        for key, entry in logs.items():
            if entry.paused is not None and entry.paused():
                continue  # kept by the manager (its first dirty offset), but not picked
            try:
                snapshot = log_snapshot(key, entry.log, entry.config)
            except OdradekError:
                continue  # offline or closed: the log manager reports it
            snapshots.append(self.manager.snapshot(snapshot, entry.tombstone_horizon_offset))
        chosen = self.manager.grab(snapshots, self._clock())
        if chosen is None:
            return False
        entry = logs[chosen.key]
        try:
            stats = self.cleaner.clean(
                entry.log,
                entry.config,
                chosen.first_dirty,
                chosen.end,
                entry.tombstone_horizon_offset,
                entry.tombstone_horizon,
                entry.paused,
            )
        except Exception as e:  # whatever failed, the log must leave "in progress", or no thread cleans it again
            if entry.log.offline or entry.log.closed:
                # The disk failed, or the log was deleted or replaced (a move to another log dir), not the cleaning.
                self.manager.released(chosen.key)
            elif self.manager.failed(chosen.key, e):
                unexpected = not isinstance(e, (OdradekError, OSError))
                logger.error("log %s is uncleanable: %s", chosen.key, e, exc_info=e if unexpected else None)
            return True
        except BaseException:
            self.manager.released(chosen.key)
            raise
        self.manager.done(chosen.key, stats, self._clock())
        logger.info(
            "cleaned %s up to offset %d%s: %d of %d records removed (%d tombstones), %.1f MB read, %.1f MB "
            "written, %d segments into %d, in %d ms",
            chosen.key,
            stats.end,
            " (aborted: the log or its replicas changed, redone later)" if stats.aborted else "",
            stats.records_removed,
            stats.records_read,
            stats.tombstones_removed,
            stats.bytes_read / 1e6,
            stats.bytes_written / 1e6,
            stats.segments_in,
            stats.segments_out,
            stats.duration_ms,
        )
        if self._on_pass is not None:
            self._on_pass(chosen.key)
        return True

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                cleaned = self.run_once()
            except Exception:
                logger.exception("log cleaner round failed")
                cleaned = False
            if not cleaned:
                self._stop.wait(self._backoff)

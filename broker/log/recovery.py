"""Opening a partition log's directory: its segments loaded or recovered, torn tails truncated, corruption refused.

This module owns everything ``Log.open`` does before the log serves: removing leftovers of interrupted writes and
deletions, finishing or undoing an interrupted log-cleaner swap (swap.py), loading the segments that were fsynced
(with a cheap index check), scanning and re-indexing the others, judging an invalid batch as a torn tail or
corruption, and bounding the offsets and the leader epoch cache by what the log holds. ``Log`` installs the result
and then replays its producer state (shared with truncation).

Deciding between a torn tail and corruption:

* Segments whose offsets lie below the recovery point were fsynced; they are loaded with a cheap consistency
  check of their indexes (the last index entry must point at a batch with that base offset), and rebuilt only if
  that fails. After an unclean shutdown every segment from the one holding the recovery point on is scanned:
  each batch's header, CRC and offsets are validated and both indexes are rebuilt.
* A bad batch in any segment but the last is corruption: a roll fsyncs the old segment before the first write to
  the new one, so a sealed segment cannot have a torn tail.
* A bad batch in the last segment is a torn tail, and the segment is truncated before it, only if it starts at or
  above the recovery point (nothing fsynced is damaged) and no valid batch follows it anywhere in the file (a
  torn write leaves a partial batch, zeros or garbage at the end, never an intact batch after the damage).
  Otherwise it is corruption.
* Corruption raises CorruptRecordError (CORRUPT_MESSAGE); ``Log.open`` then returns the log failed: every operation
  raises it until an operator intervenes (or replication rebuilds the replica); data is never silently skipped.
"""

from __future__ import annotations

import bisect
import contextlib
import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from odradek.broker.log.checkpoint import fsync_dir, remove_stale_tmp
from odradek.broker.log.config import LogConfig
from odradek.broker.log.epoch_cache import FILE_NAME as EPOCH_FILE
from odradek.broker.log.epoch_cache import LeaderEpochCache
from odradek.broker.log.handles import SegmentHandles
from odradek.broker.log.segment import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, Invalid, LogSegment
from odradek.broker.log.swap import complete_swaps
from odradek.broker.log.txn_index import TXN_INDEX_SUFFIX
from odradek.client.errors import CorruptRecordError

logger = logging.getLogger(__name__)


class Recovered(NamedTuple):
    """A log directory ready to serve: its segments (by base offset, the last one active) and framing offsets."""

    segments: list[LogSegment]
    epochs: LeaderEpochCache
    log_start_offset: int
    high_watermark: int
    recovery_point: int
    # The base offset of the first segment scanned again (its aborted-transaction index emptied, to be rebuilt by
    # the producer-state replay, which must start at or below it); None if every segment was loaded as it was.
    rescanned_from: int | None = None


def recover(
    directory: Path,
    config: LogConfig,
    handles: SegmentHandles,
    lock: threading.RLock,
    clock: Callable[[], int],
    *,
    recovery_point: int,
    log_start_offset: int,
    high_watermark: int,
    clean: bool,
    sync: bool = True,
) -> Recovered:
    """Open (creating if needed) the log in ``directory``, recovering it unless ``clean``; the offsets come from
    the log dir's checkpoints. Without ``sync``, a new log's first segment is created without syncing its
    directory (the caller does). Raises CorruptRecordError or OSError, having released the segments' handles.
    Call with ``lock`` (the log's) held."""
    directory.mkdir(parents=True, exist_ok=True)
    remove_stale_tmp(directory)
    complete_swaps(directory)
    remove_leftovers(directory)
    epochs = LeaderEpochCache(directory / EPOCH_FILE)
    bases = sorted(int(p.name[: -len(LOG_SUFFIX)]) for p in directory.glob("*" + LOG_SUFFIX))
    now = clock()
    segments = [LogSegment(directory, b, config, handles, lock, now) for b in bases]
    rescanned_from = None
    try:
        if segments:
            rescanned_from = recover_segments(segments, epochs, recovery_point, clean)
        else:
            segments.append(_new_segment(directory, log_start_offset, config, handles, lock, clock, sync))
        leo = segments[-1].end_offset()
        log_start = max(log_start_offset, segments[0].base_offset)
        if log_start > leo:  # the tail holding the log start was torn off: nothing below it may come back
            for seg in reversed(segments):
                seg.delete()
            segments.clear()
            segments.append(_new_segment(directory, log_start, config, handles, lock, clock))
            epochs.clear()
            leo = log_start
    except BaseException:
        for seg in segments:
            with contextlib.suppress(OSError):
                seg.close()
        raise
    epochs.truncate_from_end(leo)
    epochs.truncate_from_start(log_start)
    return Recovered(
        segments,
        epochs,
        log_start,
        high_watermark=min(max(high_watermark, log_start), leo),
        recovery_point=leo if clean else min(recovery_point, leo),
        rescanned_from=rescanned_from,
    )


def _new_segment(
    directory: Path,
    base_offset: int,
    config: LogConfig,
    handles: SegmentHandles,
    lock: threading.RLock,
    clock: Callable[[], int],
    sync: bool = True,
) -> LogSegment:
    seg = LogSegment(directory, base_offset, config, handles, lock, clock())
    seg.create()
    if sync:
        fsync_dir(directory)
    return seg


def recover_segments(
    segments: list[LogSegment], epochs: LeaderEpochCache, recovery_point: int, clean: bool
) -> int | None:
    """Load trusted segments, recover the others (all from the one holding the recovery point if unclean); return
    the base offset of the first segment recovered (None if none was)."""
    bases = [seg.base_offset for seg in segments]
    first_recovered = len(bases) if clean else max(0, bisect.bisect_right(bases, recovery_point) - 1)
    rescanned_from = None
    for i, seg in enumerate(segments):
        last = i == len(segments) - 1
        if i < first_recovered and seg.load():
            if last:
                seg.activate()
            continue
        if rescanned_from is None:
            rescanned_from = seg.base_offset
        invalid = seg.recover(seg.base_offset, epochs)
        if invalid is not None:
            judge(seg, invalid, last, recovery_point)
        if not last:
            if seg.end_offset() > bases[i + 1]:
                raise CorruptRecordError(f"{seg.log_path}: batches run past the next segment's base offset")
            seg.seal()
    return rescanned_from


def judge(seg: LogSegment, invalid: Invalid, last: bool, recovery_point: int) -> None:
    """Truncate a torn tail, or raise CorruptRecordError (see the module docstring)."""
    where = f"{seg.log_path}: invalid batch at byte {invalid.position} ({invalid.reason})"
    if not last:
        raise CorruptRecordError(f"{where} in a sealed segment")
    if invalid.expected_offset < recovery_point:
        raise CorruptRecordError(f"{where} below the recovery point {recovery_point}")
    following = seg.find_valid_batch(invalid.position, invalid.expected_offset)
    if following is not None:
        raise CorruptRecordError(f"{where}, followed by a valid batch at byte {following}")
    logger.warning("%s: torn tail, truncating %s to %d bytes", where, seg.log_path.name, invalid.position)
    seg.truncate_bytes(invalid.position)


def remove_leftovers(directory: Path) -> None:
    """Indexes whose log a crash deleted first (segments are deleted log file first)."""
    logs = {p.name[: -len(LOG_SUFFIX)] for p in directory.glob("*" + LOG_SUFFIX)}
    for path in directory.iterdir():
        name = path.name
        suffixes = (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)
        if any(name.endswith(s) and name[: -len(s)] not in logs for s in suffixes):
            path.unlink(missing_ok=True)

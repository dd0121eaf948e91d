"""The log manager: every partition log of a broker across its ``log.dirs``, and their periodic work.

Each log dir holds partition directories ``<topic>-<partition>`` and, as in Kafka, three checkpoint files
(checkpoint.py layout) plus a clean-shutdown marker:

    recovery-point-offset-checkpoint   offset below which each log was fsynced: recovery scans from there
    log-start-offset-checkpoint        each log's start offset (retention, DeleteRecords)
    replication-offset-checkpoint      each log's high watermark
    .odradek_cleanshutdown             written last by a clean close (the broker epoch), removed at the next open

Without the marker every log of the dir is recovered (log.py). A dir holding a failed log gets no marker at
close, so the corruption is found again at the next start rather than trusted.

Moving a replica to another log dir (AlterReplicaLogDirs): a *future* log in the destination dir (future_dirs.py
names it) is filled by the broker's mover (broker/log_dir_moves.py) and swapped in by
``replace_current_with_future``; future logs are checkpointed, flushed, failed and closed with their dir like the
others, but serve nothing until the swap. At start, what a crash left of a move is settled first (future_dirs.py
says the rule). A partition not hosted here may be given a preferred dir, where its log is created if it comes.
While a partition has a future log its cleaning is paused (``cleaning_paused``, which the log cleaner asks), as
Kafka's LogManager aborts and pauses it for a move and resumes it after the swap.

Log dir failure (as Kafka's): an I/O error (StorageError) in any log of a dir, or in the dir's own files, takes
the whole dir offline, since the disk under it can no longer be trusted: every log in it fails (reads and writes
answer KAFKA_STORAGE_ERROR), no new log is placed there, nothing more is written there (checkpoints, marker), and
the ``on_dir_offline`` listeners are told so the broker can stop serving those replicas and report them. A corrupt
batch (CorruptRecordError) fails only its own log. The other dirs carry on. ``tick(now_ms)`` does the
periodic work (flush.ms, retention, checkpoints) and is meant to be called from the broker's asyncio shell,
e.g. once a second via ``asyncio.to_thread`` since it may fsync.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import re
import shutil
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from operator import attrgetter
from pathlib import Path

from odradek.broker.log import durability
from odradek.broker.log.checkpoint import OffsetCheckpoint, fsync_dir, remove_stale_tmp, write_atomic
from odradek.broker.log.config import LogConfig, LogManagerConfig
from odradek.broker.log.dir_counts import DirOf
from odradek.broker.log.epoch_cache import FILE_NAME as EPOCH_FILE
from odradek.broker.log.future_dirs import (
    DELETE_SUFFIX,
    SWAP_MARKER,
    FutureFound,
    Settle,
    delete_dir_name,
    future_dir_name,
    parse_future_dir,
    settle,
)
from odradek.broker.log.handles import SegmentHandles
from odradek.broker.log.log import Log, wall_clock_ms
from odradek.broker.log.producer_state import snapshot_name
from odradek.client.errors import InvalidRequestError, OdradekError, StorageError

logger = logging.getLogger(__name__)

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
HIGH_WATERMARK_CHECKPOINT = "replication-offset-checkpoint"
CLEAN_SHUTDOWN_FILE = ".odradek_cleanshutdown"
UNCLEAN_SHUTDOWN = -1


def _marker_epoch(marker: Path) -> int:
    try:
        return int(marker.read_text().strip() or UNCLEAN_SHUTDOWN)
    except ValueError:
        return UNCLEAN_SHUTDOWN


TopicPartition = tuple[str, int]
# New logs' directories synced side by side when one metadata change creates at least this many, on this many
# threads: concurrent fsyncs share the file system's journal commits.
PARALLEL_SYNC_MIN = 16
PARALLEL_SYNC_THREADS = 8
_LEGAL_TOPIC = re.compile(r"[A-Za-z0-9._-]{1,249}")  # Kafka's rule


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def parse_partition_dir(name: str) -> TopicPartition | None:
    topic, sep, partition = name.rpartition("-")
    if not sep or not topic or not partition.isdigit():
        return None
    return topic, int(partition)


class LogManager:
    def __init__(
        self,
        log_dirs: Sequence[str | Path],
        config: LogConfig | None = None,
        manager_config: LogManagerConfig | None = None,
        *,
        topic_config: Callable[[str], LogConfig] | None = None,
        clock: Callable[[], int] = wall_clock_ms,
    ) -> None:
        """Open every partition log found in ``log_dirs`` (recovering those of dirs shut down uncleanly).

        ``topic_config`` gives a topic's config (metadata overrides); by default every log uses ``config``.
        """
        if not log_dirs:
            raise ValueError("at least one log dir is required")
        self.log_dirs = [Path(d).resolve() for d in log_dirs]
        if len(set(self.log_dirs)) != len(self.log_dirs):
            raise ValueError("duplicate log dir")
        self.default_config = config or LogConfig()
        self.manager_config = manager_config or LogManagerConfig()
        self._topic_config = topic_config or (lambda _topic: self.default_config)
        self._clock = clock
        self.handles = SegmentHandles(self.manager_config.max_open_fds)
        self._lock = threading.Lock()
        self._logs: dict[TopicPartition, Log] = {}
        self._dir_of = DirOf()
        self._futures: dict[TopicPartition, Log] = {}  # the future logs of replicas moving between dirs
        self._future_dir_of: dict[TopicPartition, Path] = {}
        self._preferred: dict[TopicPartition, Path] = {}  # where a replica not hosted yet is to be created
        self._unsynced: set[Path] = set()  # log dirs holding new logs not synced yet (``sync_new_logs``)
        self._unsynced_logs: list[tuple[Path, Path]] = []  # (log dir, log directory) of those new logs
        self._written: dict[tuple[Path, str], dict[TopicPartition, int]] = {}  # each checkpoint file's last write
        self._offline_dirs: dict[Path, str] = {}  # dir -> why it went offline
        self._dir_listeners: list[Callable[[Path], None]] = []
        self._closed = False
        now = clock()
        self._last_retention = self._last_recovery_checkpoint = now
        self._last_start_checkpoint = self._last_hw_checkpoint = now
        self._checkpointed_starts: dict[TopicPartition, int] = {}  # the log starts the last checkpoint wrote
        # Log starts are also written outside ``tick`` (DeleteRecords, followers taking the leader's): one writer
        # at a time, as the checkpoint's temporary file has a fixed name.
        self._start_checkpoint_lock = threading.Lock()
        shutdown_epochs = set()
        self._settle_moves()
        for log_dir in self.log_dirs:
            try:
                shutdown_epochs.add(self._load_dir(log_dir))
            except OSError as e:
                shutdown_epochs.add(UNCLEAN_SHUTDOWN)
                self.fail_dir(log_dir, e)
            failed = next((log.failure for log in self._logs_in(log_dir) if _is_io_failure(log.failure)), None)
            if failed is not None:
                self.fail_dir(log_dir, failed)
        for tp in [tp for tp in self._futures if tp not in self._logs]:  # its current log's dir failed to load
            self.delete_future_log(*tp)
        # The broker epoch every dir recorded at the last clean close, else -1 (a crash, lost unflushed writes, a
        # new or replaced dir): the broker reports it when it registers, and the controller removes an unclean
        # broker from every ISR and ELR before it may lead.
        self.clean_shutdown_epoch = shutdown_epochs.pop() if len(shutdown_epochs) == 1 else UNCLEAN_SHUTDOWN

    def _load_dir(self, log_dir: Path) -> int:
        """Open the logs of one dir; return the broker epoch its clean-shutdown marker holds (-1: none)."""
        log_dir.mkdir(parents=True, exist_ok=True)
        remove_stale_tmp(log_dir)
        marker = log_dir / CLEAN_SHUTDOWN_FILE
        clean = marker.exists()
        epoch = _marker_epoch(marker) if clean else UNCLEAN_SHUTDOWN
        recovery_points = OffsetCheckpoint(log_dir / RECOVERY_POINT_CHECKPOINT).read()
        log_starts = OffsetCheckpoint(log_dir / LOG_START_OFFSET_CHECKPOINT).read()
        high_watermarks = OffsetCheckpoint(log_dir / HIGH_WATERMARK_CHECKPOINT).read()
        for child in sorted(log_dir.iterdir()):
            if not child.is_dir():
                continue
            if child.name.endswith(DELETE_SUFFIX):  # deletion interrupted by a crash
                shutil.rmtree(child, ignore_errors=True)
                continue
            future = parse_future_dir(child.name)
            tp = parse_partition_dir(child.name) if future is None else future
            if tp is None:
                continue
            logs, dirs = (self._logs, self._dir_of) if future is None else (self._futures, self._future_dir_of)
            if tp in logs:
                raise StorageError(f"partition {tp} found in both {dirs[tp]} and {log_dir}")
            log = Log.open(
                child,
                self._topic_config(tp[0]),
                recovery_point=recovery_points.get(tp, 0),
                log_start_offset=log_starts.get(tp, 0),
                high_watermark=high_watermarks.get(tp, 0),
                clean_shutdown=clean,
                handles=self.handles,
                clock=self._clock,
            )
            if log.offline:
                logger.error("%s is offline: %s", child, log.failure)
            log.failure_listener = self._log_failed
            logs[tp] = log
            dirs[tp] = log_dir
        if clean:
            marker.unlink()
            fsync_dir(log_dir)
        return epoch

    def _settle_moves(self) -> None:
        """Finish or undo the moves a crash interrupted, before any log opens (future_dirs.py's rule). A dir that
        cannot be listed is skipped here; loading it fails it."""
        currents: dict[TopicPartition, list[Path]] = {}
        futures: dict[TopicPartition, list[Path]] = {}
        for log_dir in self.log_dirs:
            try:
                children = [c for c in log_dir.iterdir() if c.is_dir()] if log_dir.is_dir() else []
            except OSError:
                continue
            for child in children:
                future = parse_future_dir(child.name)
                if future is not None:
                    futures.setdefault(future, []).append(child)
                elif (tp := parse_partition_dir(child.name)) is not None:
                    currents.setdefault(tp, []).append(child)
                    if (child / SWAP_MARKER).exists():  # the swap finished but for removing its marker
                        (child / SWAP_MARKER).unlink()
                        fsync_dir(child)
        for tp, found in futures.items():
            by_name = {f.name: f for f in found}
            outcome = settle(tp in currents, [FutureFound(f.name, (f / SWAP_MARKER).exists()) for f in found])
            for name, what in outcome.items():
                try:
                    self._settle(tp, by_name[name], what, currents.pop(tp, []) if what is Settle.PROMOTE else [])
                except OSError as e:  # the dir's failure shows when it loads; the move is settled at a later start
                    logger.error("cannot settle the replica move of %s-%d in %s: %s", *tp, by_name[name], e)

    @staticmethod
    def _settle(tp: TopicPartition, future: Path, what: Settle, currents: list[Path]) -> None:
        if what is Settle.DROP:
            logger.info("dropping %s: an interrupted copy of a replica move", future)
            _rename_away(future)
        elif what is Settle.PROMOTE:
            logger.info("completing the replica move to %s that a crash interrupted", future)
            for current in currents:
                _rename_away(current)
            final = future.parent / partition_dir_name(*tp)
            durability.rename(future, final)
            fsync_dir(final.parent)
            (final / SWAP_MARKER).unlink()
            fsync_dir(final)

    # -- partitions ----------------------------------------------------------------------------------------------

    def get_log(self, topic: str, partition: int) -> Log | None:
        return self._logs.get((topic, partition))

    def logs(self) -> dict[TopicPartition, Log]:
        with self._lock:
            return dict(self._logs)

    def offline_logs(self) -> list[TopicPartition]:
        return [tp for tp, log in self.logs().items() if log.offline]

    def dir_of(self, topic: str, partition: int) -> Path | None:
        return self._dir_of.get((topic, partition))

    def _logs_in(self, log_dir: Path) -> list[Log]:
        """The logs in ``log_dir``, future logs included."""
        with self._lock:
            return [log for tp, log in self._logs.items() if self._dir_of[tp] == log_dir] + [
                log for tp, log in self._futures.items() if self._future_dir_of[tp] == log_dir
            ]

    # -- replicas moving between log dirs ------------------------------------------------------------------------

    def future_log(self, topic: str, partition: int) -> Log | None:
        return self._futures.get((topic, partition))

    def future_logs(self) -> dict[TopicPartition, Log]:
        with self._lock:
            return dict(self._futures)

    def future_dir_of(self, topic: str, partition: int) -> Path | None:
        return self._future_dir_of.get((topic, partition))

    def cleaning_paused(self, topic: str, partition: int) -> bool:
        """Whether the log cleaner must leave the partition's log alone: from the creation of its future log (a move
        starting, or resumed at start) to the swap or the future log's removal (a cancelled or failed move), as
        Kafka's ``abortAndPauseCleaning`` and ``resumeCleaning`` around a move. The cleaner asks before it picks a log
        and before each swap of a pass, so a pass under way when a move starts stops there. Any thread."""
        with self._lock:
            return (topic, partition) in self._futures

    def log_dir_named(self, path: str) -> Path | None:
        """The log dir ``path`` names (absolute, as DescribeLogDirs shows it), None if it is none of ours."""
        return next((d for d in self.log_dirs if str(d) == path or str(d) == os.path.normpath(path)), None)

    def prefer_dir(self, topic: str, partition: int, log_dir: Path) -> None:
        """Create the partition's log in ``log_dir`` if it comes to this broker (Kafka's preferred log dir)."""
        with self._lock:
            self._preferred[(topic, partition)] = log_dir

    def preferred_dir(self, topic: str, partition: int) -> Path | None:
        return self._preferred.get((topic, partition))

    def create_future_log(self, topic: str, partition: int, log_dir: Path) -> Log:
        """The empty future log of a replica moving to ``log_dir`` (the one there if there is one). Any future log
        of the partition in another dir is the caller's to delete first."""
        tp = (topic, partition)
        with self._lock:
            self._check_open()
            if tp not in self._logs:
                raise StorageError(f"{topic}-{partition} has no log on this broker")
            existing = self._futures.get(tp)
            if existing is not None:
                if self._future_dir_of[tp] == log_dir:
                    return existing
                raise StorageError(f"{topic}-{partition} is already moving to {self._future_dir_of[tp]}")
            if log_dir in self._offline_dirs or log_dir not in self.log_dirs or self._dir_of[tp] == log_dir:
                raise StorageError(f"cannot move {topic}-{partition} to {log_dir}")
            opened = self._open_new(log_dir, future_dir_name(topic, partition), self._logs[tp].config)
            if isinstance(opened, Log):
                self._futures[tp] = opened
                self._future_dir_of[tp] = log_dir
                return opened
        raise self._failed_to_create(log_dir, opened)

    def delete_future_log(self, topic: str, partition: int) -> bool:
        """Give up a move: remove the partition's future log (renamed ``-delete`` first, as ``delete_log``)."""
        with self._lock:
            log = self._futures.pop((topic, partition), None)
            log_dir = self._future_dir_of.pop((topic, partition), None)
        if log is None or log_dir is None:
            return False
        self._remove(log, log_dir)
        return True

    def replace_current_with_future(
        self, topic: str, partition: int, step: Callable[[str], None] | None = None
    ) -> tuple[Log, Path] | None:
        """The move's last step: the future log takes the current log's place, if it holds exactly what the current
        log holds (same log end offset; else None, nothing changed). Returns the new log and the old log's
        ``-delete`` dir, which the caller removes (in the background: it may be large).

        The future holds everything too when it ends before the current log but the current log holds no batch
        from there on (cleaning removed its last batches, and its active segment is empty): aligning then moves the
        future's end to the current's (an empty active segment there), so the new log ends where the old one did.

        The caller keeps every other writer of the partition out (the event loop runs this between two of its
        appends); both logs' locks keep out the threads (flush, retention, the cleaner). The steps, each told to
        ``step`` first (tests crash there): align the future's offsets on the current's; close both (flushed,
        sealed, producer snapshots taken); give the future the current's leader-epoch cache and producer snapshot;
        write the checkpoints; write the swap marker (the commit point, see future_dirs.py); rename the current
        dir away, the future dir to the partition's name; remove the marker; open the new log. An I/O error before
        the marker reopens the current log and drops the future (StorageError raised); after it, the dir that
        failed goes offline and the next start completes the swap."""
        tp = (topic, partition)

        def at(name: str) -> None:
            if step is not None:
                step(name)

        with self._lock:
            self._check_open()
            current, future = self._logs.get(tp), self._futures.get(tp)
            src, dest = self._dir_of.get(tp), self._future_dir_of.get(tp)
        if current is None or future is None or src is None or dest is None:
            return None
        with current.lock, future.lock:
            if current.offline or future.offline or not _holds_everything(current, future):
                return None
            at("align")
            leo, start, hw = current.log_end_offset, current.log_start_offset, current.high_watermark
            future.roll_to(leo)
            future.high_watermark = hw
            if start > future.log_start_offset:
                future.increment_log_start_offset(start)
            at("close")
            current.close()
            future.close()
            try:
                if current.offline or future.offline:
                    raise StorageError(f"closing {current.dir} or {future.dir} failed")
                at("copy-state")
                for name in (EPOCH_FILE, snapshot_name(leo)):
                    if (current.dir / name).exists():
                        write_atomic(future.dir / name, (current.dir / name).read_bytes())
                at("checkpoint")
                self.checkpoint()  # an I/O error here takes the dir offline rather than raising
                if src in self._offline_dirs or dest in self._offline_dirs:
                    raise StorageError("a log dir went offline")
                at("mark")
                write_atomic(future.dir / SWAP_MARKER, b"")
            except (OSError, StorageError) as e:
                logger.error("moving %s-%d to %s failed, the copy is dropped: %s", topic, partition, dest, e)
                self._reopen(tp, current, src, leo, start, hw)
                self.delete_future_log(topic, partition)
                raise StorageError(f"moving {topic}-{partition} to {dest} failed: {e}") from None
            doomed = src / delete_dir_name(current.dir.name)
            final = dest / partition_dir_name(topic, partition)
            failing = src
            try:
                at("rename-current")
                durability.rename(current.dir, doomed)
                fsync_dir(src)
                failing = dest
                at("rename-future")
                durability.rename(future.dir, final)
                fsync_dir(dest)
                at("unmark")
                (final / SWAP_MARKER).unlink()
                fsync_dir(final)
            except OSError as e:
                current.failure_listener = None  # closed and half moved: it serves nothing more
                current.take_offline(StorageError(f"{current.dir.name}: moved to {dest} incompletely: {e}"))
                self.fail_dir(failing, e)  # the swap committed: the next start completes it
                raise StorageError(f"moving {topic}-{partition} to {dest} failed: {e}") from None
            at("open")
            log = self._open_in_place(final, leo, start, hw, current.config)
            with self._lock:
                self._logs[tp], self._dir_of[tp] = log, dest
                self._futures.pop(tp, None)
                self._future_dir_of.pop(tp, None)
            if log.offline:
                self._log_failed(log)
        self.checkpoint()  # the old dir's files no longer name the partition
        logger.info("%s-%d moved from %s to %s", topic, partition, src, dest)
        return log, doomed

    def _reopen(self, tp: TopicPartition, closed: Log, log_dir: Path, leo: int, start: int, hw: int) -> None:
        """A swap that did not commit: the current log, closed for it, serves again (unless its dir failed)."""
        if log_dir in self._offline_dirs:
            closed.failure_listener = None
            closed.take_offline(StorageError(f"{closed.dir.name}: log dir {log_dir} is offline"))
            return
        log = self._open_in_place(closed.dir, leo, start, hw, closed.config)
        with self._lock:
            self._logs[tp], self._dir_of[tp] = log, log_dir
        if log.offline:
            self._log_failed(log)

    def _open_in_place(self, path: Path, leo: int, start: int, hw: int, config: LogConfig) -> Log:
        log = Log.open(
            path,
            config,
            recovery_point=leo,
            log_start_offset=start,
            high_watermark=hw,
            clean_shutdown=True,
            handles=self.handles,
            clock=self._clock,
        )
        log.failure_listener = self._log_failed
        return log

    # -- log dir failure -----------------------------------------------------------------------------------------

    def offline_dirs(self) -> list[Path]:
        with self._lock:
            return [d for d in self.log_dirs if d in self._offline_dirs]

    def online_dirs(self) -> list[Path]:
        with self._lock:
            return [d for d in self.log_dirs if d not in self._offline_dirs]

    def on_dir_offline(self, listener: Callable[[Path], None]) -> None:
        """Call ``listener(dir)`` once for each dir going offline, from the thread whose I/O failed."""
        self._dir_listeners.append(listener)

    def fail_dir(self, log_dir: Path, error: BaseException) -> bool:
        """Take ``log_dir`` offline after an I/O error: fail every log in it. False if it already was."""
        with self._lock:
            if log_dir in self._offline_dirs or log_dir not in self.log_dirs:
                return False
            self._offline_dirs[log_dir] = str(error)
            logs = [log for tp, log in self._logs.items() if self._dir_of[tp] == log_dir]
            logs += [log for tp, log in self._futures.items() if self._future_dir_of[tp] == log_dir]
        logger.error("log dir %s is offline (%d partition logs stop): %s", log_dir, len(logs), error)
        # Each log's own lock only, after the manager's is released: a sibling failing at the same moment finds the
        # dir already offline above and takes no other lock, so no two threads wait on each other.
        for log in logs:
            log.take_offline(StorageError(f"{log.dir.name}: log dir {log_dir} is offline: {error}"))
        for listener in self._dir_listeners:
            listener(log_dir)
        return True

    def inject_dir_failure(self, log_dir: Path) -> None:
        """Testing only (``unsafe.testing.log.dir.failure.file``): fail the dir as an EIO in one of its logs would."""
        error = StorageError(f"{log_dir}: {OSError(errno.EIO, 'injected I/O error (unsafe.testing)')}")
        logs = self._logs_in(log_dir)
        if logs:
            logs[0].take_offline(error)  # the path a real I/O error takes: the log fails, then its dir
        else:
            self.fail_dir(log_dir, error)

    def _log_failed(self, log: Log) -> None:
        failure = log.failure
        if failure is None or not _is_io_failure(failure):
            return  # corrupt data: that log only
        with self._lock:
            log_dir = next((self._dir_of[tp] for tp, other in self._logs.items() if other is log), None)
            if log_dir is None:
                log_dir = next((self._future_dir_of[tp] for tp, f in self._futures.items() if f is log), None)
        if log_dir is not None:
            self.fail_dir(log_dir, failure)

    def get_or_create_log(
        self, topic: str, partition: int, config: LogConfig | None = None, *, sync: bool = True
    ) -> Log:
        """The partition's log, created empty in the log dir holding the fewest partitions if it is new.

        ``sync=False`` leaves making the new log's entry in its log dir durable to ``sync_new_logs``: a broker
        creating the logs of a new topic of thousands of partitions then syncs each log dir once, not once a log."""
        if not _LEGAL_TOPIC.fullmatch(topic) or topic in (".", "..") or partition < 0:
            raise InvalidRequestError(f"invalid topic name {topic!r} or partition {partition}")
        name = partition_dir_name(topic, partition)
        with self._lock:
            self._check_open()
            tp = (topic, partition)
            log = self._logs.get(tp)
            if log is not None:
                return log
            online = [d for d in self.log_dirs if d not in self._offline_dirs]
            if not online:
                raise StorageError(f"cannot create {name}: every log dir is offline")
            counts = {d: self._dir_of.count(d) for d in online}
            preferred = self._preferred.pop(tp, None)
            log_dir = preferred if preferred in counts else min(online, key=lambda d: counts[d])
            opened = self._open_new(log_dir, name, config or self._topic_config(topic), sync)
            if isinstance(opened, Log):
                self._logs[tp] = opened
                self._dir_of[tp] = log_dir
                return opened
        raise self._failed_to_create(log_dir, opened)

    def _open_new(self, log_dir: Path, name: str, config: LogConfig, sync: bool = True) -> Log | BaseException:
        """A new log ``name`` in ``log_dir``, its directory entry synced or, without ``sync``, left to
        ``sync_new_logs`` (the caller holds the lock); or why not."""
        log = Log.open(log_dir / name, config, handles=self.handles, clock=self._clock, sync=sync)
        if log.failure is not None:
            return log.failure
        if not sync:
            self._unsynced.add(log_dir)
            self._unsynced_logs.append((log_dir, log.dir))
        else:
            try:
                fsync_dir(log_dir)
            except OSError as e:
                log.close()
                return StorageError(f"{log_dir}: {e}")
        log.failure_listener = self._log_failed
        return log

    def sync_new_logs(self) -> None:
        """Make durable the logs created with ``sync=False``: each one's directory (its first segment's files),
        then each log dir once. The directories are synced side by side, so that the file system commits them
        together (a topic of thousands of partitions: about a third of the time, one after the other). A log dir
        whose sync fails goes offline with its logs, as it does when the sync of a single new log fails."""
        with self._lock:
            dirs, self._unsynced = self._unsynced, set()
            logs, self._unsynced_logs = self._unsynced_logs, []
        failed = {log_dir for log_dir, error in self._sync_dirs(logs) if error is not None}
        for log_dir in failed:
            self.fail_dir(log_dir, StorageError(f"{log_dir}: syncing its new logs failed"))
        for log_dir in sorted(dirs - failed):
            if log_dir in self._offline_dirs:
                continue
            try:
                fsync_dir(log_dir)
            except OSError as e:
                self.fail_dir(log_dir, StorageError(f"{log_dir}: {e}"))

    @staticmethod
    def _sync_dirs(logs: list[tuple[Path, Path]]) -> list[tuple[Path, OSError | None]]:
        """fsync each (log dir, log directory) pair's log directory; (log dir, error or None) for each."""

        def sync(pair: tuple[Path, Path]) -> tuple[Path, OSError | None]:
            try:
                fsync_dir(pair[1])
            except OSError as e:
                return pair[0], e
            return pair[0], None

        if len(logs) < PARALLEL_SYNC_MIN:
            return [sync(pair) for pair in logs]
        with ThreadPoolExecutor(PARALLEL_SYNC_THREADS, thread_name_prefix="sync-new-logs") as pool:
            return list(pool.map(sync, logs))

    def _failed_to_create(self, log_dir: Path, failure: BaseException) -> BaseException:
        """The error to raise for a log that could not be created; an I/O failure takes its dir offline first."""
        if _is_io_failure(failure):
            self.fail_dir(log_dir, failure)
        return failure

    def delete_log(self, topic: str, partition: int) -> bool:
        """Remove the partition's log and directory (renamed ``...-delete`` first, so a crash midway finishes the
        deletion at the next start instead of resurrecting a partial log)."""
        with self._lock:
            tp = (topic, partition)
            log = self._logs.pop(tp, None)
            log_dir = self._dir_of.pop(tp, None)
        self.delete_future_log(topic, partition)
        if log is None or log_dir is None:
            return False
        self._remove(log, log_dir)
        return True

    def _remove(self, log: Log, log_dir: Path) -> None:
        log.close()
        if log_dir in self._offline_dirs:
            return  # no I/O on a failed disk: the files stay until an operator replaces it
        doomed = log_dir / delete_dir_name(log.dir.name)
        try:
            log.dir.rename(doomed)
            fsync_dir(log_dir)
        except OSError as e:
            self.fail_dir(log_dir, e)
            return
        shutil.rmtree(doomed, ignore_errors=True)

    # -- periodic work -------------------------------------------------------------------------------------------

    def tick(self, now_ms: int | None = None) -> None:
        """Flush logs due by flush.ms, write new leader epochs, run retention and write checkpoints when their
        intervals have passed.

        A log failing here goes offline (its error is logged); the others carry on."""
        now = self._clock() if now_ms is None else now_ms
        cfg = self.manager_config
        # One pass over every log, whatever is due: on a broker of thousands of idle logs this pass is most of what
        # it does each second.
        checkpointed, start_moved = self._checkpointed_starts, False
        logs = []
        for tp, log in self.logs().items():
            if log.offline:
                continue
            logs.append(log)
            try:  # a try costs nothing when nothing is raised, a suppress() a context manager for each log
                log.flush_if_due(now)
                log.persist_epochs()
            except OdradekError:
                continue
            if not start_moved and checkpointed.get(tp) != log.log_start_offset:
                start_moved = True
        for log in self.future_logs().values():
            try:
                log.flush_if_due(now)
                log.persist_epochs()
            except OdradekError:
                continue
        if now - self._last_retention >= cfg.retention_check_interval_ms:
            self._last_retention = now
            for log in logs:
                with contextlib.suppress(OdradekError):
                    log.delete_old_segments(now)
        if now - self._last_recovery_checkpoint >= cfg.recovery_point_checkpoint_interval_ms:
            self._last_recovery_checkpoint = now
            self.checkpoint_recovery_points()
        # A moved log start (DeleteRecords, or a follower taking its leader's) is written at the next tick rather
        # than the interval's end: trimmed records must not come back after a crash.
        if start_moved or now - self._last_start_checkpoint >= cfg.log_start_offset_checkpoint_interval_ms:
            self._last_start_checkpoint = now
            self.checkpoint_log_start_offsets()
        if now - self._last_hw_checkpoint >= cfg.high_watermark_checkpoint_interval_ms:
            self._last_hw_checkpoint = now
            self.checkpoint_high_watermarks()

    def checkpoint_recovery_points(self) -> None:
        self._write_checkpoint(RECOVERY_POINT_CHECKPOINT, attrgetter("recovery_point"))

    def checkpoint_log_start_offsets(self) -> None:
        """Write every log's start offset (thread-safe). Called at once where a moved log start must survive a
        crash: a DeleteRecords answer, or a follower before it reports its new log start to its leader."""
        with self._start_checkpoint_lock:
            starts = {tp: log.log_start_offset for tp, log in self.logs().items()}
            self._write_checkpoint(LOG_START_OFFSET_CHECKPOINT, attrgetter("log_start_offset"))
            self._checkpointed_starts = starts

    def checkpoint_high_watermarks(self) -> None:
        self._write_checkpoint(HIGH_WATERMARK_CHECKPOINT, attrgetter("high_watermark"))

    def checkpoint(self) -> None:
        """Write all three checkpoint files of every log dir now."""
        self.checkpoint_recovery_points()
        self.checkpoint_log_start_offsets()
        self.checkpoint_high_watermarks()

    def _write_checkpoint(self, name: str, offset_of: Callable[[Log], int]) -> None:
        with self._lock:
            placed = [(tp, log, self._dir_of[tp]) for tp, log in self._logs.items()]
            placed += [(tp, log, self._future_dir_of[tp]) for tp, log in self._futures.items()]
        for log_dir in self.online_dirs():
            if len(self.log_dirs) == 1:  # the usual single log dir: no per-log dir test
                offsets = {tp: offset_of(log) for tp, log, _ in placed}
            else:
                offsets = {tp: offset_of(log) for tp, log, d in placed if d == log_dir}
            if self._written.get((log_dir, name)) == offsets:
                continue  # the file holds these already: an idle broker does not rewrite and sync it every 5 s
            try:
                OffsetCheckpoint(log_dir / name).write(offsets)
            except OSError as e:
                self.fail_dir(log_dir, e)
            else:
                self._written[(log_dir, name)] = offsets

    # -- shutdown ------------------------------------------------------------------------------------------------

    def close(self, broker_epoch: int = UNCLEAN_SHUTDOWN) -> None:
        """Close every log (flush, seal), write the checkpoints, then the clean-shutdown markers (holding the
        broker's epoch, reported at its next registration)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            logs = dict(self._logs)
            futures = dict(self._futures)
        for log in [*logs.values(), *futures.values()]:
            log.close()
        self.checkpoint()
        failed_dirs = {self._dir_of[tp] for tp, log in logs.items() if log.offline}
        failed_dirs |= {self._future_dir_of[tp] for tp, log in futures.items() if log.offline}
        for log_dir in self.online_dirs():
            if log_dir not in failed_dirs:
                try:
                    write_atomic(log_dir / CLEAN_SHUTDOWN_FILE, str(broker_epoch).encode())
                except OSError as e:
                    self.fail_dir(log_dir, e)

    def _check_open(self) -> None:
        if self._closed:
            raise StorageError("log manager is closed")


def _holds_everything(current: Log, future: Log) -> bool:
    """Whether ``future`` holds every batch ``current`` holds (both locks held): it ends where ``current`` does, or
    before, with no batch of ``current`` from its end on."""
    end = future.log_end_offset
    if end == current.log_end_offset:
        return True
    if end > current.log_end_offset or end < current.log_start_offset:
        return False
    return not len(current.read(end, 1).records)


def _rename_away(path: Path) -> None:
    """Rename a partition dir to a ``-delete`` dir (removed when its log dir loads), durably."""
    durability.rename(path, path.with_name(delete_dir_name(path.name)))
    fsync_dir(path.parent)


def _is_io_failure(failure: BaseException | None) -> bool:
    """An I/O error (the disk), as opposed to corrupt data found in one log."""
    return isinstance(failure, StorageError)

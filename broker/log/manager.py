"""The log manager: every partition log of a broker across its ``log.dirs``, and their periodic work.

Each log dir holds partition directories ``<topic>-<partition>`` and, as in Kafka, three checkpoint files
(checkpoint.py layout) plus a clean-shutdown marker:

    recovery-point-offset-checkpoint   offset below which each log was fsynced: recovery scans from there
    log-start-offset-checkpoint        each log's start offset (retention, DeleteRecords)
    replication-offset-checkpoint      each log's high watermark
    .odradek_cleanshutdown             written last by a clean close (the broker epoch), removed at the next open

Without the marker every log of the dir is recovered (log.py). A dir holding a failed log gets no marker at
close, so the corruption is found again at the next start rather than trusted.

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
import re
import shutil
import threading
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path

from odradek.broker.log.checkpoint import OffsetCheckpoint, fsync_dir, remove_stale_tmp, write_atomic
from odradek.broker.log.config import LogConfig, LogManagerConfig
from odradek.broker.log.handles import SegmentHandles
from odradek.broker.log.log import Log, wall_clock_ms
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


DELETE_SUFFIX = "-delete"

TopicPartition = tuple[str, int]
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
        self._dir_of: dict[TopicPartition, Path] = {}
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
        for log_dir in self.log_dirs:
            try:
                shutdown_epochs.add(self._load_dir(log_dir))
            except OSError as e:
                shutdown_epochs.add(UNCLEAN_SHUTDOWN)
                self.fail_dir(log_dir, e)
            failed = next((log.failure for log in self._logs_in(log_dir) if _is_io_failure(log.failure)), None)
            if failed is not None:
                self.fail_dir(log_dir, failed)
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
            tp = parse_partition_dir(child.name)
            if tp is None:
                continue
            if tp in self._logs:
                raise StorageError(f"partition {tp} found in both {self._dir_of[tp]} and {log_dir}")
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
            self._logs[tp] = log
            self._dir_of[tp] = log_dir
        if clean:
            marker.unlink()
            fsync_dir(log_dir)
        return epoch

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
        with self._lock:
            return [log for tp, log in self._logs.items() if self._dir_of[tp] == log_dir]

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
        if log_dir is not None:
            self.fail_dir(log_dir, failure)

    def get_or_create_log(self, topic: str, partition: int, config: LogConfig | None = None) -> Log:
        """The partition's log, created empty in the log dir holding the fewest partitions if it is new."""
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
            counts = {d: 0 for d in online}
            for d in self._dir_of.values():
                if d in counts:
                    counts[d] += 1
            log_dir = min(online, key=lambda d: counts[d])
            log = Log.open(
                log_dir / name,
                config or self._topic_config(topic),
                handles=self.handles,
                clock=self._clock,
            )
            failure: BaseException | None = log.failure
            if failure is None:
                try:
                    fsync_dir(log_dir)
                except OSError as e:
                    failure = StorageError(f"{log_dir}: {e}")
                    log.close()
            if failure is None:
                log.failure_listener = self._log_failed
                self._logs[tp] = log
                self._dir_of[tp] = log_dir
                return log
        if _is_io_failure(failure):
            self.fail_dir(log_dir, failure)
        raise failure

    def delete_log(self, topic: str, partition: int) -> bool:
        """Remove the partition's log and directory (renamed ``...-delete`` first, so a crash midway finishes the
        deletion at the next start instead of resurrecting a partial log)."""
        with self._lock:
            tp = (topic, partition)
            log = self._logs.pop(tp, None)
            log_dir = self._dir_of.pop(tp, None)
        if log is None or log_dir is None:
            return False
        log.close()
        if log_dir in self._offline_dirs:
            return True  # no I/O on a failed disk: the files stay until an operator replaces it
        doomed = log_dir / f"{log.dir.name}.{uuid.uuid4().hex}{DELETE_SUFFIX}"
        try:
            log.dir.rename(doomed)
            fsync_dir(log_dir)
        except OSError as e:
            self.fail_dir(log_dir, e)
            return True
        shutil.rmtree(doomed, ignore_errors=True)
        return True

    # -- periodic work -------------------------------------------------------------------------------------------

    def tick(self, now_ms: int | None = None) -> None:
        """Flush logs due by flush.ms, run retention and write checkpoints when their intervals have passed.

        A log failing here goes offline (its error is logged); the others carry on."""
        now = self._clock() if now_ms is None else now_ms
        cfg = self.manager_config
        logs = [log for log in self.logs().values() if not log.offline]
        for log in logs:
            with contextlib.suppress(OdradekError):
                log.flush_if_due(now)
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
        if now - self._last_start_checkpoint >= cfg.log_start_offset_checkpoint_interval_ms or any(
            self._checkpointed_starts.get(tp) != log.log_start_offset for tp, log in self.logs().items()
        ):
            self._last_start_checkpoint = now
            self.checkpoint_log_start_offsets()
        if now - self._last_hw_checkpoint >= cfg.high_watermark_checkpoint_interval_ms:
            self._last_hw_checkpoint = now
            self.checkpoint_high_watermarks()

    def checkpoint_recovery_points(self) -> None:
        self._write_checkpoint(RECOVERY_POINT_CHECKPOINT, lambda log: log.recovery_point)

    def checkpoint_log_start_offsets(self) -> None:
        """Write every log's start offset (thread-safe). Called at once where a moved log start must survive a
        crash: a DeleteRecords answer, or a follower before it reports its new log start to its leader."""
        with self._start_checkpoint_lock:
            starts = {tp: log.log_start_offset for tp, log in self.logs().items()}
            self._write_checkpoint(LOG_START_OFFSET_CHECKPOINT, lambda log: log.log_start_offset)
            self._checkpointed_starts = starts

    def checkpoint_high_watermarks(self) -> None:
        self._write_checkpoint(HIGH_WATERMARK_CHECKPOINT, lambda log: log.high_watermark)

    def checkpoint(self) -> None:
        """Write all three checkpoint files of every log dir now."""
        self.checkpoint_recovery_points()
        self.checkpoint_log_start_offsets()
        self.checkpoint_high_watermarks()

    def _write_checkpoint(self, name: str, offset_of: Callable[[Log], int]) -> None:
        with self._lock:
            placed = [(tp, log, self._dir_of[tp]) for tp, log in self._logs.items()]
        for log_dir in self.online_dirs():
            try:
                OffsetCheckpoint(log_dir / name).write({tp: offset_of(log) for tp, log, d in placed if d == log_dir})
            except OSError as e:
                self.fail_dir(log_dir, e)

    # -- shutdown ------------------------------------------------------------------------------------------------

    def close(self, broker_epoch: int = UNCLEAN_SHUTDOWN) -> None:
        """Close every log (flush, seal), write the checkpoints, then the clean-shutdown markers (holding the
        broker's epoch, reported at its next registration)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            logs = dict(self._logs)
        for log in logs.values():
            log.close()
        self.checkpoint()
        failed_dirs = {self._dir_of[tp] for tp, log in logs.items() if log.offline}
        for log_dir in self.online_dirs():
            if log_dir not in failed_dirs:
                try:
                    write_atomic(log_dir / CLEAN_SHUTDOWN_FILE, str(broker_epoch).encode())
                except OSError as e:
                    self.fail_dir(log_dir, e)

    def _check_open(self) -> None:
        if self._closed:
            raise StorageError("log manager is closed")


def _is_io_failure(failure: BaseException | None) -> bool:
    """An I/O error (the disk), as opposed to corrupt data found in one log."""
    return isinstance(failure, StorageError)

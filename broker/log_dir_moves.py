"""Replicas moving between this broker's log dirs (AlterReplicaLogDirs, KIP-113): the asyncio shell around
``broker/log/replica_move.py``'s decisions, as Kafka's ReplicaAlterLogDirsThread.

Each move is one task. Its rounds read from the current log and append to the future log in a worker thread (both
logs take their own locks, so appends, fetches and the log's other threads carry on); when a round reaches the
current log's end, the current and future logs are flushed in the thread, and the last rounds and the swap
(``LogManager.replace_current_with_future``) run on the event loop, where every produce, follower append and
truncation of the partition also runs: none can come between the check that the future holds everything and the
swap, so no acknowledged record is lost or doubled. The partition then serves from the new log; the old one's
``-delete`` dir is removed in a thread.

The rounds in the thread copy what ``CopyThrottle`` grants (``replica.alter.log.dirs.io.max.bytes.per.second``, one
budget for every move of the broker): a round waits until its grant comes, and what it copied is charged; the last
rounds on the event loop are charged but never wait, as the swap must follow them at once.

A move ends when it swaps, when a request moves the replica elsewhere or back, when the partition leaves this
broker, or when either log fails (its future log is dropped). Future logs found at start (a move a restart
interrupted) resume once their partition is hosted again. While a partition has a future log, the log cleaner
leaves it alone (``LogManager.cleaning_paused``).
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from pathlib import Path

from prometheus_client.core import GaugeMetricFamily

from odradek.broker.log.log import FetchData, Log
from odradek.broker.log.replica_move import (
    UNTHROTTLED,
    Append,
    CaughtUp,
    CopyAction,
    CopyThrottle,
    FutureCopy,
    Placement,
    Position,
    StartAt,
    Truncate,
    decide,
)
from odradek.broker.partition import Partition
from odradek.broker.replica_manager import ReplicaManager
from odradek.client.errors import OdradekError, OffsetOutOfRangeError

logger = logging.getLogger(__name__)

Key = tuple[str, int]

COPY_BYTES = 1 << 20  # per round, as a follower's replica.fetch.max.bytes
FINAL_ROUNDS = 4  # rounds on the event loop before the swap; more left means copying goes on in the thread
RETRY_S = 1.0  # after a failed round, or with nothing to copy yet


def _position(log: Log) -> Position:
    return Position(log.log_start_offset, log.log_end_offset, log.high_watermark, log.latest_epoch)


def copy_round(current: Log, future: Log, copy: FutureCopy, max_bytes: int | None = None) -> CopyAction:
    """Read what follows the future log's end from the current log (at most ``max_bytes``, the copy's own limit when
    None, but whole batches: at least one) and apply the core's answer to the future log. Raises OdradekError when a
    log fails or is closed meanwhile."""
    at = _position(future)
    asked = copy.max_bytes if max_bytes is None else max_bytes
    data: FetchData | None = None
    try:
        data, diverging = current.read_for_copy(at.log_end, at.latest_epoch, asked)
    except OffsetOutOfRangeError:
        action = copy.on_out_of_range(at, _position(current))
    else:
        if diverging is not None:
            action = copy.on_diverging(at, *diverging, future.end_offset_for_epoch(diverging[0]))
        else:
            assert data is not None
            seen = Position(data.log_start_offset, data.log_end_offset, data.high_watermark, None)
            action = copy.on_read(at, seen, len(data.records), asked)
    if isinstance(action, Append):
        assert data is not None
        future.append_as_follower(data.records, action.fetch_offset)
        future.high_watermark = min(action.high_watermark, future.log_end_offset)
        start = min(action.log_start, future.high_watermark)
        if start > future.log_start_offset:
            future.increment_log_start_offset(start)
    elif isinstance(action, Truncate):
        future.truncate_to(action.offset)
    elif isinstance(action, StartAt):
        future.truncate_fully_and_start_at(action.offset)
    return action


class LogDirMoves:
    """The moves of this broker's replicas between its log dirs, and the AlterReplicaLogDirs answers."""

    def __init__(
        self,
        replicas: ReplicaManager,
        copy_bytes: int = COPY_BYTES,
        retry_s: float = RETRY_S,
        io_max_bytes_per_second: int = UNTHROTTLED,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        """``io_max_bytes_per_second``: replica.alter.log.dirs.io.max.bytes.per.second; ``clock`` (seconds) and
        ``sleep`` time its waits."""
        self.replicas = replicas
        self.logs = replicas.logs
        self.copy_bytes = copy_bytes
        self.retry_s = retry_s
        self._clock = clock
        self._sleep = sleep
        self.throttle = CopyThrottle(io_max_bytes_per_second, clock())
        self.copies: dict[Key, FutureCopy] = {}
        self._tasks: dict[Key, asyncio.Task[None]] = {}
        self._background: set[asyncio.Task[None]] = set()
        replicas.add_hosting_listener(self.resume)

    # -- requests ------------------------------------------------------------------------------------------------

    def alter(self, destinations: Mapping[Key, str]) -> dict[Key, int]:
        """AlterReplicaLogDirs: each partition's error code; moves start, change destination or stop."""
        offline = set(self.logs.offline_dirs())
        answers: dict[Key, int] = {}
        for key, path in destinations.items():
            topic, partition = key
            destination = self.logs.log_dir_named(path)
            p = self.replicas.partitions.get(key)
            placement = Placement(
                known=partition >= 0 and self.replicas.image.partition(topic, partition) is not None,
                current_dir=self.logs.dir_of(*key) if p is not None else None,
                current_offline=key in self.replicas.offline or (p is not None and p.log.offline),
                future_dir=self.logs.future_dir_of(*key),
            )
            d = decide(topic, partition, destination, destination not in offline, bool(offline), placement)
            if d.cancel:
                self.cancel(key)
            if d.prefer is not None:
                self.logs.prefer_dir(topic, partition, d.prefer)
            if d.start is not None and p is not None:
                try:
                    self.logs.create_future_log(topic, partition, d.start)
                except OdradekError as e:
                    logger.warning("cannot move %s to %s: %s", p, d.start, e)
                    answers[key] = e.code
                    continue
                logger.info("%s: moving from %s to %s", p, placement.current_dir, d.start)
                self._start(p, d.start)
            answers[key] = d.error
        return answers

    def cancel(self, key: Key) -> None:
        """Stop the partition's move and drop its future log."""
        task = self._tasks.pop(key, None)
        if task is not None:
            task.cancel()
        self.copies.pop(key, None)
        if self.logs.delete_future_log(*key):
            logger.info("%s-%d: move cancelled", *key)

    def resume(self, p: Partition) -> None:
        """A partition now hosted whose future log is on disk (a move a restart interrupted): go on copying."""
        key = (p.topic, p.partition)
        destination = self.logs.future_dir_of(*key)
        if destination is not None and key not in self._tasks:
            logger.info("%s: resuming its move to %s", p, destination)
            self._start(p, destination)

    def _start(self, p: Partition, destination: Path) -> None:
        key = (p.topic, p.partition)
        old = self._tasks.pop(key, None)
        if old is not None:
            old.cancel()
        copy = self.copies[key] = FutureCopy(p.topic, p.partition, destination, self.copy_bytes)
        self._tasks[key] = asyncio.create_task(self._run(key, copy), name=f"log-dir-move-{p.name}")

    async def close(self) -> None:
        """Stop the moves (their future logs stay, and resume at the next start); finish removing old dirs."""
        tasks = list(self._tasks.values())
        self._tasks.clear()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, *self._background, return_exceptions=True)

    # -- copying -------------------------------------------------------------------------------------------------

    def _live(self, key: Key, copy: FutureCopy) -> tuple[Partition, Log] | None:
        """The partition and its future log while this copy is still its move; a failed log ends the move."""
        p = self.replicas.partitions.get(key)
        future = self.logs.future_log(*key)
        if self.copies.get(key) is not copy or p is None or future is None:
            return None
        if p.log.offline or future.offline or key in self.replicas.offline:
            logger.error("%s: move to %s given up: a log failed", p, copy.destination)
            self._ended(key, copy)
            self.logs.delete_future_log(*key)
            return None
        return p, future

    def _ended(self, key: Key, copy: FutureCopy) -> None:
        if self.copies.get(key) is copy:
            del self.copies[key]
            self._tasks.pop(key, None)

    async def _run(self, key: Key, copy: FutureCopy) -> None:
        try:
            await self._copy(key, copy)
        except Exception:  # a bug must not leave a future log that nothing copies
            logger.exception("%s-%d: the move to %s failed", *key, copy.destination)
            if self.copies.get(key) is copy:
                self.logs.delete_future_log(*key)
        finally:
            self._ended(key, copy)

    async def _copy(self, key: Key, copy: FutureCopy) -> None:
        while (live := self._live(key, copy)) is not None:
            p, future = live
            grant = self.throttle.grant(copy.max_bytes, self._clock())
            if not grant.bytes:  # over the rate: wait for the grant (a while at most, to notice a cancel)
                await self._sleep(min(grant.wait_s, self.retry_s))
                continue
            used = 0
            try:
                action = await asyncio.to_thread(copy_round, p.log, future, copy, grant.bytes)
                used = action.size if isinstance(action, Append) else 0
                if (isinstance(action, Append) and action.near_end) or isinstance(action, CaughtUp):
                    # Little is left: make the swap's closes cheap, then finish on the loop.
                    await asyncio.to_thread(_flush, p.log, future)
                    if self._live(key, copy) is not None and self._finish(key, p, future, copy):
                        return
            except OdradekError as e:
                if self._live(key, copy) is not None:
                    logger.warning("%s: moving to %s: %s; retrying", p, copy.destination, e)
                    await self._sleep(self.retry_s)
            finally:
                self.throttle.spent(grant.bytes, used, self._clock())

    def _finish(self, key: Key, p: Partition, future: Log, copy: FutureCopy) -> bool:
        """On the event loop: copy the last batches, then swap. False when more is left than a few rounds hold."""
        for _ in range(FINAL_ROUNDS):
            action = copy_round(p.log, future, copy)
            if isinstance(action, Append):
                self.throttle.spent(0, action.size, self._clock())
            if isinstance(action, CaughtUp):
                break
            if not isinstance(action, Append):
                return False
        else:
            return False
        try:
            swapped = self.logs.replace_current_with_future(*key)
        except OdradekError as e:
            logger.error("%s: the move to %s failed: %s", p, copy.destination, e)
            self._ended(key, copy)
            p.log = self.logs.get_log(*key) or p.log  # reopened, or failed with its dir
            self.replicas.check_offline()
            return True
        if swapped is None:
            return False
        p.log, doomed = swapped
        copy.lag = 0
        self._ended(key, copy)
        task = asyncio.create_task(asyncio.to_thread(shutil.rmtree, doomed, True), name=f"remove-{doomed.name}")
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return True

    # -- metrics -------------------------------------------------------------------------------------------------

    def gauges(self) -> Iterator[GaugeMetricFamily]:
        """Kafka's ReplicaAlterLogDirsManager figures: the future replicas being copied, and the largest lag."""
        copies = list(self.copies.values())  # scraped from the metrics server's thread
        lags = [c.lag for c in copies if c.lag >= 0]
        yield GaugeMetricFamily(
            "odradek_replica_alter_log_dirs_partitions", "replicas moving between log dirs", value=len(copies)
        )
        yield GaugeMetricFamily(
            "odradek_replica_alter_log_dirs_max_lag",
            "offsets the furthest-behind future replica has still to copy",
            value=max(lags, default=0),
        )


def _flush(current: Log, future: Log) -> None:
    current.flush()
    future.flush()

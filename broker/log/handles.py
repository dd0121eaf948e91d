"""A bounded LRU of open segments, so thousands of partitions do not exhaust file descriptors or mappings.

A segment is "open" while it holds its log fd and its mapped indexes; as CPython's mmap keeps a duplicate of the
file's fd, that is up to FDS_PER_SEGMENT descriptors, and the cache admits ``max_open_fds // FDS_PER_SEGMENT``
segments. Every use of those handles happens with the
owning log's lock held, so eviction closes a victim only after taking the victim's lock without blocking: a victim
busy in another thread is skipped (the bound is then exceeded briefly), and no lock is ever waited for while the
cache's own lock is held, so there is no lock-order deadlock. A log's own thread may evict that log's other
segments (the lock is reentrant): log code never keeps one segment's fd in a variable while opening another.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Protocol


class Openable(Protocol):
    @property
    def lock(self) -> threading.RLock: ...

    def open_handles(self) -> None: ...

    def close_handles(self) -> None: ...


FDS_PER_SEGMENT = 3  # the log, and the offset and time indexes while mapped
MAPS_PER_SEGMENT = 2  # the offset and time indexes


def derived_max_open_fds(nofile: int, max_map_count: int | None) -> int:
    """``log.max.open.files`` when it is not set: half the process's open-file limit (the other half for sockets,
    checkpoints and the cleaner), and no more segments than half of ``vm.max_map_count`` maps, since each open
    segment maps its two indexes. A fixed default either evicts on every append once each broker hosts thousands of
    partitions (a round-robin producer touches every log in turn) or exceeds a small limit and fails with EMFILE."""
    fds = nofile // 2
    if max_map_count is not None:
        fds = min(fds, max_map_count // 2 // MAPS_PER_SEGMENT * FDS_PER_SEGMENT)
    return max(fds, FDS_PER_SEGMENT)


class SegmentHandles:
    def __init__(self, max_open_fds: int = 3072) -> None:
        if max_open_fds < FDS_PER_SEGMENT:
            raise ValueError(f"max_open_fds must be at least {FDS_PER_SEGMENT}")
        self.max_open = max_open_fds // FDS_PER_SEGMENT
        self._lock = threading.Lock()
        self._open: OrderedDict[Openable, None] = OrderedDict()
        # The last item touched: touching it again needs no lock (it cannot be evicted while its owner holds its
        # lock, and a slightly stale LRU order is harmless), which keeps a partition's appends syscall-only.
        self.mru: Openable | None = None

    def __len__(self) -> int:
        return len(self._open)

    def touch(self, item: Openable) -> None:
        """Mark ``item`` most recently used, opening it (and evicting others) if it is closed.

        The caller holds ``item.lock``.
        """
        with self._lock:
            self.mru = item
            if item in self._open:
                self._open.move_to_end(item)
                return
            item.open_handles()
            self._open[item] = None
            if len(self._open) > self.max_open:
                self._evict(item)

    def forget(self, item: Openable) -> None:
        """Close ``item`` and drop it from the cache (segment closed or deleted); the caller holds its lock."""
        with self._lock:
            if self.mru is item:
                self.mru = None
            if item in self._open:
                del self._open[item]
                item.close_handles()

    def _evict(self, keep: Openable) -> None:
        for _ in range(len(self._open)):
            if len(self._open) <= self.max_open:
                return
            victim = next(iter(self._open))
            if victim is not keep and victim.lock.acquire(blocking=False):
                try:
                    del self._open[victim]
                    if self.mru is victim:
                        self.mru = None
                    victim.close_handles()
                finally:
                    victim.lock.release()
            else:
                self._open.move_to_end(victim)  # in use by another thread right now: recently used indeed

"""Keeping CPython's cycle collector off a node's long-lived state.

A full (generation 2) collection scans every tracked object. A broker holding thousands of partitions has a large
long-lived heap (partitions, logs, segments, replication state, the metadata image), and under load the collector's
automatic full passes came every few seconds: at 2,000 partitions a broker spent a tenth of its wall time in them,
0.2 s a pass, each a pause of its event loop. Reference counting frees almost everything a node discards; what the
cycle collector is for is the rare cycle.

So a running node collects and then freezes what survives (``gc.freeze``: the survivors move to a permanent
generation no automatic pass scans) once at start and then every ``FREEZE_INTERVAL_S``; automatic passes scan only
what was allocated since. Every ``FULL_EVERY``-th step unfreezes first, so that a cycle among long-lived objects
that became garbage (a deleted partition's, say) is still reclaimed, by one full pass every ten minutes instead of
one every few seconds.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time
from typing import Protocol

logger = logging.getLogger(__name__)

FREEZE_INTERVAL_S = 30.0
FULL_EVERY = 20  # steps: with FREEZE_INTERVAL_S, a full pass every ten minutes


class Collector(Protocol):
    """The parts of the ``gc`` module a schedule uses."""

    def collect(self) -> int: ...

    def freeze(self) -> None: ...

    def unfreeze(self) -> None: ...


class CycleCollection:
    """The schedule: each ``step`` collects and freezes; the first and every ``full_every``-th unfreeze first."""

    def __init__(self, collector: Collector = gc, full_every: int = FULL_EVERY) -> None:
        self.collector = collector
        self.full_every = max(1, full_every)
        self.steps = 0

    def step(self) -> bool:
        """One collection; True if it was a full one (everything scanned, frozen objects included)."""
        full = self.steps % self.full_every == 0
        self.steps += 1
        if full:
            self.collector.unfreeze()
        self.collector.collect()
        self.collector.freeze()
        return full


async def keep_collecting(collection: CycleCollection, interval_s: float = FREEZE_INTERVAL_S) -> None:
    """Run ``collection``'s steps on the event loop until cancelled, the first one now."""
    while True:
        started = time.perf_counter()
        kind = "full" if collection.step() else "unfrozen-object"
        logger.debug("%s cycle collection took %.1f ms", kind, (time.perf_counter() - started) * 1000)
        await asyncio.sleep(interval_s)

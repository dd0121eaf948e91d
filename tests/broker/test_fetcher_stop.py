"""A follower's fetch loop stops when cancelled, even when new work arrives in the same instant.

Python 3.11's ``asyncio.wait_for`` returns the inner result instead of raising when the task is cancelled just
as the awaited thing completes; a loop around it then never ends, and the broker's graceful stop hung on it
(after controlled shutdown moves partitions, the fetcher is woken and cancelled together).
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from odradek.broker.fetcher import FetcherConfig, LeaderFetcher


async def test_stop_is_not_lost_when_the_fetcher_is_woken_at_the_same_time() -> None:
    manager = SimpleNamespace(config=FetcherConfig(backoff_ms=1000), address_of=lambda _: None)
    for _ in range(20):
        fetcher = LeaderFetcher(manager, 1)  # type: ignore[arg-type]
        for _ in range(3):
            await asyncio.sleep(0)  # parked on "nothing to fetch": waiting for a change or the backoff
        fetcher._changed.set()  # new work (a partition moved here) ...
        async with asyncio.timeout(5):  # ... and the stop, in the same loop iteration
            await fetcher.stop()
        assert fetcher._task.done()

"""The odradek producer's send loop the benchmarks time, shared so that every benchmark measures the same loop."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Mapping
from typing import Any

from odradek.client.producer import AsyncProducer


def producer_rate(config: Mapping[str, Any], topic: str, records: int, size: int) -> float:
    """Records/s of odradek's producer sending ``records`` random values of ``size`` bytes, as ``odradek perf
    produce`` drives it: a tight loop that yields to the sender every 1024 records, then a flush. The clock starts
    once the producer is connected and knows the leaders; any failed record fails the run."""

    async def run() -> float:
        failed: list[BaseException] = []

        def check(future: asyncio.Future) -> None:
            if future.exception() is not None:
                failed.append(future.exception())

        async with AsyncProducer(dict(config)) as producer:
            await producer.partitions_for(topic)
            value, send = os.urandom(size), producer.send
            start = time.perf_counter()
            for i in range(records):
                send(topic, value).add_done_callback(check)
                if i & 1023 == 1023:
                    await asyncio.sleep(0)
            await producer.flush()
            elapsed = time.perf_counter() - start
        if failed:
            raise RuntimeError(f"{len(failed)} records failed (first: {failed[0]!r})")
        return records / elapsed

    return asyncio.run(run())

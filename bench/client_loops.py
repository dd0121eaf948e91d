"""The client loops the benchmarks time (odradek's producer, librdkafka's producer and consumer, and the read
timing), shared so that every benchmark measures the same loops."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Mapping
from typing import Any

import confluent_kafka

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


def librdkafka_producer_rate(config: Mapping[str, Any], topic: str, records: int, size: int) -> float:
    """Records/s of librdkafka producing ``records`` values of ``size`` bytes in a tight loop, counted once all are
    delivered (a failed delivery fails the bench)."""
    failed: list[confluent_kafka.KafkaError] = []

    def on_error(err: confluent_kafka.KafkaError | None, _msg: object) -> None:
        if err is not None:
            failed.append(err)

    producer = confluent_kafka.Producer(dict(config))
    producer.list_topics(topic, timeout=10)  # connections and metadata first: the timing covers producing only
    value = os.urandom(size)
    produce, poll = producer.produce, producer.poll
    start = time.perf_counter()
    for _ in range(records):
        try:
            produce(topic, value, on_delivery=on_error)
        except BufferError:  # the queue is full: let librdkafka drain some of it
            poll(0.005)
            produce(topic, value, on_delivery=on_error)
        poll(0)
    left = producer.flush(120)
    elapsed = time.perf_counter() - start
    if left or failed:
        raise RuntimeError(f"{left} records undelivered, {len(failed)} failed (first: {failed[:1]})")
    return records / elapsed


def read_rate(take: Callable[[], int], records: int, stall_s: float = 120.0) -> float:
    """Records/s of ``take()`` (which returns how many records it got) until ``records`` have come, timed from the
    end of the first non-empty take and counting the records after it, so that connecting and finding the leaders
    are not part of the rate (unless everything came in one take). No records for ``stall_s`` fails the bench."""
    count, first = 0, 0
    begin = start = last = time.perf_counter()
    while count < records:
        got = take()
        now = time.perf_counter()
        if got:
            if not count:
                first, start = got, now
            count += got
            last = now
        elif now - last > stall_s:
            raise RuntimeError(f"no records for {stall_s:.0f} s after {count} of {records}")
    return count / (last - begin) if count == first else (count - first) / (last - start)


def librdkafka_consumer_rate(config: Mapping[str, Any], topic: str, partitions: int, records: int) -> float:
    """Records/s of a fresh librdkafka consumer reading the topic from the start. It assigns the partitions itself
    and never joins a group (``config`` needs a group.id all the same)."""
    consumer = confluent_kafka.Consumer(dict(config))
    consumer.assign(
        [confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING) for p in range(partitions)]
    )

    def take() -> int:
        batch = consumer.consume(num_messages=10_000, timeout=0.5)
        for m in batch:
            if m.error() is not None:
                raise RuntimeError(f"consumer error: {m.error()}")
        return len(batch)

    try:
        return read_rate(take, records)
    finally:
        consumer.close()

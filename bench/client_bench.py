#!/usr/bin/env python3
"""Client-side ceilings, without network: how fast the producer's ``send()`` path (validate, partition, append
to the accumulator, then drain and encode the batches) and the consumer's poll path (decode fetched batches into
ConsumerRecords) go in this process, on 100-byte records.

Each figure comes with baselines measured in the same run, in interleaved rounds so that a noisy neighbour slows
both sides: a bare Python loop calling a no-op function per record (the floor of any per-record Python API), and
kafka-python's record builder / batch iterator doing the same encoding / decoding work. End-to-end figures add the
gRPC and broker costs on top of these. Runs in about 15 s.
"""

from __future__ import annotations

import os
import time
import warnings
from collections.abc import Callable

import uvloop

from odradek.client.consumer.completed_fetch import CompletedFetch
from odradek.client.metadata import PartitionLeader
from odradek.client.producer import AsyncProducer
from odradek.client.record.batch import read_batches
from odradek.client.record.builder import encode_batch
from odradek.client.structs import TopicPartition

with warnings.catch_warnings():  # kafka-python's protocol package uses deprecated importlib.resources calls
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

TS = 1_700_000_000_000
VALUE_SIZE = 100
RECORDS = 200_000
ROUNDS = 7


def best_of(functions: dict[str, Callable[[], int]]) -> dict[str, float]:
    """Records/s of each function (each returns how many records it handled): best of ROUNDS interleaved runs."""
    best = dict.fromkeys(functions, 0.0)
    for _ in range(ROUNDS):
        for name, fn in functions.items():
            started = time.perf_counter()
            count = fn()
            best[name] = max(best[name], count / (time.perf_counter() - started))
    return best


def report(title: str, rates: dict[str, float], ours: str) -> None:
    print(title, flush=True)
    for name, rate in rates.items():
        ratio = "" if name == ours else f"  (ours is {rates[ours] / rate:.2f}x this)"
        print(f"  {name:<44} {rate / 1e3:8.0f}k records/s{ratio}", flush=True)


def values(count: int) -> list[bytes]:
    return [os.urandom(VALUE_SIZE // 2).hex().encode() for _ in range(count)]


async def bench_producer() -> None:
    producer = AsyncProducer(
        {
            "bootstrap.servers": "127.0.0.1:9",  # never contacted: the sender never gets a turn on the loop
            "buffer.memory": 1 << 31,
            "linger.ms": 60_000,
            "max.block.ms": 0,
        }
    )
    metadata = producer._metadata
    metadata._leaders["bench"] = [PartitionLeader(0, 0)] * 3
    metadata.partition_counts["bench"] = 3
    accumulator = producer._accumulator
    records = values(1000)
    keys = [b"user-%d" % i for i in range(1000)]
    send = producer.send

    def drain_and_encode() -> int:
        batches, _, _, _ = accumulator.drain(time.monotonic(), lambda t, p: 0, lambda n, full: True, 1 << 62)
        count = 0
        for batch in batches.get(0, ()):
            batch.encode("none")
            count += batch.record_count
            batch.complete(0, -1)
            accumulator.release(batch)
        return count

    def send_null_keys() -> int:
        for i in range(RECORDS):
            send("bench", records[i % 1000])
        return drain_and_encode()

    def send_keyed() -> int:
        for i in range(RECORDS):
            send("bench", records[i % 1000], keys[i % 1000])
        return drain_and_encode()

    def noop(topic: str, value: bytes) -> None:
        pass

    def bare_loop() -> int:
        for i in range(RECORDS):
            noop("bench", records[i % 1000])
        return RECORDS

    def kafka_python_builder() -> int:
        builder = None
        for i in range(RECORDS):
            if builder is None:
                builder = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, batch_size=16384)
            if builder.append(i, TS, None, records[i % 1000], []) is None:
                builder.build()
                builder = None
        return RECORDS

    rates = best_of(
        {
            "odradek send() + encode, null keys (sticky)": send_null_keys,
            "odradek send() + encode, keyed (murmur2)": send_keyed,
            "bare loop: one no-op call per record": bare_loop,
            "kafka-python DefaultRecordBatchBuilder": kafka_python_builder,
        }
    )
    report(f"producer: {RECORDS} x {VALUE_SIZE} B records into 16 KiB batches", rates, next(iter(rates)))
    await producer.close(timeout=0)


def bench_consumer() -> None:
    record_values = values(1000)
    # One 1 MiB fetch response: the default max.partition.fetch.bytes worth of 16 KiB batches.
    batches = []
    offset = 0
    while sum(map(len, batches)) < 1_048_576 - 16_384:
        batch = encode_batch(record_values[:140], timestamps=TS, base_offset=offset)
        batches.append(batch)
        offset += 140
    buf = b"".join(batches)
    tp = TopicPartition("bench", 0)

    def poll_path() -> int:
        fetch = CompletedFetch(tp, buf, 0, 0, check_crcs=True, read_committed=False)
        count = 0
        while records := fetch.take(500):
            count += len(records)
        return count

    def codec_decode() -> int:
        return sum(len(b.records()) for b in read_batches(buf))

    def kafka_python_decode() -> int:
        return sum(1 for batch in batches for _ in DefaultRecordBatch(batch))

    def bare_loop() -> int:
        new = tuple.__new__
        for i in range(offset):
            new(tuple, ("bench", 0, i, TS, 0, None, buf, ()))
        return offset

    rates = best_of(
        {
            "odradek poll path (CompletedFetch, CRC on)": poll_path,
            "odradek record codec (Record, no topic)": codec_decode,
            "bare loop: build one 8-tuple per record": bare_loop,
            "kafka-python DefaultRecordBatch iteration": kafka_python_decode,
        }
    )
    report(f"consumer: one {len(buf)} B fetch of {offset} x {VALUE_SIZE} B records", rates, next(iter(rates)))


def main() -> None:
    started = time.perf_counter()
    uvloop.run(bench_producer())
    bench_consumer()
    print(f"total bench time: {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()

"""``odradek perf produce|consume``: load generators in the manner of Kafka's producer and consumer perf tests."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time

from odradek.client.cli.common import CommandError
from odradek.client.cli.data import data_command
from odradek.client.cli.profile import client_config
from odradek.client.consumer import Consumer
from odradek.client.producer import AsyncProducer
from odradek.client.structs import TopicPartition

PROGRESS_S = 5.0
MAX_SAMPLES = 50_000  # latency samples: a callback per record would cost ~2 µs each


def register(sub: argparse._SubParsersAction) -> None:
    perf = sub.add_parser("perf", help="load generators").add_subparsers(
        dest="perf_command", required=True, metavar="COMMAND"
    )
    produce = data_command(perf, "produce", _produce, "produce fixed-size records and report throughput and latency")
    produce.add_argument("--topic", required=True)
    produce.add_argument("--num-records", type=int, required=True)
    produce.add_argument("--record-size", type=int, default=100)
    produce.add_argument("--throughput", type=int, default=-1, help="records/s cap (-1: as fast as possible)")
    produce.add_argument("--acks", choices=("0", "1", "all", "-1"), default="1")
    produce.add_argument("--compression", choices=("none", "gzip", "snappy", "lz4", "zstd"), default="none")
    produce.add_argument("--batch-size", type=int, default=131072)
    produce.add_argument("--linger-ms", type=int, default=5)
    produce.add_argument("-P", "--producer-config", action="append", default=[], metavar="KEY=VALUE")
    consume = data_command(perf, "consume", _consume, "consume records from the beginning and report throughput")
    consume.add_argument("--topic", required=True)
    consume.add_argument("--num-records", type=int, required=True)
    consume.add_argument("--timeout-ms", type=int, default=30000, help="give up after this long without records")


def _pairs(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        key, eq, value = item.partition("=")
        if not eq:
            raise CommandError(f"{item!r} is not key=value")
        out[key] = value
    return out


def _progress(args: argparse.Namespace):
    """Progress lines go to stderr with ``--format json``, so stdout is one JSON document."""
    return sys.stderr if args.format == "json" else sys.stdout


def percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return 0.0
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


def _produce(args: argparse.Namespace) -> None:
    result = asyncio.run(_produce_async(args))
    if args.format == "json":
        print(json.dumps(result))
    else:
        print(
            f"{result['records']} records sent, {result['records_per_sec']:.1f} records/sec "
            f"({result['mb_per_sec']:.2f} MB/sec), {result['avg_latency_ms']:.2f} ms avg latency, "
            f"{result['max_latency_ms']:.2f} ms max latency, {result['p50_ms']:.2f} ms 50th, "
            f"{result['p95_ms']:.2f} ms 95th, {result['p99_ms']:.2f} ms 99th, {result['p999_ms']:.2f} ms 99.9th."
        )


async def _produce_async(args: argparse.Namespace) -> dict:
    if args.num_records < 1 or args.record_size < 0:
        raise CommandError("--num-records must be positive and --record-size not negative")
    config = client_config(
        args,
        **{
            "acks": args.acks,
            "compression.type": args.compression,
            "batch.size": args.batch_size,
            "linger.ms": args.linger_ms,
            **_pairs(args.producer_config),
        },
    )
    payload = os.urandom(args.record_size)
    n = args.num_records
    sampling = max(1, n // MAX_SAMPLES) if args.throughput <= 0 else 1
    latencies: list[float] = []
    errors: list[BaseException] = []
    clock = time.perf_counter
    async with AsyncProducer(config) as producer:
        await producer.partitions_for(args.topic)  # metadata first, so the timing covers sending only
        send = producer.send
        topic = args.topic
        start = last_report = clock()
        window_start, window_count = start, 0
        interval = 1.0 / args.throughput if args.throughput > 0 else 0.0

        def record(sent_at: float):
            def done(future) -> None:
                error = future.exception()
                if error is not None:
                    errors.append(error)
                else:
                    latencies.append(clock() - sent_at)

            return done

        for i in range(n):
            if interval:
                due = start + i * interval
                now = clock()
                if due > now + 0.001:
                    await asyncio.sleep(due - now)
            future = send(topic, payload)
            if i % sampling == 0:
                future.add_done_callback(record(clock()))
            if i & 1023 == 1023:
                await asyncio.sleep(0)  # let the sender drain full batches
                now = clock()
                if now - last_report >= PROGRESS_S:
                    count = i + 1 - window_count
                    print(
                        f"{i + 1} records sent, {count / (now - window_start):.1f} records/sec",
                        file=_progress(args),
                        flush=True,
                    )
                    last_report = window_start = now
                    window_count = i + 1
        await producer.flush()
        elapsed = clock() - start
    if errors:
        raise CommandError(f"{len(errors)} records failed, the first with: {errors[0]}")
    ms = sorted(x * 1000 for x in latencies)
    return {
        "records": n,
        "records_per_sec": n / elapsed,
        "mb_per_sec": n * args.record_size / elapsed / 1e6,
        "avg_latency_ms": sum(ms) / len(ms) if ms else 0.0,
        "max_latency_ms": ms[-1] if ms else 0.0,
        "p50_ms": percentile(ms, 0.50),
        "p95_ms": percentile(ms, 0.95),
        "p99_ms": percentile(ms, 0.99),
        "p999_ms": percentile(ms, 0.999),
        "latency_samples": len(ms),
    }


def _consume(args: argparse.Namespace) -> None:
    result = _consume_sync(args)
    if args.format == "json":
        print(json.dumps(result))
    else:
        print(
            f"{result['records']} records consumed in {result['seconds']:.2f} s: "
            f"{result['records_per_sec']:.1f} records/sec, {result['mb_per_sec']:.2f} MB/sec"
        )


def _consume_sync(args: argparse.Namespace) -> dict:
    """The synchronous consumer: fetching and decoding run on its background loop while this thread counts, as
    an application thread would process records."""
    config = client_config(args, **{"auto.offset.reset": "earliest"})
    clock = time.perf_counter
    with Consumer(config) as consumer:
        tps = [TopicPartition(args.topic, p) for p in consumer.partitions_for(args.topic)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        count = size = 0
        start = last = last_report = clock()
        while count < args.num_records:
            records = consumer.poll(timeout_ms=500)
            now = clock()
            if not records:
                if (now - last) * 1000 > args.timeout_ms:
                    raise CommandError(f"no records for {args.timeout_ms} ms after {count} records")
                continue
            last = now
            count += len(records)
            for r in records:
                size += len(r.value) if r.value is not None else 0
            if now - last_report >= PROGRESS_S:
                print(
                    f"{count} records consumed, {count / (now - start):.1f} records/sec",
                    file=_progress(args),
                    flush=True,
                )
                last_report = now
        elapsed = clock() - start
    return {
        "records": count,
        "seconds": elapsed,
        "records_per_sec": count / elapsed,
        "mb_per_sec": size / elapsed / 1e6,
    }

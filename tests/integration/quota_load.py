"""Load clients for the quota tests, run as their own processes (so that one client's work does not slow another
through this process's interpreter lock). Each runs for a fixed time and prints one JSON line with what it saw.

    python quota_load.py produce SERVERS TOPIC CLIENT_ID SECONDS [--rate RECORDS_PER_S] [--record-size N]
    python quota_load.py consume SERVERS TOPIC CLIENT_ID SECONDS
    python quota_load.py raw-produce ADDRESS TOPIC CLIENT_ID SECONDS   # ignores throttle_time_ms
    python quota_load.py metadata-spam ADDRESS CLIENT_ID SECONDS       # raw Metadata calls, as fast as answered

``produce`` without ``--rate`` sends as fast as the producer accepts records (a greedy producer); with it, at that
rate (a well-behaved one), reporting delivery latencies.
"""

from __future__ import annotations

import argparse
import json
import os
import threading
import time

import grpc

from odradek.client import Consumer, Producer, TopicPartition
from odradek.client.connection import channel_options
from odradek.client.record.builder import encode_batch
from odradek.proto import broker_pb2 as pb
from odradek.proto import broker_pb2_grpc


def percentile(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] if values else 0.0


def produce(args: argparse.Namespace) -> dict:
    payload = os.urandom(args.record_size)
    config = {
        "bootstrap.servers": args.servers,
        "client.id": args.client_id,
        "acks": "all",
        "linger.ms": 5,
        "buffer.memory": 2 << 20,  # a small buffer: the final flush of a throttled producer stays short
    }
    lock = threading.Lock()
    acked, failed, latencies = [0], [0], []

    def on_done(sent_at: float):
        def done(future) -> None:
            with lock:
                if future.exception() is None:
                    acked[0] += 1
                    latencies.append((time.perf_counter() - sent_at) * 1000)
                else:
                    failed[0] += 1

        return done

    sent = 0
    with Producer(config) as producer:
        producer.partitions_for(args.topic)
        start = time.perf_counter()
        deadline = start + args.seconds
        interval = 1 / args.rate if args.rate else 0.0
        while True:
            now = time.perf_counter()
            if now >= deadline:
                break
            due = start + sent * interval
            if due > now:
                time.sleep(due - now)
            producer.send(args.topic, payload).add_done_callback(on_done(time.perf_counter()))
            sent += 1
        producer.flush(120)
        elapsed = time.perf_counter() - start
        metrics = producer.metrics() if hasattr(producer, "metrics") else {}
    return {
        "sent": sent,
        "acked": acked[0],
        "failed": failed[0],
        "seconds": elapsed,
        "bytes_per_s": acked[0] * args.record_size / elapsed,
        "records_per_s": acked[0] / elapsed,
        "p50_ms": percentile(latencies, 0.5),
        "p99_ms": percentile(latencies, 0.99),
        "metrics": {k: v for k, v in metrics.items() if "throttle" in k},
    }


def consume(args: argparse.Namespace) -> dict:
    config = {
        "bootstrap.servers": args.servers,
        "client.id": args.client_id,
        "auto.offset.reset": "earliest",
    }
    count = size = 0
    with Consumer(config) as consumer:
        tps = [TopicPartition(args.topic, p) for p in consumer.partitions_for(args.topic)]
        consumer.assign(tps)
        start = time.perf_counter()
        deadline = start + args.seconds
        while time.perf_counter() < deadline:
            for r in consumer.poll(timeout_ms=200):
                count += 1
                size += len(r.value or b"")
        elapsed = time.perf_counter() - start
        metrics = consumer.metrics() if hasattr(consumer, "metrics") else {}
    return {
        "records": count,
        "bytes": size,
        "seconds": elapsed,
        "bytes_per_s": size / elapsed,
        "metrics": {k: v for k, v in metrics.items() if "throttle" in k},
    }


def raw_produce(args: argparse.Namespace) -> dict:
    """One Produce request after another on one connection, never waiting for a throttle: the broker must hold
    it to the quota by itself."""
    batch = encode_batch([os.urandom(args.record_size) for _ in range(100)], None, int(time.time() * 1000))
    request = pb.ProduceRequest(
        acks=1,
        timeout_ms=10000,
        client_id=args.client_id,
        topics=[pb.ProduceTopic(name=args.topic, partitions=[pb.ProducePartition(partition=0, records=batch)])],
    )
    metadata = (("client-id", args.client_id),)
    calls = errors = throttled = 0
    throttle_ms = 0
    with grpc.insecure_channel(args.servers, options=channel_options()) as channel:
        stub = broker_pb2_grpc.BrokerStub(channel)
        start = time.perf_counter()
        deadline = start + args.seconds
        while time.perf_counter() < deadline:
            response = stub.Produce(request, timeout=30, metadata=metadata)
            calls += 1
            error = response.topics[0].partitions[0].error
            errors += error != 0
            if response.throttle_time_ms > 0:
                throttled += 1
                throttle_ms += response.throttle_time_ms
        elapsed = time.perf_counter() - start
    return {
        "calls": calls,
        "errors": errors,
        "throttled": throttled,
        "throttle_ms": throttle_ms,
        "seconds": elapsed,
        "bytes": (calls - errors) * len(batch),
        "bytes_per_s": (calls - errors) * len(batch) / elapsed,
    }


def metadata_spam(args: argparse.Namespace) -> dict:
    metadata = (("client-id", args.client_id),)
    calls = throttled = 0
    throttles: list[int] = []
    with grpc.insecure_channel(args.servers, options=channel_options()) as channel:
        stub = broker_pb2_grpc.BrokerStub(channel)
        start = time.perf_counter()
        deadline = start + args.seconds
        while time.perf_counter() < deadline:
            response = stub.Metadata(pb.MetadataRequest(), timeout=30, metadata=metadata)
            calls += 1
            if response.throttle_time_ms > 0:
                throttled += 1
                throttles.append(response.throttle_time_ms)
        elapsed = time.perf_counter() - start
    return {"calls": calls, "throttled": throttled, "max_throttle_ms": max(throttles, default=0), "seconds": elapsed}


def main() -> None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="mode", required=True)
    p = sub.add_parser("produce")
    p.add_argument("servers")
    p.add_argument("topic")
    p.add_argument("client_id")
    p.add_argument("seconds", type=float)
    p.add_argument("--rate", type=float, default=0.0)
    p.add_argument("--record-size", type=int, default=1000)
    c = sub.add_parser("consume")
    c.add_argument("servers")
    c.add_argument("topic")
    c.add_argument("client_id")
    c.add_argument("seconds", type=float)
    r = sub.add_parser("raw-produce")
    r.add_argument("servers")
    r.add_argument("topic")
    r.add_argument("client_id")
    r.add_argument("seconds", type=float)
    r.add_argument("--record-size", type=int, default=1000)
    m = sub.add_parser("metadata-spam")
    m.add_argument("servers")
    m.add_argument("client_id")
    m.add_argument("seconds", type=float)
    args = parser.parse_args()
    run = {"produce": produce, "consume": consume, "raw-produce": raw_produce, "metadata-spam": metadata_spam}
    print(json.dumps(run[args.mode](args)), flush=True)


if __name__ == "__main__":
    main()

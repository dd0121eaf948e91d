#!/usr/bin/env python3
"""Which path should followers replicate over: the gRPC Fetch they use, or the Kafka listener's Fetch with its
sendfile? A follower's fetch loop, reproduced in one asyncio process against one broker: fetch the partition from
offset 0 to its end in rounds of ``max_bytes`` (one request in flight, each answer's records taken as bytes,
ready to append, the next offset read from the last batch header), once over gRPC (the request the follower
builds, at consumer rights: the leader's read is the same) and once over a Kafka connection (Fetch v12, parsed by
hand with the listener's own primitives, as a follower on that path would). For each path and round size, the
broker's and the fetching process's CPU seconds per GB and the rounds per second, measured in the same run; both
paths read the same bytes from the page cache.

    python bench/follower_path_bench.py [--mb 200] [--rounds 2]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import struct
import sys
import tempfile
import time
from pathlib import Path

from kafka.protocol.consumer import FetchRequest

from odradek.broker.kafka.primitives import Reader
from odradek.client.admin import Admin
from odradek.client.connection import ChannelPool
from odradek.client.producer import AsyncProducer
from odradek.deploy.local import DevCluster
from odradek.proto import broker_pb2 as pb
from odradek.proto import broker_pb2_grpc

TOPIC = "replica-path"
BATCH_HEADER = struct.Struct(">qi")  # base offset, length after these 12 bytes
LAST_OFFSET_DELTA = struct.Struct(">i")  # at byte 23 of a batch
FETCH_VERSION = 12


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def next_offset(records: bytes | memoryview) -> int:
    """The offset after the last whole batch of ``records`` (what a follower's log end becomes)."""
    view, pos, end = memoryview(records), 0, -1
    while pos + 12 <= len(view):
        base, length = BATCH_HEADER.unpack_from(view, pos)
        if pos + 12 + length > len(view):
            break
        end = base + LAST_OFFSET_DELTA.unpack_from(view, pos + 23)[0] + 1
        pos += 12 + length
    if end < 0:
        raise RuntimeError("an answer without a whole batch")
    return end


async def grpc_rounds(address: str, last: int, max_bytes: int) -> tuple[int, int]:
    """(rounds, bytes) of fetching the partition over gRPC."""
    pool = ChannelPool()
    stub = broker_pb2_grpc.BrokerStub(pool.get(address))
    offset = rounds = size = 0
    try:
        while offset < last:
            request = pb.FetchRequest(
                replica_id=-1,
                max_wait_ms=500,
                min_bytes=1,
                max_bytes=max_bytes,
                topics=[
                    pb.FetchTopic(
                        name=TOPIC,
                        partitions=[pb.FetchPartition(partition=0, fetch_offset=offset, partition_max_bytes=max_bytes)],
                    )
                ],
            )
            response = await stub.Fetch(request, timeout=30)
            records = response.topics[0].partitions[0].records
            offset = next_offset(records)
            rounds, size = rounds + 1, size + len(records)
    finally:
        await pool.close()
    return rounds, size


def parse_fetch_v12(frame: memoryview) -> memoryview:
    """The records of the one partition of a Fetch v12 answer (response header v1 included)."""
    r = Reader(frame)
    r.int32()  # correlation id
    r.skip_tagged_fields()
    r.int32()  # throttle
    error = r.int16()
    r.int32()  # session id
    if error or r.compact_array_length() != 1:
        raise RuntimeError(f"fetch failed: {error}")
    r.compact_string()
    if r.compact_array_length() != 1:
        raise RuntimeError("one partition expected")
    r.int32()
    error = r.int16()
    if error:
        raise RuntimeError(f"partition error {error}")
    r.int64(), r.int64(), r.int64()  # high watermark, last stable offset, log start offset
    for _ in range(r.compact_nullable_array_length() or 0):  # aborted transactions
        r.int64(), r.int64()
        r.skip_tagged_fields()
    r.int32()  # preferred read replica
    records = r.compact_nullable_bytes()
    if records is None:
        raise RuntimeError("no records")
    return records


def fetch_template(max_bytes: int) -> tuple[bytearray, int]:
    """A framed Fetch v12 request for the partition and where its fetch offset sits: a follower on this path would
    patch the offset into a prepared request, not encode a new one per round."""
    sentinel = 0x7A7A_7A7A_7A7A_7A7A
    request = FetchRequest[FETCH_VERSION](
        replica_id=-1,
        max_wait_ms=500,
        min_bytes=1,
        max_bytes=max_bytes,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=[
            FetchRequest.FetchTopic(
                topic=TOPIC,
                partitions=[
                    FetchRequest.FetchTopic.FetchPartition(
                        partition=0,
                        current_leader_epoch=-1,
                        fetch_offset=sentinel,
                        last_fetched_epoch=-1,
                        log_start_offset=-1,
                        partition_max_bytes=max_bytes,
                    )
                ],
            )
        ],
        forgotten_topics_data=[],
        rack_id="",
    )
    request.with_header(correlation_id=1, client_id="bench")
    frame = bytearray(request.encode(version=FETCH_VERSION, header=True, framed=True))
    return frame, bytes(frame).index(struct.pack(">q", sentinel))


async def kafka_rounds(host: str, port: int, last: int, max_bytes: int) -> tuple[int, int]:
    """(rounds, bytes) of fetching the partition over a Kafka connection."""
    reader, writer = await asyncio.open_connection(host, port)
    frame, at = fetch_template(max_bytes)
    offset = rounds = size = 0
    try:
        while offset < last:
            struct.pack_into(">q", frame, at, offset)
            writer.write(frame)
            (n,) = struct.unpack(">i", await reader.readexactly(4))
            answer = await reader.readexactly(n)
            records = parse_fetch_v12(memoryview(answer))
            offset = next_offset(records)
            rounds, size = rounds + 1, size + len(records)
    finally:
        writer.close()
    return rounds, size


async def produce(servers: str, megabytes: int) -> int:
    """Writes about ``megabytes`` of 100-byte records; returns the partition's end offset."""
    config = {"bootstrap.servers": servers, "acks": "1", "linger.ms": 20, "batch.size": 1 << 20}
    async with AsyncProducer(config) as producer:
        value = b"v" * 100
        last = None
        for i in range(megabytes * 1_000_000 // 100):
            last = producer.send(TOPIC, value, partition=0)
            if i & 1023 == 1023:
                await asyncio.sleep(0)
        await producer.flush()
        assert last is not None
        return (await last).offset + 1


def measure(pid: int, run) -> tuple[float, float, float, int, int]:
    """(wall s, broker CPU s, this process's CPU s, rounds, bytes) of one read."""
    t = os.times()
    client, broker, wall = t.user + t.system, cpu_seconds(pid), time.perf_counter()
    rounds, size = asyncio.run(run())
    t = os.times()
    return time.perf_counter() - wall, cpu_seconds(pid) - broker, t.user + t.system - client, rounds, size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=int, default=200, help="megabytes in the partition (default 200)")
    parser.add_argument("--rounds", type=int, default=2, help="reads per path and size; the best is shown")
    parser.add_argument("--sizes", default="65536,1048576", help="fetch sizes in bytes (follower default 1 MiB)")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    with tempfile.TemporaryDirectory(prefix="odradek-follower-bench-", dir="/dev/shm") as tmp:
        cluster = DevCluster.create(Path(tmp), controllers=1, brokers=1, overrides={"log.segment.bytes": 1 << 30})
        cluster.start_all_and_wait(60)
        try:
            with Admin({"bootstrap.servers": cluster.admin_servers}) as admin:
                admin.create_topic(TOPIC, 1, 1)
            time.sleep(1)
            last = asyncio.run(produce(cluster.bootstrap_servers, args.mb))
            broker = next(n for n in cluster.nodes if n.kafka_port)
            address = f"{broker.host}:{broker.broker_port}"
            print(f"one broker, one partition of {last:,} records (~{args.mb} MB), read from offset 0 to the end")
            print(f"{'path':<8}{'round':>10}{'rounds/s':>11}{'MB/s':>8}{'broker s/GB':>13}{'fetcher s/GB':>14}")
            for size in sizes:
                best: dict[str, tuple[float, float, float, int, int]] = {}
                for i in range(args.rounds):
                    for path in ("grpc", "kafka") if i % 2 == 0 else ("kafka", "grpc"):
                        if path == "grpc":
                            m = measure(broker.pid, lambda size=size: grpc_rounds(address, last, size))
                        else:
                            m = measure(
                                broker.pid, lambda size=size: kafka_rounds(broker.host, broker.kafka_port, last, size)
                            )
                        if path not in best or m[0] < best[path][0]:
                            best[path] = m
                for path, (wall, broker_cpu, client_cpu, rounds, total) in best.items():
                    gb = total / 1e9
                    print(
                        f"{path:<8}{size:>10,}{rounds / wall:>11,.0f}{total / wall / 1e6:>8,.0f}"
                        f"{broker_cpu / gb:>13.2f}{client_cpu / gb:>14.2f}"
                    )
                g, k = best["grpc"], best["kafka"]
                print(
                    f"  kafka / grpc at {size:,} B: wall {k[0] / g[0]:.2f}, broker CPU {k[1] / g[1]:.2f}, "
                    f"fetcher CPU {k[2] / g[2]:.2f}, both {(k[1] + k[2]) / (g[1] + g[2]):.2f}"
                )
        finally:
            cluster.stop_all(timeout=20)
    sys.stdout.flush()


if __name__ == "__main__":
    main()

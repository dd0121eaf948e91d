#!/usr/bin/env python3
"""Transport efficiency of the data plane (issue 4): Produce and Fetch RPCs against a real broker, each as a
ratio to a raw-bytes gRPC server (generic handlers, no protobuf) moving the same payload sizes in the same run.

Baselines, per payload size S: raw *sink* (S bytes in, 8 out: the shape of a produce), raw *source* (8 in, S out:
the shape of a fetch), and raw *echo* (S in, S out). Both servers run in their own processes with the same
malloc tuning and uvloop; the client keeps a few requests in flight. Prints one line per figure.

Produce also gets a fourth baseline, raw sink *to file*: the raw sink appending each request's bytes to a new file
in the directory of the broker's logs. A produce writes its records to the log, and where the machine gives fresh
memory slowly (a VM whose kernel returns freed pages to the host, which fault in again on the next write) that
write, not the transport, bounds a produce; that line shows how much of the gap to the raw sink is the write.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import grpc

from odradek.client.admin import Admin
from odradek.client.connection import channel_options
from odradek.client.record.builder import encode_batch
from odradek.deploy.local import DevCluster, free_port
from odradek.deploy.process import tuned_environment
from odradek.proto import broker_pb2 as pb
from odradek.proto import broker_pb2_grpc

SIZES = (64 * 1024, 256 * 1024, 1024 * 1024)
BATCH = 16 * 1024
IN_FLIGHT = 4
SECONDS = 2.0

RAW_SERVER = """
import asyncio, sys, grpc, uvloop
from odradek.client.connection import channel_options
size = {}
files = 0
out = None
async def sink(request, context):
    return b"ok-ok-ok"
async def sink_file(request, context):
    out.write(request)
    return b"ok-ok-ok"
async def new_file(request, context):
    # a new file each time, the old ones kept: every write takes fresh memory, as the broker's log does
    global out, files
    files += 1
    out = open(f"{sys.argv[2]}-{files}", "ab", buffering=0)
    return b"ok"
async def source(request, context):
    n = int(request)
    return size.setdefault(n, bytes(n))
async def echo(request, context):
    return request
async def main(port):
    server = grpc.aio.server(options=channel_options())
    handlers = {name: grpc.unary_unary_rpc_method_handler(fn) for name, fn in
                (("Sink", sink), ("SinkFile", sink_file), ("NewFile", new_file), ("Source", source), ("Echo", echo))}
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("raw.Raw", handlers),))
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    print("ready", flush=True)
    await server.wait_for_termination()
with asyncio.Runner(loop_factory=uvloop.new_event_loop) as r:
    r.run(main(int(sys.argv[1])))
"""


async def rate(call, payload_bytes: int) -> float:
    """MB/s of payload moved by IN_FLIGHT concurrent callers for SECONDS."""
    deadline = time.perf_counter() + SECONDS
    done = 0

    async def worker() -> None:
        nonlocal done
        while time.perf_counter() < deadline:
            await call()
            done += 1

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(IN_FLIGHT)))
    return done * payload_bytes / (time.perf_counter() - start) / 1e6


def produce_request(topic: str, size: int, partitions: int) -> pb.ProduceRequest:
    batch = encode_batch([bytes(100)] * (BATCH // 110))
    per_partition = max(1, size // partitions // len(batch))
    parts = [
        pb.ProducePartition(partition=p, records=batch * per_partition)
        for p in range(min(partitions, size // len(batch)))
    ]
    return pb.ProduceRequest(acks=1, timeout_ms=30000, topics=[pb.ProduceTopic(name=topic, partitions=parts)])


async def measure(raw_port: int, broker: str, topic: str, partitions: int) -> None:
    options = channel_options()
    async with (
        grpc.aio.insecure_channel(f"127.0.0.1:{raw_port}", options=options) as raw,
        grpc.aio.insecure_channel(broker, options=options) as data,
    ):
        sink = raw.unary_unary("/raw.Raw/Sink")
        sink_file = raw.unary_unary("/raw.Raw/SinkFile")
        new_file = raw.unary_unary("/raw.Raw/NewFile")
        source = raw.unary_unary("/raw.Raw/Source")
        echo = raw.unary_unary("/raw.Raw/Echo")
        stub = broker_pb2_grpc.BrokerStub(data)
        for size in SIZES:
            request = produce_request(topic, size, partitions)
            payload = sum(len(p.records) for t in request.topics for p in t.partitions)
            blob = bytes(payload)
            produce = await rate(lambda request=request: stub.Produce(request), payload)
            raw_sink = await rate(lambda blob=blob: sink(blob), payload)
            raw_echo = await rate(lambda blob=blob: echo(blob), payload)
            await new_file(b"")
            raw_file = await rate(lambda blob=blob: sink_file(blob), payload)
            print(
                f"produce {payload // 1024} KiB/request: {produce:.0f} MB/s = {produce / raw_sink:.2f} of raw sink "
                f"({raw_sink:.0f} MB/s), {produce / raw_echo:.2f} of raw echo ({raw_echo:.0f} MB/s) (target >= 0.8); "
                f"{produce / raw_file:.2f} of raw sink to file ({raw_file:.0f} MB/s)",
                flush=True,
            )
            fetch = pb.FetchRequest(
                replica_id=-1,
                max_wait_ms=0,
                min_bytes=1,
                max_bytes=payload,
                topics=[
                    pb.FetchTopic(
                        name=topic,
                        partitions=[
                            pb.FetchPartition(
                                partition=p,
                                fetch_offset=0,
                                partition_max_bytes=payload // partitions,
                                current_leader_epoch=-1,
                            )
                            for p in range(partitions)
                        ],
                    )
                ],
            )
            fetched = sum(len(p.records) for t in (await stub.Fetch(fetch)).topics for p in t.partitions)
            fetch_rate = await rate(lambda fetch=fetch: stub.Fetch(fetch), fetched)
            want = str(fetched).encode()
            raw_source = await rate(lambda want=want: source(want), fetched)
            raw_echo = await rate(lambda blob=bytes(fetched): echo(blob), fetched)
            print(
                f"fetch {fetched // 1024} KiB/response: {fetch_rate:.0f} MB/s = {fetch_rate / raw_source:.2f} of raw "
                f"source ({raw_source:.0f} MB/s), {fetch_rate / raw_echo:.2f} of raw echo ({raw_echo:.0f} MB/s) "
                "(target >= 0.8)",
                flush=True,
            )


def main() -> None:
    partitions = 16
    # The broker's logs live on tmpfs: this bench measures the transport, and this machine's disk sustains only
    # ~200 MB/s of writes (bench/storage_bench.py measures the log against raw file I/O on its own).
    shm = "/dev/shm" if os.path.isdir("/dev/shm") else None
    with tempfile.TemporaryDirectory(dir=shm) as tmp:
        raw_port = free_port()
        raw = subprocess.Popen(
            [sys.executable, "-c", RAW_SERVER, str(raw_port), str(Path(tmp) / "raw-sink")],
            stdout=subprocess.PIPE,
            env=tuned_environment(),
        )
        cluster = DevCluster.create(Path(tmp), controllers=1, brokers=1, overrides={"log.segment.bytes": 1 << 30})
        try:
            assert raw.stdout.readline().strip() == b"ready"
            cluster.start_all()
            asyncio.run(cluster.wait_ready(60))
            with Admin({"bootstrap.servers": cluster.admin_servers}) as admin:
                admin.create_topic("transport", partitions, 1)
            time.sleep(1.0)  # let the broker create the partitions
            asyncio.run(measure(raw_port, cluster.bootstrap_servers, "transport", partitions))
        finally:
            raw.terminate()
            cluster.stop_all(timeout=10)


if __name__ == "__main__":
    os.environ.update(tuned_environment())  # the client side gets the same malloc tuning via re-exec below
    if "ODRADEK_BENCH_CHILD" not in os.environ:
        os.execve(sys.executable, [sys.executable, *sys.argv], {**tuned_environment(), "ODRADEK_BENCH_CHILD": "1"})
    main()

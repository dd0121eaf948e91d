"""A fake odradek cluster for client tests: real ``Broker`` gRPC servers on 127.0.0.1 over an in-memory log.

Each fake broker is a grpc.aio server implementing Metadata, Produce, Fetch (with long poll) and ListOffsets the way
the real broker's data plane does: per-partition error codes, NOT_LEADER_OR_FOLLOWER with a
``current_leader`` hint, offsets assigned by rewriting each batch's base offset, whole batches on fetch, the high
watermark as the end. All brokers share one cluster state and run on their own thread's event loop, so tests can
drive synchronous clients. Tests steer it: move leaders, inject error codes, truncate the log start, throttle
answers, and count the requests each broker served (with their arrival times and client-id metadata).
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import itertools
import threading
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any

import grpc

from odradek.client.background import BackgroundLoop
from odradek.client.connection import channel_options
from odradek.client.errors import ErrorCode, OdradekError
from odradek.client.record.batch import Record, read_batches
from odradek.client.record.header import iter_batches, set_base_offset, set_partition_leader_epoch
from odradek.proto import broker_pb2 as pb
from odradek.proto import broker_pb2_grpc, common_pb2

EARLIEST, LATEST = -2, -1


@dataclass
class FakePartition:
    leader: int
    epoch: int = 0
    batches: list[bytes] = field(default_factory=list)  # as stored: base offsets assigned
    offsets: list[tuple[int, int]] = field(default_factory=list)  # (base offset, next offset) of each batch
    log_start: int = 0
    end: int = 0  # log end offset = high watermark (no replication here)


class FakeCluster:
    def __init__(self, brokers: int = 3, message_max_bytes: int = 1_048_588) -> None:
        self.lock = threading.Lock()
        self.topics: dict[str, list[FakePartition]] = {}
        self.message_max_bytes = message_max_bytes
        self.leader_hints = True  # send current_leader with NOT_LEADER_OR_FOLLOWER
        self.stale_metadata: dict[tuple[str, int], int] = {}  # Metadata answers with this leader instead
        self.produce_errors: dict[tuple[str, int], deque[int]] = {}
        self.fetch_errors: dict[tuple[str, int], deque[int]] = {}
        self.list_offsets_errors: dict[tuple[str, int], deque[int]] = {}  # one code per partition asked
        self.requests: Counter[tuple[int, str]] = Counter()  # (node, rpc) -> count
        self.last_request: dict[str, Any] = {}  # rpc -> the last request of that kind
        self.produce_delay = 0.0  # seconds each Produce takes before answering
        self.next_producer_id = 999
        self.produce_in_flight: Counter[int] = Counter()  # per node, and per (topic, partition) below
        self.max_produce_in_flight: Counter[int] = Counter()
        self.partition_in_flight: Counter[tuple[str, int]] = Counter()
        self.max_partition_in_flight = 0
        self.produce_log: list[tuple[int, int, list[tuple[str, int, int]]]] = []  # (node, acks, [(t, p, batches)])
        self.fetch_log: list[tuple[int, list[tuple[str, int, int]]]] = []  # (node, [(topic, partition, offset)])
        self.throttle_ms: dict[tuple[int, str], int] = {}  # (node, rpc) -> throttle_time_ms of every answer
        self.arrivals: list[tuple[int, str, float]] = []  # (node, rpc, time.monotonic()) of each request
        self.answers: list[tuple[int, str, float]] = []  # (node, rpc, time.monotonic()) of each answer
        self.client_ids: dict[str, list[str | None]] = {}  # rpc -> the client-id metadata of each call
        self.loop = BackgroundLoop("fake-cluster")
        self.ports: dict[int, int] = {}
        self._servers: list[grpc.aio.Server] = []
        self._data: asyncio.Event | None = None
        self.loop.run(self._start(brokers))

    async def _start(self, brokers: int) -> None:
        self._data = asyncio.Event()
        for node in range(brokers):
            server = grpc.aio.server(options=channel_options())
            broker_pb2_grpc.add_BrokerServicer_to_server(FakeBroker(self, node), server)
            self.ports[node] = server.add_insecure_port("127.0.0.1:0")
            await server.start()
            self._servers.append(server)

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{port}" for port in self.ports.values())

    def stop(self) -> None:
        async def stop_all() -> None:
            await asyncio.gather(*(s.stop(None) for s in self._servers))

        self.loop.run(stop_all())
        self.loop.stop()

    # ---- steering ----

    def create_topic(self, name: str, partitions: int = 3) -> None:
        with self.lock:
            self.topics[name] = [FakePartition(leader=p % len(self.ports)) for p in range(partitions)]

    def move_leader(self, topic: str, partition: int, leader: int) -> None:
        with self.lock:
            p = self.topics[topic][partition]
            p.leader = leader
            p.epoch += 1

    def inject_produce_error(self, topic: str, partition: int, *codes: int) -> None:
        with self.lock:
            self.produce_errors.setdefault((topic, partition), deque()).extend(codes)

    def inject_fetch_error(self, topic: str, partition: int, *codes: int) -> None:
        with self.lock:
            self.fetch_errors.setdefault((topic, partition), deque()).extend(codes)

    def inject_list_offsets_error(self, topic: str, partition: int, *codes: int) -> None:
        with self.lock:
            self.list_offsets_errors.setdefault((topic, partition), deque()).extend(codes)

    def append(self, topic: str, partition: int, records: bytes) -> int:
        """Append batches as a producer would; return the first offset."""
        with self.lock:
            base = self._append(self.topics[topic][partition], records)
        self.loop.loop.call_soon_threadsafe(self._notify)
        return base

    def truncate_start(self, topic: str, partition: int, log_start: int) -> None:
        """Drop whole batches below ``log_start`` (retention), advancing the log start offset."""
        with self.lock:
            p = self.topics[topic][partition]
            keep = [i for i, (_, next_offset) in enumerate(p.offsets) if next_offset > log_start]
            p.batches = [p.batches[i] for i in keep]
            p.offsets = [p.offsets[i] for i in keep]
            p.log_start = log_start

    def records(self, topic: str, partition: int) -> list[Record]:
        with self.lock:
            data = b"".join(self.topics[topic][partition].batches)
        return [r for batch in read_batches(data) for r in batch.records()]

    def note(self, node: int, rpc: str, context: Any) -> None:
        """A request arrived: when, and the client-id metadata it carried."""
        self.arrivals.append((node, rpc, time.monotonic()))
        self.client_ids.setdefault(rpc, []).append(dict(context.invocation_metadata()).get("client-id"))

    def answer(self, node: int, rpc: str, response: Any) -> Any:
        """Send ``response`` with the throttle set for (node, rpc), noting when."""
        response.throttle_time_ms = self.throttle_ms.get((node, rpc), 0)
        self.answers.append((node, rpc, time.monotonic()))
        return response

    def rpc_count(self, rpc: str, node: int | None = None) -> int:
        return sum(n for (nd, name), n in self.requests.items() if name == rpc and node in (None, nd))

    # ---- the log ----

    def _append(self, p: FakePartition, records: bytes) -> int:
        headers = iter_batches(records, self.message_max_bytes)
        base = p.end
        for header in headers:
            batch = bytearray(records[header.position : header.position + header.size])
            set_base_offset(batch, 0, p.end)
            set_partition_leader_epoch(batch, 0, p.epoch)
            p.batches.append(bytes(batch))
            p.offsets.append((p.end, p.end + header.last_offset_delta + 1))
            p.end += header.last_offset_delta + 1
        return base

    def _notify(self) -> None:
        assert self._data is not None
        self._data.set()
        self._data = asyncio.Event()

    async def wait_for_data(self, timeout: float) -> None:
        assert self._data is not None
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._data.wait(), timeout)


class FakeBroker(broker_pb2_grpc.BrokerServicer):
    def __init__(self, cluster: FakeCluster, node: int) -> None:
        self.cluster = cluster
        self.node = node

    def _partition(self, topic: str, partition: int) -> FakePartition | None:
        partitions = self.cluster.topics.get(topic)
        return partitions[partition] if partitions is not None and 0 <= partition < len(partitions) else None

    def _leader_error(self, topic: str, partition: int, p: FakePartition | None, injected: dict) -> int:
        """The error for a request to this partition on this broker, NONE if it may proceed."""
        if p is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        queue = injected.get((topic, partition))
        if queue:
            return queue.popleft()
        return ErrorCode.NONE if p.leader == self.node else ErrorCode.NOT_LEADER_OR_FOLLOWER

    def _hint(self, p: FakePartition | None, error: int) -> common_pb2.LeaderHint | None:
        if p is None or not self.cluster.leader_hints or error != ErrorCode.NOT_LEADER_OR_FOLLOWER:
            return None
        return common_pb2.LeaderHint(leader_id=p.leader, leader_epoch=p.epoch)

    async def Metadata(self, request, context):
        cluster = self.cluster
        cluster.requests[self.node, "Metadata"] += 1
        cluster.last_request["Metadata"] = request
        cluster.note(self.node, "Metadata", context)
        with cluster.lock:
            names = list(request.topics) or sorted(cluster.topics)
            topics = []
            for name in names:
                partitions = cluster.topics.get(name)
                if partitions is None:
                    topics.append(pb.TopicMetadata(name=name, error=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                    continue
                metas = []
                for i, p in enumerate(partitions):
                    stale = cluster.stale_metadata.get((name, i))
                    leader, epoch = (stale, p.epoch - 1) if stale is not None else (p.leader, p.epoch)
                    metas.append(
                        pb.PartitionMetadata(
                            partition=i, leader=leader, leader_epoch=epoch, replicas=[leader], isr=[leader]
                        )
                    )
                topics.append(pb.TopicMetadata(name=name, topic_id=name.encode(), partitions=metas))
        return pb.MetadataResponse(
            brokers=[common_pb2.Node(node_id=n, host="127.0.0.1", port=port) for n, port in cluster.ports.items()],
            cluster_id="fake",
            controller_id=0,
            topics=topics,
        )

    async def InitProducerId(self, request, context):
        cluster = self.cluster
        cluster.requests[self.node, "InitProducerId"] += 1
        cluster.note(self.node, "InitProducerId", context)
        with cluster.lock:
            cluster.next_producer_id += 1
            return pb.InitProducerIdResponse(producer_id=cluster.next_producer_id, producer_epoch=0)

    async def Produce(self, request, context):
        cluster = self.cluster
        cluster.requests[self.node, "Produce"] += 1
        cluster.last_request["Produce"] = request
        cluster.note(self.node, "Produce", context)
        partitions = [(t.name, p.partition) for t in request.topics for p in t.partitions]
        cluster.produce_in_flight[self.node] += 1
        cluster.max_produce_in_flight[self.node] = max(
            cluster.max_produce_in_flight[self.node], cluster.produce_in_flight[self.node]
        )
        cluster.partition_in_flight.update(partitions)
        cluster.max_partition_in_flight = max(cluster.max_partition_in_flight, *cluster.partition_in_flight.values())
        try:
            if cluster.produce_delay:
                await asyncio.sleep(cluster.produce_delay)
            return cluster.answer(self.node, "Produce", self._produce(request))
        finally:
            cluster.produce_in_flight[self.node] -= 1
            cluster.partition_in_flight.subtract(partitions)

    def _produce(self, request) -> pb.ProduceResponse:
        cluster = self.cluster
        logged = []
        topics = []
        with cluster.lock:
            for t in request.topics:
                results = []
                for pp in t.partitions:
                    p = self._partition(t.name, pp.partition)
                    error = self._leader_error(t.name, pp.partition, p, cluster.produce_errors)
                    base = -1
                    if error == ErrorCode.NONE:
                        assert p is not None
                        records = pp.records  # protobuf copies a bytes field on every access
                        try:
                            base = cluster._append(p, records)
                            logged.append((t.name, pp.partition, len(iter_batches(records))))
                        except OdradekError as e:
                            error = e.code
                    r = pb.ProducePartitionResponse(
                        partition=pp.partition, error=error, base_offset=base, log_append_time_ms=-1
                    )
                    hint = self._hint(p, error)
                    if hint is not None:
                        r.current_leader.CopyFrom(hint)
                    results.append(r)
                topics.append(pb.ProduceTopicResponse(name=t.name, partitions=results))
            cluster.produce_log.append((self.node, request.acks, logged))
        if logged:
            cluster._notify()
        return pb.ProduceResponse(topics=topics)

    def _read(self, request) -> tuple[pb.FetchResponse, int]:
        cluster = self.cluster
        total = 0
        budget = request.max_bytes or 1 << 62
        topics = []
        with cluster.lock:
            for t in request.topics:
                results = []
                for fp in t.partitions:
                    p = self._partition(t.name, fp.partition)
                    error = self._leader_error(t.name, fp.partition, p, cluster.fetch_errors)
                    if error == ErrorCode.NONE and p is not None and not p.log_start <= fp.fetch_offset <= p.end:
                        error = ErrorCode.OFFSET_OUT_OF_RANGE
                    if error != ErrorCode.NONE:
                        r = pb.FetchPartitionResponse(partition=fp.partition, error=error, high_watermark=-1)
                        hint = self._hint(p, error)
                        if hint is not None:
                            r.current_leader.CopyFrom(hint)
                        results.append(r)
                        total += 1
                        continue
                    assert p is not None
                    chosen: list[bytes] = []
                    size = 0
                    limit = min(fp.partition_max_bytes or 1 << 62, budget)
                    first = bisect.bisect_right(p.offsets, fp.fetch_offset, key=lambda o: o[1])
                    for batch in itertools.islice(p.batches, first, None):
                        if chosen and size + len(batch) > limit:
                            break
                        chosen.append(batch)
                        size += len(batch)
                    total += size
                    budget = max(1, budget - size)
                    results.append(
                        pb.FetchPartitionResponse(
                            partition=fp.partition,
                            high_watermark=p.end,
                            last_stable_offset=p.end,
                            log_start_offset=p.log_start,
                            log_end_offset=p.end,
                            records=b"".join(chosen),
                        )
                    )
                topics.append(pb.FetchTopicResponse(name=t.name, partitions=results))
        return pb.FetchResponse(topics=topics), total

    async def Fetch(self, request, context):
        self.cluster.requests[self.node, "Fetch"] += 1
        self.cluster.last_request["Fetch"] = request
        self.cluster.note(self.node, "Fetch", context)
        asked = [(t.name, p.partition, p.fetch_offset) for t in request.topics for p in t.partitions]
        self.cluster.fetch_log.append((self.node, asked))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + request.max_wait_ms / 1000
        while True:
            response, total = self._read(request)
            remaining = deadline - loop.time()
            if total >= max(1, request.min_bytes) or remaining <= 0:
                return self.cluster.answer(self.node, "Fetch", response)
            await self.cluster.wait_for_data(remaining)

    async def ListOffsets(self, request, context):
        cluster = self.cluster
        cluster.requests[self.node, "ListOffsets"] += 1
        cluster.note(self.node, "ListOffsets", context)
        topics = []
        with cluster.lock:
            for t in request.topics:
                results = []
                for lp in t.partitions:
                    p = self._partition(t.name, lp.partition)
                    error = self._leader_error(t.name, lp.partition, p, cluster.list_offsets_errors)
                    offset = -1
                    if error == ErrorCode.NONE:
                        assert p is not None
                        offset = {EARLIEST: p.log_start, LATEST: p.end}.get(lp.timestamp, -1)
                    r = pb.ListOffsetsPartitionResponse(partition=lp.partition, error=error, offset=offset)
                    hint = self._hint(p, error)
                    if hint is not None:
                        r.current_leader.CopyFrom(hint)
                    results.append(r)
                topics.append(pb.ListOffsetsTopicResponse(name=t.name, partitions=results))
        return cluster.answer(self.node, "ListOffsets", pb.ListOffsetsResponse(topics=topics))

"""A fetch on the Kafka listener, whose record data the broker sends from the segment file with sendfile, carries
the same bytes as the gRPC listener's fetch, which reads them into the response, and as the leader's segment file
itself: at the start of the log, at a segment's base offset, inside a batch in the middle of a segment and at the
last batch, for fetch sizes below a batch, inside a segment and beyond it."""

from __future__ import annotations

import socket
import struct
import uuid
from pathlib import Path

import grpc
import pytest
from kafka.protocol.consumer import FetchRequest, FetchResponse

from odradek.client import Admin, Producer
from odradek.deploy.local import DevCluster
from odradek.proto import broker_pb2, broker_pb2_grpc

pytestmark = pytest.mark.integration

SEGMENT_BYTES = 4096
BATCHES = 40
PER_BATCH = 8
MAX_BYTES = [1, 1500, 1 << 20]  # less than one batch (one whole batch comes anyway), a few batches, no limit
BATCH_HEADER = struct.Struct(">qi")  # base offset, batch length (after these 12 bytes)
LAST_OFFSET_DELTA_AT = 23  # from the batch's start


def batches(data: bytes) -> list[tuple[int, int, int]]:
    """(base offset, last offset, byte position) of each whole record batch in ``data``."""
    out, pos = [], 0
    while pos + 12 <= len(data):
        base, length = BATCH_HEADER.unpack_from(data, pos)
        if pos + 12 + length > len(data):
            break
        (delta,) = struct.unpack_from(">i", data, pos + LAST_OFFSET_DELTA_AT)
        out.append((base, base + delta, pos))
        pos += 12 + length
    return out


@pytest.fixture(scope="module")
def log(cluster: DevCluster, admin: Admin) -> tuple[str, int, dict[int, bytes]]:
    """A one-partition topic of several small segments, each batch of PER_BATCH records: its name, its leader and
    the leader's segment files (base offset -> content)."""
    name = f"zc-{uuid.uuid4().hex[:8]}"
    admin.create_topic(name, 1, 3, {"segment.bytes": str(SEGMENT_BYTES)})
    with Producer({"bootstrap.servers": cluster.bootstrap_servers, "linger.ms": 1000}) as producer:
        for b in range(BATCHES):
            for r in range(PER_BATCH):
                producer.send(name, b"value-%d-%d-" % (b, r) + b"x" * 60, key=b"k%d" % r, partition=0)
            producer.flush(30)  # one batch per flush; acks=all, so every batch is below the high watermark
    leader = admin.describe_topic(name).partitions[0].leader
    files = sorted(cluster.node(leader).directory.rglob(f"{name}-0/*.log"))
    segments = {int(Path(f).stem): f.read_bytes() for f in files}
    assert len(segments) >= 4, sorted(segments)
    return name, leader, segments


def kafka_fetch(port: int, topic: str, offset: int, max_bytes: int, version: int) -> bytes:
    """The records bytes of a Fetch request sent over a plain socket to the Kafka listener."""
    request = FetchRequest[version](
        replica_id=-1,
        max_wait_ms=0,
        min_bytes=0,
        max_bytes=max_bytes,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=[
            FetchRequest.FetchTopic(
                topic=topic,
                partitions=[
                    FetchRequest.FetchTopic.FetchPartition(
                        partition=0,
                        current_leader_epoch=-1,
                        fetch_offset=offset,
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
    request.with_header(correlation_id=offset, client_id="zero-copy-test")
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(request.encode(version=version, header=True, framed=True))
        (size,) = struct.unpack(">i", recv_exactly(s, 4))
        answer = recv_exactly(s, size)
    response = FetchResponse.decode(answer, version=version, header=True)
    assert response.header.correlation_id == offset
    ((t,),) = [response.responses]
    ((p,),) = [t.partitions]
    assert (p.partition_index, p.error_code) == (0, 0)
    return bytes(p.records or b"")


def recv_exactly(sock: socket.socket, n: int) -> bytes:
    data = bytearray()
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed by the broker")
        data += chunk
    return bytes(data)


def grpc_fetch(port: int, topic: str, offset: int, max_bytes: int) -> bytes:
    request = broker_pb2.FetchRequest(
        replica_id=-1,
        max_wait_ms=0,
        min_bytes=0,
        max_bytes=max_bytes,
        topics=[
            broker_pb2.FetchTopic(
                name=topic,
                partitions=[
                    broker_pb2.FetchPartition(
                        partition=0,
                        current_leader_epoch=-1,
                        fetch_offset=offset,
                        last_fetched_epoch=-1,
                        log_start_offset=-1,
                        partition_max_bytes=max_bytes,
                    )
                ],
            )
        ],
        client_id="zero-copy-test",
    )
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        response = broker_pb2_grpc.BrokerStub(channel).Fetch(request, timeout=10)
    ((t,),) = [response.topics]
    ((p,),) = [t.partitions]
    assert (p.partition, p.error) == (0, 0)
    return p.records


def fetch_offsets(segments: dict[int, bytes]) -> list[int]:
    """The log's first offset, a middle segment's base offset, an offset inside a batch in the middle of a segment,
    and the last batch's base offset and its last offset."""
    bases = sorted(segments)
    middle = bases[len(bases) // 2]
    inside = batches(segments[middle])[len(batches(segments[middle])) // 2]
    last = batches(segments[bases[-1]])[-1]
    return [bases[0], middle, inside[0] + PER_BATCH // 2, last[0], last[1]]


@pytest.mark.parametrize("version", [4, 12], ids=["fetch-v4", "fetch-v12-flexible"])
def test_sendfile_fetch_is_byte_identical_to_grpc_and_to_the_segment(
    cluster: DevCluster, log: tuple[str, int, dict[int, bytes]], version: int
) -> None:
    name, leader, segments = log
    node = cluster.node(leader)
    for offset in fetch_offsets(segments):
        base = max(b for b in segments if b <= offset)
        content = segments[base]
        position = next(pos for first, last, pos in batches(content) if first <= offset <= last)
        for max_bytes in MAX_BYTES:
            over_kafka = kafka_fetch(node.kafka_port, name, offset, max_bytes, version)
            over_grpc = grpc_fetch(node.broker_port, name, offset, max_bytes)
            assert over_kafka == over_grpc, (offset, max_bytes)
            # Both are the file's bytes from the batch holding the offset, never beyond the segment.
            assert len(over_kafka) > 0 and over_kafka == content[position : position + len(over_kafka)]
            first, last, _ = batches(over_kafka)[0]
            assert first <= offset <= last, (offset, first, last)

"""The broker data plane over raw gRPC: produce, fetch (long poll), list offsets, and typed errors."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import grpc
import pytest
from crc32c import crc32c

from odradek.client.admin import Admin
from odradek.client.errors import ErrorCode
from odradek.client.record.batch import read_batches
from odradek.client.record.builder import encode_batch
from odradek.deploy.local import DevCluster
from odradek.proto import broker_pb2 as pb
from odradek.proto import broker_pb2_grpc

from .conftest import start_cluster

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def plane(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[DevCluster, dict[int, broker_pb2_grpc.BrokerStub]]]:
    cluster = start_cluster(tmp_path_factory.mktemp("plane"), controllers=1, brokers=2, **{"message.max.bytes": 65536})
    with Admin({"bootstrap.servers": cluster.admin_servers}) as admin:
        admin.create_topic("data", 2, 1)
        admin.create_topic("small", 1, 1, {"max.message.bytes": "2000"})
    channels = {n.node_id: grpc.insecure_channel(f"127.0.0.1:{n.broker_port}") for n in cluster.nodes if n.broker_port}
    stubs = {node: broker_pb2_grpc.BrokerStub(ch) for node, ch in channels.items()}
    yield cluster, stubs
    for ch in channels.values():
        ch.close()
    cluster.stop_all(timeout=10)


def leaders(stub: broker_pb2_grpc.BrokerStub) -> dict[int, tuple[int, int]]:
    deadline = time.monotonic() + 10
    while True:
        md = stub.Metadata(pb.MetadataRequest(topics=["data"]), timeout=5)
        found = {p.partition: (p.leader, p.leader_epoch) for p in md.topics[0].partitions if p.leader >= 0}
        if len(found) == 2 or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


def produce(stub, partition: int, records: bytes, acks: int = 1) -> pb.ProducePartitionResponse:
    request = pb.ProduceRequest(
        acks=acks,
        timeout_ms=5000,
        topics=[pb.ProduceTopic(name="data", partitions=[pb.ProducePartition(partition=partition, records=records)])],
    )
    return stub.Produce(request, timeout=10).topics[0].partitions[0]


def fetch(stub, partition: int, offset: int, max_wait_ms: int = 0, epoch: int = -1) -> pb.FetchPartitionResponse:
    request = pb.FetchRequest(
        replica_id=-1,
        max_wait_ms=max_wait_ms,
        min_bytes=1,
        max_bytes=1 << 20,
        topics=[
            pb.FetchTopic(
                name="data",
                partitions=[
                    pb.FetchPartition(
                        partition=partition,
                        fetch_offset=offset,
                        partition_max_bytes=1 << 20,
                        current_leader_epoch=epoch,
                    )
                ],
            )
        ],
    )
    return stub.Fetch(request, timeout=10).topics[0].partitions[0]


def test_produce_fetch_and_list_offsets_round_trip(plane) -> None:
    _, stubs = plane
    leader, _epoch = leaders(stubs[2])[0]
    stub = stubs[leader]
    first = produce(stub, 0, encode_batch([b"a", b"b", b"c"], keys=[b"k1", None, b"k3"]))
    second = produce(stub, 0, encode_batch([b"d"], compression="zstd"))
    assert first.error == second.error == ErrorCode.NONE
    assert second.base_offset == first.base_offset + 3
    answer = fetch(stub, 0, first.base_offset + 1)
    records = [r for b in read_batches(answer.records) for r in b.records()]
    assert [r.value for r in records] == [b"a", b"b", b"c", b"d"]  # whole batches, from the one holding offset
    assert [r.offset for r in records] == list(range(first.base_offset, first.base_offset + 4))
    assert answer.high_watermark == first.base_offset + 4
    offsets = (
        stub.ListOffsets(
            pb.ListOffsetsRequest(
                topics=[
                    pb.ListOffsetsTopic(
                        name="data",
                        partitions=[pb.ListOffsetsPartition(partition=0, timestamp=t) for t in (-2, -1)],
                    )
                ]
            ),
            timeout=5,
        )
        .topics[0]
        .partitions
    )
    assert [o.offset for o in offsets] == [0, answer.high_watermark]


def test_fetch_long_polls_until_data_arrives(plane) -> None:
    _, stubs = plane
    leader, _ = leaders(stubs[2])[1]
    stub = stubs[leader]
    end = fetch(stub, 1, 0).high_watermark
    threading.Timer(0.3, lambda: produce(stub, 1, encode_batch([b"late"]))).start()
    started = time.monotonic()
    answer = fetch(stub, 1, end, max_wait_ms=5000)
    waited = time.monotonic() - started
    assert 0.25 <= waited < 3.0
    assert [r.value for b in read_batches(answer.records) for r in b.records()] == [b"late"]
    started = time.monotonic()
    empty = fetch(stub, 1, end + 1, max_wait_ms=300)
    assert empty.records == b"" and 0.25 <= time.monotonic() - started < 3.0


def test_bad_requests_get_typed_errors_and_leave_the_log_unchanged(plane) -> None:
    _, stubs = plane
    where = leaders(stubs[2])
    leader, epoch = where[0]
    other = next(n for n in stubs if n != leader)
    stub = stubs[leader]
    before = fetch(stub, 0, 0).high_watermark

    corrupt = bytearray(encode_batch([b"x"]))
    corrupt[-1] ^= 0xFF
    assert produce(stub, 0, bytes(corrupt)).error == ErrorCode.CORRUPT_MESSAGE
    wrong_count = bytearray(encode_batch([b"x", b"y"]))
    wrong_count[23:27] = (2).to_bytes(4, "big")  # last offset delta, consistent with the claimed count
    wrong_count[57:61] = (3).to_bytes(4, "big")  # records_count: three, but two records follow
    wrong_count[17:21] = crc32c(bytes(wrong_count[21:])).to_bytes(4, "big")  # a valid CRC: only the count is off
    assert produce(stub, 0, bytes(wrong_count)).error == ErrorCode.CORRUPT_MESSAGE
    assert produce(stub, 0, encode_batch([bytes(70_000)])).error == ErrorCode.MESSAGE_TOO_LARGE
    assert produce(stub, 9, encode_batch([b"x"])).error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert produce(stub, 0, encode_batch([b"x"]), acks=2).error == ErrorCode.INVALID_REQUIRED_ACKS
    assert fetch(stub, 0, 0).high_watermark == before  # nothing above was appended

    for answer in (produce(stubs[other], 0, encode_batch([b"x"])), fetch(stubs[other], 0, 0)):
        assert answer.error == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert (answer.current_leader.leader_id, answer.current_leader.leader_epoch) == (leader, epoch)
    assert fetch(stub, 0, before + 100).error == ErrorCode.OFFSET_OUT_OF_RANGE
    assert fetch(stub, 0, 0, epoch=epoch + 1).error == ErrorCode.UNKNOWN_LEADER_EPOCH
    missing = stub.Metadata(pb.MetadataRequest(topics=["nope"]), timeout=5).topics[0]
    assert missing.error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_a_topic_max_message_bytes_overrides_the_broker_limit(plane) -> None:
    cluster, stubs = plane
    with Admin({"bootstrap.servers": cluster.admin_servers}) as admin:
        leader = admin.describe_topic("small").partitions[0].leader
    request = pb.ProduceRequest(
        acks=1,
        timeout_ms=5000,
        topics=[pb.ProduceTopic(name="small", partitions=[pb.ProducePartition(partition=0, records=b"")])],
    )
    for size, expected in ((5000, ErrorCode.MESSAGE_TOO_LARGE), (500, ErrorCode.NONE)):
        request.topics[0].partitions[0].records = encode_batch([bytes(size)])
        assert stubs[leader].Produce(request, timeout=10).topics[0].partitions[0].error == expected
    assert produce(stubs[leaders(stubs[leader])[0][0]], 0, encode_batch([bytes(5000)])).error == ErrorCode.NONE

"""OFFSET_NOT_AVAILABLE (a new leader whose high watermark is still catching up) is retried, never surfaced as a
failure or as an unknown end offset."""

import time

from fake_broker import FakeCluster

from odradek.client import AsyncConsumer, TopicPartition
from odradek.client.admin import AsyncAdmin
from odradek.client.errors import ErrorCode, OffsetNotAvailableError, error_for_code
from odradek.client.record.builder import encode_batch

T0 = TopicPartition("t", 0)
NOT_AVAILABLE = ErrorCode.OFFSET_NOT_AVAILABLE


def config(cluster: FakeCluster, **overrides: object) -> dict:
    return {"bootstrap.servers": cluster.bootstrap, "fetch.max.wait.ms": 100, "retry.backoff.ms": 20, **overrides}


def fill(cluster: FakeCluster, count: int) -> None:
    cluster.append("t", 0, encode_batch([b"v%d" % i for i in range(count)], timestamps=1_000))


def test_the_error_is_typed_and_retriable() -> None:
    error = error_for_code(NOT_AVAILABLE)
    assert isinstance(error, OffsetNotAvailableError) and error.retriable


async def test_end_offsets_and_offset_reset_retry_through_it(cluster: FakeCluster) -> None:
    fill(cluster, 10)
    cluster.inject_list_offsets_error("t", 0, NOT_AVAILABLE, NOT_AVAILABLE)
    async with AsyncConsumer(config(cluster)) as consumer:
        assert await consumer.end_offsets([T0]) == {T0: 10}
    cluster.inject_list_offsets_error("t", 0, NOT_AVAILABLE, NOT_AVAILABLE)
    async with AsyncConsumer(config(cluster, **{"auto.offset.reset": "latest"})) as consumer:
        consumer.assign([T0])
        assert await consumer.position(T0) == 10
    assert cluster.rpc_count("ListOffsets") >= 6


async def test_a_consumer_fetch_retries_through_it(cluster: FakeCluster) -> None:
    fill(cluster, 10)
    cluster.inject_fetch_error("t", 0, NOT_AVAILABLE, NOT_AVAILABLE, NOT_AVAILABLE)
    async with AsyncConsumer(config(cluster, **{"auto.offset.reset": "earliest"})) as consumer:
        consumer.assign([T0])
        records = []
        deadline = time.monotonic() + 5
        while len(records) < 10 and time.monotonic() < deadline:
            records += await consumer.poll(100)  # raises if the error reached the application
        assert [r.offset for r in records] == list(range(10))
        assert consumer.highwater(T0) == 10


async def test_admin_partition_offsets_retry_through_it(cluster: FakeCluster) -> None:
    fill(cluster, 10)
    cluster.inject_list_offsets_error("t", 0, ErrorCode.NONE, NOT_AVAILABLE, ErrorCode.NONE, NOT_AVAILABLE)
    async with AsyncAdmin({"bootstrap.servers": cluster.bootstrap, "request.timeout.ms": 6000}) as admin:
        brokers = {node: f"127.0.0.1:{port}" for node, port in cluster.ports.items()}
        assert await admin._partition_offsets("t", {0: 0, 1: 1}, brokers) == {0: (0, 10), 1: (0, 0)}
    assert not cluster.list_offsets_errors[("t", 0)]  # asked until the leader answered

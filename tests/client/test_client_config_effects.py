"""What client.id, fetch.min.bytes and check.crcs do (the client keys no other test exercised)."""

from __future__ import annotations

import time

import pytest
from fake_broker import FakeCluster

from odradek.client import AsyncConsumer, AsyncProducer, TopicPartition
from odradek.client.errors import CorruptRecordError, ErrorCode
from odradek.client.record.builder import encode_batch

T0 = TopicPartition("t", 0)


def config(cluster: FakeCluster, **overrides: object) -> dict:
    return {"bootstrap.servers": cluster.bootstrap, "retry.backoff.ms": 20, **overrides}


async def test_client_id_is_sent_with_produce_and_fetch(cluster: FakeCluster) -> None:
    async with AsyncProducer(config(cluster, **{"client.id": "billing-writer"})) as producer:
        await producer.send("t", b"v", partition=0)
    assert cluster.last_request["Produce"].client_id == "billing-writer"
    consumer_config = config(cluster, **{"client.id": "billing-reader", "auto.offset.reset": "earliest"})
    async with AsyncConsumer(consumer_config) as consumer:
        consumer.assign([T0])
        await consumer.poll(500)
    assert cluster.last_request["Fetch"].client_id == "billing-reader"


async def test_fetch_min_bytes_is_what_the_broker_waits_for(cluster: FakeCluster) -> None:
    """The fetch asks for it; a broker holds the answer until that much data or fetch.max.wait.ms."""
    cluster.append("t", 0, encode_batch([b"small"], timestamps=1_000))
    for min_bytes, slow in ((1, False), (1 << 20, True)):
        overrides = {"fetch.min.bytes": min_bytes, "fetch.max.wait.ms": 400, "auto.offset.reset": "latest"}
        async with AsyncConsumer(config(cluster, **overrides)) as consumer:
            consumer.assign([T0])
            await consumer.poll(100)  # positioned at the end
            cluster.append("t", 0, encode_batch([b"more"], timestamps=1_000))
            start = time.monotonic()
            records = []
            while not records and time.monotonic() - start < 5:
                records = await consumer.poll(100)
            waited = time.monotonic() - start
        assert cluster.last_request["Fetch"].min_bytes == min_bytes
        assert [r.value for r in records] == [b"more"]
        assert (waited >= 0.3) == slow, (min_bytes, waited)


@pytest.mark.parametrize("check", [True, False])
async def test_check_crcs_decides_whether_a_damaged_batch_is_refused(cluster: FakeCluster, check: bool) -> None:
    cluster.append("t", 0, encode_batch([b"value"], timestamps=1_000))
    with cluster.lock:  # damage a record byte on the broker's side, after the CRC was computed
        p = cluster.topics["t"][0]
        p.batches[0] = p.batches[0][:-3] + b"V" + p.batches[0][-2:]
    overrides = {"check.crcs": check, "auto.offset.reset": "earliest", "fetch.max.wait.ms": 100}
    async with AsyncConsumer(config(cluster, **overrides)) as consumer:
        consumer.assign([T0])
        if check:
            with pytest.raises(CorruptRecordError):
                for _ in range(20):
                    await consumer.poll(100)
        else:
            records = []
            for _ in range(20):
                records += await consumer.poll(100)
                if records:
                    break
            assert len(records) == 1 and records[0].value != b"value"  # delivered as stored, unchecked


async def test_partitioner_ignore_keys_spreads_keyed_records_by_stickiness_not_by_key(cluster: FakeCluster) -> None:
    keys = [f"key-{i}".encode() for i in range(30)]
    partitions = {}
    for ignore in (False, True):
        overrides = {"partitioner.ignore.keys": ignore, "linger.ms": 1000, "batch.size": 1 << 20}
        async with AsyncProducer(config(cluster, **overrides)) as producer:
            await producer.partitions_for("t")
            futures = [producer.send("t", b"v", key=k) for k in keys]
            await producer.flush()
            partitions[ignore] = {(await f).partition for f in futures}
    assert len(partitions[False]) == 3  # by the key's hash: 30 keys reach all 3 partitions
    assert len(partitions[True]) == 1  # one sticky partition while its batch is open (KIP-480)


async def test_consumer_fetch_max_bytes_is_the_fetch_response_limit(cluster: FakeCluster) -> None:
    overrides = {"fetch.max.bytes": 123_456, "auto.offset.reset": "earliest", "fetch.max.wait.ms": 50}
    async with AsyncConsumer(config(cluster, **overrides)) as consumer:
        consumer.assign([T0])
        await consumer.poll(200)
    assert cluster.last_request["Fetch"].max_bytes == 123_456


@pytest.mark.parametrize("backoff_ms", [20, 600])
async def test_retry_backoff_ms_spaces_the_retries(cluster: FakeCluster, backoff_ms: int) -> None:
    cluster.inject_produce_error("t", 1, ErrorCode.NOT_ENOUGH_REPLICAS)
    async with AsyncProducer(config(cluster, **{"retry.backoff.ms": backoff_ms, "linger.ms": 0})) as producer:
        await producer.partitions_for("t")
        start = time.monotonic()
        assert (await producer.send_and_wait("t", b"v", partition=1)).offset == 0
        took = time.monotonic() - start
    assert (took >= 0.5) == (backoff_ms == 600), took

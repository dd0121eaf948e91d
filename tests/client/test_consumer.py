import asyncio
import threading
import time

import pytest
from fake_broker import FakeCluster

from odradek.client import AsyncConsumer, AsyncProducer, Consumer, ConsumerRecord, TopicPartition
from odradek.client.errors import ErrorCode, NoOffsetForPartitionError, OffsetOutOfRangeError
from odradek.client.record.builder import encode_batch
from odradek.client.record.header import COMPRESSION_CODES

TS = 1_700_000_000_000
T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


def config(cluster: FakeCluster, **overrides: object) -> dict:
    return {
        "bootstrap.servers": cluster.bootstrap,
        "auto.offset.reset": "earliest",
        "fetch.max.wait.ms": 100,
        "retry.backoff.ms": 20,
        **overrides,
    }


def fill(cluster: FakeCluster, partition: int, batches: int, per_batch: int = 100, start: int = 0) -> None:
    for b in range(batches):
        first = start + b * per_batch
        values = [b"v%d" % (first + i) for i in range(per_batch)]
        keys = [b"k%d" % (first + i) for i in range(per_batch)]
        cluster.append("t", partition, encode_batch(values, keys, TS + b))


async def poll_until(consumer: AsyncConsumer, count: int, timeout: float = 5) -> list[ConsumerRecord]:
    records: list[ConsumerRecord] = []
    deadline = time.monotonic() + timeout
    while len(records) < count and time.monotonic() < deadline:
        records += await consumer.poll(100)
    return records


async def test_earliest_reads_everything_in_order(cluster: FakeCluster) -> None:
    fill(cluster, 0, 3)
    async with AsyncConsumer(config(cluster)) as consumer:
        consumer.assign([("t", 0)])
        assert consumer.assignment() == {T0}
        records = await poll_until(consumer, 300)
        assert await consumer.position(T0) == 300
        assert consumer.highwater(T0) == 300
    assert [r.offset for r in records] == list(range(300))
    assert records[150] == ConsumerRecord("t", 0, 150, TS + 1, 0, b"k150", b"v150", ())


async def test_poll_zero_in_a_loop_lets_the_fetcher_run(cluster: FakeCluster) -> None:
    fill(cluster, 0, 1)
    async with AsyncConsumer(config(cluster)) as consumer:
        consumer.assign([T0])
        records: list[ConsumerRecord] = []
        deadline = time.monotonic() + 5
        while len(records) < 100 and time.monotonic() < deadline:
            records += await consumer.poll(0)
    assert len(records) == 100


async def test_latest_starts_at_the_end(cluster: FakeCluster) -> None:
    fill(cluster, 0, 1)
    async with AsyncConsumer(config(cluster, **{"auto.offset.reset": "latest"})) as consumer:
        consumer.assign([T0])
        assert await consumer.position(T0) == 100
        assert await consumer.poll(50) == []
        fill(cluster, 0, 1, start=100)
        records = await poll_until(consumer, 100)
    assert [r.offset for r in records] == list(range(100, 200))


async def test_reset_none_raises_until_a_seek(cluster: FakeCluster) -> None:
    fill(cluster, 0, 1)
    async with AsyncConsumer(config(cluster, **{"auto.offset.reset": "none"})) as consumer:
        consumer.assign([T0])
        for _ in range(2):  # every poll raises it, as in Kafka
            with pytest.raises(NoOffsetForPartitionError, match=r"auto\.offset\.reset is none"):
                await consumer.poll(1000)
        with pytest.raises(NoOffsetForPartitionError):
            await consumer.position(T0)
        consumer.seek(T0, 40)
        records = await poll_until(consumer, 60)
    assert [r.offset for r in records] == list(range(40, 100))


async def test_seek_into_a_batch_skips_the_records_before_it(cluster: FakeCluster) -> None:
    fill(cluster, 0, 3)
    async with AsyncConsumer(config(cluster)) as consumer:
        consumer.assign([T0])
        consumer.seek(T0, 150)
        assert await consumer.position(T0) == 150
        records = await poll_until(consumer, 150)
        assert [r.offset for r in records] == list(range(150, 300))
        consumer.seek_to_beginning()
        assert await consumer.position(T0) == 0
        consumer.seek_to_end(T0)
        assert await consumer.position(T0) == 300


async def test_max_poll_records(cluster: FakeCluster) -> None:
    fill(cluster, 0, 2, per_batch=50)
    async with AsyncConsumer(config(cluster, **{"max.poll.records": 7})) as consumer:
        consumer.assign([T0])
        seen = []
        while len(seen) < 100:
            records = await consumer.poll(1000)
            assert 0 < len(records) <= 7
            seen += records
            assert await consumer.position(T0) == seen[-1].offset + 1
    assert [r.offset for r in seen] == list(range(100))


@pytest.mark.parametrize(("reset", "first"), [("earliest", 100), ("latest", 300)])
async def test_out_of_range_resets(cluster: FakeCluster, reset: str, first: int) -> None:
    fill(cluster, 0, 3)
    cluster.truncate_start("t", 0, 100)
    async with AsyncConsumer(config(cluster, **{"auto.offset.reset": reset})) as consumer:
        consumer.assign([T0])
        consumer.seek(T0, 5)
        if reset == "latest":
            assert await consumer.poll(300) == []
            fill(cluster, 0, 1, start=300)
        records = await poll_until(consumer, 1)
    assert records[0].offset == first


async def test_out_of_range_with_reset_none_raises(cluster: FakeCluster) -> None:
    fill(cluster, 0, 2)
    cluster.truncate_start("t", 0, 100)
    async with AsyncConsumer(config(cluster, **{"auto.offset.reset": "none"})) as consumer:
        consumer.assign([T0])
        consumer.seek(T0, 5)
        with pytest.raises(OffsetOutOfRangeError, match="offset 5 is out of range for t-0"):
            await consumer.poll(2000)
        with pytest.raises(OffsetOutOfRangeError):
            await consumer.poll(0)
        consumer.seek(T0, 150)
        assert (await poll_until(consumer, 1))[0].offset == 150


async def test_pause_and_resume(cluster: FakeCluster) -> None:
    fill(cluster, 0, 1)
    fill(cluster, 1, 1)
    async with AsyncConsumer(config(cluster)) as consumer:
        consumer.assign([T0, T1])
        consumer.pause(T1)
        assert consumer.paused() == {T1}
        records = await poll_until(consumer, 100)
        assert {r.partition for r in records} == {0}
        assert await consumer.poll(200) == []
        consumer.resume(T1)
        records = await poll_until(consumer, 100)
    assert {r.partition for r in records} == {1} and len(records) == 100


@pytest.mark.parametrize("hints", [True, False])
async def test_fetch_follows_a_new_leader(cluster: FakeCluster, hints: bool) -> None:
    cluster.leader_hints = hints
    fill(cluster, 0, 1)
    async with AsyncConsumer(config(cluster)) as consumer:
        consumer.assign([T0])
        assert len(await poll_until(consumer, 100)) == 100
        cluster.move_leader("t", 0, 2)
        fill(cluster, 0, 1, start=100)
        records = await poll_until(consumer, 100)
    assert [r.offset for r in records] == list(range(100, 200))
    assert any(node == 2 for node, _ in cluster.fetch_log)


async def test_transient_fetch_errors_are_retried(cluster: FakeCluster) -> None:
    fill(cluster, 0, 1)
    cluster.inject_fetch_error("t", 0, ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_LEADER_EPOCH)
    async with AsyncConsumer(config(cluster)) as consumer:
        consumer.assign([T0])
        assert len(await poll_until(consumer, 100)) == 100


async def test_one_fetch_per_broker_covers_its_partitions(cluster: FakeCluster) -> None:
    cluster.create_topic("wide", 6)
    async with AsyncConsumer(config(cluster)) as consumer:
        consumer.assign([("wide", p) for p in range(6)])
        await consumer.poll(300)
    first = {}
    for node, asked in cluster.fetch_log:
        first.setdefault(node, sorted(p for _, p, _ in asked))
    assert first == {0: [0, 3], 1: [1, 4], 2: [2, 5]}


async def test_next_fetch_is_in_flight_while_records_are_processed(cluster: FakeCluster) -> None:
    fill(cluster, 0, 10)
    batch_bytes = len(encode_batch([b"v%d" % i for i in range(100)], [b"k%d" % i for i in range(100)], TS))
    overrides = {"max.partition.fetch.bytes": 3 * batch_bytes}
    async with AsyncConsumer(config(cluster, **overrides)) as consumer:
        consumer.assign([T0])
        records = await poll_until(consumer, 1)
        await asyncio.sleep(0.1)  # the application "processes" the records; no poll meanwhile
        offsets = [offset for _, asked in cluster.fetch_log for _, _, offset in asked]
        # The next fetch went out when the first response was taken, and one more while that one is buffered.
        assert offsets[:2] == [0, len(records)] and len(offsets) >= 3
        records += await poll_until(consumer, 1000 - len(records))
    assert [r.offset for r in records] == list(range(1000))


async def test_a_caught_up_partition_does_not_hold_back_the_others(cluster: FakeCluster) -> None:
    """Partitions 0 and 3 of "wide" share broker 0. Partition 0 is soon read to its end, so its next fetch waits
    out fetch.max.wait.ms on the broker; partition 3's next fetches must not wait behind that long poll."""
    cluster.create_topic("wide", 6)
    batch = encode_batch([b"v%d" % i for i in range(100)], None, TS)
    cluster.append("wide", 0, batch)
    for _ in range(10):
        cluster.append("wide", 3, batch)
    overrides = {"fetch.max.wait.ms": 5000, "max.partition.fetch.bytes": len(batch)}  # one batch per fetch
    async with AsyncConsumer(config(cluster, **overrides)) as consumer:
        consumer.assign([("wide", 0), ("wide", 3)])
        started = time.monotonic()
        records = await poll_until(consumer, 1)
        # While the application is busy, the fetcher reads ahead: partition 3 fills its prefetch buffer, and
        # partition 0, at its end, goes alone into a long poll.
        await asyncio.sleep(0.3)
        while len(records) < 1100 and time.monotonic() - started < 4.5:
            records += await consumer.poll(100)
        elapsed = time.monotonic() - started
    assert len(records) == 1100, f"{len(records)} records after {elapsed:.1f} s"
    assert [r.offset for r in records if r.partition == 3] == list(range(1000))


async def test_long_poll_returns_when_data_arrives(cluster: FakeCluster) -> None:
    async with AsyncConsumer(config(cluster, **{"fetch.max.wait.ms": 5000})) as consumer:
        consumer.assign([T0])
        assert await consumer.position(T0) == 0
        threading.Timer(0.2, fill, args=(cluster, 0, 1)).start()
        started = time.monotonic()
        records = await consumer.poll(3000)
        assert len(records) == 100 and 0.15 < time.monotonic() - started < 2
    assert cluster.rpc_count("Fetch") <= 3  # waiting happened on the broker, not in a client loop


@pytest.mark.parametrize("codec", list(COMPRESSION_CODES))
async def test_what_the_producer_sends_the_consumer_reads(cluster: FakeCluster, codec: str) -> None:
    sent = [
        (b"k%d" % i if i % 2 else None, b"v%d" % i * (i % 30), [("n", b"%d" % i)] if i % 3 else []) for i in range(500)
    ]
    producer_config = {"bootstrap.servers": cluster.bootstrap, "compression.type": codec, "batch.size": 2048}
    async with AsyncProducer(producer_config) as producer:
        for i, (key, value, headers) in enumerate(sent):
            producer.send("t", value, key=key, partition=1, headers=headers, timestamp=TS + i)
        await producer.flush()
    async with AsyncConsumer(config(cluster)) as consumer:
        consumer.assign([T1])
        records = await poll_until(consumer, 500)
    assert [(r.key, r.value, list(r.headers)) for r in records] == sent
    assert [(r.offset, r.timestamp, r.timestamp_type) for r in records] == [(i, TS + i, 0) for i in range(500)]


async def test_beginning_and_end_offsets(cluster: FakeCluster) -> None:
    fill(cluster, 0, 3)
    cluster.truncate_start("t", 0, 100)
    async with AsyncConsumer(config(cluster)) as consumer:
        assert await consumer.partitions_for("t") == [0, 1, 2]
        assert await consumer.beginning_offsets([T0, T1]) == {T0: 100, T1: 0}
        assert await consumer.end_offsets([T0, T1]) == {T0: 300, T1: 0}


def test_sync_consumer(cluster: FakeCluster) -> None:
    fill(cluster, 0, 2)
    with Consumer(config(cluster, **{"max.poll.records": 30})) as consumer:
        assert consumer.partitions_for("t") == [0, 1, 2]
        consumer.assign([("t", 0)])
        assert consumer.position(T0) == 0
        records = []
        while len(records) < 200:
            records += consumer.poll(1000)
        assert [r.offset for r in records] == list(range(200))
        assert consumer.position(T0) == 200
        consumer.seek_to_beginning(T0)
        assert consumer.poll(1000)[0].offset == 0
        consumer.seek(T0, 199)
        assert [r.offset for r in consumer.poll(1000)] == [199]
        consumer.pause(T0)
        assert consumer.paused() == {T0} and consumer.poll(100) == []
        consumer.resume(T0)
        assert consumer.beginning_offsets([T0]) == {T0: 0} and consumer.end_offsets([T0]) == {T0: 200}
        consumer.seek_to_end()
        assert consumer.position(T0) == 200
        with pytest.raises(ValueError, match="t-1 is not assigned"):
            consumer.seek(T1, 0)

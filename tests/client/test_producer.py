import asyncio
import itertools
import threading
import time

import pytest
from fake_broker import FakeCluster

from odradek.client import AsyncProducer, Producer, RecordMetadata
from odradek.client.errors import (
    ClientTimeoutError,
    ErrorCode,
    NotEnoughReplicasError,
    OdradekError,
    RecordTooLargeError,
    UnknownTopicOrPartitionError,
)
from odradek.client.producer.batch import DeferredRecordFuture
from odradek.client.producer.partitioner import partition_for_key
from odradek.client.producer.sender import SMALL_REQUESTS_IN_FLIGHT
from odradek.client.record.header import COMPRESSION_CODES


def config(cluster: FakeCluster, **overrides: object) -> dict:
    return {"bootstrap.servers": cluster.bootstrap, "linger.ms": 1, "retry.backoff.ms": 20, **overrides}


async def test_send_flush_futures_and_callbacks(cluster: FakeCluster) -> None:
    called: list[RecordMetadata] = []
    async with AsyncProducer(config(cluster)) as producer:
        assert await producer.partitions_for("t") == [0, 1, 2]
        futures = [producer.send("t", b"value-%d" % i, key=b"key-%d" % (i % 10)) for i in range(300)]
        futures[0].add_done_callback(lambda f: called.append(f.result()))
        await producer.flush()
        assert all(f.done() for f in futures)
        results = [f.result(0) for f in futures]
        futures[1].add_done_callback(lambda f: called.append(f.result()))  # already done: runs at once
    assert called == results[:2]
    for i, meta in enumerate(results):
        assert meta.topic == "t" and meta.partition == partition_for_key(b"key-%d" % (i % 10), 3)
    for partition in range(3):
        records = cluster.records("t", partition)
        mine = [(m.offset, b"value-%d" % i) for i, m in enumerate(results) if m.partition == partition]
        assert [(r.offset, r.value) for r in records] == mine  # in send order, offsets as reported
        assert all(r.timestamp == results[0].timestamp or r.timestamp > 1_600_000_000_000 for r in records)


async def test_send_and_wait_and_await(cluster: FakeCluster) -> None:
    async with AsyncProducer(config(cluster)) as producer:
        first = await producer.send_and_wait("t", "text is UTF-8", partition=1, timestamp=1234)
        assert first == RecordMetadata("t", 1, 0, 1234)
        second = await producer.send("t", None, key="k", partition=1)
        assert second[:3] == ("t", 1, 1)
    assert [(r.key, r.value) for r in cluster.records("t", 1)] == [(None, b"text is UTF-8"), (b"k", None)]


@pytest.mark.parametrize("codec", list(COMPRESSION_CODES))
async def test_every_codec_round_trips_keys_headers_timestamps_in_order(cluster: FakeCluster, codec: str) -> None:
    sent = [
        (b"k%d" % i if i % 3 else None, b"v%d " % i * (i % 50), [("h", b"%d" % i), ("null", None)] if i % 4 else None)
        for i in range(400)
    ]
    async with AsyncProducer(config(cluster, **{"compression.type": codec, "batch.size": 4096})) as producer:
        futures = [
            producer.send("t", value, key=key, partition=2, headers=headers, timestamp=1_700_000_000_000 + i)
            for i, (key, value, headers) in enumerate(sent)
        ]
        await producer.flush()
    assert [f.result().offset for f in futures] == list(range(400))
    records = cluster.records("t", 2)
    assert [(r.key, r.value, list(r.headers) or None) for r in records] == sent
    assert [r.timestamp for r in records] == [1_700_000_000_000 + i for i in range(400)]
    assert sum(n for _, _, logged in cluster.produce_log for _, _, n in logged) > 1  # several batches


async def test_null_keys_stick_to_a_partition_per_batch(cluster: FakeCluster) -> None:
    async with AsyncProducer(config(cluster, **{"batch.size": 1000, "linger.ms": 10_000})) as producer:
        futures = [producer.send("t", b"x" * 100) for _ in range(80)]
        await producer.flush()
    partitions = [f.result().partition for f in futures]
    runs = [partitions[0]]
    for previous, current in itertools.pairwise(partitions):
        if current != previous:
            runs.append(current)
    per_batch = (1000 - 61) // 112
    assert len(runs) == -(-80 // per_batch)  # one partition per batch ...
    assert all(a != b for a, b in itertools.pairwise(runs))  # ... and a different one for the next batch
    assert partitions.count(runs[0]) % per_batch == 0 or len(set(runs)) == 3


async def test_one_request_per_broker_carries_many_partitions(cluster: FakeCluster) -> None:
    cluster.create_topic("wide", 12)
    async with AsyncProducer(config(cluster, **{"linger.ms": 200})) as producer:
        await producer.partitions_for("wide")
        futures = [producer.send("wide", b"v", partition=p) for p in range(12) for _ in range(5)]
        await producer.flush()
    assert all(f.result().offset >= 0 for f in futures)
    assert cluster.rpc_count("Produce") == 3
    assert sorted(len(logged) for _, _, logged in cluster.produce_log) == [4, 4, 4]


@pytest.mark.parametrize("hints", [True, False])
async def test_not_leader_reroutes_to_the_new_leader(cluster: FakeCluster, hints: bool) -> None:
    cluster.leader_hints = hints
    async with AsyncProducer(config(cluster)) as producer:
        await producer.send_and_wait("t", b"before", partition=0)
        cluster.move_leader("t", 0, 2)
        meta = await producer.send_and_wait("t", b"after", partition=0)
    assert meta.offset == 1
    assert [r.value for r in cluster.records("t", 0)] == [b"before", b"after"]
    assert cluster.rpc_count("Produce", node=2) == 1


async def test_stale_metadata_does_not_undo_a_newer_leader(cluster: FakeCluster) -> None:
    async with AsyncProducer(config(cluster, **{"metadata.max.age.ms": 50})) as producer:
        await producer.send_and_wait("t", b"a", partition=0)
        cluster.move_leader("t", 0, 1)
        cluster.stale_metadata["t", 0] = 0  # brokers still answer Metadata with the old leader
        await producer.send_and_wait("t", b"b", partition=0)  # rerouted by the hint (a newer epoch)
        await asyncio.sleep(0.2)  # several periodic refreshes with the stale answer
        await producer.send_and_wait("t", b"c", partition=0)
    assert cluster.rpc_count("Produce", node=1) == 2


async def test_retriable_errors_are_retried_then_fail_when_retries_run_out(cluster: FakeCluster) -> None:
    cluster.inject_produce_error("t", 1, ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.REQUEST_TIMED_OUT)
    async with AsyncProducer(config(cluster)) as producer:
        assert (await producer.send_and_wait("t", b"v", partition=1)).offset == 0
    cluster.inject_produce_error("t", 1, ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.NOT_ENOUGH_REPLICAS)
    async with AsyncProducer(config(cluster, retries=1)) as producer:
        with pytest.raises(NotEnoughReplicasError):
            await producer.send_and_wait("t", b"v", partition=1)
    assert [r.value for r in cluster.records("t", 1)] == [b"v"]


async def test_an_error_code_unknown_to_the_client_fails_the_record(cluster: FakeCluster) -> None:
    cluster.inject_produce_error("t", 0, 9999)  # a code from a newer broker: not in this client's ErrorCode
    async with AsyncProducer(config(cluster)) as producer:
        with pytest.raises(OdradekError, match="9999") as raised:
            await asyncio.wait_for(producer.send_and_wait("t", b"v", partition=0), 5)
    assert raised.value.code == 9999


async def test_message_too_large_fails_before_sending(cluster: FakeCluster) -> None:
    async with AsyncProducer(config(cluster, **{"max.request.size": 1000})) as producer:
        await producer.partitions_for("t")
        with pytest.raises(RecordTooLargeError):
            producer.send("t", b"x" * 1000)
        await producer.send_and_wait("t", b"x" * 800)  # a lone record may exceed batch.size
    assert cluster.rpc_count("Produce") == 1


async def test_broker_message_too_large_fails_without_retry(cluster: FakeCluster) -> None:
    cluster.inject_produce_error("t", 0, ErrorCode.MESSAGE_TOO_LARGE)
    async with AsyncProducer(config(cluster)) as producer:
        with pytest.raises(RecordTooLargeError):
            await producer.send_and_wait("t", b"v", partition=0)
    assert cluster.rpc_count("Produce") == 1


async def test_partition_out_of_range(cluster: FakeCluster) -> None:
    async with AsyncProducer(config(cluster)) as producer:
        # Metadata unknown yet: the record is deferred, and its future fails before anything is sent.
        deferred = producer.send("t", b"v", partition=99)
        assert isinstance(deferred, DeferredRecordFuture)
        with pytest.raises(UnknownTopicOrPartitionError, match="partition 99 of t: it has 3 partitions"):
            await deferred
        with pytest.raises(UnknownTopicOrPartitionError):  # metadata known: raised by send() itself
            producer.send("t", b"v", partition=99)
    assert cluster.rpc_count("Produce") == 0


def test_a_blocking_send_waits_for_a_partition_the_topic_gains(cluster: FakeCluster) -> None:
    """As Kafka's producer: a partition beyond the known count is waited for (metadata refreshed) up to
    max.block.ms, since CreatePartitions may have added it; past that, Kafka's error."""
    producer = Producer(config(cluster, **{"max.block.ms": 3000}))
    try:
        producer.send("t", b"known", partition=0).result(10)  # the topic's 3 partitions are known now
        timer = threading.Timer(0.3, cluster.create_topic, ("t", 5))  # the topic grows while send waits
        timer.start()
        started = time.monotonic()
        assert producer.send("t", b"new", partition=4).result(10).partition == 4
        assert time.monotonic() - started >= 0.25
        timer.join()
    finally:
        producer.close(timeout=5)
    with Producer(config(cluster, **{"max.block.ms": 300})) as impatient:
        started = time.monotonic()
        with pytest.raises(
            UnknownTopicOrPartitionError,
            match=r"Partition 7 of topic t with partition count 5 is not present in metadata after 300 ms",
        ):
            impatient.send("t", b"never", partition=7)
        assert time.monotonic() - started >= 0.29


async def test_unknown_topic(cluster: FakeCluster) -> None:
    async with AsyncProducer(config(cluster, **{"max.block.ms": 200})) as producer:
        with pytest.raises(UnknownTopicOrPartitionError, match="topic 'nope' not present in metadata after 200 ms"):
            await producer.send("nope", b"v")
        with pytest.raises(UnknownTopicOrPartitionError):
            await producer.partitions_for("nope")


async def test_bad_arguments_raise_at_once(cluster: FakeCluster) -> None:
    async with AsyncProducer(config(cluster)) as producer:
        with pytest.raises(TypeError, match="value must be bytes, str or None, not int"):
            producer.send("t", 5)
        with pytest.raises(TypeError, match="key must be"):
            producer.send("t", b"v", key=bytearray(b"k"))
        with pytest.raises(TypeError, match="header name must be str"):
            producer.send("t", b"v", headers=[(b"h", b"v")])
        with pytest.raises(ValueError, match="timestamp"):
            producer.send("t", b"v", timestamp=-5)


async def test_batches_expire_after_delivery_timeout(cluster: FakeCluster) -> None:
    cluster.stale_metadata["t", 0] = -1  # no leader
    overrides = {"delivery.timeout.ms": 300, "request.timeout.ms": 200, "linger.ms": 0}
    async with AsyncProducer(config(cluster, **overrides)) as producer:
        started = time.monotonic()
        with pytest.raises(ClientTimeoutError, match=r"delivery\.timeout\.ms"):
            await producer.send_and_wait("t", b"v", partition=0)
        assert 0.25 < time.monotonic() - started < 2


async def test_an_expiry_between_attempts_names_the_last_attempts_error(cluster: FakeCluster) -> None:
    """A batch that fails on a lost leader, then waits for a new one until delivery.timeout.ms, expires with
    Kafka's timeout wording and the error that sent it back to wait."""
    cluster.leader_hints = False
    overrides = {"delivery.timeout.ms": 1000, "request.timeout.ms": 500, "linger.ms": 0}
    async with AsyncProducer(config(cluster, **overrides)) as producer:
        await producer.send_and_wait("t", b"a", partition=0)  # the leader is known
        cluster.move_leader("t", 0, -1)  # the leader answers NOT_LEADER_OR_FOLLOWER, and no broker leads
        with pytest.raises(ClientTimeoutError, match=r"delivery\.timeout\.ms.*last attempt failed: .*NOT_LEADER"):
            await producer.send_and_wait("t", b"b", partition=0)


async def test_acks_zero_reports_no_offset(cluster: FakeCluster) -> None:
    async with AsyncProducer(config(cluster, acks=0)) as producer:
        assert (await producer.send_and_wait("t", b"v", partition=0, timestamp=5)) == RecordMetadata("t", 0, -1, 5)
    assert cluster.produce_log[-1][1] == 0 and len(cluster.records("t", 0)) == 1


async def test_in_flight_requests_are_bounded_per_broker_and_one_per_partition(cluster: FakeCluster) -> None:
    cluster.create_topic("wide", 12)  # broker 0 leads partitions 0, 3, 6 and 9
    cluster.produce_delay = 0.05
    overrides = {"linger.ms": 0, "batch.size": 200, "max.in.flight.requests.per.connection": 2}
    async with AsyncProducer(config(cluster, **overrides)) as producer:
        await producer.partitions_for("wide")
        await producer.send("wide", b"warm-up", partition=1)  # the producer id is fetched before the first batch
        futures = []
        for i in range(80):
            futures.append(producer.send("wide", b"%d" % i + b"x" * 150, partition=(i % 4) * 3))
            await asyncio.sleep(0.002)
        await producer.flush()
    for partition in (0, 3, 6, 9):
        mine = [f.result().offset for i, f in enumerate(futures) if (i % 4) * 3 == partition]
        assert mine == list(range(20))  # in send order
    assert cluster.max_produce_in_flight[0] == 2
    assert cluster.max_partition_in_flight == 1  # the next batches of a partition wait for its answer
    assert cluster.rpc_count("Produce") < 80  # and then go together


async def test_small_requests_pipeline_less_deep_than_full_ones(cluster: FakeCluster) -> None:
    cluster.create_topic("wide", 30)  # broker 0 leads partitions 0, 3, ..., 27
    cluster.produce_delay = 0.05
    async with AsyncProducer(config(cluster, **{"linger.ms": 0})) as producer:
        await producer.partitions_for("wide")
        await producer.send("wide", b"warm-up", partition=1)  # broker 1's; the producer id comes first
        trickle = []
        for i in range(10):  # each record lingers out alone, on its own partition
            trickle.append(producer.send("wide", b"x", partition=3 * i))
            await asyncio.sleep(0.005)
        await asyncio.gather(*trickle)
    assert cluster.max_produce_in_flight[0] == SMALL_REQUESTS_IN_FLIGHT
    # Full batches (closed by the next record) on 10 partitions, one batch per request: 5 requests in flight.
    overrides = {"linger.ms": 60_000, "batch.size": 1000, "max.request.size": 1200}
    async with AsyncProducer(config(cluster, **overrides)) as producer:
        await producer.partitions_for("wide")
        producer.send("wide", b"warm-up", partition=1)
        await producer.flush()
        cluster.max_produce_in_flight.clear()
        for i in range(20):
            producer.send("wide", b"x" * 600, partition=3 * (i % 10))
        await asyncio.sleep(0.03)
        assert cluster.max_produce_in_flight[0] == 5  # max.in.flight.requests.per.connection


async def test_deferred_sends_wait_for_memory_and_keep_their_order(cluster: FakeCluster) -> None:
    cluster.stale_metadata["t", 0] = -1  # batches pile up until the leader is known
    overrides = {"batch.size": 1000, "buffer.memory": 2000, "linger.ms": 0, "max.block.ms": 5000}
    async with AsyncProducer(config(cluster, **overrides)) as producer:
        await producer.partitions_for("t")
        futures = [producer.send("t", b"%03d" % i + b"x" * 100, partition=0) for i in range(30)]
        assert isinstance(futures[-1], DeferredRecordFuture)  # memory ran out: deferred, not blocking the loop
        await asyncio.sleep(0.1)
        assert not any(f.done() for f in futures)
        del cluster.stale_metadata["t", 0]
        offsets = [(await f).offset for f in futures]
    assert offsets == list(range(30))
    assert [r.value[:3] for r in cluster.records("t", 0)] == [b"%03d" % i for i in range(30)]


async def test_deferred_sends_time_out_after_max_block(cluster: FakeCluster) -> None:
    cluster.stale_metadata["t", 0] = -1
    overrides = {"batch.size": 1000, "buffer.memory": 1500, "max.block.ms": 150}
    producer = AsyncProducer(config(cluster, **overrides))
    try:
        await producer.partitions_for("t")
        producer.send("t", b"v", partition=0)
        with pytest.raises(ClientTimeoutError, match=r"buffer\.memory within max\.block\.ms"):
            await producer.send("t", b"v", partition=0, key=b"x" * 950)
    finally:
        await producer.close(timeout=0)


def test_sync_producer(cluster: FakeCluster) -> None:
    threads: set[str] = set()
    with Producer(config(cluster)) as producer:
        assert producer.partitions_for("t") == [0, 1, 2]
        future = producer.send("t", b"a", partition=0)
        future.add_done_callback(lambda f: threads.add(threading.current_thread().name))
        assert producer.send_and_wait("t", "b", partition=0)[:3] == ("t", 0, 1)
        assert future.result(5).offset == 0
        producer.send("t", b"c", partition=0)
        producer.flush()
    assert threads == {"odradek-client"}  # callbacks run on the client loop thread
    assert [r.value for r in cluster.records("t", 0)] == [b"a", b"b", b"c"]
    with pytest.raises(RuntimeError, match="closed"):
        producer.send("t", b"late")


def test_callbacks_registered_while_batches_complete_run_once(cluster: FakeCluster) -> None:
    seen: list[int] = []
    with Producer(config(cluster, **{"linger.ms": 0})) as producer:
        producer.partitions_for("t")
        for i in range(5000):
            producer.send("t", b"%d" % i, partition=i % 3).add_done_callback(lambda f, i=i: seen.append(i))
        producer.flush()
    assert sorted(seen) == list(range(5000))


def test_sync_send_blocks_on_memory_then_times_out(cluster: FakeCluster) -> None:
    cluster.stale_metadata["t", 0] = -1
    overrides = {"batch.size": 1000, "buffer.memory": 2000, "max.block.ms": 200}
    producer = Producer(config(cluster, **overrides))
    try:
        producer.send("t", b"x", partition=0, key=b"k" * 900)
        producer.send("t", b"x", partition=0, key=b"k" * 900)
        started = time.monotonic()
        with pytest.raises(ClientTimeoutError, match=r"buffer\.memory"):
            producer.send("t", b"x", partition=0, key=b"k" * 900)
        assert time.monotonic() - started >= 0.19
        with pytest.raises(UnknownTopicOrPartitionError):
            producer.send("missing", b"v")
    finally:
        producer.close(timeout=0)


def test_close_fails_what_cannot_be_delivered(cluster: FakeCluster) -> None:
    cluster.stale_metadata["t", 0] = -1
    producer = Producer(config(cluster))
    future = producer.send("t", b"v", partition=0)
    producer.close(timeout=0.1)
    with pytest.raises(ClientTimeoutError, match="producer closed"):
        future.result(1)

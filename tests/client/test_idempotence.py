"""The idempotent producer against the fake broker: config rules, producer id, per-partition sequences kept across
retries, one batch per partition per request, and the epoch bump after a batch fails for good."""

from __future__ import annotations

import pytest

from odradek.client.config import ProducerConfig
from odradek.client.errors import ConfigError, ErrorCode, OdradekError
from odradek.client.producer import AsyncProducer
from odradek.client.producer.accumulator import IDEMPOTENT_BATCHES
from odradek.client.record.batch import read_batches

from .fake_broker import FakeCluster

BOOT = {"bootstrap.servers": "127.0.0.1:1"}


def config(cluster: FakeCluster, **overrides: object) -> dict:
    return {"bootstrap.servers": cluster.bootstrap, "linger.ms": 1, "retry.backoff.ms": 20, **overrides}


def headers(cluster: FakeCluster, topic: str, partition: int) -> list:
    with cluster.lock:
        data = b"".join(cluster.topics[topic][partition].batches)
    return [b.header for b in read_batches(data)]


@pytest.mark.parametrize(
    ("overrides", "enabled"),
    [
        ({}, True),
        ({"acks": "1"}, False),  # only the default: turned off quietly, as Kafka 3.x
        ({"max.in.flight.requests.per.connection": 6}, False),
        ({"retries": 0}, False),
        ({"enable.idempotence": "false"}, False),
    ],
)
def test_idempotence_is_on_by_default_and_off_when_only_the_default_conflicts(overrides, enabled) -> None:
    assert ProducerConfig.from_mapping({**BOOT, **overrides}).enable_idempotence is enabled


def test_asking_for_idempotence_with_conflicting_settings_is_an_error() -> None:
    with pytest.raises(ConfigError, match="acks must be all"):
        ProducerConfig.from_mapping({**BOOT, "enable.idempotence": True, "acks": "1"})


async def test_batches_carry_the_producer_id_and_consecutive_sequences_per_partition(cluster: FakeCluster) -> None:
    async with AsyncProducer(config(cluster, **{"batch.size": 300})) as producer:
        futures = [producer.send("t", b"v%03d" % i + b"x" * 40, partition=i % 2) for i in range(60)]
        await producer.flush()
    assert [f.result().offset for f in futures if f.result().partition == 0] == list(range(30))
    assert cluster.rpc_count("InitProducerId") == 1
    for partition in (0, 1):
        hs = headers(cluster, "t", partition)
        assert len(hs) > 1
        assert {(h.producer_id, h.producer_epoch) for h in hs} == {(cluster.next_producer_id, 0)}
        expected = 0
        for h in hs:
            assert h.base_sequence == expected
            expected += h.records_count
    # At most as many batches of a partition in one request as the broker remembers per producer.
    counts = [count for _, _, logged in cluster.produce_log for _, _, count in logged]
    assert max(counts) <= IDEMPOTENT_BATCHES and max(counts) > 1


async def test_a_retry_resends_the_same_sequence(cluster: FakeCluster) -> None:
    cluster.inject_produce_error("t", 0, ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.REQUEST_TIMED_OUT)
    async with AsyncProducer(config(cluster)) as producer:
        await producer.send("t", b"first", partition=0)
        await producer.send("t", b"second", partition=0)
    assert [(h.base_sequence, h.records_count) for h in headers(cluster, "t", 0)] == [(0, 1), (1, 1)]
    assert cluster.rpc_count("Produce") == 4


async def test_a_batch_that_fails_for_good_bumps_the_epoch_and_restarts_sequences(cluster: FakeCluster) -> None:
    async with AsyncProducer(config(cluster)) as producer:
        await producer.send("t", b"a", partition=0)
        await producer.send("t", b"b", partition=1)
        cluster.inject_produce_error("t", 0, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)
        with pytest.raises(OdradekError) as failed:
            await producer.send("t", b"lost", partition=0)
        assert failed.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        await producer.send("t", b"c", partition=0)
        await producer.send("t", b"d", partition=1)
    # Every partition starts again at sequence 0 under the next epoch, which the broker accepts.
    assert [(h.producer_epoch, h.base_sequence) for h in headers(cluster, "t", 0)] == [(0, 0), (1, 0)]
    assert [(h.producer_epoch, h.base_sequence) for h in headers(cluster, "t", 1)] == [(0, 0), (1, 0)]

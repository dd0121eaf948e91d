"""Clients honour broker throttling (KIP-219) and say who they are: against real gRPC servers on 127.0.0.1 (the
fake cluster) that answer with ``throttle_time_ms`` set and note when each request arrives and each answer leaves,
and which ``client-id`` metadata each call carried."""

from __future__ import annotations

import math
import re
import time

import pytest
from fake_broker import FakeCluster

from odradek.client import AsyncConsumer, AsyncProducer, Producer, TopicPartition
from odradek.client.config import ConsumerConfig, ProducerConfig, with_client_id
from odradek.client.record.builder import encode_batch

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)  # led by brokers 0 and 1


def config(cluster: FakeCluster, **overrides: object) -> dict:
    return {"bootstrap.servers": cluster.bootstrap, "retry.backoff.ms": 20, **overrides}


def times(log: list[tuple[int, str, float]], node: int, rpc: str) -> list[float]:
    return [t for n, r, t in log if (n, r) == (node, rpc)]


def held(cluster: FakeCluster, node: int, rpc: str, after_rpc: str | None = None) -> list[float]:
    """For each request of ``rpc`` to ``node`` after the first, how long after the previous answer (of
    ``after_rpc``, default the same rpc) it arrived. Requests of one kind to one broker are serial here."""
    arrivals = times(cluster.arrivals, node, rpc)
    answers = times(cluster.answers, node, after_rpc or rpc)
    return [arrival - answer for arrival, answer in zip(arrivals[1:] if after_rpc is None else arrivals, answers)]


async def test_the_producer_waits_out_a_brokers_throttle_and_reports_it(cluster: FakeCluster) -> None:
    cluster.throttle_ms[0, "Produce"] = 400
    async with AsyncProducer(config(cluster, **{"linger.ms": 0})) as producer:
        await producer.send("t", b"a", partition=0)  # answered with a 400 ms throttle
        sender = producer._sender
        passes = 0
        drain = sender._drain

        def counted() -> float:
            nonlocal passes
            passes += 1
            return drain()

        sender._drain = counted  # type: ignore[method-assign]
        started = time.monotonic()
        held_record = producer.send("t", b"b", partition=0)
        other = producer.send("t", b"c", partition=1)
        await other
        other_latency = time.monotonic() - started
        await held_record
        metrics = producer.metrics()
    assert len(times(cluster.arrivals, 0, "Produce")) == 2
    assert held(cluster, 0, "Produce") >= [0.4]  # not before the throttle passed
    assert other_latency < 0.3  # broker 1 was not held back
    assert passes <= 10  # the sender slept through the throttle instead of polling the accumulator
    assert metrics["produce-throttle-time-max"] == 400
    assert metrics["produce-throttle-time-avg"] == pytest.approx(400 * 2 / 3)  # broker 1's answer counts as 0


async def test_the_consumer_waits_out_a_brokers_fetch_throttle_and_reports_it(cluster: FakeCluster) -> None:
    cluster.throttle_ms[0, "Fetch"] = 500
    cluster.append("t", 0, encode_batch([b"x"], timestamps=1_000))
    overrides = {"auto.offset.reset": "earliest", "fetch.max.wait.ms": 50}
    async with AsyncConsumer(config(cluster, **overrides)) as consumer:
        consumer.assign([T0, T1])
        records = []
        deadline = time.monotonic() + 1.3
        while time.monotonic() < deadline:
            records += await consumer.poll(100)
        metrics = consumer.metrics()
    assert [r.value for r in records] == [b"x"]
    throttled = held(cluster, 0, "Fetch")
    assert len(throttled) >= 1 and min(throttled) >= 0.5
    free = held(cluster, 1, "Fetch")
    assert len(free) > 3 * len(throttled) and max(free) < 0.25  # broker 1 is fetched from as usual
    assert metrics["fetch-throttle-time-max"] == 500
    assert 0 < metrics["fetch-throttle-time-avg"] < 500


async def test_a_list_offsets_throttle_holds_the_next_fetch(cluster: FakeCluster) -> None:
    """auto.offset.reset asks broker 0 for the start; its answer throttles the consumer there for 400 ms."""
    cluster.throttle_ms[0, "ListOffsets"] = 400
    cluster.append("t", 0, encode_batch([b"x"], timestamps=1_000))
    async with AsyncConsumer(config(cluster, **{"auto.offset.reset": "earliest"})) as consumer:
        consumer.assign([T0])
        assert [r.value for r in await consumer.poll(3_000)] == [b"x"]
        metrics = consumer.metrics()
    assert held(cluster, 0, "Fetch", after_rpc="ListOffsets") >= [0.4]
    assert metrics["fetch-throttle-time-max"] == 0  # only Fetch answers count in the fetch metric


def test_the_sync_producer_reports_its_metrics(cluster: FakeCluster) -> None:
    cluster.throttle_ms[2, "Produce"] = 300
    with Producer(config(cluster)) as producer:
        assert all(math.isnan(v) for v in producer.metrics().values())  # no answer yet
        producer.send_and_wait("t", b"a", partition=2)
        metrics = producer.metrics()
    assert metrics == {"produce-throttle-time-avg": 300.0, "produce-throttle-time-max": 300.0}
    assert producer.metrics() == metrics  # still readable after close


async def test_every_call_carries_the_client_id_metadata(cluster: FakeCluster) -> None:
    async with AsyncProducer(config(cluster, **{"client.id": "billing-writer"})) as producer:
        await producer.send("t", b"v", partition=0)
    seen = dict(cluster.client_ids)
    cluster.client_ids.clear()
    async with AsyncConsumer(
        config(cluster, **{"client.id": "billing-reader", "auto.offset.reset": "earliest"})
    ) as consumer:
        consumer.assign([T0])
        await consumer.poll(500)
    assert {rpc: set(ids) for rpc, ids in seen.items()} == {
        "Metadata": {"billing-writer"},
        "InitProducerId": {"billing-writer"},
        "Produce": {"billing-writer"},
    }
    assert {rpc: set(ids) for rpc, ids in cluster.client_ids.items()} == {
        "Metadata": {"billing-reader"},
        "ListOffsets": {"billing-reader"},
        "Fetch": {"billing-reader"},
    }
    assert cluster.last_request["Fetch"].client_id == "billing-reader"  # the request field too


async def test_a_client_without_client_id_gets_one_generated_as_kafka_does(cluster: FakeCluster) -> None:
    async with AsyncProducer(config(cluster)) as producer:
        await producer.send("t", b"v", partition=0)
    async with AsyncConsumer(config(cluster, **{"auto.offset.reset": "earliest"})) as consumer:
        consumer.assign([T0])
        await consumer.poll(500)
    (producer_id,) = set(cluster.client_ids["Produce"])
    (consumer_id,) = set(cluster.client_ids["Fetch"])
    assert re.fullmatch(r"producer-\d+", producer_id or "")
    assert re.fullmatch(r"consumer-\d+", consumer_id or "")
    assert cluster.last_request["Produce"].client_id == producer_id


def test_generated_client_ids_follow_kafkas_pattern() -> None:
    servers = {"bootstrap.servers": "h:1"}
    first = with_client_id(servers, ProducerConfig.from_mapping(servers)).client_id
    second = with_client_id(servers, ProducerConfig.from_mapping(servers)).client_id
    assert re.fullmatch(r"producer-\d+", first) and first != second
    txn = {**servers, "transactional.id": "tx"}
    assert with_client_id(txn, ProducerConfig.from_mapping(txn)).client_id == "producer-tx"
    group = {**servers, "group.id": "g"}
    assert re.fullmatch(r"consumer-g-\d+", with_client_id(group, ConsumerConfig.from_mapping(group)).client_id)
    explicit = {**servers, "client.id": ""}  # set, even empty: kept
    assert with_client_id(explicit, ConsumerConfig.from_mapping(explicit)).client_id == ""

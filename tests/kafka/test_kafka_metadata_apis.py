"""Kafka's Metadata on the Kafka listener, answered by the broker's real Metadata service over a real metadata
image, at every served version: Kafka-listener addresses only, topic ids, leaders a client cannot reach here."""

from __future__ import annotations

import uuid
from types import SimpleNamespace
from typing import Any

import pytest
from kafka.protocol.metadata import MetadataRequest
from kafka_harness import call, served

from odradek.broker.dataplane import BrokerService
from odradek.broker.kafka import metadata_apis
from odradek.broker.kafka.apis import ApiRegistry
from odradek.broker.kafka.backend import KafkaBackend
from odradek.client.common.metadata_image import BrokerRegistration, MetadataImage, PartitionRegistration, TopicImage

T_ID = bytes(range(16))
INTERNAL_ID = b"\x09" * 16
# Kafka-listener addresses: broker 3 is live but has none; broker 4 is fenced.
KAFKA = {1: ("kafka-1", 9192), 2: ("kafka-2", 9193), 4: ("kafka-4", 9194)}


def image() -> MetadataImage:
    brokers = {
        b: BrokerRegistration(
            b, bytes([b]) * 16, 10 * b, f"grpc-{b}", 9000 + b, rack="r1" if b == 1 else "", fenced=b == 4
        )
        for b in (1, 2, 3, 4)
    }
    parts = {
        0: PartitionRegistration(T_ID, 0, (1, 2, 4), (1, 2), 1, 5, 7),
        1: PartitionRegistration(T_ID, 1, (3, 1), (3, 1), 3, 2, 2),  # leader without a Kafka address
        2: PartitionRegistration(T_ID, 2, (4, 2), (4,), 4, 1, 1),  # leader fenced
    }
    internal = {0: PartitionRegistration(INTERNAL_ID, 0, (2,), (2,), 2, 0, 0)}
    return MetadataImage(
        offset=40,
        brokers=brokers,
        topics={
            T_ID: TopicImage("t", T_ID, parts),
            INTERNAL_ID: TopicImage("__consumer_offsets", INTERNAL_ID, internal),
        },
        topic_ids={"t": T_ID, "__consumer_offsets": INTERNAL_ID},
    )


def registry(controller_id: int = 9, broker_id: int = 2) -> ApiRegistry:
    img = image()
    data = BrokerService(broker_id, "cluster-x", SimpleNamespace(image=img), controller_id=lambda: controller_id)
    backend: Any = KafkaBackend(
        broker_id=broker_id,
        cluster_id="cluster-x",
        listener="KAFKA",
        image=lambda: img,
        controller_id=lambda: controller_id,
        endpoint=KAFKA.get,
        data=data,
        groups=None,  # type: ignore[arg-type]
        transactions=None,  # type: ignore[arg-type]
        admin=None,  # type: ignore[arg-type]
    )
    r = ApiRegistry()
    metadata_apis.register(r, backend)
    return r


def topics_request(version: int, *names: str) -> MetadataRequest:
    return MetadataRequest(
        version=version,
        topics=[MetadataRequest.MetadataRequestTopic(name=n) for n in names],
        allow_auto_topic_creation=True,
    )


def test_served_versions() -> None:
    assert served(registry(), MetadataRequest) == range(0, 14)


@pytest.mark.parametrize("version", range(0, 14))
async def test_every_version_gives_kafka_addresses_topic_ids_and_unreachable_leaders(version: int) -> None:
    r = await call(registry(), topics_request(version, "t", "missing"), version)
    # Only live brokers with a Kafka address, at that address (never the gRPC host/port).
    assert [(b.node_id, b.host, b.port) for b in r.brokers] == [(1, "kafka-1", 9192), (2, "kafka-2", 9193)]
    if version >= 1:
        assert [b.rack for b in r.brokers] == ["r1", None]
        assert r.controller_id == 2  # the active controller (9) is no broker here: this broker, which forwards
    if version >= 2:
        assert r.cluster_id == "cluster-x"
    t, missing = r.topics
    assert (t.name, t.error_code) == ("t", 0)
    assert (missing.name, missing.error_code) == ("missing", 3)  # UNKNOWN_TOPIC_OR_PARTITION: no auto-creation
    if version >= 10:
        assert t.topic_id == uuid.UUID(bytes=T_ID)
    p0, p1, p2 = t.partitions
    assert (p0.partition_index, p0.error_code, p0.leader_id, p0.replica_nodes, p0.isr_nodes) == (
        0,
        0,
        1,
        [1, 2, 4],
        [1, 2],
    )
    assert (p1.error_code, p1.leader_id) == (5, -1)  # LEADER_NOT_AVAILABLE: its leader has no Kafka address
    assert (p2.error_code, p2.leader_id) == (5, -1)  # fenced leader
    if version >= 5:
        assert p0.offline_replicas == [4]
    if version >= 7:
        assert (p0.leader_epoch, p1.leader_epoch) == (5, 2)
    if version >= 8:
        assert t.authorized_operations is None  # -2147483648: not computed


@pytest.mark.parametrize("version", [0, 1, 9, 12])
async def test_all_topics_and_no_topics(version: int) -> None:
    reg = registry()
    every = MetadataRequest(version=version, topics=[] if version == 0 else None)
    names = [t.name for t in (await call(reg, every, version)).topics]
    assert names == ["__consumer_offsets", "t"]
    internal = (await call(reg, every, version)).topics[0]
    if version >= 1:
        assert internal.is_internal
    if version >= 1:  # v1+: an empty list asks for no topic, only the brokers
        r = await call(reg, MetadataRequest(version=version, topics=[]), version)
        assert r.topics == [] and [b.node_id for b in r.brokers] == [1, 2]


@pytest.mark.parametrize("version", [12, 13])
async def test_topics_by_id(version: int) -> None:
    other = uuid.uuid4()
    request = MetadataRequest(
        version=version,
        topics=[
            MetadataRequest.MetadataRequestTopic(name=None, topic_id=uuid.UUID(bytes=T_ID)),
            MetadataRequest.MetadataRequestTopic(name=None, topic_id=other),
        ],
    )
    r = await call(registry(), request, version)
    known, unknown = r.topics
    assert (known.name, known.topic_id, len(known.partitions)) == ("t", uuid.UUID(bytes=T_ID), 3)
    assert (unknown.error_code, unknown.name, unknown.topic_id) == (100, None, other)  # UNKNOWN_TOPIC_ID


async def test_controller_id_is_the_active_controller_when_it_is_a_kafka_broker() -> None:
    r = await call(registry(controller_id=1), topics_request(12), 12)
    assert r.controller_id == 1


async def test_throttle_time_of_the_request_quota_is_encoded() -> None:
    r = await call(registry(), topics_request(12), 12, throttle_ms=250)
    assert r.throttle_time_ms == 250

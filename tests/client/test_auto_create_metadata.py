"""Which of odradek's clients let a broker create the topics their Metadata requests name: the producer always (as
Kafka's producers), a consumer only with ``allow.auto.create.topics=true``. What the broker then does is shown by
tests/integration/test_auto_create_topics.py."""

from __future__ import annotations

import pytest
from fake_broker import FakeCluster

from odradek.client import AsyncConsumer, AsyncProducer
from odradek.client.config import ConsumerConfig
from odradek.client.errors import ConfigError


def config(cluster: FakeCluster, **overrides: object) -> dict:
    return {"bootstrap.servers": cluster.bootstrap, "retry.backoff.ms": 20, **overrides}


def asked_to_create(cluster: FakeCluster) -> bool:
    return bool(cluster.last_request["Metadata"].allow_auto_topic_creation)


async def test_the_producer_allows_creation() -> None:
    cluster = FakeCluster(1)
    cluster.create_topic("t", 1)
    try:
        async with AsyncProducer(config(cluster)) as producer:
            await producer.partitions_for("t")
            assert asked_to_create(cluster)
    finally:
        cluster.stop()


@pytest.mark.parametrize(("setting", "allowed"), [(None, False), ("false", False), ("true", True), (True, True)])
async def test_a_consumer_allows_creation_only_with_allow_auto_create_topics(setting: object, allowed: bool) -> None:
    cluster = FakeCluster(1)
    cluster.create_topic("t", 1)
    extra = {} if setting is None else {"allow.auto.create.topics": setting}
    try:
        async with AsyncConsumer(config(cluster, **extra)) as consumer:
            await consumer.partitions_for("t")
            assert asked_to_create(cluster) is allowed
    finally:
        cluster.stop()


def test_allow_auto_create_topics_is_a_consumer_boolean() -> None:
    assert ConsumerConfig.from_mapping({"bootstrap.servers": "h:1"}).allow_auto_create_topics is False
    with pytest.raises(ConfigError, match=r"allow\.auto\.create\.topics must be true or false"):
        ConsumerConfig.from_mapping({"bootstrap.servers": "h:1", "allow.auto.create.topics": "yes"})

"""Automatic topic creation on real clusters, as Kafka's ``auto.create.topics.enable`` (on by default): a producer
sending to a topic that does not exist gets it created with the brokers' ``num.partitions`` and
``default.replication.factor``, whichever client sends: librdkafka (confluent-kafka) and kafka-python on the Kafka
listener, odradek's producer on gRPC. A consumer creates a topic it subscribes to only when its client asks
(``allow.auto.create.topics``, off by default in librdkafka and odradek). A name Kafka refuses is refused, and a
cluster started with ``auto.create.topics.enable=false`` creates nothing."""

from __future__ import annotations

import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer as RdConsumer
from confluent_kafka import KafkaError
from confluent_kafka import Producer as RdProducer

from odradek.client.admin import Admin
from odradek.client.consumer import Consumer
from odradek.client.errors import ErrorCode, OdradekError, UnknownTopicOrPartitionError
from odradek.client.producer import Producer
from odradek.deploy.local import DevCluster, running_cluster

from .conftest import wait_for

pytestmark = pytest.mark.integration

PARTITIONS = 3  # the cluster's num.partitions (the built-in default, 1, would not show that it was applied)


@pytest.fixture(scope="module")
def cluster() -> Iterator[DevCluster]:
    """Two brokers (the dev cluster's default.replication.factor is then 2), auto-creation at its default: on."""
    with running_cluster(controllers=1, brokers=2, config={"num.partitions": PARTITIONS}) as c:
        yield c


@pytest.fixture(scope="module")
def admin(cluster: DevCluster) -> Iterator[Admin]:
    with Admin({"bootstrap.servers": cluster.admin_servers, "request.timeout.ms": 10000}) as a:
        yield a


def new_name() -> str:
    return f"auto-{uuid.uuid4().hex[:8]}"


def exists(admin: Admin, name: str) -> bool:
    return name in admin.list_topics()


def assert_created_with_the_defaults(admin: Admin, name: str) -> None:
    wait_for(lambda: exists(admin, name), 30, what=f"topic {name}")
    info = admin.describe_topic(name)
    assert [p.partition for p in info.partitions] == list(range(PARTITIONS))
    assert all(len(p.replicas) == 2 for p in info.partitions)


def rd_produce(bootstrap: str, name: str, **config: Any) -> KafkaError | None:
    """One message through librdkafka: its delivery report's error (None: delivered)."""
    reports: list[KafkaError | None] = []
    producer = RdProducer({"bootstrap.servers": bootstrap, "message.timeout.ms": 20000, **config})
    producer.produce(name, b"v", on_delivery=lambda err, _msg: reports.append(err))
    deadline = time.monotonic() + 30
    while not reports and time.monotonic() < deadline:
        producer.poll(0.2)
    assert reports, "no delivery report"
    return reports[0]


def test_librdkafka_producer_creates_the_topic_it_sends_to(cluster: DevCluster, admin: Admin) -> None:
    name = new_name()
    assert rd_produce(cluster.kafka_bootstrap_servers, name) is None
    assert_created_with_the_defaults(admin, name)


def test_kafka_python_producer_creates_the_topic_it_sends_to(cluster: DevCluster, admin: Admin) -> None:
    from kafka import KafkaProducer

    name = new_name()
    producer = KafkaProducer(bootstrap_servers=cluster.kafka_bootstrap_servers, acks="all", max_block_ms=30000)
    try:
        sent = producer.send(name, b"v").get(timeout=30)
    finally:
        producer.close(timeout=5)
    assert sent.topic == name and sent.offset == 0
    assert_created_with_the_defaults(admin, name)


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed")
def test_kcat_producer_creates_the_topic_it_sends_to(cluster: DevCluster, admin: Admin) -> None:
    name = new_name()
    done = subprocess.run(
        ["kcat", "-b", cluster.kafka_bootstrap_servers, "-P", "-t", name],
        input="v\n",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert_created_with_the_defaults(admin, name)


def test_odradek_producer_creates_the_topic_it_sends_to(cluster: DevCluster, admin: Admin) -> None:
    name = new_name()
    with Producer({"bootstrap.servers": cluster.bootstrap_servers, "max.block.ms": 30000}) as producer:
        sent = producer.send_and_wait(name, b"v", timeout=30)
        assert producer.partitions_for(name) == list(range(PARTITIONS))
    assert (sent.topic, sent.offset) == (name, 0)
    assert_created_with_the_defaults(admin, name)


def rd_subscribe(bootstrap: str, admin: Admin, missing: str, allow: bool) -> list[int]:
    """A librdkafka consumer subscribed to an existing topic and ``missing``, polled until it has the existing one's
    partition, then for three more of its 1 s metadata refreshes (when allowed, until ``missing`` exists, up to 15 s):
    the error codes it reported. librdkafka asks for creation only in its periodic refresh of the topics it already
    uses (its own auto-creation test subscribes the same way), never in the refresh before joining the group."""
    existing = new_name()
    admin.create_topic(existing, 1, 2)
    config = {
        "bootstrap.servers": bootstrap,
        "group.id": f"g-{missing}",
        "topic.metadata.refresh.interval.ms": 1000,
        "allow.auto.create.topics": allow,
    }
    consumer = RdConsumer(config)
    errors: list[int] = []
    try:
        consumer.subscribe([existing, missing])
        deadline = time.monotonic() + 40
        while not consumer.assignment() and time.monotonic() < deadline:
            m = consumer.poll(0.2)
            if m is not None and m.error() is not None:
                errors.append(m.error().code())
        assert consumer.assignment(), "no assignment"
        deadline = time.monotonic() + (15 if allow else 3.5)
        while time.monotonic() < deadline and not exists(admin, missing):
            m = consumer.poll(0.2)
            if m is not None and m.error() is not None:
                errors.append(m.error().code())
    finally:
        consumer.close()
    return errors


def test_librdkafka_consumer_creates_a_subscribed_topic_only_when_allowed(cluster: DevCluster, admin: Admin) -> None:
    refused, allowed = new_name(), new_name()
    errors = rd_subscribe(cluster.kafka_bootstrap_servers, admin, refused, allow=False)  # librdkafka's default
    assert KafkaError.UNKNOWN_TOPIC_OR_PART in errors  # the broker was asked, and said it does not exist
    assert not exists(admin, refused)

    rd_subscribe(cluster.kafka_bootstrap_servers, admin, allowed, allow=True)
    assert_created_with_the_defaults(admin, allowed)


def test_odradek_consumer_creates_a_topic_only_with_allow_auto_create_topics(cluster: DevCluster, admin: Admin) -> None:
    refused, allowed = new_name(), new_name()
    base = {"bootstrap.servers": cluster.bootstrap_servers, "request.timeout.ms": 3000}
    # The default: off. The broker answers that the topic does not exist.
    with Consumer(base) as consumer, pytest.raises(UnknownTopicOrPartitionError):
        consumer.partitions_for(refused)
    assert not exists(admin, refused)

    with Consumer({**base, "group.id": f"g-{allowed}", "allow.auto.create.topics": True}) as consumer:
        consumer.subscribe([allowed])
        deadline = time.monotonic() + 30
        while not exists(admin, allowed) and time.monotonic() < deadline:
            consumer.poll(timeout_ms=200)
    assert_created_with_the_defaults(admin, allowed)


def test_a_name_kafka_refuses_is_refused_and_not_created(cluster: DevCluster, admin: Admin) -> None:
    name = "bad/name"
    with Producer({"bootstrap.servers": cluster.bootstrap_servers, "max.block.ms": 10000}) as producer:
        started = time.monotonic()
        with pytest.raises(OdradekError) as refused:
            producer.send(name, b"v").result(15)
        assert refused.value.code == ErrorCode.INVALID_TOPIC_EXCEPTION
        assert time.monotonic() - started < 8  # refused at once, not after max.block.ms
    error = rd_produce(cluster.kafka_bootstrap_servers, name, **{"message.timeout.ms": 5000})
    assert error is not None and error.code() == KafkaError.TOPIC_EXCEPTION
    assert name not in admin.list_topics(include_internal=True)


def test_a_cluster_with_auto_create_topics_enable_false_creates_nothing(tmp_path: Any) -> None:
    """One combined node of its own, started with the override."""
    config = {"auto.create.topics.enable": False, "num.partitions": PARTITIONS}
    with running_cluster(controllers=1, combined=True, config=config, directory=tmp_path / "off") as off:
        name = new_name()
        producer = Producer({"bootstrap.servers": off.bootstrap_servers, "max.block.ms": 3000})
        with producer, pytest.raises(UnknownTopicOrPartitionError):
            producer.send(name, b"v").result(10)
        # librdkafka fails the message once the topic has been missing for topic.metadata.propagation.max.ms.
        error = rd_produce(off.kafka_bootstrap_servers, name, **{"topic.metadata.propagation.max.ms": 1000})
        assert error is not None and error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
        # kafka-python waits max_block_ms for the topic's metadata, then fails the send, as Kafka's Java producer.
        from kafka import KafkaProducer
        from kafka.errors import KafkaTimeoutError

        kp = KafkaProducer(bootstrap_servers=off.kafka_bootstrap_servers, max_block_ms=2000)
        try:
            with pytest.raises(KafkaTimeoutError):
                kp.send(name, b"v").get(timeout=10)
        finally:
            kp.close(timeout=5)
        with Admin({"bootstrap.servers": off.admin_servers, "request.timeout.ms": 10000}) as a:
            assert name not in a.list_topics()

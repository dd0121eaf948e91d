"""Kafka's usual secured setup on ``dev up --security`` (``running_cluster(security=True)``: one controller, three
brokers, the authorizer on): the Kafka listener is SASL_SSL and only requests client certificates
(``listener.name.kafka.ssl.client.auth = requested``), so a SCRAM user made through the admin API produces and
consumes with confluent-kafka given the CA and its password alone, and a wrong password is an authentication error.
The followers keep fetching over that listener with their node certificates (RF 3, min.insync.replicas 3: an acks=all
produce needs both), and the gRPC broker listener, where brokers call each other, still requires a certificate."""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer as RdConsumer
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka import Producer as RdProducer
from confluent_kafka import TopicPartition as RdTopicPartition

from odradek.client.acls import AclBinding
from odradek.client.admin import Admin
from odradek.client.errors import OdradekError
from odradek.deploy.local import DevCluster, running_cluster

from .conftest import wait_for

pytestmark = pytest.mark.integration

MECHANISM = "SCRAM-SHA-256"
TOPIC = "orders"
GROUP = "readers"
USER = "alice"
COUNT = 20


@pytest.fixture(scope="module")
def cluster() -> Iterator[DevCluster]:
    with running_cluster(controllers=1, brokers=3, security=True) as c:
        yield c


def kafka_config(cluster: DevCluster, password: str) -> dict[str, Any]:
    """What a Kafka user is given: the brokers' Kafka listeners, the CA and a SCRAM login; no client certificate."""
    return {
        "bootstrap.servers": cluster.kafka_bootstrap_servers,
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": cluster.security_config()["ssl.ca.location"],
        "sasl.mechanism": MECHANISM,
        "sasl.username": USER,
        "sasl.password": password,
    }


@pytest.fixture(scope="module")
def user(cluster: DevCluster) -> dict[str, Any]:
    """The SCRAM user ``alice``, created through the admin API with Write and Read on TOPIC and Read on GROUP, and
    logged in with them on every broker's Kafka listener before returning; its confluent-kafka config."""
    password = secrets.token_urlsafe(12)
    with Admin({**cluster.client_config(), "request.timeout.ms": 15000}) as admin:
        admin.create_topic(TOPIC, 1, 3, {"min.insync.replicas": "3"})
        admin.upsert_user_scram_credential(USER, password, MECHANISM)
        acls = [("topic", TOPIC, "write"), ("topic", TOPIC, "read"), ("group", GROUP, "read")]
        admin.create_acls(
            AclBinding(resource_type=kind, resource_name=name, principal=f"User:{USER}", operation=operation)
            for kind, name, operation in acls
        )
    config = kafka_config(cluster, password)
    for address in cluster.kafka_bootstrap_servers.split(","):
        wait_for(lambda address=address: _describes(config, address), 30, 0.5, f"alice's login at {address}")
    return config


def _describes(config: dict[str, Any], address: str) -> bool:
    """Whether the user logs in at ``address`` and may describe TOPIC there (credential and ACLs have arrived)."""
    metadata = RdProducer({**config, "bootstrap.servers": address}).list_topics(TOPIC, timeout=5)
    return metadata.topics[TOPIC].error is None


def test_a_scram_user_without_a_certificate_produces_and_consumes(cluster: DevCluster, user: dict[str, Any]) -> None:
    errors: list[KafkaError | None] = []
    producer = RdProducer({**user, "acks": "all", "message.timeout.ms": 20000})
    for i in range(COUNT):
        producer.produce(TOPIC, b"v-%d" % i, on_delivery=lambda err, _msg: errors.append(err))
    assert producer.flush(30) == 0
    assert errors == [None] * COUNT  # acks=all with min.insync.replicas 3: both followers have every record

    consumer = RdConsumer({**user, "group.id": GROUP, "enable.auto.commit": False})
    consumer.assign([RdTopicPartition(TOPIC, 0, 0)])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    try:
        while len(got) < COUNT and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None:
                assert message.error() is None, message.error()
                got.append(message.value())
    finally:
        consumer.close()
    assert got == [b"v-%d" % i for i in range(COUNT)]


def test_followers_fetch_over_the_kafka_listener_with_their_certificates(
    cluster: DevCluster, user: dict[str, Any]
) -> None:
    """The acks=all produce above needed both followers; they fetched over the Kafka listener, not over gRPC."""
    logs = [n.log_file.read_text(errors="replace") for n in cluster.nodes if n.kafka_port]
    assert not any("fetching over gRPC instead" in log for log in logs)
    assert sum("over its Kafka listener" in log for log in logs) >= 2


def test_a_wrong_password_is_an_authentication_error(cluster: DevCluster, user: dict[str, Any]) -> None:
    errors: list[KafkaError] = []
    producer = RdProducer({**user, "sasl.password": "wrong", "error_cb": errors.append})
    with pytest.raises(KafkaException):
        producer.list_topics(TOPIC, timeout=5)

    def refused() -> bool:
        producer.poll(0.2)  # serves error_cb
        return any(e.code() == KafkaError._AUTHENTICATION for e in errors)

    wait_for(refused, 15, what="an authentication error")


def test_the_grpc_broker_listener_still_requires_a_certificate(cluster: DevCluster, user: dict[str, Any]) -> None:
    """Brokers call each other there as their certificates' principals: SCRAM alone is not let in."""
    config = {
        "bootstrap.servers": cluster.bootstrap_servers,
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": user["ssl.ca.location"],
        "sasl.mechanism": MECHANISM,
        "sasl.username": USER,
        "sasl.password": user["sasl.password"],
        "request.timeout.ms": 5000,
    }
    with Admin(config) as admin, pytest.raises(OdradekError):
        admin.list_topics()

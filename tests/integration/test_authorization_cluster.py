"""Authorization end to end on a secured cluster of real processes (``running_cluster(security=True)``: one
controller, two brokers, TLS everywhere, SCRAM on the client listeners, the authorizer on). A SCRAM user with no
ACLs is refused by odradek's clients and by confluent-kafka on the Kafka listener, and nothing it sent is written;
ACLs added with ``odradek acl add`` through a broker (which forwards to the controller) let it through, a deny beats
them again; groups and transactions run under enforcement with exactly the ACLs Kafka asks for."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import KafkaError
from confluent_kafka import Producer as RdProducer

from odradek.client.admin import Admin
from odradek.client.consumer import Consumer
from odradek.client.errors import (
    ClusterAuthorizationFailedError,
    GroupAuthorizationFailedError,
    TopicAuthorizationFailedError,
    TransactionalIdAuthorizationFailedError,
)
from odradek.client.producer import Producer
from odradek.client.structs import TopicPartition
from odradek.deploy.local import DevCluster, running_cluster

from .conftest import wait_for

pytestmark = pytest.mark.integration

MECHANISM = "SCRAM-SHA-512"


@pytest.fixture(scope="module")
def cluster() -> Iterator[DevCluster]:
    with running_cluster(controllers=1, brokers=2, security=True) as c:
        yield c


@pytest.fixture(scope="module")
def admin(cluster: DevCluster) -> Iterator[Admin]:
    with Admin({**cluster.client_config(), "request.timeout.ms": 15000}) as a:
        yield a


def odradek(cluster: DevCluster, *args: str) -> subprocess.CompletedProcess:
    """The real CLI as the super user ``admin``, through the brokers only: its admin requests are forwarded."""
    env = {**os.environ, "ODRADEK_HOME": str(cluster.directory / "cli-home")}
    env.pop("ODRADEK_BOOTSTRAP_SERVERS", None)
    command = [sys.executable, "-m", "odradek.client.cli.main", *args]
    command += ["--client-config", str(cluster.admin_client_file), "--format", "json"]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=90)


def new_user(cluster: DevCluster, admin: Admin) -> dict[str, Any]:
    """A fresh SCRAM user with no ACLs; its odradek client config (logged in on every broker before returning)."""
    name, password = f"u-{uuid.uuid4().hex[:8]}", secrets.token_urlsafe(12)
    admin.upsert_user_scram_credential(name, password, MECHANISM)
    config = {
        **cluster.client_config(),
        "sasl.mechanism": MECHANISM,
        "sasl.username": name,
        "sasl.password": password,
        "request.timeout.ms": 10000,
    }
    for address in cluster.bootstrap_servers.split(","):
        wait_for(lambda address=address: _lists(config, address), 30, 0.2, "the user's login on every broker")
    return config


def _lists(config: dict[str, Any], address: str) -> bool:
    with Admin({**config, "bootstrap.servers": address}) as a:
        a.list_topics()
    return True


def acl(cluster: DevCluster, action: str, *args: str) -> dict[str, Any]:
    result = odradek(cluster, "acl", action, *args)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def topic(admin: Admin, partitions: int = 1) -> str:
    name = f"t-{uuid.uuid4().hex[:8]}"
    admin.create_topic(name, partitions, 2)
    return name


def end_offsets(cluster: DevCluster, name: str, partitions: int = 1) -> list[int]:
    """What the super user sees at the end of each partition: the proof of what was written."""
    with Consumer(cluster.client_config()) as consumer:
        tps = [TopicPartition(name, p) for p in range(partitions)]
        ends = consumer.end_offsets(tps)
        return [ends[tp] for tp in tps]


def read_all(config: dict[str, Any], name: str, count: int, **extra: Any) -> list[bytes]:
    with Consumer({**config, "auto.offset.reset": "earliest", **extra}) as consumer:
        consumer.assign([TopicPartition(name, 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(got) < count and time.monotonic() < deadline:
            got.extend(r.value for r in consumer.poll(timeout_ms=200) if r.value is not None)
        return got


def test_produce_is_refused_without_write_and_allowed_after_acl_add_until_a_deny(
    cluster: DevCluster, admin: Admin
) -> None:
    user = new_user(cluster, admin)
    principal = f"User:{user['sasl.username']}"
    name = topic(admin)
    refused = Producer({**user, "acks": "all", "enable.idempotence": False})
    with refused as producer, pytest.raises(TopicAuthorizationFailedError):
        producer.send(name, b"refused").result(20)
    assert end_offsets(cluster, name) == [0]  # nothing of the refused send was written

    added = acl(cluster, "add", "--allow-principal", principal, "--operation", "Write", "--topic", name)
    assert added  # the CLI's JSON names what it stored

    def sends() -> bool:
        with Producer({**user, "acks": "all", "enable.idempotence": False}) as producer:
            producer.send(name, b"allowed").result(10)
        return True

    wait_for(sends, 30, 0.2, "the Write ACL on every broker")
    assert end_offsets(cluster, name) == [1]
    with pytest.raises(TopicAuthorizationFailedError):  # Write does not give Read
        read_all(user, name, 1)

    acl(cluster, "add", "--deny-principal", principal, "--operation", "All", "--topic", name[:2],
        "--resource-pattern-type", "prefixed")  # fmt: skip

    def refused_again() -> bool:
        with Producer({**user, "acks": "all", "enable.idempotence": False}) as producer:
            try:
                producer.send(name, b"denied").result(10)
            except TopicAuthorizationFailedError:
                return True
        return False

    wait_for(refused_again, 30, 0.2, "the prefixed deny on every broker")
    acl(cluster, "remove", "--principal", principal)
    assert end_offsets(cluster, name) == [1]


def test_confluent_kafka_on_the_kafka_listener_gets_topic_authorization_failed_then_writes(
    cluster: DevCluster, admin: Admin
) -> None:
    user = new_user(cluster, admin)
    principal = f"User:{user['sasl.username']}"
    name = topic(admin)
    config = {
        "bootstrap.servers": cluster.kafka_bootstrap_servers,
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": user["ssl.ca.location"],
        "ssl.certificate.location": user["ssl.certificate.location"],
        "ssl.key.location": user["ssl.key.location"],
        "sasl.mechanism": MECHANISM,
        "sasl.username": user["sasl.username"],
        "sasl.password": user["sasl.password"],
        "enable.idempotence": False,
        "message.timeout.ms": 8000,
    }

    def produce_once() -> KafkaError | None:
        errors: list[KafkaError | None] = []
        producer = RdProducer(config)
        producer.produce(name, b"v", on_delivery=lambda err, _msg: errors.append(err))
        producer.flush(15)
        assert errors, "no delivery report"
        return errors[0]

    err = produce_once()
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, err
    assert end_offsets(cluster, name) == [0]
    acl(cluster, "add", "--allow-principal", principal, "--operation", "Write", "--topic", name)
    wait_for(lambda: produce_once() is None, 30, 0.2, "confluent-kafka allowed to write")
    assert end_offsets(cluster, name)[0] >= 1


def test_admin_requests_need_their_cluster_and_topic_acls(cluster: DevCluster, admin: Admin) -> None:
    user = new_user(cluster, admin)
    principal = f"User:{user['sasl.username']}"
    hidden = topic(admin)
    mine = f"{user['sasl.username']}-own"
    with Admin(user) as a:
        assert hidden not in a.list_topics()  # topics it may not describe are left out
        with pytest.raises(TopicAuthorizationFailedError):
            a.create_topic(mine, 1, 2)
        with pytest.raises(ClusterAuthorizationFailedError):
            a.describe_acls()
    assert mine not in admin.list_topics()
    acl(cluster, "add", "--allow-principal", principal, "--operation", "Create,Describe", "--topic", mine)

    def creates() -> bool:
        with Admin(user) as a:
            a.create_topic(mine, 1, 2)
        return True

    wait_for(creates, 30, 0.2, "Create on the user's own topic")

    def lists_its_own_only() -> bool:
        with Admin(user) as a:
            topics = a.list_topics()
        return mine in topics and hidden not in topics

    wait_for(lists_its_own_only, 30, 0.2, "the new topic in the user's listing")


def test_a_consumer_group_needs_group_read_and_topic_read(cluster: DevCluster, admin: Admin) -> None:
    user = new_user(cluster, admin)
    principal = f"User:{user['sasl.username']}"
    name = topic(admin)
    with Producer(cluster.client_config()) as producer:
        for i in range(3):
            producer.send(name, f"r{i}".encode(), partition=0)
        producer.flush(20)
    group = f"{user['sasl.username']}-group"
    settings = {**user, "group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False}
    acl(cluster, "add", "--allow-principal", principal, "--operation", "Read", "--topic", name)

    def poll_group() -> list[bytes]:
        with Consumer(settings) as consumer:
            consumer.subscribe([name])
            got: list[bytes] = []
            deadline = time.monotonic() + 20
            while len(got) < 3 and time.monotonic() < deadline:
                got.extend(r.value for r in consumer.poll(timeout_ms=200) if r.value is not None)
            consumer.commit()
            return got

    with pytest.raises(GroupAuthorizationFailedError):
        poll_group()
    assert admin.list_group_offsets(group) == []  # nothing committed while refused
    acl(cluster, "add", "--allow-principal", principal, "--operation", "Read", "--group", group)
    assert wait_for(poll_group, 30, 0.2, "the group Read ACL") == [b"r0", b"r1", b"r2"]
    assert [(o.topic, o.partition, o.offset) for o in admin.list_group_offsets(group)] == [(name, 0, 3)]


def test_transactions_need_transactional_id_write(cluster: DevCluster, admin: Admin) -> None:
    user = new_user(cluster, admin)
    principal = f"User:{user['sasl.username']}"
    name = topic(admin)
    acl(cluster, "add", "--allow-principal", principal, "--operation", "Write,Read", "--topic", name)
    txn_id = f"{user['sasl.username']}-txn"
    settings = {**user, "transactional.id": txn_id}
    with Producer(settings) as producer, pytest.raises(TransactionalIdAuthorizationFailedError):
        producer.init_transactions(20)
    acl(cluster, "add", "--allow-principal", principal, "--operation", "Write", "--transactional-id", txn_id)

    def commits() -> bool:
        with Producer(settings) as producer:
            producer.init_transactions(20)
            producer.begin_transaction()
            producer.send(name, b"committed", partition=0)
            producer.commit_transaction(20)
        return True

    wait_for(commits, 30, 0.2, "the transactional-id Write ACL")
    assert read_all(user, name, 1, **{"isolation.level": "read_committed"}) == [b"committed"]

"""A TLS cluster of real processes: every listener SSL with client certificates required (mTLS between nodes,
followers replicating over the leaders' TLS Kafka listeners), odradek's and librdkafka's clients through it,
certificate reload without restart, and a node of another CA kept out."""

from __future__ import annotations

import signal
import socket
import ssl
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer as KafkaConsumer
from confluent_kafka import Producer as KafkaProducer
from cryptography import x509

from odradek.client import Admin, Consumer, Producer
from odradek.client.errors import NetworkError
from odradek.deploy.certs import load_ca, make_ca, make_leaf
from odradek.deploy.local import TLS_DIR, DevCluster
from odradek.deploy.process import process_state

from .conftest import FAST, start_created, wait_for

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevCluster]:
    created = DevCluster.create(
        tmp_path_factory.mktemp("tls"), 3, 3, overrides={**FAST, "replica.fetch.protocol": "kafka"}, tls=True
    )
    start_created(created)
    yield created
    created.stop_all()


@pytest.fixture(scope="module")
def admin(cluster: DevCluster) -> Iterator[Admin]:
    admin = Admin(
        {**cluster.security_config(), "bootstrap.servers": cluster.admin_servers, "request.timeout.ms": 10000}
    )
    yield admin
    admin.close()


def test_acks_all_produce_and_consume_through_tls_with_replication_over_tls(cluster: DevCluster, admin: Admin) -> None:
    topic = f"t-{uuid.uuid4().hex[:8]}"
    admin.create_topic(topic, 3, 3, {"min.insync.replicas": "3"})
    with Producer(cluster.client_config(acks="all", **{"linger.ms": 0})) as producer:
        futures = [producer.send(topic, b"v%d" % i) for i in range(300)]
        producer.flush(30)
        assert all(f.result(10) for f in futures)  # min.insync.replicas=3: every follower fetched over TLS
    got: list[bytes] = []
    with Consumer(cluster.client_config(**{"auto.offset.reset": "earliest", "group.id": "tls"})) as consumer:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 30
        while len(got) < 300 and time.monotonic() < deadline:
            got.extend(r.value for r in consumer.poll(timeout_ms=200))
    assert sorted(got) == sorted(b"v%d" % i for i in range(300))


def test_a_plaintext_client_gets_a_network_error_naming_tls(cluster: DevCluster) -> None:
    start = time.monotonic()
    with (
        pytest.raises(NetworkError, match=r"security\.protocol=SSL"),
        Admin({"bootstrap.servers": cluster.bootstrap_servers, "request.timeout.ms": 2000}) as admin,
    ):
        admin.describe_cluster()
    assert time.monotonic() - start < 10


def test_librdkafka_produces_and_consumes_over_ssl(cluster: DevCluster, admin: Admin) -> None:
    topic = f"k-{uuid.uuid4().hex[:8]}"
    admin.create_topic(topic, 1, 3)
    ssl_keys = {k: v for k, v in cluster.security_config().items()}
    ssl_keys["security.protocol"] = "ssl"
    producer = KafkaProducer({"bootstrap.servers": cluster.kafka_bootstrap_servers, "acks": "all", **ssl_keys})
    for i in range(50):
        producer.produce(topic, value=b"m%d" % i)
    assert producer.flush(30) == 0
    consumer = KafkaConsumer(
        {
            "bootstrap.servers": cluster.kafka_bootstrap_servers,
            "group.id": "tls",
            "auto.offset.reset": "earliest",
            **ssl_keys,
        }
    )
    consumer.subscribe([topic])
    got = []
    deadline = time.monotonic() + 30
    try:
        while len(got) < 50 and time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is not None:
                assert m.error() is None, m.error()
                got.append(m.value())
    finally:
        consumer.close()
    assert sorted(got) == sorted(b"m%d" % i for i in range(50))


def served_serial(cluster: DevCluster, port: int, alpn: list[str]) -> int:
    tls = cluster.directory / TLS_DIR
    context = ssl.create_default_context(cafile=str(tls / "ca.crt"))
    context.load_cert_chain(str(tls / "admin-client.crt"), str(tls / "admin-client.key"))
    context.set_alpn_protocols(alpn)
    with (
        socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
        context.wrap_socket(raw, server_hostname="127.0.0.1") as conn,
    ):
        der = conn.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der).serial_number


def test_a_brokers_renewed_certificate_serves_new_connections_without_restart(cluster: DevCluster) -> None:
    node = next(n for n in cluster.nodes if n.kafka_port)
    pid = node.pid
    before = served_serial(cluster, node.broker_port, ["h2"])
    assert served_serial(cluster, node.kafka_port, []) == before
    tls = cluster.directory / TLS_DIR
    renewed = make_leaf(load_ca(tls / "ca.crt", tls / "ca.key"), f"node-{node.node_id}", ["127.0.0.1", "localhost"])
    renewed.write(node.directory, "node")
    assert served_serial(cluster, node.broker_port, ["h2"]) == renewed.cert.serial_number != before
    assert served_serial(cluster, node.kafka_port, []) == renewed.cert.serial_number
    assert node.pid == pid and process_state(pid) == "running"
    with Admin({**cluster.security_config(), "bootstrap.servers": f"127.0.0.1:{node.broker_port}"}) as admin:
        assert admin.describe_cluster().controller_leader > 0


def test_a_node_with_a_certificate_of_another_ca_cannot_join(cluster: DevCluster, admin: Admin) -> None:
    node = cluster.nodes[-1]
    cluster.signal(node.node_id, signal.SIGTERM)
    wait_for(lambda: process_state(node.pid) == "stopped", 20, what="the broker to stop")
    stranger = make_leaf(make_ca("another cluster"), f"node-{node.node_id}", ["127.0.0.1", "localhost"])
    saved = {p: p.read_bytes() for p in (node.directory / "node.crt", node.directory / "node.key")}
    stranger.write(node.directory, "node")
    try:
        before = {b.node_id: b for b in admin.describe_cluster().brokers}[node.node_id].epoch
        cluster.start(node.node_id)
        time.sleep(8)  # no event says "never registered": give it well over a heartbeat session to try
        now = {b.node_id: b for b in admin.describe_cluster().brokers}[node.node_id]
        assert now.epoch == before and now.fenced
        assert "CERTIFICATE" in Path(node.log_file).read_text().upper() or process_state(node.pid) != "running"
    finally:
        cluster.signal(node.node_id, signal.SIGKILL) if process_state(node.pid) != "stopped" else None
        wait_for(lambda: process_state(node.pid) == "stopped", 10, what="the broker to stop")
        for path, data in saved.items():
            path.write_bytes(data)
        cluster.start(node.node_id)

"""SCRAM on a real cluster (one controller, one broker, every listener TLS with its own CA): the Kafka listener is
SASL_PLAINTEXT and the gRPC broker listener SASL_SSL (client certificates required). Users are created through the
metadata log with ``odradek user create`` over the controller listener, the one place a first credential can be
created from; then confluent-kafka, kafka-python and odradek's own clients log in with SCRAM-SHA-256 and -512, a
wrong password is refused with SASL_AUTHENTICATION_FAILED and a closed connection, and a deleted user cannot log in
again."""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import struct
import subprocess
import sys
import time
import uuid

import pytest
import scramp
from confluent_kafka import Consumer as RdConsumer
from confluent_kafka import Producer as RdProducer
from confluent_kafka import TopicPartition as RdTopicPartition
from kafka.protocol.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)

from odradek.client.admin import Admin
from odradek.client.consumer import Consumer
from odradek.client.errors import AuthenticationFailedError, ErrorCode, OdradekError
from odradek.client.producer import Producer
from odradek.client.structs import TopicPartition
from odradek.deploy.local import DevCluster, process_state, run_sync

from .conftest import wait_for

MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
COUNT = 20
SASL_LISTENERS = {
    # DevCluster's listener names under tls=True: SSL (gRPC broker), CONTROLLER, KAFKA.
    "listener.security.protocol.map": "SSL:SASL_SSL,CONTROLLER:SSL,KAFKA:SASL_PLAINTEXT",
}

pytestmark = [pytest.mark.integration, pytest.mark.odradek_cluster(tls=True, config=SASL_LISTENERS)]


def odradek(cluster: DevCluster, *args: str) -> subprocess.CompletedProcess:
    """The real CLI against the controller listener, with the cluster's TLS settings (no SASL there)."""
    tls = [arg for key, value in cluster.security_config().items() for arg in ("-X", f"{key}={value}")]
    env = {**os.environ, "ODRADEK_HOME": str(cluster.directory / "home")}
    env.pop("ODRADEK_BOOTSTRAP_SERVERS", None)
    command = [sys.executable, "-m", "odradek.client.cli.main", *args, "-X", cluster.controller_servers, *tls]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=90)


def grpc_sasl(cluster: DevCluster, user: str, password: str, mechanism: str) -> dict[str, str]:
    """odradek's clients on the SASL_SSL broker listener: the TLS files and the SCRAM login."""
    return {
        **cluster.client_config(),
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
    }


def kafka_sasl(cluster: DevCluster, user: str, password: str, mechanism: str) -> dict[str, str]:
    """librdkafka on the SASL_PLAINTEXT Kafka listener."""
    return {
        "bootstrap.servers": cluster.kafka_bootstrap_servers,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
    }


def logs_in(config: dict[str, str]) -> bool:
    """Whether odradek's admin client logs in on the broker's gRPC listener (the credential reached the broker)."""
    with Admin({**config, "request.timeout.ms": 3000}) as admin:
        try:
            admin.list_topics()
        except AuthenticationFailedError:
            return False
    return True


@pytest.fixture
def user(odradek_cluster: DevCluster) -> tuple[str, str]:
    """A user with both mechanisms' credentials, created with the CLI over the controller listener."""
    name, password = f"u-{uuid.uuid4().hex[:6]}", f"pw-{uuid.uuid4().hex}"
    for mechanism in MECHANISMS:
        created = odradek(odradek_cluster, "user", "create", name, "-p", password, "--mechanism", mechanism)
        assert created.returncode == 0, created.stderr
    config = grpc_sasl(odradek_cluster, name, password, MECHANISMS[1])
    wait_for(lambda: logs_in(config), 15, what="the credential on the broker")
    return name, password


def new_topic(cluster: DevCluster) -> str:
    topic = f"t-{uuid.uuid4().hex[:8]}"
    created = odradek(cluster, "topic", "create", topic)
    assert created.returncode == 0, created.stderr
    return topic


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_librdkafka_and_kafka_python_produce_and_consume_on_the_kafka_listener(
    odradek_cluster: DevCluster, user: tuple[str, str], mechanism: str
) -> None:
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KpTopicPartition

    c, (name, password) = odradek_cluster, user
    topic = new_topic(c)
    sasl = kafka_sasl(c, name, password, mechanism)
    producer = RdProducer({**sasl, "acks": "all"})
    for i in range(COUNT):
        producer.produce(topic, value=b"rd-%d" % i)
    assert producer.flush(30) == 0
    kp = {
        "bootstrap_servers": c.kafka_bootstrap_servers,
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": mechanism,
        "sasl_plain_username": name,
        "sasl_plain_password": password,
    }
    kp_producer = KafkaProducer(acks="all", **kp)
    for i in range(COUNT):
        kp_producer.send(topic, value=b"kp-%d" % i)
    kp_producer.flush(30)
    kp_producer.close()
    expected = [b"rd-%d" % i for i in range(COUNT)] + [b"kp-%d" % i for i in range(COUNT)]

    consumer = RdConsumer({**sasl, "group.id": f"g-{uuid.uuid4().hex[:6]}", "enable.auto.commit": False})
    consumer.assign([RdTopicPartition(topic, 0, 0)])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    try:
        while len(got) < len(expected) and time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is not None:
                assert m.error() is None, m.error()
                got.append(m.value())
    finally:
        consumer.close()
    assert got == expected

    kp_consumer = KafkaConsumer(consumer_timeout_ms=20000, auto_offset_reset="earliest", **kp)
    kp_consumer.assign([KpTopicPartition(topic, 0)])
    kp_got = []
    for record in kp_consumer:
        kp_got.append(record.value)
        if len(kp_got) == len(expected):
            break
    kp_consumer.close()
    assert kp_got == expected


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_odradek_clients_log_in_on_the_sasl_ssl_grpc_listener(
    odradek_cluster: DevCluster, user: tuple[str, str], mechanism: str
) -> None:
    c, (name, password) = odradek_cluster, user
    topic = new_topic(c)
    config = grpc_sasl(c, name, password, mechanism)
    with Producer(config) as producer:
        for f in [producer.send(topic, b"od-%d" % i) for i in range(COUNT)]:
            f.result(15)
    with Consumer({**config, "auto.offset.reset": "earliest"}) as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(got) < COUNT and time.monotonic() < deadline:
            got.extend(r.value for r in consumer.poll(timeout_ms=200))
    assert got == [b"od-%d" % i for i in range(COUNT)]


def _frame(sock: socket.socket, request: object, correlation_id: int) -> bytes:
    """Send one request; return its response's body after the correlation id, or b"" once the broker closed."""
    request.with_header(correlation_id=correlation_id, client_id="raw")  # type: ignore[attr-defined]
    body = request.encode(framed=False, header=True)  # type: ignore[attr-defined]
    sock.sendall(struct.pack(">i", len(body)) + body)
    head = sock.recv(4, socket.MSG_WAITALL)
    if len(head) < 4:
        return b""
    return sock.recv(struct.unpack(">i", head)[0], socket.MSG_WAITALL)[4:]


def test_a_wrong_password_is_an_authentication_failure_and_a_closed_connection(
    odradek_cluster: DevCluster, user: tuple[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    c, (name, _) = odradek_cluster, user
    host, port = c.kafka_bootstrap_servers.split(",")[0].rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        handshake = SaslHandshakeResponse.decode(
            _frame(sock, SaslHandshakeRequest(version=1, mechanism="SCRAM-SHA-256"), 1), version=1
        )
        assert handshake.error_code == ErrorCode.NONE
        client = scramp.ScramClient(["SCRAM-SHA-256"], name, "not-the-password")
        first = _frame(sock, SaslAuthenticateRequest(version=1, auth_bytes=client.get_client_first().encode()), 2)
        client.set_server_first(SaslAuthenticateResponse.decode(first, version=1).auth_bytes.decode())
        final = _frame(sock, SaslAuthenticateRequest(version=1, auth_bytes=client.get_client_final().encode()), 3)
        assert SaslAuthenticateResponse.decode(final, version=1).error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert sock.recv(1) == b""  # closed by the broker

    errors: list[str] = []
    producer = RdProducer(
        {**kafka_sasl(c, name, "not-the-password", "SCRAM-SHA-512"), "error_cb": lambda e: errors.append(str(e))}
    )
    deadline = time.monotonic() + 20
    while not errors and time.monotonic() < deadline:
        producer.poll(0.2)
    assert "Authentication failed" in "; ".join(errors), errors

    from kafka import KafkaProducer
    from kafka.errors import KafkaTimeoutError

    caplog.set_level(logging.WARNING, logger="kafka")
    with pytest.raises(KafkaTimeoutError):  # kafka-python logs the refusal and retries until its bootstrap timeout
        KafkaProducer(
            bootstrap_servers=c.kafka_bootstrap_servers,
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="SCRAM-SHA-256",
            sasl_plain_username=name,
            sasl_plain_password="not-the-password",
            bootstrap_timeout_ms=3000,
        )
    assert "SaslAuthenticationFailedError" in caplog.text

    assert not logs_in(grpc_sasl(c, name, "not-the-password", "SCRAM-SHA-256"))


def test_a_deleted_user_cannot_log_in_again(odradek_cluster: DevCluster, user: tuple[str, str]) -> None:
    c, (name, password) = odradek_cluster, user
    deleted = odradek(c, "user", "delete", name, "--format", "json")
    assert deleted.returncode == 0, deleted.stderr
    listed = odradek(c, "user", "list", "--format", "json")
    assert name not in json.dumps(json.loads(listed.stdout))
    for mechanism in MECHANISMS:
        config = grpc_sasl(c, name, password, mechanism)
        wait_for(lambda config=config: not logs_in(config), 15, what=f"{mechanism} login refused after the delete")
    errors: list[str] = []
    producer = RdProducer(
        {**kafka_sasl(c, name, password, "SCRAM-SHA-256"), "error_cb": lambda e: errors.append(str(e))}
    )
    deadline = time.monotonic() + 20
    while not errors and time.monotonic() < deadline:
        producer.poll(0.2)
    assert "Authentication failed" in "; ".join(errors), errors


def _kafka_login(address: tuple[str, int], name: str, password: str) -> int | None:
    """One SCRAM-SHA-256 login on the Kafka listener: the broker's error code, or None when it could not be reached
    or did not answer within the socket timeout (a broker still starting holds its connections)."""
    try:
        with socket.create_connection(address, timeout=5) as sock:
            handshake = _frame(sock, SaslHandshakeRequest(version=1, mechanism="SCRAM-SHA-256"), 1)
            if not handshake:
                return None
            error = SaslHandshakeResponse.decode(handshake, version=1).error_code
            if error != ErrorCode.NONE:
                return error
            client = scramp.ScramClient(["SCRAM-SHA-256"], name, password)
            answer = SaslAuthenticateResponse.decode(
                _frame(sock, SaslAuthenticateRequest(version=1, auth_bytes=client.get_client_first().encode()), 2),
                version=1,
            )
            if answer.error_code != ErrorCode.NONE:
                return answer.error_code
            client.set_server_first(answer.auth_bytes.decode())
            final = _frame(sock, SaslAuthenticateRequest(version=1, auth_bytes=client.get_client_final().encode()), 3)
            return SaslAuthenticateResponse.decode(final, version=1).error_code
    except OSError:
        return None


def _grpc_login(config: dict[str, str]) -> bool | None:
    """Whether odradek's client logs in on the gRPC listener; None when the broker did not answer in time."""
    try:
        return logs_in(config)
    except OdradekError as e:
        if isinstance(e, AuthenticationFailedError):
            raise
        return None


def test_a_restarted_broker_refuses_no_valid_login_while_it_replays_the_metadata_log(
    odradek_cluster: DevCluster, user: tuple[str, str]
) -> None:
    """A restarted broker learns its users by replaying the metadata log. Until it has, its listeners must not answer
    (a Kafka broker enables request processing once it is unfenced): a valid password is never refused."""
    c, (name, password) = odradek_cluster, user
    broker = next(n.node_id for n in c.nodes if n.roles == ["broker"])
    host, port = c.kafka_bootstrap_servers.split(",")[0].rsplit(":", 1)
    c.signal(broker, signal.SIGKILL)
    wait_for(lambda: process_state(c.node(broker).pid) == "stopped", 10, what="the broker to exit")
    c.start(broker)
    kafka: list[int | None] = []
    deadline = time.monotonic() + 40
    while ErrorCode.NONE not in kafka and time.monotonic() < deadline:
        kafka.append(_kafka_login((host, int(port)), name, password))
        time.sleep(0.02)
    assert kafka[-1] == ErrorCode.NONE and set(kafka) <= {None, ErrorCode.NONE}, kafka

    c.signal(broker, signal.SIGKILL)
    wait_for(lambda: process_state(c.node(broker).pid) == "stopped", 10, what="the broker to exit")
    c.start(broker)
    config = grpc_sasl(c, name, password, "SCRAM-SHA-512")
    grpc_answers: list[bool | None] = []
    deadline = time.monotonic() + 40
    while True not in grpc_answers and time.monotonic() < deadline:
        grpc_answers.append(_grpc_login(config))
    assert grpc_answers[-1] is True and False not in grpc_answers, grpc_answers
    run_sync(c.wait_ready(30))

"""SCRAM on a node's Kafka listener (SASL_PLAINTEXT), with unmodified Kafka clients: librdkafka (confluent-kafka) and
kafka-python produce and consume with SCRAM-SHA-256 and -512; a wrong password is answered
SASL_AUTHENTICATION_FAILED and the connection closed; a request before authentication closes the connection.

The node runs in-process with its credential lookup replaced (the credentials' metadata records are another
change's); everything from the socket to the log is the real node."""

from __future__ import annotations

import asyncio
import socket
import struct
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest
from kafka.protocol.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)

from odradek.broker.config import ConfigError, NodeConfig
from odradek.broker.node import Node
from odradek.broker.storage import format_storage
from odradek.client.admin import AsyncAdmin
from odradek.client.common.scram import Mechanism, ScramCredential, make_credential
from odradek.client.errors import ErrorCode
from odradek.deploy.process import free_port

PASSWORDS = {"alice": "alice-secret", "bob": "bob-secret"}
CREDENTIALS = {(u, m): make_credential(m, pw) for u, pw in PASSWORDS.items() for m in Mechanism}
COUNT = 50


def lookup(user: str, mechanism: Mechanism) -> ScramCredential | None:
    return CREDENTIALS.get((user, mechanism))


@pytest.fixture
async def node(tmp_path: Path) -> AsyncIterator[Node]:
    n = await start_node(tmp_path)
    try:
        yield n
    finally:
        await n.stop()


async def start_node(tmp_path: Path, **extra: object) -> Node:
    controller, broker, kafka = free_port(), free_port(), free_port()
    config = NodeConfig(
        {
            "process.roles": "broker,controller",
            "node.id": 1,
            "controller.quorum.voters": f"1@127.0.0.1:{controller}",
            "listeners": (
                f"PLAINTEXT://127.0.0.1:{broker},CONTROLLER://127.0.0.1:{controller},SASL_PLAINTEXT://127.0.0.1:{kafka}"
            ),
            "kafka.listener.names": "SASL_PLAINTEXT",
            "log.dirs": str(tmp_path / "data"),
            "offsets.topic.replication.factor": 1,
            "offsets.topic.num.partitions": 1,
            "group.initial.rebalance.delay.ms": 0,
            **extra,
        }
    )
    format_storage(config, "sasl-test")
    n = Node(config)
    n.scram_lookup = lookup
    await n.start()
    try:
        async with asyncio.timeout(20):
            await n.broker.lifecycle.registered.wait()
            while not n.sm.image.active_brokers():  # unfenced: the controller can place a topic's replicas
                await asyncio.sleep(0.02)
    except BaseException:
        await n.stop()
        raise
    return n


async def new_topic(node: Node) -> str:
    name = f"s-{uuid.uuid4().hex[:8]}"
    async with AsyncAdmin({"bootstrap.servers": str(node.config.broker_listener)}) as admin:
        await admin.create_topic(name, 1, 1)
    return name


def bootstrap(node: Node) -> str:
    return str(node.config.kafka_listener)


def rdkafka_round_trip(servers: str, topic: str, mechanism: str, user: str, password: str) -> list[bytes]:
    sasl = {
        "bootstrap.servers": servers,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
    }
    producer = Producer({**sasl, "acks": "all"})
    for i in range(COUNT):
        producer.produce(topic, value=b"%s-%d" % (mechanism.encode(), i))
    assert producer.flush(30) == 0
    consumer = Consumer({**sasl, "group.id": f"g-{uuid.uuid4().hex[:6]}", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    try:
        while len(got) < COUNT and time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is not None:
                assert m.error() is None, m.error()
                got.append(m.value())
    finally:
        consumer.close()
    return got


async def test_librdkafka_produces_and_consumes_with_both_scram_mechanisms(node: Node) -> None:
    for mechanism in Mechanism:
        topic = await new_topic(node)
        got = await asyncio.to_thread(
            rdkafka_round_trip, bootstrap(node), topic, mechanism.value, "alice", "alice-secret"
        )
        assert got == [b"%s-%d" % (mechanism.value.encode(), i) for i in range(COUNT)]


def rdkafka_wrong_password(servers: str) -> str:
    errors: list[str] = []
    producer = Producer(
        {
            "bootstrap.servers": servers,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.username": "alice",
            "sasl.password": "wrong",
            "error_cb": lambda e: errors.append(str(e)),
        }
    )
    deadline = time.monotonic() + 20
    while not errors and time.monotonic() < deadline:
        producer.poll(0.2)
    with pytest.raises(KafkaException):
        producer.list_topics(timeout=1)
    return "; ".join(errors)


async def test_librdkafka_with_a_wrong_password_is_refused_as_an_authentication_failure(node: Node) -> None:
    message = await asyncio.to_thread(rdkafka_wrong_password, bootstrap(node))
    assert "Authentication failed" in message and "invalid credentials" in message


def kafka_python_round_trip(servers: str, topic: str, mechanism: str) -> list[bytes]:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    sasl = {
        "bootstrap_servers": servers,
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": mechanism,
        "sasl_plain_username": "bob",
        "sasl_plain_password": "bob-secret",
    }
    producer = KafkaProducer(acks="all", **sasl)
    for i in range(COUNT):
        producer.send(topic, value=b"kp-%d" % i)
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer(consumer_timeout_ms=20000, auto_offset_reset="earliest", **sasl)
    consumer.assign([TopicPartition(topic, 0)])
    got = []
    for record in consumer:
        got.append(record.value)
        if len(got) == COUNT:
            break
    consumer.close()
    return got


@pytest.mark.parametrize("mechanism", [m.value for m in Mechanism])
async def test_kafka_python_produces_and_consumes(node: Node, mechanism: str) -> None:
    topic = await new_topic(node)
    got = await asyncio.to_thread(kafka_python_round_trip, bootstrap(node), topic, mechanism)
    assert got == [b"kp-%d" % i for i in range(COUNT)]


# -- raw frames ------------------------------------------------------------------------------------------------


def send(sock: socket.socket, request: object, correlation_id: int) -> None:
    request.with_header(correlation_id=correlation_id, client_id="raw")  # type: ignore[attr-defined]
    frame = request.encode(framed=False, header=True)  # type: ignore[attr-defined]
    sock.sendall(struct.pack(">i", len(frame)) + frame)


def receive(sock: socket.socket) -> bytes:
    """One response frame's body after the correlation id (header v0), or b"" at EOF."""
    head = sock.recv(4, socket.MSG_WAITALL)
    if len(head) < 4:
        return b""
    (size,) = struct.unpack(">i", head)
    data = sock.recv(size, socket.MSG_WAITALL)
    return data[4:]


def closed(sock: socket.socket) -> bool:
    return sock.recv(1) == b""


async def test_a_request_before_authentication_closes_the_connection(node: Node) -> None:
    host, port = node.config.kafka_listener.host, node.config.kafka_listener.port

    def scenario() -> None:
        with socket.create_connection((host, port), timeout=10) as sock:
            send(sock, ApiVersionsRequest(version=0), 1)  # allowed: clients negotiate before authenticating
            versions = ApiVersionsResponse.decode(receive(sock), version=0)
            ranges = {k.api_key: (k.min_version, k.max_version) for k in versions.api_keys}
            assert ranges[17] == (1, 1) and ranges[36] == (0, 2)  # SaslHandshake v0 is not offered
            send(sock, MetadataRequest(version=1, topics=None), 2)
            assert closed(sock)

    await asyncio.to_thread(scenario)


async def test_a_failed_exchange_is_answered_then_the_connection_closed(node: Node) -> None:
    import scramp

    host, port = node.config.kafka_listener.host, node.config.kafka_listener.port

    def scenario() -> None:
        with socket.create_connection((host, port), timeout=10) as sock:
            send(sock, SaslHandshakeRequest(version=1, mechanism="SCRAM-SHA-512"), 1)
            handshake = SaslHandshakeResponse.decode(receive(sock), version=1)
            assert handshake.error_code == ErrorCode.NONE
            client = scramp.ScramClient(["SCRAM-SHA-512"], "alice", "not-her-password")
            send(sock, SaslAuthenticateRequest(version=1, auth_bytes=client.get_client_first().encode()), 2)
            first = SaslAuthenticateResponse.decode(receive(sock), version=1)
            assert first.error_code == ErrorCode.NONE
            client.set_server_first(first.auth_bytes.decode())
            send(sock, SaslAuthenticateRequest(version=1, auth_bytes=client.get_client_final().encode()), 3)
            final = SaslAuthenticateResponse.decode(receive(sock), version=1)
            assert final.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
            assert "invalid credentials" in final.error_message
            assert closed(sock)

        with socket.create_connection((host, port), timeout=10) as sock:
            send(sock, SaslHandshakeRequest(version=1, mechanism="PLAIN"), 1)
            handshake = SaslHandshakeResponse.decode(receive(sock), version=1)
            assert handshake.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
            assert handshake.mechanisms == ["SCRAM-SHA-256", "SCRAM-SHA-512"]
            assert closed(sock)

    await asyncio.to_thread(scenario)


def failed_login(sock: socket.socket) -> None:
    """A SCRAM exchange with a wrong password, up to the broker's SASL_AUTHENTICATION_FAILED answer."""
    import scramp

    send(sock, SaslHandshakeRequest(version=1, mechanism="SCRAM-SHA-256"), 1)
    assert SaslHandshakeResponse.decode(receive(sock), version=1).error_code == ErrorCode.NONE
    client = scramp.ScramClient(["SCRAM-SHA-256"], "alice", "wrong")
    send(sock, SaslAuthenticateRequest(version=1, auth_bytes=client.get_client_first().encode()), 2)
    client.set_server_first(SaslAuthenticateResponse.decode(receive(sock), version=1).auth_bytes.decode())
    send(sock, SaslAuthenticateRequest(version=1, auth_bytes=client.get_client_final().encode()), 3)
    assert SaslAuthenticateResponse.decode(receive(sock), version=1).error_code == ErrorCode.SASL_AUTHENTICATION_FAILED


async def test_the_close_after_a_failed_authentication_waits_connection_failed_authentication_delay_ms(
    tmp_path: Path,
) -> None:
    """Kafka's connection.failed.authentication.delay.ms: the answer comes at once, the close only after the
    delay (here 3 s: still open 0.5 s later, closed within a few more seconds); 0 closes at once."""
    import select

    for delay_ms, open_after_answer in ((3000, True), (0, False)):
        node = await start_node(tmp_path / str(delay_ms), **{"connection.failed.authentication.delay.ms": delay_ms})
        address = (node.config.kafka_listener.host, node.config.kafka_listener.port)

        def scenario(address: tuple[str, int] = address, open_after_answer: bool = open_after_answer) -> None:
            with socket.create_connection(address, timeout=10) as sock:
                failed_login(sock)
                readable, _, _ = select.select([sock], [], [], 0.5)
                assert (not readable) is open_after_answer  # EOF makes the socket readable
                assert closed(sock)

        try:
            await asyncio.to_thread(scenario)
        finally:
            await node.stop()


def handshake(host: str, port: int, mechanism: str) -> tuple[int, list[str]]:
    with socket.create_connection((host, port), timeout=10) as sock:
        send(sock, SaslHandshakeRequest(version=1, mechanism=mechanism), 1)
        answer = SaslHandshakeResponse.decode(receive(sock), version=1)
        return answer.error_code, answer.mechanisms


async def test_sasl_enabled_mechanisms_is_what_the_handshake_accepts(tmp_path: Path) -> None:
    n = await start_node(tmp_path, **{"sasl.enabled.mechanisms": "SCRAM-SHA-512"})
    try:
        listener = n.config.kafka_listener
        assert await asyncio.to_thread(handshake, listener.host, listener.port, "SCRAM-SHA-256") == (
            ErrorCode.UNSUPPORTED_SASL_MECHANISM,
            ["SCRAM-SHA-512"],
        )
        assert await asyncio.to_thread(handshake, listener.host, listener.port, "SCRAM-SHA-512") == (
            ErrorCode.NONE,
            ["SCRAM-SHA-512"],
        )
    finally:
        await n.stop()


@pytest.mark.parametrize("value", ["PLAIN", "GSSAPI", "SCRAM-SHA-256,OAUTHBEARER", ""])
def test_sasl_enabled_mechanisms_refuses_what_odradek_does_not_offer(value: str) -> None:
    base = {"process.roles": "broker", "node.id": 1, "controller.quorum.voters": "2@h:1"}
    with pytest.raises(ConfigError, match=r"'sasl\.enabled\.mechanisms'"):
        NodeConfig({**base, "sasl.enabled.mechanisms": value})

"""SCRAM on a node's gRPC broker listener (SASL_SSL: brokers call each other there with their certificates, so it
requires client certificates) with odradek's own clients: they log in per channel and again once the session is
gone; a wrong password fails at once; a call with a session token that is not live, or made on another connection,
is refused UNAUTHENTICATED before any service runs (a call without a token is its certificate's principal:
tests/security/test_mtls_principals.py).

The node runs in-process with its credential lookup replaced (the credentials' metadata records are another
change's)."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest

from odradek.broker.config import NodeConfig
from odradek.broker.node import Node
from odradek.broker.storage import format_storage
from odradek.client import AsyncConsumer, AsyncProducer, TopicPartition
from odradek.client.admin import AsyncAdmin
from odradek.client.authentication import SESSION_KEY
from odradek.client.common.scram import Mechanism, ScramCredential, make_credential
from odradek.client.errors import AuthenticationFailedError, ConfigError, ErrorCode
from odradek.client.quotas import ANONYMOUS, PRODUCER_BYTE_RATE, entity
from odradek.deploy.certs import make_ca, make_leaf
from odradek.deploy.process import free_port
from odradek.proto import admin_pb2, admin_pb2_grpc, security_pb2, security_pb2_grpc

CREDENTIALS = {("carol", m): make_credential(m, "carol-secret") for m in Mechanism}


def lookup(user: str, mechanism: Mechanism) -> ScramCredential | None:
    return CREDENTIALS.get((user, mechanism))


@pytest.fixture
async def node(tmp_path: Path) -> AsyncIterator[Node]:
    controller, broker = free_port(), free_port()
    ca = make_ca()
    ca.write(tmp_path, "ca")
    make_leaf(ca, "node-1", ["127.0.0.1"]).write(tmp_path, "node")
    make_leaf(ca, "app").write(tmp_path, "app")
    config = NodeConfig(
        {
            "process.roles": "broker,controller",
            "node.id": 1,
            "controller.quorum.voters": f"1@127.0.0.1:{controller}",
            "listeners": f"SASL_SSL://127.0.0.1:{broker},CONTROLLER://127.0.0.1:{controller}",
            "ssl.ca.location": str(tmp_path / "ca.crt"),
            "ssl.certificate.location": str(tmp_path / "node.crt"),
            "ssl.key.location": str(tmp_path / "node.key"),
            "ssl.client.auth": "required",
            "log.dirs": str(tmp_path / "data"),
        }
    )
    format_storage(config, "sasl-grpc-test")
    n = Node(config)
    n.scram_lookup = lookup
    await n.start()
    try:
        async with asyncio.timeout(20):
            await n.broker.lifecycle.registered.wait()
            while not n.sm.image.active_brokers():  # unfenced: the controller can place a topic's replicas
                await asyncio.sleep(0.02)
        yield n
    finally:
        await n.stop()


def client_config(node: Node, password: str = "carol-secret", mechanism: str = "SCRAM-SHA-512") -> dict:
    return {
        "bootstrap.servers": str(node.config.broker_listener),
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": node.config["ssl.ca.location"],
        "ssl.certificate.location": node.config["ssl.ca.location"].replace("ca.crt", "app.crt"),
        "ssl.key.location": node.config["ssl.ca.location"].replace("ca.crt", "app.key"),
        "sasl.mechanism": mechanism,
        "sasl.username": "carol",
        "sasl.password": password,
    }


@pytest.mark.parametrize("mechanism", [m.value for m in Mechanism])
async def test_odradek_clients_log_in_and_produce_and_consume(node: Node, mechanism: str) -> None:
    topic = f"g-{uuid.uuid4().hex[:8]}"
    config = client_config(node, mechanism=mechanism)
    async with AsyncAdmin({**config, "request.timeout.ms": 20_000}) as admin:
        await admin.create_topic(topic, 1, 1)
    async with AsyncProducer({**config, "linger.ms": 0}) as producer:
        for i in range(20):
            await producer.send_and_wait(topic, b"v%d" % i)
    assert node.grpc_sessions is not None
    node.grpc_sessions._sessions.clear()  # the broker forgets every session: the consumer's channels log in again
    got: list[bytes] = []
    async with AsyncConsumer({**config, "auto.offset.reset": "earliest"}) as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        async with asyncio.timeout(20):
            while len(got) < 20:
                got += [r.value for r in await consumer.poll(500)]
    assert got == [b"v%d" % i for i in range(20)]


async def test_a_session_dropped_by_the_broker_is_renewed_transparently(node: Node) -> None:
    async with AsyncAdmin(client_config(node)) as admin:
        await admin.list_topics()
        assert node.grpc_sessions is not None and node.grpc_sessions.session_count == 1
        node.grpc_sessions._sessions.clear()
        await admin.list_topics()  # UNAUTHENTICATED, a new login, the call again
        assert node.grpc_sessions.session_count == 1


async def test_a_wrong_password_fails_fast_with_authentication_failed(node: Node) -> None:
    started = time.monotonic()
    async with AsyncAdmin({**client_config(node, password="wrong"), "request.timeout.ms": 30_000}) as admin:
        with pytest.raises(AuthenticationFailedError, match="invalid credentials"):
            await admin.list_topics()
    assert time.monotonic() - started < 5  # not retried until the request timeout


async def test_calls_without_a_session_of_their_own_connection_are_unauthenticated(node: Node) -> None:
    address = str(node.config.broker_listener)
    ca = node.config["ssl.ca.location"]
    read = lambda name: Path(ca).with_name(name).read_bytes()  # noqa: E731
    app = grpc.ssl_channel_credentials(read("ca.crt"), read("app.key"), read("app.crt"))
    async with (
        grpc.aio.secure_channel(address, app) as a,
        grpc.aio.secure_channel(
            address,
            app,
            options=[("grpc.use_local_subchannel_pool", 1)],  # its own TCP connection, not a's
        ) as b,
    ):
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await admin_pb2_grpc.AdminStub(a).DescribeCluster(
                admin_pb2.DescribeClusterRequest(), metadata=((SESSION_KEY, "no-such-session"),), timeout=10
            )
        assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
        assert "SASL_AUTHENTICATION_FAILED" in (refused.value.details() or "")

        import scramp

        auth = security_pb2_grpc.AuthenticationStub(a)
        c = scramp.ScramClient(["SCRAM-SHA-256"], "carol", "carol-secret")
        first = await auth.SaslAuthenticate(
            security_pb2.SaslAuthenticateRequest(mechanism="SCRAM-SHA-256", auth_bytes=c.get_client_first().encode())
        )
        c.set_server_first(first.auth_bytes.decode())
        final = await auth.SaslAuthenticate(
            security_pb2.SaslAuthenticateRequest(exchange=first.exchange, auth_bytes=c.get_client_final().encode())
        )
        assert final.error == ErrorCode.NONE and final.session_lifetime_ms > 0
        token = ((SESSION_KEY, final.session_token),)
        await admin_pb2_grpc.AdminStub(a).DescribeCluster(
            admin_pb2.DescribeClusterRequest(), metadata=token, timeout=10
        )
        with pytest.raises(grpc.aio.AioRpcError) as replayed:  # the same token on another connection
            await admin_pb2_grpc.AdminStub(b).DescribeCluster(
                admin_pb2.DescribeClusterRequest(), metadata=token, timeout=10
            )
        assert replayed.value.code() == grpc.StatusCode.UNAUTHENTICATED


def test_sasl_needs_a_username_and_password() -> None:
    with pytest.raises(ConfigError, match=r"needs sasl\.username and sasl\.password"):
        AsyncAdmin({"bootstrap.servers": "h:1", "security.protocol": "SASL_PLAINTEXT"})
    with pytest.raises(ConfigError, match=r"sasl\.mechanism must be one of"):
        AsyncAdmin({"bootstrap.servers": "h:1", "sasl.mechanism": "PLAIN"})


async def test_quotas_key_on_the_authenticated_user(node: Node) -> None:
    """A produce quota set for user carol is charged to carol's logged-in producer: the broker's produce sensor is
    keyed by the principal's name, not ANONYMOUS."""
    async with AsyncAdmin(client_config(node)) as admin:
        await admin.alter_client_quotas(entity(user="carol"), {PRODUCER_BYTE_RATE: 1_000_000})
        quotas = node.broker.quotas
        async with asyncio.timeout(10):
            while not quotas.refresh():  # the quota reaches the broker through the metadata log
                await asyncio.sleep(0.05)
    topic = f"q-{uuid.uuid4().hex[:8]}"
    async with AsyncAdmin(client_config(node)) as admin:
        await admin.create_topic(topic, 1, 1)
    async with AsyncProducer({**client_config(node), "client.id": "carols-app"}) as producer:
        await producer.send(topic, b"v" * 1000)
    charged = {(s.user, s.client_id) for s in quotas.produce.stats(quotas.clock())}
    assert ("carol", "") in charged  # a /config/users/carol quota is shared by all of carol's client ids
    assert not any(user == ANONYMOUS for user, _ in charged)

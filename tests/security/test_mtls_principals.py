"""Principals from client certificates (ssl.principal.mapping.rules) on both listeners, nodes authenticating to each
other without SASL, and the config that keeps inter-node traffic possible on SASL listeners.

The gRPC interceptor is tested over a real TLS server; the wiring on a real in-process node whose services answer
an extra echo method with the principal the call was bound to; the Kafka listener with kafka-python's and
librdkafka's requests over TLS, the principal read where the dispatcher serves them."""

from __future__ import annotations

import asyncio
import re
import socket
import ssl
import struct
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
import scramp
from confluent_kafka.admin import AdminClient
from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest, MetadataResponse

from odradek.broker.config import ConfigError, Endpoint, NodeConfig
from odradek.broker.kafka.wire import ConnectionInfo, Release, Response
from odradek.broker.node import Node
from odradek.broker.security.grpc_auth import CertificateInterceptor, principal_of
from odradek.broker.security.principal_mapping import PrincipalMapper
from odradek.broker.security.sasl_session import SaslSession
from odradek.broker.security.tls import ServerTls
from odradek.broker.security.tls_identity import CertificatePrincipals
from odradek.broker.serving_gate import ServingGate
from odradek.broker.storage import format_storage
from odradek.client import AsyncProducer
from odradek.client.admin import AsyncAdmin
from odradek.client.authentication import SESSION_KEY
from odradek.client.common.scram import Mechanism, ScramCredential, make_credential
from odradek.client.connection import ChannelPool
from odradek.client.errors import ErrorCode
from odradek.client.tls import TlsFiles
from odradek.deploy.certs import make_ca, make_leaf
from odradek.deploy.process import free_port
from odradek.proto import security_pb2, security_pb2_grpc

ECHO = "/odradek.test.Echo/Who"
FIRST_CN = "RULE:^CN=([^,]+),.*$/$1/"
CREDENTIALS = {("carol", m): make_credential(m, "carol-secret") for m in Mechanism}


def lookup(user: str, mechanism: Mechanism) -> ScramCredential | None:
    return CREDENTIALS.get((user, mechanism))


@pytest.fixture
def certs(tmp_path: Path) -> Path:
    ca = make_ca()
    ca.write(tmp_path, "ca")
    make_leaf(ca, "node-1", ["127.0.0.1", "localhost"]).write(tmp_path, "node")
    make_leaf(ca, "admin").write(tmp_path, "admin")
    return tmp_path


def echo_handler() -> grpc.GenericRpcHandler:
    """A method answering the principal its call is bound to (as the services read it)."""

    async def who(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        return principal_of(context).encode()

    return grpc.method_handlers_generic_handler("odradek.test.Echo", {"Who": grpc.unary_unary_rpc_method_handler(who)})


def credentials(certs: Path, identity: str = "admin") -> grpc.ChannelCredentials:
    return grpc.ssl_channel_credentials(
        (certs / "ca.crt").read_bytes(),
        (certs / f"{identity}.key").read_bytes(),
        (certs / f"{identity}.crt").read_bytes(),
    )


async def who(address: str, certs: Path, metadata: tuple[tuple[str, str], ...] = ()) -> str:
    async with grpc.aio.secure_channel(address, credentials(certs)) as channel:
        answer = await channel.unary_unary(ECHO)(b"", metadata=metadata, timeout=10)
    return answer.decode()


@pytest.mark.parametrize(
    ("rules", "principal"),
    [
        ("DEFAULT", "User:CN=admin,O=odradek"),
        (FIRST_CN, "User:admin"),
        (f"RULE:^CN=nobody,.*$/x/,{FIRST_CN}U", "User:ADMIN"),
    ],
)
async def test_a_grpc_call_is_its_client_certificates_mapped_principal(certs: Path, rules: str, principal: str) -> None:
    principals = CertificatePrincipals(PrincipalMapper.parse(rules))
    server = grpc.aio.server(interceptors=[CertificateInterceptor(principals)])
    server.add_generic_rpc_handlers((echo_handler(),))
    tls = ServerTls(TlsFiles(str(certs / "ca.crt"), str(certs / "node.crt"), str(certs / "node.key")), "required")
    port = server.add_secure_port("127.0.0.1:0", tls.grpc_credentials())
    await server.start()
    try:
        assert await who(f"localhost:{port}", certs) == principal
        assert await who(f"localhost:{port}", certs) == principal
        assert principals.parsed == 1  # the certificate is parsed once, not per call
    finally:
        await server.stop(None)


async def test_a_certificate_no_rule_maps_is_unauthenticated(certs: Path) -> None:
    principals = CertificatePrincipals(PrincipalMapper.parse("RULE:^CN=nobody,.*$/x/"))
    server = grpc.aio.server(interceptors=[CertificateInterceptor(principals)])
    server.add_generic_rpc_handlers((echo_handler(),))
    tls = ServerTls(TlsFiles(str(certs / "ca.crt"), str(certs / "node.crt"), str(certs / "node.key")), "required")
    port = server.add_secure_port("127.0.0.1:0", tls.grpc_credentials())
    await server.start()
    try:
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await who(f"localhost:{port}", certs)
        assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
        assert "no principal mapping rule applies" in (refused.value.details() or "")
    finally:
        await server.stop(None)


# -- a node: SASL_SSL broker and Kafka listeners, an SSL controller listener, client certificates required ----------


class EchoNode(Node):
    """A real node whose gRPC listeners also serve the echo method (behind the node's own interceptors)."""

    def _server(
        self, endpoint: Endpoint | None, interceptors: tuple[Any, ...] = (), gate: ServingGate | None = None
    ) -> grpc.aio.Server:
        server = super()._server(endpoint, interceptors, gate)
        server.add_generic_rpc_handlers((echo_handler(),))
        return server


def secure_config(certs: Path, rules: str) -> dict[str, Any]:
    controller, broker, kafka = free_port(), free_port(), free_port()
    return {
        "process.roles": "broker,controller",
        "node.id": 1,
        "controller.quorum.voters": f"1@localhost:{controller}",
        "listeners": f"INTERNAL://localhost:{broker},CONTROLLER://localhost:{controller},KAFKA://localhost:{kafka}",
        "listener.security.protocol.map": "INTERNAL:SASL_SSL,CONTROLLER:SSL,KAFKA:SASL_SSL",
        "ssl.ca.location": str(certs / "ca.crt"),
        "ssl.certificate.location": str(certs / "node.crt"),
        "ssl.key.location": str(certs / "node.key"),
        "ssl.client.auth": "required",
        "ssl.principal.mapping.rules": rules,
        "log.dirs": str(certs / "data"),
    }


@pytest.fixture
async def node(certs: Path) -> AsyncIterator[EchoNode]:
    config = NodeConfig(secure_config(certs, FIRST_CN))
    format_storage(config, "mtls-test")
    n = EchoNode(config)
    n.scram_lookup = lookup
    await n.start()
    try:
        async with asyncio.timeout(20):
            assert n.broker is not None
            await n.broker.lifecycle.registered.wait()  # the node registered over mTLS with its certificate
        yield n
    finally:
        await n.stop()


async def login(channel: grpc.aio.Channel) -> str:
    """SCRAM on this channel's connection: the session token."""
    auth = security_pb2_grpc.AuthenticationStub(channel)
    c = scramp.ScramClient(["SCRAM-SHA-256"], "carol", "carol-secret")
    first = await auth.SaslAuthenticate(
        security_pb2.SaslAuthenticateRequest(mechanism="SCRAM-SHA-256", auth_bytes=c.get_client_first().encode())
    )
    c.set_server_first(first.auth_bytes.decode())
    final = await auth.SaslAuthenticate(
        security_pb2.SaslAuthenticateRequest(exchange=first.exchange, auth_bytes=c.get_client_final().encode())
    )
    assert final.error == ErrorCode.NONE
    return final.session_token


async def test_grpc_calls_are_the_sasl_user_with_a_session_else_the_certificate(node: EchoNode, certs: Path) -> None:
    broker = str(node.config.broker_listener)
    assert await who(broker, certs) == "User:admin"  # no session: the certificate's principal
    async with grpc.aio.secure_channel(broker, credentials(certs)) as channel:
        token = await login(channel)
        answer = await channel.unary_unary(ECHO)(b"", metadata=((SESSION_KEY, token),), timeout=10)
        assert answer == b"User:carol"
        with pytest.raises(grpc.aio.AioRpcError) as expired:  # a token that is not live is still refused
            await channel.unary_unary(ECHO)(b"", metadata=((SESSION_KEY, "forged"),), timeout=10)
        assert expired.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert await who(str(node.config.controller_listener), certs) == "User:admin"  # SSL: the certificate


async def test_a_stopped_tls_node_leaves_the_process_on_plaintext(certs: Path) -> None:
    """A node sets how its process reaches other nodes (mTLS here); once it stops, a pool made later in the process
    (a client, another node) is plaintext again instead of presenting the stopped node's certificate."""
    config = NodeConfig(secure_config(certs, FIRST_CN))
    format_storage(config, "mtls-test")
    n = Node(config)
    assert ChannelPool().security_for(str(config.controller_listener)) == TlsFiles(
        str(certs / "ca.crt"), str(certs / "node.crt"), str(certs / "node.key")
    )
    await n.start()
    await n.stop()
    assert ChannelPool().security_for(str(config.controller_listener)) is None


def kafka_tls_socket(address: Endpoint, certs: Path) -> ssl.SSLSocket:
    context = ssl.create_default_context(cafile=str(certs / "ca.crt"))
    context.load_cert_chain(str(certs / "admin.crt"), str(certs / "admin.key"))
    raw = socket.create_connection((address.host, address.port), timeout=10)
    return context.wrap_socket(raw, server_hostname=address.host)


def exchange(sock: ssl.SSLSocket, request: Any, correlation_id: int) -> bytes:
    """Send one request (kafka-python's encoding), return its answer's body after the correlation id."""
    request.with_header(correlation_id=correlation_id, client_id="mtls-test")
    frame = request.encode(framed=False, header=True)
    sock.sendall(struct.pack(">i", len(frame)) + frame)
    (size,) = struct.unpack(">i", recv_exactly(sock, 4))
    return recv_exactly(sock, size)[4:]


def recv_exactly(sock: ssl.SSLSocket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        assert chunk, "the listener closed the connection"
        data += chunk
    return data


@pytest.fixture
def served_as(node: EchoNode) -> Iterator[list[str]]:
    """The principal of each request the Kafka listener serves, read once the dispatcher has served it."""
    assert node.kafka is not None
    seen: list[str] = []
    dispatch = node.kafka.dispatch

    async def recording(connection: ConnectionInfo, frame: memoryview, release: Release) -> Response | None:
        answer = await dispatch(connection, frame, release)
        seen.append(connection.principal)
        return answer

    node.kafka.dispatch = recording  # connections made from now on use it
    yield seen


async def test_a_kafka_connection_with_a_certificate_is_served_without_sasl(
    node: EchoNode, certs: Path, served_as: list[str]
) -> None:
    assert node.config.kafka_listener is not None
    address = node.config.kafka_listener

    def scenario() -> None:
        with kafka_tls_socket(address, certs) as sock:
            exchange(sock, ApiVersionsRequest(version=0), 1)
            metadata = MetadataResponse.decode(exchange(sock, MetadataRequest(version=1, topics=None), 2), version=1)
            assert metadata.brokers  # answered, not closed: the certificate authenticated the connection

    await asyncio.to_thread(scenario)
    assert served_as == ["User:admin", "User:admin"]


async def test_a_kafka_client_with_a_certificate_that_logs_in_is_its_sasl_user(
    node: EchoNode, certs: Path, served_as: list[str]
) -> None:
    config = {
        "bootstrap.servers": str(node.config.kafka_listener),
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": str(certs / "ca.crt"),
        "ssl.certificate.location": str(certs / "admin.crt"),
        "ssl.key.location": str(certs / "admin.key"),
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "carol",
        "sasl.password": "carol-secret",
    }
    await asyncio.to_thread(lambda: AdminClient(config).list_topics(timeout=10))
    # ApiVersions came before the login, as the certificate's principal; the Metadata after it is carol's.
    assert served_as[0] == "User:admin" and served_as[-1] == "User:carol"


def test_a_connection_with_a_certificate_may_skip_sasl_yet_still_log_in() -> None:
    session = SaslSession(tuple(Mechanism), lookup, "User:admin")
    session.check(3, "Metadata")  # allowed before any SASL: the certificate authenticated the connection
    assert session.principal == "User:admin"
    assert session.handshake("SCRAM-SHA-256").error_code == ErrorCode.NONE
    c = scramp.ScramClient(["SCRAM-SHA-256"], "carol", "carol-secret")
    c.set_server_first(session.authenticate(c.get_client_first().encode()).auth_bytes.decode())
    assert session.authenticate(c.get_client_final().encode()).error_code == ErrorCode.NONE
    assert session.principal == "User:carol"
    without = SaslSession(tuple(Mechanism), lookup)
    with pytest.raises(Exception, match="ILLEGAL_SASL_STATE"):
        without.check(3, "Metadata")


# -- config ------------------------------------------------------------------------------------------------------


def config_with(**changes: Any) -> dict[str, Any]:
    base = {
        "process.roles": "broker,controller",
        "node.id": 1,
        "controller.quorum.voters": "1@localhost:9093",
        "listeners": "INTERNAL://localhost:9092,CONTROLLER://localhost:9093,KAFKA://localhost:9094",
        "ssl.ca.location": "ca.crt",
        "ssl.certificate.location": "node.crt",
        "ssl.key.location": "node.key",
    }
    return {**base, **{k.replace("_", "."): v for k, v in changes.items()}}


@pytest.mark.parametrize(
    ("changes", "refusal"),
    [
        ({"listener_security_protocol_map": "INTERNAL:SASL_PLAINTEXT"}, "cannot be SASL_PLAINTEXT"),
        ({"listener_security_protocol_map": "INTERNAL:SASL_SSL"}, "SASL_SSL: it needs ssl.client.auth=required"),
        ({"listener_security_protocol_map": "CONTROLLER:SASL_SSL"}, "controllers do not run SASL"),
        ({"listener_security_protocol_map": "CONTROLLER:SASL_PLAINTEXT"}, "cannot be SASL_PLAINTEXT"),
        ({"ssl_principal_mapping_rules": "DEFAULT,RULE:^CN=(.*)$/$1"}, "'RULE:^CN=(.*)$/$1'"),
        ({"ssl_principal_mapping_rules": "RULE:^CN=(.*$/$1/"}, "invalid rule pattern"),
    ],
)
def test_config_refuses_what_nodes_cannot_authenticate_on_and_bad_rules(changes: dict, refusal: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(refusal)):
        NodeConfig(config_with(**changes))


def test_followers_use_the_kafka_listener_only_where_they_can_authenticate() -> None:
    def refusal(protocol: str, client_auth: str = "none") -> str | None:
        mapping = f"KAFKA:{protocol}"
        return NodeConfig(
            config_with(listener_security_protocol_map=mapping, ssl_client_auth=client_auth)
        ).kafka_fetch_refusal()

    assert refusal("PLAINTEXT") is None and refusal("SSL") is None
    assert refusal("SASL_SSL", "required") is None and refusal("SASL_SSL", "requested") is None
    assert "SASL_PLAINTEXT" in (refusal("SASL_PLAINTEXT") or "")
    assert "ssl.client.auth=none" in (refusal("SASL_SSL") or "")
    assert NodeConfig(config_with())["ssl.principal.mapping.rules"] == PrincipalMapper.parse("DEFAULT")


# -- 1+1 clusters with SASL Kafka listeners replicate: over gRPC, or over Kafka by certificate ------------------------

SASL_PLAINTEXT_KAFKA = {"listener.security.protocol.map": "INTERNAL:PLAINTEXT,KAFKA:SASL_PLAINTEXT"}


def all_tls(certs: Path) -> dict[str, str]:
    """SASL_SSL broker and Kafka listeners, an SSL controller listener, client certificates required."""
    return {
        "listener.security.protocol.map": "INTERNAL:SASL_SSL,CONTROLLER:SSL,KAFKA:SASL_SSL",
        "ssl.ca.location": str(certs / "ca.crt"),
        "ssl.certificate.location": str(certs / "node.crt"),
        "ssl.key.location": str(certs / "node.key"),
        "ssl.client.auth": "required",
    }


@pytest.mark.parametrize("tls", [False, True], ids=["sasl_plaintext-over-grpc", "sasl_ssl-over-kafka"])
async def test_a_cluster_with_a_sasl_kafka_listener_replicates(certs: Path, tls: bool) -> None:
    controller = free_port()
    security = all_tls(certs) if tls else SASL_PLAINTEXT_KAFKA
    nodes: list[Node] = []
    try:
        for node_id, roles in ((1, "broker,controller"), (2, "broker")):
            listeners = f"INTERNAL://127.0.0.1:{free_port()},KAFKA://127.0.0.1:{free_port()}"
            if node_id == 1:
                listeners += f",CONTROLLER://127.0.0.1:{controller}"
            config = NodeConfig(
                {
                    "process.roles": roles,
                    "node.id": node_id,
                    "controller.quorum.voters": f"1@127.0.0.1:{controller}",
                    "listeners": listeners,
                    "log.dirs": str(certs / f"data-{node_id}"),
                    "replica.fetch.wait.max.ms": 50,
                    "replica.fetch.backoff.ms": 50,
                    **security,
                }
            )
            format_storage(config, "sasl-replication")
            n = Node(config)
            nodes.append(n)
            await n.start()
        async with asyncio.timeout(20):
            for n in nodes:
                assert n.broker is not None
                await n.broker.lifecycle.registered.wait()
            while len(nodes[0].sm.image.active_brokers()) < 2:  # the controller has unfenced both
                await asyncio.sleep(0.05)
        topic = f"r-{uuid.uuid4().hex[:8]}"
        client: dict[str, str] = {"bootstrap.servers": str(nodes[0].config.broker_listener)}
        if tls:  # no SASL: the client certificate authenticates these clients on the SASL_SSL listener
            client |= {
                "security.protocol": "SSL",
                "ssl.ca.location": str(certs / "ca.crt"),
                "ssl.certificate.location": str(certs / "admin.crt"),
                "ssl.key.location": str(certs / "admin.key"),
            }
        async with AsyncAdmin(client) as admin:
            await admin.create_topic(topic, 1, 2)
        async with AsyncProducer({**client, "acks": "all", "linger.ms": 0}) as producer, asyncio.timeout(15):
            for i in range(5):
                await producer.send_and_wait(topic, b"v%d" % i)
        # acks=all came back: the follower has the records, fetched over gRPC where the Kafka listener wants SASL.
        replicas = [n.broker.replicas.get(topic, 0) for n in nodes if n.broker is not None]
        assert all(p.log.log_end_offset == 5 for p in replicas)
        follower = next(n.broker for n in nodes if n.broker is not None and n.broker.fetchers.fetchers)
        transports = {t[0] for t in map(follower.fetchers.target_of, follower.fetchers.fetchers)}
        assert transports == {"kafka" if tls else "grpc"}
    finally:
        for n in reversed(nodes):
            await n.stop()

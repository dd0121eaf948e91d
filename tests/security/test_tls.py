"""TLS on gRPC listeners: server credentials with reload, client auth, clients' channels and their errors."""

from __future__ import annotations

import asyncio
import datetime as dt
import socket
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from odradek.broker.config import ConfigError, NodeConfig
from odradek.broker.security.tls import NodeTls, ServerTls
from odradek.client.admin import AsyncAdmin
from odradek.client.config import AdminConfig, ConsumerConfig, ProducerConfig
from odradek.client.connection import ChannelPool
from odradek.client.errors import ConfigError as ClientConfigError
from odradek.client.errors import NetworkError, OdradekError
from odradek.client.tls import TlsFileError, TlsFiles, load_identity
from odradek.deploy.certs import Issued, make_ca, make_leaf
from odradek.proto import admin_pb2, admin_pb2_grpc


@pytest.fixture
def ca(tmp_path: Path) -> Issued:
    ca = make_ca()
    ca.write(tmp_path, "ca")
    make_leaf(ca, "node", ["127.0.0.1", "localhost"]).write(tmp_path, "node")
    make_leaf(ca, "admin").write(tmp_path, "admin")
    make_leaf(make_ca("another cluster"), "stranger").write(tmp_path, "stranger")
    past = dt.datetime.now(dt.UTC) - dt.timedelta(days=30)
    make_leaf(ca, "old", not_before=past, not_after=past + dt.timedelta(days=1)).write(tmp_path, "expired")
    return ca


def files(tmp_path: Path, identity: str | None) -> TlsFiles:
    if identity is None:
        return TlsFiles(str(tmp_path / "ca.crt"))
    return TlsFiles(str(tmp_path / "ca.crt"), str(tmp_path / f"{identity}.crt"), str(tmp_path / f"{identity}.key"))


async def serve(tmp_path: Path, client_auth: str) -> tuple[grpc.aio.Server, int, ServerTls]:
    tls = ServerTls(files(tmp_path, "node"), client_auth)
    server = grpc.aio.server()
    admin_pb2_grpc.add_AdminServicer_to_server(admin_pb2_grpc.AdminServicer(), server)  # every call UNIMPLEMENTED
    port = server.add_secure_port("127.0.0.1:0", tls.grpc_credentials())
    await server.start()
    return server, port, tls


@pytest.fixture
async def required(tmp_path: Path, ca: Issued) -> AsyncIterator[tuple[int, ServerTls]]:
    server, port, tls = await serve(tmp_path, "required")
    yield port, tls
    await server.stop(None)


async def call(port: int, security: TlsFiles | None) -> grpc.StatusCode:
    """The status of one call: UNIMPLEMENTED means it reached the servicer (the handshake succeeded)."""
    pool = ChannelPool(security=security)
    try:
        stub = admin_pb2_grpc.AdminStub(pool.get(f"127.0.0.1:{port}"))
        await stub.DescribeCluster(admin_pb2.DescribeClusterRequest(), timeout=3)
    except grpc.aio.AioRpcError as e:
        return e.code()
    finally:
        await pool.close()
    return grpc.StatusCode.OK


async def test_mtls_reaches_the_service_and_other_identities_are_refused(
    required: tuple[int, ServerTls], tmp_path: Path
) -> None:
    port, _ = required
    assert await call(port, files(tmp_path, "admin")) == grpc.StatusCode.UNIMPLEMENTED
    for refused in (None, "stranger", "expired"):
        assert await call(port, files(tmp_path, refused)) == grpc.StatusCode.UNAVAILABLE, refused
    assert await call(port, None) == grpc.StatusCode.UNAVAILABLE  # plaintext


async def test_without_client_auth_a_ca_trusting_client_is_served(tmp_path: Path, ca: Issued) -> None:
    server, port, _ = await serve(tmp_path, "none")
    try:
        assert await call(port, files(tmp_path, None)) == grpc.StatusCode.UNIMPLEMENTED
        foreign = TlsFiles(str(tmp_path / "stranger.crt"))  # not the CA that signed the server
        assert await call(port, foreign) == grpc.StatusCode.UNAVAILABLE
    finally:
        await server.stop(None)


async def test_a_plaintext_admin_client_gets_a_network_error_naming_tls_in_time(
    required: tuple[int, ServerTls],
) -> None:
    port, _ = required
    loop = asyncio.get_running_loop()
    start = loop.time()
    with pytest.raises(NetworkError, match=r"security\.protocol=SSL"):
        async with AsyncAdmin({"bootstrap.servers": f"127.0.0.1:{port}", "request.timeout.ms": 1500}) as admin:
            await admin.describe_cluster()
    assert loop.time() - start < 5


async def test_an_ssl_admin_client_reaches_the_listener(required: tuple[int, ServerTls], tmp_path: Path) -> None:
    port, _ = required
    config = {
        "bootstrap.servers": f"127.0.0.1:{port}",
        "request.timeout.ms": 3000,
        "security.protocol": "SSL",
        "ssl.ca.location": str(tmp_path / "ca.crt"),
        "ssl.certificate.location": str(tmp_path / "admin.crt"),
        "ssl.key.location": str(tmp_path / "admin.key"),
    }
    with pytest.raises(OdradekError, match="does not implement"):  # the call got through TLS to the servicer
        async with AsyncAdmin(config) as admin:
            await admin.describe_cluster()


def served_serial(port: int, tmp_path: Path) -> int:
    """The serial of the certificate the gRPC listener presents to a new connection."""
    context = ssl.create_default_context(cafile=str(tmp_path / "ca.crt"))
    context.load_cert_chain(str(tmp_path / "admin.crt"), str(tmp_path / "admin.key"))
    context.set_alpn_protocols(["h2"])
    with (
        socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
        context.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
    ):
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der).serial_number


async def test_a_renewed_certificate_is_served_to_new_connections_without_restart(
    required: tuple[int, ServerTls], tmp_path: Path, ca: Issued
) -> None:
    port, tls = required
    before = await asyncio.to_thread(served_serial, port, tmp_path)
    renewed = make_leaf(ca, "node", ["127.0.0.1"])
    renewed.write(tmp_path, "node")
    assert await asyncio.to_thread(served_serial, port, tmp_path) == renewed.cert.serial_number != before
    assert tls.reloads == 1
    assert await call(port, files(tmp_path, "admin")) == grpc.StatusCode.UNIMPLEMENTED


async def test_a_half_written_rotation_keeps_the_current_certificate(
    required: tuple[int, ServerTls], tmp_path: Path, ca: Issued
) -> None:
    port, tls = required
    before = await asyncio.to_thread(served_serial, port, tmp_path)
    other = make_leaf(ca, "node", ["127.0.0.1"])
    (tmp_path / "node.crt").write_bytes(other.cert_pem)  # the key file still holds the old key
    assert await asyncio.to_thread(served_serial, port, tmp_path) == before
    assert tls.reloads == 0


def node_config(tmp_path: Path, **extra: object) -> NodeConfig:
    props: dict[str, object] = {
        "process.roles": "broker,controller",
        "node.id": 1,
        "controller.quorum.voters": "1@127.0.0.1:19091",
        "listeners": "SSL://127.0.0.1:19092,CONTROLLER://127.0.0.1:19091,KAFKA://127.0.0.1:19093",
        "log.dirs": str(tmp_path / "data"),
        "ssl.certificate.location": str(tmp_path / "node.crt"),
        "ssl.key.location": str(tmp_path / "node.key"),
        "ssl.ca.location": str(tmp_path / "ca.crt"),
    }
    props.update(extra)
    return NodeConfig(props)


def test_node_tls_follows_the_node_keys(tmp_path: Path, ca: Issued) -> None:
    config = node_config(tmp_path, **{"ssl.client.auth": "required"})
    tls = NodeTls(config)
    tls.check()
    assert list(tls.servers) == ["SSL"] and tls.servers["SSL"].client_auth == "required"
    assert tls.servers["SSL"].files == files(tmp_path, "node")
    assert tls.server_credentials("SSL") is not None
    assert tls.server_credentials("CONTROLLER") is None and tls.kafka_context("KAFKA") is None  # PLAINTEXT
    security = tls.channel_security()
    assert security("127.0.0.1:19091") is None  # a voter: the CONTROLLER listener's protocol
    assert security("10.0.0.9:19092") == files(tmp_path, "node")  # a broker: mTLS with the node's certificate
    assert tls.kafka_client_context() is None
    mapped = NodeTls(node_config(tmp_path, **{"listener.security.protocol.map": "CONTROLLER:SSL,KAFKA:SASL_SSL"}))
    assert mapped.channel_security()("127.0.0.1:19091") == files(tmp_path, "node")
    assert mapped.kafka_context("KAFKA") is not None
    context = mapped.kafka_client_context()
    assert context is not None and context.verify_mode == ssl.CERT_REQUIRED
    assert mapped.servers["KAFKA"].current().verify_mode == ssl.CERT_NONE  # ssl.client.auth
    plain = NodeTls(node_config(tmp_path, listeners="PLAINTEXT://127.0.0.1:19092,CONTROLLER://127.0.0.1:19091"))
    assert plain.servers == {} and plain.channel_security()("10.0.0.9:19092") is None


def test_each_listener_gets_its_own_client_authentication(tmp_path: Path, ca: Issued) -> None:
    """listener.name.<name>.ssl.client.auth: the Kafka listener only requests a certificate, the gRPC ones
    require one."""
    keys = {
        "listener.security.protocol.map": "SSL:SASL_SSL,CONTROLLER:SSL,KAFKA:SASL_SSL",
        "ssl.client.auth": "required",
        "listener.name.kafka.ssl.client.auth": "requested",
    }
    tls = NodeTls(node_config(tmp_path, **keys))
    tls.check()
    assert {name: server.client_auth for name, server in tls.servers.items()} == {
        "SSL": "required",
        "CONTROLLER": "required",
        "KAFKA": "requested",
    }
    kafka = tls.kafka_context("KAFKA")
    assert kafka is not None and kafka().verify_mode == ssl.CERT_OPTIONAL
    assert tls.server_credentials("SSL") is not None and tls.server_credentials("CONTROLLER") is not None


async def test_both_grpc_listeners_of_a_combined_node_serve_a_renewed_certificate(tmp_path: Path, ca: Issued) -> None:
    """Each listener watches the files for itself: a watch reports a change once, so a shared one left the listener
    that handshook second on the old certificate."""
    keys = {"listener.security.protocol.map": "CONTROLLER:SSL", "ssl.client.auth": "required"}
    tls = NodeTls(node_config(tmp_path, **keys))
    servers, ports = [], []
    for name in ("SSL", "CONTROLLER"):
        server = grpc.aio.server()
        credentials = tls.server_credentials(name)
        assert credentials is not None
        ports.append(server.add_secure_port("127.0.0.1:0", credentials))
        await server.start()
        servers.append(server)
    try:
        before = {await asyncio.to_thread(served_serial, port, tmp_path) for port in ports}
        renewed = make_leaf(ca, "node", ["127.0.0.1"])
        renewed.write(tmp_path, "node")
        for _ in range(2):
            served = [await asyncio.to_thread(served_serial, port, tmp_path) for port in ports]
            assert served == [renewed.cert.serial_number] * 2 and renewed.cert.serial_number not in before
    finally:
        await asyncio.gather(*(server.stop(None) for server in servers))


def test_a_missing_file_or_wrong_key_password_stops_the_node_with_its_name(tmp_path: Path, ca: Issued) -> None:
    with pytest.raises(ConfigError, match=r"ssl\.certificate\.location .*nowhere\.crt"):
        NodeTls(node_config(tmp_path, **{"ssl.certificate.location": str(tmp_path / "nowhere.crt")})).check()
    leaf = make_leaf(ca, "locked", ["127.0.0.1"])
    leaf.write(tmp_path, "locked")
    encrypted = leaf.key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"secret"),
    )
    (tmp_path / "locked.key").write_bytes(encrypted)
    keys = {"ssl.certificate.location": str(tmp_path / "locked.crt"), "ssl.key.location": str(tmp_path / "locked.key")}
    NodeTls(node_config(tmp_path, **keys, **{"ssl.key.password": "secret"})).check()
    with pytest.raises(ConfigError, match=r"ssl\.key\.password"):
        NodeTls(node_config(tmp_path, **keys, **{"ssl.key.password": "wrong"})).check()


def test_an_encrypted_key_without_its_password_fails_instead_of_prompting(tmp_path: Path, ca: Issued) -> None:
    """Given no password for an encrypted key, ssl asks OpenSSL's terminal prompt for one, and a process with a
    terminal hangs there. A client's https identity (load_identity) always hands ssl a password, empty if none was
    configured, so an encrypted key without one fails at once, naming the file."""
    leaf = make_leaf(ca, "locked", ["127.0.0.1"])
    cert, key = leaf.write(tmp_path, "locked")
    key.write_bytes(
        leaf.key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.BestAvailableEncryption(b"s")
        )
    )
    passwords: list[object] = []

    class Recording(ssl.SSLContext):
        def load_cert_chain(self, certfile: Any, keyfile: Any = None, password: Any = None) -> None:
            passwords.append(password)
            super().load_cert_chain(certfile, keyfile, password)

    with pytest.raises(TlsFileError, match=r"ssl\.key\.location"):
        load_identity(Recording(ssl.PROTOCOL_TLS_CLIENT), TlsFiles("", str(cert), str(key)))
    assert passwords == [""]  # a password, so no prompt


def test_client_security_keys_choose_tls_channels(tmp_path: Path) -> None:
    base = {"bootstrap.servers": "h:1"}
    assert ProducerConfig.from_mapping(base).tls_files() is None
    ssl_keys = {
        "security.protocol": "ssl",
        "ssl.ca.location": "ca.crt",
        "ssl.certificate.location": "c.crt",
        "ssl.key.location": "c.key",
    }
    expected = TlsFiles("ca.crt", "c.crt", "c.key")
    for cls in (ProducerConfig, ConsumerConfig, AdminConfig):
        parsed = cls.from_mapping({**base, **ssl_keys})
        assert parsed.security_protocol == "SSL" and parsed.tls_files() == expected
    assert AdminConfig.from_mapping({**base, "security.protocol": "SASL_SSL"}).tls_files() == TlsFiles()
    assert AdminConfig.from_mapping({**base, "security.protocol": "SASL_PLAINTEXT"}).tls_files() is None
    for bad, message in (
        ({"security.protocol": "TLS"}, "security.protocol must be one of"),
        ({"ssl.ca.location": "ca.crt"}, "ssl.ca.location needs security.protocol SSL or SASL_SSL"),
        ({"security.protocol": "SSL", "ssl.key.location": "k"}, "go together"),
    ):
        with pytest.raises(ClientConfigError, match=message):
            AdminConfig.from_mapping({**base, **bad})

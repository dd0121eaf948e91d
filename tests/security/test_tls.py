"""TLS on gRPC listeners: server credentials with reload, client auth, clients' channels and their errors."""

from __future__ import annotations

import asyncio
import datetime as dt
import socket
import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from cryptography import x509

from odradek.broker.security.tls import ServerTls
from odradek.client.admin import AsyncAdmin
from odradek.client.connection import ChannelPool
from odradek.client.errors import NetworkError, OdradekError
from odradek.client.tls import TlsFiles
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

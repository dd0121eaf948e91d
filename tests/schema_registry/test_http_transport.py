"""The listener's HTTP/1.1 handling on a raw socket: keep-alive with pipelined requests answered in order, a chunked
request body, a body over the limit (413, connection closed), bytes that are not HTTP (400, closed), and an idle
client closing first."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import pytest

from odradek.broker.schema_registry import server
from odradek.broker.schema_registry.server import RegistryListener
from odradek.broker.schema_registry.service import RegistryService

from .test_http import USER, InstantStore


@pytest.fixture
async def port() -> AsyncIterator[int]:
    listener = RegistryListener("127.0.0.1", 0, RegistryService(InstantStore()))
    await listener.start()
    yield listener.port
    await listener.stop()


async def responses(reader: asyncio.StreamReader, count: int) -> list[tuple[int, bytes]]:
    """``count`` HTTP responses (status, body), read by their content-length."""
    out = []
    for _ in range(count):
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
        lines = head.decode().split("\r\n")
        status = int(lines[0].split()[1])
        length = next(int(line.split(":")[1]) for line in lines if line.lower().startswith("content-length"))
        out.append((status, await reader.readexactly(length)))
    return out


def request(method: str, path: str, body: bytes = b"", extra: str = "") -> bytes:
    return (
        f"{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n{extra}\r\n"
    ).encode() + body


async def test_pipelined_requests_on_one_connection_are_answered_in_order(port: int) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    register = json.dumps({"schema": USER}).encode()
    writer.write(
        request("POST", "/subjects/a/versions", register)
        + request("GET", "/subjects")
        + request("GET", "/schemas/ids/1")
        + request("GET", "/nope")
    )
    await writer.drain()
    got = await responses(reader, 4)
    assert [s for s, _ in got] == [200, 200, 200, 404]
    assert json.loads(got[0][1]) == {"id": 1} and json.loads(got[1][1]) == ["a"]
    assert json.loads(got[3][1])["error_code"] == 404
    writer.close()


async def test_a_chunked_body_is_read_whole(port: int) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    body = json.dumps({"schema": USER}).encode()
    half = len(body) // 2
    chunks = b"".join(b"%x\r\n%s\r\n" % (len(c), c) for c in (body[:half], body[half:])) + b"0\r\n\r\n"
    writer.write(b"POST /subjects/c/versions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" + chunks)
    await writer.drain()
    assert await responses(reader, 1) == [(200, b'{"id": 1}')]
    writer.close()


async def test_a_body_over_the_limit_is_413_and_the_connection_closes(
    port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(server, "MAX_BODY_BYTES", 1000)
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request("POST", "/subjects/big/versions", b"x" * 5000))
    await writer.drain()
    [(status, body)] = await responses(reader, 1)
    assert status == 413 and json.loads(body)["error_code"] == 413
    assert await asyncio.wait_for(reader.read(), 10) == b""  # closed
    writer.close()


async def test_bytes_that_are_not_http_get_400_and_the_connection_closes(port: int) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"\x16\x03\x01 this is not HTTP\r\n\r\n")
    await writer.drain()
    [(status, body)] = await responses(reader, 1)
    assert status == 400 and json.loads(body)["error_code"] == 400
    assert await asyncio.wait_for(reader.read(), 10) == b""
    writer.close()


async def test_a_client_closing_mid_request_leaves_the_listener_serving(port: int) -> None:
    _, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"POST /subjects/x/versions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
    await writer.drain()
    writer.close()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request("GET", "/subjects"))
    await writer.drain()
    assert await responses(reader, 1) == [(200, b"[]")]
    writer.close()

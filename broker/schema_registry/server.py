"""The registry's HTTP/1.1 listener (``schema.registry.listeners``), on asyncio streams with h11 doing the HTTP
framing (keep-alive, chunked bodies, pipelining rules), so this module only moves bytes: a request goes through
routes.py to the service, and its answer or refusal goes back as Confluent's JSON. A write this broker is not the
writer for is forwarded to the writer's listener and the writer's answer relayed, as Confluent's followers do, once
this broker's own copy holds the write (so that a client reads its writes from the broker it wrote through).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urlsplit

import h11

from odradek.broker.schema_registry import errors
from odradek.broker.schema_registry.errors import RegistryError
from odradek.broker.schema_registry.requests import WRITES
from odradek.broker.schema_registry.routes import route
from odradek.broker.schema_registry.service import Answer, Forward, RegistryService

logger = logging.getLogger(__name__)

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
FORWARDED_HEADER = b"x-odradek-forwarded"
# On the writer's answer to a write: the offset of _schemas its copy had applied when it answered. The broker that
# forwarded the write waits for its own copy to reach it before answering, so a client reads its writes there.
OFFSET_HEADER = b"x-odradek-registry-offset"
MAX_BODY_BYTES = 16 * 1024 * 1024  # a schema request body; larger ones are answered 413 and the connection closed
IDLE_TIMEOUT_S = 120.0
FORWARD_TIMEOUT_S = 30.0
READ_CHUNK = 65536


@dataclass(frozen=True, slots=True)
class Reply:
    status: int
    content_type: str
    body: bytes
    offset: int | None = None  # OFFSET_HEADER's value


def error_reply(e: RegistryError) -> Reply:
    return Reply(e.status, CONTENT_TYPE, json.dumps(e.body()).encode())


def answer_reply(a: Answer) -> Reply:
    if a.raw and isinstance(a.body, str):
        return Reply(a.status, CONTENT_TYPE, a.body.encode())
    return Reply(a.status, CONTENT_TYPE, json.dumps(a.body).encode())


class RegistryListener:
    """Serves ``service`` on host:port. ``on_request(kind, status)`` counts each answered request (metrics)."""

    def __init__(
        self,
        host: str,
        port: int,
        service: RegistryService,
        on_request: Callable[[str, int], None] = lambda _kind, _status: None,
    ) -> None:
        self.host = host
        self.port = port
        self.service = service
        self.on_request = on_request
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        try:
            self._server = await asyncio.start_server(self._serve, self.host, self.port, reuse_address=True)
        except OSError as e:
            raise OSError(f"cannot listen on {self.host}:{self.port} (schema.registry.listeners): {e}") from None
        self.port = self._server.sockets[0].getsockname()[1]
        logger.info("schema registry listening on http://%s:%d", self.host, self.port)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            for task in list(self._connections):
                task.cancel()
            await asyncio.gather(*self._connections, return_exceptions=True)
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        conn = h11.Connection(h11.SERVER)
        try:
            while True:
                request = await self._read_request(conn, reader, writer)
                if request is None:
                    break
                head, body = request
                reply = await self._reply(head, body)
                keep = await self._send(conn, writer, reply)
                if not keep or conn.our_state is h11.MUST_CLOSE:
                    break
                try:
                    conn.start_next_cycle()
                except h11.LocalProtocolError:
                    break
        except (ConnectionError, asyncio.IncompleteReadError, TimeoutError):
            pass
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.exception("schema registry connection failed")
        finally:
            self._connections.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _read_request(
        self, conn: h11.Connection, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> tuple[h11.Request, bytes] | None:
        head: h11.Request | None = None
        body = bytearray()
        while True:
            try:
                event = conn.next_event()
            except h11.RemoteProtocolError as e:
                await self._send(conn, writer, error_reply(RegistryError(400, 400, f"bad HTTP request: {e}")))
                return None
            if event is h11.NEED_DATA:
                async with asyncio.timeout(IDLE_TIMEOUT_S):
                    data = await reader.read(READ_CHUNK)
                conn.receive_data(data)
                if not data and conn.their_state is not h11.DONE:
                    return None
                continue
            if isinstance(event, h11.Request):
                head = event
            elif isinstance(event, h11.Data):
                body += event.data
                if len(body) > MAX_BODY_BYTES:
                    await self._send(
                        conn, writer, error_reply(RegistryError(413, 413, "request body too large")), close=True
                    )
                    return None
            elif isinstance(event, h11.EndOfMessage):
                assert head is not None
                return head, bytes(body)
            elif isinstance(event, (h11.ConnectionClosed, h11.PAUSED)):
                return None

    async def _reply(self, head: h11.Request, body: bytes) -> Reply:
        method, target = head.method.decode(), head.target.decode("latin-1")
        kind = "unrouted"
        try:
            request = route(method, target, body)
            kind = type(request).__name__
            try:
                reply = answer_reply(await self.service.handle(request))
                if isinstance(request, WRITES):
                    reply = replace(reply, offset=self.service.store.applied)
            except Forward as f:
                if any(name == FORWARDED_HEADER for name, _ in head.headers):
                    raise errors.forwarding_failed(
                        "the broker this request was forwarded to is not the writer"
                    ) from None
                reply = await forward(f.url, method, target, body)
                if reply.status == 200 and reply.offset is not None:
                    await self.service.store.caught_up(reply.offset)
        except RegistryError as e:
            reply = error_reply(e)
        except Exception as e:
            logger.exception("schema registry request %s %s failed", method, target)
            reply = error_reply(errors.store_error(str(e) or type(e).__name__))
        self.on_request(kind, reply.status)
        return reply

    @staticmethod
    async def _send(conn: h11.Connection, writer: asyncio.StreamWriter, reply: Reply, close: bool = False) -> bool:
        headers = [("content-type", reply.content_type), ("content-length", str(len(reply.body)))]
        if reply.offset is not None:
            headers.append((OFFSET_HEADER.decode(), str(reply.offset)))
        if close:
            headers.append(("connection", "close"))
        try:
            out = conn.send(h11.Response(status_code=reply.status, headers=headers))
            out = (out or b"") + (conn.send(h11.Data(data=reply.body)) or b"") + (conn.send(h11.EndOfMessage()) or b"")
        except h11.LocalProtocolError:
            return False
        writer.write(out)
        await writer.drain()
        return not close


async def forward(url: str, method: str, target: str, body: bytes) -> Reply:
    """Send the request to the writer's listener and return its answer (50003 when it cannot be reached)."""
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    try:
        async with asyncio.timeout(FORWARD_TIMEOUT_S):
            reader, writer = await asyncio.open_connection(host, port)
            try:
                return await _exchange(reader, writer, host, port, method, target, body)
            finally:
                writer.close()
                with contextlib.suppress(Exception):
                    await writer.wait_closed()
    except (OSError, TimeoutError, h11.ProtocolError) as e:
        return error_reply(errors.forwarding_failed(f"{url}: {e or type(e).__name__}"))


async def _exchange(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    host: str,
    port: int,
    method: str,
    target: str,
    body: bytes,
) -> Reply:
    conn = h11.Connection(h11.CLIENT)
    headers = [
        ("host", f"{host}:{port}"),
        ("content-type", CONTENT_TYPE),
        ("content-length", str(len(body))),
        ("connection", "close"),
        (FORWARDED_HEADER.decode(), "1"),
    ]
    out = conn.send(h11.Request(method=method, target=target, headers=headers)) or b""
    out += (conn.send(h11.Data(data=body)) or b"") if body else b""
    out += conn.send(h11.EndOfMessage()) or b""
    writer.write(out)
    await writer.drain()
    status, content_type, data, offset = 500, CONTENT_TYPE, bytearray(), None
    while True:
        event: Any = conn.next_event()
        if event is h11.NEED_DATA:
            conn.receive_data(await reader.read(READ_CHUNK))
            continue
        if isinstance(event, h11.Response):
            status = event.status_code
            content_type = next((v.decode() for k, v in event.headers if k == b"content-type"), CONTENT_TYPE)
            found = next((v.decode() for k, v in event.headers if k == OFFSET_HEADER), None)
            offset = int(found) if found is not None and found.isdigit() else None
        elif isinstance(event, h11.Data):
            data += event.data
        elif isinstance(event, (h11.EndOfMessage, h11.ConnectionClosed)):
            return Reply(status, content_type, bytes(data), offset)

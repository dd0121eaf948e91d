"""The brokers' HTTP/1.1 listeners (the schema registry's, the HTTP API's), on asyncio streams with h11 doing the
HTTP framing (keep-alive, chunked bodies, pipelining rules), and the little HTTP client they forward requests with.

This module only moves bytes and bounds them: a request is read whole (its body up to ``max_body_bytes``, idle
connections closed after ``IDLE_TIMEOUT_S``) into an :class:`HttpRequest`, handed to the listener's handler, and
the handler's :class:`HttpReply` written back. What a request means is the handler's business; a request h11 cannot
parse, or one too large, is answered here (400, 413) in Confluent's error shape, ``{"error_code", "message"}``, and
its connection closed.

On a TLS listener (``tls``: the context for each new connection, so that a renewed certificate applies from the next
one on) the handshake comes first, within ``HANDSHAKE_TIMEOUT_S``; the client certificate it verified, if any, goes
with each request (``HttpRequest.peer_certificate``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import h11

from odradek.broker.http_types import JSON, HttpError, HttpReply, HttpRequest, error_reply

logger = logging.getLogger(__name__)

MAX_BODY_BYTES = 16 * 1024 * 1024  # a request body; larger ones are answered 413 and the connection closed
IDLE_TIMEOUT_S = 120.0
HANDSHAKE_TIMEOUT_S = 10.0
CLOSE_TIMEOUT_S = 5.0  # a TLS connection's close waits this long for the peer's close_notify
READ_CHUNK = 65536
_FRAMING = frozenset({"content-type", "content-length", "connection", "transfer-encoding"})

Handler = Callable[[HttpRequest], Awaitable[HttpReply]]


class HttpListener:
    """Serves ``handle`` on host:port (port 0: any free one, read ``port`` after ``start``). ``setting`` names the
    config key the address comes from, for the error a port in use raises; ``content_type`` is that of the
    listener's own refusals; ``tls`` (None: plain HTTP) the server context for each new connection."""

    def __init__(
        self,
        host: str,
        port: int,
        handle: Handler,
        *,
        setting: str,
        what: str,
        content_type: str = JSON,
        tls: Callable[[], ssl.SSLContext] | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self.handle = handle
        self.setting = setting
        self.what = what
        self.content_type = content_type
        self.tls = tls
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self._stopping = False

    def max_body_bytes(self) -> int:
        """The largest request body read (a listener with its own limit overrides this)."""
        return MAX_BODY_BYTES

    async def start(self) -> None:
        try:
            self._server = await asyncio.start_server(
                self._serve,
                self.host,
                self.port,
                reuse_address=True,
                ssl=self._front_context(),
                ssl_handshake_timeout=HANDSHAKE_TIMEOUT_S if self.tls is not None else None,
            )
        except OSError as e:
            raise OSError(f"cannot listen on {self.host}:{self.port} ({self.setting}): {e}") from None
        self.port = self._server.sockets[0].getsockname()[1]
        scheme = "https" if self.tls is not None else "http"
        logger.info("%s listening on %s://%s:%d", self.what, scheme, self.host, self.port)

    def _front_context(self) -> ssl.SSLContext | None:
        """The context the server starts each handshake with; as the client says hello it is switched to the
        listener's current one (``tls()``), so that renewed files apply from the next connection on."""
        if self.tls is None:
            return None
        tls = self.tls
        front = tls()

        def current(connection: ssl.SSLObject | ssl.SSLSocket, _name: str | None, _context: ssl.SSLContext) -> None:
            connection.context = tls()

        front.sni_callback = current
        return front

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            self._stopping = True  # connections are dropped, not closed with TLS's goodbye the peer may never answer
            for task in list(self._connections):
                task.cancel()
            await asyncio.gather(*self._connections, return_exceptions=True)
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        conn = h11.Connection(h11.SERVER)
        peer = writer.get_extra_info("peername")
        host, port = (str(peer[0]), int(peer[1])) if isinstance(peer, tuple) and len(peer) >= 2 else ("", 0)
        tls_object = writer.get_extra_info("ssl_object")
        certificate = (tls_object.getpeercert(binary_form=True) or b"") if tls_object is not None else b""
        try:
            while True:
                request = await self._read_request(conn, reader, writer)
                if request is None:
                    break
                head, body = request
                headers = tuple((bytes(k), bytes(v)) for k, v in head.headers)
                reply = await self.handle(
                    HttpRequest(
                        head.method.decode(), head.target.decode("latin-1"), headers, body, host, port, certificate
                    )
                )
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
            logger.exception("%s connection failed", self.what)
        finally:
            self._connections.discard(task)
            if self._stopping:
                writer.transport.abort()
            else:
                writer.close()
                with contextlib.suppress(Exception):
                    async with asyncio.timeout(CLOSE_TIMEOUT_S):
                        await writer.wait_closed()

    async def _read_request(
        self, conn: h11.Connection, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> tuple[h11.Request, bytes] | None:
        head: h11.Request | None = None
        body = bytearray()
        limit = self.max_body_bytes()
        while True:
            try:
                event = conn.next_event()
            except h11.RemoteProtocolError as e:
                await self._send(conn, writer, self._refusal(400, 400, f"bad HTTP request: {e}"))
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
                if len(body) > limit:
                    refusal = self._refusal(413, 413, f"request body too large (the limit is {limit} bytes)")
                    await self._send(conn, writer, refusal, close=True)
                    return None
            elif isinstance(event, h11.EndOfMessage):
                assert head is not None
                return head, bytes(body)
            elif isinstance(event, (h11.ConnectionClosed, h11.PAUSED)):
                return None

    def _refusal(self, status: int, code: int, message: str) -> HttpReply:
        return error_reply(HttpError(status, code, message), self.content_type)

    @staticmethod
    async def _send(conn: h11.Connection, writer: asyncio.StreamWriter, reply: HttpReply, close: bool = False) -> bool:
        headers = [("content-type", reply.content_type), ("content-length", str(len(reply.body))), *reply.headers]
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


async def exchange(
    host: str,
    port: int,
    method: str,
    target: str,
    body: bytes,
    headers: Sequence[tuple[str, str]],
    timeout_s: float,
    tls: ssl.SSLContext | None = None,
) -> HttpReply:
    """One request to another broker's listener (a connection of its own, closed after the answer), over TLS with
    ``tls`` (which checks the server's certificate and name); raises OSError (ssl.SSLError among them),
    TimeoutError or h11.ProtocolError when it cannot be had."""
    async with asyncio.timeout(timeout_s):
        if tls is None:
            reader, writer = await asyncio.open_connection(host, port)
        else:
            reader, writer = await asyncio.open_connection(host, port, ssl=tls, server_hostname=host)
        try:
            return await _exchange(reader, writer, host, port, method, target, body, headers)
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()


async def _exchange(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    host: str,
    port: int,
    method: str,
    target: str,
    body: bytes,
    extra: Sequence[tuple[str, str]],
) -> HttpReply:
    conn = h11.Connection(h11.CLIENT)
    headers = [("host", f"{host}:{port}"), ("content-length", str(len(body))), ("connection", "close"), *extra]
    out = conn.send(h11.Request(method=method, target=target, headers=headers)) or b""
    out += (conn.send(h11.Data(data=body)) or b"") if body else b""
    out += conn.send(h11.EndOfMessage()) or b""
    writer.write(out)
    await writer.drain()
    status, content_type, data = 500, JSON, bytearray()
    got: tuple[tuple[str, str], ...] = ()
    while True:
        event: Any = conn.next_event()
        if event is h11.NEED_DATA:
            conn.receive_data(await reader.read(READ_CHUNK))
            continue
        if isinstance(event, h11.Response):
            status = event.status_code
            got = tuple((bytes(k).decode("latin-1"), bytes(v).decode("latin-1")) for k, v in event.headers)
            content_type = next((v for k, v in got if k == "content-type"), JSON)
        elif isinstance(event, h11.Data):
            data += event.data
        elif isinstance(event, (h11.EndOfMessage, h11.ConnectionClosed)):
            kept = tuple((k, v) for k, v in got if k not in _FRAMING)
            return HttpReply(status, content_type, bytes(data), kept)

"""The Kafka listener's network shell: accepts connections and serves each one's frames through ``Dispatch``.

Each connection owns a raw non-blocking socket (no asyncio transport: see socket_writer.py for why) and one task
that reads a frame, awaits its answer, writes it, and only then reads the next, so requests are handled strictly
one at a time in arrival order, as Kafka does; pipelined requests wait in the read-ahead buffer or the socket.
A bad frame or a failing handler closes only its own connection.

On a TLS listener each accepted socket is wrapped in an ``ssl.SSLSocket`` (still non-blocking) from the context the
listener's ``tls`` callable gives at that moment (so a reloaded certificate serves the next handshakes), the
handshake runs before the first frame, and responses go out as bytes: sendfile cannot encrypt. A client certificate
the handshake verified gives the connection its principal (``certificate_principal``: the subject mapped by
``ssl.principal.mapping.rules``); a certificate no rule maps closes the connection, as Kafka refuses it.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import logging
import socket
import ssl
import struct
from collections.abc import Callable

from odradek.broker.kafka.framing import FrameReader, FrameSizeError
from odradek.broker.kafka.socket_writer import SliceTruncatedError, SocketWriter
from odradek.broker.kafka.wire import ConnectionInfo, Dispatch, ProtocolError
from odradek.client.common.file_slice import close_chunks

logger = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")
ACCEPT_RETRY_S = 0.1  # after EMFILE and the like, before accepting again
HANDSHAKE_TIMEOUT_S = 10.0  # a TLS client that has not finished its handshake by then is dropped


class _Closed(Exception):
    """Ends a connection's task quietly (EOF between requests)."""


class _CloseWithReason(Exception):
    """Ends a connection's task with one warning naming the peer and the reason."""


class _IdleTimeout(Exception):
    pass


class _HandlerFailed(Exception):
    """``dispatch`` raised something other than ProtocolError: logged with its traceback (the cause)."""


class KafkaListener:
    """Kafka's binary protocol on ``host:port``: frames in, ``dispatch`` answers out.

    ``max_request_bytes`` is Kafka's socket.request.max.bytes (a larger size prefix closes the connection before
    the frame is read), ``idle_timeout_ms`` its connections.max.idle.ms (a connection with no request being
    handled and nothing received for that long is closed). ``use_sendfile=False`` sends file ranges as bytes
    (for transports that cannot sendfile)."""

    def __init__(
        self,
        host: str,
        port: int,
        listener_name: str,
        dispatch: Dispatch,
        *,
        max_request_bytes: int,
        idle_timeout_ms: int,
        use_sendfile: bool = True,
        backlog: int = 128,
        tls: Callable[[], ssl.SSLContext] | None = None,
        certificate_principal: Callable[[bytes], str] | None = None,
        failed_authentication_delay_ms: int = 0,
        ready: asyncio.Event | None = None,
    ) -> None:
        """``tls``: gives the server context for each new connection (the listener is SSL or SASL_SSL).
        ``certificate_principal``: a verified client certificate (DER) to its principal; raises ValueError (such as
        NoMatchingRule) for one that has none. ``failed_authentication_delay_ms``: Kafka's
        connection.failed.authentication.delay.ms, how long a connection whose authentication failed stays open
        after its answer (read by the client before the close; and a guesser's next try comes no sooner). ``ready``:
        connections are accepted only once it is set (the broker has caught up with the metadata log); until then the
        bound socket queues them, as a Kafka broker's do before it enables request processing."""
        if max_request_bytes < 1:
            raise ValueError(f"max_request_bytes must be positive, not {max_request_bytes}")
        if idle_timeout_ms < 1:
            raise ValueError(f"idle_timeout_ms must be positive, not {idle_timeout_ms}")
        self.host = host
        self._port = port
        self.listener_name = listener_name
        self.dispatch = dispatch
        self.max_request_bytes = max_request_bytes
        self.idle_timeout_ms = idle_timeout_ms
        self.use_sendfile = use_sendfile
        self.backlog = backlog
        self.tls = tls
        self.certificate_principal = certificate_principal
        self.failed_authentication_delay_ms = failed_authentication_delay_ms
        self.ready = ready
        self._sock: socket.socket | None = None
        self._accepting: asyncio.Task[None] | None = None
        self._connections: dict[int, asyncio.Task[None]] = {}  # by connection id
        self._ids = itertools.count(1)

    @property
    def port(self) -> int:
        """The bound port (the one asked for, or the kernel's choice for 0 once started)."""
        return self._port

    @property
    def connection_count(self) -> int:
        return len(self._connections)

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        infos = await loop.getaddrinfo(self.host or None, self._port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        family, _, _, _, address = infos[0]
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(address)
            sock.listen(self.backlog)
            sock.setblocking(False)
        except BaseException:
            sock.close()
            raise
        self._sock = sock
        self._port = sock.getsockname()[1]
        self._accepting = loop.create_task(self._accept_loop(sock), name=f"kafka-accept-{self.listener_name}")
        logger.info("Kafka listener %s on %s:%d", self.listener_name, self.host or "*", self._port)

    async def stop(self) -> None:
        """Close the listening socket and every connection; answers not yet sent are dropped (their file
        ranges closed)."""
        if self._accepting is not None:
            self._accepting.cancel()
            await asyncio.gather(self._accepting, return_exceptions=True)
            self._accepting = None
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        tasks = list(self._connections.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _accept_loop(self, sock: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        if self.ready is not None and not self.ready.is_set():
            await self.ready.wait()
            logger.info("Kafka listener %s: serving clients", self.listener_name)
        while True:
            try:
                conn, address = await loop.sock_accept(sock)
            except OSError as e:  # out of descriptors and the like: the listener stays up
                logger.warning("Kafka listener %s: accept failed: %s", self.listener_name, e)
                await asyncio.sleep(ACCEPT_RETRY_S)
                continue
            try:
                conn.setblocking(False)
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError as e:  # the peer already left
                logger.debug("Kafka listener %s: dropping %s: %s", self.listener_name, address, e)
                conn.close()
                continue
            if self.tls is not None:
                try:
                    conn = self.tls().wrap_socket(conn, server_side=True, do_handshake_on_connect=False)
                except (OSError, ssl.SSLError) as e:
                    logger.warning("Kafka listener %s: dropping %s: %s", self.listener_name, address, e)
                    conn.close()
                    continue
            info = ConnectionInfo(next(self._ids), self.listener_name, address[0], address[1])
            connection = _Connection(self, conn, info)
            task = loop.create_task(connection.run(), name=f"kafka-conn-{info.connection_id}")
            self._connections[info.connection_id] = task
            # A done callback, not a finally: it also runs for a task cancelled (stop) before it ever started.
            task.add_done_callback(functools.partial(self._closed, info.connection_id, connection))

    def _closed(self, connection_id: int, connection: _Connection, _: asyncio.Task[None]) -> None:
        connection.sock.close()
        del self._connections[connection_id]


class _Connection:
    """One client connection's loop: read a frame, dispatch it, write the answer, honour its throttle."""

    def __init__(self, listener: KafkaListener, sock: socket.socket, info: ConnectionInfo) -> None:
        self.loop = asyncio.get_running_loop()
        self.sock = sock
        self.fd = sock.fileno()
        self.info = info
        self.dispatch = listener.dispatch
        self.certificate_principal = listener.certificate_principal
        self.close_delay_s = listener.failed_authentication_delay_ms / 1000
        self.idle_s = listener.idle_timeout_ms / 1000
        self.frames = FrameReader(listener.max_request_bytes)
        self.writer = SocketWriter(self.loop, sock, use_sendfile=listener.use_sendfile)
        self.last_active = self.loop.time()

    def _peer(self) -> str:
        return f"{self.info.peer_host}:{self.info.peer_port}"

    async def run(self) -> None:
        listener, peer = self.info.listener, self._peer()
        try:
            if isinstance(self.sock, ssl.SSLSocket):
                await self._handshake(self.sock)
                self._identify(self.sock)
            await self._loop()
        except (_Closed, ConnectionError):
            logger.debug("Kafka listener %s: %s closed the connection", listener, peer)
        except _IdleTimeout:
            logger.info("Kafka listener %s: closing %s, idle for %.0f s", listener, peer, self.idle_s)
        except (FrameSizeError, ProtocolError, SliceTruncatedError, _CloseWithReason) as e:
            logger.warning("Kafka listener %s: closing %s: %s", listener, peer, e)
        except _HandlerFailed as e:
            logger.error("Kafka listener %s: closing %s: a request failed", listener, peer, exc_info=e.__cause__)
        except ssl.SSLError as e:  # a failed handshake (a plaintext client, an unknown or expired certificate)
            logger.warning("Kafka listener %s: closing %s: TLS: %s", listener, peer, e.reason or e)
        except OSError as e:  # writing to a peer that left
            logger.info("Kafka listener %s: closing %s: %s", listener, peer, e)

    async def _loop(self) -> None:
        frames, dispatch, info = self.frames, self.dispatch, self.info
        while True:
            frame = frames.next_frame()
            if frame is None:
                await self._receive()
                continue
            try:
                response = await dispatch(info, memoryview(frame))
            except ProtocolError:
                raise
            except Exception as e:
                raise _HandlerFailed from e
            if response is None:
                self.last_active = self.loop.time()
                continue
            chunks = response.chunks
            try:
                prefix = _SIZE.pack(sum(len(c) for c in chunks))
            except struct.error:
                close_chunks(chunks)
                raise _CloseWithReason("a response larger than 2 GiB") from None
            await self.writer.write([prefix, *chunks])
            if response.close_reason is not None:  # a failed SASL authentication: answered, then closed
                if self.close_delay_s > 0:
                    await asyncio.sleep(self.close_delay_s)
                raise _CloseWithReason(response.close_reason)
            if response.throttle_ms > 0:  # KIP-219: the client is muted until its throttle has passed
                await asyncio.sleep(response.throttle_ms / 1000)
            self.last_active = self.loop.time()

    async def _handshake(self, sock: ssl.SSLSocket) -> None:
        deadline = self.loop.time() + min(self.idle_s, HANDSHAKE_TIMEOUT_S)
        while True:
            try:
                sock.do_handshake()
                return
            except ssl.SSLWantReadError:
                await self._readable(deadline)
            except ssl.SSLWantWriteError:
                await self.writer.writable()

    def _identify(self, sock: ssl.SSLSocket) -> None:
        """The verified client certificate's principal becomes the connection's (none asked or given: none)."""
        der = sock.getpeercert(binary_form=True)
        if der is None or self.certificate_principal is None:
            return
        try:
            self.info.state.certificate_principal = self.certificate_principal(der)
        except ValueError as e:
            raise _CloseWithReason(f"client certificate refused: {e}") from None

    async def _receive(self) -> None:
        """Receive some bytes; raises on EOF and once the connection has been idle too long."""
        target = self.frames.recv_buffer()
        while True:
            try:
                n = self.sock.recv_into(target)
            except (BlockingIOError, ssl.SSLWantReadError):
                await self._readable(self.last_active + self.idle_s)
                continue
            except ssl.SSLWantWriteError:
                await self.writer.writable()
                continue
            except ssl.SSLZeroReturnError:
                n = 0
            if n == 0:
                if self.frames.partial:
                    raise _CloseWithReason("the connection ended inside a request")
                raise _Closed
            self.frames.received(n)
            self.last_active = self.loop.time()
            return

    async def _readable(self, deadline: float) -> None:
        if self.loop.time() >= deadline:
            raise _IdleTimeout
        fut = self.loop.create_future()
        self.loop.add_reader(self.fd, _wake, fut)
        timer = self.loop.call_at(deadline, _wake, fut)
        try:
            await fut
        finally:
            self.loop.remove_reader(self.fd)
            timer.cancel()


def _wake(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)

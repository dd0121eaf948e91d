"""The Kafka listener's network shell: accepts connections and serves each one's frames through ``Dispatch``.

Each connection owns a raw non-blocking socket (no asyncio transport: see socket_writer.py for why) and one task
that reads a frame, serves it, writes the answer, and only then reads the next, so requests are handled one at a
time in arrival order, as Kafka does; pipelined requests wait in the read-ahead buffer or the socket. One
exception, as Redpanda makes it: a handler may *release* its request once the part that must come before the
connection's later requests is done (an acks=all produce, once its batches are appended and before it waits for
their replication). The next request is then served while the earlier one waits, up to ``PIPELINE_DEPTH``
released requests, and the answers are still written in request order. The protocol's guarantee, requests
processed and answered in the order sent, holds; what changes is that a producer sending one partition per request
(librdkafka) has several batches replicating at once instead of one per round trip. A bad frame or a failing
handler closes only its own connection, after the answers of the requests before it.

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
from collections import deque
from collections.abc import Callable

from odradek.broker.kafka.framing import FrameReader, FrameSizeError
from odradek.broker.kafka.socket_writer import SliceTruncatedError, SocketWriter
from odradek.broker.kafka.wire import ConnectionInfo, Dispatch, ProtocolError, Response
from odradek.client.common.file_slice import close_chunks

logger = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")
ACCEPT_RETRY_S = 0.1  # after EMFILE and the like, before accepting again
HANDSHAKE_TIMEOUT_S = 10.0  # a TLS client that has not finished its handshake by then is dropped
PIPELINE_DEPTH = 16  # a connection's released requests whose answers are not written yet, at most


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
        may_release: Callable[[bytearray], bool] = lambda _: True,
    ) -> None:
        """``tls``: gives the server context for each new connection (the listener is SSL or SASL_SSL).
        ``certificate_principal``: a verified client certificate (DER) to its principal; raises ValueError (such as
        NoMatchingRule) for one that has none. ``failed_authentication_delay_ms``: Kafka's
        connection.failed.authentication.delay.ms, how long a connection whose authentication failed stays open
        after its answer (read by the client before the close; and a guesser's next try comes no sooner). ``ready``:
        connections are accepted only once it is set (the broker has caught up with the metadata log); until then the
        bound socket queues them, as a Kafka broker's do before it enables request processing. ``may_release``:
        whether a request (its frame) may release its connection, so is served in a task of its own; the others are
        served in the connection's task, which costs less."""
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
        self.may_release = may_release
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
    """One client connection's loop: read a frame, dispatch it, write the answer (in request order, after those of
    released requests before it), honour its throttle."""

    def __init__(self, listener: KafkaListener, sock: socket.socket, info: ConnectionInfo) -> None:
        self.loop = asyncio.get_running_loop()
        self.sock = sock
        self.fd = sock.fileno()
        self.info = info
        self.dispatch = listener.dispatch
        self.may_release = listener.may_release
        self.certificate_principal = listener.certificate_principal
        self.close_delay_s = listener.failed_authentication_delay_ms / 1000
        self.idle_s = listener.idle_timeout_ms / 1000
        self.frames = FrameReader(listener.max_request_bytes)
        self.writer = SocketWriter(self.loop, sock, use_sendfile=listener.use_sendfile)
        self.last_active = self.loop.time()
        # Released requests (see the module's docstring) whose answers are not written yet, oldest first.
        self.waiting: deque[asyncio.Task[Response | None]] = deque()

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
        finally:
            self._drop_unanswered()

    async def _loop(self) -> None:
        frames, waiting = self.frames, self.waiting
        while True:
            while waiting and waiting[0].done():
                await self._answer(waiting.popleft())
            if len(waiting) >= PIPELINE_DEPTH:
                await asyncio.wait((waiting[0],))
                continue
            try:
                frame = frames.next_frame()
            except FrameSizeError:
                await self._answer_all()  # the answers to the requests before the bad one go out first
                raise
            if frame is None:
                await self._receive()
                continue
            if not waiting and not self.may_release(frame):  # no task: the common case costs what it did
                try:
                    response = await self.dispatch(self.info, memoryview(frame), _never)
                except ProtocolError:
                    raise
                except Exception as e:
                    raise _HandlerFailed from e
                await self._write(response)
                continue
            released = self.loop.create_future()
            served = self.loop.create_task(self._serve(frame, released))
            if not served.done():
                await asyncio.wait((served, released), return_when=asyncio.FIRST_COMPLETED)
            if served.done() and (not waiting or (not served.cancelled() and served.exception() is not None)):
                await self._answer_all()  # a failed request closes the connection once those before it are answered
                await self._answer(served)
            else:  # released: its answer is written after those before it, while later requests are served
                waiting.append(served)

    async def _serve(self, frame: bytearray, released: asyncio.Future[None]) -> Response | None:
        try:
            return await self.dispatch(self.info, memoryview(frame), functools.partial(_wake, released))
        finally:
            _wake(released)

    async def _answer(self, served: asyncio.Task[Response | None]) -> None:
        """Write one request's answer (its handler done) and honour its throttle and close."""
        try:
            response = served.result()
        except ProtocolError:
            raise
        except Exception as e:
            raise _HandlerFailed from e
        await self._write(response)

    async def _write(self, response: Response | None) -> None:
        if response is None:
            self.last_active = self.loop.time()
            return
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

    async def _answer_all(self) -> None:
        """Before the connection closes for a later request: the answers of the released requests before it."""
        waiting = self.waiting
        while waiting:
            head = waiting.popleft()
            await asyncio.wait((head,))
            try:
                await self._answer(head)
            except (_HandlerFailed, ProtocolError, _CloseWithReason):
                return

    def _drop_unanswered(self) -> None:
        """The connection is gone: stop its released requests and close the file ranges of unwritten answers."""
        for served in self.waiting:
            if not served.done():
                served.cancel()
            elif not served.cancelled() and served.exception() is None and (response := served.result()) is not None:
                close_chunks(response.chunks)
        self.waiting.clear()

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
        """Receive some bytes, or return without any once the oldest released request is done (its answer is
        due); raises on EOF and once the connection has been idle too long (with no request being served)."""
        target = self.frames.recv_buffer()
        while True:
            try:
                n = self.sock.recv_into(target)
            except (BlockingIOError, ssl.SSLWantReadError):
                if self.waiting:
                    if self.waiting[0].done():
                        return
                    await self._readable(None, self.waiting[0])
                else:
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

    async def _readable(self, deadline: float | None, answer_due: asyncio.Task[Response | None] | None = None) -> None:
        """Until the socket is readable, the deadline passes (idle: raises), or ``answer_due`` is done."""
        if deadline is not None and self.loop.time() >= deadline:
            raise _IdleTimeout
        fut = self.loop.create_future()
        wake = functools.partial(_wake_on_done, fut)
        self.loop.add_reader(self.fd, _wake, fut)
        timer = self.loop.call_at(deadline, _wake, fut) if deadline is not None else None
        if answer_due is not None:
            answer_due.add_done_callback(wake)
        try:
            await fut
        finally:
            self.loop.remove_reader(self.fd)
            if timer is not None:
                timer.cancel()
            if answer_due is not None:
                answer_due.remove_done_callback(wake)


def _never() -> None:
    """The release of a request that may not release its connection (see ``may_release``)."""


def _wake(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


def _wake_on_done(fut: asyncio.Future[None], _: asyncio.Task[Response | None]) -> None:
    _wake(fut)

"""The Kafka listener's network shell on real loopback sockets under uvloop, against a fake dispatch.

The fake protocol: a frame is ``command:argument``; the answer is whatever the command says (see FakeApis)."""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import random
import socket
import ssl
import struct
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import pytest
import uvloop

from odradek.broker.kafka.framing import FrameReader, FrameSizeError
from odradek.broker.kafka.server import PIPELINE_DEPTH, KafkaListener
from odradek.broker.kafka.wire import ConnectionInfo, ProtocolError, Release, Response
from odradek.client.common.file_slice import Chunk, FileSlice

SIZE = struct.Struct(">i")
MAX_REQUEST = 1 << 20
TIMEOUT_S = 15


def run(scenario: Callable[[], Awaitable[None]]) -> None:
    """Run ``scenario`` on a uvloop loop, as the node does, bounded in time."""

    async def bounded() -> None:
        assert isinstance(asyncio.get_running_loop(), uvloop.Loop)
        await asyncio.wait_for(scenario(), TIMEOUT_S)

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(bounded())


class FakeApis:
    """A dispatch that records what it was called with and when, and never runs two requests of a connection at
    once unnoticed."""

    def __init__(self, files: Path | None = None) -> None:
        self.calls: list[tuple[int, bytes, float]] = []  # (connection id, frame, loop time)
        self.in_flight: dict[int, int] = {}
        self.max_in_flight = 0
        self.slices: list[FileSlice] = []
        self.files = files
        self.block = asyncio.Event()
        self.arrived: asyncio.Queue[bytes] = asyncio.Queue()
        self.release: Release = lambda: None

    async def __call__(self, conn: ConnectionInfo, frame: memoryview, release: Release) -> Response | None:
        assert isinstance(frame, memoryview)
        self.release = release
        data = bytes(frame)
        self.calls.append((conn.connection_id, data, asyncio.get_running_loop().time()))
        self.arrived.put_nowait(data)
        self.in_flight[conn.connection_id] = self.in_flight.get(conn.connection_id, 0) + 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight[conn.connection_id])
        try:
            return await self._answer(data)
        finally:
            self.in_flight[conn.connection_id] -= 1

    async def _answer(self, data: bytes) -> Response | None:
        command, _, arg = data.partition(b":")
        if command == b"echo":
            return Response([b"echo:", arg])
        if command == b"slow":
            await asyncio.sleep(0.05)
            return Response([bytearray(arg)])
        if command == b"none":
            return None
        if command == b"throttle":
            return Response([b"throttled"], throttle_ms=int(arg))
        if command == b"protocol-error":
            raise ProtocolError("unknown API key 999")
        if command == b"boom":
            raise RuntimeError("a handler bug")
        if command == b"block":
            await self.block.wait()
            return Response([b"late"])
        if command == b"hold":  # released at once (a produce waiting for replication), answered when unblocked
            self.release()
            await self.block.wait()
            return Response([b"held:", arg])
        if command in (b"file", b"truncated"):
            assert self.files is not None
            name, position, length = arg.decode().split(",")
            path = self.files / name
            chunks: list[Chunk] = [b"head:"]
            for _ in range(2):
                piece = FileSlice(os.open(path, os.O_RDONLY), int(position), int(length))
                self.slices.append(piece)
                chunks += [piece, memoryview(b"|")]
            if command == b"truncated":
                os.truncate(path, int(position) + int(length) // 2)
            return Response(chunks)
        raise ProtocolError(f"unknown command {command!r}")


class Client:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def connect(cls, listener: KafkaListener, receive_buffer: int | None = None) -> Client:
        if receive_buffer is None:
            return cls(*await asyncio.open_connection("127.0.0.1", listener.port))
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)  # a small window: the sender stalls
        sock.setblocking(False)
        await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", listener.port))
        return cls(*await asyncio.open_connection(sock=sock))

    def send(self, *frames: bytes) -> None:
        self.writer.write(b"".join(SIZE.pack(len(f)) + f for f in frames))

    async def receive(self) -> bytes:
        (size,) = SIZE.unpack(await self.reader.readexactly(4))
        return await self.reader.readexactly(size)

    async def call(self, frame: bytes) -> bytes:
        self.send(frame)
        return await self.receive()

    async def closed_by_peer(self) -> bool:
        """True once the listener closed the connection (EOF or reset), with nothing else received first."""
        try:
            return await self.reader.read(1) == b""
        except ConnectionResetError:
            return True

    def close(self) -> None:
        self.writer.close()


async def started(apis: FakeApis, **kwargs: object) -> KafkaListener:
    options: dict[str, object] = {"max_request_bytes": MAX_REQUEST, "idle_timeout_ms": 60_000, **kwargs}
    listener = KafkaListener("127.0.0.1", 0, "KAFKA", apis, **options)  # type: ignore[arg-type]
    await listener.start()
    assert listener.port > 0
    return listener


def test_pipelined_requests_are_answered_one_at_a_time_in_order() -> None:
    big = os.urandom(300_000)  # larger than the read-ahead: received into its own buffer

    async def scenario() -> None:
        apis = FakeApis()
        listener = await started(apis)
        client = await Client.connect(listener)
        frames = [b"slow:a", b"echo:b", b"none:", b"slow:c", b"echo:" + big, b"echo:d"] * 3
        client.send(*frames)
        answers = [await client.receive() for _ in range(15)]
        assert answers == [b"a", b"echo:b", b"c", b"echo:" + big, b"echo:d"] * 3
        assert [c[1] for c in apis.calls] == frames
        assert apis.max_in_flight == 1
        assert listener.connection_count == 1
        client.close()
        await listener.stop()
        assert listener.connection_count == 0

    run(scenario)


async def connected(**kwargs: object) -> tuple[FakeApis, KafkaListener, Client]:
    """A started listener over a FakeApis, and a client connected to it."""
    apis = FakeApis()
    listener = await started(apis, **kwargs)
    return apis, listener, await Client.connect(listener)


async def arrivals(apis: FakeApis, count: int) -> list[bytes]:
    """The next ``count`` frames the listener hands to ``apis``, as they arrive."""
    return [await asyncio.wait_for(apis.arrived.get(), 5) for _ in range(count)]


def test_released_requests_overlap_and_are_answered_in_order() -> None:
    """A request its handler released (a produce whose batches are appended) lets the next ones be served while it
    waits; every answer still goes out in request order."""

    async def scenario() -> None:
        apis, listener, client = await connected()
        client.send(b"hold:a", b"echo:b", b"hold:c", b"echo:d")
        assert await arrivals(apis, 4) == [b"hold:a", b"echo:b", b"hold:c", b"echo:d"]  # though "a" is not answered
        assert apis.max_in_flight == 3  # a, c, and each echo in turn
        await asyncio.sleep(0.05)
        assert not client.reader._buffer  # type: ignore[attr-defined]  # nothing answered before "a"
        apis.block.set()
        assert [await client.receive() for _ in range(4)] == [b"held:a", b"echo:b", b"held:c", b"echo:d"]
        client.close()
        await listener.stop()

    run(scenario)


def test_a_request_that_may_not_release_holds_the_next_one() -> None:
    """Only requests ``may_release`` admits (Produce, on a broker) are served in a task of their own: another one's
    release changes nothing, and the next request waits for its answer."""

    async def scenario() -> None:
        apis, listener, client = await connected(may_release=lambda frame: frame.startswith(b"echo"))
        client.send(b"hold:a", b"echo:b")
        assert await arrivals(apis, 1) == [b"hold:a"]
        await asyncio.sleep(0.1)
        assert [c[1] for c in apis.calls] == [b"hold:a"]  # "b" waits for "a"'s answer
        apis.block.set()
        assert [await client.receive() for _ in range(2)] == [b"held:a", b"echo:b"]
        client.close()
        await listener.stop()

    run(scenario)


def test_at_most_pipeline_depth_released_requests_wait_for_their_answers() -> None:
    async def scenario() -> None:
        apis, listener, client = await connected()
        frames = [b"hold:%d" % i for i in range(PIPELINE_DEPTH + 4)]
        client.send(*frames)
        await arrivals(apis, PIPELINE_DEPTH)
        await asyncio.sleep(0.1)
        assert len(apis.calls) == PIPELINE_DEPTH  # the rest wait, read ahead or in the socket
        apis.block.set()
        answers = [await client.receive() for _ in frames]
        assert answers == [b"held:%d" % i for i in range(PIPELINE_DEPTH + 4)]
        client.close()
        await listener.stop()

    run(scenario)


@pytest.mark.parametrize("bad", ["protocol-error:", "boom:", "size"])
def test_a_bad_request_after_released_ones_closes_after_their_answers(bad: str) -> None:
    async def scenario() -> None:
        apis, listener, client = await connected()
        client.send(b"hold:a", b"hold:b")
        await arrivals(apis, 2)
        if bad == "size":
            client.writer.write(SIZE.pack(MAX_REQUEST + 1))
        else:
            client.send(bad.encode(), b"echo:never")
        await asyncio.sleep(0.05)
        apis.block.set()
        assert [await client.receive() for _ in range(2)] == [b"held:a", b"held:b"]
        assert await client.closed_by_peer()
        assert b"echo:never" not in [c[1] for c in apis.calls]
        client.close()
        await listener.stop()

    run(scenario)


def test_stop_cancels_released_requests() -> None:
    async def scenario() -> None:
        apis, listener, client = await connected()
        client.send(b"hold:a", b"hold:b")
        await arrivals(apis, 2)
        await listener.stop()
        assert listener.connection_count == 0
        assert apis.in_flight[1] == 0  # both handlers were cancelled
        assert await client.closed_by_peer()
        client.close()

    run(scenario)


def test_connections_wait_in_the_backlog_until_the_listener_is_ready() -> None:
    """A starting broker binds its port at once (a port in use stops the node) but answers nothing until it has
    caught up with the metadata log: a connection made before then is served afterwards, not refused."""

    async def scenario() -> None:
        apis, ready = FakeApis(), asyncio.Event()
        listener = await started(apis, ready=ready)
        client = await Client.connect(listener)
        client.send(b"echo:early")
        await asyncio.sleep(0.3)
        assert apis.calls == [] and listener.connection_count == 0
        ready.set()
        assert await asyncio.wait_for(client.receive(), 5) == b"echo:early"
        assert listener.connection_count == 1
        client.close()
        await listener.stop()

    run(scenario)


BAD_INPUTS = {
    "oversized": SIZE.pack(MAX_REQUEST + 1) + b"x" * 100,
    "negative size": SIZE.pack(-5),
    "garbage": b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
    "cut short": SIZE.pack(100) + b"echo:only part",
    "protocol error": SIZE.pack(14) + b"protocol-error",
    "handler bug": SIZE.pack(4) + b"boom",
}


@pytest.mark.parametrize("bad", BAD_INPUTS)
def test_a_bad_request_closes_only_its_connection(bad: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="odradek.broker.kafka.server")

    async def scenario() -> None:
        apis = FakeApis()
        listener = await started(apis)
        good, victim = await Client.connect(listener), await Client.connect(listener)
        assert await good.call(b"echo:1") == b"echo:1"
        assert await victim.call(b"echo:2") == b"echo:2"
        victim.writer.write(BAD_INPUTS[bad])
        if bad == "cut short":
            victim.writer.write_eof()
        assert await victim.closed_by_peer()
        assert listener.connection_count == 1
        assert await good.call(b"echo:3") == b"echo:3"
        later = await Client.connect(listener)  # and the listener still accepts
        assert await later.call(b"echo:4") == b"echo:4"
        dispatched = {"protocol error": [b"protocol-error"], "handler bug": [b"boom"]}.get(bad, [])
        assert [c[1] for c in apis.calls if c[0] == 2] == [b"echo:2", *dispatched]  # bad frames never reach it
        for client in (good, later, victim):
            client.close()
        await listener.stop()

    run(scenario)
    closing = [r for r in caplog.records if "closing 127.0.0.1:" in r.getMessage()]
    assert len(closing) == 1, caplog.text
    if bad == "handler bug":
        assert closing[0].levelno == logging.ERROR and closing[0].exc_info is not None
        assert "a handler bug" in caplog.text
    else:
        assert closing[0].levelno == logging.WARNING and closing[0].exc_info is None
    reason = {"oversized": "request size", "negative size": "request size -5", "garbage": "request size"}
    reason |= {"cut short": "ended inside a request", "protocol error": "unknown API key 999"}
    if bad in reason:
        assert reason[bad] in closing[0].getMessage()


def test_idle_connections_are_closed() -> None:
    async def scenario() -> None:
        apis = FakeApis()
        listener = await started(apis, idle_timeout_ms=300)
        client = await Client.connect(listener)
        loop = asyncio.get_running_loop()
        for _ in range(3):  # requests keep it open past the timeout
            await asyncio.sleep(0.15)
            assert await client.call(b"slow:x") == b"x"
        answered = loop.time()
        assert await client.closed_by_peer()
        idle = loop.time() - answered
        assert 0.25 <= idle < 5, idle
        assert listener.connection_count == 0
        await listener.stop()

    run(scenario)


def test_a_throttled_response_holds_the_next_request() -> None:
    async def scenario() -> None:
        apis = FakeApis()
        listener = await started(apis)
        client, other = await Client.connect(listener), await Client.connect(listener)
        client.send(b"throttle:400", b"echo:after")
        assert await client.receive() == b"throttled"
        assert await other.call(b"echo:meanwhile") == b"echo:meanwhile"  # other connections are not muted
        assert await client.receive() == b"echo:after"
        times = {frame: t for _, frame, t in apis.calls}
        assert 0.35 <= times[b"echo:after"] - times[b"throttle:400"] < 5
        assert times[b"echo:meanwhile"] < times[b"echo:after"]
        client.send(b"throttle:0", b"echo:now")
        assert [await client.receive(), await client.receive()] == [b"throttled", b"echo:now"]
        for c in (client, other):
            c.close()
        await listener.stop()

    run(scenario)


@pytest.fixture
def data_file(tmp_path: Path) -> Iterator[bytes]:
    content = os.urandom(4 << 20)
    (tmp_path / "segment.log").write_bytes(content)
    yield content


@pytest.mark.parametrize("mode", ["sendfile", "use_sendfile=False", "sendfile refused"])
def test_file_slices_arrive_byte_identical(
    mode: str, data_file: bytes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_sendfile = os.sendfile
    sendfile_bytes: list[int] = []

    def spy_sendfile(out_fd: int, in_fd: int, offset: int | None, count: int) -> int:
        if mode == "sendfile refused":
            raise OSError(errno.EINVAL, "sendfile refused")
        sent = real_sendfile(out_fd, in_fd, offset, count)
        sendfile_bytes.append(sent)
        return sent

    monkeypatch.setattr(os, "sendfile", spy_sendfile)
    position, length = 1000, len(data_file) - 5000

    async def scenario() -> None:
        apis = FakeApis(tmp_path)
        listener = await started(apis, use_sendfile=mode != "use_sendfile=False")
        client = await Client.connect(listener)
        answer = await client.call(f"file:segment.log,{position},{length}".encode())
        piece = data_file[position : position + length]
        assert answer == b"head:" + piece + b"|" + piece + b"|"
        assert [s.fd for s in apis.slices] == [-1, -1]  # closed once sent
        assert await client.call(b"echo:next") == b"echo:next"
        client.close()
        await listener.stop()

    run(scenario)
    assert sum(sendfile_bytes) == (2 * length if mode == "sendfile" else 0)


@pytest.mark.parametrize("use_sendfile", [True, False])
def test_a_slice_whose_file_shrank_closes_the_connection(
    use_sendfile: bool, data_file: bytes, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async def scenario() -> None:
        apis = FakeApis(tmp_path)
        listener = await started(apis, use_sendfile=use_sendfile)
        client, other = await Client.connect(listener), await Client.connect(listener)
        client.send(b"truncated:segment.log,0,100000")
        (size,) = SIZE.unpack(await client.reader.readexactly(4))
        assert size == len(b"head:|" + b"|") + 2 * 100_000
        with pytest.raises(asyncio.IncompleteReadError):
            await client.reader.readexactly(size)
        assert [s.fd for s in apis.slices] == [-1, -1]
        assert await other.call(b"echo:fine") == b"echo:fine"
        for c in (client, other):
            c.close()
        await listener.stop()

    run(scenario)
    assert "the file shrank" in caplog.text


def test_stop_closes_connections_and_the_slices_of_unsent_answers(data_file: bytes, tmp_path: Path) -> None:
    async def scenario() -> None:
        apis = FakeApis(tmp_path)
        listener = await started(apis)
        reader_stalled = await Client.connect(listener, receive_buffer=4096)
        blocked = await Client.connect(listener)
        reader_stalled.send(f"file:segment.log,0,{len(data_file)}".encode())  # 8 MiB the client never reads
        blocked.send(b"block:")
        assert {await apis.arrived.get(), await apis.arrived.get()} == {b"block:", b"file:segment.log,0,4194304"}
        assert listener.connection_count == 2
        assert apis.slices[-1].fd >= 0  # the answer is stuck on a full socket
        await listener.stop()
        assert listener.connection_count == 0
        assert [s.fd for s in apis.slices] == [-1, -1]
        assert await blocked.closed_by_peer()
        with pytest.raises((OSError, asyncio.TimeoutError)):
            await asyncio.wait_for(Client.connect(listener), 2)
        for c in (reader_stalled, blocked):
            c.close()

    run(scenario)


def test_bad_settings_are_refused() -> None:
    apis = FakeApis()
    with pytest.raises(ValueError, match="max_request_bytes"):
        KafkaListener("127.0.0.1", 0, "KAFKA", apis, max_request_bytes=0, idle_timeout_ms=1000)
    with pytest.raises(ValueError, match="idle_timeout_ms"):
        KafkaListener("127.0.0.1", 0, "KAFKA", apis, max_request_bytes=100, idle_timeout_ms=0)


def test_frames_are_cut_the_same_whatever_the_reads() -> None:
    rng = random.Random(5)
    frames = [rng.randbytes(rng.choice((0, 1, 5, 300, 70_000))) for _ in range(40)]
    stream = b"".join(SIZE.pack(len(f)) + f for f in frames)
    for max_read in (1, 7, 4096, 1 << 20):
        reader, got, position = FrameReader(100_000, read_ahead=1024), [], 0
        while position < len(stream):
            target = reader.recv_buffer()
            n = min(len(target), rng.randint(1, max_read), len(stream) - position)
            target[:n] = stream[position : position + n]
            position += n
            reader.received(n)
            while (frame := reader.next_frame()) is not None:
                got.append(bytes(frame))
        assert got == frames and not reader.partial
    reader = FrameReader(10)
    reader.recv_buffer()[:4] = SIZE.pack(11)
    reader.received(4)
    with pytest.raises(FrameSizeError, match="request size 11 outside"):
        reader.next_frame()


@pytest.fixture
def tls_files(tmp_path: Path) -> dict[str, Path]:
    from odradek.deploy.certs import make_ca, make_leaf

    ca = make_ca()
    ca.write(tmp_path, "ca")
    make_leaf(ca, "node", ["127.0.0.1"]).write(tmp_path, "node")
    make_leaf(ca, "client").write(tmp_path, "client")
    make_leaf(make_ca("another CA"), "stranger").write(tmp_path, "stranger")
    return {n: tmp_path / f"{n}.crt" for n in ("ca", "node", "client", "stranger")}


def _server_tls(files: dict[str, Path], client_auth: str):  # type: ignore[no-untyped-def]
    from odradek.broker.security.tls import ServerTls
    from odradek.client.tls import TlsFiles

    node = files["node"]
    return ServerTls(TlsFiles(str(files["ca"]), str(node), str(node.with_suffix(".key"))), client_auth)


def _client_context(files: dict[str, Path], cert: str | None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(files["ca"]))
    if cert is not None:
        context.load_cert_chain(str(files[cert]), str(files[cert].with_suffix(".key")))
    return context


def test_a_tls_fetch_returns_the_same_bytes_without_sendfile(
    data_file: bytes, tmp_path: Path, tls_files: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """TLS cannot use sendfile (it would put plaintext on the wire): file ranges are read and encrypted."""
    sendfile_calls: list[int] = []
    monkeypatch.setattr(os, "sendfile", lambda *args: sendfile_calls.append(1) or 0)
    position, length = 1000, len(data_file) - 5000

    async def scenario() -> None:
        apis = FakeApis(tmp_path)
        listener = await started(apis, tls=_server_tls(tls_files, "required").current)
        client = Client(
            *await asyncio.open_connection("127.0.0.1", listener.port, ssl=_client_context(tls_files, "client"))
        )
        answer = await client.call(f"file:segment.log,{position},{length}".encode())
        piece = data_file[position : position + length]
        assert answer == b"head:" + piece + b"|" + piece + b"|"
        assert [s.fd for s in apis.slices] == [-1, -1]
        assert await client.call(b"echo:next") == b"echo:next"
        client.close()
        await listener.stop()

    run(scenario)
    assert sendfile_calls == []


@pytest.mark.parametrize("cert", [None, "stranger", "expired"])
def test_client_auth_required_refuses_a_missing_foreign_or_expired_certificate(
    cert: str | None, tls_files: dict[str, Path], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    import datetime as dt

    from odradek.deploy.certs import load_ca, make_leaf

    if cert == "expired":
        ca = load_ca(tls_files["ca"], tls_files["ca"].with_suffix(".key"))
        past = dt.datetime.now(dt.UTC) - dt.timedelta(days=30)
        make_leaf(ca, "old", not_before=past, not_after=past + dt.timedelta(days=1)).write(tmp_path, "expired")
        tls_files["expired"] = tmp_path / "expired.crt"

    async def scenario() -> None:
        apis = FakeApis()
        listener = await started(apis, tls=_server_tls(tls_files, "required").current)
        try:
            reader, writer = await asyncio.open_connection(
                "127.0.0.1", listener.port, ssl=_client_context(tls_files, cert)
            )
            client = Client(reader, writer)
            # TLS 1.3: the server checks the client's certificate after the client's handshake ended
            with pytest.raises((ssl.SSLError, ConnectionError, asyncio.IncompleteReadError)):
                await client.call(b"echo:hello")
        except (ssl.SSLError, ConnectionError):
            pass
        assert apis.calls == []
        await listener.stop()

    with caplog.at_level(logging.WARNING):
        run(scenario)
    assert "TLS" in caplog.text


def test_a_plaintext_client_on_a_tls_listener_is_closed_not_answered(tls_files: dict[str, Path]) -> None:
    async def scenario() -> None:
        apis = FakeApis()
        listener = await started(apis, tls=_server_tls(tls_files, "none").current)
        client = await Client.connect(listener)
        client.send(b"echo:hello")
        assert await client.closed_by_peer()
        assert apis.calls == []
        await listener.stop()

    run(scenario)


def test_a_renewed_certificate_serves_the_next_handshakes(tls_files: dict[str, Path], tmp_path: Path) -> None:
    from odradek.deploy.certs import load_ca, make_leaf

    server = _server_tls(tls_files, "none")

    async def peer_serial(listener: KafkaListener) -> int:
        reader, writer = await asyncio.open_connection("127.0.0.1", listener.port, ssl=_client_context(tls_files, None))
        client = Client(reader, writer)
        assert await client.call(b"echo:x") == b"echo:x"
        der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
        client.close()
        from cryptography import x509

        return x509.load_der_x509_certificate(der).serial_number

    async def scenario() -> None:
        listener = await started(FakeApis(), tls=server.current)
        before = await peer_serial(listener)
        ca = load_ca(tls_files["ca"], tls_files["ca"].with_suffix(".key"))
        renewed = make_leaf(ca, "node", ["127.0.0.1"])
        renewed.write(tmp_path, "node")
        assert await peer_serial(listener) == renewed.cert.serial_number != before
        assert server.reloads == 1
        await listener.stop()

    run(scenario)

"""The fault-injecting TCP proxy (fallback without namespaces): block/partition/delay between local endpoints."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest

from odradek.chaos.proxy import FaultProxy, NotSupported


@pytest.fixture
def echo() -> Iterator[tuple[str, int]]:
    """A threaded echo server on 127.0.0.1 standing in for every node."""
    server = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve(conn: socket.socket) -> None:
        with conn:
            try:
                while data := conn.recv(4096):
                    conn.sendall(data)
            except OSError:
                pass

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                return
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    yield server.getsockname()[:2]
    stop.set()
    server.close()


@pytest.fixture
def proxy(echo: tuple[str, int]) -> Iterator[FaultProxy]:
    with FaultProxy() as p:
        p.mesh({"a": echo, "b": echo, "c": echo}, clients=["client"])
        yield p


def reach(proxy: FaultProxy, src: str, dst: str, timeout: float = 2.0) -> bool:
    try:
        with socket.create_connection(proxy.address(src, dst), timeout) as sock:
            sock.sendall(b"ping")
            return sock.recv(4) == b"ping"
    except OSError:
        return False


def cut(proxy: FaultProxy, src: str, dst: str) -> bool:
    return not reach(proxy, src, dst, timeout=0.3)


def closed_by_peer(sock: socket.socket) -> bool:
    """The proxy reset (or closed) our side: no data, no waiting until the timeout."""
    sock.settimeout(1)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def test_links_forward(proxy: FaultProxy) -> None:
    assert proxy.nodes == ["a", "b", "c"]
    assert all(reach(proxy, s, d) for s in "abc" for d in "abc" if s != d)
    assert proxy.address("a", "b") != proxy.address("b", "a")  # one port per directed link
    assert proxy.describe()["mechanism"] == "proxy"


def test_block_stalls_then_heal_delivers(proxy: FaultProxy) -> None:
    with socket.create_connection(proxy.address("a", "b"), 1) as old:
        old.sendall(b"1")
        assert old.recv(1) == b"1"
        proxy.block("a", "b")
        proxy.block("a", "b")  # idempotent
        assert proxy.faults == [{"kind": "block", "a": "a", "b": "b"}]
        assert proxy.blocked == [("a", "b"), ("b", "a")]
        old.sendall(b"2")
        old.settimeout(0.3)
        with pytest.raises(TimeoutError):
            old.recv(1)
        new = socket.create_connection(proxy.address("b", "a"), 1)  # the other direction's link too
        new.sendall(b"3")
        new.settimeout(0.3)
        with pytest.raises(TimeoutError):
            new.recv(1)
        assert reach(proxy, "a", "c")
        proxy.heal()
        old.settimeout(2)
        new.settimeout(2)
        assert old.recv(1) == b"2" and new.recv(1) == b"3"  # held, not lost
        new.close()


def test_reject_mode_resets(echo: tuple[str, int]) -> None:
    with FaultProxy(mode="reject") as p:
        addr = p.add_link("a", "b", echo)
        old = socket.create_connection(addr, 1)
        p.block("a", "b")
        assert closed_by_peer(old)
        old.close()
        assert cut(p, "a", "b")
        p.heal()
        assert reach(p, "a", "b")


def test_partition_isolate_bridge(proxy: FaultProxy) -> None:
    proxy.partition([["a"], ["b", "c"]])
    assert reach(proxy, "b", "c") and cut(proxy, "a", "b") and cut(proxy, "c", "a")
    assert reach(proxy, "client", "a")  # clients are exempt, like the harness in the netns setup
    proxy.heal()
    proxy.isolate("b")
    assert proxy.blocked == [("a", "b"), ("b", "a"), ("b", "c"), ("c", "b")]
    proxy.heal()
    proxy.bridge(["a"], "b", ["c"])
    assert proxy.blocked == [("a", "c"), ("c", "a")]
    assert reach(proxy, "a", "b") and reach(proxy, "c", "b")
    with pytest.raises(ValueError):
        proxy.partition([["a", "b"], ["b"]])


def test_delay(proxy: FaultProxy) -> None:
    proxy.delay(100)
    started = time.monotonic()
    assert reach(proxy, "a", "b", timeout=3)
    assert time.monotonic() - started >= 0.2  # 100 ms each way
    proxy.heal()
    proxy.slow("a", delay_ms=100)
    started = time.monotonic()
    assert reach(proxy, "b", "a", timeout=3)
    assert time.monotonic() - started >= 0.2
    assert reach(proxy, "b", "c")
    with pytest.raises(NotSupported):
        proxy.slow("a", loss_pct=10)
    proxy.heal()
    started = time.monotonic()
    assert reach(proxy, "a", "b")
    assert time.monotonic() - started < 0.2
    assert proxy.faults == []


def test_close_releases_ports(echo: tuple[str, int]) -> None:
    p = FaultProxy()
    addr = p.add_link("a", "b", echo)
    held = socket.create_connection(addr, 1)
    p.close()
    p.close()
    with pytest.raises(OSError):
        socket.create_connection(addr, 1).close()
    assert closed_by_peer(held)
    held.close()


def test_lose_responses_raw_link(echo: tuple[str, int]) -> None:
    """Requests still arrive (the echo answers them), answers never come back, the connection is reset."""
    with FaultProxy() as p:
        p.add_link("a", "b", echo)
        p.add_link("c", "b", echo)
        p.lose_responses("a", hold_ms=300)
        assert p.faults == [{"kind": "lose-responses", "host": "a", "hold_ms": 300}]
        assert reach(p, "c", "b")  # other nodes' links are untouched
        with socket.create_connection(p.address("a", "b"), 1) as sock:
            sock.sendall(b"ping")
            started = time.monotonic()
            assert closed_by_peer(sock)
            assert 0.25 < time.monotonic() - started < 1.0
        p.heal()
        assert reach(p, "a", "b")
        with pytest.raises(KeyError):
            p.lose_responses("nobody")


def test_delay_responses_raw_link_delays_only_the_way_back(echo: tuple[str, int]) -> None:
    with FaultProxy() as p:
        p.add_link("a", "b", echo)
        p.delay_responses("a", 400)
        with socket.create_connection(p.address("a", "b"), 2) as sock:
            started = time.monotonic()
            sock.sendall(b"ping")
            assert sock.recv(4) == b"ping"
            assert time.monotonic() - started >= 0.4
        p.heal()
        started = time.monotonic()
        assert reach(p, "a", "b")
        assert time.monotonic() - started < 0.3


@pytest.fixture
def grpc_counter() -> Iterator[tuple[tuple[str, int], list[bytes]]]:
    """A gRPC server whose one method records each request it served (as the controller applies a call)."""
    grpc = pytest.importorskip("grpc")
    from concurrent import futures

    served: list[bytes] = []

    def apply(request: bytes, context: object) -> bytes:
        served.append(request)
        return b"ok:" + request

    handler = grpc.method_handlers_generic_handler(
        "t.Counter", {"Apply": grpc.unary_unary_rpc_method_handler(apply, lambda b: b, lambda b: b)}
    )
    server = grpc.server(futures.ThreadPoolExecutor(2), handlers=[handler])
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield ("127.0.0.1", port), served
    server.stop(None)


def call(address: tuple[str, int], payload: bytes, timeout: float) -> tuple[str, bytes | None]:
    import grpc

    with grpc.insecure_channel(f"{address[0]}:{address[1]}") as channel:
        method = channel.unary_unary("/t.Counter/Apply", lambda b: b, lambda b: b)
        try:
            return "ok", method(payload, timeout=timeout)
        except grpc.RpcError as e:
            return e.code().name, None


def test_lost_grpc_response_times_out_after_the_server_applied_it(grpc_counter) -> None:
    target, served = grpc_counter
    with FaultProxy() as p:
        address = p.add_link("broker", "controller", target, http2=True)
        assert call(address, b"before", 2) == ("ok", b"ok:before")
        p.lose_responses("broker", hold_ms=1500)
        # A new connection opens (its SETTINGS pass) and its request is served, but the answer is lost.
        started = time.monotonic()
        assert call(address, b"lost", 1) == ("DEADLINE_EXCEEDED", None)
        assert time.monotonic() - started < 1.5
        assert served == [b"before", b"lost"]
        assert p.response_counts["lost_frames"] >= 1
        p.heal()
        assert call(address, b"after", 2) == ("ok", b"ok:after")
        assert served == [b"before", b"lost", b"after"]


def test_late_grpc_response_times_out_after_the_server_applied_it(grpc_counter) -> None:
    target, served = grpc_counter
    with FaultProxy() as p:
        address = p.add_link("broker", "controller", target, http2=True)
        p.delay_responses("broker", 1500)
        assert call(address, b"late", 0.8) == ("DEADLINE_EXCEEDED", None)
        assert served == [b"late"]
        p.heal()
        assert call(address, b"after", 2) == ("ok", b"ok:after")


def test_heal_resets_a_connection_that_lost_a_response_at_once(echo: tuple[str, int]) -> None:
    with FaultProxy() as p:
        p.add_link("a", "b", echo)
        p.lose_responses("a", hold_ms=10_000)
        with socket.create_connection(p.address("a", "b"), 1) as sock:
            sock.sendall(b"ping")
            deadline = time.monotonic() + 2
            while not p.response_counts["lost_frames"] and time.monotonic() < deadline:
                time.sleep(0.01)  # polling a counter of the proxy's loop thread: nothing to await here
            started = time.monotonic()
            p.heal()
            assert closed_by_peer(sock)
            assert time.monotonic() - started < 0.5
            assert p.response_counts == {"lost_frames": 1, "late_frames": 0, "reset_connections": 1}

"""The proxy's request hold (``FaultProxy.hold_requests``, the ``late-requests`` fault): what clients send to a node
is held back while answers pass, and held requests still land, in order, after their client gave up and closed
the connection."""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from odradek.chaos.proxy import FaultProxy


@dataclass
class Recorder:
    """A server standing in for a broker: it greets each connection (an answer the client did not wait for) and
    records every byte it receives, with the time it arrived."""

    address: tuple[str, int] = ("", 0)
    received: list[tuple[float, bytes]] = field(default_factory=list)
    arrived: threading.Condition = field(default_factory=threading.Condition)

    def data(self) -> bytes:
        with self.arrived:
            return b"".join(chunk for _, chunk in self.received)

    def wait_for(self, expected: bytes, timeout: float = 5.0) -> float:
        """Block until ``expected`` has arrived in all; returns when its last byte did."""
        with self.arrived:
            if not self.arrived.wait_for(lambda: expected in b"".join(c for _, c in self.received), timeout):
                raise AssertionError(f"{expected!r} never arrived; got {self.data()!r}")
            return self.received[-1][0]


@pytest.fixture
def recorder() -> Iterator[Recorder]:
    server = socket.create_server(("127.0.0.1", 0))
    rec = Recorder(server.getsockname()[:2])
    stop = threading.Event()

    def serve(conn: socket.socket) -> None:
        with conn:
            try:
                conn.sendall(b"hello")
                while data := conn.recv(4096):
                    with rec.arrived:
                        rec.received.append((time.monotonic(), data))
                        rec.arrived.notify_all()
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
    yield rec
    stop.set()
    server.close()


def kafka_request(api_key: int, version: int, body: bytes = b"x" * 20) -> bytes:
    """A Kafka request frame: size, then api key, version, correlation id and the rest."""
    payload = struct.pack(">hhi", api_key, version, 7) + body
    return struct.pack(">i", len(payload)) + payload


def test_requests_are_held_while_answers_pass(recorder: Recorder) -> None:
    with FaultProxy() as p:
        address = p.add_link("clients", "b", recorder.address)
        p.add_link("clients", "c", recorder.address)
        p.hold_requests("b", 500)
        assert p.faults == [{"kind": "hold-requests", "host": "b", "hold_ms": 500}]
        with socket.create_connection(address, 2) as sock:
            started = time.monotonic()
            assert sock.recv(5) == b"hello"  # the way back is not held
            assert time.monotonic() - started < 0.4
            sock.sendall(b"late")
            arrived = recorder.wait_for(b"late")
            assert arrived - started >= 0.5
        with socket.create_connection(p.address("clients", "c"), 2) as other:  # links to other nodes: not held
            started = time.monotonic()
            other.sendall(b"direct")
            assert recorder.wait_for(b"direct") - started < 0.4
        p.heal()
        assert p.wait_requests_landed(2)
        assert p.request_counts == {"held": 1, "landed": 1, "landed_after_close": 0, "dropped": 0}
        with pytest.raises(KeyError):
            p.hold_requests("nobody", 100)


@pytest.mark.parametrize("reset", [False, True], ids=["closed", "reset"])
def test_held_requests_land_after_their_client_closed_the_connection(recorder: Recorder, reset: bool) -> None:
    """As a client that timed out and closed its connection: its request, still in the network, lands later."""
    with FaultProxy() as p:
        address = p.add_link("clients", "b", recorder.address, kafka=True)
        p.hold_requests("b", 600)
        sock = socket.create_connection(address, 2)
        sent = time.monotonic()
        sock.sendall(kafka_request(26, 3) + kafka_request(0, 9))  # EndTxn v3 and Produce v9 in one chunk
        time.sleep(0.1)  # the proxy read them before the client goes away
        if reset:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()
        arrived = recorder.wait_for(kafka_request(26, 3) + kafka_request(0, 9))
        assert arrived - sent >= 0.6
        p.heal()
        assert p.wait_requests_landed(2)
        assert p.request_counts == {"held": 2, "landed": 2, "landed_after_close": 2, "dropped": 0}
        assert p.held_apis == {"EndTxn v3": 1, "Produce v9": 1}


def test_requests_held_until_the_heal_land_at_it_after_their_client_left(recorder: Recorder) -> None:
    """Without ``hold_ms``, nothing reaches the node until the heal, which delivers every connection's bytes in
    order, those of clients that closed their connection meanwhile included."""
    with FaultProxy() as p:
        address = p.add_link("clients", "b", recorder.address, kafka=True)
        p.hold_requests("b")
        assert p.faults == [{"kind": "hold-requests", "host": "b", "hold_ms": None}]
        gone = socket.create_connection(address, 2)
        gone.sendall(kafka_request(0, 9))
        with socket.create_connection(address, 2) as stays:
            assert stays.recv(5) == b"hello"  # answers pass
            stays.sendall(kafka_request(26, 1))
            time.sleep(0.1)
            gone.close()
            time.sleep(0.5)
            assert recorder.data() == b""  # held for as long as the fault lasts
            healed = time.monotonic()
            p.heal()
            assert p.wait_requests_landed(2)
            assert recorder.wait_for(kafka_request(26, 1)) - healed < 0.5
            assert recorder.wait_for(kafka_request(0, 9)) - healed < 0.5
        assert p.request_counts == {"held": 2, "landed": 2, "landed_after_close": 1, "dropped": 0}
        assert p.held_apis == {"EndTxn v1": 1, "Produce v9": 1}


def test_heal_keeps_the_order_and_waits_for_held_requests(recorder: Recorder) -> None:
    """Bytes sent after the heal queue behind the held ones, as a TCP stream's do."""
    with FaultProxy() as p:
        address = p.add_link("clients", "b", recorder.address)
        with socket.create_connection(address, 2) as sock:
            sock.sendall(b"1")
            recorder.wait_for(b"1")
            p.hold_requests("b", 700)
            sock.sendall(b"2")
            time.sleep(0.1)
            p.heal()
            sock.sendall(b"3")
            assert not p.wait_requests_landed(0.2)  # "2" is still held
            assert recorder.data() == b"1"
            assert p.wait_requests_landed(3)
            recorder.wait_for(b"123")
            assert recorder.data() == b"123"


def test_requests_that_cannot_land_are_counted_as_dropped() -> None:
    """The target went away while the requests were held."""
    server = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []
    threading.Thread(target=lambda: accepted.append(server.accept()[0]), daemon=True).start()
    with FaultProxy() as p:
        address = p.add_link("clients", "b", server.getsockname()[:2])
        with socket.create_connection(address, 2) as sock:
            p.hold_requests("b", 500)
            sock.sendall(b"doomed")
            deadline = time.monotonic() + 2
            # The proxy connects upstream, then reads the request, on its own thread: nothing to await here. Both
            # must have happened before the target goes away, or there is nothing held for the reset to drop.
            while not (accepted and p.request_counts["held"]) and time.monotonic() < deadline:
                time.sleep(0.01)
            assert p.request_counts["held"] == 1
            conn = accepted[0]
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            conn.close()  # the target crashes: its reset reaches the proxy before the hold ends
            assert p.wait_requests_landed(3)
            assert p.request_counts["dropped"] == 1 and p.request_counts["landed"] == 0
    server.close()


def test_every_late_request_of_a_departed_client_is_served() -> None:
    """A server that answers each request before reading the next, as a Kafka broker does: the proxy reads (and
    drops) its answers until it is done, so the answer to the first late request does not cut off the others."""
    server = socket.create_server(("127.0.0.1", 0))
    served: list[bytes] = []
    done = threading.Event()

    def serve() -> None:
        conn, _ = server.accept()
        with conn:
            try:
                while head := conn.recv(4, socket.MSG_WAITALL):
                    (size,) = struct.unpack(">i", head)
                    served.append(conn.recv(size, socket.MSG_WAITALL))
                    time.sleep(0.05)  # the request is applied, then answered
                    conn.sendall(b"answer" * 1000)
            except OSError:
                pass
        done.set()

    threading.Thread(target=serve, daemon=True).start()
    requests = [kafka_request(0, 9, bytes([n]) * 20) for n in range(5)]
    with FaultProxy() as p:
        address = p.add_link("clients", "b", server.getsockname()[:2], kafka=True)
        sock = socket.create_connection(address, 2)
        p.hold_requests("b", 300)
        sock.sendall(b"".join(requests))  # pipelined, as a client sends them
        time.sleep(0.1)
        sock.close()  # the client gave up before any of them landed
        assert done.wait(5)
        assert served == [r[4:] for r in requests]
        assert p.request_counts["landed_after_close"] == 5
    server.close()

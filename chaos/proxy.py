"""Fault-injecting TCP proxy on 127.0.0.1: the fallback where network namespaces cannot be created.

Every directed link "node a talks to node b" is one listening port of the proxy, forwarding to b's real address.
A connection is attributed to a link by the port it arrived on, since on loopback the source address tells nothing.
Faults act on links: a blocked pair stalls (``mode="drop"``) or resets (``mode="reject"``) the connections of both
its links; delays hold every forwarded chunk back, in order.

Response faults are direction-aware: requests (bytes from the connecting side) pass, and only what flows back is
lost (:meth:`FaultProxy.lose_responses`) or late (:meth:`FaultProxy.delay_responses`), so a call reaches the server
and is applied while its caller times out. On links added with ``http2=True`` (gRPC) the proxy follows the frames
flowing back: connection-level frames (stream 0: SETTINGS, PING, GOAWAY) still pass on time, so new connections
open and send requests, while the frames of streams (the responses) are delayed or dropped; a connection that
dropped a response forwards no further stream frames and is reset ``hold_ms`` after its first loss (an HTTP/2
connection cannot skip frames and stay usable), by which time its callers' deadlines have passed.

Request faults are the mirror image (:meth:`FaultProxy.hold_requests`): what flows towards a node is held back
until the heal (as TCP retransmits it once a one-way outage ends), or ``hold_ms`` from its arrival, in order, while
answers pass. Held longer than the clients' request timeout, a request lands after its client gave up on it, as a
packet delayed in the network would. A held chunk is delivered even if
its client closed or reset the connection meanwhile (the client's data was already "in the network"), and the
target's answers to it are then read and dropped; only a target that went away drops it. On links added with
``kafka=True`` the proxy follows the Kafka request frames, so its counts are of requests, with their API and
version (``held_apis``); on other links they are of chunks read.

Limits compared with :class:`~odradek.chaos.netns.NetnsNetwork`, which the run report must mention:

* Every process binds its own real port on 127.0.0.1, and only traffic routed through proxy ports is faulted. The
  cluster config must give each node the proxy address of each peer (``address(src, dst)``), which differs per
  source; addresses a node advertises itself (metadata, redirects to a leader) bypass the proxy unless they too
  are proxy addresses, and a node that connects to a peer's real port is never partitioned.
* "drop" cannot make connects time out: the proxy's listening socket completes the handshake, so a connect succeeds
  and then nothing moves (stalled connections are held, and their data is delivered after heal, as TCP would
  retransmit it). "reject" resets connections instead of refusing them.
* No packet loss or bandwidth limit (TCP never shows loss to applications, only delay, so use ``delay``), and delay
  is applied per chunk read, not per packet.
* Each proxied connection is two TCP connections: the peer sees the proxy's address, keepalives and socket options
  end at the proxy, and a half-closed or reset side is passed on only as the proxy observes it.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import socket
import struct
import threading
from collections import Counter
from collections.abc import Awaitable, Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, TypeVar

from .netns import NotSupported, fault_pairs

__all__ = ["FaultProxy", "NotSupported"]

Node = Hashable
Address = tuple[str, int]
T = TypeVar("T")
LATE_ANSWERS_S = 10.0  # how long the target may take to answer the late requests of a client that is gone


class _ClientGone(Exception):
    """The client closed or reset its connection while requests it sent were still held."""


def _reset(writer: asyncio.StreamWriter) -> None:
    """Close with RST (SO_LINGER 0), as a rejecting firewall or a crashed peer would."""
    sock = writer.get_extra_info("socket")
    with contextlib.suppress(OSError, AttributeError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


@dataclass(eq=False)
class _Link:
    src: Node
    dst: Node
    target: Address
    open: asyncio.Event
    server: asyncio.Server | None = None
    address: Address = ("", 0)  # where the proxy listens for this link
    writers: set[asyncio.StreamWriter] = field(default_factory=set)
    http2: bool = False  # the return direction carries HTTP/2 frames (gRPC): response faults follow them
    kafka: bool = False  # the forward direction carries Kafka request frames: request faults count requests
    conns: set[_Conn] = field(default_factory=set)


@dataclass(eq=False)
class _Chunk:
    """Bytes read from a client, due at the target at ``due`` (loop time); ``requests`` counts what a request fault
    held (Kafka requests starting in it, or 1 on a link without Kafka framing)."""

    due: float
    data: bytes
    held: bool = False
    requests: int = 0
    release: asyncio.Event | None = None  # held until this is set (the fault's heal), then due


@dataclass(eq=False)
class _Conn:
    """One proxied connection, for response faults: once it lost a response it is doomed, reset at ``doomed_at``."""

    doomed: asyncio.Event = field(default_factory=asyncio.Event)
    doomed_at: float = 0.0
    reset_now: asyncio.Event = field(default_factory=asyncio.Event)  # heal: no need to wait for doomed_at
    lost_frames: int = 0
    # The way to the target: chunks read and not yet written, kept here rather than in a task's locals, so that
    # held ones can still land when the connection's tasks end (the client went away).
    requests: asyncio.Queue[_Chunk] = field(default_factory=lambda: asyncio.Queue(maxsize=64))
    current: _Chunk | None = None  # taken from the queue, not written yet
    held: list[_Chunk] = field(default_factory=list)  # held chunks neither landed nor dropped
    client_gone: bool = False  # the client closed or reset its side


class _Frames:
    """Splits an HTTP/2 byte stream (after any preface) into whole frames: (stream id, frame bytes)."""

    def __init__(self) -> None:
        self._buf = bytearray()

    def feed(self, data: bytes) -> list[tuple[int, bytes]]:
        self._buf += data
        out = []
        while len(self._buf) >= 9:
            length = int.from_bytes(self._buf[0:3], "big")
            if len(self._buf) < 9 + length:
                break
            stream = int.from_bytes(self._buf[5:9], "big") & 0x7FFFFFFF
            out.append((stream, bytes(self._buf[: 9 + length])))
            del self._buf[: 9 + length]
        return out


# Names of the Kafka APIs a client sends, for the counts of held requests (others are named by their key).
_KAFKA_APIS = {
    0: "Produce",
    1: "Fetch",
    2: "ListOffsets",
    3: "Metadata",
    8: "OffsetCommit",
    9: "OffsetFetch",
    10: "FindCoordinator",
    11: "JoinGroup",
    12: "Heartbeat",
    13: "LeaveGroup",
    14: "SyncGroup",
    17: "SaslHandshake",
    18: "ApiVersions",
    22: "InitProducerId",
    23: "OffsetForLeaderEpoch",
    24: "AddPartitionsToTxn",
    25: "AddOffsetsToTxn",
    26: "EndTxn",
    28: "TxnOffsetCommit",
    36: "SaslAuthenticate",
}


class _KafkaRequests:
    """Follows the Kafka request frames of a client's byte stream (a 4-byte size, then the header: api key,
    version, ...): which requests start in each chunk, as "Name vN"."""

    def __init__(self) -> None:
        self._head = bytearray()
        self._skip = 0  # bytes of the current frame still to come

    def feed(self, data: bytes) -> list[str]:
        out = []
        i = 0
        while i < len(data):
            if self._skip:
                step = min(self._skip, len(data) - i)
                self._skip -= step
                i += step
                continue
            take = data[i : i + 8 - len(self._head)]
            self._head += take
            i += len(take)
            if len(self._head) == 8:
                size, key, version = struct.unpack(">ihh", self._head)
                out.append(f"{_KAFKA_APIS.get(key, f'api {key}')} v{version}")
                self._skip = max(0, size - 4)
                self._head.clear()
        return out


class FaultProxy:
    """Links between named nodes through one asyncio loop in a daemon thread; public methods are thread-safe."""

    mechanism: ClassVar[str] = "proxy"

    def __init__(self, host: str = "127.0.0.1", *, mode: Literal["drop", "reject"] = "drop") -> None:
        if mode not in ("drop", "reject"):
            raise ValueError(f"unknown mode {mode!r}")
        self.host = host
        self.mode = mode
        self.exempt: set[Node] = set()  # clients: never cut by isolate/partition/bridge (Jepsen's control node)
        self._links: list[_Link] = []
        self._link_faults: list[dict[str, Any]] = []
        self._blocked: set[tuple[Node, Node]] = set()
        self._global_delay = (0.0, 0.0)  # (delay, jitter) in seconds, every link
        self._node_delay: dict[Node, tuple[float, float]] = {}
        self._response_faults: dict[tuple[Node, Node], dict[str, Any]] = {}  # (src, dst) -> fault
        self.response_counts = {"lost_frames": 0, "late_frames": 0, "reset_connections": 0}  # for run reports
        self._request_faults: dict[tuple[Node, Node], dict[str, Any]] = {}  # (src, dst) -> fault
        self._releases: list[tuple[dict[str, Any], asyncio.Event]] = []  # faults holding until the heal, and its event
        # Held requests (or chunks, on links without Kafka framing): those that reached the target, those of them
        # whose client had closed or reset its connection by then (it gave up on them), those the target never got.
        self.request_counts = {"held": 0, "landed": 0, "landed_after_close": 0, "dropped": 0}
        self.held_apis: Counter[str] = Counter()  # held Kafka requests by API and version
        self._held_pending = 0  # held chunks neither landed nor dropped yet
        self._settled = asyncio.Event()  # set while none is pending
        self._settled.set()
        self._lock = threading.RLock()
        self._closed = False
        self._stopping = False
        self._tasks: set[asyncio.Task[None]] = set()  # connection handlers, cancelled by close()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="fault-proxy", daemon=True)
        self._thread.start()

    def _call(self, fn: Callable[[], Awaitable[T]], timeout: float = 10.0) -> T:
        if self._closed:
            raise RuntimeError("proxy is closed")

        async def run() -> T:
            return await fn()

        return asyncio.run_coroutine_threadsafe(run(), self._loop).result(timeout)

    # ----------------------------------------------------------------------------------------------- links

    def add_link(
        self, src: Node, dst: Node, target: Address, port: int = 0, *, http2: bool = False, kafka: bool = False
    ) -> Address:
        """Listen for src's connections to dst (at ``target``); returns the address src must be configured with.
        ``http2``: the target speaks HTTP/2 (gRPC), so response faults can drop responses frame by frame.
        ``kafka``: src sends Kafka requests, so request faults count them by API."""
        if src == dst:
            raise ValueError("a link needs two different nodes")
        if http2 and kafka:
            raise ValueError("a link carries HTTP/2 or Kafka's protocol, not both")

        async def start() -> Address:
            link = _Link(src, dst, target, asyncio.Event(), http2=http2, kafka=kafka)
            link.server = await asyncio.start_server(
                lambda r, w: self._serve(link, r, w), self.host, port, reuse_address=True
            )
            link.address = link.server.sockets[0].getsockname()[:2]
            with self._lock:
                self._links.append(link)
                self._apply_blocked()  # a new node may fall under an active isolate/partition
            return link.address

        return self._call(start)

    def mesh(self, targets: Mapping[Node, Address], clients: Iterable[Node] = ()) -> dict[tuple[Node, Node], Address]:
        """Links between all pairs of ``targets`` plus from each client to each node; clients are exempt from faults.

        Returns {(src, dst): proxy address}: node src's config lists peer dst at that address.
        """
        out = {(a, b): self.add_link(a, b, targets[b]) for a in targets for b in targets if a != b}
        for c in clients:
            self.exempt.add(c)
            out.update({(c, b): self.add_link(c, b, targets[b]) for b in targets})
        return out

    def address(self, src: Node, dst: Node, target: Address | None = None) -> Address:
        """The proxy address of link src→dst (``target`` picks one if the pair has several)."""
        found = [
            link
            for link in self.links
            if link.src == src and link.dst == dst and (target is None or link.target == target)
        ]
        if len(found) != 1:
            raise KeyError(f"{len(found)} links {src!r}->{dst!r} (target {target!r})")
        return found[0].address

    @property
    def links(self) -> list[_Link]:
        with self._lock:
            return list(self._links)

    @property
    def nodes(self) -> list[Node]:
        """Nodes that faults apply to: every link end except the exempt clients, in order of appearance."""
        seen: dict[Node, None] = {}
        for link in self.links:
            seen.setdefault(link.src)
            seen.setdefault(link.dst)
        return [n for n in seen if n not in self.exempt]

    # ----------------------------------------------------------------------------------------------- forwarding

    async def _serve(self, link: _Link, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._stopping or (self.mode == "reject" and not link.open.is_set()):
            _reset(writer)
            return
        link.writers.add(writer)
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        upstream: asyncio.StreamWriter | None = None
        up_reader: asyncio.StreamReader | None = None
        clean = False
        conn = _Conn()
        link.conns.add(conn)
        try:
            await link.open.wait()  # "drop": a connection made during a partition waits for the heal
            up_reader, upstream = await asyncio.open_connection(*link.target)
            link.writers.add(upstream)
            async with asyncio.TaskGroup() as tg:
                tg.create_task(self._requests(link, conn, reader, upstream))
                responses = tg.create_task(self._pipe(link, up_reader, writer, conn))
                doom = tg.create_task(self._doom(conn))
                responses.add_done_callback(lambda _: doom.cancel())  # the return direction ended: nothing to lose
            clean = True  # both directions ended with EOF
        except (OSError, ExceptionGroup):
            # One side failed or was reset (target down included): reset the other one too, once held requests
            # landed (their client may be gone, the requests are still on their way).
            if upstream is not None and up_reader is not None and conn.held:
                with contextlib.suppress(OSError, asyncio.CancelledError):
                    await self._land_held(link, conn, up_reader, upstream)
        except asyncio.CancelledError:
            pass  # close(): end normally, since 3.11's stream callback logs a cancelled client task as an error
        finally:
            for chunk in list(conn.held):
                self._settle(conn, chunk, landed=False)
            self._tasks.discard(task)
            link.conns.discard(conn)
            for w in (writer, upstream):
                if w is not None:
                    link.writers.discard(w)
                    if clean:
                        w.close()
                    elif not w.transport.is_closing():
                        _reset(w)

    async def _requests(self, link: _Link, conn: _Conn, src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        """Copy what the client sends to the target. As in :meth:`_pipe`, link delays and blocks hold chunks back,
        in order; under a request fault each chunk is also held until the heal, or ``hold_ms`` from its arrival."""
        loop = asyncio.get_running_loop()
        framing = _KafkaRequests() if link.kafka else None

        async def pump_in() -> None:
            last_due = 0.0
            while True:
                await link.open.wait()
                try:
                    data = await src.read(65536)
                except OSError:
                    conn.client_gone = True
                    if conn.held:
                        raise _ClientGone from None
                    raise
                delay, jitter = self._link_delay(link)
                chunk = _Chunk(0.0, data)
                if data:
                    apis = framing.feed(data) if framing is not None else []
                    fault = self._request_faults.get((link.src, link.dst))
                    if fault is not None:
                        if fault["hold_ms"] is None:
                            chunk.release = next((e for f, e in self._releases if f is fault), None)  # None: healed
                        else:
                            delay += fault["hold_ms"] / 1000
                        self._hold(conn, chunk, apis if framing is not None else None)
                else:
                    conn.client_gone = True
                    if conn.held:  # the held requests land without it, and their answers go nowhere
                        raise _ClientGone
                last_due = max(last_due, loop.time() + max(0.0, delay + random.uniform(-jitter, jitter)))
                chunk.due = last_due
                await conn.requests.put(chunk)
                if not data:
                    return

        async def pump_out() -> None:
            while True:
                chunk = conn.current = await conn.requests.get()
                if not await self._deliver(link, conn, chunk, dst):
                    return

        async with asyncio.TaskGroup() as tg:
            tg.create_task(pump_in())
            tg.create_task(pump_out())

    async def _deliver(self, link: _Link, conn: _Conn, chunk: _Chunk, dst: asyncio.StreamWriter) -> bool:
        """Write one chunk to the target when it is due; False once the stream ended (EOF passed on)."""
        if chunk.release is not None:
            await chunk.release.wait()
        await asyncio.sleep(max(0.0, chunk.due - asyncio.get_running_loop().time()))
        await link.open.wait()
        if dst.transport.is_closing():  # the target went away: a write would vanish without an error
            raise ConnectionResetError("the target closed the connection")
        conn.current = None
        if not chunk.data:
            if dst.can_write_eof():
                dst.write_eof()
            return False
        dst.write(chunk.data)
        self._settle(conn, chunk, landed=True)
        await dst.drain()
        return True

    async def _land_held(
        self, link: _Link, conn: _Conn, answers: asyncio.StreamReader, dst: asyncio.StreamWriter
    ) -> None:
        """After the client went away: write what it sent and the target did not get yet, held requests included,
        in order, each when due, then the end of the stream. The target's answers are read and dropped until it
        closes: a target that answers each request before reading the next (a Kafka broker) would otherwise hit
        the closed connection at its first answer and never read the others."""
        chunks = [conn.current] if conn.current is not None else []
        while not conn.requests.empty():
            chunks.append(conn.requests.get_nowait())
        for chunk in chunks:
            conn.current = chunk
            if not await self._deliver(link, conn, chunk, dst):
                break
        if dst.can_write_eof():
            dst.write_eof()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(LATE_ANSWERS_S):
                while await answers.read(65536):
                    pass
        dst.close()

    def _hold(self, conn: _Conn, chunk: _Chunk, apis: list[str] | None) -> None:
        """Count a chunk a request fault holds (``apis``: the Kafka requests starting in it, None without framing)."""
        chunk.held = True
        chunk.requests = 1 if apis is None else len(apis)
        self.request_counts["held"] += chunk.requests
        self.held_apis.update(apis or ())
        conn.held.append(chunk)
        self._held_pending += 1
        self._settled.clear()

    def _settle(self, conn: _Conn, chunk: _Chunk, *, landed: bool) -> None:
        """A held chunk reached the target, or never will."""
        if not chunk.held or chunk not in conn.held:
            return
        conn.held.remove(chunk)
        if landed:
            self.request_counts["landed"] += chunk.requests
            if conn.client_gone:
                self.request_counts["landed_after_close"] += chunk.requests
        else:
            self.request_counts["dropped"] += chunk.requests
        self._held_pending -= 1
        if not self._held_pending:
            self._settled.set()

    async def _doom(self, conn: _Conn) -> None:
        """Reset a connection that lost a response, once its hold time is over (raising ends the TaskGroup)."""
        await conn.doomed.wait()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(conn.reset_now.wait(), conn.doomed_at - asyncio.get_running_loop().time())
        self.response_counts["reset_connections"] += 1
        raise ConnectionResetError(f"response lost ({conn.lost_frames} frames)")

    async def _pipe(
        self, link: _Link, src: asyncio.StreamReader, dst: asyncio.StreamWriter, conn: _Conn | None = None
    ) -> None:
        """Copy one direction; a chunk is held back by the link's delay and by blocks, never reordered or lost,
        except by response faults in the return direction (``conn`` given)."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue(maxsize=64)
        frames = _Frames() if conn is not None and link.http2 else None

        async def pump_in() -> None:
            last_due = 0.0
            while True:
                await link.open.wait()
                data = await src.read(65536)
                delay, jitter = self._link_delay(link)
                fault = self._response_faults.get((link.src, link.dst)) if conn is not None else None
                if fault is not None and fault["kind"] == "delay-responses":
                    delay += fault["delay_ms"] / 1000
                    if data and frames is not None:  # connection frames go ahead, so new connections open
                        split = frames.feed(data)
                        dst.write(b"".join(frame for stream, frame in split if stream == 0))
                        late = [frame for stream, frame in split if stream != 0]
                        self.response_counts["late_frames"] += len(late)
                        data = b"".join(late)
                        if not data:
                            continue
                    elif data:
                        self.response_counts["late_frames"] += 1
                elif data and conn is not None and (fault is not None or conn.doomed.is_set()):
                    data = self._lose(conn, fault, frames.feed(data) if frames is not None else [(1, data)])
                    if not data:
                        continue
                elif data and frames is not None:
                    data = b"".join(frame for _, frame in frames.feed(data))  # keep the framing in step
                    if not data:
                        continue
                last_due = max(last_due, loop.time() + max(0.0, delay + random.uniform(-jitter, jitter)))
                await queue.put((last_due, data))
                if not data:
                    return

        async def pump_out() -> None:
            while True:
                due, data = await queue.get()
                await asyncio.sleep(max(0.0, due - loop.time()))
                await link.open.wait()
                if not data:
                    if dst.can_write_eof():
                        dst.write_eof()
                    return
                dst.write(data)
                await dst.drain()

        async with asyncio.TaskGroup() as tg:
            tg.create_task(pump_in())
            tg.create_task(pump_out())

    def _lose(self, conn: _Conn, fault: dict[str, Any] | None, frames: list[tuple[int, bytes]]) -> bytes:
        """Under a lose-responses fault (or on a connection that already lost one): drop stream frames, doom the
        connection; connection-level frames pass. Returns the bytes still to forward."""
        keep = []
        for stream, frame in frames:
            if stream == 0:
                keep.append(frame)
                continue
            conn.lost_frames += 1
            self.response_counts["lost_frames"] += 1
            if not conn.doomed.is_set():
                hold = fault["hold_ms"] / 1000 if fault is not None else 0.0
                conn.doomed_at = asyncio.get_running_loop().time() + hold
                conn.doomed.set()
        return b"".join(keep)

    def _link_delay(self, link: _Link) -> tuple[float, float]:
        d, j = self._global_delay
        for node in (link.src, link.dst):
            nd, nj = self._node_delay.get(node, (0.0, 0.0))
            d, j = d + nd, j + nj
        return d, j

    def _update_gate(self, link: _Link) -> None:
        """Runs in the loop: open or close a link's gate to match the blocked pairs."""
        if (link.src, link.dst) in self._blocked or (link.dst, link.src) in self._blocked:
            link.open.clear()
            if self.mode == "reject":
                for w in list(link.writers):
                    _reset(w)
        else:
            link.open.set()

    # ----------------------------------------------------------------------------------------------- faults

    @property
    def faults(self) -> list[dict[str, Any]]:
        """Active faults, in the order applied, as plain dicts for the run report."""
        with self._lock:
            out = [dict(f) for f in self._link_faults]
            if self._global_delay != (0.0, 0.0):
                d, j = self._global_delay
                out.append({"kind": "delay", "delay_ms": d * 1000, "jitter_ms": j * 1000})
            for node, (d, j) in self._node_delay.items():
                out.append({"kind": "slow", "host": node, "delay_ms": d * 1000, "jitter_ms": j * 1000})
            seen = []
            for fault in [*self._response_faults.values(), *self._request_faults.values()]:
                if fault not in seen:
                    seen.append(fault)
            return out + [dict(f) for f in seen]

    @property
    def blocked(self) -> list[tuple[Node, Node]]:
        with self._lock:
            return sorted(self._blocked, key=repr)

    def block(self, a: Node, b: Node) -> None:
        """a and b cannot reach each other (both link directions)."""
        if a == b:
            raise ValueError("a node cannot be cut from itself")
        self._add_link_fault({"kind": "block", "a": a, "b": b})

    def isolate(self, node: Node) -> None:
        """node reaches no other node and no node reaches it (clients still do)."""
        self._add_link_fault({"kind": "isolate", "host": node})

    def partition(self, groups: Sequence[Sequence[Node]]) -> None:
        """Nodes reach only nodes of their own group; a node in no group is a group of its own."""
        flat = [n for g in groups for n in g]
        if len(flat) != len(set(flat)):
            raise ValueError(f"a node is in two groups: {groups!r}")
        self._add_link_fault({"kind": "partition", "groups": [list(g) for g in groups]})

    def bridge(self, left: Sequence[Node], middle: Node, right: Sequence[Node]) -> None:
        """left and right cannot talk to each other, but all of them reach middle (Jepsen's bridge)."""
        if set(left) & set(right) or middle in left or middle in right:
            raise ValueError(f"bridge groups overlap: {left} {middle} {right}")
        self._add_link_fault({"kind": "bridge", "left": list(left), "middle": middle, "right": list(right)})

    def delay(self, ms: float, jitter_ms: float = 0) -> None:
        """Every link holds data back ``ms`` (± jitter) per direction, on top of per-node :meth:`slow`."""
        if ms < 0 or jitter_ms < 0:
            raise ValueError("delay and jitter must be >= 0")
        with self._lock:
            self._global_delay = (ms / 1000, jitter_ms / 1000)

    def slow(
        self, node: Node, delay_ms: float = 0, jitter_ms: float = 0, loss_pct: float = 0, rate_kbit: int | None = None
    ) -> None:
        """Same signature as the netns one: node's links get the delay (both ends slow: the sum), per direction."""
        if loss_pct or rate_kbit:
            raise NotSupported("the TCP proxy cannot drop packets or limit bandwidth; use delay instead")
        if delay_ms < 0 or jitter_ms < 0:
            raise ValueError("delay and jitter must be >= 0")
        with self._lock:
            self._node_delay[node] = (delay_ms / 1000, jitter_ms / 1000)

    def lose_responses(self, node: Node, peers: Iterable[Node] | None = None, hold_ms: float = 2500) -> None:
        """What flows back on the connections ``node`` opened (to ``peers``, default all) is lost: requests arrive
        and are served, their responses never come; each such connection is reset ``hold_ms`` after its first
        lost response (choose it above the callers' deadline, so that their calls time out first)."""
        if hold_ms < 0:
            raise ValueError("hold_ms must be >= 0")
        self._add_response_fault(node, peers, {"kind": "lose-responses", "host": node, "hold_ms": hold_ms})

    def delay_responses(self, node: Node, delay_ms: float, peers: Iterable[Node] | None = None) -> None:
        """What flows back on the connections ``node`` opened (to ``peers``) arrives ``delay_ms`` late, requests
        are not delayed: with a delay above the callers' deadline, calls time out after the server applied them."""
        if delay_ms < 0:
            raise ValueError("delay_ms must be >= 0")
        self._add_response_fault(node, peers, {"kind": "delay-responses", "host": node, "delay_ms": delay_ms})

    def hold_requests(self, node: Node, hold_ms: float | None = None, sources: Iterable[Node] | None = None) -> None:
        """What the connections to ``node`` (from ``sources``, default all) carry towards it is held, in order, until
        the heal (``hold_ms`` None), or ``hold_ms`` from its arrival; answers pass. Held longer than the clients'
        request timeout, requests land after their clients gave up on them. Healing stops holding new bytes and
        releases those held until then (those held ``hold_ms`` land when due); :meth:`wait_requests_landed` waits
        for them."""
        if hold_ms is not None and hold_ms < 0:
            raise ValueError("hold_ms must be >= 0")
        wanted = None if sources is None else set(sources)
        pairs = {(lk.src, lk.dst) for lk in self.links if lk.dst == node and (wanted is None or lk.src in wanted)}
        if not pairs:
            raise KeyError(f"no links to {node!r}" + (f" from {sorted(wanted, key=repr)}" if wanted else ""))
        fault: dict[str, Any] = {"kind": "hold-requests", "host": node, "hold_ms": hold_ms}
        if wanted is not None:
            fault["sources"] = sorted(wanted, key=repr)
        with self._lock:
            if hold_ms is None:
                self._releases.append((fault, asyncio.Event()))
            for pair in pairs:
                self._request_faults[pair] = fault

    def wait_requests_landed(self, timeout: float) -> bool:
        """Wait until every held request landed or was dropped; False if some are still held after ``timeout``."""

        async def wait() -> bool:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._settled.wait(), timeout)
            return self._settled.is_set()

        return self._call(wait, timeout + 5)

    def _add_response_fault(self, node: Node, peers: Iterable[Node] | None, fault: dict[str, Any]) -> None:
        wanted = None if peers is None else set(peers)
        pairs = {(lk.src, lk.dst) for lk in self.links if lk.src == node and (wanted is None or lk.dst in wanted)}
        if not pairs:
            raise KeyError(f"no links from {node!r}" + (f" to {sorted(wanted, key=repr)}" if wanted else ""))
        with self._lock:
            if wanted is not None:
                fault["peers"] = sorted(wanted, key=repr)
            for pair in pairs:
                self._response_faults[pair] = fault

    def heal(self, *, links: bool = True, slow: bool = True, responses: bool = True, requests: bool = True) -> None:
        """Remove faults (all by default); stalled connections resume, connections that lost responses are reset
        now, held requests land when due. Idempotent."""
        with self._lock:
            if links:
                self._link_faults.clear()
            if slow:
                self._global_delay = (0.0, 0.0)
                self._node_delay.clear()
            if responses:
                self._response_faults.clear()
            if requests:
                self._request_faults.clear()
        if links and not self._closed:
            self._sync_blocked()
        if responses and not self._closed:
            self._reset_doomed()
        if requests and not self._closed:
            self._release_held()

    def _release_held(self) -> None:
        """Let every chunk held until the heal go (in order, per connection), and forget their faults."""
        with self._lock:
            active = list(self._request_faults.values())
            released = [e for f, e in self._releases if not any(f is a for a in active)]
            self._releases = [(f, e) for f, e in self._releases if any(f is a for a in active)]

        async def release() -> None:
            for event in released:
                event.set()

        self._call(release)

    def _reset_doomed(self) -> None:
        async def reset() -> None:
            for link in self.links:
                for conn in link.conns:
                    if conn.doomed.is_set():
                        conn.reset_now.set()
            for _ in range(5):  # let the resets run (a wake-up takes a few loop turns), so that counts include them
                await asyncio.sleep(0)

        self._call(reset)

    def _add_link_fault(self, fault: dict[str, Any]) -> None:
        with self._lock:
            if fault not in self._link_faults:
                self._link_faults.append(fault)
        self._sync_blocked()

    def _sync_blocked(self) -> None:
        async def apply() -> None:
            with self._lock:
                self._apply_blocked()

        self._call(apply)

    def _apply_blocked(self) -> None:
        """In the loop, under the lock: recompute the blocked pairs and open or close every link's gate."""
        nodes = self.nodes
        want: set[tuple[Node, Node]] = set()
        for fault in self._link_faults:
            want |= fault_pairs(fault, nodes)
        self._blocked = want
        for link in self._links:
            self._update_gate(link)

    def describe(self) -> dict[str, Any]:
        return {
            "mechanism": self.mechanism,
            "mode": self.mode,
            "links": [
                {"src": link.src, "dst": link.dst, "listen": link.address, "target": link.target} for link in self.links
            ],
            "faults": self.faults,
        }

    # ----------------------------------------------------------------------------------------------- lifecycle

    def close(self) -> None:
        """Stop listening, reset all proxied connections, stop the loop thread. Idempotent."""
        if self._closed:
            return

        async def shutdown() -> None:
            self._stopping = True  # connections accepted from now on are reset at once
            loop = asyncio.get_running_loop()
            for link in self._links:
                # Stop accepting but close the servers only at the end: 3.11 leaks a socket accepted just before
                # Server.close() (its transport cannot attach to a closed server).
                for sock in link.server.sockets if link.server is not None else ():
                    loop.remove_reader(sock.fileno())
            current = asyncio.current_task()
            for _ in range(100):  # tasks accepting a connection must run (to wrap its socket), only ours are cancelled
                for link in self._links:
                    for w in list(link.writers):
                        _reset(w)
                for t in self._tasks:
                    t.cancel()
                pending = [t for t in asyncio.all_tasks() if t is not current]
                if not pending:
                    break
                await asyncio.wait(pending, timeout=0.05)
            for link in self._links:
                if link.server is not None:
                    link.server.close()
            for _ in range(3):  # aborted transports close their sockets in callbacks: let them run before stop
                await asyncio.sleep(0)

        with contextlib.suppress(Exception):
            self._call(shutdown)
        self._closed = True
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        if not self._thread.is_alive():
            self._loop.close()

    def __enter__(self) -> FaultProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

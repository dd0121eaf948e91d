"""``RaftDriver``: the asyncio shell that runs a sans-I/O ``RaftNode`` for a controller (voter) or a broker
(observer).

Everything that touches the core runs on the event loop, one input at a time: a tick, a message from the wire,
a proposal. After each input the driver drains the core's Ready values and carries each out in the order
``ready.py`` prescribes: snapshot chunks, log writes and the quorum state are fsynced before any message of the
same Ready leaves, then committed entries go to the state machine. The core's transition events (elections,
check-quorum, snapshot installs, truncations) are logged at INFO as ``raft node N: became leader of epoch 7 ...``.

On the wire each request and its response form one unary RPC of the ``Raft`` service. Requests the core sends go
out on their own tasks and their answers come back through ``step``; requests that arrive are stepped in and the
RPC waits for the core's answer, matched by type and peer (or by a local correlation id for fetches).

A Ready that cannot be carried out (the metadata log, a snapshot or the quorum-state file fails) is fatal: the
core cannot be told that only part of it happened, and after a failed fsync nobody knows what the disk holds. The
driver then stops: it logs one line, gives up leadership, refuses every further input and calls ``on_fatal`` so
the process exits; a restart reloads what is on disk and makes it durable again.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import random
import time
from collections import defaultdict, deque
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Protocol, TypeVar

import grpc

from odradek.client.connection import ChannelPool
from odradek.client.errors import ErrorCode, StorageError
from odradek.controller.quorum import codec
from odradek.controller.quorum.files import QuorumStateFile, SnapshotStore
from odradek.controller.quorum.log_store import MetadataLogStore, OpenLog
from odradek.controller.raft import (
    EMPTY_SNAPSHOT,
    Entry,
    LeaderAndEpoch,
    NotLeaderError,
    RaftConfig,
    RaftNode,
    Ready,
    Role,
)
from odradek.controller.raft.messages import (
    BeginQuorumEpoch,
    BeginQuorumEpochResponse,
    EndQuorumEpoch,
    EndQuorumEpochResponse,
    Fetch,
    FetchResponse,
    FetchSnapshot,
    FetchSnapshotResponse,
    Message,
    Vote,
    VoteResponse,
)
from odradek.controller.raft.snapshot import SnapshotId
from odradek.proto import raft_pb2, raft_pb2_grpc

logger = logging.getLogger(__name__)

INCONSISTENT_CLUSTER_ID = ErrorCode.INCONSISTENT_CLUSTER_ID


class MetadataLogFailedError(NotLeaderError):
    """The driver stopped after a fatal error; a NotLeaderError so callers look for the leader elsewhere."""

    def __init__(self, node_id: int, epoch: int, cause: BaseException) -> None:
        super().__init__(None, epoch)
        self.args = (f"node {node_id} stopped its metadata quorum after a fatal error: {cause}",)


R = TypeVar("R", VoteResponse, BeginQuorumEpochResponse, EndQuorumEpochResponse, FetchResponse, FetchSnapshotResponse)

RESPONSES = (VoteResponse, BeginQuorumEpochResponse, EndQuorumEpochResponse, FetchResponse, FetchSnapshotResponse)


class StateMachine(Protocol):
    """What the driver feeds: the metadata image of a controller or broker."""

    def load_snapshot(self, snapshot_id: SnapshotId, data: bytes) -> None: ...

    def apply(self, entries: list[Entry]) -> None: ...

    def snapshot(self) -> tuple[SnapshotId, bytes] | None:
        """A snapshot of everything applied so far, if one is due (else None)."""

    def leader_changed(self, leader: LeaderAndEpoch) -> None: ...


class RaftDriver:
    def __init__(
        self,
        node_id: int,
        voters: dict[int, str],
        cluster_id: str,
        directory: Path,
        state_machine: StateMachine,
        *,
        tick_ms: int = 50,
        election_timeout_ms: int = 1000,
        fetch_timeout_ms: int = 2000,
        # Kafka's long-poll budget: commits wake parked fetches at once, so this bounds only idle rounds (each
        # follower and observer sends two a second while nothing changes).
        fetch_max_wait_ms: int = 500,
        max_fetch_bytes: int = 1 << 20,
        rng: random.Random | None = None,
        on_fatal: Callable[[BaseException], None] | None = None,
        open_log: OpenLog,
    ) -> None:
        self.node_id = node_id
        self.voters = voters
        self.cluster_id = cluster_id
        self.directory = directory
        self.sm = state_machine
        self.tick_ms = tick_ms
        self.config = RaftConfig(
            election_timeout_ticks=max(2, election_timeout_ms // tick_ms),
            fetch_timeout_ticks=max(4, fetch_timeout_ms // tick_ms),
            # A long-polled fetch must not count as lost while the leader holds it: wait + a round trip.
            request_timeout_ticks=max(2, (fetch_max_wait_ms + 300) // tick_ms),
            election_backoff_ticks=max(1, 100 // tick_ms),
            max_fetch_bytes=max_fetch_bytes,
            fetch_max_wait_ms=fetch_max_wait_ms,
        )
        self._rng = rng or random.Random()
        self._pool = ChannelPool()
        self._state_file = QuorumStateFile(directory)
        self._snapshots = SnapshotStore(directory / "snapshots")
        # Opens the partition log the entries are kept in (the storage layer's, handed in by the node's wiring).
        self._open_log = open_log
        self._log: MetadataLogStore | None = None
        self.node: RaftNode | None = None
        self._waiting: dict[tuple[type[Message], int], deque[asyncio.Future[Message]]] = defaultdict(deque)
        self._correlation = itertools.count(1)
        self._parked: dict[int, tuple[Fetch, float]] = {}
        self._commit_waiters: dict[int, asyncio.Future[int]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._ticker: asyncio.Task[None] | None = None
        self._draining = False
        self.leader = LeaderAndEpoch(None, 0, Role.UNATTACHED)
        #: Called once with the error that stopped the driver (see the module docstring).
        self.on_fatal = on_fatal
        self.failure: BaseException | None = None

    @property
    def _core(self) -> RaftNode:
        """The Raft core, which ``start`` builds from what is on disk."""
        if self.node is None:
            raise RuntimeError(f"raft driver {self.node_id} is not started")
        return self.node

    @property
    def _store(self) -> MetadataLogStore:
        """The metadata log, which ``start`` opens."""
        if self._log is None:
            raise RuntimeError(f"raft driver {self.node_id} is not started")
        return self._log

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        snapshot_id = self._snapshots.latest()
        if snapshot_id is not None:
            self.sm.load_snapshot(snapshot_id, self._snapshots.read(snapshot_id))
        self._log = MetadataLogStore(self.directory / "__cluster_metadata-0", self._open_log)
        # Entries are fsynced by load: the core counts (and acknowledges) all it is given as durable.
        entries = self._log.load(snapshot_id or EMPTY_SNAPSHOT)
        self.node = RaftNode(
            self.node_id,
            self.voters,
            rng=self._rng,
            config=self.config,
            state=self._state_file.load(),
            entries=entries,
            snapshot_id=snapshot_id,
        )
        self._ticker = asyncio.create_task(self._tick_loop(), name=f"raft-tick-{self.node_id}")
        self._drain()

    async def stop(self, graceful: bool = True) -> None:
        node = self.node
        if node is not None and graceful and node.role is Role.LEADER and self.failure is None:
            node.resign()
            self._drain()
            await asyncio.sleep(self.tick_ms * 2 / 1000)  # let EndQuorumEpoch go out
        if self._ticker is not None:
            self._ticker.cancel()
        for task in list(self._tasks):
            task.cancel()
        pending = [*self._tasks, *([self._ticker] if self._ticker else [])]
        await asyncio.gather(*pending, return_exceptions=True)
        self._fail_waiters(NotLeaderError(None, node.epoch if node else 0))
        await self._pool.close()
        if self._log is not None:
            self._log.close()

    # ------------------------------------------------------------------ inputs

    async def _tick_loop(self) -> None:
        interval = self.tick_ms / 1000
        while self.failure is None:
            await asyncio.sleep(interval)
            try:
                self._core.tick()
                self._expire_parked()
                self._drain()
            except Exception:  # the loop must survive anything one tick does; the error is logged
                logger.exception("raft tick failed")

    def step(self, message: Message) -> None:
        self._check_running()
        self._core.step(message)
        self._drain()
        self._check_running()

    def propose(self, data: list[bytes]) -> int:
        """Append on the leader; returns the last offset. Raises NotLeaderError elsewhere (MetadataLogFailedError
        once the driver has stopped)."""
        self._check_running()
        offset = self._core.propose(data)
        self._drain()
        self._check_running()
        return offset

    def _check_running(self) -> None:
        if self.failure is not None:
            raise MetadataLogFailedError(self.node_id, self.leader.epoch, self.failure)

    async def propose_and_wait(self, data: list[bytes], timeout: float = 10.0) -> int:
        """Propose and wait until committed (and applied); raises NotLeaderError if leadership is lost first."""
        offset = self.propose(data)
        if self._core.high_watermark > offset:
            return offset
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._commit_waiters[offset] = future
        try:
            async with asyncio.timeout(timeout):
                await future
        finally:
            self._commit_waiters.pop(offset, None)
        return offset

    # ------------------------------------------------------------------ Ready

    def _drain(self) -> None:
        if self._draining:  # re-entered from a state machine callback; the outer loop picks it up
            return
        self._draining = True
        try:
            node = self._core
            while self.failure is None and node.has_ready():
                ready = node.ready()
                try:
                    self._handle(ready)
                except Exception as e:
                    self._fatal(e)
                    return
                node.advance(ready)
        finally:
            self._draining = False

    def _fatal(self, error: BaseException) -> None:
        """Stop for good: nothing more reaches the core or the disk, and nobody may take this node for leader."""
        if self.failure is not None:
            return
        self.failure = error
        io = isinstance(error, OSError | StorageError)
        what = "metadata log I/O error" if io else "error carrying out a Raft Ready"
        # An I/O error says all there is to say; anything else is a bug and gets its traceback.
        logger.critical("fatal: %s on node %d: %s; stopping", what, self.node_id, error, exc_info=not io)
        stopped = MetadataLogFailedError(self.node_id, self.leader.epoch, error)
        self._fail_waiters(stopped)
        for waiters in self._waiting.values():
            for future in waiters:
                if not future.done():
                    future.set_exception(stopped)
        self._parked.clear()
        if self.leader.role is not Role.UNATTACHED or self.leader.leader_id is not None:
            self.leader = LeaderAndEpoch(None, self.leader.epoch, Role.UNATTACHED)
            try:
                self.sm.leader_changed(self.leader)
            except Exception:
                logger.exception("telling the state machine about the stop failed")
        if self.on_fatal is not None:
            self.on_fatal(error)

    def _handle(self, ready: Ready) -> None:
        node, store = self._core, self._store
        for chunk in ready.snapshot_chunks:
            self._snapshots.write_chunk(chunk.snapshot_id, chunk.position, chunk.data)
        if ready.install_snapshot is not None:
            self._snapshots.complete(ready.install_snapshot)
            store.reset(ready.install_snapshot.end_offset)
        if ready.truncate_to is not None:
            store.truncate(ready.truncate_to)
        if ready.entries:
            store.append(ready.entries)
        if ready.entries or ready.truncate_to is not None or ready.install_snapshot is not None:
            store.flush()
        if ready.persist_state is not None:
            self._state_file.store(ready.persist_state)
        for event in ready.events:  # logged once durable, so the log never claims a vote a crash lost
            logger.info("raft node %d: %s", self.node_id, event.describe())
        for message in ready.messages:
            self._send(message)
        if ready.install_snapshot is not None:
            sid = ready.install_snapshot
            self.sm.load_snapshot(sid, self._snapshots.read(sid))
        if ready.committed:
            self.sm.apply(ready.committed)
            self._release_waiters(node.high_watermark)
            self._maybe_snapshot()
        if ready.leader_change is not None:
            self.leader = ready.leader_change
            if ready.leader_change.role is not Role.LEADER:
                self._fail_waiters(NotLeaderError(ready.leader_change.leader_id, ready.leader_change.epoch))
            self.sm.leader_changed(ready.leader_change)
        for request in ready.snapshot_reads:
            try:
                data, size = self._snapshots.read_chunk(request.snapshot_id, request.position, request.max_bytes)
            except FileNotFoundError:
                data, size = b"", -1
            node.answer_fetch_snapshot(request, data, size)
        now = time.monotonic()
        for fetch in ready.parked_fetches:
            _, deadline = self._parked.get(fetch.correlation_id, (fetch, now + fetch.max_wait_ms / 1000))
            self._parked[fetch.correlation_id] = (fetch, deadline)
        if self._parked and (ready.high_watermark is not None or ready.entries):
            self._wake_parked(lambda _deadline: True)

    def _maybe_snapshot(self) -> None:
        taken = self.sm.snapshot()
        if taken is None:
            return
        sid, data = taken
        self._snapshots.write(sid, data)
        self._core.snapshot_taken(sid.end_offset, sid.epoch)
        self._store.trim_prefix(sid.end_offset)

    def _release_waiters(self, high_watermark: int) -> None:
        for offset in [o for o in self._commit_waiters if o < high_watermark]:
            future = self._commit_waiters.pop(offset)
            if not future.done():
                future.set_result(offset)

    def _fail_waiters(self, error: Exception) -> None:
        waiters, self._commit_waiters = self._commit_waiters, {}
        for future in waiters.values():
            if not future.done():
                future.set_exception(error)

    def _wake_parked(self, due: Callable[[float], bool], expire: bool = False) -> None:
        for cid, (fetch, deadline) in list(self._parked.items()):
            if due(deadline):
                del self._parked[cid]
                self._core.step(replace(fetch, max_wait_ms=0) if expire else fetch)

    def _expire_parked(self) -> None:
        now = time.monotonic()
        self._wake_parked(lambda deadline: deadline <= now, expire=True)

    # ------------------------------------------------------------------ transport

    def _send(self, message: Message) -> None:
        if isinstance(message, RESPONSES):
            key: tuple[type[Message], int] = (
                type(message),
                message.correlation_id if isinstance(message, FetchResponse | FetchSnapshotResponse) else message.dst,
            )
            waiters = self._waiting.get(key)
            while waiters:
                future = waiters.popleft()
                if not future.done():
                    future.set_result(message)
                    break
            return
        address = self.voters.get(message.dst)
        if address is None:
            return
        task = asyncio.get_running_loop().create_task(self._request(address, message))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _request(self, address: str, m: Message) -> None:
        stub = raft_pb2_grpc.RaftStub(self._pool.get(address))
        timeout = self.config.request_timeout_ticks * self.tick_ms / 1000 + 1.0
        cid = self.cluster_id
        try:
            if isinstance(m, Fetch):
                fetched = await stub.Fetch(
                    codec.fetch_request(m, cid, self.config.max_fetch_bytes), timeout=timeout + m.max_wait_ms / 1000
                )
                reply: Message = codec.fetch_response_from(fetched, m)
            elif isinstance(m, Vote):
                reply = codec.vote_response_from(await stub.Vote(codec.vote_request(m, cid), timeout=timeout), m)
            elif isinstance(m, BeginQuorumEpoch):
                begun = await stub.BeginQuorumEpoch(codec.begin_request(m, cid), timeout=timeout)
                reply = codec.begin_response_from(begun, m)
            elif isinstance(m, EndQuorumEpoch):
                ended = await stub.EndQuorumEpoch(codec.end_request(m, cid), timeout=timeout)
                reply = codec.end_response_from(ended, m)
            elif isinstance(m, FetchSnapshot):
                chunk = await stub.FetchSnapshot(codec.snapshot_request(m, cid), timeout=timeout)
                reply = codec.snapshot_response_from(chunk, m)
            else:
                raise TypeError(f"cannot send {type(m).__name__}")
        except grpc.aio.AioRpcError as e:
            logger.debug("raft %s to %s failed: %s", type(m).__name__, m.dst, e.code().name)
            return  # the core resends on its own request timeout
        with contextlib.suppress(MetadataLogFailedError):  # stopped meanwhile: the answer has nowhere to go
            self.step(reply)

    async def answer(self, message: Message, response_type: type[R], key: int, timeout: float) -> R:
        """Step an incoming request and wait for the core's response to it."""
        future: asyncio.Future[Message] = asyncio.get_running_loop().create_future()
        waiters = self._waiting[(response_type, key)]
        waiters.append(future)
        try:
            self.step(message)
            async with asyncio.timeout(timeout):
                reply = await future
            assert isinstance(reply, response_type)  # _send resolves a waiter only with a response of its type
            return reply
        finally:
            if future in waiters:
                waiters.remove(future)
            if not waiters:
                self._waiting.pop((response_type, key), None)

    def next_correlation(self) -> int:
        return next(self._correlation)


class RaftService(raft_pb2_grpc.RaftServicer):
    """The ``Raft`` gRPC service of a controller: turns RPCs into core messages and back.

    A request naming another cluster is answered INCONSISTENT_CLUSTER_ID without reaching the core.
    """

    def __init__(self, driver: RaftDriver) -> None:
        self.driver = driver

    def _foreign(self, cluster_id: str) -> bool:
        return bool(cluster_id) and cluster_id != self.driver.cluster_id

    async def Vote(
        self,
        request: raft_pb2.VoteRequest,
        context: grpc.aio.ServicerContext[raft_pb2.VoteRequest, raft_pb2.VoteResponse],
    ) -> raft_pb2.VoteResponse:
        d = self.driver
        if self._foreign(request.cluster_id):
            return raft_pb2.VoteResponse(error=INCONSISTENT_CLUSTER_ID, voter_id=d.node_id)
        reply = await d.answer(codec.vote_from(request, d.node_id), VoteResponse, request.candidate_id, 5.0)
        return codec.vote_response(reply)

    async def BeginQuorumEpoch(
        self,
        request: raft_pb2.BeginQuorumEpochRequest,
        context: grpc.aio.ServicerContext[raft_pb2.BeginQuorumEpochRequest, raft_pb2.BeginQuorumEpochResponse],
    ) -> raft_pb2.BeginQuorumEpochResponse:
        d = self.driver
        if self._foreign(request.cluster_id):
            return raft_pb2.BeginQuorumEpochResponse(error=INCONSISTENT_CLUSTER_ID)
        reply = await d.answer(codec.begin_from(request, d.node_id), BeginQuorumEpochResponse, request.leader_id, 5.0)
        return codec.begin_response(reply)

    async def EndQuorumEpoch(
        self,
        request: raft_pb2.EndQuorumEpochRequest,
        context: grpc.aio.ServicerContext[raft_pb2.EndQuorumEpochRequest, raft_pb2.EndQuorumEpochResponse],
    ) -> raft_pb2.EndQuorumEpochResponse:
        d = self.driver
        if self._foreign(request.cluster_id):
            return raft_pb2.EndQuorumEpochResponse(error=INCONSISTENT_CLUSTER_ID)
        reply = await d.answer(codec.end_from(request, d.node_id), EndQuorumEpochResponse, request.leader_id, 5.0)
        return codec.end_response(reply)

    async def Fetch(
        self,
        request: raft_pb2.RaftFetchRequest,
        context: grpc.aio.ServicerContext[raft_pb2.RaftFetchRequest, raft_pb2.RaftFetchResponse],
    ) -> raft_pb2.RaftFetchResponse:
        d = self.driver
        if self._foreign(request.cluster_id):
            return raft_pb2.RaftFetchResponse(error=INCONSISTENT_CLUSTER_ID)
        cid = d.next_correlation()
        timeout = request.max_wait_ms / 1000 + 5.0
        reply = await d.answer(codec.fetch_from(request, d.node_id, cid), FetchResponse, cid, timeout)
        return codec.fetch_response(reply, d._core.log.start_offset)

    async def FetchSnapshot(
        self,
        request: raft_pb2.FetchSnapshotRequest,
        context: grpc.aio.ServicerContext[raft_pb2.FetchSnapshotRequest, raft_pb2.FetchSnapshotResponse],
    ) -> raft_pb2.FetchSnapshotResponse:
        d = self.driver
        if self._foreign(request.cluster_id):
            return raft_pb2.FetchSnapshotResponse(error=INCONSISTENT_CLUSTER_ID)
        cid = d.next_correlation()
        reply = await d.answer(codec.snapshot_from(request, d.node_id, cid), FetchSnapshotResponse, cid, 10.0)
        return codec.snapshot_response(reply)

"""The broker side of the lifecycle: register with the active controller, heartbeat, shut down in a controlled way.

A broker registers once per process (a fresh incarnation id tells a restart from a duplicate node id), then
heartbeats every ``broker.heartbeat.interval.ms`` reporting how far it has applied the metadata log; the
controller unfences it once it has caught up and fences it when heartbeats stop. On a graceful stop the
broker asks for controlled shutdown, which moves its leaderships away before it goes. While a log dir is offline
every heartbeat names the offline dirs and replicas (``offline``), and a new failure sends one at once (``wake``),
so the controller moves leadership off them promptly.

``caught_up`` is set the first time the controller unfences the broker: by then the broker has applied the metadata
log up to its own registration, so its image holds the topics, ACLs and SCRAM credentials that clients rely on. The
node serves clients only from then on, as a Kafka broker enables request processing once it is unfenced.

Registration and heartbeats run on a thread of their own, with their own event loop and channels (as Kafka's
broker lifecycle manager has its own event queue thread): a long stretch of work on the node's event loop, such as
a metadata change creating thousands of partitions' logs, must not hold back the heartbeats that keep the broker
unfenced, or the controller fences it, moves its leaderships away and gives them back, and again. What they read
of the node (its metadata offset, its offline replicas) are plain attribute reads; what they change of it
(``caught_up``, the registration callback) is handed to the node's loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence

import grpc

from odradek.broker.controller_reach import ControllerReach
from odradek.client.connection import ChannelPool
from odradek.client.errors import ErrorCode
from odradek.proto import common_pb2, controller_pb2_grpc
from odradek.proto import controller_pb2 as cpb

logger = logging.getLogger(__name__)

REGISTRATION_BACKOFF_S = 0.05
"""The first wait between registration attempts; it doubles up to the heartbeat interval (at most 0.5 s)."""


class BrokerLifecycleManager:
    def __init__(
        self,
        broker_id: int,
        cluster_id: str,
        host: str,
        port: int,
        rack: str,
        log_dirs: list[str],
        voters: dict[int, str],
        leader_hint: Callable[[], int | None],
        metadata_offset: Callable[[], int],
        heartbeat_interval_ms: int,
        session_timeout_ms: int = 9000,
        previous_broker_epoch: int = -1,
        offline: Callable[[], tuple[Sequence[str], Mapping[bytes, Sequence[int]]]] = lambda: ((), {}),
        on_registered: Callable[[], None] = lambda: None,
        listeners: Sequence[tuple[str, str, int]] = (),
    ) -> None:
        self.broker_id = broker_id
        self.cluster_id = cluster_id
        self.listener = common_pb2.Node(node_id=broker_id, host=host, port=port, rack=rack)
        # (name, host, port) of the other advertised listeners (the Kafka one), registered with the gRPC address
        self.listeners = [common_pb2.Listener(name=n, host=h, port=p) for n, h, p in listeners]
        self.rack = rack
        self.log_dirs = log_dirs
        self.voters = voters
        self.leader_hint = leader_hint
        self.metadata_offset = metadata_offset
        self.offline = offline
        self.interval = heartbeat_interval_ms / 1000
        self.incarnation_id = uuid.uuid4().bytes
        self.broker_epoch = -1
        # The epoch of this broker's last clean shutdown (-1: unclean); a re-registration of this process reports
        # the epoch it holds, since nothing was lost in between.
        self.previous_broker_epoch = previous_broker_epoch
        self.on_registered = on_registered
        self.fenced = True
        self.session_timeout = session_timeout_ms / 1000
        self.session_renewed = time.monotonic()  # send time of the last heartbeat the controller answered
        self.registered = asyncio.Event()  # on the node's loop, as ``caught_up``
        self.caught_up = asyncio.Event()  # never cleared: a later fencing does not make the image stale
        self._pool = ChannelPool()  # for ``call`` from the node's loop
        self._loop: asyncio.AbstractEventLoop | None = None  # the node's loop
        self._thread: threading.Thread | None = None  # runs the heartbeats' loop
        self._heartbeat_loop: asyncio.AbstractEventLoop | None = None
        self._heartbeat_pool: ChannelPool | None = None
        self._task: asyncio.Task | None = None  # on the heartbeats' loop
        self._next_voter = 0
        self._controller: int | None = None
        self._wakeup = asyncio.Event()
        self._reach = ControllerReach()

    def wake(self) -> None:
        """Heartbeat now rather than at the next interval (e.g. a log dir just went offline)."""
        loop = self._heartbeat_loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._wakeup.set)

    def start(self) -> None:
        """Register, then heartbeat, on the lifecycle thread (called on the node's loop)."""
        self._loop = asyncio.get_running_loop()
        started = threading.Event()

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._heartbeat_loop, self._heartbeat_pool = loop, ChannelPool()
            self._task = loop.create_task(self._run(), name="broker-lifecycle")
            started.set()
            try:
                with contextlib.suppress(asyncio.CancelledError):
                    loop.run_until_complete(self._task)
            except Exception:
                logger.critical("broker %d: registration and heartbeats stopped", self.broker_id, exc_info=True)
            finally:
                loop.run_until_complete(self._heartbeat_pool.close())
                loop.close()

        self._thread = threading.Thread(target=run, name="broker-lifecycle", daemon=True)
        self._thread.start()
        started.wait()

    async def _stop_heartbeats(self) -> None:
        """End the lifecycle thread (its heartbeats stop; the controller fences this broker after its session)."""
        thread, loop, task = self._thread, self._heartbeat_loop, self._task
        self._thread = self._task = None
        if thread is None or loop is None or task is None:
            return
        with contextlib.suppress(RuntimeError):  # its loop already closed
            loop.call_soon_threadsafe(task.cancel)
        await asyncio.to_thread(thread.join)

    async def stop(self) -> None:
        await self._stop_heartbeats()
        await self._pool.close()

    def _on_node_loop(self, callback: Callable[[], None]) -> None:
        """Run ``callback`` on the node's loop: at once from it, else handed to it (from the lifecycle thread)."""
        loop = self._loop
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if loop is None or running is loop:
            callback()
        elif not loop.is_closed():
            loop.call_soon_threadsafe(callback)

    def _target(self) -> tuple[int, str]:
        """The controller to talk to: the last one that answered, else the known leader, else the next voter."""
        for candidate in (self._controller, self.leader_hint()):
            if candidate is not None and candidate in self.voters:
                return candidate, self.voters[candidate]
        ids = sorted(self.voters)
        node = ids[self._next_voter % len(ids)]
        self._next_voter += 1
        return node, self.voters[node]

    def _redirect(self, leader_id: int) -> None:
        self._controller = leader_id if leader_id in self.voters else None

    async def call(self, method: str, request):
        """Send to the active controller (following redirects next time); None when it could not answer. On the
        lifecycle thread's loop through its own channels, as a channel belongs to the loop that made it."""
        node, address = self._target()
        heartbeats = self._heartbeat_pool is not None and asyncio.get_running_loop() is self._heartbeat_loop
        pool = self._heartbeat_pool if heartbeats and self._heartbeat_pool is not None else self._pool
        stub = controller_pb2_grpc.ControllerStub(pool.get(address))
        try:
            response = await getattr(stub, method)(request, timeout=max(2.0, self.interval * 2))
        except grpc.aio.AioRpcError as e:
            logger.debug("%s to controller %d failed: %s", method, node, e.code().name)
            self._controller = None
            self._note(self._reach.failed(time.monotonic(), node, address, e.code().name), logging.WARNING)
            return None
        if response.error == ErrorCode.NOT_CONTROLLER:
            # Not every response names the leader (AlterPartition, AllocateProducerIds): then ask the known one.
            self._redirect(response.leader_id if "leader_id" in type(response).DESCRIPTOR.fields_by_name else -1)
            self._note(self._reach.failed(time.monotonic(), node, address, "NOT_CONTROLLER"), logging.WARNING)
            return None
        self._controller = node
        self._note(self._reach.succeeded(time.monotonic(), node, address), logging.INFO)
        return response

    def _note(self, line: str | None, level: int) -> None:
        if line is not None:
            logger.log(level, "broker %d: %s", self.broker_id, line)

    async def _register(self) -> None:
        request = cpb.BrokerRegistrationRequest(
            broker_id=self.broker_id,
            cluster_id=self.cluster_id,
            incarnation_id=self.incarnation_id,
            listener=self.listener,
            listeners=self.listeners,
            rack=self.rack,
            log_dirs=self.log_dirs,
            previous_broker_epoch=self.broker_epoch if self.broker_epoch >= 0 else self.previous_broker_epoch,
        )
        # A node starting with its controllers meets no active controller for its first tries: retry soon, then
        # back off exponentially (as a Kafka broker does), so registration follows the election closely.
        backoff = REGISTRATION_BACKOFF_S
        while True:
            response = await self.call("RegisterBroker", request)
            if response is not None:
                if response.error == ErrorCode.NONE:
                    self.broker_epoch = response.broker_epoch
                    self._on_node_loop(self.registered.set)
                    logger.info("broker %d registered with epoch %d", self.broker_id, self.broker_epoch)
                    self._on_node_loop(self.on_registered)
                    return
                logger.warning("registration refused: %s %s", ErrorCode.Name(response.error), response.error_message)
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, self.interval, 0.5)

    async def heartbeat(self, want_shutdown: bool = False) -> cpb.BrokerHeartbeatResponse | None:
        request = cpb.BrokerHeartbeatRequest(
            broker_id=self.broker_id,
            broker_epoch=self.broker_epoch,
            current_metadata_offset=self.metadata_offset(),
            want_shutdown_now=want_shutdown,
        )
        dirs, replicas = self.offline()
        request.offline_log_dirs.extend(dirs)
        for topic_id, partitions in replicas.items():
            request.offline_replicas.add(topic_id=topic_id, partitions=partitions)
        sent = time.monotonic()
        response = await self.call("BrokerHeartbeat", request)
        if response is not None and response.error == ErrorCode.NONE:
            if self.fenced != response.is_fenced:
                logger.info("broker %d is now %s", self.broker_id, "fenced" if response.is_fenced else "unfenced")
            # The session's state first: whoever ``caught_up`` wakes on the node's loop may ask session_valid().
            self.fenced = response.is_fenced
            if not response.is_fenced:
                self.session_renewed = sent
                if not self.caught_up.is_set():
                    self._on_node_loop(self.caught_up.set)
        return response

    def session_valid(self) -> bool:
        """Whether this broker may act as a leader: unfenced at its last heartbeat, and heard by the controller
        within a session timeout (else the controller may have fenced it meanwhile, e.g. while it was paused)."""
        return not self.fenced and time.monotonic() - self.session_renewed < self.session_timeout

    async def _run(self) -> None:
        await self._register()
        while True:
            self._wakeup.clear()  # before the heartbeat: it carries the state a wake() was for
            response = await self.heartbeat()
            if response is not None and response.error in (
                ErrorCode.STALE_BROKER_EPOCH,
                ErrorCode.BROKER_ID_NOT_REGISTERED,
            ):
                self._on_node_loop(self.registered.clear)
                await self._register()
                continue
            # A fenced broker that is catching up heartbeats faster so it is unfenced promptly.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.interval if not self.fenced else min(self.interval, 0.25)):
                    await self._wakeup.wait()

    async def controlled_shutdown(self, timeout: float) -> bool:
        """Ask the controller to move leadership away; True once it agrees the broker may stop."""
        if not self.registered.is_set():
            return True
        await self._stop_heartbeats()  # from here the node's loop sends them, asking to shut down
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while loop.time() < deadline:
            response = await self.heartbeat(want_shutdown=True)
            if response is not None and response.error == ErrorCode.NONE and response.should_shut_down:
                return True
            await asyncio.sleep(0.2)
        return False

"""The broker's registration and heartbeats run on a thread of their own: a node whose event loop is busy for longer
than the session timeout (applying a metadata change that creates thousands of partitions' logs) still heartbeats,
so the controller does not fence it. A real gRPC server stands in for the controller."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator

import grpc
import pytest

from odradek.broker.lifecycle import BrokerLifecycleManager
from odradek.proto import controller_pb2 as cpb
from odradek.proto import controller_pb2_grpc


class Controller(controller_pb2_grpc.ControllerServicer):
    """Registers any broker and records the time of each heartbeat; unfenced once it heard two."""

    def __init__(self) -> None:
        self.heartbeats: list[tuple[float, bool]] = []  # (monotonic time, want_shutdown_now)

    async def RegisterBroker(self, request, context):
        return cpb.BrokerRegistrationResponse(broker_epoch=7)

    async def BrokerHeartbeat(self, request, context):
        self.heartbeats.append((time.monotonic(), request.want_shutdown_now))
        shutting = request.want_shutdown_now
        return cpb.BrokerHeartbeatResponse(is_fenced=len(self.heartbeats) < 2, should_shut_down=shutting)


@pytest.fixture
def controller() -> Iterator[tuple[Controller, str]]:
    """The stand-in controller, served from a loop on a thread of its own: the test blocks its own loop."""
    servicer, loop = Controller(), asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()

    async def start() -> tuple[grpc.aio.Server, int]:
        server = grpc.aio.server()
        controller_pb2_grpc.add_ControllerServicer_to_server(servicer, server)
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        return server, port

    server, port = asyncio.run_coroutine_threadsafe(start(), loop).result(10)
    yield servicer, f"127.0.0.1:{port}"
    asyncio.run_coroutine_threadsafe(server.stop(None), loop).result(10)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)
    loop.close()


async def test_heartbeats_go_on_while_the_node_loop_is_blocked(controller: tuple[Controller, str]) -> None:
    servicer, address = controller
    registered = threading.Event()
    lifecycle = BrokerLifecycleManager(
        1, "c", "h", 1, "", [], {0: address}, lambda: None, lambda: 0, 100, on_registered=registered.set
    )
    lifecycle.start()
    try:
        async with asyncio.timeout(10):
            await lifecycle.caught_up.wait()  # set on this loop, by the lifecycle thread
        assert lifecycle.broker_epoch == 7 and registered.is_set() and lifecycle.session_valid()
        before = len(servicer.heartbeats)
        time.sleep(1.5)  # the node's loop does nothing else meanwhile (the controller serves on its own thread)
        during = [t for t, _ in servicer.heartbeats[before:]]
        assert len(during) >= 5, during  # every 100 ms, not held until the loop is free
        assert lifecycle.session_valid()
        assert await lifecycle.controlled_shutdown(timeout=5)  # from the node's loop, once the thread has stopped
        assert servicer.heartbeats[-1][1] and lifecycle._thread is None
    finally:
        await lifecycle.stop()

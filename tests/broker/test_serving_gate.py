"""The broker listener's gate on a real gRPC server: calls made while the broker catches up with the metadata log
wait for it, and are refused as UNAVAILABLE (which clients retry) if it takes longer than the gate's bound."""

from __future__ import annotations

import asyncio
import time

import grpc
import pytest

from odradek.broker.serving_gate import ServingGate

METHOD = "/test.Echo/Call"


async def _server(gate: ServingGate) -> tuple[grpc.aio.Server, int]:
    async def call(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        return b"answered:" + request

    handler = grpc.method_handlers_generic_handler("test.Echo", {"Call": grpc.unary_unary_rpc_method_handler(call)})
    server = grpc.aio.server(interceptors=[gate])
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    return server, port


def test_a_call_made_before_the_broker_caught_up_is_answered_once_it_has() -> None:
    async def scenario() -> None:
        ready = asyncio.Event()
        server, port = await _server(ServingGate(ready, node_id=4, wait_s=10))
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            call = asyncio.ensure_future(channel.unary_unary(METHOD)(b"early", timeout=10))
            await asyncio.sleep(0.3)
            assert not call.done()
            ready.set()
            assert await asyncio.wait_for(call, 5) == b"answered:early"
            assert await channel.unary_unary(METHOD)(b"later", timeout=5) == b"answered:later"
        await server.stop(None)

    asyncio.run(scenario())


def test_a_call_that_waits_past_the_bound_is_unavailable_and_names_the_broker() -> None:
    async def scenario() -> None:
        server, port = await _server(ServingGate(asyncio.Event(), node_id=4, wait_s=0.3))
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            started = time.monotonic()
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await channel.unary_unary(METHOD)(b"early", timeout=10)
            assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
            assert "broker 4 is starting" in (refused.value.details() or "")
            assert 0.3 <= time.monotonic() - started < 5
        await server.stop(None)

    asyncio.run(scenario())

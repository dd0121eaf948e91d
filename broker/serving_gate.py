"""Holds a starting broker's client calls until its metadata image is current.

A broker that restarts replays the metadata log before its image knows the cluster's topics, ACLs and SCRAM
credentials. Answering clients from a partial image gives wrong answers that are not retriable (an authentication
failure for a valid password, an authorization failure for an allowed principal). So the broker listener's calls
wait, as a Kafka broker's requests wait for request processing, until the controller first unfences the broker.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import grpc

__all__ = ["GATE_WAIT_S", "ServingGate"]

GATE_WAIT_S = 10.0
"""How long a call waits for the broker to catch up before it is refused as UNAVAILABLE (clients retry that)."""


class ServingGate(grpc.aio.ServerInterceptor):
    """Lets calls through once ``ready`` is set; before that each waits for it, for at most ``wait_s``."""

    def __init__(self, ready: asyncio.Event, node_id: int, wait_s: float = GATE_WAIT_S) -> None:
        self.ready = ready
        self.node_id = node_id
        self.wait_s = wait_s

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler[Any, Any] | None]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any] | None:
        if not self.ready.is_set():
            try:
                async with asyncio.timeout(self.wait_s):
                    await self.ready.wait()
            except TimeoutError:
                return grpc.unary_unary_rpc_method_handler(self._refuse)
        return await continuation(handler_call_details)

    async def _refuse(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        await context.abort(
            grpc.StatusCode.UNAVAILABLE,
            f"broker {self.node_id} is starting: it has not caught up with the metadata log yet",
        )

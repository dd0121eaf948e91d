"""The controller listener's inter-node APIs (Raft between controllers; broker registration, heartbeats, ISR
changes, producer id blocks and internal topics from brokers) need cluster ClusterAction, as Kafka's do: only the
nodes themselves (their principals are super users, or hold ClusterAction) may call them. Checked in one interceptor
rather than in each method: none of them has a client-facing answer to shape."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grpc

from odradek.broker.metrics import WrappingInterceptor
from odradek.client.common.access import AccessControl
from odradek.client.common.acls import AclOperation
from odradek.client.common.caller import caller_of
from odradek.proto import controller_pb2, raft_pb2

__all__ = ["INTER_NODE_APIS", "ClusterActionInterceptor"]

INTER_NODE_APIS = frozenset(
    method.name
    for service in (
        raft_pb2.DESCRIPTOR.services_by_name["Raft"],
        controller_pb2.DESCRIPTOR.services_by_name["Controller"],
    )
    for method in service.methods
)


class ClusterActionInterceptor(WrappingInterceptor):
    """Ends an inter-node call with PERMISSION_DENIED (CLUSTER_AUTHORIZATION_FAILED) unless its caller may
    ClusterAction; Admin calls on the same listener pass through to their own checks."""

    def __init__(self, access: AccessControl) -> None:
        super().__init__()
        self.access = access

    def wrap(self, api: str, inner: Callable[..., Any]) -> Callable[..., Any] | None:
        if api not in INTER_NODE_APIS:
            return None
        access = self.access

        async def handle(request: Any, context: grpc.aio.ServicerContext) -> Any:
            caller = caller_of(context)
            if not access.allows_cluster(caller, AclOperation.CLUSTER_ACTION, api=api):
                await context.abort(
                    grpc.StatusCode.PERMISSION_DENIED,
                    f"CLUSTER_AUTHORIZATION_FAILED: {caller.principal} may not {api} (cluster ClusterAction)",
                )
            return await inner(request, context)

        return handle

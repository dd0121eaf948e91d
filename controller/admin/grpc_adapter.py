"""The gRPC Admin service (``proto/admin.proto``), an adapter over the typed admin service: each call's message to
a typed request (``messages.py``), the caller's ``RequestContext`` from the servicer context
(``client/common/call_context.py``), the service's answer back to a message. It decides nothing.

Read-your-writes over gRPC: a write's answer names the metadata offset that covers it in the call's trailing
metadata (``METADATA_OFFSET_KEY``), for a node that forwarded the call here; and a forwarded write waits for this
node's image at most half the caller's remaining time (the call's deadline becomes ``RequestContext.deadline``;
``forwarding.wait_budget``), so that the answer, the write being done, arrives before the caller's deadline.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import grpc

from odradek.client.common.admin.api import AdminApi
from odradek.client.common.admin.cluster import DescribeCluster, DescribeQuorum
from odradek.client.common.call_context import request_context_of
from odradek.client.common.request_context import RequestContext
from odradek.controller.admin import messages as m
from odradek.controller.admin.forwarding import METADATA_OFFSET_KEY
from odradek.proto import admin_pb2 as apb
from odradek.proto import admin_pb2_grpc

A = TypeVar("A")

__all__ = ["METADATA_OFFSET_KEY", "AdminGrpcService"]


def tell_offset(context: Any, offset: int | None) -> None:
    """Name ``offset`` in the answer's trailing metadata, for a node that forwarded the call. Callers in this
    process (tests) have no trailing metadata, nor need it: they read this node's image."""
    set_trailing_metadata = getattr(context, "set_trailing_metadata", None)
    if offset is not None and set_trailing_metadata is not None:
        set_trailing_metadata(((METADATA_OFFSET_KEY, str(offset)),))


class AdminGrpcService(admin_pb2_grpc.AdminServicer):
    """The Admin service on a node's gRPC listeners (both roles serve it), over ``service``."""

    def __init__(self, service: AdminApi) -> None:
        self.service = service

    async def _write(self, context: Any, serve: Callable[[RequestContext], Awaitable[A]]) -> A:
        """Serve a write and tell its covering offset."""
        answer = await serve(request_context_of(context))
        tell_offset(context, getattr(answer, "metadata_offset", None))
        return answer

    async def CreateTopics(
        self, request: apb.CreateTopicsRequest, context: grpc.aio.ServicerContext
    ) -> apb.CreateTopicsResponse:
        typed = m.create_topics_of(request)
        answer = await self._write(context, lambda ctx: self.service.create_topics(typed, ctx))
        return m.create_topics_response(answer)

    async def DeleteTopics(
        self, request: apb.DeleteTopicsRequest, context: grpc.aio.ServicerContext
    ) -> apb.DeleteTopicsResponse:
        typed = m.delete_topics_of(request)
        answer = await self._write(context, lambda ctx: self.service.delete_topics(typed, ctx))
        return m.delete_topics_response(answer)

    async def CreatePartitions(
        self, request: apb.CreatePartitionsRequest, context: grpc.aio.ServicerContext
    ) -> apb.CreatePartitionsResponse:
        typed = m.create_partitions_of(request)
        answer = await self._write(context, lambda ctx: self.service.create_partitions(typed, ctx))
        return m.create_partitions_response(answer)

    async def DescribeTopics(
        self, request: apb.DescribeTopicsRequest, context: grpc.aio.ServicerContext
    ) -> apb.DescribeTopicsResponse:
        answer = await self.service.describe_topics(m.describe_topics_of(request), request_context_of(context))
        return m.describe_topics_response(answer)

    async def DescribeConfigs(
        self, request: apb.DescribeConfigsRequest, context: grpc.aio.ServicerContext
    ) -> apb.DescribeConfigsResponse:
        answer = await self.service.describe_configs(m.describe_configs_of(request), request_context_of(context))
        return m.describe_configs_response(answer)

    async def IncrementalAlterConfigs(
        self, request: apb.IncrementalAlterConfigsRequest, context: grpc.aio.ServicerContext
    ) -> apb.IncrementalAlterConfigsResponse:
        typed = m.incremental_alter_configs_of(request)
        answer = await self._write(context, lambda ctx: self.service.incremental_alter_configs(typed, ctx))
        return m.incremental_alter_configs_response(answer)

    async def ElectLeaders(
        self, request: apb.ElectLeadersRequest, context: grpc.aio.ServicerContext
    ) -> apb.ElectLeadersResponse:
        typed = m.elect_leaders_of(request)
        answer = await self._write(context, lambda ctx: self.service.elect_leaders(typed, ctx))
        return m.elect_leaders_response(answer)

    async def AlterPartitionReassignments(
        self, request: apb.AlterPartitionReassignmentsRequest, context: grpc.aio.ServicerContext
    ) -> apb.AlterPartitionReassignmentsResponse:
        typed = m.alter_reassignments_of(request)
        answer = await self._write(context, lambda ctx: self.service.alter_partition_reassignments(typed, ctx))
        return m.alter_reassignments_response(answer)

    async def DescribeCluster(
        self, request: apb.DescribeClusterRequest, context: grpc.aio.ServicerContext
    ) -> apb.DescribeClusterResponse:
        answer = await self.service.describe_cluster(DescribeCluster(), request_context_of(context))
        return m.describe_cluster_response(answer)

    async def DescribeQuorum(
        self, request: apb.DescribeQuorumRequest, context: grpc.aio.ServicerContext
    ) -> apb.DescribeQuorumResponse:
        answer = await self.service.describe_quorum(DescribeQuorum(), request_context_of(context))
        return m.describe_quorum_response(answer)

    async def AlterClientQuotas(
        self, request: apb.AlterClientQuotasRequest, context: grpc.aio.ServicerContext
    ) -> apb.AlterClientQuotasResponse:
        typed = m.alter_client_quotas_of(request)
        answer = await self._write(context, lambda ctx: self.service.alter_client_quotas(typed, ctx))
        return m.alter_client_quotas_response(answer, request)

    async def DescribeClientQuotas(
        self, request: apb.DescribeClientQuotasRequest, context: grpc.aio.ServicerContext
    ) -> apb.DescribeClientQuotasResponse:
        typed = m.describe_client_quotas_of(request)
        answer = await self.service.describe_client_quotas(typed, request_context_of(context))
        return m.describe_client_quotas_response(answer)

    async def CreateAcls(
        self, request: apb.CreateAclsRequest, context: grpc.aio.ServicerContext
    ) -> apb.CreateAclsResponse:
        typed = m.create_acls_of(request)
        answer = await self._write(context, lambda ctx: self.service.create_acls(typed, ctx))
        return m.create_acls_response(answer)

    async def DescribeAcls(
        self, request: apb.DescribeAclsRequest, context: grpc.aio.ServicerContext
    ) -> apb.DescribeAclsResponse:
        answer = await self.service.describe_acls(m.describe_acls_of(request), request_context_of(context))
        return m.describe_acls_response(answer)

    async def DeleteAcls(
        self, request: apb.DeleteAclsRequest, context: grpc.aio.ServicerContext
    ) -> apb.DeleteAclsResponse:
        typed = m.delete_acls_of(request)
        answer = await self._write(context, lambda ctx: self.service.delete_acls(typed, ctx))
        return m.delete_acls_response(answer)

    async def AlterUserScramCredentials(
        self, request: apb.AlterUserScramCredentialsRequest, context: grpc.aio.ServicerContext
    ) -> apb.AlterUserScramCredentialsResponse:
        typed = m.alter_scram_credentials_of(request)
        answer = await self._write(context, lambda ctx: self.service.alter_user_scram_credentials(typed, ctx))
        return m.alter_scram_credentials_response(answer)

    async def DescribeUserScramCredentials(
        self, request: apb.DescribeUserScramCredentialsRequest, context: grpc.aio.ServicerContext
    ) -> apb.DescribeUserScramCredentialsResponse:
        typed = m.describe_scram_credentials_of(request)
        answer = await self.service.describe_user_scram_credentials(typed, request_context_of(context))
        return m.describe_scram_credentials_response(answer)

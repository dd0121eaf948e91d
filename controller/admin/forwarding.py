"""Forwarding to the active controller (Kafka's request forwarding): a node that is not the active controller sends
it the writes, and the reads it cannot answer from its own image, over the controller's gRPC Admin service, as this
node (which must be allowed everything there: a super user).

Each method takes a typed request and answers the controller's typed answer, or None when no active controller is
known or it could not be reached (the service then answers NOT_CONTROLLER, which clients retry). The messages go
through the gRPC adapter's translations (``messages.py``).

Read-your-writes: the controller names, in its answer's trailing metadata, the metadata log offset that covers a
write (``METADATA_OFFSET_KEY``). This node answers once its own image has applied that offset, so the caller's next
read here sees the write, and names the offset in its answer in turn (``metadata_offset``) for a node that forwarded
to this one. The wait is bounded (``READ_YOUR_WRITES_WAIT_S``): the write is done either way. A gRPC caller's own
deadline (``RequestContext.deadline``) bounds it further: :func:`wait_budget`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any, TypeVar

import grpc
from google.protobuf.message import Message

from odradek.client.common.admin.acls import CreateAcls, CreateAclsAnswer, DeleteAcls, DeleteAclsAnswer
from odradek.client.common.admin.cluster import DescribeQuorumAnswer
from odradek.client.common.admin.configs import (
    DescribeConfigs,
    DescribeConfigsAnswer,
    IncrementalAlterConfigs,
    IncrementalAlterConfigsAnswer,
)
from odradek.client.common.admin.partitions import (
    AlterReassignments,
    AlterReassignmentsAnswer,
    ElectLeaders,
    ElectLeadersAnswer,
)
from odradek.client.common.admin.quotas import AlterClientQuotas, AlterClientQuotasAnswer
from odradek.client.common.admin.scram import AlterScramCredentials, AlterScramCredentialsAnswer
from odradek.client.common.admin.topics import (
    CreatePartitions,
    CreatePartitionsAnswer,
    CreateTopics,
    CreateTopicsAnswer,
    DeleteTopics,
    DeleteTopicsAnswer,
    DescribeTopics,
    DescribeTopicsAnswer,
)
from odradek.client.common.request_context import RequestContext
from odradek.client.connection import ChannelPool
from odradek.controller.admin import messages as m
from odradek.controller.metadata.state_machine import MetadataStateMachine
from odradek.proto import admin_pb2 as apb
from odradek.proto import admin_pb2_grpc

logger = logging.getLogger(__name__)

# Trailing metadata of an Admin write's answer: the metadata log offset that covers the write, the last one committed
# when it was answered.
METADATA_OFFSET_KEY = "odradek-metadata-offset"
# How long a node that forwarded a write waits at most for its own image to apply it before answering.
READ_YOUR_WRITES_WAIT_S = 5.0

A = TypeVar("A")


def wait_budget(ctx: RequestContext) -> float:
    """How long a forwarded write may wait for this node's image: READ_YOUR_WRITES_WAIT_S at most, and only half the
    time the caller has left (its deadline), so that the answer, the write being done, arrives before it gives up."""
    if ctx.deadline is None:
        return READ_YOUR_WRITES_WAIT_S
    return max(0.0, min(READ_YOUR_WRITES_WAIT_S, (ctx.deadline - time.monotonic()) / 2))


def metadata_offset(trailing: Iterable[tuple[str, str | bytes]] | None) -> int | None:
    """The offset an answer's trailing metadata names; None for an answer that names none (a read)."""
    for key, value in trailing or ():
        if key == METADATA_OFFSET_KEY:
            return int(value)
    return None


class Forwarder:
    """Calls the active controller's Admin service for this node; ``address`` gives the controller's address (None
    when none is known)."""

    def __init__(self, state_machine: MetadataStateMachine, address: Callable[[], str | None]) -> None:
        self.sm = state_machine
        self.address = address
        self._pool = ChannelPool()

    async def close(self) -> None:
        await self._pool.close()

    def _stub(self) -> admin_pb2_grpc.AdminStub | None:
        address = self.address()
        return None if address is None else admin_pb2_grpc.AdminStub(self._pool.get(address))

    async def _call(
        self, method: str, request: Message, timeout: float, answer_of: Callable[[Any], A], ctx: RequestContext
    ) -> A | None:
        """A call whose answer may name a metadata offset (every write, and DescribeQuorum, which names none)."""
        stub = self._stub()
        if stub is None:
            return None
        try:
            rpc = getattr(stub, method)(request, timeout=timeout)
            response = await rpc
            offset = metadata_offset(await rpc.trailing_metadata())
        except grpc.aio.AioRpcError:
            return None
        answer: Any = answer_of(response)
        if offset is None:
            return answer
        await self._catch_up(offset, ctx)
        return replace(answer, metadata_offset=offset) if hasattr(answer, "metadata_offset") else answer

    async def _read(self, method: str, request: Message, answer_of: Callable[[Any], A]) -> A | None:
        """A read of something this node's image may not have applied yet, which the active controller has."""
        stub = self._stub()
        if stub is None:
            return None
        try:
            return answer_of(await getattr(stub, method)(request, timeout=5))
        except grpc.aio.AioRpcError:
            return None

    async def _catch_up(self, offset: int, ctx: RequestContext) -> None:
        """Wait, bounded, until this node's image has applied ``offset``; the write is done either way."""
        wait = wait_budget(ctx)
        if not await self.sm.wait_for_offset(offset, wait):
            logger.debug(
                "answering a write before this node's metadata reached offset %d (at %d)", offset, self.sm.image.offset
            )

    # -- topics --

    async def create_topics(self, request: CreateTopics, ctx: RequestContext) -> CreateTopicsAnswer | None:
        timeout = request.timeout_ms / 1000 or 30
        return await self._call(
            "CreateTopics", m.create_topics_request(request), timeout, m.create_topics_answer_of, ctx
        )

    async def delete_topics(self, request: DeleteTopics, ctx: RequestContext) -> DeleteTopicsAnswer | None:
        timeout = request.timeout_ms / 1000 or 30
        return await self._call(
            "DeleteTopics", m.delete_topics_request(request), timeout, m.delete_topics_answer_of, ctx
        )

    async def create_partitions(self, request: CreatePartitions, ctx: RequestContext) -> CreatePartitionsAnswer | None:
        timeout = request.timeout_ms / 1000 or 30
        return await self._call(
            "CreatePartitions",
            m.create_partitions_request(request),
            timeout,
            m.create_partitions_answer_of,
            ctx,
        )

    async def describe_topics(self, request: DescribeTopics) -> DescribeTopicsAnswer | None:
        return await self._read("DescribeTopics", m.describe_topics_request(request), m.describe_topics_answer_of)

    # -- configs --

    async def describe_configs(self, request: DescribeConfigs) -> DescribeConfigsAnswer | None:
        return await self._read("DescribeConfigs", m.describe_configs_request(request), m.describe_configs_answer_of)

    async def incremental_alter_configs(
        self, request: IncrementalAlterConfigs, ctx: RequestContext
    ) -> IncrementalAlterConfigsAnswer | None:
        return await self._call(
            "IncrementalAlterConfigs",
            m.incremental_alter_configs_request(request),
            30,
            m.incremental_alter_configs_answer_of,
            ctx,
        )

    # -- elections, reassignments, the quorum --

    async def elect_leaders(self, request: ElectLeaders, ctx: RequestContext) -> ElectLeadersAnswer | None:
        return await self._call("ElectLeaders", m.elect_leaders_request(request), 30, m.elect_leaders_answer_of, ctx)

    async def alter_partition_reassignments(
        self, request: AlterReassignments, ctx: RequestContext
    ) -> AlterReassignmentsAnswer | None:
        return await self._call(
            "AlterPartitionReassignments",
            m.alter_reassignments_request(request),
            30,
            m.alter_reassignments_answer_of,
            ctx,
        )

    async def describe_quorum(self, ctx: RequestContext) -> DescribeQuorumAnswer | None:
        return await self._call("DescribeQuorum", apb.DescribeQuorumRequest(), 5, m.describe_quorum_answer_of, ctx)

    # -- quotas, ACLs, SCRAM credentials --

    async def alter_client_quotas(
        self, request: AlterClientQuotas, ctx: RequestContext
    ) -> AlterClientQuotasAnswer | None:
        return await self._call(
            "AlterClientQuotas",
            m.alter_client_quotas_request(request),
            30,
            m.alter_client_quotas_answer_of,
            ctx,
        )

    async def create_acls(self, request: CreateAcls, ctx: RequestContext) -> CreateAclsAnswer | None:
        return await self._call("CreateAcls", m.create_acls_request(request), 30, m.create_acls_answer_of, ctx)

    async def delete_acls(self, request: DeleteAcls, ctx: RequestContext) -> DeleteAclsAnswer | None:
        return await self._call("DeleteAcls", m.delete_acls_request(request), 30, m.delete_acls_answer_of, ctx)

    async def alter_user_scram_credentials(
        self, request: AlterScramCredentials, ctx: RequestContext
    ) -> AlterScramCredentialsAnswer | None:
        return await self._call(
            "AlterUserScramCredentials",
            m.alter_scram_credentials_request(request),
            30,
            m.alter_scram_credentials_answer_of,
            ctx,
        )

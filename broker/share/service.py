"""Share groups as the listeners serve them (KIP-932): the share group coordinator's membership APIs and the
partition leaders' ShareFetch and ShareAcknowledge, with Kafka's authorization of each, protocol-neutral (the Kafka
listener's ``share_apis`` translates into these calls).

Kafka's ACL checks: ShareGroupHeartbeat needs Read on the group and Describe on each subscribed topic named;
ShareGroupDescribe needs Describe on the group (and on the topics its members name, else TOPIC_AUTHORIZATION_FAILED
for the group); ShareFetch and ShareAcknowledge need Read on the group (else GROUP_AUTHORIZATION_FAILED for the
whole request) and Read on each topic (else TOPIC_AUTHORIZATION_FAILED for its partitions). Of the offset admin
APIs, DescribeShareGroupOffsets needs Describe on the group and on each topic, AlterShareGroupOffsets Read on the
group and on each topic, DeleteShareGroupOffsets Delete on the group and Read on each topic (a topic refused is
TOPIC_AUTHORIZATION_FAILED for its partitions).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from odradek.broker.share.group import ShareGroupDescription, ShareHeartbeatRequest, ShareHeartbeatResponse
from odradek.broker.share.group_coordinator import ShareGroupCoordinator
from odradek.broker.share.group_offsets import OffsetsAnswer, ShareGroupOffsets
from odradek.broker.share.leader import (
    DeniedTopics,
    ShareAcknowledgeRequest,
    ShareAnswer,
    ShareFetchRequest,
    ShareLeader,
)
from odradek.client.common.access import OPEN, AccessControl
from odradek.client.common.acls import AclOperation, ResourceType
from odradek.client.common.request_context import RequestContext
from odradek.client.errors import ErrorCode

_GROUP_DENIED = ErrorCode.GROUP_AUTHORIZATION_FAILED
_TOPIC_DENIED = ErrorCode.TOPIC_AUTHORIZATION_FAILED


@dataclass(frozen=True, slots=True)
class DescribedShareGroup:
    error: ErrorCode.ValueType
    message: str | None
    group: ShareGroupDescription | None
    topic_names: Mapping[bytes, str]  # topic id -> name, to name the topics of its assignments


class ShareService:
    """``ctx`` in each call: who asks (``RequestContext``), as every service takes it."""

    def __init__(
        self,
        groups: ShareGroupCoordinator,
        leader: ShareLeader,
        access: AccessControl = OPEN,
        offsets: ShareGroupOffsets | None = None,
    ) -> None:
        self.groups = groups
        self.leader = leader
        self.access = access
        self.offsets = offsets

    def _allowed(self, ctx: RequestContext, operation: AclOperation, group_id: str, api: str) -> bool:
        access = self.access
        return not access.enabled or access.allows(ctx.caller, operation, ResourceType.GROUP, group_id, api=api)

    def _denied_topics(self, ctx: RequestContext, operation: AclOperation, names: Iterable[str], api: str) -> set[str]:
        if not self.access.enabled:
            return set()
        return self.access.denied(ctx.caller, operation, ResourceType.TOPIC, names, api=api)

    async def heartbeat(
        self, group_id: str, request: ShareHeartbeatRequest, ctx: RequestContext
    ) -> ShareHeartbeatResponse:
        api = "ShareGroupHeartbeat"
        if not self._allowed(ctx, AclOperation.READ, group_id, api):
            return ShareHeartbeatResponse(_GROUP_DENIED)
        names = request.subscribed_topic_names or ()
        if names and self._denied_topics(ctx, AclOperation.DESCRIBE, names, api):
            return ShareHeartbeatResponse(_TOPIC_DENIED, "The member may not describe a subscribed topic.")
        return await self.groups.heartbeat(group_id, replace(request, client_host=ctx.host if ctx.peer else ""))

    def describe(self, group_id: str, ctx: RequestContext) -> DescribedShareGroup:
        api = "ShareGroupDescribe"
        if not self._allowed(ctx, AclOperation.DESCRIBE, group_id, api):
            return DescribedShareGroup(_GROUP_DENIED, None, None, {})
        error, message, description = self.groups.describe(group_id)
        names = self.groups.topic_names()
        if description is not None and self.access.enabled:
            topics = {n for m in description.members for n in m.subscribed_topic_names}
            topics.update(names[t] for m in description.members for t, _ in m.assignment if t in names)
            if self._denied_topics(ctx, AclOperation.DESCRIBE, topics, api):
                message = "The group has described topic(s) that the client is not authorized to describe."
                return DescribedShareGroup(_TOPIC_DENIED, message, None, {})
        return DescribedShareGroup(error, message, description, names)

    # -- the offset admin APIs ---------------------------------------------------------------------------------------

    def _offsets(self) -> ShareGroupOffsets:
        assert self.offsets is not None, "the offset admin APIs need the share group offsets"
        return self.offsets

    async def describe_offsets(
        self, group_id: str, topics: Sequence[tuple[str, Sequence[int]]] | None, ctx: RequestContext
    ) -> OffsetsAnswer:
        api = "DescribeShareGroupOffsets"
        if not self._allowed(ctx, AclOperation.DESCRIBE, group_id, api):
            return OffsetsAnswer(_GROUP_DENIED)
        denied = self._denied_topics(ctx, AclOperation.DESCRIBE, [t for t, _ in topics or ()], api)
        return await self._offsets().describe(group_id, topics, denied)

    async def alter_offsets(
        self, group_id: str, topics: Sequence[tuple[str, Sequence[tuple[int, int]]]], ctx: RequestContext
    ) -> OffsetsAnswer:
        api = "AlterShareGroupOffsets"
        if not self._allowed(ctx, AclOperation.READ, group_id, api):
            return OffsetsAnswer(_GROUP_DENIED)
        denied = self._denied_topics(ctx, AclOperation.READ, [t for t, _ in topics], api)
        return await self._offsets().alter(group_id, topics, denied)

    async def delete_offsets(self, group_id: str, topics: Sequence[str], ctx: RequestContext) -> OffsetsAnswer:
        api = "DeleteShareGroupOffsets"
        if not self._allowed(ctx, AclOperation.DELETE, group_id, api):
            return OffsetsAnswer(_GROUP_DENIED)
        denied = self._denied_topics(ctx, AclOperation.READ, topics, api)
        return await self._offsets().delete(group_id, topics, denied)

    # -- ShareFetch, ShareAcknowledge ------------------------------------------------------------------------------

    async def fetch(self, request: ShareFetchRequest, ctx: RequestContext) -> ShareAnswer:
        if not self._allowed(ctx, AclOperation.READ, request.group_id, "ShareFetch"):
            return ShareAnswer(_GROUP_DENIED)
        return await self.leader.share_fetch(request, self._topic_check(ctx, "ShareFetch"))

    async def acknowledge(self, request: ShareAcknowledgeRequest, ctx: RequestContext) -> ShareAnswer:
        if not self._allowed(ctx, AclOperation.READ, request.group_id, "ShareAcknowledge"):
            return ShareAnswer(_GROUP_DENIED)
        return await self.leader.share_acknowledge(request, self._topic_check(ctx, "ShareAcknowledge"))

    def _topic_check(self, ctx: RequestContext, api: str) -> DeniedTopics | None:
        if not self.access.enabled:
            return None

        def denied(names: Iterable[str]) -> set[str]:
            return self._denied_topics(ctx, AclOperation.READ, names, api)

        return denied

"""What every area of the admin service shares: the node's parts it reads (the metadata image, the Raft driver, the
voters, the node's defaults), the active controller when this node is it, authorization of the caller
(``ctx.caller``), forwarding to the active controller (``forwarding.Forwarder``), and :func:`write`, which names the
offset a write's answer covers."""

from __future__ import annotations

import functools
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any, ParamSpec, TypeVar, cast

from odradek.client.common.access import OPEN, AccessControl
from odradek.client.common.acls import AclOperation, ResourceType
from odradek.client.common.group_configs import GroupConfigSettings
from odradek.client.common.request_context import RequestContext
from odradek.client.common.topic_rules import TopicDefault
from odradek.client.errors import ErrorCode
from odradek.controller.active import ActiveController
from odradek.controller.admin.forwarding import Forwarder
from odradek.controller.metadata.state_machine import MetadataStateMachine
from odradek.controller.quorum.driver import RaftDriver
from odradek.controller.raft import Role

NONE = int(ErrorCode.NONE)
NOT_CONTROLLER = int(ErrorCode.NOT_CONTROLLER)
CLUSTER_DENIED = int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
TOPIC_DENIED = int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
GROUP_DENIED = int(ErrorCode.GROUP_AUTHORIZATION_FAILED)
DENIED_MESSAGE = "not authorized (see the broker's odradek.audit log)"

T = TypeVar("T")
P = ParamSpec("P")
A = TypeVar("A")


class AdminBase:
    """The admin service of one node (every node has one). ``controller`` is set on controllers: while this node is
    the active controller, writes are decided and committed here; otherwise they are forwarded to the active one.

    Authorization is checked on the node a client called; a forwarded request is checked again at the active
    controller as the forwarding node, which must be allowed everything there (a super user)."""

    def __init__(
        self,
        state_machine: MetadataStateMachine,
        driver: RaftDriver,
        voters: dict[int, str],
        defaults: Mapping[str, int],
        controller: ActiveController | None = None,
        *,
        topic_defaults: Mapping[str, TopicDefault],
        access: AccessControl = OPEN,
        group_settings: GroupConfigSettings | None = None,
    ) -> None:
        self.sm = state_machine
        self.access = access
        self.driver = driver
        self.voters = voters
        # num.partitions, default.replication.factor, max.partitions.per.broker: what CreateTopics defaults to.
        self.defaults = defaults
        self.controller = controller
        # Each topic config's default on this node (DescribeConfigs).
        self.topic_defaults = topic_defaults
        # This node's group.consumer.* settings: group configs default to them and keep to their bounds.
        self.group_settings = group_settings or GroupConfigSettings()
        self.forward = Forwarder(state_machine, self.leader_address)

    async def close(self) -> None:
        await self.forward.close()

    def leader_address(self) -> str | None:
        """The active controller's gRPC address, as this node knows it; None when it knows none."""
        leader = self.sm.leader.leader_id
        return self.voters.get(leader) if leader is not None else None

    def local_controller(self) -> ActiveController | None:
        """The active controller, when this node is it."""
        c = self.controller
        return c if c is not None and self.driver.leader.role is Role.LEADER else None

    # -- authorization --------------------------------------------------------------------------------------

    def cluster_denied(self, ctx: RequestContext, operation: AclOperation, api: str) -> bool:
        access = self.access
        return access.enabled and not access.allows_cluster(ctx.caller, operation, api=api)

    def topics_denied(
        self,
        ctx: RequestContext,
        operation: AclOperation,
        names: Iterable[str],
        api: str,
        *,
        or_cluster: AclOperation | None = None,
    ) -> set[str]:
        """The topics among ``names`` the caller may not perform ``operation`` on; none when ``or_cluster`` is
        allowed on the cluster (as cluster Create allows creating any topic)."""
        access = self.access
        if not access.enabled:
            return set()
        caller = ctx.caller
        if or_cluster is not None and access.allows_cluster(caller, or_cluster, api=api, audit_denial=False):
            return set()
        return access.denied(caller, operation, ResourceType.TOPIC, names, api=api)

    def groups_denied(self, ctx: RequestContext, operation: AclOperation, names: Iterable[str], api: str) -> set[str]:
        """The groups among ``names`` the caller may not perform ``operation`` on (their config resources)."""
        access = self.access
        if not access.enabled:
            return set()
        return access.denied(ctx.caller, operation, ResourceType.GROUP, names, api=api)


def write(method: Callable[P, Coroutine[Any, Any, A]]) -> Callable[P, Coroutine[Any, Any, A]]:
    """An admin write (a method of an ``AdminBase``, taking the request and its context): answered by the active
    controller on this node, it names (``metadata_offset``) the offset of the image it answered from, which holds the
    write and everything committed before it (a write waits for its commit and apply). A forwarded write's answer
    names the offset the active controller named."""

    @functools.wraps(method)
    async def serve(*args: P.args, **kwargs: P.kwargs) -> A:
        service = cast(AdminBase, args[0])
        local = service.local_controller() is not None
        answer = await method(*args, **kwargs)
        if not local:
            return answer
        covered: Any = answer
        return replace(covered, metadata_offset=service.sm.image.offset)

    return serve


def merged(names: Sequence[str], denied: set[str], answered: Iterable[T], refusal: Callable[[str], T]) -> tuple[T, ...]:
    """Results in request order: a refusal for each denied name, the answer to the rest in turn."""
    rest = iter(list(answered))
    out: list[T] = []
    for name in names:
        if name in denied:
            out.append(refusal(name))
        else:
            result = next(rest, None)
            if result is not None:
                out.append(result)
    return tuple(out)

"""The admin client's consumer-group requests (Kafka's Admin listConsumerGroups, describeConsumerGroups,
listConsumerGroupOffsets, alterConsumerGroupOffsets, deleteConsumerGroups, deleteConsumerGroupOffsets).

Every request but ListGroups goes to the group's coordinator, found with FindCoordinator and cached per group. A
coordinator that moved or is still loading (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
COORDINATOR_NOT_AVAILABLE, or an unreachable one) is looked up again after ``retry.backoff.ms``, until the request
timeout. ListGroups is answered by each broker for the groups it coordinates, so it asks every broker and merges,
as Kafka's admin does.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import grpc

from odradek.client.connection import ChannelPool
from odradek.client.consumer.protocol import PROTOCOL_TYPE, Assignment, ConsumerProtocolError
from odradek.client.errors import ErrorCode, GroupNotEmptyError, OdradekError, error_for_code, error_name
from odradek.client.group_requests import commit_topics, partitions_by_topic
from odradek.client.structs import OffsetAndMetadata, TopicPartition
from odradek.proto import group_pb2 as gpb
from odradek.proto import group_pb2_grpc

if TYPE_CHECKING:
    from odradek.client.admin import ClusterDescription
    from odradek.proto.group_pb2_grpc import GroupCoordinatorAsyncStub

R = TypeVar("R")
S = TypeVar("S")

COORDINATOR_RETRY = frozenset(
    {ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE}
)


@dataclass(frozen=True)
class GroupListing:
    group_id: str
    protocol_type: str
    state: str
    coordinator: int  # the node id of the broker that answered for it
    group_type: str = "classic"  # "consumer": a KIP-848 group (the consumer protocol, group.protocol=consumer)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class MemberDescription:
    member_id: str
    instance_id: str | None
    client_id: str
    host: str
    assignment: list[TopicPartition] = field(default_factory=list)  # decoded for protocol type "consumer"


@dataclass(frozen=True)
class GroupDescription:
    """A group as its coordinator sees it. An unknown group is described as ``Dead`` with no members (as Kafka).
    A KIP-848 group (``group_type`` "consumer") has its server assignor as ``protocol``, its group epoch as
    ``generation``, no leader, and its members' current assignments."""

    group_id: str
    state: str
    protocol_type: str
    protocol: str  # the selected assignor, e.g. "range"; empty while no generation
    generation: int
    coordinator: int
    leader: str
    members: list[MemberDescription] = field(default_factory=list)
    group_type: str = "classic"


@dataclass(frozen=True)
class GroupOffset:
    """One committed position of a group: ``leader_epoch`` None when unknown."""

    topic: str
    partition: int
    offset: int
    leader_epoch: int | None
    metadata: str


def member_assignment(protocol_type: str, data: bytes) -> list[TopicPartition]:
    """The partitions a classic consumer member was assigned (empty for another protocol, or data that is not a
    consumer assignment)."""
    if protocol_type != PROTOCOL_TYPE or not data:
        return []
    try:
        return list(Assignment.decode(data).partitions)
    except ConsumerProtocolError:
        return []  # a member of another client's making: show no assignment rather than fail the describe


class _CoordinatorRetry(Exception):
    def __init__(self, code: int) -> None:
        super().__init__(error_name(code))
        self.code = code


class GroupAdmin:
    """The group requests; ``AsyncAdmin`` inherits them. Needs the pool, the timeout, the backoff and
    ``describe_cluster`` of its host class."""

    _pool: ChannelPool
    _timeout: float
    _backoff: float

    if TYPE_CHECKING:

        async def describe_cluster(self) -> ClusterDescription: ...

        def _rpc_timeout(self) -> float: ...

    def _coordinators(self) -> dict[str, tuple[int, str]]:
        cache: dict[str, tuple[int, str]] | None = getattr(self, "_group_coordinators", None)
        if cache is None:
            cache = {}
            self._group_coordinators = cache
        return cache

    async def _brokers(self) -> dict[int, str]:
        cluster = await self.describe_cluster()
        return {b.node_id: f"{b.host}:{b.port}" for b in cluster.brokers if not b.fenced}

    def _stub(self, address: str) -> GroupCoordinatorAsyncStub:
        stub: GroupCoordinatorAsyncStub = group_pb2_grpc.GroupCoordinatorStub(self._pool.get(address))
        return stub

    async def _find_coordinator(self, group: str) -> tuple[int, str]:
        cached = self._coordinators().get(group)
        if cached is not None:
            return cached
        brokers = await self._brokers()
        request = gpb.FindCoordinatorRequest(key_type=gpb.GROUP, keys=[group])
        last = ErrorCode.COORDINATOR_NOT_AVAILABLE
        for address in brokers.values():
            try:
                r = await self._stub(address).FindCoordinator(request, timeout=self._rpc_timeout())
            except grpc.aio.AioRpcError:
                continue
            for found in r.coordinators:
                if found.key != group:
                    continue
                if found.error == ErrorCode.NONE:
                    self._coordinators()[group] = (found.node_id, f"{found.host}:{found.port}")
                    return self._coordinators()[group]
                if found.error not in COORDINATOR_RETRY:
                    raise error_for_code(found.error, found.error_message or f"FindCoordinator for group {group}")
                last = found.error
            break
        raise _CoordinatorRetry(last)

    async def _group_call(
        self,
        group: str,
        invoke: Callable[[GroupCoordinatorAsyncStub, float], Awaitable[R]],
        error_of: Callable[[R], int],
    ) -> tuple[int, R]:
        """Send one request to ``group``'s coordinator, looking it up again while it moves or loads; return the
        coordinator's node id and the answer."""
        return await self._coordinator_call(group, self._stub, invoke, error_of)

    async def _coordinator_call(
        self,
        group: str,
        stub_of: Callable[[str], S],
        invoke: Callable[[S, float], Awaitable[R]],
        error_of: Callable[[R], int],
    ) -> tuple[int, R]:
        """``_group_call`` through another service the group's coordinator serves (``stub_of(address)``)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._timeout
        last: OdradekError | None = None
        while True:
            try:
                node, address = await self._find_coordinator(group)
                try:
                    response = await invoke(
                        stub_of(address), max(0.1, min(self._rpc_timeout(), deadline - loop.time()))
                    )
                except grpc.aio.AioRpcError as e:
                    if e.code() == grpc.StatusCode.UNIMPLEMENTED:  # no such service there: no retry helps
                        raise OdradekError(
                            f"{address} does not implement this request", code=ErrorCode.UNSUPPORTED_VERSION
                        ) from None
                    raise _CoordinatorRetry(ErrorCode.COORDINATOR_NOT_AVAILABLE) from e
                code = error_of(response)
                if code not in COORDINATOR_RETRY:
                    return node, response
                raise _CoordinatorRetry(code)
            except _CoordinatorRetry as e:
                self._coordinators().pop(group, None)
                last = error_for_code(e.code, f"group {group}: {error_name(e.code)}")
            if loop.time() + self._backoff >= deadline:
                raise last
            await asyncio.sleep(self._backoff)

    async def list_groups(
        self, states: Iterable[str] | None = None, types: Iterable[str] | None = None
    ) -> list[GroupListing]:
        """Every group of the cluster (in ``states`` only, Kafka's state names, and of ``types`` only, "classic",
        "consumer" or "share"; both case-insensitive), asking each broker for the groups it coordinates. A broker
        still loading a partition is asked again until the timeout; one that stays unreachable raises its error (a
        partial list would hide groups)."""
        brokers = await self._brokers()
        request = gpb.ListGroupsRequest(states_filter=list(states or ()), types_filter=list(types or ()))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._timeout

        async def ask(node: int, address: str) -> list[GroupListing]:
            while True:
                try:
                    r = await self._stub(address).ListGroups(
                        request, timeout=max(0.1, min(self._rpc_timeout(), deadline - loop.time()))
                    )
                    code = r.error
                except grpc.aio.AioRpcError as e:
                    code = ErrorCode.COORDINATOR_NOT_AVAILABLE
                    detail = e.details() or e.code().name
                else:
                    detail = error_name(code)
                    if code == ErrorCode.NONE:
                        return [
                            GroupListing(g.group_id, g.protocol_type, g.group_state, node, g.group_type or "classic")
                            for g in r.groups
                        ]
                    if code not in COORDINATOR_RETRY:
                        raise error_for_code(code, f"broker {node}: ListGroups: {detail}")
                if loop.time() + self._backoff >= deadline:
                    raise error_for_code(code, f"broker {node} ({address}): ListGroups: {detail}")
                await asyncio.sleep(self._backoff)

        found = await asyncio.gather(*(ask(n, a) for n, a in brokers.items()))
        merged = {g.group_id: g for listing in found for g in listing}
        return sorted(merged.values(), key=lambda g: g.group_id)

    async def describe_groups(self, ids: Sequence[str]) -> list[GroupDescription]:
        """Each group's state, selected assignor, generation, leader and members with their decoded assignment."""

        async def one(group: str) -> GroupDescription:
            request = gpb.DescribeGroupsRequest(groups=[group])
            node, r = await self._group_call(
                group, lambda s, t: s.DescribeGroups(request, timeout=t), lambda r: r.groups[0].error
            )
            g = r.groups[0]
            if g.error != ErrorCode.NONE:
                raise error_for_code(g.error, f"group {group}: {error_name(g.error)}")
            members = [
                MemberDescription(
                    m.member_id,
                    m.group_instance_id if m.HasField("group_instance_id") else None,
                    m.client_id,
                    m.client_host,
                    member_assignment(g.protocol_type, m.member_assignment),
                )
                for m in sorted(g.members, key=lambda m: m.member_id)
            ]
            return GroupDescription(
                g.group_id,
                g.group_state,
                g.protocol_type,
                g.protocol_data,
                g.generation_id,
                node,
                g.leader,
                members,
                g.group_type or "classic",
            )

        return list(await asyncio.gather(*(one(group) for group in ids)))

    async def list_group_offsets(
        self, group: str, partitions: Iterable[TopicPartition] | None = None
    ) -> list[GroupOffset]:
        """The group's committed offsets: every one it has when ``partitions`` is None; a named partition with no
        commit is left out."""
        wanted = None if partitions is None else sorted(set(partitions))
        request = gpb.OffsetFetchRequest(
            group_id=group,
            all_topics=wanted is None,
            topics=[gpb.OffsetFetchTopic(name=t, partitions=ps) for t, ps in partitions_by_topic(wanted or ()).items()],
        )
        _, r = await self._group_call(group, lambda s, t: s.OffsetFetch(request, timeout=t), lambda r: r.error)
        if r.error != ErrorCode.NONE:
            raise error_for_code(r.error, f"group {group}: {error_name(r.error)}")
        out = []
        for t in r.topics:
            for p in t.partitions:
                if p.error != ErrorCode.NONE:
                    raise error_for_code(p.error, f"group {group} {t.name}-{p.partition}: {error_name(p.error)}")
                if p.committed_offset < 0:
                    continue
                epoch = p.committed_leader_epoch if p.committed_leader_epoch >= 0 else None
                out.append(GroupOffset(t.name, p.partition, p.committed_offset, epoch, p.metadata))
        return sorted(out, key=lambda o: (o.topic, o.partition))

    async def alter_group_offsets(self, group: str, offsets: Mapping[TopicPartition, OffsetAndMetadata | int]) -> None:
        """Commit ``offsets`` for a group without members (Kafka's alterConsumerGroupOffsets, a simple commit).
        Raises ``GroupNotEmptyError`` while the group has members (they own their positions), and the typed error
        of any partition the coordinator refuses."""
        if not offsets:
            return
        checked: dict[TopicPartition, OffsetAndMetadata] = {}
        for tp, value in offsets.items():
            om = value if isinstance(value, OffsetAndMetadata) else OffsetAndMetadata(value)
            if om.offset < 0:
                raise error_for_code(ErrorCode.INVALID_REQUEST, f"offset {om.offset} for {tp} is negative")
            checked[tp] = om
        request = gpb.OffsetCommitRequest(
            group_id=group,
            generation_id=-1,
            member_id="",
            topics=commit_topics(checked),
        )

        def first_error(r: gpb.OffsetCommitResponse) -> int:
            codes = [p.error for t in r.topics for p in t.partitions if p.error != ErrorCode.NONE]
            return codes[0] if codes else ErrorCode.NONE

        _, r = await self._group_call(group, lambda s, t: s.OffsetCommit(request, timeout=t), first_error)
        code = first_error(r)
        if code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION, ErrorCode.REBALANCE_IN_PROGRESS):
            raise GroupNotEmptyError(f"group {group} has active members; stop them first")
        if code != ErrorCode.NONE:
            failed = [f"{t.name}-{p.partition}" for t in r.topics for p in t.partitions if p.error == code]
            raise error_for_code(code, f"group {group}: {error_name(code)} for {', '.join(failed)}")

    async def delete_groups(self, ids: Sequence[str]) -> dict[str, str | None]:
        """Delete each group (only an empty one: NON_EMPTY_GROUP otherwise) with its committed offsets; the
        result maps each group to its error name, None on success."""

        async def one(group: str) -> tuple[str, str | None]:
            request = gpb.DeleteGroupsRequest(groups=[group])
            _, r = await self._group_call(
                group, lambda s, t: s.DeleteGroups(request, timeout=t), lambda r: r.results[0].error
            )
            code = r.results[0].error
            return group, None if code == ErrorCode.NONE else error_name(code)

        return dict(await asyncio.gather(*(one(group) for group in ids)))

    async def delete_group_offsets(self, group: str, topics: Sequence[str]) -> dict[TopicPartition, str | None]:
        """Delete the group's committed offsets of every partition of ``topics`` (Kafka's OffsetDelete: refused
        per partition with GROUP_SUBSCRIBED_TO_TOPIC while a member subscribes to the topic). Returns each
        partition that had a commit with its error name, None when deleted."""
        committed = [o for o in await self.list_group_offsets(group) if o.topic in set(topics)]
        if not committed:
            return {}
        by_topic = partitions_by_topic(TopicPartition(o.topic, o.partition) for o in committed)
        request = gpb.OffsetDeleteRequest(
            group_id=group, topics=[gpb.OffsetDeleteTopic(name=t, partitions=ps) for t, ps in by_topic.items()]
        )
        _, r = await self._group_call(group, lambda s, t: s.OffsetDelete(request, timeout=t), lambda r: r.error)
        if r.error != ErrorCode.NONE:
            raise error_for_code(r.error, f"group {group}: {error_name(r.error)}")
        return {
            TopicPartition(t.name, p.partition): None if p.error == ErrorCode.NONE else error_name(p.error)
            for t in r.topics
            for p in t.partitions
        }

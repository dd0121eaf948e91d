"""The admin client's share group requests (KIP-932; Kafka's Admin describeShareGroups, listShareGroupOffsets,
alterShareGroupOffsets, deleteShareGroupOffsets) on the ShareGroups gRPC service.

Each goes to the group's coordinator, found and retried as the consumer group requests are (``admin_groups``).
Listing share groups is ``list_groups(types=["share"])`` and deleting one ``delete_groups``: ListGroups and
DeleteGroups cover every kind of group.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from odradek.client.admin_groups import GroupAdmin
from odradek.client.errors import ErrorCode, error_for_code, error_name
from odradek.client.group_requests import partitions_by_topic
from odradek.client.structs import TopicPartition
from odradek.proto import share_group_pb2 as sgpb
from odradek.proto import share_group_pb2_grpc

if TYPE_CHECKING:
    from odradek.proto.share_group_pb2_grpc import ShareGroupsAsyncStub


@dataclass(frozen=True)
class ShareMemberDescription:
    member_id: str
    rack_id: str | None
    member_epoch: int
    client_id: str
    host: str
    subscribed_topics: list[str] = field(default_factory=list)
    assignment: list[TopicPartition] = field(default_factory=list)


@dataclass(frozen=True)
class ShareGroupDescription:
    """A share group as its coordinator sees it; members have no owned partitions, only the ones they fetch from."""

    group_id: str
    state: str
    group_epoch: int
    assignment_epoch: int
    assignor: str
    coordinator: int
    members: list[ShareMemberDescription] = field(default_factory=list)


@dataclass(frozen=True)
class ShareGroupOffset:
    """One share-partition's start offset (None: none stored, so ``share.auto.offset.reset`` applies)."""

    topic: str
    partition: int
    start_offset: int | None
    leader_epoch: int | None


def _first_error(topics: Iterable[sgpb.ShareOffsetTopic]) -> tuple[int, list[str]]:
    """The first per-topic or per-partition error and every place with that error."""
    places = [(t.error, t.topic_name) for t in topics if t.error != ErrorCode.NONE]
    places += [(p.error, f"{t.topic_name}:{p.partition}") for t in topics for p in t.partitions if p.error]
    if not places:
        return ErrorCode.NONE, []
    code = places[0][0]
    return code, [where for c, where in places if c == code]


class ShareGroupAdmin(GroupAdmin):
    """The share group requests; ``AsyncAdmin`` inherits them."""

    def _share_stub(self, address: str) -> ShareGroupsAsyncStub:
        stub: ShareGroupsAsyncStub = share_group_pb2_grpc.ShareGroupsStub(self._pool.get(address))
        return stub

    async def describe_share_groups(self, ids: Sequence[str]) -> list[ShareGroupDescription]:
        """Each share group's state, epochs, assignor and members with their assignment; an unknown group (or one
        of another type) raises ``GROUP_ID_NOT_FOUND``."""

        async def one(group: str) -> ShareGroupDescription:
            request = sgpb.DescribeShareGroupsRequest(group_ids=[group])
            node, r = await self._coordinator_call(
                group,
                self._share_stub,
                lambda s, t: s.DescribeShareGroups(request, timeout=t),
                lambda r: r.groups[0].error,
            )
            g = r.groups[0]
            if g.error != ErrorCode.NONE:
                raise error_for_code(g.error, g.error_message or f"group {group}: {error_name(g.error)}")
            members = [
                ShareMemberDescription(
                    m.member_id,
                    m.rack_id if m.HasField("rack_id") else None,
                    m.member_epoch,
                    m.client_id,
                    m.client_host,
                    sorted(m.subscribed_topic_names),
                    sorted(TopicPartition(t.topic_name, p) for t in m.assignment for p in t.partitions),
                )
                for m in sorted(g.members, key=lambda m: m.member_id)
            ]
            return ShareGroupDescription(
                g.group_id, g.group_state, g.group_epoch, g.assignment_epoch, g.assignor_name, node, members
            )

        return list(await asyncio.gather(*(one(group) for group in ids)))

    async def list_share_group_offsets(
        self, group: str, partitions: Iterable[TopicPartition] | None = None
    ) -> list[ShareGroupOffset]:
        """The start offsets of the group's share-partitions: every one it has state for when ``partitions`` is
        None. Raises the typed error of the group, or of the first topic or partition refused."""
        wanted = None if partitions is None else sorted(set(partitions))
        request = sgpb.DescribeShareGroupOffsetsRequest(
            group_id=group,
            all_topics=wanted is None,
            topics=[
                sgpb.ShareTopicPartitions(topic_name=t, partitions=ps)
                for t, ps in partitions_by_topic(wanted or ()).items()
            ],
        )
        _, r = await self._coordinator_call(
            group, self._share_stub, lambda s, t: s.DescribeShareGroupOffsets(request, timeout=t), lambda r: r.error
        )
        self._raise_offsets_error(group, r)
        return sorted(
            (
                ShareGroupOffset(
                    t.topic_name,
                    p.partition,
                    p.start_offset if p.start_offset >= 0 else None,
                    p.leader_epoch if p.leader_epoch >= 0 else None,
                )
                for t in r.topics
                for p in t.partitions
            ),
            key=lambda o: (o.topic, o.partition),
        )

    async def alter_share_group_offsets(self, group: str, offsets: Mapping[TopicPartition, int]) -> None:
        """Set the start offsets of an empty share group's share-partitions: records from there on are delivered
        again. Raises ``NON_EMPTY_GROUP`` while the group has members, and the typed error of the first topic
        or partition refused."""
        if not offsets:
            return
        by_topic: dict[str, list[sgpb.ShareOffsetPartition]] = {}
        for tp, offset in sorted(offsets.items()):
            if offset < 0:
                raise error_for_code(ErrorCode.INVALID_REQUEST, f"offset {offset} for {tp} is negative")
            by_topic.setdefault(tp.topic, []).append(
                sgpb.ShareOffsetPartition(partition=tp.partition, start_offset=offset)
            )
        request = sgpb.AlterShareGroupOffsetsRequest(
            group_id=group,
            topics=[sgpb.ShareOffsetTopic(topic_name=t, partitions=ps) for t, ps in by_topic.items()],
        )
        _, r = await self._coordinator_call(
            group, self._share_stub, lambda s, t: s.AlterShareGroupOffsets(request, timeout=t), lambda r: r.error
        )
        self._raise_offsets_error(group, r)

    async def delete_share_group_offsets(self, group: str, topics: Sequence[str]) -> None:
        """Reset an empty share group's state of whole topics: a later consumer starts where
        ``share.auto.offset.reset`` says. Raises as ``alter_share_group_offsets``."""
        request = sgpb.DeleteShareGroupOffsetsRequest(group_id=group, topic_names=list(dict.fromkeys(topics)))
        _, r = await self._coordinator_call(
            group, self._share_stub, lambda s, t: s.DeleteShareGroupOffsets(request, timeout=t), lambda r: r.error
        )
        self._raise_offsets_error(group, r)

    @staticmethod
    def _raise_offsets_error(
        group: str,
        r: sgpb.DescribeShareGroupOffsetsResponse
        | sgpb.AlterShareGroupOffsetsResponse
        | sgpb.DeleteShareGroupOffsetsResponse,
    ) -> None:
        if r.error == ErrorCode.NON_EMPTY_GROUP:
            raise error_for_code(r.error, f"share group {group} has active members; stop them first")
        if r.error != ErrorCode.NONE:
            raise error_for_code(r.error, r.error_message or f"group {group}: {error_name(r.error)}")
        code, places = _first_error(r.topics)
        if code != ErrorCode.NONE:
            raise error_for_code(code, f"group {group}: {error_name(code)} for {', '.join(places)}")

"""The coordinator's shell around KIP-848 consumer groups, over a real offsets partition (two replicas on real logs,
as tests/groups/test_coordinator_appends.py): a heartbeat is answered once its records are stored, a failed
append leaves the group as it was stored, a new coordinator loads the group from the log, session timers remove
members, offset commits carry member epochs, and an empty classic group becomes a consumer group keeping its
offsets."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from test_coordinator_appends import (
    CALLER,
    DATA_ID,
    OTHER_ID,
    TP,
    ManualClock,
    OffsetsReplicas,
    allow,
    coordinator,
    serving,
    until,
)

from odradek.broker.groups.consumer_group import ConsumerGroupConfig
from odradek.broker.groups.consumer_messages import ConsumerHeartbeatRequest
from odradek.broker.groups.coordinator import GroupCoordinator
from odradek.broker.groups.group import GroupConfig
from odradek.broker.groups.group_service import GroupService
from odradek.broker.groups.messages import (
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    LeavingMember,
    SyncGroupRequest,
)
from odradek.broker.groups.offsets import OffsetAndMetadata
from odradek.broker.groups.requests import ConsumerGroupDescribe, ConsumerGroupHeartbeat, DescribedConsumerGroup
from odradek.client.common.access import AccessControl, AuthorizerSettings
from odradek.client.common.acls import AclOperation, ResourceType
from odradek.client.consumer.protocol import Assignment, Subscription
from odradek.client.errors import ErrorCode
from odradek.client.structs import TopicPartition


@pytest.fixture
async def replicas(tmp_path: Path) -> AsyncIterator[OffsetsReplicas]:
    r = OffsetsReplicas(tmp_path)
    yield r
    r.close()


def join(member: str, **fields: object) -> ConsumerHeartbeatRequest:
    values: dict[str, object] = {
        "member_id": member,
        "member_epoch": 0,
        "rebalance_timeout_ms": 30_000,
        "subscribed_topic_names": ("t",),
        "owned": frozenset(),
        **fields,
    }
    return ConsumerHeartbeatRequest(**values)  # type: ignore[arg-type]


def members(c: GroupCoordinator, group: str) -> dict[str, int]:
    error, _, description = c.describe_consumer_group(group)
    assert error == ErrorCode.NONE and description is not None
    return {m.member_id: m.member_epoch for m in description.members}


async def test_a_heartbeat_is_stored_before_it_is_answered_and_a_new_coordinator_loads_it(
    replicas: OffsetsReplicas,
) -> None:
    clock = ManualClock()
    async with serving(replicas, clock) as c:
        end = replicas.leader.log.log_end_offset
        r = await c.consumer_heartbeat("g", join("m1"))
        assert (r.error, r.member_id, r.member_epoch, r.assignment) == (
            ErrorCode.NONE,
            "m1",
            1,
            frozenset({(DATA_ID, 0)}),
        )
        assert replicas.leader.log.high_watermark > end  # the records are committed when it answers
        assert await c.commit_offsets("g", "m1", None, 1, {TP: OffsetAndMetadata(5)}) == {TP: ErrorCode.NONE}
        assert await c.commit_offsets("g", "m1", None, 0, {TP: OffsetAndMetadata(6)}) == {
            TP: ErrorCode.STALE_MEMBER_EPOCH
        }
        assert c.fetch_offsets("g", [TP], "m1", 0)[0] == ErrorCode.STALE_MEMBER_EPOCH
        # A member of the classic protocol may join it (it is handed its member id first); not one of another
        # protocol type.
        classic = JoinGroupRequest(0, "", None, "c", "h", 10_000, 10_000, "consumer", (("range", b""),))
        assert (await c.join("g", classic)).error == ErrorCode.MEMBER_ID_REQUIRED
        connect = JoinGroupRequest(0, "", None, "c", "h", 10_000, 10_000, "connect", (("x", b""),))
        assert (await c.join("g", connect)).error == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    async with serving(replicas, clock) as again:
        assert members(again, "g") == {"m1": 1}
        error, fetched = again.fetch_offsets("g", [TP], "m1", 1)
        assert (error, fetched[TP].offset) == (ErrorCode.NONE, 5)
        r = await again.consumer_heartbeat("g", ConsumerHeartbeatRequest("m1", 1))
        assert (r.error, r.member_epoch) == (ErrorCode.NONE, 1)


async def test_a_heartbeat_whose_append_fails_leaves_the_group_as_stored(replicas: OffsetsReplicas) -> None:
    clock = ManualClock()
    async with serving(replicas, clock) as c:
        assert (await c.consumer_heartbeat("g", join("m1"))).member_epoch == 1
    c = coordinator(replicas, clock, commit_timeout_ms=100)
    try:
        c.on_leadership(replicas.leading)
        pump = asyncio.create_task(replicas.keep_replicating())
        await until(lambda: all(cp.loaded for cp in c.partitions.values()), "loaded")
        pump.cancel()  # nothing replicates from here on: every append times out
        r = await c.consumer_heartbeat("g", join("m2"))
        assert r.error == ErrorCode.COORDINATOR_NOT_AVAILABLE
        assert members(c, "g") == {"m1": 1}  # m2's join never happened
        r = await c.consumer_heartbeat("h", join("m1"))
        assert r.error == ErrorCode.COORDINATOR_NOT_AVAILABLE
        assert c.describe_consumer_group("h")[0] == ErrorCode.GROUP_ID_NOT_FOUND  # nor did group h
    finally:
        await c.close()


async def test_a_member_whose_session_expires_is_removed(replicas: OffsetsReplicas) -> None:
    """With the group.consumer.* settings: the heartbeat interval members are told, the session timeout, the size."""
    clock = ManualClock()
    settings = ConsumerGroupConfig(session_timeout_ms=20_000, heartbeat_interval_ms=2_000, max_size=2)
    async with serving(replicas, clock, consumer_group=settings) as c:
        assert (await c.consumer_heartbeat("g", join("m1"))).heartbeat_interval_ms == 2_000
        await c.consumer_heartbeat("g", join("m2"))
        assert (await c.consumer_heartbeat("g", join("m3"))).error == ErrorCode.GROUP_MAX_SIZE_REACHED
        clock.now += 15_000
        assert (await c.consumer_heartbeat("g", ConsumerHeartbeatRequest("m2", 2, owned=frozenset()))).error == 0
        clock.now += 6_000  # m1's 20 s session is over, m2's is not
        c.partitions[0].wake.set()
        await until(lambda: "m1" not in members(c, "g"), "m1's removal")
        assert set(members(c, "g")) == {"m2"}


async def test_an_empty_classic_group_becomes_a_consumer_group_keeping_its_offsets(replicas: OffsetsReplicas) -> None:
    clock = ManualClock()
    async with serving(replicas, clock) as c:
        assert await c.commit_offsets("old", "", None, -1, {TP: OffsetAndMetadata(7)}) == {TP: ErrorCode.NONE}
        assert "old" in c.partitions[0].shard.groups
        r = await c.consumer_heartbeat("old", join("m1"))
        assert (r.error, r.member_epoch) == (ErrorCode.NONE, 1)
        assert "old" not in c.partitions[0].shard.groups and c.fetch_offsets("old", [TP])[1][TP].offset == 7
        assert await c.commit_offsets("simple", "", None, -1, {TP: OffsetAndMetadata(1)}) == {TP: ErrorCode.NONE}
        listed = {g.group_id: (g.group_type, g.state) for g in c.list_groups()[1]}
        assert listed == {"old": ("consumer", "Stable"), "simple": ("classic", "Empty")}
        assert [g.group_id for g in c.list_groups(types=["Consumer"])[1]] == ["old"]
        assert [g.group_id for g in c.list_groups(states=["empty"], types=["classic", "consumer"])[1]] == ["simple"]
        # A classic group with members whose subscription cannot be read stays what it is.
        classic = JoinGroupRequest(0, "", "i-1", "c", "h", 10_000, 10_000, "consumer", (("range", b""),))
        joining = asyncio.create_task(c.join("busy", classic))
        await until(lambda: "busy" in c.partitions[0].shard.groups, "the classic join")
        r = await c.consumer_heartbeat("busy", join("m1"))
        assert r.error == ErrorCode.GROUP_ID_NOT_FOUND and "malformed" in (r.error_message or "")
        assert "busy" in c.partitions[0].shard.groups
        joining.cancel()
    async with serving(replicas, clock) as again:  # the upgrade is in the log: the group loads as a consumer group
        assert members(again, "old") == {"m1": 1}
        assert again.fetch_offsets("old", [TP])[1][TP].offset == 7


def classic_join(member_id: str = "", owned: tuple[TopicPartition, ...] = ()) -> JoinGroupRequest:
    subscription = Subscription(("t",), owned_partitions=owned).encode()
    return JoinGroupRequest(0, member_id, None, "c", "h", 30_000, 60_000, "consumer", (("range", subscription),))


def assigned(assignment: bytes) -> list[TopicPartition]:
    return list(Assignment.decode(assignment).partitions)


async def test_a_classic_group_with_members_is_upgraded_and_downgraded_online(replicas: OffsetsReplicas) -> None:
    """group.consumer.migration.policy bidirectional (the default): a member of the consumer protocol joining a
    classic group with members upgrades it, its parked calls are told to rejoin, the classic members go on with the
    classic protocol, the group loads as a consumer group; the consumer member leaving downgrades it back to a
    classic group that rebalances; offsets survive both."""
    clock = ManualClock()
    async with serving(replicas, clock, group=GroupConfig(initial_rebalance_delay_ms=0)) as c:
        a = (await c.join("g", classic_join())).member_id
        r = await c.join("g", classic_join(a))
        assert (r.error, r.generation_id, r.leader) == (ErrorCode.NONE, 1, a)
        mine = Assignment((TP,)).encode()
        s = await c.sync("g", SyncGroupRequest(0, a, None, 1, "consumer", "range", ((a, mine),)))
        assert assigned(s.assignment) == [TP]
        assert await c.commit_offsets("g", a, None, 1, {TP: OffsetAndMetadata(4)}) == {TP: ErrorCode.NONE}
        # b joins: a rebalance starts and b's JoinGroup is parked until a rejoins.
        b = (await c.join("g", classic_join())).member_id
        parked = asyncio.create_task(c.join("g", classic_join(b)))
        await until(lambda: b in c.partitions[0].shard.groups["g"].members, "b's join")
        r = await c.consumer_heartbeat("g", join("m1"))
        assert (r.error, r.member_epoch, r.assignment) == (ErrorCode.NONE, 2, frozenset())
        assert (await parked).error == ErrorCode.REBALANCE_IN_PROGRESS  # told to rejoin the consumer group
        _, _, description = c.describe_consumer_group("g")
        assert description is not None
        assert {m.member_id: (m.member_epoch, m.classic) for m in description.members} == {
            a: (1, True),
            b: (1, True),
            "m1": (2, False),
        }
        # a goes on with the classic protocol: told to rejoin, it gets its epoch as generation and its partition.
        assert (await c.heartbeat("g", HeartbeatRequest(a, None, 1))).error == ErrorCode.REBALANCE_IN_PROGRESS
        r = await c.join("g", classic_join(a, owned=(TP,)))
        assert (r.error, r.generation_id, r.leader, r.protocol_name) == (ErrorCode.NONE, 2, "", "range")
        s = await c.sync("g", SyncGroupRequest(0, a, None, 2, "consumer", "range"))
        assert (s.error, assigned(s.assignment)) == (ErrorCode.NONE, [TP])
        assert (await c.heartbeat("g", HeartbeatRequest(a, None, 2))).error == ErrorCode.NONE
        assert await c.commit_offsets("g", a, None, 1, {TP: OffsetAndMetadata(5)}) == {TP: ErrorCode.ILLEGAL_GENERATION}
        assert await c.commit_offsets("g", a, None, 2, {TP: OffsetAndMetadata(5)}) == {TP: ErrorCode.NONE}
        r = await c.join("g", classic_join(b))
        assert (r.error, r.generation_id) == (ErrorCode.NONE, 2)
    async with serving(replicas, clock, group=GroupConfig(initial_rebalance_delay_ms=0)) as again:
        _, _, description = again.describe_consumer_group("g")
        assert description is not None and {m.member_id: m.classic for m in description.members} == {
            a: True,
            b: True,
            "m1": False,
        }
        assert (await again.heartbeat("g", HeartbeatRequest(a, None, 2))).error == ErrorCode.NONE
        # The last member of the consumer protocol leaves: the group is a classic group again, rebalancing.
        await again.consumer_heartbeat("g", ConsumerHeartbeatRequest("m1", -1))
        assert again.describe_consumer_group("g")[0] == ErrorCode.GROUP_ID_NOT_FOUND
        d = again.describe("g")
        assert (d.group_type, d.state, d.generation_id) == ("classic", "PreparingRebalance", 2)  # the group epoch
        assert (await again.heartbeat("g", HeartbeatRequest(a, None, 2))).error == ErrorCode.REBALANCE_IN_PROGRESS
        joins = [asyncio.create_task(again.join("g", classic_join(m))) for m in (a, b)]
        answers = await asyncio.gather(*joins)
        assert {r.generation_id for r in answers} == {3} and all(r.error == ErrorCode.NONE for r in answers)
        assert again.fetch_offsets("g", [TP])[1][TP].offset == 5
        # A classic member leaving a consumer group: LeaveGroup works on both.
        await again.leave("g", LeaveGroupRequest((LeavingMember(b),)))
    async with serving(replicas, clock) as third:
        d = third.describe("g")
        assert (d.group_type, third.fetch_offsets("g", [TP])[1][TP].offset) == ("classic", 5)


async def test_an_empty_consumer_group_becomes_a_classic_group_on_a_join(replicas: OffsetsReplicas) -> None:
    clock = ManualClock()
    async with serving(replicas, clock) as c:
        await c.consumer_heartbeat("g", join("m1"))
        assert await c.commit_offsets("g", "m1", None, 1, {TP: OffsetAndMetadata(3)}) == {TP: ErrorCode.NONE}
        assert (await c.consumer_heartbeat("g", ConsumerHeartbeatRequest("m1", -1))).member_epoch == -1
        classic = JoinGroupRequest(0, "", None, "c", "h", 10_000, 10_000, "consumer", (("range", b""),))
        r = await c.join("g", classic)
        assert r.error == ErrorCode.MEMBER_ID_REQUIRED  # the classic handshake: the group is classic now
        assert c.describe_consumer_group("g")[0] == ErrorCode.GROUP_ID_NOT_FOUND
        assert c.describe("g").group_type == "classic" and c.fetch_offsets("g", [TP])[1][TP].offset == 3
    async with serving(replicas, clock) as again:  # its records were removed: it loads as a classic group
        assert again.describe_consumer_group("g")[0] == ErrorCode.GROUP_ID_NOT_FOUND
        assert again.fetch_offsets("g", [TP])[1][TP].offset == 3


async def test_an_empty_consumer_group_without_offsets_is_deleted_by_retention(replicas: OffsetsReplicas) -> None:
    clock = ManualClock()
    async with serving(replicas, clock) as c:
        for group in ("kept", "gone"):
            await c.consumer_heartbeat(group, join("m1"))
            await c.consumer_heartbeat(group, ConsumerHeartbeatRequest("m1", -1))
        assert await c.commit_offsets("kept", "", None, -1, {TP: OffsetAndMetadata(1)}) == {TP: ErrorCode.NONE}
        await c.expire_offsets(c.partitions[0])
        assert c.describe_consumer_group("gone")[0] == ErrorCode.GROUP_ID_NOT_FOUND
        assert c.describe_consumer_group("kept")[0] == ErrorCode.NONE
    async with serving(replicas, clock) as again:
        assert again.describe_consumer_group("gone")[0] == ErrorCode.GROUP_ID_NOT_FOUND
        assert again.describe_consumer_group("kept")[0] == ErrorCode.NONE


async def describe(service: GroupService, group_id: str) -> DescribedConsumerGroup:
    (described,) = (await service.consumer_group_describe(ConsumerGroupDescribe((group_id,)), CALLER)).groups
    return described


async def test_the_service_checks_the_group_and_the_subscribed_topics_acls(replicas: OffsetsReplicas) -> None:
    """As Kafka's KafkaApis: group Read to heartbeat, Describe of each named topic; group Describe to describe, and
    Describe of every topic the group's members name or hold."""
    async with serving(replicas, ManualClock()) as c:
        bindings = {
            b"1": allow(ResourceType.GROUP, "g", AclOperation.READ),
            b"2": allow(ResourceType.TOPIC, "t", AclOperation.DESCRIBE),
        }
        service = GroupService(c, access=AccessControl(AuthorizerSettings(), lambda: bindings))
        r = await service.consumer_group_heartbeat(ConsumerGroupHeartbeat("h", join("m1")), CALLER)
        assert r.error == ErrorCode.GROUP_AUTHORIZATION_FAILED
        subscribed = join("m1", subscribed_topic_names=("t", "u"))
        r = await service.consumer_group_heartbeat(ConsumerGroupHeartbeat("g", subscribed), CALLER)
        assert r.error == ErrorCode.TOPIC_AUTHORIZATION_FAILED
        r = await service.consumer_group_heartbeat(ConsumerGroupHeartbeat("g", join("m1")), CALLER)
        assert (r.error, r.assignment) == (ErrorCode.NONE, frozenset({(DATA_ID, 0)}))
        assert (await describe(service, "h")).error == ErrorCode.GROUP_AUTHORIZATION_FAILED
        described = await describe(service, "g")  # Read implies Describe, as in Kafka
        assert described.error == ErrorCode.NONE and described.topic_names[DATA_ID] == "t"
        bindings = {b"1": bindings[b"1"]}  # a new set of bindings (the authorizer caches per set)
        assert (await describe(service, "g")).error == ErrorCode.TOPIC_AUTHORIZATION_FAILED


async def test_a_regular_expression_resolves_to_the_topics_the_member_may_describe(replicas: OffsetsReplicas) -> None:
    """Kafka 4's rule: with an authorizer, the topics a regular expression matches are those the heartbeat's
    principal may describe; an ACL change (a new metadata image) is taken at the next heartbeat."""
    async with serving(replicas, ManualClock()) as c:
        bindings = {
            b"1": allow(ResourceType.GROUP, "g", AclOperation.READ),
            b"2": allow(ResourceType.TOPIC, "t", AclOperation.DESCRIBE),
        }
        service = GroupService(c, access=AccessControl(AuthorizerSettings(), lambda: bindings))
        regex = join("m1", subscribed_topic_names=None, subscribed_topic_regex="t|u")
        r = await service.consumer_group_heartbeat(ConsumerGroupHeartbeat("g", regex), CALLER)
        assert (r.error, r.assignment) == (ErrorCode.NONE, frozenset({(DATA_ID, 0)}))  # u is left out
        bindings = {**bindings, b"3": allow(ResourceType.TOPIC, "u", AclOperation.DESCRIBE)}
        replicas.image = dataclasses.replace(replicas.image, acls=dict(replicas.image.acls), offset=99)
        r = await service.consumer_group_heartbeat(
            ConsumerGroupHeartbeat("g", ConsumerHeartbeatRequest("m1", 1)), CALLER
        )
        assert (r.error, r.member_epoch) == (ErrorCode.NONE, 2)
        r = await service.consumer_group_heartbeat(
            ConsumerGroupHeartbeat("g", ConsumerHeartbeatRequest("m1", 2)), CALLER
        )
        _, _, description = c.describe_consumer_group("g")
        assert description is not None
        assert description.members[0].target_assignment == frozenset({(DATA_ID, 0), (OTHER_ID, 0)})
    async with serving(replicas, ManualClock()) as again:  # the resolution is stored
        group = again.partitions[0].shard.consumer_groups["g"]
        assert group.regex_topics("t|u") == frozenset({"t", "u"})


async def test_the_configured_assignors_and_their_order(replicas: OffsetsReplicas) -> None:
    """group.consumer.assignors: the first is the group's default; an assignor not configured is refused."""
    settings = ConsumerGroupConfig(assignors=("range",))
    async with serving(replicas, ManualClock(), consumer_group=settings) as c:
        assert (await c.consumer_heartbeat("g", join("m1"))).error == ErrorCode.NONE
        error, _, description = c.describe_consumer_group("g")
        assert error == ErrorCode.NONE and description is not None and description.assignor_name == "range"
        r = await c.consumer_heartbeat("g", join("m2", server_assignor="uniform"))
        assert r.error == ErrorCode.UNSUPPORTED_ASSIGNOR

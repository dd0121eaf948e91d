"""The group APIs on the Kafka listener (broker/kafka/group_apis.py): each served version's request, encoded by
kafka-python, reaches the group service as its typed request, with the connection's ``RequestContext``, and the
service's typed answer comes back in kafka-python's decoding of that version. The service is a recorder with chosen
answers: what is tested is the translation only (the coordinator's rules have their own tests)."""

from __future__ import annotations

from typing import Any

import pytest
from kafka.protocol.admin.groups import (
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    ListGroupsRequest,
    ListGroupsResponse,
)
from kafka.protocol.consumer.group import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse
from kafka_harness import Recorder

from odradek.broker.groups import messages as core
from odradek.broker.groups.requests import (
    GROUP_KEY,
    TRANSACTION_KEY,
    Coordinator,
    DeletedGroup,
    DeleteGroupsAnswer,
    DescribedGroup,
    DescribedMember,
    DescribeGroupsAnswer,
    FetchedPartition,
    FetchedTopic,
    FindCoordinator,
    FindCoordinatorAnswer,
    ListedGroup,
    ListGroupsAnswer,
    OffsetCommit,
    OffsetCommitAnswer,
    OffsetDelete,
    OffsetDeleteAnswer,
    OffsetFetch,
    OffsetFetchAnswer,
    PartitionError,
    TopicErrors,
)
from odradek.broker.kafka import group_apis
from odradek.broker.kafka.apis import ApiRegistry
from odradek.broker.kafka.backend import KafkaBackend
from odradek.broker.kafka.wire import ConnectionInfo, KafkaContext, RequestHeader
from odradek.client.common.request_context import KAFKA, RequestContext
from odradek.client.errors import ErrorCode

CTX = KafkaContext(ConnectionInfo(1, "KAFKA", "10.0.0.5", 5555), "app-7")
SENT_BY = RequestContext("User:ANONYMOUS", "app-7", "ipv4:10.0.0.5:5555", KAFKA)
# Kafka-listener addresses; the service answers the gRPC ones (port 9092), which must never reach a Kafka client.
KAFKA_ENDPOINTS = {1: ("b1.kafka", 9192), 2: ("b2.kafka", 9193)}


def registry_with(groups: Recorder) -> ApiRegistry:
    backend = KafkaBackend(
        broker_id=1,
        cluster_id="c",
        listener="KAFKA",
        image=lambda: None,  # type: ignore[arg-type,return-value]
        controller_id=lambda: 1,
        endpoint=KAFKA_ENDPOINTS.get,
        data=None,  # type: ignore[arg-type]
        groups=groups,  # type: ignore[arg-type]
        transactions=None,  # type: ignore[arg-type]
        admin=None,  # type: ignore[arg-type]
    )
    registry = ApiRegistry()
    group_apis.register(registry, backend)
    return registry


async def roundtrip(registry: ApiRegistry, request: Any, response_cls: Any, version: int, throttle_ms: int = 0) -> Any:
    """Encode ``request`` at ``version`` with kafka-python, serve it, and decode the reply's bytes likewise."""
    found = registry.get(request.API_KEY)
    assert found is not None
    spec, handler = found
    assert spec.serves(version)
    body = bytes(request.encode(version=version))
    header = RequestHeader(request.API_KEY, version, 42, CTX.client_id, 0)
    reply = await handler(CTX, header, memoryview(body))
    assert reply is not None
    return response_cls.decode(b"".join(bytes(c) for c in reply.encode(throttle_ms)), version=version)  # type: ignore[arg-type]


def test_served_versions() -> None:
    registry = registry_with(Recorder())
    served = {spec.name: (spec.min_version, spec.max_version) for spec in registry.specs()}
    assert served == {
        "FindCoordinator": (0, 5),
        "JoinGroup": (4, 9),
        "SyncGroup": (0, 5),
        "Heartbeat": (0, 4),
        "LeaveGroup": (0, 5),
        "OffsetCommit": (2, 9),
        "OffsetFetch": (1, 9),
        "OffsetDelete": (0, 0),
        "DescribeGroups": (0, 5),
        "ListGroups": (0, 5),
        "DeleteGroups": (0, 2),
    }
    flexible = {spec.name: spec.flexible_from for spec in registry.specs()}
    assert flexible["JoinGroup"] == 6 and flexible["OffsetFetch"] == 6 and flexible["FindCoordinator"] == 3


# ---- FindCoordinator ----


def _coordinators(request: FindCoordinator) -> FindCoordinatorAnswer:
    """The service's answers with gRPC addresses: node 1 and 2 lead, node 3 has no Kafka listener, "bad" errs."""
    out = []
    for key in request.keys:
        if key == "bad":
            out.append(Coordinator(key, ErrorCode.INVALID_GROUP_ID, error_message="no"))
        else:
            node = {"g1": 1, "g2": 2, "g3": 3}[key]
            out.append(Coordinator(key, node_id=node, host=f"grpc{node}", port=9092))
    return FindCoordinatorAnswer(tuple(out))


@pytest.mark.parametrize("version", range(0, 4))
async def test_find_coordinator_single_key_answers_the_kafka_listener(version: int) -> None:
    groups = Recorder(find_coordinator=_coordinators)
    registry = registry_with(groups)
    kwargs = {"key_type": 1} if version >= 1 else {}
    r = await roundtrip(registry, FindCoordinatorRequest(key="g2", **kwargs), FindCoordinatorResponse, version, 30)
    (sent,) = groups.requests("find_coordinator")
    assert list(sent.keys) == ["g2"]
    assert sent.key_type == (TRANSACTION_KEY if version >= 1 else GROUP_KEY)
    assert (r.error_code, r.node_id, r.host, r.port) == (0, 2, "b2.kafka", 9193)
    if version >= 1:
        assert r.throttle_time_ms == 30 and r.error_message is None

    r = await roundtrip(registry, FindCoordinatorRequest(key="g3"), FindCoordinatorResponse, version)
    assert (r.error_code, r.node_id, r.host, r.port) == (ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, "", -1)
    r = await roundtrip(registry, FindCoordinatorRequest(key="bad"), FindCoordinatorResponse, version)
    assert (r.error_code, r.node_id, r.host, r.port) == (ErrorCode.INVALID_GROUP_ID, -1, "", -1)
    if version >= 1:
        assert r.error_message == "no"


@pytest.mark.parametrize("version", [4, 5])
async def test_find_coordinator_batched(version: int) -> None:
    groups = Recorder(find_coordinator=_coordinators)
    registry = registry_with(groups)
    request = FindCoordinatorRequest(key_type=0, coordinator_keys=["g1", "g3", "bad", "g2"])
    r = await roundtrip(registry, request, FindCoordinatorResponse, version)
    (sent,) = groups.requests("find_coordinator")
    assert list(sent.keys) == ["g1", "g3", "bad", "g2"] and sent.key_type == GROUP_KEY
    got = [(c.key, c.error_code, c.node_id, c.host, c.port) for c in r.coordinators]
    assert got == [
        ("g1", 0, 1, "b1.kafka", 9192),
        ("g3", ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, "", -1),
        ("bad", ErrorCode.INVALID_GROUP_ID, -1, "", -1),
        ("g2", 0, 2, "b2.kafka", 9193),
    ]
    assert r.coordinators[0].error_message is None and "Kafka listener" in r.coordinators[1].error_message


# ---- JoinGroup, SyncGroup, Heartbeat, LeaveGroup ----

SUBSCRIPTION = b"\x00\x01\x00\x00\x00\x01\x00\x03top\xff\xff\xff\xff\x00"


@pytest.mark.parametrize("version", range(4, 10))
async def test_join_group(version: int) -> None:
    answer = core.JoinGroupResponse(
        ErrorCode.NONE,
        generation_id=3,
        protocol_type="consumer",
        protocol_name="range",
        leader="m-1",
        skip_assignment=True,
        member_id="m-1",
        members=(core.JoinGroupMember("m-1", "i-1", SUBSCRIPTION), core.JoinGroupMember("m-2", None, b"\x00\x07")),
    )
    groups = Recorder(join_group=answer)
    registry = registry_with(groups)
    Protocol = JoinGroupRequest.JoinGroupRequestProtocol
    request = JoinGroupRequest(
        group_id="g",
        session_timeout_ms=10_000,
        rebalance_timeout_ms=20_000,
        member_id="m-1",
        group_instance_id="i-1",
        protocol_type="consumer",
        protocols=[Protocol(name="range", metadata=SUBSCRIPTION), Protocol(name="sticky", metadata=b"")],
        reason="restart",
    )
    r = await roundtrip(registry, request, JoinGroupResponse, version)
    ((_, sent, context),) = groups.calls
    assert (sent.group_id, sent.session_timeout_ms, sent.rebalance_timeout_ms, sent.member_id) == (
        "g",
        10_000,
        20_000,
        "m-1",
    )
    assert sent.protocol_type == "consumer" and sent.client_id == "app-7"
    assert list(sent.protocols) == [("range", SUBSCRIPTION), ("sticky", b"")]
    assert sent.group_instance_id == ("i-1" if version >= 5 else None)
    assert sent.reason == ("restart" if version >= 8 else "")
    assert context == SENT_BY

    assert (r.error_code, r.generation_id, r.protocol_name, r.leader, r.member_id) == (0, 3, "range", "m-1", "m-1")
    assert [(m.member_id, m.metadata) for m in r.members] == [("m-1", SUBSCRIPTION), ("m-2", b"\x00\x07")]
    if version >= 5:
        assert [m.group_instance_id for m in r.members] == ["i-1", None]
    if version >= 7:
        assert r.protocol_type == "consumer"
    if version >= 9:
        assert r.skip_assignment is True


@pytest.mark.parametrize("version", range(4, 10))
async def test_join_group_member_id_required(version: int) -> None:
    """KIP-394: a new member's first join answers its id with MEMBER_ID_REQUIRED; null names where nullable."""
    answer = core.JoinGroupResponse(ErrorCode.MEMBER_ID_REQUIRED, generation_id=-1, member_id="app-7-abc")
    groups = Recorder(join_group=answer)
    request = JoinGroupRequest(
        group_id="g", session_timeout_ms=10_000, rebalance_timeout_ms=-1, member_id="", protocol_type="consumer"
    )
    r = await roundtrip(registry_with(groups), request, JoinGroupResponse, version)
    (sent,) = groups.requests("join_group")
    assert sent.member_id == "" and sent.group_instance_id is None and sent.reason == ""
    assert (r.error_code, r.generation_id, r.member_id, r.members) == (
        ErrorCode.MEMBER_ID_REQUIRED,
        -1,
        "app-7-abc",
        [],
    )
    assert r.protocol_name == ("" if version < 7 else None)
    if version >= 7:
        assert r.protocol_type is None


@pytest.mark.parametrize("version", range(0, 6))
async def test_sync_group(version: int) -> None:
    answer = core.SyncGroupResponse(
        ErrorCode.NONE, protocol_type="consumer", protocol_name="range", assignment=b"\x00\x01assign"
    )
    groups = Recorder(sync_group=answer)
    Assignment = SyncGroupRequest.SyncGroupRequestAssignment
    request = SyncGroupRequest(
        group_id="g",
        generation_id=3,
        member_id="m-1",
        group_instance_id="i-1",
        protocol_type="consumer",
        protocol_name="range",
        assignments=[Assignment(member_id="m-1", assignment=b"\x01"), Assignment(member_id="m-2", assignment=b"")],
    )
    r = await roundtrip(registry_with(groups), request, SyncGroupResponse, version)
    (sent,) = groups.requests("sync_group")
    assert (sent.group_id, sent.generation_id, sent.member_id) == ("g", 3, "m-1")
    assert list(sent.assignments) == [("m-1", b"\x01"), ("m-2", b"")]
    assert sent.group_instance_id == ("i-1" if version >= 3 else None)
    assert (sent.protocol_type, sent.protocol_name) == (("consumer", "range") if version >= 5 else (None, None))
    assert (r.error_code, r.assignment) == (0, b"\x00\x01assign")
    if version >= 5:
        assert (r.protocol_type, r.protocol_name) == ("consumer", "range")


async def test_sync_group_error_nulls_the_protocol() -> None:
    groups = Recorder(sync_group=core.SyncGroupResponse(ErrorCode.REBALANCE_IN_PROGRESS))
    request = SyncGroupRequest(group_id="g", generation_id=3, member_id="m-1", assignments=[])
    r = await roundtrip(registry_with(groups), request, SyncGroupResponse, 5)
    assert (r.error_code, r.protocol_type, r.protocol_name, r.assignment) == (
        ErrorCode.REBALANCE_IN_PROGRESS,
        None,
        None,
        b"",
    )


@pytest.mark.parametrize("version", range(0, 5))
async def test_heartbeat(version: int) -> None:
    groups = Recorder(heartbeat=core.HeartbeatResponse(ErrorCode.REBALANCE_IN_PROGRESS))
    request = HeartbeatRequest(group_id="g", generation_id=4, member_id="m-1", group_instance_id="i-1")
    r = await roundtrip(registry_with(groups), request, HeartbeatResponse, version)
    (sent,) = groups.requests("heartbeat")
    assert (sent.group_id, sent.generation_id, sent.member_id) == ("g", 4, "m-1")
    assert sent.group_instance_id == ("i-1" if version >= 3 else None)
    assert r.error_code == ErrorCode.REBALANCE_IN_PROGRESS


@pytest.mark.parametrize("version", range(0, 3))
@pytest.mark.parametrize(
    ("top", "member", "expected"),
    [
        (ErrorCode.NONE, ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.UNKNOWN_MEMBER_ID),
        (ErrorCode.NOT_COORDINATOR, None, ErrorCode.NOT_COORDINATOR),
        (ErrorCode.NONE, ErrorCode.NONE, ErrorCode.NONE),
    ],
)
async def test_leave_group_single_member(version: int, top: int, member: int | None, expected: int) -> None:
    members = () if member is None else (core.LeftMember("m-1", None, member),)
    groups = Recorder(leave_group=core.LeaveGroupResponse(top, members))
    r = await roundtrip(
        registry_with(groups), LeaveGroupRequest(group_id="g", member_id="m-1"), LeaveGroupResponse, version
    )
    (sent,) = groups.requests("leave_group")
    assert sent.group_id == "g"
    assert [(m.member_id, m.group_instance_id, m.reason) for m in sent.members] == [("m-1", None, "")]
    assert r.error_code == expected


@pytest.mark.parametrize("version", range(3, 6))
async def test_leave_group_batched(version: int) -> None:
    answer = core.LeaveGroupResponse(
        ErrorCode.NONE,
        (core.LeftMember("m-1", None, ErrorCode.NONE), core.LeftMember("", "i-2", ErrorCode.UNKNOWN_MEMBER_ID)),
    )
    groups = Recorder(leave_group=answer)
    Identity = LeaveGroupRequest.MemberIdentity
    request = LeaveGroupRequest(
        group_id="g",
        members=[Identity(member_id="m-1", reason="bye"), Identity(member_id="", group_instance_id="i-2")],
    )
    r = await roundtrip(registry_with(groups), request, LeaveGroupResponse, version)
    (sent,) = groups.requests("leave_group")
    got = [(m.member_id, m.group_instance_id, m.reason) for m in sent.members]
    assert got == [("m-1", None, "bye" if version >= 5 else ""), ("", "i-2", "")]
    assert r.error_code == 0
    assert [(m.member_id, m.group_instance_id, m.error_code) for m in r.members] == [
        ("m-1", None, 0),
        ("", "i-2", ErrorCode.UNKNOWN_MEMBER_ID),
    ]


# ---- OffsetCommit, OffsetFetch ----


def _commit_request(retention_ms: int = -1) -> Any:
    Topic = OffsetCommitRequest.OffsetCommitRequestTopic
    Partition = Topic.OffsetCommitRequestPartition
    return OffsetCommitRequest(
        group_id="g",
        generation_id_or_member_epoch=5,
        member_id="m-1",
        group_instance_id="i-1",
        retention_time_ms=retention_ms,
        topics=[
            Topic(
                name="t",
                partitions=[
                    Partition(
                        partition_index=0, committed_offset=100, committed_leader_epoch=7, committed_metadata="md"
                    ),
                    Partition(
                        partition_index=1, committed_offset=5, committed_leader_epoch=-1, committed_metadata=None
                    ),
                ],
            ),
            Topic(name="u", partitions=[Partition(partition_index=2, committed_offset=0, committed_metadata="")]),
        ],
    )


@pytest.mark.parametrize("version", range(2, 10))
async def test_offset_commit(version: int) -> None:
    def answer(request: OffsetCommit) -> OffsetCommitAnswer:
        def error(p: int) -> int:
            return ErrorCode.OFFSET_METADATA_TOO_LARGE if p == 1 else ErrorCode.NONE

        return OffsetCommitAnswer(
            tuple(
                TopicErrors(t.name, tuple(PartitionError(p.partition, error(p.partition)) for p in t.partitions))
                for t in request.topics
            )
        )

    groups = Recorder(offset_commit=answer)
    r = await roundtrip(registry_with(groups), _commit_request(), OffsetCommitResponse, version)
    (sent,) = groups.requests("offset_commit")
    assert (sent.group_id, sent.generation_id, sent.member_id) == ("g", 5, "m-1")
    assert sent.group_instance_id == ("i-1" if version >= 7 else None)
    got = [
        (t.name, p.partition, p.committed_offset, p.committed_leader_epoch, p.committed_metadata)
        for t in sent.topics
        for p in t.partitions
    ]
    epoch = 7 if version >= 6 else -1
    assert got == [("t", 0, 100, epoch, "md"), ("t", 1, 5, -1, ""), ("u", 2, 0, -1, "")]
    assert [(t.name, [(p.partition_index, p.error_code) for p in t.partitions]) for t in r.topics] == [
        ("t", [(0, 0), (1, ErrorCode.OFFSET_METADATA_TOO_LARGE)]),
        ("u", [(2, 0)]),
    ]


@pytest.mark.parametrize("version", range(2, 5))
async def test_offset_commit_retention_time_is_refused(version: int) -> None:
    groups = Recorder(offset_commit=OffsetCommitAnswer(()))
    r = await roundtrip(registry_with(groups), _commit_request(retention_ms=60_000), OffsetCommitResponse, version)
    assert groups.calls == []
    assert [(t.name, [(p.partition_index, p.error_code) for p in t.partitions]) for t in r.topics] == [
        ("t", [(0, ErrorCode.INVALID_REQUEST), (1, ErrorCode.INVALID_REQUEST)]),
        ("u", [(2, ErrorCode.INVALID_REQUEST)]),
    ]


def _fetch_answer(request: OffsetFetch) -> OffsetFetchAnswer:
    if request.group_id == "gone":
        return OffsetFetchAnswer(ErrorCode.NOT_COORDINATOR)
    partitions = (
        FetchedPartition(0, 100, 7, "md"),
        FetchedPartition(1, -1, -1, error=ErrorCode.UNSTABLE_OFFSET_COMMIT),
    )
    return OffsetFetchAnswer(ErrorCode.NONE, (FetchedTopic("t", partitions),))


@pytest.mark.parametrize("version", range(1, 8))
async def test_offset_fetch(version: int) -> None:
    groups = Recorder(offset_fetch=_fetch_answer)
    registry = registry_with(groups)
    Topic = OffsetFetchRequest.OffsetFetchRequestTopic
    request = OffsetFetchRequest(group_id="g", topics=[Topic(name="t", partition_indexes=[0, 1])], require_stable=True)
    r = await roundtrip(registry, request, OffsetFetchResponse, version, throttle_ms=9)
    (sent,) = groups.requests("offset_fetch")
    assert (sent.group_id, sent.topics is None, sent.require_stable) == ("g", False, version >= 7)
    assert [(t.name, list(t.partitions)) for t in sent.topics] == [("t", [0, 1])]
    got = [
        (t.name, p.partition_index, p.committed_offset, p.metadata, p.error_code)
        for t in r.topics
        for p in t.partitions
    ]
    assert got == [("t", 0, 100, "md", 0), ("t", 1, -1, "", ErrorCode.UNSTABLE_OFFSET_COMMIT)]
    if version >= 5:
        assert [p.committed_leader_epoch for p in r.topics[0].partitions] == [7, -1]
    if version >= 2:
        assert r.error_code == 0
    if version >= 3:
        assert r.throttle_time_ms == 9

    # The group's error: top-level from v2, on every partition asked for in v1.
    request = OffsetFetchRequest(group_id="gone", topics=[Topic(name="t", partition_indexes=[3])])
    r = await roundtrip(registry, request, OffsetFetchResponse, version)
    if version >= 2:
        assert (r.error_code, r.topics) == (ErrorCode.NOT_COORDINATOR, [])
    else:
        assert [
            (t.name, p.partition_index, p.committed_offset, p.error_code) for t in r.topics for p in t.partitions
        ] == [("t", 3, -1, ErrorCode.NOT_COORDINATOR)]


@pytest.mark.parametrize("version", range(2, 8))
async def test_offset_fetch_all_topics(version: int) -> None:
    groups = Recorder(offset_fetch=_fetch_answer)
    r = await roundtrip(
        registry_with(groups), OffsetFetchRequest(group_id="g", topics=None), OffsetFetchResponse, version
    )
    (sent,) = groups.requests("offset_fetch")
    assert sent.topics is None
    assert [(t.name, len(t.partitions)) for t in r.topics] == [("t", 2)]


async def test_offset_fetch_v9_carries_the_members_id_and_epoch() -> None:
    groups = Recorder(offset_fetch=_fetch_answer)
    Group = OffsetFetchRequest.OffsetFetchRequestGroup
    request = OffsetFetchRequest(
        groups=[
            Group(group_id="g", member_id="m-1", member_epoch=4, topics=None),
            Group(group_id="h", member_id=None, member_epoch=-1, topics=None),
        ],
        require_stable=False,
    )
    await roundtrip(registry_with(groups), request, OffsetFetchResponse, 9)
    first, second = groups.requests("offset_fetch")
    assert (first.member_id, first.member_epoch) == ("m-1", 4)
    assert (second.member_id, second.member_epoch) == (None, -1)


async def test_offset_fetch_v8_many_groups() -> None:
    groups = Recorder(offset_fetch=_fetch_answer)
    Group = OffsetFetchRequest.OffsetFetchRequestGroup
    Topics = Group.OffsetFetchRequestTopics
    request = OffsetFetchRequest(
        groups=[
            Group(group_id="g", topics=[Topics(name="t", partition_indexes=[0, 1])]),
            Group(group_id="gone", topics=None),
        ],
        require_stable=True,
    )
    r = await roundtrip(registry_with(groups), request, OffsetFetchResponse, 8)
    first, second = groups.requests("offset_fetch")
    assert (first.group_id, first.topics is None, first.require_stable) == ("g", False, True)
    assert [(t.name, list(t.partitions)) for t in first.topics or ()] == [("t", [0, 1])]
    assert (second.group_id, second.topics) == ("gone", None)
    assert [(g.group_id, g.error_code) for g in r.groups] == [("g", 0), ("gone", ErrorCode.NOT_COORDINATOR)]
    got = [
        (t.name, p.partition_index, p.committed_offset, p.committed_leader_epoch, p.metadata, p.error_code)
        for t in r.groups[0].topics
        for p in t.partitions
    ]
    assert got == [("t", 0, 100, 7, "md", 0), ("t", 1, -1, -1, "", ErrorCode.UNSTABLE_OFFSET_COMMIT)]
    assert r.groups[1].topics == []


# ---- OffsetDelete ----


def _offset_delete_request() -> Any:
    Topic = OffsetDeleteRequest.OffsetDeleteRequestTopic
    Partition = Topic.OffsetDeleteRequestPartition
    return OffsetDeleteRequest(
        group_id="g",
        topics=[
            Topic(name="t", partitions=[Partition(partition_index=i) for i in (0, 1, 5)]),
            Topic(name="gone", partitions=[Partition(partition_index=0)]),
            Topic(name="secret", partitions=[Partition(partition_index=0)]),
        ],
    )


def _deleted(request: OffsetDelete) -> OffsetDeleteAnswer:
    """The service's answer: t-1 is subscribed to, t-5 and "gone" are not in the metadata, "secret" is refused by its
    ACL, everything else deleted."""
    errors = {
        ("t", 1): ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC,
        ("t", 5): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ("gone", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ("secret", 0): ErrorCode.TOPIC_AUTHORIZATION_FAILED,
    }
    return OffsetDeleteAnswer(
        ErrorCode.NONE,
        tuple(
            TopicErrors(t.name, tuple(PartitionError(p, errors.get((t.name, p), ErrorCode.NONE)) for p in t.partitions))
            for t in request.topics
        ),
    )


@pytest.mark.parametrize("version", range(0, 1))
async def test_offset_delete(version: int) -> None:
    """Every partition goes to the service, and each comes back with the service's error (its ACL and metadata
    checks are the service's)."""
    groups = Recorder(offset_delete=_deleted)
    registry = registry_with(groups)
    r = await roundtrip(registry, _offset_delete_request(), OffsetDeleteResponse, version, throttle_ms=30)
    ((_, sent, context),) = groups.calls
    assert sent.group_id == "g"
    assert [(t.name, list(t.partitions)) for t in sent.topics] == [("t", [0, 1, 5]), ("gone", [0]), ("secret", [0])]
    assert context == SENT_BY
    assert (r.error_code, r.throttle_time_ms) == (0, 30)
    got = {(t.name, p.partition_index): p.error_code for t in r.topics for p in t.partitions}
    assert got == {
        ("t", 0): ErrorCode.NONE,
        ("t", 1): ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC,
        ("t", 5): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ("gone", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ("secret", 0): ErrorCode.TOPIC_AUTHORIZATION_FAILED,
    }


@pytest.mark.parametrize("version", range(0, 1))
@pytest.mark.parametrize(
    "error",
    [
        ErrorCode.GROUP_ID_NOT_FOUND,
        ErrorCode.NON_EMPTY_GROUP,
        ErrorCode.GROUP_AUTHORIZATION_FAILED,
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.INVALID_GROUP_ID,
    ],
)
async def test_offset_delete_group_error_is_the_whole_answer(version: int, error: int) -> None:
    groups = Recorder(offset_delete=OffsetDeleteAnswer(error))
    registry = registry_with(groups)
    r = await roundtrip(registry, _offset_delete_request(), OffsetDeleteResponse, version)
    assert (r.error_code, r.topics) == (error, [])


# ---- DescribeGroups, ListGroups, DeleteGroups ----


@pytest.mark.parametrize("version", range(0, 6))
async def test_describe_groups(version: int) -> None:
    answer = DescribeGroupsAnswer(
        (
            DescribedGroup(
                group_id="g",
                group_state="Stable",
                protocol_type="consumer",
                protocol_data="range",
                generation_id=4,
                leader="m-1",
                members=(
                    DescribedMember(
                        member_id="m-1",
                        group_instance_id="i-1",
                        client_id="app-7",
                        client_host="10.0.0.5",
                        member_metadata=SUBSCRIPTION,
                        member_assignment=b"\x00\x01",
                    ),
                ),
            ),
            DescribedGroup("h", ErrorCode.NOT_COORDINATOR),
        )
    )
    groups = Recorder(describe_groups=answer)
    r = await roundtrip(
        registry_with(groups), DescribeGroupsRequest(groups=["g", "h"]), DescribeGroupsResponse, version
    )
    (sent,) = groups.requests("describe_groups")
    assert list(sent.groups) == ["g", "h"]
    g, h = r.groups
    assert (g.error_code, g.group_id, g.group_state, g.protocol_type, g.protocol_data) == (
        0,
        "g",
        "Stable",
        "consumer",
        "range",
    )
    (m,) = g.members
    assert (m.member_id, m.client_id, m.client_host, m.member_metadata, m.member_assignment) == (
        "m-1",
        "app-7",
        "10.0.0.5",
        SUBSCRIPTION,
        b"\x00\x01",
    )
    if version >= 4:
        assert m.group_instance_id == "i-1"
    assert (h.error_code, h.group_id, h.members) == (ErrorCode.NOT_COORDINATOR, "h", [])


@pytest.mark.parametrize("version", range(0, 6))
async def test_list_groups(version: int) -> None:
    answer = ListGroupsAnswer(
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        (
            ListedGroup(group_id="g", protocol_type="consumer", group_state="Empty", group_type="classic"),
            ListedGroup(group_id="h", protocol_type="consumer", group_state="Reconciling", group_type="consumer"),
        ),
    )
    groups = Recorder(list_groups=answer)
    request = ListGroupsRequest(states_filter=["Empty", "Stable"], types_filter=["Consumer"])
    r = await roundtrip(registry_with(groups), request, ListGroupsResponse, version)
    (sent,) = groups.requests("list_groups")
    assert list(sent.states_filter) == (["Empty", "Stable"] if version >= 4 else [])
    assert list(sent.types_filter) == (["Consumer"] if version >= 5 else [])
    assert r.error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    assert [(g.group_id, g.protocol_type) for g in r.groups] == [("g", "consumer"), ("h", "consumer")]
    if version >= 4:
        assert [g.group_state for g in r.groups] == ["Empty", "Reconciling"]
    if version >= 5:
        assert [g.group_type for g in r.groups] == ["classic", "consumer"]


@pytest.mark.parametrize("version", range(0, 3))
async def test_delete_groups(version: int) -> None:
    answer = DeleteGroupsAnswer((DeletedGroup("g", ErrorCode.NON_EMPTY_GROUP), DeletedGroup("h", ErrorCode.NONE)))
    groups = Recorder(delete_groups=answer)
    r = await roundtrip(
        registry_with(groups), DeleteGroupsRequest(groups_names=["g", "h"]), DeleteGroupsResponse, version
    )
    (sent,) = groups.requests("delete_groups")
    assert list(sent.groups) == ["g", "h"]
    assert [(g.group_id, g.error_code) for g in r.results] == [("g", ErrorCode.NON_EMPTY_GROUP), ("h", 0)]

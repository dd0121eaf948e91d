"""The group coordinator with real processes, driven through its gRPC API: the offsets topic created on first use,
one generation of two members, commits and fetches, typed errors that change nothing, and commits surviving a
SIGKILL of the coordinator broker. One 3-controller, 3-broker cluster for the module; the SIGKILL test runs last."""

from __future__ import annotations

import signal
from collections.abc import Iterator

import grpc
import pytest

from odradek.broker.groups.partitioner import offsets_partition_for
from odradek.client import Admin
from odradek.client.consumer.protocol import Subscription
from odradek.client.errors import ErrorCode
from odradek.deploy.local import DevCluster
from odradek.proto import broker_pb2 as pb
from odradek.proto import broker_pb2_grpc, group_pb2_grpc
from odradek.proto import group_pb2 as gpb

from .conftest import start_cluster, wait_for

pytestmark = pytest.mark.integration

SETTINGS = {
    "offsets.topic.num.partitions": 3,
    "group.initial.rebalance.delay.ms": 300,
    "group.min.session.timeout.ms": 1000,
    "group.max.size": 2,
    "offset.metadata.max.bytes": 64,
    "replica.lag.time.max.ms": 3000,
    "replica.fetch.wait.max.ms": 200,
}
SESSION_MS = 30_000
TOPIC = "events"
SUBSCRIPTION = Subscription((TOPIC,)).encode()


@pytest.fixture(scope="module")
def gcluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevCluster]:
    c = start_cluster(tmp_path_factory.mktemp("groups"), **SETTINGS)
    yield c
    c.stop_all(timeout=10)


@pytest.fixture(scope="module")
def brokers(gcluster: DevCluster) -> dict[int, str]:
    """Broker id -> address, from the brokers' own metadata."""
    first = gcluster.bootstrap_servers.split(",")[0]
    with grpc.insecure_channel(first) as channel:
        response = broker_pb2_grpc.BrokerStub(channel).Metadata(pb.MetadataRequest(), timeout=10)
    return {b.node_id: f"{b.host}:{b.port}" for b in response.brokers}


@pytest.fixture(scope="module")
def admin(gcluster: DevCluster) -> Iterator[Admin]:
    a = Admin({"bootstrap.servers": gcluster.admin_servers, "request.timeout.ms": 10000})
    a.create_topic(TOPIC, partitions=2, replication_factor=3)
    yield a
    a.close()


def stub(address: str) -> group_pb2_grpc.GroupCoordinatorStub:
    return group_pb2_grpc.GroupCoordinatorStub(grpc.insecure_channel(address))


def find(address: str, group: str) -> gpb.Coordinator:
    return stub(address).FindCoordinator(gpb.FindCoordinatorRequest(keys=[group]), timeout=10).coordinators[0]


def coordinator(brokers: dict[int, str], group: str) -> tuple[int, group_pb2_grpc.GroupCoordinatorStub]:
    """The group's coordinator once it is found and has loaded its partition."""

    def found():
        for address in brokers.values():
            try:
                c = find(address, group)
            except grpc.RpcError:
                continue
            if c.error == ErrorCode.NONE:
                s = stub(f"{c.host}:{c.port}")
                listed = s.ListGroups(gpb.ListGroupsRequest(), timeout=10)
                if listed.error == ErrorCode.NONE:
                    return c.node_id, s
        return None

    return wait_for(found, 60, 0.2, f"the coordinator of {group}")


def join(s, group: str, member_id: str = "", **kw) -> grpc.Future:
    request = gpb.JoinGroupRequest(
        group_id=group,
        session_timeout_ms=kw.pop("session_timeout_ms", SESSION_MS),
        rebalance_timeout_ms=SESSION_MS,
        member_id=member_id,
        protocol_type=kw.pop("protocol_type", "consumer"),
        protocols=[gpb.JoinGroupProtocol(name="range", metadata=SUBSCRIPTION)],
        client_id=kw.pop("client_id", "c"),
    )
    return s.JoinGroup.future(request, timeout=30)


def describe(s, group: str) -> gpb.DescribedGroup:
    return s.DescribeGroups(gpb.DescribeGroupsRequest(groups=[group]), timeout=10).groups[0]


def commit(s, group: str, offset: int, generation: int = -1, member: str = "", metadata: str = "") -> int:
    request = gpb.OffsetCommitRequest(
        group_id=group,
        generation_id=generation,
        member_id=member,
        topics=[
            gpb.OffsetCommitTopic(
                name=TOPIC,
                partitions=[
                    gpb.OffsetCommitPartition(
                        partition=0, committed_offset=offset, committed_leader_epoch=-1, committed_metadata=metadata
                    )
                ],
            )
        ],
    )
    return s.OffsetCommit(request, timeout=15).topics[0].partitions[0].error


def fetched(s, group: str) -> int:
    request = gpb.OffsetFetchRequest(group_id=group, topics=[gpb.OffsetFetchTopic(name=TOPIC, partitions=[0])])
    response = s.OffsetFetch(request, timeout=10)
    assert response.error == ErrorCode.NONE
    return response.topics[0].partitions[0].committed_offset


GROUP = "g1"
STATE: dict[str, object] = {}  # the generation formed in the round trip, for the tests after it


def test_find_coordinator_creates_the_offsets_topic_and_names_its_leader(brokers, admin) -> None:
    first = next(iter(brokers.values()))
    assert find(first, GROUP).error == ErrorCode.COORDINATOR_NOT_AVAILABLE  # first use: being created
    node, _ = coordinator(brokers, GROUP)
    topic = admin.describe_topic("__consumer_offsets")
    assert len(topic.partitions) == 3
    assert all(len(p.replicas) == 3 for p in topic.partitions)
    for address in brokers.values():  # every broker names the same coordinator
        assert find(address, GROUP).node_id == node
    # A transactional id's coordinator leads its partition of another internal topic, created on first use too.
    request = gpb.FindCoordinatorRequest(key_type=gpb.TRANSACTION, keys=["tx"])
    assert stub(first).FindCoordinator(request, timeout=10).coordinators[0].error == ErrorCode.COORDINATOR_NOT_AVAILABLE
    found = wait_for(
        lambda: (c := stub(first).FindCoordinator(request, timeout=10).coordinators[0]).error == ErrorCode.NONE and c,
        30,
        what="the transaction coordinator",
    )
    assert found.node_id in brokers and len(admin.describe_topic("__transaction_state").partitions) > 0
    empty = stub(first).FindCoordinator(gpb.FindCoordinatorRequest(key_type=gpb.TRANSACTION, keys=[""]), timeout=10)
    assert empty.coordinators[0].error == ErrorCode.INVALID_REQUEST


def test_two_members_form_one_generation_and_get_the_leaders_assignment(brokers, admin) -> None:
    _, s = coordinator(brokers, GROUP)
    ids = []
    for client in ("a", "b"):
        r = join(s, GROUP, client_id=client).result()
        assert r.error == ErrorCode.MEMBER_ID_REQUIRED and r.member_id.startswith(f"{client}-")
        ids.append(r.member_id)
    answers = [f.result() for f in [join(s, GROUP, ids[0], client_id="a"), join(s, GROUP, ids[1], client_id="b")]]
    assert [a.error for a in answers] == [ErrorCode.NONE, ErrorCode.NONE]
    assert answers[0].generation_id == answers[1].generation_id == 1
    leader = answers[0].leader
    assert leader == answers[1].leader and leader in ids
    leader_answer = next(a for a in answers if a.member_id == leader)
    assert sorted(m.member_id for m in leader_answer.members) == sorted(ids)
    assignments = {ids[0]: b"to-a", ids[1]: b"to-b"}
    syncs = {}
    for member in sorted(ids, key=lambda m: m != leader):  # the follower's sync waits for the leader's
        request = gpb.SyncGroupRequest(group_id=GROUP, generation_id=1, member_id=member, protocol_type="consumer")
        if member == leader:
            request.assignments.extend(
                gpb.SyncGroupAssignment(member_id=m, assignment=a) for m, a in assignments.items()
            )
        syncs[member] = s.SyncGroup.future(request, timeout=30)
    for member, future in syncs.items():
        r = future.result()
        assert (r.error, r.assignment, r.protocol_name) == (ErrorCode.NONE, assignments[member], "range")
    for member in ids:
        hb = s.Heartbeat(gpb.HeartbeatRequest(group_id=GROUP, generation_id=1, member_id=member), timeout=10)
        assert hb.error == ErrorCode.NONE
    d = describe(s, GROUP)
    assert (d.group_state, d.generation_id, d.leader, d.protocol_data) == ("Stable", 1, leader, "range")
    assert {m.member_id: m.member_assignment for m in d.members} == assignments
    assert all(m.client_host for m in d.members)
    STATE["members"] = ids


def test_commit_then_fetch(brokers) -> None:
    _, s = coordinator(brokers, GROUP)
    member = STATE["members"][0]
    assert commit(s, GROUP, 42, generation=1, member=member, metadata="m") == ErrorCode.NONE
    assert fetched(s, GROUP) == 42
    everything = s.OffsetFetch(gpb.OffsetFetchRequest(group_id=GROUP, all_topics=True), timeout=10)
    assert [
        (t.name, [(p.partition, p.committed_offset, p.metadata) for p in t.partitions]) for t in everything.topics
    ] == [(TOPIC, [(0, 42, "m")])]
    # a partition with no commit answers -1; an unknown topic is refused per partition
    assert fetched(coordinator(brokers, "nobody")[1], "nobody") == -1
    bad = gpb.OffsetCommitRequest(
        group_id=GROUP,
        generation_id=1,
        member_id=member,
        topics=[gpb.OffsetCommitTopic(name="missing", partitions=[gpb.OffsetCommitPartition(partition=0)])],
    )
    assert s.OffsetCommit(bad, timeout=10).topics[0].partitions[0].error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_bad_requests_get_typed_errors_and_change_nothing(brokers) -> None:
    _, s = coordinator(brokers, GROUP)
    member = STATE["members"][0]
    before = describe(s, GROUP)
    hb = s.Heartbeat(gpb.HeartbeatRequest(group_id=GROUP, generation_id=1, member_id="stranger"), timeout=10)
    assert hb.error == ErrorCode.UNKNOWN_MEMBER_ID
    assert commit(s, GROUP, 50, generation=0, member=member) == ErrorCode.ILLEGAL_GENERATION
    assert commit(s, GROUP, 50, generation=1, member="stranger") == ErrorCode.UNKNOWN_MEMBER_ID
    assert commit(s, GROUP, 50, generation=1, member=member, metadata="x" * 65) == ErrorCode.OFFSET_METADATA_TOO_LARGE
    assert join(s, GROUP, session_timeout_ms=10).result().error == ErrorCode.INVALID_SESSION_TIMEOUT
    inconsistent = join(s, GROUP, member, protocol_type="connect").result()  # a member of another kind
    assert inconsistent.error == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert join(s, GROUP).result().error == ErrorCode.GROUP_MAX_SIZE_REACHED  # group.max.size = 2
    assert s.JoinGroup(gpb.JoinGroupRequest(group_id=""), timeout=10).error == ErrorCode.INVALID_GROUP_ID
    assert describe(s, GROUP) == before
    assert fetched(s, GROUP) == 42
    deleted = s.DeleteGroups(gpb.DeleteGroupsRequest(groups=[GROUP]), timeout=10).results
    assert [(r.group_id, r.error) for r in deleted] == [(GROUP, ErrorCode.NON_EMPTY_GROUP)]
    _, elsewhere = coordinator(brokers, "nobody")
    deleted = elsewhere.DeleteGroups(gpb.DeleteGroupsRequest(groups=["nobody"]), timeout=10).results
    assert [(r.group_id, r.error) for r in deleted] == [("nobody", ErrorCode.GROUP_ID_NOT_FOUND)]
    listed = s.ListGroups(gpb.ListGroupsRequest(), timeout=10)
    assert (GROUP, "consumer", "Stable") in [(g.group_id, g.protocol_type, g.group_state) for g in listed.groups]


def test_other_brokers_are_not_the_coordinator_and_nobody_produces_to_the_offsets_topic(brokers) -> None:
    node, _ = coordinator(brokers, GROUP)
    for other, address in brokers.items():
        if other != node:
            hb = stub(address).Heartbeat(
                gpb.HeartbeatRequest(group_id=GROUP, generation_id=1, member_id="x"), timeout=10
            )
            assert hb.error == ErrorCode.NOT_COORDINATOR
    with grpc.insecure_channel(brokers[node]) as channel:
        request = pb.ProduceRequest(acks=-1, timeout_ms=5000)
        request.topics.add(name="__consumer_offsets").partitions.add(partition=0, records=b"")
        r = broker_pb2_grpc.BrokerStub(channel).Produce(request, timeout=10)
    assert r.topics[0].partitions[0].error == ErrorCode.INVALID_TOPIC_EXCEPTION


def test_sigkill_of_the_coordinator_loses_no_acknowledged_commit(gcluster, brokers) -> None:
    home = offsets_partition_for(GROUP, 3)
    simple = next(g for g in (f"simple-{i}" for i in range(100)) if offsets_partition_for(g, 3) == home)
    node, s = coordinator(brokers, simple)
    acknowledged = 0
    for offset in range(1, 21):  # a consumer using assign: generation -1, no member
        assert commit(s, simple, offset) == ErrorCode.NONE
        acknowledged = offset
    group_node, gs = coordinator(brokers, GROUP)
    assert group_node == node  # the same offsets partition: both move
    before = describe(gs, GROUP)
    gcluster.signal(node, signal.SIGKILL)
    survivors = {b: a for b, a in brokers.items() if b != node}
    new_node, s2 = coordinator(survivors, simple)
    assert new_node != node
    assert fetched(s2, simple) == acknowledged
    _, gs2 = coordinator(survivors, GROUP)  # the group moved too: restored Stable at its stored generation
    after = describe(gs2, GROUP)
    assert (after.group_state, after.generation_id, after.leader) == ("Stable", 1, before.leader)
    assert sorted(m.member_id for m in after.members) == sorted(m.member_id for m in before.members)
    assert fetched(gs2, GROUP) == 42
    assert commit(s2, simple, acknowledged + 1) == ErrorCode.NONE
    assert fetched(s2, simple) == acknowledged + 1

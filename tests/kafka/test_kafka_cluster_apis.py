"""Kafka's cluster-admin APIs on the Kafka listener (broker/kafka/cluster_apis.py) at every served version: log
dirs, leader elections, partition reassignments, the metadata quorum and paged topic descriptions. Reads of topics
go to the real Admin service over a real metadata image; the other calls go to recording stand-ins, so each test
checks the request handed to the service and the Kafka answer made of its reply."""

from __future__ import annotations

import uuid
from types import SimpleNamespace
from typing import Any

import pytest
from google.protobuf.message import Message
from kafka.protocol.admin.cluster import AlterReplicaLogDirsRequest, DescribeLogDirsRequest, DescribeQuorumRequest
from kafka.protocol.admin.topics import (
    AlterPartitionReassignmentsRequest,
    DescribeTopicPartitionsRequest,
    ElectLeadersRequest,
    ListPartitionReassignmentsRequest,
)
from kafka_harness import call, served
from recording_admin import RecordingAdmin

from odradek.broker.config import NodeConfig
from odradek.broker.describe_log_dirs import LogDirDescription, LogDirReplica, LogDirsAnswer
from odradek.broker.kafka import cluster_apis
from odradek.broker.kafka.apis import ApiRegistry
from odradek.broker.kafka.backend import KafkaBackend
from odradek.client.common.access import OPEN, AccessControl, AuthorizerSettings
from odradek.client.common.metadata_image import BrokerRegistration, MetadataImage, PartitionRegistration, TopicImage
from odradek.client.errors import ErrorCode
from odradek.proto import admin_pb2 as apb

T_ID, U_ID, O_ID = bytes(range(16)), bytes(range(1, 17)), bytes(range(2, 18))
KAFKA = {1: ("kafka-1", 9192), 2: ("kafka-2", 9193)}  # broker 3 has no Kafka address, 4 is fenced
DENY_ALL = AccessControl(AuthorizerSettings())
# Broker 2's config: the quorum's voters, and the name of the controllers' listener (Kafka's is upper case).
CONFIG = NodeConfig(
    {
        "process.roles": "broker",
        "node.id": 2,
        "controller.quorum.voters": "1@ctl-1:9093,2@ctl-2:9093,3@ctl-3:9094",
        "controller.listener.names": "controller",
        "listeners": "PLAINTEXT://0.0.0.0:9002,KAFKA://0.0.0.0:9193",
    }
)
ANONYMOUS_SUPER_USER = AccessControl(AuthorizerSettings(super_users=frozenset({"User:ANONYMOUS"})))


def image() -> MetadataImage:
    brokers = {
        b: BrokerRegistration(b, bytes([b]) * 16, 10 * b, f"grpc-{b}", 9000 + b, fenced=b == 4) for b in (1, 2, 3, 4)
    }
    t_parts = {
        # Being reassigned from [1, 2] to [2, 3]: 3 is added, 1 removed.
        0: PartitionRegistration(T_ID, 0, (2, 3, 1), (1, 2), 1, 4, 6, adding_replicas=(3,), removing_replicas=(1,)),
        1: PartitionRegistration(T_ID, 1, (2, 1), (2, 1), 2, 1, 1),
        2: PartitionRegistration(
            T_ID, 2, (3, 4), (3,), 3, 2, 2, eligible_leader_replicas=(4,), last_known_elr=(1,), last_known_leader=4
        ),
    }
    return MetadataImage(
        offset=40,
        brokers=brokers,
        topics={
            T_ID: TopicImage("t", T_ID, t_parts),
            U_ID: TopicImage("u", U_ID, {0: PartitionRegistration(U_ID, 0, (1,), (1,), 1, 0, 0)}),
            O_ID: TopicImage("__consumer_offsets", O_ID, {0: PartitionRegistration(O_ID, 0, (2,), (2,), 2, 0, 0)}),
        },
        topic_ids={"t": T_ID, "u": U_ID, "__consumer_offsets": O_ID},
    )


class RecordingReplicas:
    """The broker's replica service as the log-dir handlers see it: requests recorded, typed answers given."""

    def __init__(self, dirs: LogDirsAnswer | None = None, moves: dict[tuple[str, int], int] | None = None) -> None:
        self.dirs = dirs or LogDirsAnswer(2)
        self.moves = moves or {}
        self.asked: list[Any] = []

    async def describe_log_dirs(self, topics: list[str], ctx: Any) -> LogDirsAnswer:
        self.asked.append(list(topics))
        return self.dirs

    def alter_replica_log_dirs(self, destinations: dict[tuple[str, int], str], ctx: Any) -> tuple[int, dict]:
        self.asked.append(dict(destinations))
        return ErrorCode.NONE, {key: self.moves.get(key, ErrorCode.NONE) for key in destinations}


def setup(
    access: AccessControl = OPEN, replicas: RecordingReplicas | None = None, **answers: Message
) -> tuple[ApiRegistry, RecordingAdmin]:
    admin = RecordingAdmin(answers, image)
    backend: Any = KafkaBackend(
        broker_id=2,
        cluster_id="cluster-x",
        listener="KAFKA",
        image=image,
        controller_id=lambda: 9,
        endpoint=KAFKA.get,
        data=SimpleNamespace(replica_service=replicas or RecordingReplicas()),
        groups=None,  # type: ignore[arg-type]
        transactions=None,  # type: ignore[arg-type]
        admin=admin,  # type: ignore[arg-type]
        access=access,
        config=CONFIG,
    )
    r = ApiRegistry()
    cluster_apis.register(r, backend)
    return r, admin


def test_served_versions() -> None:
    reg, _ = setup()
    assert served(reg, DescribeLogDirsRequest) == range(1, 5)
    assert served(reg, AlterReplicaLogDirsRequest) == range(1, 3)
    assert served(reg, ElectLeadersRequest) == range(0, 3)
    assert served(reg, AlterPartitionReassignmentsRequest) == range(0, 2)
    assert served(reg, ListPartitionReassignmentsRequest) == range(0, 1)
    assert served(reg, DescribeQuorumRequest) == range(0, 3)
    assert served(reg, DescribeTopicPartitionsRequest) == range(0, 1)


# ---- log dirs ----


def replica(topic: str, partition: int, size: int, lag: int = 0, leader: bool = False, future: bool = False) -> Any:
    return LogDirReplica(topic, partition, size, lag, -1, leader, -1, "", future)


LOG_DIRS = LogDirsAnswer(
    2,
    (
        LogDirDescription(
            "/data/a",
            ErrorCode.NONE,
            1000,
            600,
            300,
            (replica("t", 0, 100, 0, leader=True), replica("t", 1, 150, -1), replica("u", 0, 50, 3)),
        ),
        LogDirDescription("/data/b", ErrorCode.KAFKA_STORAGE_ERROR),
    ),
)


def log_dirs(version: int, topics: list[tuple[str, list[int]]] | None) -> DescribeLogDirsRequest:
    t = DescribeLogDirsRequest.DescribableLogDirTopic
    chosen = None if topics is None else [t(topic=name, partitions=p) for name, p in topics]
    return DescribeLogDirsRequest(version=version, topics=chosen)


def replicas_of(result: Any) -> list[tuple[str, int, int, int]]:
    return [(t.name, p.partition_index, p.partition_size, p.offset_lag) for t in result.topics for p in t.partitions]


@pytest.mark.parametrize("version", range(1, 5))
async def test_describe_log_dirs(version: int) -> None:
    replicas = RecordingReplicas(LOG_DIRS)
    reg, _ = setup(replicas=replicas)
    r = await call(reg, log_dirs(version, None), version)
    assert replicas.asked[-1] == []  # every topic
    a, b = r.results
    assert (a.log_dir, a.error_code, b.log_dir, b.error_code) == ("/data/a", 0, "/data/b", 56)
    assert replicas_of(a) == [("t", 0, 100, 0), ("t", 1, 150, -1), ("u", 0, 50, 3)]
    assert not any(p.is_future_key for t in a.topics for p in t.partitions)
    if version >= 4:
        assert (a.total_bytes, a.usable_bytes, b.total_bytes, b.usable_bytes) == (1000, 600, -1, -1)
    if version >= 3:
        assert r.error_code == 0

    r = await call(reg, log_dirs(version, [("t", [1]), ("u", [7])]), version)
    assert replicas.asked[-1] == ["t", "u"]
    assert replicas_of(r.results[0]) == [("t", 1, 150, -1)]  # only the partitions asked

    r = await call(reg, log_dirs(version, []), version)
    assert [(d.log_dir, d.topics) for d in r.results] == [("/data/a", []), ("/data/b", [])]  # dirs, no replicas


@pytest.mark.parametrize("version", range(1, 5))
async def test_describe_log_dirs_refused(version: int) -> None:
    denied = LogDirsAnswer(2, error=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    reg, _ = setup(replicas=RecordingReplicas(denied))
    r = await call(reg, log_dirs(version, None), version)
    assert r.results == []
    if version >= 3:
        assert r.error_code == 31


@pytest.mark.parametrize("version", range(1, 5))
async def test_describe_log_dirs_marks_future_replicas(version: int) -> None:
    moving = LogDirsAnswer(
        2,
        (
            LogDirDescription("/data/a", replicas=(replica("t", 0, 90),)),
            LogDirDescription("/data/b", replicas=(replica("t", 0, 40, 12, future=True),)),
        ),
    )
    reg, _ = setup(replicas=RecordingReplicas(moving))
    r = await call(reg, log_dirs(version, None), version)
    futures = [(d.log_dir, p.is_future_key, p.offset_lag) for d in r.results for t in d.topics for p in t.partitions]
    assert futures == [("/data/a", False, 0), ("/data/b", True, 12)]


def alter_dirs(version: int, dirs: list[tuple[str, list[tuple[str, list[int]]]]]) -> AlterReplicaLogDirsRequest:
    d = AlterReplicaLogDirsRequest.AlterReplicaLogDir
    t = d.AlterReplicaLogDirTopic
    return AlterReplicaLogDirsRequest(
        version=version,
        dirs=[d(path=path, topics=[t(name=n, partitions=p) for n, p in topics]) for path, topics in dirs],
    )


@pytest.mark.parametrize("version", range(1, 3))
async def test_alter_replica_log_dirs(version: int) -> None:
    moves = {("t", 1): ErrorCode.REPLICA_NOT_AVAILABLE, ("u", 0): ErrorCode.LOG_DIR_NOT_FOUND}
    replicas = RecordingReplicas(moves=moves)
    reg, _ = setup(replicas=replicas)
    r = await call(reg, alter_dirs(version, [("/data/b", [("t", [0, 1])]), ("/nope", [("u", [0])])]), version)
    assert replicas.asked[-1] == {("t", 0): "/data/b", ("t", 1): "/data/b", ("u", 0): "/nope"}
    got = [(t.topic_name, p.partition_index, p.error_code) for t in r.results for p in t.partitions]
    assert got == [("t", 0, 0), ("t", 1, 9), ("u", 0, 57)]
    assert r.throttle_time_ms == 0


# ---- leader elections ----


def elect(version: int, topics: list[tuple[str, list[int]]] | None, election_type: int = 0) -> ElectLeadersRequest:
    t = ElectLeadersRequest.TopicPartitions
    chosen = None if topics is None else [t(topic=name, partitions=p) for name, p in topics]
    return ElectLeadersRequest(version=version, election_type=election_type, topic_partitions=chosen, timeout_ms=100)


def elections(r: Any) -> list[tuple[str, int, int, str | None]]:
    return [
        (t.topic, p.partition_id, p.error_code, p.error_message)
        for t in r.replica_election_results
        for p in t.partition_result
    ]


@pytest.mark.parametrize("version", range(0, 3))
async def test_elect_leaders(version: int) -> None:
    answer = apb.ElectLeadersResponse(
        results=[
            apb.ElectionResult(topic="t", partition=1, leader=2),
            apb.ElectionResult(topic="u", partition=0, error=ErrorCode.ELECTION_NOT_NEEDED, error_message="leads"),
            apb.ElectionResult(
                topic="t", partition=2, error=ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE, error_message="x"
            ),
        ]
    )
    reg, admin = setup(ElectLeaders=answer)
    r = await call(reg, elect(version, [("t", [1, 2]), ("u", [0])], election_type=1), version)
    sent = admin.requests["ElectLeaders"]
    assert isinstance(sent, apb.ElectLeadersRequest)
    # v0 has no election type: preferred.
    assert sent.election_type == (apb.UNCLEAN if version >= 1 else apb.PREFERRED)
    assert [(p.topic, p.partition) for p in sent.partitions] == [("t", 1), ("t", 2), ("u", 0)]
    assert elections(r) == [("t", 1, 0, None), ("t", 2, 80, "x"), ("u", 0, 84, "leads")]  # grouped by topic
    if version >= 1:
        assert r.error_code == 0

    await call(reg, elect(version, None), version)
    assert list(admin.requests["ElectLeaders"].partitions) == []  # null: every partition


@pytest.mark.parametrize("version", range(0, 3))
async def test_elect_leaders_top_level_error_is_every_partitions(version: int) -> None:
    reg, _ = setup(ElectLeaders=apb.ElectLeadersResponse(error=ErrorCode.CLUSTER_AUTHORIZATION_FAILED))
    r = await call(reg, elect(version, [("t", [0])]), version)
    assert [e[:3] for e in elections(r)] == [("t", 0, 31)]
    if version >= 1:
        assert r.error_code == 31
        r = await call(reg, elect(version, None), version)
        assert (r.error_code, r.replica_election_results) == (31, [])


async def test_elect_leaders_unknown_election_type() -> None:
    reg, admin = setup(ElectLeaders=apb.ElectLeadersResponse())
    r = await call(reg, elect(2, [("t", [0])], election_type=2), 2)
    assert r.error_code == 42 and [e[:3] for e in elections(r)] == [("t", 0, 42)]
    assert "ElectLeaders" not in admin.requests


async def test_elect_leaders_for_no_partition_asks_nothing_but_authorization() -> None:
    reg, admin = setup(ElectLeaders=apb.ElectLeadersResponse())
    r = await call(reg, elect(2, [("t", [])]), 2)
    assert (r.error_code, r.replica_election_results) == (0, [])
    assert "ElectLeaders" not in admin.requests  # gRPC's empty list would elect every partition
    reg, _ = setup(access=DENY_ALL)
    r = await call(reg, elect(2, []), 2)
    assert r.error_code == 31


# ---- partition reassignments ----


def reassign(version: int, targets: dict[tuple[str, int], list[int] | None], allow: bool = True) -> Any:
    t = AlterPartitionReassignmentsRequest.ReassignableTopic
    topics: dict[str, list[Any]] = {}
    for (name, index), replicas in targets.items():
        topics.setdefault(name, []).append(t.ReassignablePartition(partition_index=index, replicas=replicas))
    return AlterPartitionReassignmentsRequest(
        version=version,
        timeout_ms=100,
        allow_replication_factor_change=allow,
        topics=[t(name=name, partitions=p) for name, p in topics.items()],
    )


def reassignments(r: Any) -> list[tuple[str, int, int]]:
    return [(t.name, p.partition_index, p.error_code) for t in r.responses for p in t.partitions]


@pytest.mark.parametrize("version", range(0, 2))
async def test_alter_partition_reassignments(version: int) -> None:
    answer = apb.AlterPartitionReassignmentsResponse(
        results=[
            apb.ElectionResult(topic="t", partition=1, leader=2),
            apb.ElectionResult(topic="u", partition=0, error=ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, error_message="no"),
        ]
    )
    reg, admin = setup(AlterPartitionReassignments=answer)
    targets = {("t", 1): [2, 3], ("t", 2): [], ("u", 0): None, ("gone", 0): []}
    r = await call(reg, reassign(version, targets), version)
    sent = admin.requests["AlterPartitionReassignments"]
    assert isinstance(sent, apb.AlterPartitionReassignmentsRequest)
    # An empty target is refused here (gRPC's empty list cancels); a null one cancels.
    assert [(x.topic, x.partition, list(x.replicas)) for x in sent.reassignments] == [("t", 1, [2, 3]), ("u", 0, [])]
    assert reassignments(r) == [("t", 1, 0), ("t", 2, 39), ("u", 0, 85), ("gone", 0, 3)]
    assert r.error_code == 0 and r.error_message is None
    if version >= 1:
        assert r.allow_replication_factor_change


async def test_alter_partition_reassignments_may_forbid_a_replication_factor_change() -> None:
    answer = apb.AlterPartitionReassignmentsResponse(results=[apb.ElectionResult(topic="t", partition=1)])
    reg, admin = setup(AlterPartitionReassignments=answer)
    # t-0 is heading for [2, 3]: two replicas, whatever its list holds meanwhile.
    targets = {("t", 0): [1, 2, 3], ("t", 1): [3, 1], ("t", 2): [1]}
    r = await call(reg, reassign(1, targets, allow=False), 1)
    assert [(x.topic, x.partition) for x in admin.requests["AlterPartitionReassignments"].reassignments] == [("t", 1)]
    assert reassignments(r) == [("t", 0, 38), ("t", 1, 0), ("t", 2, 38)]
    assert r.responses[0].partitions[0].error_message == "The replication factor is changed from 2 to 3"
    assert r.allow_replication_factor_change is False


@pytest.mark.parametrize("version", range(0, 2))
async def test_alter_partition_reassignments_top_level_error(version: int) -> None:
    denied = apb.AlterPartitionReassignmentsResponse(error=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    reg, _ = setup(AlterPartitionReassignments=denied)
    r = await call(reg, reassign(version, {("t", 1): [1, 2], ("t", 2): []}), version)
    assert r.error_code == 31 and r.error_message
    assert reassignments(r) == [("t", 1, 31), ("t", 2, 31)]  # every partition, as Kafka's error answer
    reg, _ = setup(access=DENY_ALL)
    r = await call(reg, reassign(version, {("t", 2): []}), version)  # nothing for the service: checked here
    assert r.error_code == 31


async def test_list_partition_reassignments() -> None:
    reg, _ = setup()
    r = await call(reg, ListPartitionReassignmentsRequest(version=0, timeout_ms=100, topics=None), 0)
    assert r.error_code == 0
    [t] = r.topics
    [p] = t.partitions
    assert (t.name, p.partition_index, p.replicas, p.adding_replicas, p.removing_replicas) == (
        "t",
        0,
        [2, 3, 1],
        [3],
        [1],
    )
    asked = ListPartitionReassignmentsRequest.ListPartitionReassignmentsTopics
    request = ListPartitionReassignmentsRequest(
        version=0,
        timeout_ms=100,
        topics=[asked(name="u", partition_indexes=[0]), asked(name="t", partition_indexes=[1, 0, 9]), asked(name="x")],
    )
    r = await call(reg, request, 0)
    # Only partitions being reassigned; unknown topics and partitions are left out, as Kafka leaves them.
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in r.topics] == [("t", [0])]


async def test_list_partition_reassignments_needs_cluster_describe() -> None:
    reg, _ = setup(access=DENY_ALL)
    r = await call(reg, ListPartitionReassignmentsRequest(version=0, topics=None), 0)
    assert (r.error_code, r.topics) == (31, [])
    reg, _ = setup(access=ANONYMOUS_SUPER_USER)
    r = await call(reg, ListPartitionReassignmentsRequest(version=0, topics=None), 0)
    assert r.error_code == 0 and [t.name for t in r.topics] == ["t"]


# ---- the metadata quorum ----

QUORUM = apb.DescribeQuorumResponse(
    leader_id=1,
    leader_epoch=7,
    high_watermark=95,
    voters=[
        apb.ReplicaState(node_id=1, log_end_offset=100, last_fetch_timestamp_ms=5000, last_caught_up_timestamp_ms=5000),
        apb.ReplicaState(node_id=2, log_end_offset=100, last_fetch_timestamp_ms=4000, last_caught_up_timestamp_ms=3500),
        # No fetch from this leader yet: the controller knows no time (and one that does not report it, proto3's 0).
        apb.ReplicaState(node_id=3, log_end_offset=-1, last_fetch_timestamp_ms=-1, last_caught_up_timestamp_ms=0),
    ],
    observers=[
        apb.ReplicaState(node_id=4, log_end_offset=90, last_fetch_timestamp_ms=4500, last_caught_up_timestamp_ms=-1)
    ],
)


def quorum(version: int, topics: list[tuple[str, list[int]]]) -> DescribeQuorumRequest:
    t = DescribeQuorumRequest.TopicData
    return DescribeQuorumRequest(
        version=version,
        topics=[t(topic_name=name, partitions=[t.PartitionData(partition_index=i) for i in p]) for name, p in topics],
    )


@pytest.mark.parametrize("version", range(0, 3))
async def test_describe_quorum(version: int) -> None:
    reg, _ = setup(DescribeQuorum=QUORUM)
    r = await call(reg, quorum(version, [("__cluster_metadata", [0])]), version)
    assert r.error_code == 0
    [t] = r.topics
    [p] = t.partitions
    assert (t.topic_name, p.partition_index, p.error_code) == ("__cluster_metadata", 0, 0)
    assert (p.leader_id, p.leader_epoch, p.high_watermark) == (1, 7, 95)
    assert [(v.replica_id, v.log_end_offset) for v in p.current_voters] == [(1, 100), (2, 100), (3, -1)]
    assert [(o.replica_id, o.log_end_offset) for o in p.observers] == [(4, 90)]
    if version >= 1:
        # The controller's times; -1 where it knows none.
        times = [(v.last_fetch_timestamp, v.last_caught_up_timestamp) for v in p.current_voters + p.observers]
        assert times == [(5000, 5000), (4000, 3500), (-1, -1), (4500, -1)]
    if version >= 2:
        # A static quorum's voters: their controller.quorum.voters addresses on the controllers' listener.
        nodes = [(n.node_id, [(li.name, li.host, li.port) for li in n.listeners]) for n in r.nodes]
        assert nodes == [
            (1, [("CONTROLLER", "ctl-1", 9093)]),
            (2, [("CONTROLLER", "ctl-2", 9093)]),
            (3, [("CONTROLLER", "ctl-3", 9094)]),
        ]
        # Zero directory ids, as a static quorum's (kafka-python reads the zero UUID as None).
        assert {v.replica_directory_id for v in p.current_voters + p.observers} == {None}


@pytest.mark.parametrize("version", range(0, 3))
async def test_describe_quorum_of_another_partition_or_refused(version: int) -> None:
    reg, admin = setup(DescribeQuorum=QUORUM)
    r = await call(reg, quorum(version, [("t", [0, 1])]), version)
    assert r.error_code == 0
    assert [(t.topic_name, p.partition_index, p.error_code) for t in r.topics for p in t.partitions] == [
        ("t", 0, 3),
        ("t", 1, 3),
    ]
    assert "DescribeQuorum" not in admin.requests
    reg, _ = setup(DescribeQuorum=apb.DescribeQuorumResponse(error=ErrorCode.NOT_CONTROLLER))
    r = await call(reg, quorum(version, [("__cluster_metadata", [0])]), version)
    assert (r.error_code, r.topics) == (41, [])


# ---- paged topic descriptions ----


def describe_partitions(
    names: list[str], limit: int = 2000, cursor: tuple[str, int] | None = None
) -> DescribeTopicPartitionsRequest:
    c = DescribeTopicPartitionsRequest.Cursor
    return DescribeTopicPartitionsRequest(
        version=0,
        topics=[DescribeTopicPartitionsRequest.TopicRequest(name=n) for n in names],
        response_partition_limit=limit,
        cursor=None if cursor is None else c(topic_name=cursor[0], partition_index=cursor[1]),
    )


def pages(r: Any) -> list[tuple[str, int, list[int]]]:
    return [(t.name, t.error_code, [p.partition_index for p in t.partitions]) for t in r.topics]


def cursor_of(r: Any) -> tuple[str, int] | None:
    return None if r.next_cursor is None else (r.next_cursor.topic_name, r.next_cursor.partition_index)


async def test_describe_topic_partitions() -> None:
    reg, _ = setup()
    r = await call(reg, describe_partitions([]), 0)
    assert pages(r) == [("__consumer_offsets", 0, [0]), ("t", 0, [0, 1, 2]), ("u", 0, [0])]
    assert cursor_of(r) is None
    offsets, t, _ = r.topics
    assert offsets.is_internal and not t.is_internal
    assert t.topic_id == uuid.UUID(bytes=T_ID)
    p0, p1, p2 = t.partitions
    assert (p0.leader_id, p0.leader_epoch, p0.replica_nodes, p0.isr_nodes) == (1, 4, [2, 3, 1], [1, 2])
    assert p0.offline_replicas == [3]  # no Kafka address: offline for this listener's clients
    # Led by broker 3, which has no Kafka address: -1; fenced 4 is offline; the ELR and last known ELR as they are.
    assert (p2.leader_id, p2.offline_replicas, p2.eligible_leader_replicas, p2.last_known_elr) == (-1, [3, 4], [4], [1])
    assert p1.eligible_leader_replicas == [] and t.topic_authorized_operations == -2147483648


async def test_describe_topic_partitions_pages_from_a_cursor() -> None:
    reg, _ = setup()
    r = await call(reg, describe_partitions([], limit=2), 0)
    assert (pages(r), cursor_of(r)) == ([("__consumer_offsets", 0, [0]), ("t", 0, [0])], ("t", 1))
    r = await call(reg, describe_partitions([], limit=2, cursor=cursor_of(r)), 0)
    assert (pages(r), cursor_of(r)) == ([("t", 0, [1, 2])], ("u", 0))  # the limit reached at a topic's end
    r = await call(reg, describe_partitions([], limit=2, cursor=cursor_of(r)), 0)
    assert (pages(r), cursor_of(r)) == ([("u", 0, [0])], None)
    r = await call(reg, describe_partitions(["u", "t"], limit=5, cursor=("t", 2)), 0)
    assert (pages(r), cursor_of(r)) == ([("t", 0, [2]), ("u", 0, [0])], None)


async def test_describe_topic_partitions_named() -> None:
    reg, _ = setup()
    r = await call(reg, describe_partitions(["u", "nope", "bad name!", "t"]), 0)
    assert pages(r) == [("bad name!", 17, []), ("nope", 3, []), ("t", 0, [0, 1, 2]), ("u", 0, [0])]
    assert r.topics[1].topic_id is None  # the zero UUID, as kafka-python reads it
    r = await call(reg, describe_partitions(["u", "t"], cursor=("x", 0)), 0)
    assert pages(r) == [("u", 42, []), ("t", 42, [])]  # the cursor's topic must be one of those named


async def test_describe_topic_partitions_leaves_unauthorized_topics_for_last() -> None:
    answer = apb.DescribeTopicsResponse(
        topics=[
            apb.TopicDescription(name="a", error=ErrorCode.TOPIC_AUTHORIZATION_FAILED),
            apb.TopicDescription(name="u", topic_id=U_ID, partitions=[apb.PartitionDescription(partition=0, leader=1)]),
        ]
    )
    reg, admin = setup(DescribeTopics=answer)
    r = await call(reg, describe_partitions(["u", "a"], limit=1), 0)
    assert list(admin.requests["DescribeTopics"].names) == ["a", "u"]
    assert pages(r) == [("u", 0, [0]), ("a", 29, [])]

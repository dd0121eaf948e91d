"""Cluster health as a pure function, the admin calls behind the replication commands (against an in-process
fake Admin service), and the CLI's parsing and rendering of those commands."""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import grpc
import pytest

from odradek.client.admin import (
    AsyncAdmin,
    BrokerDescription,
    BrokerLogDirs,
    ClusterDescription,
    ElectionResult,
    LogDirInfo,
    LogDirReplicaInfo,
    PartitionInfo,
    ReassignmentResult,
    TopicInfo,
    uncleanable_replicas,
)
from odradek.client.cli import health as health_cli
from odradek.client.cli import leader as leader_cli
from odradek.client.cli import partition as partition_cli
from odradek.client.cli import topic as topic_cli
from odradek.client.cli.main import build_parser
from odradek.client.connection import channel_options
from odradek.client.errors import ErrorCode, OdradekError, UnknownTopicOrPartitionError
from odradek.client.health import VOTER_STALE_MS, compute_health, min_insync_replicas
from odradek.client.structs import TopicPartition
from odradek.proto import admin_pb2 as pb
from odradek.proto import admin_pb2_grpc

# ---- compute_health ----


def brokers(*ids: int, fenced: tuple[int, ...] = ()) -> ClusterDescription:
    return ClusterDescription(
        cluster_id="c",
        controller_leader=1,
        bootstrap_servers="",
        brokers=[BrokerDescription(i, "127.0.0.1", 9000 + i, "", i in fenced, 10) for i in ids],
    )


def part(partition: int, leader: int, replicas: list[int], isr: list[int]) -> PartitionInfo:
    return PartitionInfo(
        partition=partition,
        leader=leader,
        leader_epoch=0,
        replicas=replicas,
        isr=isr,
        log_start_offset=-1,
        high_watermark=-1,
        under_replicated=len(isr) < len(replicas),
    )


def topic(name: str, *partitions: PartitionInfo, **configs: str) -> TopicInfo:
    return TopicInfo(name, {k.replace("_", "."): v for k, v in configs.items()}, list(partitions))


def test_a_fully_replicated_cluster_is_healthy() -> None:
    h = compute_health(
        brokers(4, 5, 6), [topic("t", part(0, 4, [4, 5, 6], [4, 5, 6]), part(1, 5, [5, 6, 4], [5, 6, 4]))]
    )
    assert h.healthy
    assert h.to_dict() == {
        "healthy": True,
        "controller_id": 1,
        "unavailable_brokers": [],
        "leaderless_count": 0,
        "under_replicated_count": 0,
        "under_min_isr_count": 0,
        "offline_partitions": [],
        "under_replicated_partitions": [],
        "under_min_isr_partitions": [],
        "unavailable_controllers": [],
    }


def test_an_empty_cluster_with_a_controller_is_healthy() -> None:
    assert compute_health(brokers(4), []).healthy


def test_a_fenced_broker_makes_its_partitions_under_replicated() -> None:
    # After fencing, the controller has moved leadership off 6 and dropped it from every ISR.
    topics = [topic("t", part(1, 4, [6, 4, 5], [4, 5]), part(0, 4, [4, 5, 6], [4, 5]), part(2, 5, [5, 4], [5, 4]))]
    h = compute_health(brokers(4, 5, 6, fenced=(6,)), topics)
    assert not h.healthy
    assert h.unavailable_brokers == [6]
    assert h.under_replicated_partitions == [TopicPartition("t", 0), TopicPartition("t", 1)]
    assert h.offline_partitions == [] and h.leaderless_partitions == 0
    assert h.under_min_isr_partitions == []  # min.insync.replicas defaults to 1


def test_offline_means_no_leader_or_a_fenced_or_unknown_leader() -> None:
    topics = [
        topic("a", part(0, -1, [6], [6])),  # leaderless
        topic("b", part(0, 6, [6, 4], [6])),  # the controller has not moved it yet: leader fenced
        topic("c", part(0, 9, [9], [9])),  # leader not registered at all
    ]
    h = compute_health(brokers(4, 6, fenced=(6,)), topics)
    assert h.leaderless_partitions == 1
    assert h.offline_partitions == [TopicPartition("a", 0), TopicPartition("b", 0), TopicPartition("c", 0)]
    assert h.to_dict()["offline_partitions"] == [
        {"topic": "a", "partition": 0},
        {"topic": "b", "partition": 0},
        {"topic": "c", "partition": 0},
    ]
    assert not h.healthy


def test_under_min_isr_uses_the_topic_override_else_one() -> None:
    topics = [
        topic("strict", part(0, 4, [4, 5, 6], [4, 5]), part(1, 4, [4, 5, 6], [4, 5, 6]), min_insync_replicas="3"),
        topic("loose", part(0, 4, [4, 5, 6], [4])),
        topic("two", part(0, 4, [4, 5, 6], [4, 5]), min_insync_replicas="2"),
    ]
    h = compute_health(brokers(4, 5, 6), topics)
    assert h.under_min_isr_partitions == [TopicPartition("strict", 0)]
    assert h.to_dict()["under_min_isr_count"] == 1
    assert h.to_dict()["under_replicated_count"] == 3


def test_min_isr_above_the_replication_factor_is_reported_even_with_a_full_isr() -> None:
    h = compute_health(brokers(4), [topic("t", part(0, 4, [4], [4]), min_insync_replicas="2")])
    assert h.under_min_isr_partitions == [TopicPartition("t", 0)] and not h.under_replicated_partitions
    assert not h.healthy


@pytest.mark.parametrize(("value", "expected"), [(None, 1), ("2", 2), ("0", 1), ("junk", 1)])
def test_min_insync_replicas_parsing(value: str | None, expected: int) -> None:
    assert min_insync_replicas({} if value is None else {"min.insync.replicas": value}) == expected


def test_no_active_controller_is_unhealthy() -> None:
    cluster = brokers(4)
    no_controller = ClusterDescription(cluster.cluster_id, -1, "", cluster.brokers)
    h = compute_health(no_controller, [])
    assert not h.healthy and h.controller_id == -1


def test_partitions_are_sorted_by_topic_then_partition() -> None:
    topics = [topic("b", part(1, 4, [4, 5], [4]), part(0, 4, [4, 5], [4])), topic("a", part(3, 4, [4, 5], [4]))]
    h = compute_health(brokers(4, 5), topics)
    assert h.under_replicated_partitions == [TopicPartition("a", 3), TopicPartition("b", 0), TopicPartition("b", 1)]


# ---- AsyncAdmin against a fake Admin service ----


@dataclass
class FakeAdmin(admin_pb2_grpc.AdminServicer):
    """Answers from canned state; ``not_controller`` answers that many requests with NOT_CONTROLLER first."""

    not_controller: int = 0
    per_result_not_controller: bool = False
    elect_error: int = ErrorCode.NONE
    requests: list[Any] = field(default_factory=list)
    fenced: set[int] = field(default_factory=set)
    voter_fetch_age_ms: dict[int, int] = field(default_factory=lambda: {2: 100, 3: 100})

    async def DescribeQuorum(self, request, context):
        now = int(time.time() * 1000)
        voters = [pb.ReplicaState(node_id=1, log_end_offset=10, last_fetch_timestamp_ms=now)]
        voters += [
            pb.ReplicaState(node_id=n, log_end_offset=10, last_fetch_timestamp_ms=now - age)
            for n, age in self.voter_fetch_age_ms.items()
        ]
        return pb.DescribeQuorumResponse(leader_id=1, leader_epoch=3, high_watermark=10, voters=voters)

    def _redirect(self) -> bool:
        if self.not_controller > 0:
            self.not_controller -= 1
            return True
        return False

    async def DescribeCluster(self, request, context):
        return pb.DescribeClusterResponse(
            cluster_id="c",
            controller_id=1,
            brokers=[
                pb.BrokerInfo(node_id=i, host="127.0.0.1", port=1, fenced=i in self.fenced, epoch=i) for i in (4, 5, 6)
            ],
        )

    async def DescribeTopics(self, request, context):
        topics = {
            "t": pb.TopicDescription(
                name="t",
                configs=[pb.ConfigEntry(name="min.insync.replicas", value="3")],
                partitions=[
                    pb.PartitionDescription(partition=0, leader=4, replicas=[4, 5, 6], isr=[4, 5, 6]),
                    pb.PartitionDescription(
                        partition=1, leader=5, replicas=[5, 6, 4], isr=[5, 4], under_replicated=True
                    ),
                ],
            ),
            "__internal": pb.TopicDescription(
                name="__internal",
                is_internal=True,
                partitions=[pb.PartitionDescription(partition=0, leader=6, replicas=[6], isr=[6])],
            ),
        }
        if request.names:
            return pb.DescribeTopicsResponse(
                topics=[
                    topics.get(n)
                    or pb.TopicDescription(name=n, error=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, error_message="unknown")
                    for n in request.names
                ]
            )
        return pb.DescribeTopicsResponse(topics=list(topics.values()))

    async def ElectLeaders(self, request, context):
        self.requests.append(request)
        if self._redirect():
            if self.per_result_not_controller:
                return pb.ElectLeadersResponse(
                    results=[pb.ElectionResult(topic="t", partition=0, error=ErrorCode.NOT_CONTROLLER)]
                )
            return pb.ElectLeadersResponse(error=ErrorCode.NOT_CONTROLLER)
        if self.elect_error:
            return pb.ElectLeadersResponse(error=self.elect_error)
        refs = request.partitions or [pb.PartitionRef(topic="t", partition=p) for p in (1, 0)]
        return pb.ElectLeadersResponse(
            results=[
                pb.ElectionResult(
                    topic=r.topic,
                    partition=r.partition,
                    leader=4 if r.partition == 0 else 5,
                    error=ErrorCode.ELECTION_NOT_NEEDED if r.partition == 0 else ErrorCode.NONE,
                )
                for r in refs
            ]
        )

    async def AlterPartitionReassignments(self, request, context):
        self.requests.append(request)
        if self._redirect():
            return pb.AlterPartitionReassignmentsResponse(error=ErrorCode.NOT_CONTROLLER)
        return pb.AlterPartitionReassignmentsResponse(
            results=[
                pb.ElectionResult(
                    topic=r.topic,
                    partition=r.partition,
                    error=ErrorCode.NONE if r.replicas else ErrorCode.NO_REASSIGNMENT_IN_PROGRESS,
                    error_message="" if r.replicas else "nothing to cancel",
                )
                for r in request.reassignments
            ]
        )


@pytest.fixture
async def fake() -> AsyncIterator[tuple[FakeAdmin, AsyncAdmin]]:
    servicer = FakeAdmin()
    server = grpc.aio.server(options=channel_options())
    admin_pb2_grpc.add_AdminServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    admin = AsyncAdmin({"bootstrap.servers": f"127.0.0.1:{port}", "request.timeout.ms": 5000})
    yield servicer, admin
    await admin.close()
    await server.stop(None)


async def test_elect_leaders_retries_not_controller_and_reports_per_partition(fake) -> None:
    servicer, admin = fake
    servicer.not_controller = 2
    results = await admin.elect_leaders()
    assert len(servicer.requests) == 3
    assert servicer.requests[-1].election_type == pb.PREFERRED and not servicer.requests[-1].partitions
    assert results == [ElectionResult("t", 0, 4, "ELECTION_NOT_NEEDED"), ElectionResult("t", 1, 5, None)]
    assert results[0].to_dict() == {"topic": "t", "partition": 0, "leader": 4, "error": "ELECTION_NOT_NEEDED"}


async def test_elect_leaders_retries_when_every_result_is_not_controller(fake) -> None:
    servicer, admin = fake
    servicer.not_controller, servicer.per_result_not_controller = 1, True
    results = await admin.elect_leaders("unclean", [("t", 1)])
    assert len(servicer.requests) == 2 and servicer.requests[-1].election_type == pb.UNCLEAN
    assert [(r.partition, r.error) for r in results] == [(1, None)]


async def test_elect_leaders_whole_request_error_is_typed(fake) -> None:
    servicer, admin = fake
    servicer.elect_error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    with pytest.raises(UnknownTopicOrPartitionError):
        await admin.elect_leaders(partitions=[("nope", 0)])


async def test_elect_leaders_with_no_partitions_sends_nothing(fake) -> None:
    servicer, admin = fake
    assert await admin.elect_leaders(partitions=[]) == []  # [] on the wire would mean every partition
    assert servicer.requests == []
    with pytest.raises(ValueError):
        await admin.elect_leaders("sideways")


async def test_alter_partition_reassignments_sends_moves_and_cancels(fake) -> None:
    servicer, admin = fake
    servicer.not_controller = 1
    results = await admin.alter_partition_reassignments({("t", 1): [6, 4, 5], ("t", 0): None})
    sent = {(r.topic, r.partition): list(r.replicas) for r in servicer.requests[-1].reassignments}
    assert sent == {("t", 1): [6, 4, 5], ("t", 0): []}
    assert results == [
        ReassignmentResult("t", 0, "NO_REASSIGNMENT_IN_PROGRESS", "nothing to cancel"),
        ReassignmentResult("t", 1, None),
    ]


async def test_cluster_health_covers_internal_topics_and_fenced_brokers(fake) -> None:
    servicer, admin = fake
    servicer.fenced = {6}
    h = await admin.cluster_health()
    assert h.unavailable_brokers == [6]
    assert h.offline_partitions == [TopicPartition("__internal", 0)]
    assert h.under_replicated_partitions == [TopicPartition("t", 1)]
    assert h.under_min_isr_partitions == [TopicPartition("t", 1)]
    assert not h.healthy


async def test_a_controller_that_stopped_fetching_is_unavailable(fake) -> None:
    servicer, admin = fake
    servicer.fenced = set()
    h = await admin.cluster_health()
    assert h.unavailable_controllers == []
    servicer.voter_fetch_age_ms = {2: 100, 3: VOTER_STALE_MS + 2000}
    h = await admin.cluster_health()
    assert h.unavailable_controllers == [3] and not h.healthy
    assert h.to_dict()["unavailable_controllers"] == [3]


async def test_describe_topics_marks_offline_and_raises_for_unknown_names(fake) -> None:
    servicer, admin = fake
    servicer.fenced = {6}
    (internal,) = await admin.describe_topics(["__internal"])
    assert internal.partitions[0].offline and internal.partitions[0].high_watermark == -1
    with pytest.raises(UnknownTopicOrPartitionError):
        await admin.describe_topics(["missing"])


async def test_unimplemented_fails_at_once() -> None:
    server = grpc.aio.server()
    port = server.add_insecure_port("127.0.0.1:0")  # serves nothing: every method is UNIMPLEMENTED
    await server.start()
    try:
        async with AsyncAdmin({"bootstrap.servers": f"127.0.0.1:{port}", "request.timeout.ms": 30000}) as admin:
            with pytest.raises(OdradekError) as info:
                await admin.elect_leaders()
        assert info.value.code == ErrorCode.UNSUPPORTED_VERSION
    finally:
        await server.stop(None)


# ---- CLI parsing and rendering ----


def parse(*argv: str) -> argparse.Namespace:
    return build_parser(list(argv)).parse_args(list(argv))


def test_cli_parses_the_replication_commands() -> None:
    args = parse("cluster", "health", "--exit-code", "--format", "json")
    assert args.handler is health_cli._health and args.exit_code
    args = parse("leader", "elect", "--topic", "t", "-p", "0", "-p", "2", "--unclean")
    assert (args.topic, args.partition, args.unclean) == ("t", [0, 2], True)
    args = parse("partition", "reassign", "-t", "t", "-p", "1", "--replicas", "4, 5,6", "--wait", "--timeout", "5")
    assert (args.replicas, args.cancel, args.wait, args.timeout, args.timeout_ms) == ([4, 5, 6], False, True, 5, 15000)
    assert parse("partition", "reassign", "-t", "t", "-p", "1", "--cancel").replicas is None


@pytest.mark.parametrize(
    "argv",
    [
        ("partition", "reassign", "-t", "t", "-p", "1"),  # neither --replicas nor --cancel
        ("partition", "reassign", "-t", "t", "-p", "1", "--replicas", "4", "--cancel"),
        ("partition", "reassign", "-t", "t", "-p", "1", "--replicas", "4,x"),
        ("partition", "reassign", "-t", "t", "-p", "1", "--replicas", "4,4"),
        ("partition", "reassign", "-t", "t", "-p", "1", "--replicas", ","),
    ],
)
def test_cli_rejects_bad_reassignments(argv: tuple[str, ...]) -> None:
    with pytest.raises(SystemExit):
        parse(*argv)


def test_partition_flag_without_topic_is_a_one_line_error(capsys: pytest.CaptureFixture[str]) -> None:
    from odradek.client.cli.main import main

    assert main(["leader", "elect", "-p", "0", "-X", "127.0.0.1:1"]) == 1
    assert capsys.readouterr().err.strip() == "error: --partition needs --topic"


def test_health_report_renders_every_check() -> None:
    h = compute_health(brokers(4, 5, 6, fenced=(6,)), [topic("t", part(0, 4, [4, 6], [4]), part(1, -1, [6], [6]))])
    text = health_cli.render_health(h)
    assert "healthy: no" in text and "unavailable brokers: 6" in text
    assert "leaderless partitions: 1" in text
    assert "offline partitions (1): t-1" in text
    assert "under-replicated partitions (1): t-0" in text
    json.dumps(h.to_dict())  # JSON-serialisable as is


def test_leader_elect_counts_only_real_errors_as_failures() -> None:
    results = [
        ElectionResult("t", 0, 4, None),
        ElectionResult("t", 1, 5, "ELECTION_NOT_NEEDED"),
        ElectionResult("t", 2, -1, "PREFERRED_LEADER_NOT_AVAILABLE", "broker 6 is fenced"),
    ]
    assert leader_cli.failures(results) == [results[2]]
    text = leader_cli.render_elections(results)
    assert "elected" in text and "ELECTION_NOT_NEEDED" in text and "broker 6 is fenced" in text


async def test_leader_elect_resolves_a_topic_to_its_partitions(fake) -> None:
    servicer, admin = fake
    await leader_cli.elect(admin, "t", None, unclean=False)
    assert [(r.topic, r.partition) for r in servicer.requests[-1].partitions] == [("t", 0), ("t", 1)]
    await leader_cli.elect(admin, "t", [1], unclean=False)
    assert [(r.topic, r.partition) for r in servicer.requests[-1].partitions] == [("t", 1)]
    await leader_cli.elect(admin, None, None, unclean=True)
    assert not servicer.requests[-1].partitions and servicer.requests[-1].election_type == pb.UNCLEAN
    with pytest.raises(UnknownTopicOrPartitionError):
        await leader_cli.elect(admin, "missing", None, unclean=False)


def test_reassignment_is_settled_when_nothing_moves_and_the_target_is_reached() -> None:
    moving = PartitionInfo(0, 4, 1, [4, 5, 6], [4, 5], 0, 0, True, adding_replicas=[6], removing_replicas=[3])
    assert not partition_cli.settled(moving, [4, 5, 6])
    done = PartitionInfo(0, 4, 1, [4, 5, 6], [4, 5, 6], 0, 0, False)
    assert partition_cli.settled(done, [6, 5, 4]) and partition_cli.settled(done, None)
    assert not partition_cli.settled(done, [1, 2, 3])  # a stale view from before the move started


def test_topic_describe_table_marks_under_replicated_offline_and_moving_partitions() -> None:
    info = TopicInfo(
        "t",
        {},
        [
            part(0, 4, [4, 5, 6], [4, 5, 6]),
            part(1, 5, [5, 6, 4], [5, 4]),
            PartitionInfo(2, -1, 3, [6], [6], -1, -1, False, offline=True),
            PartitionInfo(3, 4, 1, [4, 5, 6], [4, 5], 0, 0, True, adding_replicas=[6], removing_replicas=[3]),
        ],
    )
    data = info.to_dict()
    assert set(data) == {"name", "configs", "partitions"}
    assert set(data["partitions"][0]) == {
        "partition",
        "leader",
        "leader_epoch",
        "replicas",
        "isr",
        "log_start_offset",
        "high_watermark",
        "under_replicated",
        "adding_replicas",
        "removing_replicas",
        "offline",
        "elr",
        "last_known_elr",
        "last_known_leader",
        "uncleanable_replicas",
    }
    lines = topic_cli.render_topic(data).splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("PARTITION"))
    assert "ISR" in lines[start] and "STATUS" in lines[start]
    rows = {line.split()[0]: line for line in lines[start + 1 : start + 5]}
    assert rows["0"].endswith("ok")
    assert rows["1"].endswith("UNDER-REPLICATED") and "5,4" in rows["1"]
    assert rows["2"].endswith("OFFLINE")
    assert rows["3"].endswith("UNDER-REPLICATED, REASSIGNING +6 -3")
    assert lines[-1].startswith("2 of 4 partitions under-replicated")


def test_topic_describe_table_marks_replicas_the_cleaner_gave_up_on() -> None:
    info = TopicInfo(
        "t",
        {"cleanup.policy": "compact"},
        [
            PartitionInfo(0, 1, 0, [1, 2, 3], [1, 2, 3], 0, 10, False, uncleanable_replicas=[2, 3]),
            PartitionInfo(1, 2, 0, [2, 3, 1], [2, 1], 0, 10, True, uncleanable_replicas=[1]),
            part(2, 3, [3, 1, 2], [3, 1, 2]),
        ],
    )
    data = info.to_dict()
    assert [p["uncleanable_replicas"] for p in data["partitions"]] == [[2, 3], [1], []]
    lines = topic_cli.render_topic(data).splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("PARTITION"))
    rows = {line.split()[0]: line for line in lines[start + 1 : start + 4]}
    assert rows["0"].endswith("UNCLEANABLE on 2,3")
    assert rows["1"].endswith("UNDER-REPLICATED, UNCLEANABLE on 1")
    assert rows["2"].endswith("ok")


def test_uncleanable_replicas_come_from_the_brokers_that_answered() -> None:
    def replica(topic: str, partition: int, why: str = "") -> LogDirReplicaInfo:
        return LogDirReplicaInfo(topic, partition, 100, 0, 10, True, 0, why)

    def answer(broker: int, *replicas: LogDirReplicaInfo) -> BrokerLogDirs:
        return BrokerLogDirs(broker, f"h:{broker}", [LogDirInfo("/d", True, 1, 1, 1, list(replicas))])

    corrupt = "CorruptRecordError: batch CRC mismatch"
    found = uncleanable_replicas(
        "t",
        [
            answer(3, replica("t", 0, corrupt), replica("t", 1), replica("other", 0, corrupt)),
            answer(1, replica("t", 0, corrupt), replica("t", 2, corrupt)),
            BrokerLogDirs(2, "h:2", error="NETWORK_EXCEPTION: deadline exceeded"),  # no answer: skipped
        ],
    )
    assert found == {0: [1, 3], 2: [1]}

"""DescribeConfigs: every topic config with its effective value and its source (set on the topic, the node's config
file, or odradek's built-in default), as ``kafka-configs --describe --all`` shows them."""

from __future__ import annotations

import random
from types import SimpleNamespace

import pytest
from controller_images import brokers, build, partition, topic
from test_active import controller_for

from odradek.broker.config import NodeConfig
from odradek.broker.topic_defaults import topic_defaults
from odradek.client.common import clock
from odradek.client.common.metadata_image import TOPIC_RESOURCE
from odradek.client.common.topic_rules import TOPIC_CONFIGS, node_key
from odradek.client.errors import ErrorCode
from odradek.controller.admin.configs import describe_topic_configs
from odradek.controller.admin.grpc_adapter import AdminGrpcService
from odradek.controller.admin.service import NodeAdmin
from odradek.controller.raft import LeaderAndEpoch, RaftNode, Role
from odradek.controller.raft.messages import Fetch
from odradek.proto import admin_pb2 as apb
from odradek.proto import metadata_pb2 as md

NODE = {"process.roles": "broker,controller", "node.id": 1, "controller.quorum.voters": "1@127.0.0.1:9093"}
LISTENERS = {"listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093"}


def config_record(name: str, value: str) -> md.MetadataRecord:
    return md.MetadataRecord(
        config=md.ConfigRecord(resource_type=TOPIC_RESOURCE, resource_name="t", name=name, value=value)
    )


def entries(result: apb.TopicConfigs) -> dict[str, tuple[str, int]]:
    return {c.name: (c.value, c.source) for c in result.configs}


def test_every_topic_config_has_a_node_default() -> None:
    """A topic config added to the accepted keys must say what it defaults to, or describe --all would miss it."""
    defaults = topic_defaults()
    assert set(defaults) == set(TOPIC_CONFIGS)
    assert node_key("retention.ms") == "log.retention.ms" and node_key("segment.ms") == "log.roll.ms"
    assert node_key("cleanup.policy") == "log.cleanup.policy"
    assert defaults["compression.type"].value == "producer"  # no node key: the log's built-in default
    assert defaults["unclean.leader.election.enable"].value == "false"


def test_sources_topic_node_file_and_built_in() -> None:
    image = build(brokers(1), topic(), partition(0, (1,)), config_record("retention.ms", "1000"))
    node = NodeConfig({**NODE, **LISTENERS, "log.segment.bytes": 4096, "min.insync.replicas": 1})
    result = describe_topic_configs(image, "t", topic_defaults(node))
    assert result.error == ErrorCode.NONE
    got = entries(result)
    assert set(got) == set(TOPIC_CONFIGS)
    assert got["retention.ms"] == ("1000", apb.TOPIC_CONFIG)
    assert got["segment.bytes"] == ("4096", apb.STATIC_BROKER_CONFIG)
    # Set in the file to the default value: still the file's setting (Kafka's STATIC_BROKER_CONFIG).
    assert got["min.insync.replicas"] == ("1", apb.STATIC_BROKER_CONFIG)
    assert got["retention.bytes"] == ("-1", apb.DEFAULT_CONFIG)
    assert got["message.timestamp.type"] == ("CreateTime", apb.DEFAULT_CONFIG)
    assert not any(c.read_only or c.sensitive for c in result.configs)  # every one can be altered live


def test_named_configs_each_once_unknown_names_left_out_and_unknown_topics_an_error() -> None:
    """As Kafka: a name the topic has no config of is left out of the answer, not an error for the whole topic."""
    image = build(brokers(1), topic(), partition(0, (1,)))
    defaults = topic_defaults()
    asked = ["segment.ms", "retention.msec", "retention.ms", "segment.ms"]
    picked = describe_topic_configs(image, "t", defaults, asked)
    assert picked.error == ErrorCode.NONE
    assert [c.name for c in picked.configs] == ["segment.ms", "retention.ms"]
    none_known = describe_topic_configs(image, "t", defaults, ["retention.msec"])
    assert (none_known.error, list(none_known.configs)) == (ErrorCode.NONE, [])
    missing = describe_topic_configs(image, "nope", defaults)
    assert missing.error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and not missing.configs


async def test_service_describes_a_topic_created_with_configs() -> None:
    controller, driver = controller_for(build(brokers(1)))
    node = NodeConfig({**NODE, **LISTENERS, "log.retention.ms": 60000})
    admin = AdminGrpcService(NodeAdmin(driver.sm, driver, {}, {}, controller, topic_defaults=topic_defaults(node)))
    created = await admin.CreateTopics(
        apb.CreateTopicsRequest(
            topics=[
                apb.CreatableTopic(
                    name="orders",
                    num_partitions=1,
                    replication_factor=1,
                    configs=[apb.ConfigEntry(name="compression.type", value="zstd")],
                )
            ]
        ),
        None,
    )
    assert created.topics[0].error == ErrorCode.NONE
    r = await admin.DescribeConfigs(apb.DescribeConfigsRequest(topics=["orders"]), None)
    assert r.error == ErrorCode.NONE and r.node_id == 1
    got = entries(r.topics[0])
    assert got["compression.type"] == ("zstd", apb.TOPIC_CONFIG)
    assert got["retention.ms"] == ("60000", apb.STATIC_BROKER_CONFIG)
    assert got["segment.ms"] == ("604800000", apb.DEFAULT_CONFIG)


async def test_only_kafkas_internal_topics_are_internal() -> None:
    """As Kafka: __consumer_offsets and __transaction_state are internal; a user's topic named with "__" is not, so
    listing topics without the internal ones keeps it."""
    ids = {"__consumer_offsets": b"\x01" * 16, "__transaction_state": b"\x02" * 16, "__mine": b"\x03" * 16}
    records = [r for name, i in ids.items() for r in (topic(name, i), partition(0, (1,), topic_id=i))]
    controller, driver = controller_for(build(brokers(1), *records))
    admin = AdminGrpcService(NodeAdmin(driver.sm, driver, {}, {}, controller, topic_defaults=topic_defaults()))
    described = await admin.DescribeTopics(apb.DescribeTopicsRequest(names=sorted(ids)), None)
    assert {t.name: t.is_internal for t in described.topics} == {
        "__consumer_offsets": True,
        "__mine": False,
        "__transaction_state": True,
    }
    listed = await admin.DescribeTopics(apb.DescribeTopicsRequest(), None)
    assert [t.name for t in listed.topics] == ["__mine"]


async def test_a_node_that_knows_no_controller_answers_not_controller_per_topic() -> None:
    """Before any controller is known, CreateTopics is a retriable NOT_CONTROLLER for each topic (its response has
    no top-level error field to set)."""
    _, driver = controller_for(build(brokers(1)))
    admin = AdminGrpcService(NodeAdmin(driver.sm, driver, {}, {}, None, topic_defaults=topic_defaults()))
    request = apb.CreateTopicsRequest(topics=[apb.CreatableTopic(name="t", num_partitions=1, replication_factor=1)])
    created = await admin.CreateTopics(request, None)
    assert [(t.name, t.error) for t in created.topics] == [("t", ErrorCode.NOT_CONTROLLER)]


async def test_a_just_elected_leader_describes_a_topic_its_predecessor_committed() -> None:
    """Until the new leader's first entry commits, its image may lack what the old leader committed: DescribeTopics
    waits for that instead of calling the topic unknown."""
    import asyncio

    from test_active import FakeDriver

    from odradek.controller.active import ActiveController
    from odradek.controller.brokers import BrokerControl
    from odradek.controller.metadata.state_machine import MetadataStateMachine, encode_batch
    from odradek.controller.raft import Entry

    sm = MetadataStateMachine("c1")
    driver = FakeDriver(sm)
    driver.node.log.end_offset = 2  # the topic at 0, this leader's epoch start at 1: neither applied yet
    controller = ActiveController(driver, sm, BrokerControl("c1", 60_000, lambda _t: False))
    sm.leader_changed(driver.leader)
    assert not controller.is_active
    admin = AdminGrpcService(NodeAdmin(sm, driver, {}, {}, controller, topic_defaults=topic_defaults()))
    asked = asyncio.ensure_future(admin.DescribeTopics(apb.DescribeTopicsRequest(names=["t"]), None))
    await asyncio.sleep(0.05)
    assert not asked.done()
    driver.node.high_watermark = 2
    records = build(brokers(1), topic(), partition(0, (1,))).to_records()
    sm.apply([Entry(0, 0, encode_batch(records)), Entry(1, 1, b"", control=True)])
    described = await asyncio.wait_for(asked, 5)
    assert [(t.name, t.error) for t in described.topics] == [("t", ErrorCode.NONE)]


async def test_a_node_that_knows_no_controller_answers_not_controller_at_the_top() -> None:
    """The forwarded requests whose response has a top-level error answer NOT_CONTROLLER there."""
    _, driver = controller_for(build(brokers(1)))
    driver.leader = LeaderAndEpoch(None, 2, Role.UNATTACHED)
    admin = AdminGrpcService(NodeAdmin(driver.sm, driver, {}, {}, None, topic_defaults=topic_defaults()))
    quorum = await admin.DescribeQuorum(apb.DescribeQuorumRequest(), None)
    elected = await admin.ElectLeaders(apb.ElectLeadersRequest(), None)
    moved = await admin.AlterPartitionReassignments(apb.AlterPartitionReassignmentsRequest(), None)
    assert [quorum.error, elected.error, moved.error] == [ErrorCode.NOT_CONTROLLER] * 3


async def test_describe_quorum_times_are_the_fetches_on_the_wall_clock_and_minus_one_when_unknown(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The leader fetched and caught up now (as Kafka reports it); a fetcher's times are the ticks of its fetches
    on the wall clock, -1 (Kafka's unknown) for one it has not had: observer 101 never held the leader's whole log."""
    monkeypatch.setattr(clock, "wall_ms", lambda: 1_000_000)
    node = RaftNode(1, (1,), rng=random.Random(0))
    while node.role is not Role.LEADER:
        node.tick()
    node.advance(node.ready())  # the log ends at 1 (the leader-change entry)
    node.step(Fetch(100, 1, node.epoch, fetch_offset=1, last_fetched_epoch=node.epoch, high_watermark=1))
    node.step(Fetch(101, 1, node.epoch, fetch_offset=0, last_fetched_epoch=0, high_watermark=0))
    node.advance(node.ready())
    for _ in range(3):
        node.tick()
    driver = SimpleNamespace(node=node, node_id=1, tick_ms=50, leader=LeaderAndEpoch(1, node.epoch, Role.LEADER))
    admin = AdminGrpcService(NodeAdmin(SimpleNamespace(), driver, {}, {}, None, topic_defaults=topic_defaults()))  # type: ignore[arg-type]
    r = await admin.DescribeQuorum(apb.DescribeQuorumRequest(), None)
    assert r.error == ErrorCode.NONE and r.leader_id == 1
    got = {
        s.node_id: (s.log_end_offset, s.last_fetch_timestamp_ms, s.last_caught_up_timestamp_ms)
        for s in [*r.voters, *r.observers]
    }
    assert got == {1: (1, 1_000_000, 1_000_000), 100: (1, 999_850, 999_850), 101: (0, 999_850, -1)}

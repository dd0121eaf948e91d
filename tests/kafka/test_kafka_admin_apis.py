"""Kafka's admin APIs on the Kafka listener at every served version. Reads go to the real Admin service over a real
metadata image (configs and their sources, cluster, client quotas); writes go to a recording stand-in of the
service, so each test checks the request handed to the service and the Kafka answer made of its reply."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from google.protobuf.message import Message
from kafka.protocol.admin.client_quotas import AlterClientQuotasRequest, DescribeClientQuotasRequest
from kafka.protocol.admin.cluster import DescribeClusterRequest
from kafka.protocol.admin.configs import AlterConfigsRequest, DescribeConfigsRequest, IncrementalAlterConfigsRequest
from kafka.protocol.admin.topics import (
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteRecordsRequest,
    DeleteTopicsRequest,
)
from kafka_harness import call, served
from recording_admin import RecordingAdmin

from odradek.broker.api.replicas import DeletedRecords
from odradek.broker.config import NodeConfig
from odradek.broker.kafka import admin_apis
from odradek.broker.kafka.apis import ApiRegistry
from odradek.broker.kafka.backend import KafkaBackend
from odradek.broker.topic_defaults import topic_defaults
from odradek.client.common.metadata_image import BrokerRegistration, MetadataImage, PartitionRegistration, TopicImage
from odradek.client.common.topic_rules import TOPIC_CONFIGS, dynamic_broker_keys
from odradek.client.errors import ErrorCode
from odradek.proto import admin_pb2 as apb

T_ID = bytes(range(16))
KAFKA = {1: ("kafka-1", 9192), 2: ("kafka-2", 9193), 4: ("kafka-4", 9194)}  # broker 3 has no Kafka address
# Broker 2's config: the keys it needs (NODE), and as this node runs (NODE_CONFIG) its file also sets static
# broker configs and log.retention.ms, which defaults retention.ms.
NODE = {
    "process.roles": "broker",
    "node.id": 2,
    "controller.quorum.voters": "8@ctl-8:9093,9@ctl-9:9093",
    "listeners": "PLAINTEXT://0.0.0.0:9002,KAFKA://0.0.0.0:9193",
}
NODE_CONFIG = NodeConfig(
    {
        **NODE,
        "advertised.listeners": "PLAINTEXT://grpc-2:9002,KAFKA://kafka-2:9193",
        "log.dirs": "/data/2a,/data/2b",
        "num.partitions": 3,
        "default.replication.factor": 2,
        "auto.create.topics.enable": False,
        "log.retention.ms": 5000,
        "replica.alter.log.dirs.io.max.bytes.per.second": 10485760,
    }
)


def image() -> MetadataImage:
    brokers = {
        b: BrokerRegistration(
            b,
            bytes([b]) * 16,
            10 * b,
            f"grpc-{b}",
            9000 + b,
            rack="r1" if b == 1 else "",
            fenced=b == 4,
            log_dirs=(f"/data/{b}a", f"/data/{b}b"),
        )
        for b in (1, 2, 3, 4)
    }
    parts = {0: PartitionRegistration(T_ID, 0, (1, 2), (1, 2), 1, 0, 0)}
    return MetadataImage(
        offset=30,
        brokers=brokers,
        topics={T_ID: TopicImage("t", T_ID, parts)},
        topic_ids={"t": T_ID},
        configs={
            (2, "t"): {"retention.ms": "1000"},
            (4, ""): {"log.segment.bytes": "2048"},
            (32, "g"): {"consumer.session.timeout.ms": "50000"},
        },
        client_quotas={
            ("alice", False, None, False): {"producer_byte_rate": 1024.0},
            (None, False, None, True): {"consumer_byte_rate": 2048.0},
        },
    )


def setup(config: NodeConfig = NODE_CONFIG, **answers: Message) -> tuple[ApiRegistry, RecordingAdmin]:
    admin = RecordingAdmin(answers, image)
    # The node's topic config defaults as its Admin service holds them (DescribeConfigs' synonyms).
    admin.real.topic_defaults = admin.topic_defaults = topic_defaults(config)  # type: ignore[attr-defined]
    backend: Any = KafkaBackend(
        broker_id=2,
        cluster_id="cluster-x",
        listener="KAFKA",
        image=image,
        controller_id=lambda: 9,
        endpoint=KAFKA.get,
        data=admin,  # type: ignore[arg-type]  # DeleteRecords, recorded the same way
        groups=None,  # type: ignore[arg-type]
        transactions=None,  # type: ignore[arg-type]
        admin=admin,  # type: ignore[arg-type]
        config=config,
    )
    r = ApiRegistry()
    admin_apis.register(r, backend)
    return r, admin


def test_served_versions() -> None:
    reg, _ = setup()
    assert served(reg, CreateTopicsRequest) == range(2, 8)
    assert served(reg, DeleteTopicsRequest) == range(1, 7)
    assert served(reg, CreatePartitionsRequest) == range(0, 4)
    assert served(reg, DeleteRecordsRequest) == range(0, 3)
    assert served(reg, DescribeConfigsRequest) == range(1, 5)
    assert served(reg, AlterConfigsRequest) == range(0, 3)
    assert served(reg, IncrementalAlterConfigsRequest) == range(0, 2)
    assert served(reg, DescribeClusterRequest) == range(0, 3)
    assert served(reg, DescribeClientQuotasRequest) == range(0, 2)
    assert served(reg, AlterClientQuotasRequest) == range(0, 2)


# ---- topics ----


@pytest.mark.parametrize("version", range(2, 8))
async def test_create_topics(version: int) -> None:
    answer = apb.CreateTopicsResponse(
        topics=[
            apb.TopicResult(name="a", topic_id=T_ID, num_partitions=3, replication_factor=2),
            apb.TopicResult(name="b", error=ErrorCode.INVALID_REPLICA_ASSIGNMENT, error_message="broker 9"),
        ],
    )
    reg, admin = setup(CreateTopics=answer)
    t = CreateTopicsRequest.CreatableTopic
    assign = t.CreatableReplicaAssignment
    request = CreateTopicsRequest(
        version=version,
        topics=[
            t(
                name="a",
                num_partitions=3,
                replication_factor=-1,
                assignments=[],
                configs=[t.CreatableTopicConfig(name="cleanup.policy", value="compact")],
            ),
            t(
                name="null-config",
                num_partitions=1,
                replication_factor=1,
                assignments=[],
                configs=[t.CreatableTopicConfig(name="retention.ms", value=None)],
            ),
            t(
                name="b",
                num_partitions=-1,
                replication_factor=-1,
                assignments=[
                    assign(partition_index=1, broker_ids=[2, 9]),
                    assign(partition_index=0, broker_ids=[1, 2]),
                ],
                configs=[],
            ),
            t(
                name="gap",
                num_partitions=-1,
                replication_factor=-1,
                assignments=[assign(partition_index=0, broker_ids=[1]), assign(partition_index=2, broker_ids=[2])],
                configs=[],
            ),
            t(
                name="twice",
                num_partitions=-1,
                replication_factor=-1,
                assignments=[assign(partition_index=0, broker_ids=[1]), assign(partition_index=0, broker_ids=[2])],
                configs=[],
            ),
        ],
        timeout_ms=5000,
        validate_only=True,
    )
    r = await call(reg, request, version, throttle_ms=15)  # the request quota's throttle
    sent = admin.requests["CreateTopics"]
    assert isinstance(sent, apb.CreateTopicsRequest)
    assert (sent.timeout_ms, sent.validate_only) == (5000, True)
    a, b = sent.topics  # the refused ones are not sent
    assert (a.name, a.num_partitions, a.replication_factor) == ("a", 3, -1)
    assert [(c.name, c.value) for c in a.configs] == [("cleanup.policy", "compact")]
    assert [list(x.replicas) for x in b.assignments] == [[1, 2], [2, 9]]  # in partition order, for the service
    assert r.throttle_time_ms == 15
    got = [(x.name, x.error_code, x.error_message) for x in r.topics]
    assert got == [
        ("a", 0, None),
        ("null-config", 40, "Null value not supported for topic configs: retention.ms"),  # INVALID_CONFIG
        ("b", 39, "broker 9"),  # INVALID_REPLICA_ASSIGNMENT, the controller's
        ("gap", 39, "partitions should be a consecutive 0-based integer sequence"),
        ("twice", 39, "Found multiple manual partition assignments for partition 0"),
    ]
    ra, rb = r.topics[0], r.topics[2]
    if version >= 7:
        assert ra.topic_id == uuid.UUID(bytes=T_ID) and rb.topic_id is None  # the zero UUID, as kafka-python reads it
    if version >= 5:  # what the controller gave the topic, and its configs as DescribeConfigs will show them
        assert (ra.num_partitions, ra.replication_factor) == (3, 2)
        assert (rb.num_partitions, rb.replication_factor, rb.configs) == (-1, -1, [])  # refused: not returned
        configs = {c.name: (c.value, c.config_source, c.read_only, c.is_sensitive) for c in ra.configs}
        assert set(configs) == set(TOPIC_CONFIGS)
        assert configs["cleanup.policy"] == ("compact", 1, False, False)  # DYNAMIC_TOPIC_CONFIG: as asked
        assert configs["retention.ms"] == ("5000", 4, False, False)  # STATIC_BROKER_CONFIG: the node file's
        assert configs["segment.ms"] == ("604800000", 5, False, False)  # DEFAULT_CONFIG: the built-in default


async def test_create_topics_v5_leaves_out_counts_a_node_did_not_say() -> None:
    """An answer without counts (a controller running an older odradek) gives -1, Kafka's "not returned"."""
    reg, _ = setup(CreateTopics=apb.CreateTopicsResponse(topics=[apb.TopicResult(name="a", topic_id=T_ID)]))
    t = CreateTopicsRequest.CreatableTopic
    request = CreateTopicsRequest(
        version=5, topics=[t(name="a", num_partitions=-1, replication_factor=-1, assignments=[], configs=[])]
    )
    [a] = (await call(reg, request, 5)).topics
    assert (a.error_code, a.num_partitions, a.replication_factor) == (0, -1, -1)


async def test_create_topics_without_a_reachable_controller_is_not_controller() -> None:
    reg, _ = setup()  # the real service: no active controller known
    t = CreateTopicsRequest.CreatableTopic
    request = CreateTopicsRequest(
        version=7, topics=[t(name="a", num_partitions=1, replication_factor=1, assignments=[], configs=[])]
    )
    r = await call(reg, request, 7)
    assert [(x.name, x.error_code) for x in r.topics] == [("a", 41)]  # NOT_CONTROLLER: retriable


@pytest.mark.parametrize("version", range(1, 7))
async def test_delete_topics(version: int) -> None:
    answer = apb.DeleteTopicsResponse(
        topics=[apb.TopicResult(name="t"), apb.TopicResult(name="gone", error=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)],
    )
    reg, admin = setup(DeleteTopics=answer)
    if version >= 6:
        s = DeleteTopicsRequest.DeleteTopicState
        unknown = uuid.uuid4()
        topics = [s(name=None, topic_id=uuid.UUID(bytes=T_ID)), s(name=None, topic_id=unknown), s(name="gone")]
        request = DeleteTopicsRequest(version=version, topics=topics, timeout_ms=100)
    else:
        request = DeleteTopicsRequest(version=version, topic_names=["t", "gone"], timeout_ms=100)
    r = await call(reg, request, version, throttle_ms=3)
    sent = admin.requests["DeleteTopics"]
    assert isinstance(sent, apb.DeleteTopicsRequest)
    assert (list(sent.names), sent.timeout_ms) == (["t", "gone"], 100)  # an id resolved to its topic's name
    assert r.throttle_time_ms == 3
    got = [(x.name, x.error_code) for x in r.responses]
    if version >= 6:
        assert got == [("t", 0), (None, 100), ("gone", 3)]  # UNKNOWN_TOPIC_ID for the id nobody has
        assert [x.topic_id for x in r.responses] == [uuid.UUID(bytes=T_ID), unknown, None]  # gone: the zero UUID
    else:
        assert got == [("t", 0), ("gone", 3)]


@pytest.mark.parametrize("version", range(0, 4))
async def test_create_partitions(version: int) -> None:
    answer = apb.CreatePartitionsResponse(
        topics=[
            apb.TopicResult(name="t", error=ErrorCode.INVALID_PARTITIONS, error_message="fewer"),
            apb.TopicResult(name="u"),
        ]
    )
    reg, admin = setup(CreatePartitions=answer)
    t = CreatePartitionsRequest.CreatePartitionsTopic
    request = CreatePartitionsRequest(
        version=version,
        topics=[
            t(name="t", count=1, assignments=None),
            t(
                name="u",
                count=3,
                assignments=[
                    t.CreatePartitionsAssignment(broker_ids=[1, 2]),
                    t.CreatePartitionsAssignment(broker_ids=[2, 1]),
                ],
            ),
        ],
        timeout_ms=100,
        validate_only=True,
    )
    r = await call(reg, request, version)
    sent = admin.requests["CreatePartitions"]
    assert isinstance(sent, apb.CreatePartitionsRequest)
    assert [(x.name, x.count, [list(a.replicas) for a in x.assignments]) for x in sent.topics] == [
        ("t", 1, []),  # null: the controller places them
        ("u", 3, [[1, 2], [2, 1]]),
    ]
    assert sent.validate_only
    assert [(x.name, x.error_code, x.error_message) for x in r.results] == [("t", 37, "fewer"), ("u", 0, None)]


class RecordingDeletes:
    """The broker's replica service as the DeleteRecords handler sees it: the request recorded, typed answers."""

    def __init__(self, answer: list[tuple[str, list[DeletedRecords]]]) -> None:
        self.answer = answer
        self.asked: list[Any] = []

    async def delete_records(self, request: Any, ctx: Any) -> list[tuple[str, list[DeletedRecords]]]:
        self.asked.append(request)
        return self.answer


@pytest.mark.parametrize("version", range(0, 3))
async def test_delete_records(version: int) -> None:
    deletes = RecordingDeletes([("t", [DeletedRecords(0, 5), DeletedRecords(1, -1, ErrorCode.NOT_LEADER_OR_FOLLOWER)])])
    reg, admin = setup()
    admin.replica_service = deletes  # type: ignore[attr-defined]  # the backend's data service
    t = DeleteRecordsRequest.DeleteRecordsTopic
    request = DeleteRecordsRequest(
        version=version,
        topics=[
            t(
                name="t",
                partitions=[
                    t.DeleteRecordsPartition(partition_index=0, offset=5),
                    t.DeleteRecordsPartition(partition_index=1, offset=-1),
                ],
            )
        ],
        timeout_ms=250,
    )
    r = await call(reg, request, version)
    [sent] = deletes.asked
    assert sent.timeout_ms == 250 and [(name, list(parts)) for name, parts in sent.topics] == [("t", [(0, 5), (1, -1)])]
    assert [(p.partition_index, p.low_watermark, p.error_code) for p in r.topics[0].partitions] == [
        (0, 5, 0),
        (1, -1, 6),
    ]


# ---- configs ----


def describe(
    version: int, *resources: tuple[int, str, list[str] | None], synonyms: bool = True
) -> DescribeConfigsRequest:
    res = DescribeConfigsRequest.DescribeConfigsResource
    return DescribeConfigsRequest(
        version=version,
        resources=[res(resource_type=k, resource_name=n, configuration_keys=keys) for k, n, keys in resources],
        include_synonyms=synonyms,
        include_documentation=False,
    )


@pytest.mark.parametrize("version", range(1, 5))
async def test_describe_topic_configs(version: int) -> None:
    reg, _ = setup()
    request = describe(
        version, (2, "t", None), (2, "nope", None), (2, "t", ["retention.ms", "no.such.config"]), (2, "t", [])
    )
    r = await call(reg, request, version)
    t, nope, picked, every = r.results
    assert (t.error_code, t.resource_type, t.resource_name) == (0, 2, "t")
    configs = {c.name: c for c in t.configs}
    assert set(configs) == set(TOPIC_CONFIGS)
    retention, segment, cleanup = configs["retention.ms"], configs["segment.bytes"], configs["cleanup.policy"]
    assert (retention.value, retention.config_source) == ("1000", 1)  # DYNAMIC_TOPIC_CONFIG
    assert (segment.value, segment.config_source) == ("2048", 3)  # DYNAMIC_DEFAULT_BROKER_CONFIG
    assert cleanup.config_source == 5  # DEFAULT_CONFIG
    assert not retention.read_only and not retention.is_sensitive
    # The effective value, then each lower one under the node property's name (Kafka's precedence order).
    assert [(s.name, s.value, s.source) for s in retention.synonyms] == [
        ("retention.ms", "1000", 1),
        ("log.retention.ms", "5000", 4),  # this node's config file
        ("log.retention.ms", "604800000", 5),  # odradek's built-in default
    ]
    assert [(s.name, s.value, s.source) for s in segment.synonyms] == [
        ("log.segment.bytes", "2048", 3),
        ("log.segment.bytes", "1073741824", 5),
    ]
    assert [(s.name, s.value, s.source) for s in cleanup.synonyms] == [("log.cleanup.policy", "delete", 5)]
    assert [(s.name, s.source) for s in configs["compression.type"].synonyms] == [("compression.type", 5)]
    if version >= 3:
        types = {name: c.config_type for name, c in configs.items()}
        assert 0 not in types.values()  # every topic config has Kafka's type
        assert (types["retention.ms"], types["segment.bytes"], types["cleanup.policy"]) == (5, 3, 7)  # LONG INT LIST
        assert (types["unclean.leader.election.enable"], types["min.cleanable.dirty.ratio"]) == (1, 6)  # BOOLEAN DOUBLE
        assert types["compression.type"] == 2 and retention.documentation is None  # STRING
    assert nope.error_code == 3 and nope.configs == []
    # A key the resource does not have is left out, as Kafka leaves it; an empty list asks for every key.
    assert (picked.error_code, [c.name for c in picked.configs]) == (0, ["retention.ms"])
    assert len(every.configs) == len(t.configs)


async def test_describe_configs_without_synonyms() -> None:
    reg, _ = setup()
    r = await call(reg, describe(4, (2, "t", ["retention.ms"]), synonyms=False), 4)
    assert r.results[0].configs[0].synonyms == []


# Each static broker config of NODE_CONFIG: its synonyms (the config file's value, then odradek's default, as Kafka
# lists them) and Kafka's type.
STATIC_BROKER_CONFIGS = {
    "advertised.listeners": ([("PLAINTEXT://grpc-2:9002,KAFKA://kafka-2:9193", 4), (None, 5)], 2),
    "auto.create.topics.enable": ([("false", 4), ("true", 5)], 1),
    "broker.id": ([("2", 4)], 3),
    "controller.quorum.voters": ([("8@ctl-8:9093,9@ctl-9:9093", 4)], 7),
    "default.replication.factor": ([("2", 4), ("1", 5)], 3),
    "listeners": ([("PLAINTEXT://0.0.0.0:9002,KAFKA://0.0.0.0:9193", 4), ("PLAINTEXT://127.0.0.1:9092", 5)], 2),
    "log.dirs": ([("/data/2a,/data/2b", 4), ("/var/lib/odradek/data", 5)], 2),
    "node.id": ([("2", 4)], 3),
    "num.partitions": ([("3", 4), ("1", 5)], 3),
    "replica.alter.log.dirs.io.max.bytes.per.second": ([("10485760", 4), ("9223372036854775807", 5)], 5),
}


@pytest.mark.parametrize("version", range(1, 5))
async def test_describe_broker_configs(version: int) -> None:
    reg, _ = setup()
    request = describe(
        version,
        (4, "", None),
        (4, "2", None),
        (4, "2", ["log.retention.ms", "node.id", "no.such.config"]),
        (4, "7", None),
        (16, "m", None),
    )
    r = await call(reg, request, version)
    default, this, picked, other, group = r.results
    # The cluster-wide default resource lists what is set dynamically; this broker's, every dynamic broker config
    # and its static configs.
    assert [(c.name, c.value, c.config_source) for c in default.configs] == [("log.segment.bytes", "2048", 3)]
    configs = {c.name: c for c in this.configs}
    assert set(configs) == set(dynamic_broker_keys()) | set(STATIC_BROKER_CONFIGS)
    retention = configs["log.retention.ms"]
    assert (configs["log.segment.bytes"].config_source, retention.config_source) == (3, 4)
    assert [(s.value, s.source) for s in retention.synonyms] == [("5000", 4), ("604800000", 5)]
    assert not retention.read_only
    for name, (synonyms, kind) in STATIC_BROKER_CONFIGS.items():
        c = configs[name]
        # STATIC_BROKER_CONFIG; read-only but for advertised.listeners, which Kafka 3.9 reports as per-broker dynamic
        assert (c.value, c.config_source, c.read_only) == (*synonyms[0], name != "advertised.listeners")
        assert [(s.name, s.value, s.source) for s in c.synonyms] == [(name, *s) for s in synonyms]
        if version >= 3:
            assert c.config_type == kind
    if version >= 3:
        assert 0 not in {c.config_type for c in this.configs}
    assert [c.name for c in picked.configs] == ["log.retention.ms", "node.id"]
    assert other.error_code == 42 and "expected 2" in other.error_message  # another broker's resource
    assert group.error_code == 42  # INVALID_REQUEST: no client metrics configs


async def test_static_broker_configs_the_file_does_not_set_are_defaults() -> None:
    """A static key the config file leaves out is odradek's default (Kafka's DEFAULT_CONFIG), its one synonym; an
    unset advertised.listeners is null, as Kafka reports it (the listeners are advertised)."""
    reg, _ = setup(NodeConfig(NODE))
    r = await call(reg, describe(4, (4, "2", sorted(STATIC_BROKER_CONFIGS))), 4)
    got = {c.name: (c.value, c.config_source, [(s.value, s.source) for s in c.synonyms]) for c in r.results[0].configs}
    assert got == {
        "advertised.listeners": (None, 5, [(None, 5)]),
        "auto.create.topics.enable": ("true", 5, [("true", 5)]),
        "broker.id": ("2", 4, [("2", 4)]),
        "controller.quorum.voters": ("8@ctl-8:9093,9@ctl-9:9093", 4, [("8@ctl-8:9093,9@ctl-9:9093", 4)]),
        "default.replication.factor": ("1", 5, [("1", 5)]),
        "listeners": (
            "PLAINTEXT://0.0.0.0:9002,KAFKA://0.0.0.0:9193",
            4,
            [("PLAINTEXT://0.0.0.0:9002,KAFKA://0.0.0.0:9193", 4), ("PLAINTEXT://127.0.0.1:9092", 5)],
        ),
        "log.dirs": ("/var/lib/odradek/data", 5, [("/var/lib/odradek/data", 5)]),
        "node.id": ("2", 4, [("2", 4)]),
        "num.partitions": ("1", 5, [("1", 5)]),
        "replica.alter.log.dirs.io.max.bytes.per.second": ("9223372036854775807", 5, [("9223372036854775807", 5)]),
    }


async def test_describe_broker_configs_refused_for_every_broker_resource() -> None:
    denied = apb.DescribeConfigsResponse(
        error=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, cluster_defaults_error=ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    )
    reg, _ = setup(DescribeConfigs=denied)
    r = await call(reg, describe(4, (4, "", None), (4, "2", None)), 4)
    assert [(x.error_code, x.configs) for x in r.results] == [(31, []), (31, [])]


@pytest.mark.parametrize("version", range(1, 5))
async def test_describe_group_configs(version: int) -> None:
    """Kafka's GROUP resource (32): each group config, the group's own value (GROUP_CONFIG) or the node's setting
    (DEFAULT_CONFIG here: the file sets none), typed INT (the share offset reset and isolation level STRING); the
    empty name is refused."""
    reg, _ = setup()
    r = await call(reg, describe(version, (32, "g", None), (32, "other", ["consumer.heartbeat.interval.ms"])), version)
    g, other = r.results
    assert (g.error_code, g.resource_type, g.resource_name) == (0, 32, "g")
    assert [(c.name, c.value, c.config_source) for c in g.configs] == [
        ("consumer.session.timeout.ms", "50000", 8),
        ("consumer.heartbeat.interval.ms", "5000", 5),
        ("share.session.timeout.ms", "45000", 5),
        ("share.heartbeat.interval.ms", "5000", 5),
        ("share.record.lock.duration.ms", "30000", 5),
        ("share.auto.offset.reset", "latest", 5),
        ("share.isolation.level", "read_uncommitted", 5),
    ]
    assert [(c.name, c.value) for c in other.configs] == [("consumer.heartbeat.interval.ms", "5000")]
    if version >= 3:
        assert [c.config_type for c in g.configs] == [3, 3, 3, 3, 3, 2, 2]  # INT, the last two STRING
    r = await call(reg, describe(version, (32, "", None)), version)
    assert r.results[0].error_code == ErrorCode.INVALID_REQUEST


async def test_incremental_alter_group_configs() -> None:
    answer = apb.IncrementalAlterConfigsResponse(
        group_results=[
            apb.AlterConfigsResult(topic="g", error=ErrorCode.NONE),
            apb.AlterConfigsResult(
                topic="h", error=ErrorCode.INVALID_CONFIG, error_message="Unknown group config name: x"
            ),
        ],
    )
    reg, admin = setup(IncrementalAlterConfigs=answer)
    res = IncrementalAlterConfigsRequest.AlterConfigsResource
    op = res.AlterableConfig
    request = IncrementalAlterConfigsRequest(
        version=1,
        resources=[
            res(
                resource_type=32,
                resource_name="g",
                configs=[op(name="consumer.session.timeout.ms", config_operation=0, value="50000")],
            ),
            res(resource_type=32, resource_name="h", configs=[op(name="x", config_operation=0, value="1")]),
        ],
        validate_only=False,
    )
    r = await call(reg, request, 1)
    sent = admin.requests["IncrementalAlterConfigs"]
    assert isinstance(sent, apb.IncrementalAlterConfigsRequest)
    assert [(g.group, [(c.name, c.op, c.value) for c in g.configs]) for g in sent.groups] == [
        ("g", [("consumer.session.timeout.ms", apb.SET, "50000")]),
        ("h", [("x", apb.SET, "1")]),
    ]
    assert [(x.resource_type, x.resource_name, x.error_code, x.error_message) for x in r.responses] == [
        (32, "g", 0, None),
        (32, "h", 40, "Unknown group config name: x"),
    ]
    # AlterConfigs replaces the group's configs: it deletes each group config it does not give.
    reg, admin = setup(
        IncrementalAlterConfigs=apb.IncrementalAlterConfigsResponse(group_results=[answer.group_results[0]])
    )
    legacy = AlterConfigsRequest.AlterConfigsResource
    r = await call(
        reg,
        AlterConfigsRequest(
            version=1,
            resources=[
                legacy(
                    resource_type=32,
                    resource_name="g",
                    configs=[legacy.AlterableConfig(name="consumer.heartbeat.interval.ms", value="6000")],
                )
            ],
            validate_only=False,
        ),
        1,
    )
    sent = admin.requests["IncrementalAlterConfigs"]
    assert [(c.name, c.op) for c in sent.groups[0].configs] == [
        ("consumer.heartbeat.interval.ms", apb.SET),
        ("consumer.session.timeout.ms", apb.DELETE),
        ("share.auto.offset.reset", apb.DELETE),
        ("share.heartbeat.interval.ms", apb.DELETE),
        ("share.isolation.level", apb.DELETE),
        ("share.record.lock.duration.ms", apb.DELETE),
        ("share.session.timeout.ms", apb.DELETE),
    ]
    assert r.responses[0].error_code == 0


@pytest.mark.parametrize("version", range(0, 2))
async def test_incremental_alter_configs(version: int) -> None:
    answer = apb.IncrementalAlterConfigsResponse(
        results=[apb.AlterConfigsResult(topic="t", error=ErrorCode.INVALID_CONFIG, error_message="bad value")],
        cluster_defaults_result=apb.AlterConfigsResult(),
    )
    reg, admin = setup(IncrementalAlterConfigs=answer)
    res = IncrementalAlterConfigsRequest.AlterConfigsResource
    op = res.AlterableConfig
    request = IncrementalAlterConfigsRequest(
        version=version,
        resources=[
            res(resource_type=2, resource_name="t", configs=[op(name="retention.ms", config_operation=0, value="5")]),
            res(
                resource_type=4, resource_name="", configs=[op(name="log.retention.ms", config_operation=1, value=None)]
            ),
            res(
                resource_type=4, resource_name="1", configs=[op(name="log.retention.ms", config_operation=0, value="1")]
            ),
            res(resource_type=2, resource_name="u", configs=[op(name="retention.ms", config_operation=9, value="1")]),
            res(
                resource_type=4,
                resource_name="2",
                configs=[op(name="advertised.listeners", config_operation=0, value="KAFKA://elsewhere:9092")],
            ),
        ],
        validate_only=True,
    )
    r = await call(reg, request, version)
    sent = admin.requests["IncrementalAlterConfigs"]
    assert isinstance(sent, apb.IncrementalAlterConfigsRequest)
    assert sent.validate_only
    assert [(t.topic, [(c.name, c.op, c.value) for c in t.configs]) for t in sent.topics] == [
        ("t", [("retention.ms", apb.SET, "5")])
    ]
    assert [(c.name, c.op) for c in sent.cluster_defaults] == [("log.retention.ms", apb.DELETE)]
    got = [(x.resource_type, x.resource_name, x.error_code) for x in r.responses]
    # No per-broker configs; no operation 9; advertised.listeners refused as a Kafka 3.9 KRaft broker refuses it.
    assert got == [(2, "t", 40), (4, "", 0), (4, "1", 42), (2, "u", 42), (4, "2", 40)]
    assert r.responses[0].error_message == "bad value"
    assert (
        r.responses[4].error_message
        == "Advertised listeners cannot be altered when using a Raft-based metadata quorum."
    )


async def test_incremental_alter_configs_without_a_reachable_controller_is_not_controller() -> None:
    reg, _ = setup()
    res = IncrementalAlterConfigsRequest.AlterConfigsResource
    request = IncrementalAlterConfigsRequest(
        version=1, resources=[res(resource_type=2, resource_name="t", configs=[])], validate_only=False
    )
    r = await call(reg, request, 1)
    assert r.responses[0].error_code == 41


@pytest.mark.parametrize("version", range(0, 3))
async def test_alter_configs_replaces_every_dynamic_config(version: int) -> None:
    answer = apb.IncrementalAlterConfigsResponse(
        results=[apb.AlterConfigsResult(topic="t", error=ErrorCode.INVALID_CONFIG, error_message="bad value")],
        cluster_defaults_result=apb.AlterConfigsResult(),
    )
    reg, admin = setup(IncrementalAlterConfigs=answer)
    res = AlterConfigsRequest.AlterConfigsResource
    c = res.AlterableConfig
    request = AlterConfigsRequest(
        version=version,
        resources=[
            res(
                resource_type=2,
                resource_name="t",
                configs=[c(name="segment.ms", value="60000"), c(name="retention.ms", value=None)],
            ),
            res(resource_type=4, resource_name="", configs=[c(name="log.retention.ms", value="10")]),
            res(resource_type=4, resource_name="2", configs=[]),
            res(resource_type=8, resource_name="2", configs=[]),  # BROKER_LOGGER
            res(resource_type=99, resource_name="x", configs=[]),
            res(resource_type=2, resource_name="u", configs=[]),
            res(resource_type=2, resource_name="u", configs=[c(name="retention.ms", value="1")]),
        ],
        validate_only=True,
    )
    r = await call(reg, request, version)
    sent = admin.requests["IncrementalAlterConfigs"]
    assert isinstance(sent, apb.IncrementalAlterConfigsRequest)
    assert sent.validate_only
    [t] = sent.topics  # "u" is named twice: refused, not sent
    # Every topic config not given is deleted, the null-valued one too: the topic keeps exactly segment.ms.
    assert [(x.name, x.value) for x in t.configs if x.op == apb.SET] == [("segment.ms", "60000")]
    assert {x.name for x in t.configs if x.op == apb.DELETE} == set(TOPIC_CONFIGS) - {"segment.ms"}
    assert [(x.name, x.value) for x in sent.cluster_defaults if x.op == apb.SET] == [("log.retention.ms", "10")]
    deleted = {x.name for x in sent.cluster_defaults if x.op == apb.DELETE}
    assert deleted == set(dynamic_broker_keys()) - {"log.retention.ms"}  # log.segment.bytes (set) among them
    got = [(x.resource_type, x.resource_name, x.error_code) for x in r.responses]
    # Per-broker and logger configs are not served; an unknown type is UNSUPPORTED_VERSION; a duplicate answered once.
    assert got == [(2, "t", 40), (4, "", 0), (4, "2", 42), (8, "2", 42), (99, "x", 35), (2, "u", 42)]
    assert (r.responses[0].error_message, r.responses[-1].error_message) == ("bad value", "Duplicate resource.")


async def test_alter_configs_without_a_reachable_controller_is_not_controller() -> None:
    reg, _ = setup()
    res = AlterConfigsRequest.AlterConfigsResource
    request = AlterConfigsRequest(
        version=2, resources=[res(resource_type=2, resource_name="t", configs=[])], validate_only=False
    )
    r = await call(reg, request, 2)
    assert r.responses[0].error_code == 41


# ---- cluster ----


@pytest.mark.parametrize("version", range(0, 3))
async def test_describe_cluster(version: int) -> None:
    reg, _ = setup()
    r = await call(reg, DescribeClusterRequest(version=version, include_cluster_authorized_operations=False), version)
    assert (r.error_code, r.cluster_id) == (0, "cluster-x")
    # Live brokers with a Kafka address, at that address; the controller (9) is no broker: this one, which forwards.
    assert [(b.broker_id, b.host, b.port, b.rack) for b in r.brokers] == [
        (1, "kafka-1", 9192, "r1"),
        (2, "kafka-2", 9193, None),
    ]
    assert r.controller_id == 2
    assert r.authorized_operations is None
    if version >= 2:
        r = await call(reg, DescribeClusterRequest(version=version, include_fenced_brokers=True), version)
        assert [(b.broker_id, b.is_fenced) for b in r.brokers] == [(1, False), (2, False), (4, True)]


async def test_describe_cluster_controller_endpoints_are_not_on_this_listener() -> None:
    reg, _ = setup()
    r = await call(reg, DescribeClusterRequest(version=1, endpoint_type=2), 1)
    assert r.error_code == 114 and r.brokers == []  # MISMATCHED_ENDPOINT_TYPE


# ---- client quotas ----


@pytest.mark.parametrize("version", range(0, 2))
async def test_describe_client_quotas(version: int) -> None:
    reg, _ = setup()
    r = await call(reg, DescribeClientQuotasRequest(version=version, components=[], strict=False), version)
    assert r.error_code == 0
    got = sorted(
        ([(e.entity_type, e.entity_name) for e in entry.entity], [(v.key, v.value) for v in entry.values])
        for entry in r.entries
    )
    assert got == [
        ([("client-id", None)], [("consumer_byte_rate", 2048.0)]),  # the default client id: a null name
        ([("user", "alice")], [("producer_byte_rate", 1024.0)]),
    ]
    c = DescribeClientQuotasRequest.ComponentData
    exact = DescribeClientQuotasRequest(
        version=version, components=[c(entity_type="user", match_type=0, match="alice")], strict=True
    )
    r = await call(reg, exact, version)
    assert [[e.entity_name for e in entry.entity] for entry in r.entries] == [["alice"]]
    bad = DescribeClientQuotasRequest(version=version, components=[c(entity_type="nobody", match_type=2, match=None)])
    r = await call(reg, bad, version)
    assert r.error_code != 0 and r.error_message


@pytest.mark.parametrize("version", range(0, 2))
async def test_alter_client_quotas(version: int) -> None:
    answer = apb.AlterClientQuotasResponse(
        entries=[
            apb.QuotaAlterationResult(),
            apb.QuotaAlterationResult(error=ErrorCode.INVALID_REQUEST, error_message="bad key"),
        ],
    )
    reg, admin = setup(AlterClientQuotas=answer)
    e = AlterClientQuotasRequest.EntryData
    request = AlterClientQuotasRequest(
        version=version,
        entries=[
            e(
                entity=[e.EntityData(entity_type="client-id", entity_name=None)],
                ops=[e.OpData(key="producer_byte_rate", value=10.0, remove=False)],
            ),
            e(
                entity=[e.EntityData(entity_type="user", entity_name="bob")],
                ops=[e.OpData(key="nonsense", value=0.0, remove=True)],
            ),
        ],
        validate_only=True,
    )
    r = await call(reg, request, version, throttle_ms=2)
    sent = admin.requests["AlterClientQuotas"]
    assert isinstance(sent, apb.AlterClientQuotasRequest)
    assert sent.validate_only
    first, second = sent.entries
    assert [(c.entity_type, c.name, c.is_default) for c in first.entity] == [("client-id", "", True)]
    assert [(c.entity_type, c.name, c.is_default) for c in second.entity] == [("user", "bob", False)]
    assert [(o.key, o.value, o.remove) for o in first.ops] == [("producer_byte_rate", 10.0, False)]
    assert r.throttle_time_ms == 2
    assert [(x.error_code, x.error_message) for x in r.entries] == [(0, None), (42, "bad key")]
    assert [[(c.entity_type, c.entity_name) for c in x.entity] for x in r.entries] == [
        [("client-id", None)],
        [("user", "bob")],
    ]


async def test_alter_client_quotas_without_a_reachable_controller_is_not_controller() -> None:
    reg, _ = setup()
    e = AlterClientQuotasRequest.EntryData
    request = AlterClientQuotasRequest(
        version=1, entries=[e(entity=[e.EntityData(entity_type="user", entity_name="a")], ops=[])], validate_only=False
    )
    r = await call(reg, request, 1)
    assert [x.error_code for x in r.entries] == [41]

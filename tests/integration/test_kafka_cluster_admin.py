"""Kafka's cluster-admin APIs through unmodified Kafka admin clients (kafka-python's KafkaAdminClient and
confluent-kafka's AdminClient) against the Kafka listener of one small real cluster (a controller, three brokers):
log dirs, partition reassignments and leader elections, paged topic descriptions, the metadata quorum, and configs
replaced whole (AlterConfigs) and described with their types."""

from __future__ import annotations

import socket
import struct
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin import ConfigResource as ConfluentResource
from kafka import KafkaAdminClient, TopicPartition
from kafka.admin import ConfigResource, NewTopic
from kafka.errors import NoReassignmentInProgressError
from kafka.protocol.admin.cluster import DescribeQuorumRequest, DescribeQuorumResponse

from odradek.broker.config import NodeConfig
from odradek.deploy.local import DevCluster

from .conftest import start_cluster, wait_for

pytestmark = pytest.mark.integration

CONTROLLER = 1  # node ids: the controller first, then the brokers
BROKERS = (2, 3, 4)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevCluster]:
    c = start_cluster(tmp_path_factory.mktemp("cluster-admin"), controllers=1, brokers=len(BROKERS))
    yield c
    c.stop_all(timeout=10)


@pytest.fixture(scope="module")
def kadmin(cluster: DevCluster) -> Iterator[KafkaAdminClient]:
    a = KafkaAdminClient(bootstrap_servers=cluster.kafka_bootstrap_servers, request_timeout_ms=20000)
    yield a
    a.close()


@pytest.fixture(scope="module")
def cadmin(cluster: DevCluster) -> AdminClient:
    return AdminClient({"bootstrap.servers": cluster.kafka_bootstrap_servers})


def partitions(kadmin: KafkaAdminClient, name: str) -> list[dict[str, Any]]:
    """The topic's partitions as DescribeTopicPartitions gives them, all led (else empty)."""
    [t] = kadmin.describe_topic_partitions([name])["topics"]
    led = t["error_code"] == 0 and t["partitions"] and all(p["leader_id"] >= 0 for p in t["partitions"])
    return t["partitions"] if led else []


def new_topic(kadmin: KafkaAdminClient, count: int, replication: int = 2) -> str:
    name = f"ca-{uuid.uuid4().hex[:8]}"
    kadmin.create_topics([NewTopic(name, num_partitions=count, replication_factor=replication)])
    wait_for(lambda: len(partitions(kadmin, name)) == count, 30, what=f"{name}'s leaders")
    return name


def test_create_topics_answers_what_the_topic_was_given(cluster: DevCluster, kadmin: KafkaAdminClient) -> None:
    """CreateTopics v5+: the partition count and replication factor the controller chose (its defaults for -1) and
    the topic's configs with their sources, for a validate-only creation and a real one."""
    controller = NodeConfig.load(cluster.node(CONTROLLER).config)
    defaults = (controller["num.partitions"], controller["default.replication.factor"])
    name = f"ca-{uuid.uuid4().hex[:8]}"
    for validate_only in (True, False):
        answer = kadmin.create_topics(
            [NewTopic(name, -1, -1, topic_configs={"cleanup.policy": "compact"})], validate_only=validate_only
        )
        [topic] = answer["topics"]
        assert (topic["error_code"], topic["num_partitions"], topic["replication_factor"]) == (0, *defaults)
        configs = topic["configs"]
        assert (configs["cleanup.policy"]["value"], configs["cleanup.policy"]["config_source"]) == (
            "compact",
            "DYNAMIC_TOPIC_CONFIG",
        )
        assert configs["retention.ms"]["config_source"] == "DEFAULT_CONFIG"
    wait_for(lambda: len(partitions(kadmin, name)) == defaults[0], 30, what=f"{name}'s leaders")


def test_describe_log_dirs_answers_each_brokers_own(cluster: DevCluster, kadmin: KafkaAdminClient) -> None:
    name = new_topic(kadmin, 2)
    hosted = {(p["partition_index"], b) for p in partitions(kadmin, name) for b in p["replica_nodes"]}
    dirs = {n.node_id: NodeConfig.load(n.config).log_dirs for n in cluster.nodes if n.kafka_port}

    def replicas_described() -> set[tuple[int, int]]:
        answers = kadmin.describe_log_dirs({name: [0, 1]})
        assert sorted(a["broker"] for a in answers) == list(BROKERS)
        found = set()
        for answer in answers:
            broker = answer["broker"]
            expected_dirs = sorted(str(Path(d).resolve()) for d in dirs[broker])
            assert sorted(d["log_dir"] for d in answer["log_dirs"]) == expected_dirs
            for d in answer["log_dirs"]:
                assert d["error_code"] == 0 and d["total_bytes"] > 0 and 0 <= d["usable_bytes"] <= d["total_bytes"]
                for t in d["topics"]:
                    assert t["name"] == name  # only the topic asked
                    found |= {(p["partition_index"], broker) for p in t["partitions"]}
        return found

    # Every replica, on the broker that holds it: a follower lists its replica once it has applied the topic's
    # creation, which may come after the leaders are known (as with Kafka).
    wait_for(lambda: replicas_described() == hosted, 30, what="every replica in its broker's log dirs")
    assert replicas_described() == hosted


def test_reassign_then_elect_the_preferred_leader(kadmin: KafkaAdminClient) -> None:
    name = new_topic(kadmin, 1)
    [p] = partitions(kadmin, name)
    first, second = p["replica_nodes"]
    [third] = set(BROKERS) - {first, second}
    tp = TopicPartition(name, 0)
    assert kadmin.alter_partition_reassignments({tp: [third, first]}) == {tp: None}
    # The new replica catches up and the reassignment completes; then none is listed and [third, first] remain.
    wait_for(lambda: partitions(kadmin, name)[0]["replica_nodes"] == [third, first], 30, what="the reassignment")
    wait_for(lambda: kadmin.list_partition_reassignments() == {}, 30, what="no reassignment listed")
    assert kadmin.list_partition_reassignments({name: [0]}) == {}
    # Cancelling what is not in progress is Kafka's NO_REASSIGNMENT_IN_PROGRESS.
    assert kadmin.alter_partition_reassignments({tp: None}) == {tp: NoReassignmentInProgressError}
    # The preferred leader is the target's first replica, in sync once the reassignment completed.
    kadmin.elect_leaders(0, {name: [0]})
    wait_for(lambda: partitions(kadmin, name)[0]["leader_id"] == third, 30, what="the preferred leader")


def test_describe_topic_partitions_pages(kadmin: KafkaAdminClient) -> None:
    name = new_topic(kadmin, 3, replication=3)
    page = kadmin.describe_topic_partitions([name], response_partition_limit=2)
    assert [p["partition_index"] for p in page["topics"][0]["partitions"]] == [0, 1]
    assert page["next_cursor"] == {"topic_name": name, "partition_index": 2}
    page = kadmin.describe_topic_partitions([name], response_partition_limit=2, cursor=page["next_cursor"])
    [t] = page["topics"]
    assert [p["partition_index"] for p in t["partitions"]] == [2] and page["next_cursor"] is None
    assert sorted(t["partitions"][0]["replica_nodes"]) == list(BROKERS) and t["partitions"][0]["offline_replicas"] == []


def describe_quorum(cluster: DevCluster, version: int) -> Any:
    """DescribeQuorum over a raw connection to a broker's Kafka listener: kafka-python's describe_metadata_quorum
    reads v2's error messages, which v0 and v1 (all that odradek serves) do not have."""
    node = next(n for n in cluster.nodes if n.kafka_port)
    t = DescribeQuorumRequest.TopicData
    body = DescribeQuorumRequest(
        topics=[t(topic_name="__cluster_metadata", partitions=[t.PartitionData(partition_index=0)])]
    ).encode(version=version)
    header = struct.pack(">hhih", 55, version, 7, 4) + b"test" + b"\x00"  # request header v2: no tagged fields
    with socket.create_connection((node.host, node.kafka_port), timeout=20) as sock:
        sock.sendall(struct.pack(">i", len(header) + len(body)) + header + body)
        with sock.makefile("rb") as f:
            (size,) = struct.unpack(">i", f.read(4))
            frame = f.read(size)
    assert frame[:5] == struct.pack(">i", 7) + b"\x00"  # response header v1: the correlation id, no tagged fields
    return DescribeQuorumResponse.decode(frame[5:], version=version)


@pytest.mark.parametrize("version", [0, 1])
def test_describe_metadata_quorum(cluster: DevCluster, version: int) -> None:
    answer = describe_quorum(cluster, version)
    [t] = answer.topics
    [p] = t.partitions
    assert (answer.error_code, t.topic_name, p.error_code) == (0, "__cluster_metadata", 0)
    assert p.leader_id == CONTROLLER and p.leader_epoch > 0 and p.high_watermark > 0
    [leader] = p.current_voters
    assert leader.replica_id == CONTROLLER and leader.log_end_offset >= p.high_watermark
    observers = {o.replica_id: o for o in p.observers}
    assert set(BROKERS) <= set(observers)  # the brokers replicate the metadata log
    if version >= 1:
        assert leader.last_fetch_timestamp > 0 and leader.last_caught_up_timestamp == leader.last_fetch_timestamp
        assert all(observers[b].last_fetch_timestamp > 0 for b in BROKERS)


def topic_configs(kadmin: KafkaAdminClient, name: str) -> dict[str, dict[str, Any]]:
    answer = kadmin.describe_configs([ConfigResource("TOPIC", name)], include_synonyms=True, config_filter="all")
    return answer["topic"][name]


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated")  # Kafka's AlterConfigs is what is tested
def test_alter_configs_replaces_a_topics_dynamic_configs(kadmin: KafkaAdminClient, cadmin: AdminClient) -> None:
    name = new_topic(kadmin, 1)
    configs = {"retention.ms": "1000", "segment.ms": "60000"}
    kadmin.alter_configs([ConfigResource("TOPIC", name, configs)], incremental=True)
    wait_for(lambda: topic_configs(kadmin, name)["segment.ms"]["value"] == "60000", 30, what="the incremental change")

    # librdkafka's alter_configs is Kafka's AlterConfigs: what it does not name goes back to its default.
    validated = cadmin.alter_configs([ConfluentResource("TOPIC", name, {"retention.ms": "999"})], validate_only=True)
    [f.result(timeout=30) for f in validated.values()]
    assert topic_configs(kadmin, name)["retention.ms"]["value"] == "1000"  # validate_only changed nothing
    replaced = cadmin.alter_configs([ConfluentResource("TOPIC", name, {"retention.ms": "1234"})])
    [f.result(timeout=30) for f in replaced.values()]

    def replaced_whole() -> bool:
        now = topic_configs(kadmin, name)
        return now["retention.ms"]["value"] == "1234" and now["segment.ms"]["config_source"] != "DYNAMIC_TOPIC_CONFIG"

    wait_for(replaced_whole, 30, what="the replacement")
    retention = topic_configs(kadmin, name)["retention.ms"]
    assert (retention["config_source"], retention["config_type"]) == ("DYNAMIC_TOPIC_CONFIG", "LONG")
    synonyms = [(s["name"], s["source"]) for s in retention["synonyms"]]
    assert synonyms[0] == ("retention.ms", "DYNAMIC_TOPIC_CONFIG")
    assert synonyms[-1] == ("log.retention.ms", "DEFAULT_CONFIG")  # down to the built-in default


def test_message_format_version_is_accepted_as_kafka_3_accepts_it(
    kadmin: KafkaAdminClient, cadmin: AdminClient
) -> None:
    """A valid version is stored and described (it has no effect: every batch is v2, as in Kafka 3.x); one Kafka
    3.9 cannot parse is refused with INVALID_CONFIG."""
    name = new_topic(kadmin, 1)
    assert topic_configs(kadmin, name)["message.format.version"]["value"] == "3.0-IV1"  # Kafka 3.x's default
    done = cadmin.alter_configs([ConfluentResource("TOPIC", name, {"message.format.version": "0.10.0.0"})])
    [f.result(timeout=30) for f in done.values()]
    wait_for(lambda: topic_configs(kadmin, name)["message.format.version"]["value"] == "0.10.0.0", 30, what="it")
    refused = cadmin.alter_configs([ConfluentResource("TOPIC", name, {"message.format.version": "4.0"})])
    with pytest.raises(KafkaException) as info:
        [f.result(timeout=30) for f in refused.values()]
    assert info.value.args[0].code() == KafkaError.INVALID_CONFIG


def test_describe_configs_types_and_a_brokers_static_configs(cluster: DevCluster, kadmin: KafkaAdminClient) -> None:
    name = new_topic(kadmin, 1)
    types = {key: c["config_type"] for key, c in topic_configs(kadmin, name).items()}
    assert (types["cleanup.policy"], types["segment.bytes"], types["unclean.leader.election.enable"]) == (
        "LIST",
        "INT",
        "BOOLEAN",
    )
    broker = BROKERS[0]
    node = NodeConfig.load(next(n.config for n in cluster.nodes if n.node_id == broker))
    answer = kadmin.describe_configs([ConfigResource("BROKER", str(broker))], config_filter="all")
    configs = answer["broker"][str(broker)]
    for key, value, kind in (
        ("node.id", str(broker), "INT"),
        ("broker.id", str(broker), "INT"),
        ("log.dirs", ",".join(node.log_dirs), "STRING"),
        ("num.partitions", str(node["num.partitions"]), "INT"),
        ("default.replication.factor", str(node["default.replication.factor"]), "INT"),
        ("auto.create.topics.enable", str(node["auto.create.topics.enable"]).lower(), "BOOLEAN"),
    ):
        c = configs[key]
        # As Kafka: static if the file sets it (broker.id through node.id, its alias), else the default.
        source = "STATIC_BROKER_CONFIG" if node.is_set("node.id" if key == "broker.id" else key) else "DEFAULT_CONFIG"
        assert (c["value"], c["config_source"], c["read_only"], c["config_type"]) == (value, source, True, kind), key
    assert configs["log.retention.ms"]["config_type"] == "LONG" and not configs["log.retention.ms"]["read_only"]

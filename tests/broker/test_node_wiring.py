"""Node keys reach the component that acts on them: a combined node started in-process with non-default values
for each, and the objects it built inspected. The components' own tests show what each value does there."""

from __future__ import annotations

import asyncio
import resource
import socket
import urllib.request
from pathlib import Path

import grpc
import pytest

from odradek.broker.config import NodeConfig
from odradek.broker.fetcher import FetcherConfig
from odradek.broker.log.config import LogConfig
from odradek.broker.log.handles import derived_max_open_fds
from odradek.broker.node import Node
from odradek.broker.process_limits import max_map_count
from odradek.broker.replica_manager import broker_log_config, topic_log_config
from odradek.broker.storage import format_storage
from odradek.client.connection import channel_options
from odradek.deploy.process import free_port
from odradek.proto import broker_pb2 as pb
from odradek.proto import broker_pb2_grpc

LOG_DEFAULTS = {
    "message.max.bytes": 5000,
    "log.segment.bytes": 100_000,
    "log.roll.ms": 60_000,
    "log.retention.ms": 120_000,
    "log.retention.bytes": 1_000_000,
    "log.flush.interval.messages": 7,
    "log.flush.interval.ms": 900,
    "log.index.size.max.bytes": 4096,
    "log.index.interval.bytes": 128,
    "producer.id.expiration.ms": 5_000,
}


def test_broker_log_defaults_become_the_log_config() -> None:
    """Every log.* default (and message.max.bytes, producer.id.expiration.ms) is the topic-level setting's default."""
    config = NodeConfig(
        {
            "process.roles": "broker",
            "node.id": 1,
            "controller.quorum.voters": "2@h:1",
            **LOG_DEFAULTS,
        }
    )
    assert broker_log_config(config) == LogConfig(
        max_message_bytes=5000,
        segment_bytes=100_000,
        segment_ms=60_000,
        retention_ms=120_000,
        retention_bytes=1_000_000,
        flush_messages=7,
        flush_ms=900,
        segment_index_bytes=4096,
        index_interval_bytes=128,
        producer_id_expiration_ms=5_000,
    )


def test_topic_configs_override_the_broker_log_defaults() -> None:
    """The topic-level log settings (flush.messages, index.interval.bytes, segment.index.bytes, ...) reach the
    partition's log; the others (min.insync.replicas, unclean.*, cleanup.policy) are not the log's."""
    topic = {
        "flush.messages": "3",
        "flush.ms": "40",
        "index.interval.bytes": "64",
        "segment.index.bytes": "1024",
        "segment.bytes": "5000",
        "segment.ms": "6000",
        "retention.ms": "7000",
        "retention.bytes": "8000",
        "max.message.bytes": "900",
        "message.timestamp.type": "LogAppendTime",
        "compression.type": "zstd",
        "min.insync.replicas": "2",
        "cleanup.policy": "delete",
    }
    assert topic_log_config(LogConfig(), topic) == LogConfig(
        flush_messages=3,
        flush_ms=40,
        index_interval_bytes=64,
        segment_index_bytes=1024,
        segment_bytes=5000,
        segment_ms=6000,
        retention_ms=7000,
        retention_bytes=8000,
        max_message_bytes=900,
        message_timestamp_type="LogAppendTime",
        compression_type="zstd",
    )


def test_a_compact_only_topic_is_never_deleted_by_retention() -> None:
    """Retention by time or size applies to ``delete`` policies only (Kafka): the compacted offsets topic keeps
    every segment whatever the broker's or its own retention settings say."""
    base = LogConfig(retention_ms=1000, retention_bytes=100)
    compact = topic_log_config(base, {"cleanup.policy": "compact", "retention.ms": "5"})
    assert (compact.retention_ms, compact.retention_bytes) == (-1, -1)
    both = topic_log_config(base, {"cleanup.policy": "compact,delete"})
    assert (both.retention_ms, both.retention_bytes) == (1000, 100)
    assert topic_log_config(base, {}).retention_ms == 1000
    neither = topic_log_config(base, {"cleanup.policy": "", "retention.ms": "5"})  # an empty list keeps everything
    assert (neither.retention_ms, neither.retention_bytes) == (-1, -1)


def test_listener_names_pick_the_controller_listener_and_advertised_overrides_the_broker_address() -> None:
    config = NodeConfig(
        {
            "process.roles": "broker,controller",
            "node.id": 1,
            "controller.quorum.voters": "1@127.0.0.1:7001",
            "listeners": "CTRL://127.0.0.1:7001,DATA://0.0.0.0:7002",
            "controller.listener.names": "CTRL",
            "advertised.listeners": "DATA://db.example:9999",
        }
    )
    assert str(config.controller_listener) == "127.0.0.1:7001"
    assert str(config.broker_listener) == "0.0.0.0:7002"
    assert str(config.advertised_broker_listener) == "db.example:9999"
    default = NodeConfig({"process.roles": "broker", "node.id": 1, "controller.quorum.voters": "2@h:1"})
    assert default.advertised_broker_listener == default.broker_listener  # no advertised.listeners: the listener


def node_config(tmp_path: Path, broker: int | None = None, **extra: object) -> NodeConfig:
    """A combined node's formatted config, its broker listener on ``broker`` (default: a free port)."""
    controller, broker = free_port(), broker or free_port()
    config = NodeConfig(
        {
            "process.roles": "broker,controller",
            "node.id": 1,
            "controller.quorum.voters": f"1@127.0.0.1:{controller}",
            "listeners": f"PLAINTEXT://127.0.0.1:{broker},CONTROLLER://127.0.0.1:{controller}",
            "log.dirs": str(tmp_path / "data"),
            **extra,
        }
    )
    format_storage(config, "wiring-test")
    return config


async def start_node(tmp_path: Path, **extra: object) -> Node:
    n = Node(node_config(tmp_path, **extra))
    await n.start()
    return n


@pytest.fixture
async def node(tmp_path: Path):
    n = await start_node(
        tmp_path,
        **{
            "advertised.listeners": "PLAINTEXT://advertised.example:9999",
            "metadata.log.dir": str(tmp_path / "meta"),
            "broker.rack": "rack-b",
            "metrics.port": free_port(),
            "metadata.log.max.snapshot.interval.records": 123,
            "broker.heartbeat.interval.ms": 700,
            "broker.session.timeout.ms": 8_000,
            "num.partitions": 3,
            "default.replication.factor": 1,
            "max.partitions.per.broker": 50,
            "min.insync.replicas": 2,
            "unclean.leader.election.enable": True,
            "unclean.recovery.strategy": "manual",
            "controller.quorum.election.timeout.ms": 1500,
            "controller.quorum.fetch.timeout.ms": 3500,
            "leader.imbalance.check.interval.seconds": 42,
            "leader.imbalance.per.broker.percentage": 33,
            "replica.fetch.max.bytes": 11_111,
            "replica.fetch.min.bytes": 22,
            "replica.fetch.response.max.bytes": 33_333,
            "replica.fetch.wait.max.ms": 444,
            "replica.fetch.backoff.ms": 555,
            "replica.fetch.protocol": "grpc",
            "replica.alter.log.dirs.io.max.bytes.per.second": 5_000_000,
            "log.max.open.files": 77,
            "log.retention.check.interval.ms": 6_000,
            "socket.request.max.bytes": 200_000,
            "quota.window.num": 7,
            "quota.window.size.seconds": 3,
            "unsafe.testing.bug": "ack-before-replication",
            **LOG_DEFAULTS,
        },
    )
    try:
        yield n
    finally:
        await n.stop()


async def test_a_started_node_hands_each_key_to_its_component(node: Node, tmp_path: Path) -> None:
    raft = node.driver.config
    assert (raft.election_timeout_ticks, raft.fetch_timeout_ticks) == (1500 // 50, 3500 // 50)
    assert node.driver.directory == tmp_path / "meta" / "__raft"
    assert node.sm.snapshot_interval == 123
    assert node.controller is not None
    assert (node.controller.rebalance_interval_s, node.controller.imbalance_percentage) == (42, 33)
    assert node.admin_service.defaults == {
        "num.partitions": 3,
        "default.replication.factor": 1,
        "max.partitions.per.broker": 50,
    }
    assert (node._min_isr("t"), node._unclean_allowed("t"), node._recovery_strategy("t")) == (2, True, "manual")
    assert node.broker.fetchers.config == FetcherConfig(
        max_wait_ms=444,
        min_bytes=22,
        partition_max_bytes=11_111,
        response_max_bytes=33_333,
        backoff_ms=555,
        protocol="grpc",
    )
    assert node.broker.logs.manager_config.max_open_fds == 77
    assert node.broker.logs.handles.max_open == 77 // 3  # segments with their 3 fds each
    assert node.broker.logs.manager_config.retention_check_interval_ms == 6_000
    assert node.broker.logs.default_config == broker_log_config(node.config)
    assert node.broker.replicas.unsafe_bug == "ack-before-replication"
    assert node.broker.log_dir_moves.throttle.rate == 5_000_000
    for manager in (node.broker.quotas.produce, node.broker.quotas.fetch, node.broker.quotas.request):
        assert (manager.config.num_samples, manager.config.window_ms) == (7, 3000)
    lifecycle = node.broker.lifecycle
    assert (lifecycle.listener.host, lifecycle.listener.port) == ("advertised.example", 9999)  # what it registers
    assert (lifecycle.listener.rack, lifecycle.interval, lifecycle.session_timeout) == ("rack-b", 0.7, 8.0)
    with urllib.request.urlopen(f"http://127.0.0.1:{node.config['metrics.port']}/metrics", timeout=5) as page:
        assert b"odradek_" in page.read()


async def test_auto_leader_rebalance_enable_false_turns_the_rebalance_off(tmp_path: Path) -> None:
    n = await start_node(tmp_path, **{"auto.leader.rebalance.enable": False})
    try:
        assert n.controller is not None and n.controller.rebalance_interval_s is None
    finally:
        await n.stop()


async def test_socket_request_max_bytes_refuses_a_larger_request(node: Node) -> None:
    endpoint = node.config.broker_listener
    big = pb.ProduceRequest(acks=1, timeout_ms=1000, topics=[pb.ProduceTopic(name="t")])
    big.topics[0].partitions.add(partition=0, records=b"x" * 300_000)
    async with grpc.aio.insecure_channel(f"{endpoint}", options=channel_options(10 << 20)) as channel:
        stub = broker_pb2_grpc.BrokerStub(channel)
        try:
            await stub.Produce(big, timeout=10)
        except grpc.aio.AioRpcError as e:
            assert e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, e
        else:
            raise AssertionError("a request above socket.request.max.bytes was accepted")
        small = pb.ProduceRequest(acks=1, timeout_ms=1000, topics=[pb.ProduceTopic(name="t")])
        small.topics[0].partitions.add(partition=0, records=b"x" * 100_000)
        await stub.Produce(small, timeout=10)  # answered (with a per-partition error: no such topic)


async def test_a_topic_created_without_counts_gets_the_node_defaults(node: Node) -> None:
    """num.partitions and default.replication.factor answer -1 (the cluster default) in CreateTopics."""
    from odradek.client.admin import AsyncAdmin

    async with asyncio.timeout(20):  # the node's controller is active and has unfenced the broker
        await node.broker.lifecycle.registered.wait()
        while not node.sm.image.active_brokers():  # registered but still fenced: no broker to place replicas on
            await asyncio.sleep(0.02)
    async with AsyncAdmin({"bootstrap.servers": str(node.config.broker_listener), "request.timeout.ms": 20_000}) as a:
        await a.create_topic("defaulted", -1, -1)
        info = await a.describe_topic("defaulted")
    assert len(info.partitions) == 3 and all(len(p.replicas) == 1 for p in info.partitions)


async def test_a_node_whose_port_is_taken_does_not_start(tmp_path: Path) -> None:
    """Another process listening on the broker port with SO_REUSEPORT (as every gRPC server does by default) must not
    end up sharing it with the node: connections would land on either. The node refuses to start, naming the port."""
    broker = free_port()
    holder = socket.socket()
    holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    holder.bind(("127.0.0.1", broker))
    holder.listen()
    try:
        with pytest.raises(OSError, match=f"cannot listen on 127.0.0.1:{broker} \\(listener PLAINTEXT\\)"):
            await Node(node_config(tmp_path, broker)).start()
    finally:
        holder.close()


async def test_a_broker_raises_its_open_file_limit_and_derives_its_open_segments_from_it(tmp_path: Path) -> None:
    """log.max.open.files unset: the broker raises its soft open-file limit to the hard one (as the JVM does for
    Kafka's brokers) and lets open segments hold half of it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(soft, 900), hard))
    try:
        n = await start_node(tmp_path)
        try:
            assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] == hard
            assert n.broker is not None
            derived = derived_max_open_fds(hard, max_map_count())
            assert n.broker.logs.manager_config.max_open_fds == derived
            assert n.broker.logs.handles.max_open == derived // 3
        finally:
            await n.stop()
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))

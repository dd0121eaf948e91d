"""Coordinator failover with real processes: three consumers of one group consume and commit (synchronously,
after processing each poll's records) under a steady acks=all produce load; the broker leading the group's
``__consumer_offsets`` partition is SIGKILLed. The group must go on with the new coordinator (members keep
consuming and committing), no acknowledged commit may be lost or go backwards (the committed offset fetched
afterwards is >= every commit a member saw acknowledged), and every acknowledged record is consumed."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator

import grpc
import pytest

from odradek.client import Consumer, Producer, TopicPartition
from odradek.client.errors import ErrorCode
from odradek.proto import group_pb2 as gpb
from odradek.proto import group_pb2_grpc

from .conftest import FAST, wait_for

NODE = {
    **FAST,
    "offsets.topic.num.partitions": 3,
    "offsets.topic.replication.factor": 3,
    "group.initial.rebalance.delay.ms": 300,
    "replica.lag.time.max.ms": 3000,
    "replica.fetch.wait.max.ms": 200,
}
TOPIC = "fo"
PARTITIONS = 6
GROUP = "failover"
TOPICS = {TOPIC: {"partitions": PARTITIONS, "replication_factor": 3, "configs": {"min.insync.replicas": "2"}}}
pytestmark = [
    pytest.mark.integration,
    pytest.mark.odradek_cluster(controllers=1, brokers=3, config=NODE, topics=TOPICS, shared=False),
]


class Load(threading.Thread):
    """Steady acks=all writes, round-robin over the partitions; keeps the (partition, offset) of every ack."""

    def __init__(self, servers: str) -> None:
        super().__init__(daemon=True, name="load")
        self.servers = servers
        self.acked: set[tuple[int, int]] = set()
        self.stop_event = threading.Event()

    def run(self) -> None:
        config = {
            "bootstrap.servers": self.servers,
            "acks": "all",
            "linger.ms": 5,
            "request.timeout.ms": 5000,
            "delivery.timeout.ms": 30000,
        }
        with Producer(config) as producer:
            for n in range(100_000):
                if self.stop_event.wait(0.01):
                    break
                future = producer.send(TOPIC, f"v{n}".encode(), partition=n % PARTITIONS)
                future.add_done_callback(self._record)
            producer.flush(40)

    def _record(self, future) -> None:
        if future.exception(0) is None:
            meta = future.result(0)
            self.acked.add((meta.partition, meta.offset))


class Member(threading.Thread):
    """A group member that commits what it processed after every poll and keeps each acknowledged commit."""

    def __init__(self, servers: str, name: str) -> None:
        super().__init__(daemon=True, name=name)
        self.config = {
            "bootstrap.servers": servers,
            "group.id": GROUP,
            "client.id": name,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 500,
            "fetch.max.wait.ms": 100,
            "request.timeout.ms": 5000,
        }
        self.consumed: set[tuple[int, int]] = set()
        self.commits: list[tuple[float, int, int]] = []  # (time acknowledged, partition, offset)
        self.errors: list[str] = []
        self.stop_event = threading.Event()

    def run(self) -> None:
        with Consumer(self.config) as consumer:
            consumer.subscribe([TOPIC])
            while not self.stop_event.is_set():
                try:
                    records = consumer.poll(100)
                    if not records:
                        continue
                    ends: dict[int, int] = {}
                    for r in records:
                        self.consumed.add((r.partition, r.offset))
                        ends[r.partition] = max(ends.get(r.partition, 0), r.offset + 1)
                    consumer.commit({TopicPartition(TOPIC, p): o for p, o in ends.items()})
                    acked_at = time.monotonic()
                    self.commits += [(acked_at, p, o) for p, o in ends.items()]
                except Exception as e:  # mid-failover or mid-rebalance: the next poll goes on
                    self.errors.append(repr(e))
                    self.stop_event.wait(0.2)


@pytest.fixture
def running(odradek_cluster) -> Iterator[tuple[Load, list[Member]]]:
    servers = odradek_cluster.bootstrap_servers
    load = Load(servers)
    members = [Member(servers, f"m{i}") for i in range(3)]
    load.start()
    for m in members:
        m.start()
    yield load, members
    load.stop_event.set()
    for m in members:
        m.stop_event.set()
    for t in [load, *members]:
        t.join(30)


def find_coordinator(servers: str) -> tuple[int, str]:
    """(node id, address) of the group's coordinator, asked of the first broker that answers."""
    for address in servers.split(","):
        try:
            with grpc.insecure_channel(address) as channel:
                request = gpb.FindCoordinatorRequest(keys=[GROUP])
                found = group_pb2_grpc.GroupCoordinatorStub(channel).FindCoordinator(request, timeout=5)
        except grpc.RpcError:
            continue
        c = found.coordinators[0]
        if c.error == ErrorCode.NONE:
            return c.node_id, f"{c.host}:{c.port}"
    raise LookupError("no broker named a coordinator")


def fetch_committed(address: str) -> dict[int, int]:
    request = gpb.OffsetFetchRequest(
        group_id=GROUP, topics=[gpb.OffsetFetchTopic(name=TOPIC, partitions=list(range(PARTITIONS)))]
    )
    with grpc.insecure_channel(address) as channel:
        response = group_pb2_grpc.GroupCoordinatorStub(channel).OffsetFetch(request, timeout=10)
    assert response.error == ErrorCode.NONE, response
    return {p.partition: p.committed_offset for t in response.topics for p in t.partitions}


def test_sigkill_of_the_coordinator_loses_no_acknowledged_commit(odradek_cluster, running) -> None:
    cluster = odradek_cluster
    load, members = running
    servers = cluster.bootstrap_servers
    wait_for(lambda: all(len(m.commits) >= 5 for m in members), 60, what="every member commits")
    node, _ = find_coordinator(servers)
    killed_at = time.monotonic()
    cluster.signal(node, signal.SIGKILL)
    survivors = ",".join(f"{n.host}:{n.broker_port}" for n in cluster.nodes if n.broker_port and n.node_id != node)

    def moved() -> tuple[int, str] | None:
        found = find_coordinator(survivors)
        return found if found[0] != node else None

    new_node, new_address = wait_for(moved, 30, what="a new coordinator")
    wait_for(
        lambda: sum(1 for m in members for t, _, _ in m.commits if t > killed_at) >= 20,
        45,
        what="commits acknowledged by the new coordinator",
    )
    load.stop_event.set()
    load.join(60)
    acknowledged = set(load.acked)
    assert len(acknowledged) > 300
    wait_for(
        lambda: set().union(*(m.consumed for m in members)) >= acknowledged,
        60,
        what="every acknowledged record consumed by the group",
    )
    for m in members:  # no commit from now on: the highest acknowledged commits are final
        m.stop_event.set()
    for m in members:
        m.join(30)
    highest: dict[int, int] = {}
    for m in members:
        for _, p, o in m.commits:
            highest[p] = max(highest.get(p, 0), o)
    committed = fetch_committed(new_address)
    after = sum(1 for m in members for t, _, _ in m.commits if t > killed_at)
    print(f"coordinator {node} -> {new_node}; acked {len(acknowledged)}; commits {after} after the kill; {committed}")
    assert sorted(highest) == list(range(PARTITIONS))
    behind = {p: (committed.get(p), o) for p, o in highest.items() if committed.get(p, -1) < o}
    assert not behind, f"(fetched, acknowledged) per partition: {behind}"
    # Each member went on after the kill, not only one of them.
    assert all(any(t > killed_at for t, _, _ in m.commits) for m in members), [m.errors[-3:] for m in members]
    assert new_node != node

"""The transaction coordinator SIGKILLed right after EndTxn: every partition of the transaction still gets its
marker, from the coordinator that takes over and finds the transaction in PrepareCommit.

The instant is reached on purpose: one partition's leader is paused before the commit, so the coordinator cannot
finish writing markers before it is killed (EndTxn is answered once PrepareCommit is durable, before any marker)."""

from __future__ import annotations

import signal
import time

import pytest

from odradek.client import Admin, Consumer, Producer, TopicPartition

from .conftest import FAST, wait_for

NODE = {
    **FAST,
    "transaction.state.log.num.partitions": 1,
    "offsets.topic.num.partitions": 1,
    "replica.lag.time.max.ms": 2000,
}
pytestmark = [
    pytest.mark.integration,
    pytest.mark.odradek_cluster(controllers=1, brokers=3, config=NODE, shared=False),
]
TOPIC = "kill-after-end"
PARTITIONS = 3


def read_committed(servers: str, timeout: float) -> list[tuple[int, bytes]]:
    out: list[tuple[int, bytes]] = []
    with Consumer(
        {"bootstrap.servers": servers, "isolation.level": "read_committed", "auto.offset.reset": "earliest"}
    ) as consumer:
        consumer.assign([TopicPartition(TOPIC, p) for p in range(PARTITIONS)])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and len(out) < 3 * PARTITIONS:
            out += [(r.partition, r.value) for r in consumer.poll(timeout_ms=200)]
    return sorted(out)


def test_markers_reach_every_partition_after_the_coordinator_dies_right_after_end_txn(odradek_cluster) -> None:
    cluster = odradek_cluster
    servers = cluster.bootstrap_servers
    with Admin({"bootstrap.servers": servers}) as admin:
        admin.create_topic(TOPIC, PARTITIONS, 1)
        wait_for(lambda: all(p.leader > 0 for p in admin.describe_topic(TOPIC).partitions), 30, what="leaders")
        producer = Producer({"bootstrap.servers": servers, "transactional.id": "kill-after-end"})
        try:
            producer.init_transactions()
            coordinator = admin.describe_transactions(["kill-after-end"])[0].coordinator
            leaders = {p.partition: p.leader for p in admin.describe_topic(TOPIC).partitions}
            paused = next(leader for leader in leaders.values() if leader != coordinator)
            producer.begin_transaction()
            for p in range(PARTITIONS):
                for i in range(3):
                    producer.send(TOPIC, b"p%d-%d" % (p, i), partition=p)
            producer.flush()
            cluster.signal(paused, signal.SIGSTOP)
            try:
                producer.commit_transaction()  # answered once PrepareCommit is durable (the ISR shrank)
                cluster.signal(coordinator, signal.SIGKILL)
            finally:
                cluster.signal(paused, signal.SIGCONT)
            assert admin.describe_transactions(["kill-after-end"])[0].state in ("PrepareCommit", "CompleteCommit")
        finally:
            producer.close(timeout=0)
        cluster.start(coordinator)
        wait_for(
            lambda: admin.describe_transactions(["kill-after-end"])[0].state == "CompleteCommit",
            60,
            what="the new coordinator to complete the commit",
        )
    expected = sorted((p, b"p%d-%d" % (p, i)) for p in range(PARTITIONS) for i in range(3))
    assert read_committed(servers, 30) == expected

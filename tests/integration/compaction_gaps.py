"""A compacted partition with known offset gaps, shared by the client and Spark source tests: the node config
that makes the cleaner prompt, the rounds that leave removed offsets at the start, end and middle of batches, and
the wait until the cleaner has removed every superseded record."""

from __future__ import annotations

from typing import Any

from odradek.client import Admin, Consumer, Producer, TopicPartition
from odradek.client.structs import ConsumerRecord

from .conftest import FAST, wait_for

NODE = {**FAST, "log.cleaner.backoff.ms": 200}
COMPACT = {"cleanup.policy": "compact", "segment.bytes": "2000", "min.cleanable.dirty.ratio": "0"}
END = 100  # the log end offset of the gaps partition
FIRST, SECOND = [f"a{i}" for i in range(10)], [f"b{i}" for i in range(10)]
ROUNDS = [
    FIRST,  # 0-9: superseded whole by the next round
    FIRST,  # 10-19: its last five (15-19) superseded by the next round; the batch keeps its last offset
    FIRST[5:],  # 20-24
    SECOND,  # 25-34: its first five superseded by the next round
    SECOND[:5],  # 35-39
    *([f"f{r}-{i}" for i in range(10)] for r in range(6)),  # 40-99: unique keys rolling the above into sealed
]
SURVIVING = [*range(10, 15), *range(20, 25), *range(30, END)]

Record = tuple[int, bytes | None, bytes | None]


def produce_rounds(cluster: Any, topic: str, rounds: list[list[str]]) -> dict[str, tuple[int, bytes]]:
    """Each round's keys as one batch (flushed before the next); returns each key's last (offset, value)."""
    last: dict[str, tuple[int, bytes]] = {}
    config = {"bootstrap.servers": cluster.bootstrap_servers, "linger.ms": 1000, "batch.size": 64 * 1024}
    with Producer(config) as p:
        for n, keys in enumerate(rounds):
            sent = [(k, f"{k}@{n}".encode().ljust(60, b".")) for k in keys]
            futures = [(k, v, p.send(topic, v, key=k, partition=0)) for k, v in sent]
            p.flush(30)
            for k, v, f in futures:
                last[k] = (f.result(10).offset, v)
    return last


def read_all(consumer: Consumer, tp: TopicPartition, end: int) -> list[ConsumerRecord]:
    """Poll until the position reaches ``end`` (bounded)."""
    out: list[ConsumerRecord] = []
    wait_for(lambda: out.extend(consumer.poll(timeout_ms=200)) or consumer.position(tp) >= end, 30, what="the end")
    return out


def compacted_with_gaps(cluster: Any, topic: str) -> list[Record]:
    """Create ``topic`` (1 partition) with ROUNDS in it, wait until the cleaner has removed every superseded
    record, and return the survivors (offset, key, value) in offset order: offsets SURVIVING of 0..END."""
    with Admin({"bootstrap.servers": cluster.admin_servers}) as admin:
        admin.create_topic(topic, 1, 1, COMPACT)
    last = produce_rounds(cluster, topic, ROUNDS)
    expected = sorted((offset, key.encode(), value) for key, (offset, value) in last.items())
    assert [o for o, _, _ in expected] == SURVIVING
    tp = TopicPartition(topic, 0)
    config = {"bootstrap.servers": cluster.bootstrap_servers, "auto.offset.reset": "earliest"}

    def survivors() -> list[Record]:
        with Consumer(config) as c:
            c.assign([tp])
            return [(r.offset, r.key, r.value) for r in read_all(c, tp, END)]

    wait_for(lambda: survivors() == expected, 60, what="the cleaner removing every superseded record")
    return expected

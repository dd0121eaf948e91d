"""Log compaction on a real cluster of three brokers: compaction lags and the dirty ratio, a replica offline past
``delete.retention.ms`` that comes back and leads without any deleted key, a live switch of ``cleanup.policy`` on
every replica, and ``__consumer_offsets`` staying small under a steady commit load."""

from __future__ import annotations

import contextlib
import signal
import time
from typing import Any

import pytest

from odradek.client import Admin, Consumer, Producer
from odradek.deploy.process import process_state

from .compaction import consume_all, last_values, partition_dir, produce_keyed, replica_records
from .conftest import FAST, wait_for

BROKERS = (2, 3, 4)  # node 1 is the controller
NODE = {
    **FAST,
    "log.cleaner.backoff.ms": 100,
    "log.cleaner.dedupe.buffer.size": 4 * 1024 * 1024,
    "log.retention.check.interval.ms": 200,
    "offsets.topic.num.partitions": 1,
    "offsets.topic.segment.bytes": 4096,
    "replica.lag.time.max.ms": 3000,
}
pytestmark = [
    pytest.mark.integration,
    pytest.mark.odradek_cluster(controllers=1, brokers=3, config=NODE, shared=False),
]
SEGMENT = "2048"


def compacted(**extra: str) -> dict[str, str]:
    return {"cleanup.policy": "compact", "segment.bytes": SEGMENT, **extra}


def updates(keys: int, rounds: int, tag: str = "v") -> list[tuple[bytes, bytes | None]]:
    return [(b"k%03d" % k, b"%s%d-%d" % (tag.encode(), r, k) + b"." * 40) for r in range(rounds) for k in range(keys)]


def on_every_replica(cluster: Any, topic: str, check) -> bool:
    found = [replica_records(cluster, b, topic) for b in BROKERS]
    return all(r is not None and check(r) for r in found)


YOUNG_LAG_MS = 10_000  # well above what the steps before the "still young" check take on a loaded machine


def test_min_compaction_lag_keeps_young_records_and_max_lag_cleans_a_quiet_log(odradek_cluster) -> None:
    cluster = odradek_cluster
    with Admin({"bootstrap.servers": cluster.admin_servers}) as admin:
        admin.create_topic(
            "young", 1, 3, compacted(**{"min.cleanable.dirty.ratio": "0", "min.compaction.lag.ms": str(YOUNG_LAG_MS)})
        )
        admin.create_topic("quiet", 1, 3, compacted(**{"min.cleanable.dirty.ratio": "0", "segment.ms": "1000"}))
        written = time.monotonic()
        produce_keyed(cluster, "young", updates(10, 8))
        quiet_started = time.monotonic()
        produce_keyed(cluster, "quiet", updates(10, 8))
        wait_for(lambda: on_every_replica(cluster, "quiet", lambda r: len(r) < 80), 30, what="quiet cleaned once")

        # A little new dirty data, far below the ratio now asked for: only max.compaction.lag.ms cleans it. The
        # oldest dirty record is not a new one but the first of the segment that was active during that cleaning,
        # written at the earliest when the first records were: the lag counts from there.
        admin.alter_topic_configs(
            "quiet", set_configs={"min.cleanable.dirty.ratio": "0.99", "max.compaction.lag.ms": "8000"}
        )
        produce_keyed(cluster, "quiet", updates(10, 2, tag="w"))
        time.sleep(1.1)
        produce_keyed(cluster, "quiet", [(b"tail", b"x")])  # rolls (segment.ms): the new records are cleanable

    def fresh(records) -> int:
        return sum(1 for _, _, v in records if v is not None and v.startswith(b"w"))

    time.sleep(2.5)  # several cleaner rounds: neither is cleaned (too young; dirty ratio below 0.99)
    assert time.monotonic() - written < YOUNG_LAG_MS / 1000, "the steps above took longer than the lag they test"
    assert on_every_replica(cluster, "young", lambda r: len(r) == 80)
    assert on_every_replica(cluster, "quiet", lambda r: fresh(r) == 20)
    wait_for(lambda: on_every_replica(cluster, "young", lambda r: len(r) < 80), 30, what="young records cleaned")
    assert time.monotonic() - written >= YOUNG_LAG_MS / 1000
    wait_for(lambda: on_every_replica(cluster, "quiet", lambda r: fresh(r) == 10), 30, what="max lag cleaning")
    assert time.monotonic() - quiet_started >= 8.0
    assert last_values(consume_all(cluster, "young")) == last_values([(0, k, v) for k, v in updates(10, 8)])
    expected = last_values([(0, k, v) for k, v in [*updates(10, 2, tag="w"), (b"tail", b"x")]])
    assert last_values(consume_all(cluster, "quiet")) == expected


def test_a_replica_offline_past_delete_retention_comes_back_and_leads_without_deleted_keys(odradek_cluster) -> None:
    cluster = odradek_cluster
    topic = "deletes"
    # One producer throughout: the cleaner keeps the last batch of every producer id whole.
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "linger.ms": 5, "batch.size": 1024})
    with producer, Admin({"bootstrap.servers": cluster.admin_servers}) as admin:
        admin.create_topic(
            topic,
            1,
            3,
            compacted(**{"min.cleanable.dirty.ratio": "0", "delete.retention.ms": "500", "segment.ms": "1000"}),
        )
        leader = admin.describe_topic(topic).partitions[0].leader
        away = next(b for b in BROKERS if b != leader)
        produce_keyed(cluster, topic, [(b"gone-%d" % i, b"old") for i in range(5)] + [(b"kept", b"v1")], producer)
        wait_for(lambda: on_every_replica(cluster, topic, lambda r: len(r) == 6), 20, what="replicated")
        cluster.signal(away, signal.SIGKILL)

        # deleted while it is away; the deletes' segments roll and are cleaned long past delete.retention.ms
        produce_keyed(cluster, topic, [(b"gone-%d" % i, None) for i in range(5)] + updates(20, 3), producer)
        time.sleep(1.2)  # segment.ms: the next record rolls the segment holding the tail
        produce_keyed(cluster, topic, [(b"tail", b"x")], producer)
        others = [b for b in BROKERS if b != away]

        def superseded_gone(records) -> bool:
            keys = [k for _, k, _ in records]
            return keys.count(b"gone-0") == 1 and keys.count(b"k000") == 1

        wait_for(
            lambda: all((r := replica_records(cluster, b, topic)) is not None and superseded_gone(r) for b in others),
            30,
            what="the others cleaned",
        )
        time.sleep(1.5)  # past delete.retention.ms, several more passes
        for b in others:  # the tombstones stay: the replica that is away has not reached them
            records = replica_records(cluster, b, topic)
            assert records is not None
            assert last_values(records)[b"gone-0"] is None and b"gone-0" in last_values(records)

        # it comes back, catches up, and is the only replica left to lead
        cluster.start(away)
        wait_for(lambda: away in admin.describe_topic(topic).partitions[0].isr, 60, what="back in the ISR")
        for b in others:
            cluster.signal(b, signal.SIGTERM)
        wait_for(
            lambda: admin.describe_topic(topic).partitions[0].leader == away, 60, what="the returning replica leads"
        )
        seen = last_values(consume_all(cluster, topic))
        assert all(seen.get(b"gone-%d" % i) is None for i in range(5)), "a deleted key came back"
        assert seen[b"kept"] == b"v1"
        for b in others:
            wait_for(lambda b=b: process_state(cluster.node(b).pid) == "stopped", 30, what=f"broker {b} stopped")
            cluster.start(b)
        wait_for(lambda: len(admin.describe_topic(topic).partitions[0].isr) == 3, 60, what="all back in the ISR")

        # once every replica has them, the tombstones go everywhere (delete.retention.ms passed long ago)
        produce_keyed(cluster, topic, [(b"tail", b"y")], producer)
        time.sleep(1.2)
        produce_keyed(cluster, topic, [(b"tail", b"z")], producer)
        wait_for(
            lambda: on_every_replica(cluster, topic, lambda r: b"gone-0" not in {k for _, k, _ in r}),
            60,
            what="tombstones removed on every replica",
        )


def test_switching_cleanup_policy_to_compact_live_compacts_every_replica(odradek_cluster) -> None:
    cluster = odradek_cluster
    with Admin({"bootstrap.servers": cluster.admin_servers}) as admin:
        admin.create_topic("switch", 1, 3, {"segment.bytes": SEGMENT, "min.cleanable.dirty.ratio": "0"})
        acked = produce_keyed(cluster, "switch", updates(10, 8))
        time.sleep(1.0)  # a delete topic is never cleaned
        assert on_every_replica(cluster, "switch", lambda r: len(r) == 80)
        admin.alter_topic_configs("switch", set_configs={"cleanup.policy": "compact"})
        wait_for(lambda: on_every_replica(cluster, "switch", lambda r: len(r) < 80), 30, what="compacted live")
    # every surviving record is the one acknowledged at its offset, and every key keeps its last value
    by_offset = {o: (k, v) for o, k, v in acked}
    for b in BROKERS:
        records = replica_records(cluster, b, "switch")
        assert records is not None
        assert all(by_offset[o] == (k, v) for o, k, v in records)
        assert [o for o, _, _ in records] == sorted(o for o, _, _ in records)
    assert last_values(consume_all(cluster, "switch")) == last_values(acked)


def test_the_offsets_topic_stays_small_under_a_steady_commit_load(odradek_cluster) -> None:
    cluster = odradek_cluster
    with Admin({"bootstrap.servers": cluster.admin_servers}) as admin:
        admin.create_topic("work", 1, 3)
    with Producer({"bootstrap.servers": cluster.bootstrap_servers}) as p:
        p.send_and_wait("work", b"x", partition=0)
    config = {"bootstrap.servers": cluster.bootstrap_servers, "group.id": "committer", "enable.auto.commit": False}
    sizes = []
    with Consumer(config) as c:
        c.assign([("work", 0)])
        for i in range(3000):  # each commit is ~100 bytes: 300 KB written over the run, on every replica
            c.commit({("work", 0): i})
            if i % 500 == 499:
                sizes.append(max(_offsets_size(cluster, b) for b in BROKERS))
        assert c.committed([("work", 0)])[("work", 0)].offset == 2999
    # the segments roll every 4 KB and the cleaner keeps about one record per group and partition
    assert max(sizes) < 64 * 1024, sizes
    assert sizes[-1] < 3 * sizes[0] + 16 * 1024, sizes


def _offsets_size(cluster: Any, broker: int) -> int:
    d = partition_dir(cluster, broker, "__consumer_offsets")
    total = 0
    for f in d.glob("*.log") if d.is_dir() else ():
        with contextlib.suppress(FileNotFoundError):  # the cleaner swapped it out between the listing and now
            total += f.stat().st_size
    return total

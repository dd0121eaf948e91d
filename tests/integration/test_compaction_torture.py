"""A compaction torture test in the manner of Kafka's LogCompactionTester, against a running three-broker cluster.

RECORDS records over RECORDS/10 keys (ten updates per key on average, in random order), about 10% of them deletes,
to one partition with RF=3, while a consumer keeps up. The dedupe buffer is the smallest allowed (1 MiB, about
39,000 keys), so the dirty section is cleaned in several passes. Then:

- the consumer that kept up saw every acknowledged record, at its offset (min.compaction.lag.ms covers its lag);
- once delete.retention.ms has passed, each replica's segment files, read from the start, hold exactly the last
  value of every live key and no deleted key, every record at its original offset, in order; again after a
  clean shutdown of every broker.

CI runs 200,000 records; ``ODRADEK_TORTURE_RECORDS=1000000`` runs the full size (figures in docs/compaction.md).
"""

from __future__ import annotations

import os
import random
import threading
import time
from typing import Any

import pytest

from odradek.client import Admin, Consumer, Producer

from .compaction import Record, replica_records
from .conftest import FAST

RECORDS = int(os.environ.get("ODRADEK_TORTURE_RECORDS", "200000"))
KEYS = max(1, RECORDS // 10)
BROKERS = (2, 3, 4)
TOPIC = "torture"
COMPACTION_WAIT_S = 150  # compaction takes seconds (docs/compaction.md); the test's whole limit is 300 s
NODE = {
    **FAST,
    "log.cleaner.backoff.ms": 200,
    "log.cleaner.dedupe.buffer.size": 1024 * 1024,
    "replica.lag.time.max.ms": 30000,
}
CONFIGS = {
    "cleanup.policy": "compact",
    "segment.bytes": str(256 * 1024),
    "segment.ms": "4000",
    "min.cleanable.dirty.ratio": "0.3",
    "min.compaction.lag.ms": "10000",
    "delete.retention.ms": "2000",
}
pytestmark = [
    pytest.mark.integration,
    pytest.mark.odradek_cluster(controllers=1, brokers=3, config=NODE, shared=False),
]


def workload(seed: int = 7) -> list[tuple[bytes, bytes | None]]:
    rng = random.Random(seed)
    out: list[tuple[bytes, bytes | None]] = []
    for i in range(RECORDS):
        key = b"key-%d" % rng.randrange(KEYS)
        out.append((key, None if rng.random() < 0.1 else b"value-%d" % i))
    return out


class KeepingUp(threading.Thread):
    """A consumer reading the partition from the start as it is written."""

    def __init__(self, cluster: Any) -> None:
        super().__init__(daemon=True)
        self.cluster = cluster
        self.seen: list[Record] = []
        self.until = -1  # set to the end offset once everything is acknowledged
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            with Consumer({"bootstrap.servers": self.cluster.bootstrap_servers, "max.poll.records": 5000}) as c:
                c.assign([(TOPIC, 0)])
                c.seek_to_beginning((TOPIC, 0))
                deadline = time.monotonic() + 240
                while time.monotonic() < deadline and (self.until < 0 or c.position((TOPIC, 0)) < self.until):
                    self.seen += [(r.offset, r.key, r.value) for r in c.poll(200)]
        except BaseException as e:  # reported by the test
            self.error = e


def check_replica(records: list[Record], acked: dict[int, tuple[bytes, bytes | None]], live: dict, fillers: set) -> str:
    """'' if ``records`` is exactly the compacted log, else what is wrong."""
    offsets = [o for o, _, _ in records]
    if offsets != sorted(set(offsets)):
        return "offsets out of order or repeated"
    wrong = [(o, k, v) for o, k, v in records if acked.get(o) != (k, v)]
    if wrong:
        return f"{len(wrong)} records not as acknowledged at their offset, e.g. {wrong[0]}"
    keys = [k for _, k, _ in records if k not in fillers]
    if len(keys) != len(set(keys)):
        return f"{len(keys) - len(set(keys))} superseded records remain"
    got = {k: v for _, k, v in records if k not in fillers}
    if got != live:
        missing = [k for k in live if k not in got]
        deleted = [k for k in got if k not in live]
        return f"{len(missing)} live keys missing, {len(deleted)} deleted keys present"
    return ""


def test_a_compacted_partition_holds_exactly_the_last_value_of_every_live_key_on_every_replica(
    odradek_cluster,
) -> None:
    cluster = odradek_cluster
    with Admin({"bootstrap.servers": cluster.admin_servers}) as admin:
        admin.create_topic(TOPIC, 1, 3, CONFIGS)
    reader = KeepingUp(cluster)
    reader.start()
    started = time.monotonic()
    pairs = workload()
    config = {"bootstrap.servers": cluster.bootstrap_servers, "linger.ms": 5, "batch.size": 32 * 1024}
    with Producer(config) as producer:
        futures = [producer.send(TOPIC, v, key=k, partition=0) for k, v in pairs]
        producer.flush(300)
        acked = {f.result(60).offset: kv for f, kv in zip(futures, pairs, strict=True)}
        produced_s = time.monotonic() - started
        # past segment.ms, filler records roll the segment holding the last updates: everything is cleanable
        time.sleep(4.5)
        fillers = {b"filler-%d" % i for i in range(3)}
        for key in sorted(fillers):
            f = producer.send(TOPIC, b"f", key=key, partition=0)
            producer.flush(30)
            acked[f.result(30).offset] = (key, b"f")
    reader.until = max(acked) + 1
    reader.join(120)
    assert not reader.is_alive(), f"the consumer that kept up is at {len(reader.seen)} records after 120 s"
    assert reader.error is None, reader.error
    assert reader.seen == sorted((o, k, v) for o, (k, v) in acked.items()), "the consumer that kept up missed records"

    live = {}
    for _, (k, v) in sorted(acked.items()):
        if k not in fillers:
            live[k] = v
    live = {k: v for k, v in live.items() if v is not None}
    problems: dict[int, str] = {}

    def compacted() -> bool:
        for b in BROKERS:
            records = replica_records(cluster, b, TOPIC)
            problems[b] = (
                "a file went away while reading" if records is None else check_replica(records, acked, live, fillers)
            )
        return not any(problems.values())

    # Within the test's own time limit, so that a failure says what each replica still holds.
    deadline = time.monotonic() + COMPACTION_WAIT_S
    while not compacted() and time.monotonic() < deadline:
        time.sleep(1.0)
    assert not any(problems.values()), f"not compacted after {COMPACTION_WAIT_S} s: {problems}"
    compacted_s = time.monotonic() - started
    cluster.stop_all(timeout=30)
    for b in BROKERS:
        records = replica_records(cluster, b, TOPIC)
        assert records is not None and check_replica(records, acked, live, fillers) == ""
    print(
        f"\ntorture: {RECORDS} records over {KEYS} keys, {len(live)} live at the end; produced in {produced_s:.0f} s, "
        f"every replica compacted {compacted_s:.0f} s after the start"
    )

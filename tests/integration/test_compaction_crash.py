"""SIGKILL a broker again and again while its cleaner works: after each recovery its log reads as before a pass or
as after it, never with a record missing that was not superseded.

One broker, one compacted partition that a background producer keeps writing to, so the cleaner is nearly always
in a pass (ratio 0, 50 ms backoff, each pass recopying the whole log). Each round kills the broker at a random
instant, notes whether a pass was under way (``.cleaned`` or ``.swap`` files left in the partition directory),
restarts it, and reads the partition from its start through a consumer. For every key, the last record the log
holds must be the key's last acknowledged record (or, for a deleted key, nothing at all), and every record must
be the one acknowledged at its offset. Each step of the swap is also crashed deterministically in
tests/log/cleaner/.
"""

from __future__ import annotations

import random
import signal
import threading
import time
from typing import Any

import pytest

from odradek.client import Producer
from odradek.deploy.process import process_state

from .compaction import Record, consume_all, partition_dir
from .conftest import FAST, wait_for

ROUNDS = 8
BROKER = 2
TOPIC = "crash"
NODE = {**FAST, "log.cleaner.backoff.ms": 50, "log.cleaner.dedupe.buffer.size": 1024 * 1024}
pytestmark = [
    pytest.mark.integration,
    pytest.mark.odradek_cluster(controllers=1, brokers=1, config=NODE, shared=False),
]


class Writer(threading.Thread):
    """Keyed records (10% deletes) over 3,000 keys until stopped; keeps what was acknowledged (with its place in
    the sending order) and the deletes whose outcome the kill hid."""

    def __init__(self, cluster: Any, rng: random.Random, start: int) -> None:
        super().__init__(daemon=True)
        self.cluster, self.rng, self.i = cluster, rng, start
        self.acked: dict[int, tuple[bytes, bytes | None]] = {}
        self.order: dict[int, int] = {}  # offset -> place in the sending order
        self.unknown_deletes: dict[bytes, int] = {}  # key -> place of its last delete not acknowledged
        self.stopped = threading.Event()

    def run(self) -> None:
        config = {"bootstrap.servers": self.cluster.bootstrap_servers, "linger.ms": 2, "retries": 0}
        with Producer(config) as p:
            while not self.stopped.is_set():
                sent = []
                for _ in range(200):
                    key = b"k%d" % self.rng.randrange(3000)
                    value = None if self.rng.random() < 0.1 else b"v%d" % self.i + b"." * 60
                    sent.append((self.i, key, value, p.send(TOPIC, value, key=key, partition=0)))
                    self.i += 1
                p.flush(10)
                self.stopped.wait(0.02)  # about 10,000 records a second: passes over a log of a few MB
                for i, key, value, f in sent:
                    if f.exception(10) is None:
                        self.acked[f.result().offset] = (key, value)
                        self.order[f.result().offset] = i
                    elif value is None:
                        self.unknown_deletes[key] = i


def check(
    records: list[Record],
    acked: dict[int, tuple[bytes, bytes | None]],
    order: dict[int, int],
    unknown_deletes: dict[bytes, int],
) -> str:
    """'' if ``records`` (a consumer's read from the log start) lost nothing that was not superseded. Records the
    kill kept from being acknowledged may be there or not: a delete among them, sent after a key's last
    acknowledged record, may have landed and superseded it, and then been removed itself (delete.retention.ms is
    0), leaving nothing of the key."""
    wrong = [(o, k, v) for o, k, v in records if acked.get(o, (k, v)) != (k, v)]
    if wrong:
        return f"records not as acknowledged at their offset: {wrong[:3]}"
    last_acked: dict[bytes | None, tuple[int, bytes | None]] = {}
    for o, (k, v) in sorted(acked.items()):
        last_acked[k] = (o, v)
    last_held: dict[bytes | None, tuple[int, bytes | None]] = {}
    for o, k, v in records:
        last_held[k] = (o, v)
    for k, (o, v) in last_acked.items():
        held = last_held.get(k)
        # a later record whose answer the kill lost may supersede it; a delete may leave nothing at all
        deleted_later = held is None and unknown_deletes.get(k, -1) > order[o]
        if (
            held != (o, v)
            and not (held is None and v is None)
            and not (held is not None and held[0] > o)
            and not deleted_later
        ):
            return f"key {k!r}: last acknowledged {(o, v)}, the log's last record for it {held}"
    return ""


def test_sigkill_at_random_instants_of_cleaning_loses_nothing_that_was_not_superseded(odradek_cluster) -> None:
    cluster = odradek_cluster
    rng = random.Random(11)
    configs = {
        "cleanup.policy": "compact",
        "segment.bytes": str(32 * 1024),
        "min.cleanable.dirty.ratio": "0",
        "delete.retention.ms": "0",
    }
    from odradek.client import Admin

    with Admin({"bootstrap.servers": cluster.admin_servers}) as admin:
        admin.create_topic(TOPIC, 1, 1, configs)
    acked: dict[int, tuple[bytes, bytes | None]] = {}
    order: dict[int, int] = {}
    unknown_deletes: dict[bytes, int] = {}
    mid_pass = 0
    next_value = 0
    directory = partition_dir(cluster, BROKER, TOPIC)
    for round_ in range(ROUNDS):
        writer = Writer(cluster, rng, next_value)
        writer.start()
        time.sleep(rng.uniform(0.5, 2.0))
        cluster.signal(BROKER, signal.SIGKILL)
        wait_for(lambda: process_state(cluster.node(BROKER).pid) == "stopped", 10, what="the broker dead")
        leftovers = [p.name for p in directory.iterdir() if p.name.endswith((".cleaned", ".swap"))]
        mid_pass += bool(leftovers)
        writer.stopped.set()
        writer.join(60)
        acked.update(writer.acked)
        order.update(writer.order)
        unknown_deletes.update(writer.unknown_deletes)
        next_value = writer.i
        cluster.start(BROKER)
        cluster.start_all_and_wait(60)
        problem = check(consume_all(cluster, TOPIC, timeout=60), acked, order, unknown_deletes)
        assert problem == "", (
            f"round {round_} (killed {'mid-pass: ' + str(leftovers) if leftovers else 'between passes'}): {problem}"
        )
    print(f"\n{ROUNDS} kills, {mid_pass} in the middle of a cleaning pass; {len(acked)} records acknowledged")
    assert mid_pass >= 1, "no kill landed during a pass: the test did not reach the window it is about"

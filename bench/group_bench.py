#!/usr/bin/env python3
"""Consumer groups on a real local cluster (1 controller, 3 brokers, real processes on 127.0.0.1).

1. Consume throughput, from the first record on, of one consumer in a group (subscribe, the default auto-commit
   every 5 s) against one consumer using ``assign`` over the same partitions, in interleaved rounds of the same
   run, so a noisy neighbour slows both sides: the figure is the ratio (target >= 0.9). A third line commits
   synchronously after every poll, to show what a commit round trip (acks=all on the offsets topic) costs.
2. Rebalance time: a stable group of 3 members; a 4th joins, and later leaves (close: LeaveGroup). The time from
   the change until every member holds its new assignment (each member's ``assignment()`` read after its polls),
   p50 and max over ROUNDS changes of each kind.

Takes a couple of minutes; figures only, no assertions.
"""

from __future__ import annotations

import statistics
import threading
import time

from odradek.client import Consumer, Producer, TopicPartition
from odradek.deploy.local import running_cluster

TOPIC = "bench-groups"
PARTITIONS = 6
RECORDS = 200_000
VALUE = b"x" * 100
ROUNDS = 10
NODE = {"offsets.topic.num.partitions": 3, "group.initial.rebalance.delay.ms": 0}


def produce(servers: str) -> None:
    with Producer({"bootstrap.servers": servers, "acks": "all", "linger.ms": 20, "batch.size": 262_144}) as p:
        for i in range(RECORDS):
            p.send(TOPIC, VALUE, partition=i % PARTITIONS)
        p.flush(120)


def consume_all(config: dict[str, object], group: bool, commit_each_poll: bool = False) -> float:
    """Records/s reading the whole topic once, from the first record received (a group's join is measured in the
    rebalance part)."""
    partitions = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
    with Consumer(config) as c:
        if group:
            c.subscribe([TOPIC])
        else:
            c.assign(partitions)
        seen = 0
        started = 0.0
        deadline = time.monotonic() + 120
        while seen < RECORDS and time.monotonic() < deadline:
            records = c.poll(200)
            if records and not seen:
                started = time.perf_counter()
            seen += len(records)
            if commit_each_poll and records:
                c.commit()
        return seen / (time.perf_counter() - started)


class Member(threading.Thread):
    def __init__(self, servers: str, group: str) -> None:
        super().__init__(daemon=True)
        self.config = {
            "bootstrap.servers": servers,
            "group.id": group,
            "session.timeout.ms": 10_000,
            "heartbeat.interval.ms": 200,
            "fetch.max.wait.ms": 50,
        }
        self.assignment: frozenset[TopicPartition] = frozenset()
        self.stop_event = threading.Event()

    def run(self) -> None:
        with Consumer(self.config) as c:
            c.subscribe([TOPIC])
            while not self.stop_event.is_set():
                c.poll(20)
                self.assignment = frozenset(c.assignment())

    def stop(self) -> None:
        self.stop_event.set()
        self.join(30)


def settled(members: list[Member]) -> bool:
    """Every partition owned by exactly one member and the counts balanced."""
    owned = [m.assignment for m in members]
    every = [tp for a in owned for tp in a]
    sizes = [len(a) for a in owned]
    return len(every) == PARTITIONS == len(set(every)) and max(sizes) - min(sizes) <= 1


def wait_settled(members: list[Member], timeout: float = 60) -> float:
    started = time.monotonic()
    while not settled(members):
        if time.monotonic() - started > timeout:
            raise TimeoutError("the group did not settle")
        time.sleep(0.005)
    return time.monotonic() - started


def main() -> None:
    with running_cluster(
        controllers=1, brokers=3, config=NODE, topics={TOPIC: {"partitions": PARTITIONS, "replication_factor": 3}}
    ) as cluster:
        servers = cluster.bootstrap_servers
        produce(servers)
        base = {"bootstrap.servers": servers, "auto.offset.reset": "earliest", "fetch.max.wait.ms": 100}
        group_rates, assign_rates, sync_rates = [], [], []
        for r in range(3):
            assign_rates.append(consume_all(base, group=False))
            group_rates.append(consume_all({**base, "group.id": f"bench-{r}"}, group=True))
            sync = {**base, "group.id": f"bench-sync-{r}", "enable.auto.commit": False}
            sync_rates.append(consume_all(sync, group=True, commit_each_poll=True))
        g, a, s = max(group_rates), max(assign_rates), max(sync_rates)
        print("consume throughput, best of 3 interleaved rounds, 100-byte records", flush=True)
        print(f"  assign                        {a / 1e3:8.1f}k records/s", flush=True)
        print(f"  group (auto-commit)           {g / 1e3:8.1f}k records/s  (ratio {g / a:.2f}, target >= 0.9)")
        print(f"  group (commit every poll)     {s / 1e3:8.1f}k records/s  (ratio {s / a:.2f})", flush=True)

        members = [Member(servers, "bench-rebalance") for _ in range(3)]
        for m in members:
            m.start()
        wait_settled(members)
        joins, leaves = [], []
        for _ in range(ROUNDS):
            extra = Member(servers, "bench-rebalance")
            extra.start()
            joins.append(wait_settled([*members, extra]))
            left_at = time.monotonic()
            extra.stop()  # close: LeaveGroup
            wait_settled(members)
            leaves.append(time.monotonic() - left_at)
        for m in members:
            m.stop()
        print(f"rebalance time with 3 members, over {ROUNDS} changes each", flush=True)
        print(f"  a 4th member joins            p50 {statistics.median(joins):6.2f} s   max {max(joins):6.2f} s")
        print(f"  it leaves (LeaveGroup)        p50 {statistics.median(leaves):6.2f} s   max {max(leaves):6.2f} s")


if __name__ == "__main__":
    main()

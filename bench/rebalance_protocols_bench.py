#!/usr/bin/env python3
"""Rebalance time of librdkafka consumers (confluent-kafka) with Kafka 4's consumer protocol (KIP-848,
``group.protocol=consumer``) against the classic protocol, in the same run on one local cluster (1 controller,
1 broker, real processes on 127.0.0.1).

Each round: a stable group of 2 members on a 6-partition topic; a 3rd member joins, and later leaves (close). The
figure is the time from the change until every member holds its new assignment (read from each member's
``assignment()`` after its polls), p50 and max over ROUNDS changes of each kind, per protocol, and the ratio of the
consumer protocol's p50 to the classic one's. The classic groups use librdkafka's cooperative-sticky assignor (its
own incremental rebalance, the fairest comparison) with ``heartbeat.interval.ms`` 3000 (librdkafka's default); the
consumer groups the broker's ``uniform`` assignor with the 5 s heartbeat interval Kafka's brokers give them. Both
protocols learn of a change at a member's next heartbeat, so the figures follow the heartbeat intervals.

Also counts, per protocol, the partitions a member kept through the join (revoked and then given back counts as not
kept): the consumer protocol revokes only what moves.

Takes a few minutes; figures only, no assertions.
"""

from __future__ import annotations

import statistics
import time
import uuid

from confluent_kafka import Consumer

from odradek.deploy.local import running_cluster

TOPIC = "bench-rebalance"
PARTITIONS = 6
ROUNDS = 5
TIMEOUT_S = 60.0


class Member:
    def __init__(self, servers: str, group: str, protocol: str) -> None:
        config: dict[str, object] = {
            "bootstrap.servers": servers,
            "group.id": group,
            "group.protocol": protocol,
            "auto.offset.reset": "earliest",
        }
        if protocol == "classic":
            config["partition.assignment.strategy"] = "cooperative-sticky"
        self.revoked: set[int] = set()
        self.consumer = Consumer(config)
        self.consumer.subscribe([TOPIC], on_revoke=lambda _, ps: self.revoked.update(p.partition for p in ps))

    def owned(self) -> set[int]:
        return {p.partition for p in self.consumer.assignment()}


def settle(members: list[Member], sizes: list[int]) -> float:
    """Poll every member until their assignment sizes are ``sizes`` (in order) and cover every partition; the
    seconds it took."""
    started = time.monotonic()
    while time.monotonic() - started < TIMEOUT_S:
        for m in members:
            m.consumer.poll(0.05)
        owned = [m.owned() for m in members]
        if sorted(map(len, owned)) == sorted(sizes) and set().union(*owned) == set(range(PARTITIONS)):
            return time.monotonic() - started
    raise TimeoutError(f"no settled assignment after {TIMEOUT_S}s: {[sorted(m.owned()) for m in members]}")


def round_of(servers: str, protocol: str) -> tuple[float, float, int]:
    """(join seconds, leave seconds, partitions the first two members kept through the join)."""
    group = f"bench-{protocol}-{uuid.uuid4().hex[:6]}"
    first = [Member(servers, group, protocol), Member(servers, group, protocol)]
    settle(first, [3, 3])
    before = [m.owned() for m in first]
    for m in first:
        m.revoked.clear()
    joiner = Member(servers, group, protocol)
    members = [*first, joiner]
    join_s = settle(members, [2, 2, 2])
    kept = sum(len((b & m.owned()) - m.revoked) for b, m in zip(before, first))
    joiner.consumer.close()
    leave_s = settle(first, [3, 3])
    for m in first:
        m.consumer.close()
    return join_s, leave_s, kept


def main() -> None:
    with running_cluster(
        controllers=1,
        brokers=1,
        config={"offsets.topic.num.partitions": 3, "group.initial.rebalance.delay.ms": 0},
        topics={TOPIC: {"partitions": PARTITIONS, "replication_factor": 1}},
    ) as cluster:
        servers = cluster.kafka_bootstrap_servers
        results: dict[str, list[tuple[float, float, int]]] = {"classic": [], "consumer": []}
        for _ in range(ROUNDS):  # interleaved, so a noisy neighbour slows both
            for protocol in results:
                results[protocol].append(round_of(servers, protocol))
        p50 = {}
        for protocol, rounds in results.items():
            joins = [r[0] for r in rounds]
            leaves = [r[1] for r in rounds]
            kept = [r[2] for r in rounds]
            p50[protocol] = statistics.median(joins)
            print(
                f"{protocol:9s} join p50 {statistics.median(joins):.2f}s max {max(joins):.2f}s | "
                f"leave p50 {statistics.median(leaves):.2f}s max {max(leaves):.2f}s | "
                f"partitions kept through a join (of 4 that stay): {kept}"
            )
        print(f"consumer/classic join p50 ratio: {p50['consumer'] / p50['classic']:.2f}")


if __name__ == "__main__":
    main()

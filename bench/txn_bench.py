#!/usr/bin/env python3
"""Transactions against their baselines, measured in the same run on one local cluster.

1. Produce: the same records through an idempotent producer (acks=all) and through a transactional producer
   committing every ``--txn-records`` records (1,000 by default); the figure is transactional / idempotent
   records per second (target >= 0.7).
2. Consume: the transactional output read with ``isolation.level=read_committed`` and with ``read_uncommitted``
   (the latter also sees the control batches and would see aborted records; here every transaction committed);
   the figure is read_committed / read_uncommitted records per second (target >= 0.9).

Each figure is the median of ``--rounds`` rounds, the two runs of a round back to back (the order alternates), so
that a neighbour's load on this shared machine moves both sides of a ratio alike.

    python bench/txn_bench.py [--records N] [--txn-records N] [--rounds R] [--brokers B] [--value-bytes N]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from odradek.client import Admin, Consumer, Producer, TopicPartition
from odradek.deploy.local import DevCluster

PARTITIONS = 4


def produce(
    servers: str, topic: str, records: int, txn_records: int, transactional_id: str | None, value: bytes
) -> float:
    """Records per second through one producer; with ``transactional_id``, committing every ``txn_records``."""
    config = {"bootstrap.servers": servers, "acks": "all", "linger.ms": 5}
    if transactional_id:
        config["transactional.id"] = transactional_id
    with Producer(config) as p:
        if transactional_id:
            p.init_transactions()
        start = time.perf_counter()
        for first in range(0, records, txn_records):
            if transactional_id:
                p.begin_transaction()
            for i in range(first, min(first + txn_records, records)):
                p.send(topic, value, partition=i % PARTITIONS)
            if transactional_id:
                p.commit_transaction()
        p.flush()
        return records / (time.perf_counter() - start)


def consume(servers: str, topic: str, records: int, isolation: str) -> float:
    """Records per second reading ``records`` records of ``topic`` from the start."""
    with Consumer(
        {"bootstrap.servers": servers, "isolation.level": isolation, "auto.offset.reset": "earliest"}
    ) as consumer:
        consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
        seen = 0
        start = time.perf_counter()
        deadline = start + 300
        while seen < records and time.perf_counter() < deadline:
            seen += len(consumer.poll(timeout_ms=200))
        elapsed = time.perf_counter() - start
    if seen < records:
        raise SystemExit(f"{isolation}: read {seen} of {records} records")
    return seen / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--txn-records", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--brokers", type=int, default=1)
    parser.add_argument("--value-bytes", type=int, default=100, help="each record's value size")
    args = parser.parse_args()
    node = {"transaction.state.log.num.partitions": 1, "offsets.topic.num.partitions": 1}
    with tempfile.TemporaryDirectory() as directory:
        cluster = DevCluster.create(Path(directory), 1, args.brokers, overrides=node)
        cluster.start_all_and_wait(60)
        try:
            servers = cluster.bootstrap_servers
            produce_ratios, consume_ratios = [], []
            value = b"v" * args.value_bytes
            with Admin({"bootstrap.servers": servers}) as admin:
                for r in range(args.rounds):
                    plain_topic, txn_topic = f"idem-{r}", f"txn-{r}"
                    for topic in (plain_topic, txn_topic):
                        admin.create_topic(topic, PARTITIONS, args.brokers)
                    runs = [("idempotent", plain_topic, None), ("transactional", txn_topic, f"bench-{r}")]
                    rates = {}
                    for name, topic, txn_id in runs if r % 2 == 0 else runs[::-1]:
                        rates[name] = produce(servers, topic, args.records, args.txn_records, txn_id, value)
                    reads = {}
                    for isolation in ("read_uncommitted", "read_committed")[:: 1 if r % 2 == 0 else -1]:
                        reads[isolation] = consume(servers, txn_topic, args.records, isolation)
                    produce_ratios.append(rates["transactional"] / rates["idempotent"])
                    consume_ratios.append(reads["read_committed"] / reads["read_uncommitted"])
                    print(
                        f"round {r + 1}: produce idempotent {rates['idempotent']:,.0f}/s, transactional "
                        f"{rates['transactional']:,.0f}/s ({args.txn_records}-record transactions, "
                        f"{args.value_bytes}-byte values): {produce_ratios[-1]:.2f}; "
                        f"consume read_uncommitted {reads['read_uncommitted']:,.0f}/s, "
                        f"read_committed {reads['read_committed']:,.0f}/s: {consume_ratios[-1]:.2f}",
                        flush=True,
                    )
            print(
                f"median: transactional / idempotent produce {statistics.median(produce_ratios):.2f} (target >= 0.7), "
                f"read_committed / read_uncommitted consume {statistics.median(consume_ratios):.2f} (target >= 0.9)"
            )
        finally:
            cluster.stop_all(timeout=10)


if __name__ == "__main__":
    main()

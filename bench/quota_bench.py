#!/usr/bin/env python3
"""What client quotas cost a broker that enforces them: produce throughput with quotas configured (none exceeded)
against none configured, measured in the same run on one local cluster.

With quotas configured the broker resolves the client's quotas, charges every Produce's bytes, times every
request's event-loop steps for the request quota and checks the client's mute; with none configured it skips all
of it. The quotas set here (producer, consumer and request, for the benchmark's client id and for every other
client by default) are far above what the producer reaches, so nothing is throttled and the figure is the cost
of the accounting alone. Each round runs both sides back to back (the order alternates); the figure is the median
of the rounds' ratios (target >= 0.95).

    python bench/quota_bench.py [--records N] [--rounds R] [--value-bytes N] [--batch-size N]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from odradek.client import Admin, Producer
from odradek.client.quotas import CONSUMER_BYTE_RATE, PRODUCER_BYTE_RATE, REQUEST_PERCENTAGE, entity
from odradek.deploy.local import DevCluster

PARTITIONS = 4
CLIENT_ID = "bench"
UNREACHED = {PRODUCER_BYTE_RATE: 10**12, CONSUMER_BYTE_RATE: 10**12, REQUEST_PERCENTAGE: 10_000}
ENTITIES = (entity(client_id=CLIENT_ID), entity(user_default=True, client_default=True))


def produce(servers: str, topic: str, records: int, value: bytes, batch_size: int) -> tuple[float, int]:
    """Records per second through one producer (acks=all), and the largest throttle it was given."""
    config = {
        "bootstrap.servers": servers,
        "client.id": CLIENT_ID,
        "acks": "all",
        "linger.ms": 5,
        "batch.size": batch_size,
    }
    with Producer(config) as p:
        p.partitions_for(topic)
        start = time.perf_counter()
        for i in range(records):
            p.send(topic, value, partition=i % PARTITIONS)
        p.flush()
        rate = records / (time.perf_counter() - start)
        return rate, int(p.metrics()["produce-throttle-time-max"] or 0)


def set_quotas(admin: Admin, on: bool) -> None:
    for e in ENTITIES:
        if on:
            admin.alter_client_quotas(e, UNREACHED)
        else:
            admin.alter_client_quotas(e, remove=list(UNREACHED))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--batch-size", type=int, default=16384, help="the producer's batch.size")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        cluster = DevCluster.create(Path(directory), 1, 1)
        cluster.start_all_and_wait(60)
        try:
            servers = cluster.bootstrap_servers
            value = b"v" * args.value_bytes
            ratios = []
            with Admin({"bootstrap.servers": servers}) as admin:
                for r in range(args.rounds):
                    rates = {}
                    for quotas in (False, True) if r % 2 == 0 else (True, False):
                        topic = f"bench-{r}-{'quotas' if quotas else 'none'}"
                        admin.create_topic(topic, PARTITIONS, 1)
                        set_quotas(admin, quotas)
                        time.sleep(1)  # the broker has the change (it applies quotas from its metadata image)
                        rates[quotas], throttle = produce(servers, topic, args.records, value, args.batch_size)
                        if throttle:
                            raise SystemExit(f"the producer was throttled ({throttle} ms): a quota was reached")
                    set_quotas(admin, False)
                    ratios.append(rates[True] / rates[False])
                    print(
                        f"round {r + 1}: no quotas {rates[False]:,.0f} records/s, quotas configured "
                        f"{rates[True]:,.0f} records/s ({args.value_bytes}-byte values): {ratios[-1]:.3f}",
                        flush=True,
                    )
            print(f"median: with quotas / without {statistics.median(ratios):.3f} (target >= 0.95)")
        finally:
            cluster.stop_all(timeout=10)


if __name__ == "__main__":
    main()

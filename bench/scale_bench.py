#!/usr/bin/env python3
"""The cost of partitions on idle brokers, with fetch sessions (KIP-227) and without, in the same run.

For each partition count (``--partitions``, default 100 and 2,000; 20 topics, replication factor 3) a 1-controller,
3-broker dev cluster (``odradek dev up``'s layout, followers on the Kafka listener, the default) is started twice:
with the brokers' default ``max.incremental.fetch.session.cache.slots`` (sessions) and with it at 0 (no session:
every follower round is a full fetch of all the partitions it follows from a leader). Once every partition's ISR is
whole, no client runs, and each broker's CPU (utime + stime from ``/proc``) is measured over ``--seconds``; the
figure is the mean share of one core per broker, and the ratio sessions / no sessions.

Then, on the clusters of the smallest count, ``odradek perf produce`` acks=all on a 6-partition RF=3 topic, with and
without sessions, so that the few-partition throughput is compared in the same run too.

With ``--scale``, instead, what issue 42 asks of each partition count (default 100, 2,000 and 10,000; RF=3), on
the brokers' default config (but ``max.partitions.per.broker``, raised to the count above its default of 4,000):

- topic creation: from the first CreateTopics until every partition has a leader and a full ISR;
- broker RSS per partition: each broker's RSS then, minus its RSS at ~0 partitions (the same cluster just started),
  over the partition count;
- idle broker CPU, as above;
- spread produce (``scale_spread.py``; ``--no-spread`` skips it): 100-byte records round-robin over every partition,
  acks=all, for ``--seconds`` each, through odradek's client and through confluent-kafka, each as a ratio of the same
  run on a 6-partition topic, every partition having had a first record before; then an odradek consumer assigned
  every partition reads them all back, against the 6-partition topic;
- broker failover: SIGKILL the broker leading the most partitions and time, from the kill, its fencing and the moment
  every partition it led has a new leader (the controller fences it only after ``broker.session.timeout.ms``,
  reported), with each broker's leader count before;
- controller failover, on a second cluster of 3 controllers and 3 brokers with the same topics: SIGKILL the active
  controller and time until a new one has created a topic (``--no-controller-failover`` skips it).

``--profile DIR`` records each node with py-spy (``-f raw``) during each phase. Figures are printed as a table and as
JSON (also written to ``--json FILE``).

    python bench/scale_bench.py [--partitions 100 2000] [--seconds 20] [--records 1000000]
    python bench/scale_bench.py --scale [--partitions 100 2000 10000] [--profile DIR] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from scale_phases import idle_cpu, scale_main

from odradek.client import Admin
from odradek.deploy.local import DevCluster, run_sync

TOPICS = 20
MODES: dict[str, dict[str, Any]] = {
    "sessions": {},
    "no sessions": {"max.incremental.fetch.session.cache.slots": 0},
}


def start(directory: Path, partitions: int, overrides: dict[str, Any]) -> DevCluster:
    cluster = DevCluster.create(directory, controllers=1, brokers=3, overrides=overrides)
    cluster.start_all_and_wait(120)
    per_topic = max(1, partitions // TOPICS)
    run_sync(
        cluster.create_topics({f"idle-{t}": {"partitions": per_topic, "replication_factor": 3} for t in range(TOPICS)})
    )
    with Admin({"bootstrap.servers": cluster.admin_servers, "request.timeout.ms": 30000}) as admin:
        deadline = time.monotonic() + 300
        while True:
            whole = all(
                len(p.isr) == 3 and p.leader >= 0
                for t in range(TOPICS)
                for p in admin.describe_topic(f"idle-{t}").partitions
            )
            if whole:
                break
            if time.monotonic() > deadline:
                raise RuntimeError("the ISRs did not become whole within 300 s")
            time.sleep(2)
    return cluster


def produce(cluster: DevCluster, records: int) -> float:
    topic = "perf-6"
    run_sync(cluster.create_topics({topic: {"partitions": 6, "replication_factor": 3}}))
    with Admin({"bootstrap.servers": cluster.admin_servers, "request.timeout.ms": 30000}) as admin:
        deadline = time.monotonic() + 60
        while not all(len(p.isr) == 3 and p.leader >= 0 for p in admin.describe_topic(topic).partitions):
            if time.monotonic() > deadline:
                raise RuntimeError(f"{topic}'s ISRs did not become whole within 60 s")
            time.sleep(0.5)
    command = ["perf", "produce", "-X", cluster.bootstrap_servers, "--topic", topic, "--acks", "all"]
    command += ["--num-records", str(records), "--record-size", "100", "--format", "json"]
    out = subprocess.run(
        [sys.executable, "-m", "odradek.client.cli.main", *command],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    return float(json.loads(out.stdout.strip().splitlines()[-1])["records_per_sec"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--partitions", type=int, nargs="+", help="default 100 2000 (--scale: 100 2000 10000)")
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--scale", action="store_true", help="creation, RSS, idle CPU and failover times instead")
    parser.add_argument("--no-controller-failover", action="store_true", help="with --scale: skip the 3+3 cluster")
    parser.add_argument("--no-spread", action="store_true", help="with --scale: skip spread produce and consume-all")
    parser.add_argument("--profile", type=Path, help="with --scale: py-spy raw profiles of each node per phase")
    parser.add_argument("--json", type=Path, help="with --scale: also write the figures here")
    parser.add_argument("--timeout", type=float, default=1800.0, help="with --scale: bound of each wait, seconds")
    args = parser.parse_args()
    if args.scale:
        scale_main(args)
        return
    args.partitions = args.partitions or [100, 2000]
    idle: dict[tuple[int, str], list[float]] = {}
    rates: dict[str, float] = {}
    smallest = min(args.partitions)
    with tempfile.TemporaryDirectory(prefix="odradek-scale-bench-") as tmp:
        for count in args.partitions:
            order = list(MODES) if count == smallest else list(reversed(MODES))
            for mode in order:
                cluster = start(Path(tmp) / f"{count}-{mode.replace(' ', '-')}", count, MODES[mode])
                try:
                    idle[(count, mode)] = shares = idle_cpu(cluster, args.seconds)
                    print(
                        f"  {count:>5} partitions, {mode:<11} idle broker CPU: "
                        + ", ".join(f"{s:.1%}" for s in shares),
                        flush=True,
                    )
                    if count == smallest:
                        rates[mode] = produce(cluster, args.records)
                        print(
                            f"  perf produce acks=all, 6 partitions, {mode}: {rates[mode]:,.0f} records/s", flush=True
                        )
                finally:
                    cluster.stop_all(timeout=20)
    print(f"\nidle brokers, 1 controller + 3 brokers, {TOPICS} topics, RF=3, {args.seconds:.0f} s of no client")
    print(f"{'partitions':>10} {'sessions':>10} {'no sessions':>12} {'ratio':>7}   (mean share of one core per broker)")
    for count in args.partitions:
        on = sum(idle[(count, "sessions")]) / 3
        off = sum(idle[(count, "no sessions")]) / 3
        print(f"{count:>10} {on:>10.1%} {off:>12.1%} {on / off if off else float('nan'):>7.2f}")
    on, off = rates["sessions"], rates["no sessions"]
    print(f"\nperf produce acks=all, 6 partitions RF=3, {args.records:,} records of 100 B ({smallest} idle partitions)")
    print(f"  sessions {on:,.0f} records/s, no sessions {off:,.0f} records/s, ratio {on / off:.2f}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""End-to-end throughput with each record codec: ``odradek perf produce`` (acks=1, 1 broker; acks=all on a 3-broker
cluster with replication factor 3) and ``odradek perf consume`` (1 broker), one Python process each, 100-byte
records, and optionally the Spark source (``bench/spark_bench.py``), each run once with the native accelerator and
once with ``ODRADEK_NO_EXTENSIONS=1`` (the pure-Python reference), in alternating order, in the same run.

Every figure is the best of ``--rounds`` runs. Clients, brokers and controllers share the machine's cores, so the
figures are what one client process gets from a broker on the same machine, not a broker's ceiling.

    python bench/codec_e2e_bench.py [--records N] [--rounds R] [--spark]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from odradek.deploy.local import DevCluster, run_sync

MODES = {"native": {}, "python": {"ODRADEK_NO_EXTENSIONS": "1"}}
TARGETS = {
    "produce acks=1, 1 broker": 800_000,
    "produce acks=all, RF=3, 3 brokers": 400_000,
    "consume, 1 broker": 1_500_000,
    "spark read -> noop, local[2]": 600_000,
}


def codec_of(env: dict[str, str]) -> str:
    """The codec a process started with ``env`` uses, as ``odradek --version`` reports it."""
    out = subprocess.run(
        [sys.executable, "-m", "odradek.client.cli.main", "--version"],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        check=True,
    ).stdout
    found = re.search(r"record codec: ([^\n(]+)", out)
    return found.group(1).strip() if found else "unknown"


def perf(env: dict[str, str], *args: str) -> float:
    out = subprocess.run(
        [sys.executable, "-m", "odradek.client.cli.main", "perf", *args, "--format", "json"],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=900,
        check=True,
    )
    return float(json.loads(out.stdout.strip().splitlines()[-1])["records_per_sec"])


def spark(env: dict[str, str], records: int) -> float:
    out = subprocess.run(
        [sys.executable, str(Path(__file__).with_name("spark_bench.py")), "--records", str(records), "--rounds", "1"],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=1800,
        check=True,
    ).stdout
    found = re.search(r"spark read -> noop\s+([\d,]+) rows/s", out)
    if found is None:
        raise RuntimeError(f"no figure in spark_bench's output:\n{out}")
    return float(found.group(1).replace(",", ""))


def cluster(directory: Path, brokers: int, topic: str, replication: int) -> DevCluster:
    c = DevCluster.create(directory, controllers=1, brokers=brokers)
    c.start_all_and_wait(60)
    run_sync(c.create_topics({topic: {"partitions": 4, "replication_factor": replication}}))
    return c


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--spark", action="store_true", help="also the Spark source (a JVM per mode and round)")
    args = parser.parse_args()
    n = str(args.records)
    codecs = {mode: codec_of(env) for mode, env in MODES.items()}
    print(f"codecs: {codecs}", flush=True)
    if codecs["native"] == codecs["python"]:
        print("note: the native accelerator is not built here, so both columns measure the reference", flush=True)
    best: dict[str, dict[str, float]] = {name: dict.fromkeys(MODES, 0.0) for name in TARGETS}

    def record(name: str, mode: str, rate: float) -> None:
        best[name][mode] = max(best[name][mode], rate)
        print(f"  {name:<36} {mode:<7} {rate:>12,.0f} records/s", flush=True)

    with tempfile.TemporaryDirectory(prefix="odradek-codec-bench-") as tmp:
        one = cluster(Path(tmp) / "one", 1, "bench", 1)
        try:
            servers = one.bootstrap_servers
            for round_ in range(args.rounds):
                order = list(MODES) if round_ % 2 == 0 else list(reversed(MODES))
                for mode in order:
                    env = MODES[mode]
                    topic = f"bench-{mode}-{round_}"
                    run_sync(one.create_topics({topic: {"partitions": 4, "replication_factor": 1}}))
                    common = ("-X", servers, "--topic", topic, "--num-records", n, "--record-size", "100")
                    record("produce acks=1, 1 broker", mode, perf(env, "produce", *common, "--acks", "1"))
                    record(
                        "consume, 1 broker",
                        mode,
                        perf(env, "consume", "-X", servers, "--topic", topic, "--num-records", n),
                    )
        finally:
            one.stop_all(timeout=10)
        three = cluster(Path(tmp) / "three", 3, "bench", 3)
        try:
            servers = three.bootstrap_servers
            for round_ in range(args.rounds):
                order = list(MODES) if round_ % 2 == 0 else list(reversed(MODES))
                for mode in order:
                    common = ("-X", servers, "--topic", "bench", "--num-records", n, "--record-size", "100")
                    record(
                        "produce acks=all, RF=3, 3 brokers",
                        mode,
                        perf(MODES[mode], "produce", *common, "--acks", "all"),
                    )
        finally:
            three.stop_all(timeout=10)
    if args.spark:
        for round_ in range(args.rounds):
            for mode in list(MODES) if round_ % 2 == 0 else list(reversed(MODES)):
                record("spark read -> noop, local[2]", mode, spark(MODES[mode], args.records))

    print(f"\n{args.records:,} records of 100 bytes, best of {args.rounds}; codecs {codecs}")
    print(f"{'figure':<36} {'target':>12} {'native':>12} {'python':>12} {'native/python':>14}")
    for name, target in TARGETS.items():
        native, python = best[name]["native"], best[name]["python"]
        if not native and not python:
            continue
        ratio = f"{native / python:.2f}" if python else "-"
        print(f"{name:<36} {target:>12,} {native:>12,.0f} {python:>12,.0f} {ratio:>14}")


if __name__ == "__main__":
    main()

"""``odradek demo``: what ``make run`` shows: a local 3-controller, 3-broker cluster and its metadata at work."""

from __future__ import annotations

import argparse
import subprocess
import sys

from odradek.client.cli.common import add_command
from odradek.client.cli.dev import default_dir
from odradek.client.cli.dev_cluster import DevCluster, process_state


def register(sub: argparse._SubParsersAction) -> None:
    demo = add_command(sub, "demo", _demo, "start a local cluster (3 controllers, 3 brokers) and show it working")
    demo.add_argument("--keep", action="store_true", help="reuse a running dev cluster instead of starting afresh")


def _step(title: str, *args: str) -> None:
    print(f"\n$ odradek {' '.join(args)}    # {title}", flush=True)
    result = subprocess.run([sys.executable, "-m", "odradek.client.cli.main", *args])
    if result.returncode != 0:
        raise SystemExit(result.returncode)


def _demo(args: argparse.Namespace) -> None:
    directory = default_dir()
    running = False
    if (directory / "cluster.json").exists():
        cluster = DevCluster.load(directory)
        running = any(process_state(n.pid) != "stopped" for n in cluster.nodes)
        if running and not args.keep:
            _step("stop the previous dev cluster", "dev", "down", "--purge")
            running = False
    if not running:
        _step("start 3 controllers and 3 brokers on 127.0.0.1", "dev", "up", "--controllers", "3", "--brokers", "3")
    _step("the Raft quorum of controllers", "cluster", "quorum")
    _step("registered brokers", "broker", "list")
    topics = subprocess.run(
        [sys.executable, "-m", "odradek.client.cli.main", "topic", "list"], capture_output=True, text=True
    ).stdout.split()
    if "demo" not in topics:
        _step("a replicated topic", "topic", "create", "demo", "--partitions", "6", "--replication-factor", "3")
    _step("its partitions: leaders spread over the brokers", "topic", "describe", "demo")
    print(
        "\nThe cluster keeps running. Try: odradek dev kill 1 && odradek cluster quorum   "
        "(a new controller leader is elected)\nStop it with: odradek dev down",
        flush=True,
    )

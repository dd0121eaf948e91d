"""Configs generated from a cluster description run a real cluster: a controller and a broker, each on its own
loopback address (the description's ports are the same on every node, as on VMs), become healthy."""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from odradek.deploy.local import free_port

CLUSTER_ID = "deployTestCluster_0001"


def odradek(*args: str) -> list[str]:
    return [sys.executable, "-m", "odradek.client.cli.main", *args]


@pytest.mark.integration
def test_generated_configs_run_a_healthy_cluster(tmp_path: Path) -> None:
    broker_port, controller_port, kafka_port = free_port(), free_port(), free_port()
    (tmp_path / "cluster.toml").write_text(
        f'cluster_id = "{CLUSTER_ID}"\nbroker_port = {broker_port}\ncontroller_port = {controller_port}\n'
        f'kafka_port = {kafka_port}\nmetrics_port = 0\n[properties]\n"log.dirs" = "{tmp_path}/data-{{node_id}}"\n'
        '"broker.heartbeat.interval.ms" = 500\n'
        '[[nodes]]\nid = 1\nhost = "127.0.0.11"\nroles = ["controller"]\n'
        '[[nodes]]\nid = 2\nhost = "127.0.0.12"\nroles = ["broker"]\nrack = "r1"\n'
    )
    configs = tmp_path / "configs"
    generate = odradek("deploy", "config", "--cluster", str(tmp_path / "cluster.toml"), "--out", str(configs))
    subprocess.run(generate, check=True, capture_output=True, timeout=60)
    nodes: list[subprocess.Popen[bytes]] = []
    with contextlib.ExitStack() as stack:
        for node_id in (1, 2):
            config = str(configs / f"node-{node_id}.toml")
            subprocess.run(
                odradek("storage", "format", "--cluster-id", CLUSTER_ID, "--config", config),
                check=True,
                capture_output=True,
                timeout=60,
            )
            log = stack.enter_context(open(tmp_path / f"node-{node_id}.log", "w"))
            nodes.append(subprocess.Popen(odradek("server", "--config", config), stdout=log, stderr=log))
        stack.callback(stop, nodes)
        servers = f"127.0.0.12:{broker_port},127.0.0.11:{controller_port}"
        health = odradek("cluster", "health", "--exit-code", "--timeout-ms", "2000", "-X", servers)
        listing = odradek("broker", "list", "-X", servers, "--format", "json")
        deadline = time.monotonic() + 60
        # Healthy, with the broker registered: a single controller is up at once, and health counts the brokers
        # that have registered, so it can be healthy a moment before the broker is listed.
        while (
            subprocess.run(health, capture_output=True, timeout=60).returncode != 0
            or (brokers := subprocess.run(listing, capture_output=True, text=True, timeout=60)).stdout.strip() == "[]"
        ):
            assert time.monotonic() < deadline, (tmp_path / "node-2.log").read_text()[-2000:]
            time.sleep(0.5)
        assert '"rack": "r1"' in brokers.stdout
        # the generated KAFKA listener is registered next to the gRPC address
        assert json.loads(brokers.stdout)[0]["listeners"] == [
            {"name": "KAFKA", "host": "127.0.0.12", "port": kafka_port}
        ]


def stop(nodes: list[subprocess.Popen[bytes]]) -> None:
    """Brokers before controllers, as an operator would: a broker's controlled shutdown needs the controller."""
    for node in reversed(nodes):
        node.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            node.wait(timeout=30)
        node.kill()
        node.wait()

"""``odradek topic describe --all`` (every config with value and source) and ``odradek broker log-dirs`` (each
broker's log dirs, disk figures, replica sizes and lag) against a real cluster: 1 controller, brokers 2 and 3, whose
config files set ``log.segment.bytes``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from odradek.client import Producer
from odradek.client.admin import Admin, ConfigDescription
from odradek.client.errors import UnknownTopicOrPartitionError
from odradek.deploy.local import DevCluster

from .conftest import start_cluster, wait_for

pytestmark = pytest.mark.integration

SEGMENT_BYTES = 1048576  # set in every node's config file: the "broker" source
RECORDS = 20


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevCluster]:
    c = start_cluster(
        tmp_path_factory.mktemp("cluster"), controllers=1, brokers=2, **{"log.segment.bytes": SEGMENT_BYTES}
    )
    yield c
    c.stop_all(timeout=10)


def odradek(cluster: DevCluster, *args: str, servers: str | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "ODRADEK_HOME": str(cluster.directory / "home")}
    env.pop("ODRADEK_BOOTSTRAP_SERVERS", None)
    return subprocess.run(
        [sys.executable, "-m", "odradek.client.cli.main", *args, "-X", servers or cluster.admin_servers],
        capture_output=True,
        text=True,
        env=env,
        timeout=90,
    )


def as_json(cluster: DevCluster, *args: str, servers: str | None = None):
    result = odradek(cluster, *args, "--format", "json", servers=servers)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.fixture(scope="module")
def orders(cluster: DevCluster, admin: Admin) -> str:
    """A topic with one config of its own and records on both partitions, every replica in sync."""
    admin.create_topic("orders", 2, 2, {"retention.ms": "60000"})
    with Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"}) as producer:
        for i in range(RECORDS):
            producer.send("orders", f"record-{i}".encode(), partition=i % 2)
        producer.flush()
    wait_for(lambda: all(len(p.isr) == 2 for p in admin.describe_topic("orders").partitions), 20, what="in sync")
    return "orders"


def test_describe_all_shows_every_config_with_its_source(cluster: DevCluster, admin: Admin, orders: str) -> None:
    """Observed: ``topic describe`` showed only the configs set on the topic, with no way to see the rest."""
    plain = as_json(cluster, "topic", "describe", orders)
    assert "all_configs" not in plain and plain["configs"] == {"retention.ms": "60000"}
    data = as_json(cluster, "topic", "describe", orders, "--all")
    assert data["configs"] == plain["configs"] and data["partitions"]  # the existing keys are unchanged
    configs = {c["name"]: c for c in data["all_configs"]}
    assert set(configs["retention.ms"]) == {"name", "value", "source", "read_only", "sensitive"}
    assert (configs["retention.ms"]["value"], configs["retention.ms"]["source"]) == ("60000", "topic")
    assert (configs["segment.bytes"]["value"], configs["segment.bytes"]["source"]) == (str(SEGMENT_BYTES), "broker")
    assert (configs["compression.type"]["value"], configs["compression.type"]["source"]) == ("producer", "default")
    assert {"min.insync.replicas", "cleanup.policy", "unclean.leader.election.enable"} <= set(configs)

    human = odradek(cluster, "topic", "describe", orders, "-a")
    assert human.returncode == 0, human.stderr
    rows = {line.split()[0]: line.split()[1:] for line in human.stdout.split("configs (all):\n")[1].splitlines()[1:]}
    assert rows["retention.ms"] == ["60000", "topic"] and rows["segment.bytes"] == [str(SEGMENT_BYTES), "broker"]

    typed = {c.name: c for c in admin.describe_configs(orders)}  # the synchronous client, typed entries
    assert isinstance(typed["retention.ms"], ConfigDescription) and typed["retention.ms"].source == "topic"
    assert {n: c.value for n, c in typed.items()} == {n: c["value"] for n, c in configs.items()}
    with pytest.raises(UnknownTopicOrPartitionError):
        admin.describe_configs("nope")
    missing = odradek(cluster, "topic", "describe", "nope", "--all")
    assert missing.returncode == 1 and missing.stderr.startswith("error: ") and "nope" in missing.stderr


def test_log_dirs_per_broker_dir_and_replica(cluster: DevCluster, admin: Admin, orders: str) -> None:
    """Observed: no command showed log-dir usage or replica sizes (only the metrics did)."""
    brokers = as_json(cluster, "broker", "log-dirs", "--topic", orders)
    assert [b["broker_id"] for b in brokers] == [2, 3] and all(b["error"] is None for b in brokers)
    leaders = {p.partition: p.leader for p in admin.describe_topic(orders).partitions}
    for b in brokers:
        [d] = b["log_dirs"]
        assert d["online"] and d["error"] is None and d["path"].endswith("data")
        assert d["total_bytes"] >= d["free_bytes"] > 0 and d["used_bytes"] >= sum(
            r["size_bytes"] for r in d["replicas"]
        )
        assert sorted((r["topic"], r["partition"]) for r in d["replicas"]) == [(orders, 0), (orders, 1)]
        for r in d["replicas"]:
            assert r["size_bytes"] > 0 and r["log_end_offset"] == RECORDS // 2
            assert r["is_leader"] == (leaders[r["partition"]] == b["broker_id"])
            assert r["offset_lag"] == 0 if r["is_leader"] else r["offset_lag"] in (0, -1)
    human = odradek(cluster, "broker", "log-dirs")
    assert human.returncode == 0, human.stderr
    assert "online" in human.stdout and "leader" in human.stdout and "follower" in human.stdout

    only = as_json(cluster, "broker", "log-dirs", "--broker", "3", "--topic", "nothing-here")
    assert [b["broker_id"] for b in only] == [3] and only[0]["log_dirs"][0]["replicas"] == []
    unknown = odradek(cluster, "broker", "log-dirs", "--broker", "9")
    assert unknown.returncode == 1 and "no broker 9" in unknown.stderr


def test_log_dirs_reports_a_broker_that_does_not_answer(cluster: DevCluster) -> None:
    """A paused broker is reported as not answering, within the bounded timeout, next to the others' figures."""
    paused = cluster.node(3)
    controller = cluster.node(1)
    servers = f"127.0.0.1:{controller.controller_port}"  # ask the cluster through a node that answers
    cluster.signal(3, signal.SIGSTOP)
    try:
        start = time.monotonic()
        brokers = as_json(cluster, "broker", "log-dirs", "--timeout-ms", "3000", servers=servers)
        took = time.monotonic() - start
        human = odradek(cluster, "broker", "log-dirs", "--timeout-ms", "3000", servers=servers)
    finally:
        cluster.signal(paused.node_id, signal.SIGCONT)
    by_id = {b["broker_id"]: b for b in brokers}
    assert by_id[3]["error"] and by_id[3]["log_dirs"] == [] and "NETWORK_EXCEPTION" in by_id[3]["error"]
    assert by_id[2]["error"] is None and by_id[2]["log_dirs"][0]["online"]
    assert took < 15, took  # a second for the stuck broker, plus the CLI's start
    assert human.returncode == 0 and "NO ANSWER" in human.stdout and "Traceback" not in human.stderr

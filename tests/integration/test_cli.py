"""The ``odradek`` command line against a real local cluster: JSON shapes, exit codes, one-line errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration


def odradek(home: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    env = {**os.environ, "ODRADEK_HOME": str(home)}
    env.pop("ODRADEK_BOOTSTRAP_SERVERS", None)
    result = subprocess.run(
        [sys.executable, "-m", "odradek.client.cli.main", *args], capture_output=True, text=True, env=env, timeout=120
    )
    if check and result.returncode != 0:
        pytest.fail(f"odradek {' '.join(args)} failed: {result.stderr}")
    return result


def as_json(home: Path, *args: str):
    return json.loads(odradek(home, *args, "--format", "json").stdout)


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    home = tmp_path_factory.mktemp("home")
    up = as_json(home, "dev", "up", "--controllers", "3", "--brokers", "3", "--set", "broker.session.timeout.ms=3000")
    assert len(up["nodes"]) == 6 and len(up["kafka_bootstrap_servers"].split(",")) == 3
    assert len(up["schema_registry_urls"].split(",")) == 3  # every broker serves the schema registry
    assert len(up["http_urls"].split(",")) == 3  # and the HTTP API
    yield home
    odradek(home, "dev", "down", "--purge", check=False)


def test_cluster_info_and_broker_list_shapes(home: Path) -> None:
    info = as_json(home, "cluster", "info")
    assert set(info) == {"cluster_id", "controller_leader", "bootstrap_servers", "kafka_bootstrap_servers", "brokers"}
    assert info["controller_leader"] in (1, 2, 3)
    assert len(info["bootstrap_servers"].split(",")) == 3
    brokers = as_json(home, "broker", "list")
    assert [b["node_id"] for b in brokers] == [4, 5, 6]
    assert all(set(b) == {"node_id", "host", "port", "rack", "fenced", "epoch", "listeners"} for b in brokers)
    assert not any(b["fenced"] for b in brokers)


def test_brokers_register_their_kafka_listeners_and_both_addresses_are_shown(home: Path) -> None:
    """dev up gives each broker a Kafka listener; the broker registers it with the controller, which records it in
    the metadata every node serves, and cluster info and broker list show it next to the gRPC address."""
    status = as_json(home, "dev", "status")
    kafka = {n["node_id"]: n["kafka"] for n in status if n["kafka"]}
    registry = {n["node_id"]: n["schema_registry"] for n in status if n["schema_registry"]}
    http = {n["node_id"]: n["http"] for n in status if n["http"]}
    assert sorted(kafka) == sorted(registry) == sorted(http) == [4, 5, 6]
    brokers = as_json(home, "broker", "list")
    for b in brokers:
        host, port = kafka[b["node_id"]].rsplit(":", 1)
        registry_port = int(registry[b["node_id"]].rsplit(":", 1)[1])
        http_port = int(http[b["node_id"]].rsplit(":", 1)[1])
        # The schema registry's and the HTTP API's listeners too: other brokers forward registry writes and HTTP API
        # requests there (docs/schema-registry.md, docs/http-api.md).
        assert b["listeners"] == [
            {"name": "KAFKA", "host": host, "port": int(port)},
            {"name": "SCHEMA_REGISTRY", "host": host, "port": registry_port},
            {"name": "HTTP", "host": host, "port": http_port},
        ]
        assert int(port) != b["port"]
    info = as_json(home, "cluster", "info")
    assert info["kafka_bootstrap_servers"] == ",".join(kafka[i] for i in (4, 5, 6))
    assert [b["listeners"] for b in info["brokers"]] == [b["listeners"] for b in brokers]
    human = odradek(home, "cluster", "info").stdout
    assert f"kafka bootstrap servers: {info['kafka_bootstrap_servers']}" in human
    listed = odradek(home, "broker", "list").stdout.splitlines()
    assert listed[0].split()[:4] == ["NODE_ID", "HOST", "PORT", "KAFKA"]
    assert [line.split()[3] for line in listed[1:]] == [kafka[i] for i in (4, 5, 6)]


def test_cluster_quorum_shape(home: Path) -> None:
    quorum = as_json(home, "cluster", "quorum")
    assert set(quorum) == {"leader_id", "leader_epoch", "high_watermark", "voters", "observers"}
    assert sorted(v["node_id"] for v in quorum["voters"]) == [1, 2, 3]
    for replica in quorum["voters"] + quorum["observers"]:
        assert set(replica) == {"node_id", "log_end_offset", "lag", "last_fetch_ms"}
    human = odradek(home, "cluster", "quorum").stdout
    assert f"leader: {quorum['leader_id']}" in human


def test_topic_lifecycle(home: Path) -> None:
    created = as_json(
        home,
        "topic",
        "create",
        "clicks",
        "--partitions",
        "4",
        "--replication-factor",
        "3",
        "-c",
        "retention.ms=86400000",
    )
    assert created["name"] == "clicks"
    assert "clicks" in as_json(home, "topic", "list")
    described = as_json(home, "topic", "describe", "clicks")
    assert described["name"] == "clicks" and described["configs"] == {"retention.ms": "86400000"}
    assert [p["partition"] for p in described["partitions"]] == [0, 1, 2, 3]
    for p in described["partitions"]:
        assert set(p) >= {
            "partition",
            "leader",
            "leader_epoch",
            "replicas",
            "isr",
            "log_start_offset",
            "high_watermark",
            "under_replicated",
        }
        assert len(p["replicas"]) == 3 and p["leader"] == p["replicas"][0]
    odradek(home, "topic", "delete", "clicks")
    assert "clicks" not in as_json(home, "topic", "list")


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("topic", "create", "dup"), None),
        (("topic", "create", "dup"), "TOPIC_ALREADY_EXISTS"),
        (("topic", "describe", "nope"), "UNKNOWN_TOPIC_OR_PARTITION"),
        (("topic", "create", "bad name"), "INVALID_TOPIC_EXCEPTION"),
        (("topic", "create", "wide", "-r", "9"), "INVALID_REPLICATION_FACTOR"),
        (("topic", "create", "cfg", "-c", "nonsense"), "not key=value"),
        (("topic", "create", "none", "-p", "0"), "INVALID_PARTITIONS"),
        (("topic", "create", "negative", "-p", "-5"), "INVALID_PARTITIONS"),
        (("topic", "create", "unreplicated", "-r", "0"), "INVALID_REPLICATION_FACTOR"),
        (("topic", "create", "huge", "-p", "1000000"), "max.partitions.per.broker=4000"),
        (("topic", "create", "delayed", "-c", "file.delete.delay.ms=0"), "not supported yet"),
        (("topic", "create", "shredded", "-c", "cleanup.policy=shred"), "INVALID_CONFIG"),
        (("dev", "kill", "42"), "no node 42"),
    ],
)
def test_failures_exit_non_zero_with_one_line(home: Path, args: tuple[str, ...], expected: str | None) -> None:
    result = odradek(home, *args, check=False)
    if expected is None:
        assert result.returncode == 0
        return
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and expected in lines[0]
    if args[:2] == ("topic", "create") and args[2] != "dup":
        assert args[2] not in as_json(home, "topic", "list")  # refused, not created with other settings


def test_dev_kill_status_and_start(home: Path) -> None:
    odradek(home, "dev", "kill", "6", "--signal", "STOP")
    assert {n["node_id"]: n["state"] for n in as_json(home, "dev", "status")}[6] == "paused"
    odradek(home, "dev", "kill", "6", "--signal", "CONT")
    odradek(home, "dev", "kill", "6")
    deadline = time.monotonic() + 10
    while {n["node_id"]: n["state"] for n in as_json(home, "dev", "status")}[6] != "stopped":
        assert time.monotonic() < deadline, "node 6 still running 10 s after SIGKILL"
        time.sleep(0.1)
    odradek(home, "dev", "start", "6", "--wait")
    assert {n["node_id"]: n["state"] for n in as_json(home, "dev", "status")}[6] == "running"
    assert not any(b["fenced"] for b in as_json(home, "broker", "list"))


def test_no_cluster_is_a_clear_error(tmp_path: Path) -> None:
    result = odradek(tmp_path, "cluster", "info", check=False)
    assert result.returncode != 0 and "no cluster" in result.stderr


def test_produce_from_stdin_and_consume_as_json(home: Path) -> None:
    odradek(home, "topic", "create", "lines", "-p", "1", "-r", "2")
    env = {**os.environ, "ODRADEK_HOME": str(home)}
    produced = subprocess.run(
        [
            sys.executable,
            "-m",
            "odradek.client.cli.main",
            "produce",
            "lines",
            "--key-separator",
            ":",
            "--format",
            "json",
        ],
        input="a:one\nb:two\nthree\n",
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert produced.returncode == 0, produced.stderr
    assert json.loads(produced.stdout)["records"] == 3
    out = odradek(home, "consume", "lines", "--num", "3", "--format", "json").stdout.splitlines()
    records = [json.loads(line) for line in out]
    assert [(r["key"], r["value"], r["offset"]) for r in records] == [
        ("a", "one", 0),
        ("b", "two", 1),
        (None, "three", 2),
    ]
    assert all(set(r) == {"topic", "partition", "offset", "timestamp", "key", "value", "headers"} for r in records)


def test_perf_produce_and_consume_report_figures(home: Path) -> None:
    odradek(home, "topic", "create", "perf", "-p", "2", "-r", "1")
    result = as_json(home, "perf", "produce", "--topic", "perf", "--num-records", "20000", "--record-size", "100")
    assert result["records"] == 20000 and result["records_per_sec"] > 0
    assert 0 < result["p50_ms"] <= result["p99_ms"] <= result["max_latency_ms"]
    consumed = as_json(home, "perf", "consume", "--topic", "perf", "--num-records", "20000")
    assert consumed["records"] >= 20000 and consumed["mb_per_sec"] > 0

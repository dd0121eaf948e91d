"""``odradek group ...`` as an operator runs it against a real cluster with a real consumer group: list, describe
(members, assignment, committed offsets, lag), reset-offsets refused while members are active then taking effect,
delete-offsets, delete, and ``consume __consumer_offsets`` decoding the commits."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from odradek.client import Consumer, Producer

from .conftest import FAST, wait_for

GROUP_NODE = {**FAST, "offsets.topic.num.partitions": 3, "group.initial.rebalance.delay.ms": 200}
TOPIC = "gcli"
PER_PARTITION = 10
BASE_TS = 1_700_000_000_000  # record i of a partition has timestamp BASE_TS + i * 1000
pytestmark = [
    pytest.mark.integration,
    pytest.mark.odradek_cluster(
        controllers=1, brokers=2, config=GROUP_NODE, topics={TOPIC: {"partitions": 3, "replication_factor": 2}}
    ),
]
CLI = [sys.executable, "-m", "odradek.client.cli.main"]


def cli(cluster: Any, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "ODRADEK_BOOTSTRAP_SERVERS": cluster.bootstrap_servers}
    return subprocess.run([*CLI, *args], capture_output=True, text=True, env=env, timeout=60)


def cli_json(cluster: Any, *args: str) -> Any:
    result = cli(cluster, *args, "--format", "json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def one_error(result: subprocess.CompletedProcess) -> str:
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    return lines[0]


def committed(description: dict) -> dict[int, int | None]:
    return {r["partition"]: r["committed_offset"] for r in description["offsets"] if r["topic"] == TOPIC}


class Member(threading.Thread):
    """A group member that commits after every poll until stopped; close() leaves the group."""

    def __init__(self, config: dict) -> None:
        super().__init__(daemon=True)
        self.config, self.stop_event, self.error = config, threading.Event(), None
        self.first: dict[int, int] = {}

    def run(self) -> None:
        try:
            with Consumer(self.config) as c:
                c.subscribe([TOPIC])
                while not self.stop_event.is_set():
                    for r in c.poll(100):
                        self.first.setdefault(r.partition, r.offset)
                    c.commit()
        except BaseException as e:
            self.error = e

    def stop(self) -> None:
        self.stop_event.set()
        self.join(30)
        assert self.error is None, self.error


def group_config(cluster: Any, group: str) -> dict:
    return {
        "bootstrap.servers": cluster.bootstrap_servers,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 500,
        "fetch.max.wait.ms": 100,
    }


@pytest.fixture
def records(odradek_cluster: Any) -> None:
    with Producer({"bootstrap.servers": odradek_cluster.bootstrap_servers, "acks": "all"}) as p:
        futures = [
            p.send(TOPIC, f"v{i}".encode(), partition=part, timestamp=BASE_TS + i * 1000)
            for part in range(3)
            for i in range(PER_PARTITION)
        ]
        p.flush(30)
        assert all(f.exception(5) is None for f in futures)


@pytest.fixture
def member(odradek_cluster: Any, records: None) -> Iterator[Member]:
    m = Member(group_config(odradek_cluster, "ops"))
    m.start()
    yield m
    m.stop_event.set()
    m.join(30)


def test_group_operations_through_the_cli(odradek_cluster: Any, member: Member) -> None:
    cluster = odradek_cluster
    wait_for(lambda: "ops" in [g["group_id"] for g in cli_json(cluster, "group", "list")], 30, what="group listed")

    def caught_up() -> dict | None:
        d = cli_json(cluster, "group", "describe", "ops")
        ok = d["state"] == "Stable" and all(r["lag"] == 0 for r in d["offsets"]) and len(d["offsets"]) == 3
        return d if ok else None

    d = wait_for(caught_up, 30, what="lag 0")
    assert set(d) == {"group_id", "state", "protocol", "generation", "coordinator", "group_type", "members", "offsets"}
    assert d["protocol"] and d["generation"] >= 1 and d["coordinator"] >= 0 and d["group_type"] == "classic"
    [m] = d["members"]
    assert sorted(a["partition"] for a in m["assignment"]) == [0, 1, 2] and m["host"]
    assert {r["member_id"] for r in d["offsets"]} == {m["member_id"]}
    assert committed(d) == dict.fromkeys(range(3), PER_PARTITION)
    assert all(r["log_end_offset"] == PER_PARTITION for r in d["offsets"])

    # While the member is active: no reset (dry run included) and no delete; nothing changes.
    refused = one_error(cli(cluster, "group", "reset-offsets", "ops", "--topic", TOPIC, "--to-earliest"))
    assert "group ops has active members; stop them first" in refused
    assert "NON_EMPTY_GROUP" in one_error(cli(cluster, "group", "delete", "ops"))
    assert committed(cli_json(cluster, "group", "describe", "ops")) == dict.fromkeys(range(3), PER_PARTITION)

    member.stop()
    wait_for(lambda: cli_json(cluster, "group", "describe", "ops")["state"] == "Empty", 30, what="empty group")

    plan = cli_json(cluster, "group", "reset-offsets", "ops", "--topic", TOPIC, "--to-earliest", "--dry-run")
    assert plan["dry_run"] and [r["new_offset"] for r in plan["offsets"]] == [0, 0, 0]
    assert committed(cli_json(cluster, "group", "describe", "ops")) == dict.fromkeys(range(3), PER_PARTITION)

    cli_json(cluster, "group", "reset-offsets", "ops", "--topic", TOPIC, "--to-earliest")
    d = cli_json(cluster, "group", "describe", "ops")
    assert committed(d) == dict.fromkeys(range(3), 0) and all(r["lag"] == PER_PARTITION for r in d["offsets"])

    cli_json(cluster, "group", "reset-offsets", "ops", "--topic", f"{TOPIC}:0", "--to-offset", "4")
    cli_json(cluster, "group", "reset-offsets", "ops", "--topic", f"{TOPIC}:1", "--shift-by", "100")  # clamped
    cli_json(cluster, "group", "reset-offsets", "ops", "--topic", f"{TOPIC}:0", "--shift-by", "3")
    at = "2023-11-14T22:13:26"  # BASE_TS + 6 s: the 7th record of each partition (BASE_TS is 22:13:20 UTC)
    cli_json(cluster, "group", "reset-offsets", "ops", "--topic", f"{TOPIC}:2", "--to-datetime", at)
    assert committed(cli_json(cluster, "group", "describe", "ops")) == {0: 7, 1: PER_PARTITION, 2: 6}

    # A new member of the group starts where the reset put it.
    again = Member(group_config(cluster, "ops"))
    again.start()
    wait_for(lambda: len(again.first) == 2, 30, what="the new member consumed")
    again.stop()
    assert again.first == {0: 7, 2: 6}

    decoded = cli(cluster, "consume", "__consumer_offsets", "--format", "json", "--exit-at-end")
    assert decoded.returncode == 0, decoded.stderr
    rows = [json.loads(line) for line in decoded.stdout.splitlines()]
    commits = [r for r in rows if r["type"] == "offset_commit" and r["key"]["group"] == "ops" and r["value"]]
    assert {(r["key"]["topic"], r["key"]["partition"], r["value"]["offset"]) for r in commits} >= {
        (TOPIC, 0, 4),
        (TOPIC, 2, 6),
    }
    assert any(r["type"] == "group_metadata" and r["key"]["group"] == "ops" for r in rows)

    wait_for(lambda: cli_json(cluster, "group", "describe", "ops")["state"] == "Empty", 30, what="empty again")
    gone = cli_json(cluster, "group", "delete-offsets", "ops", "--topic", TOPIC)
    assert sorted(r["partition"] for r in gone["partitions"]) == [0, 1, 2]
    assert all(r["error"] is None for r in gone["partitions"])
    assert not cli_json(cluster, "group", "describe", "ops")["offsets"]

    assert cli_json(cluster, "group", "delete", "ops") == {"group_id": "ops", "deleted": True}
    assert "ops" not in [g["group_id"] for g in cli_json(cluster, "group", "list")]
    assert "GROUP_ID_NOT_FOUND" in one_error(cli(cluster, "group", "describe", "ops"))


def scrape_lag(cluster: Any, node: int, group: str) -> float | None:
    port = cluster.node(node).metrics_port
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    for line in text.splitlines():
        if line.startswith(f'odradek_consumer_group_lag_sum{{group="{group}"}}'):
            return float(line.split()[-1])
    return None


def test_the_coordinator_exports_consumer_lag(odradek_cluster: Any, records: None) -> None:
    cluster = odradek_cluster
    cli_json(cluster, "group", "reset-offsets", "lagged", "--topic", TOPIC, "--to-earliest")
    d = cli_json(cluster, "group", "describe", "lagged")
    behind = sum(r["lag"] for r in d["offsets"])
    assert behind >= 3 * PER_PARTITION
    wait_for(lambda: scrape_lag(cluster, d["coordinator"], "lagged") == behind, 30, what="the lag exported")
    m = Member(group_config(cluster, "lagged"))
    m.start()
    try:
        wait_for(lambda: scrape_lag(cluster, d["coordinator"], "lagged") == 0, 40, what="lag 0 exported")
    finally:
        m.stop()

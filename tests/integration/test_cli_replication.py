"""The replication commands of ``odradek`` against a real cluster (3 controllers, brokers 4-6): ``cluster health``
before, during and after a paused broker, ``leader elect``, and ``partition reassign`` with ``--wait`` and
``--cancel``. Each command runs as its own process, as an operator's would."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator

import pytest

from odradek.client import Producer
from odradek.client.admin import Admin
from odradek.deploy.local import DevCluster

from .conftest import wait_for

pytestmark = pytest.mark.integration

BROKERS = (4, 5, 6)
HEALTH_KEYS = {
    "healthy",
    "controller_id",
    "unavailable_brokers",
    "leaderless_count",
    "under_replicated_count",
    "under_min_isr_count",
    "offline_partitions",
    "under_replicated_partitions",
    "under_min_isr_partitions",
    "unavailable_controllers",
}


def servers(cluster: DevCluster, without: int | None = None) -> str:
    """Every node's address but ``without``'s: a paused node would cost each command an RPC timeout."""
    return ",".join(f"127.0.0.1:{n.broker_port or n.controller_port}" for n in cluster.nodes if n.node_id != without)


def odradek(
    cluster: DevCluster, *args: str, without: int | None = None, check: bool = True
) -> subprocess.CompletedProcess:
    env = {**os.environ, "ODRADEK_HOME": str(cluster.directory / "home")}
    env.pop("ODRADEK_BOOTSTRAP_SERVERS", None)
    result = subprocess.run(
        [sys.executable, "-m", "odradek.client.cli.main", *args, "-X", servers(cluster, without)],
        capture_output=True,
        text=True,
        env=env,
        timeout=90,
    )
    if check and result.returncode != 0:
        pytest.fail(f"odradek {' '.join(args)} failed ({result.returncode}): {result.stderr}")
    return result


def as_json(cluster: DevCluster, *args: str, without: int | None = None):
    return json.loads(odradek(cluster, *args, "--format", "json", without=without).stdout)


def one_line_error(result: subprocess.CompletedProcess, expected: str) -> None:
    assert result.returncode == 1, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and expected in lines[0], result.stderr


def healthy(cluster: DevCluster) -> bool:
    return as_json(cluster, "cluster", "health")["healthy"]


@pytest.fixture(scope="module")
def rf3(admin: Admin) -> Iterator[str]:
    """A topic with a replica on every broker, each partition led by its preferred (first) replica."""
    admin.create_topic("rf3", partitions=3, replication_factor=3)
    wait_for(lambda: all(len(p.isr) == 3 for p in admin.describe_topic("rf3").partitions), 15, what="rf3 fully in sync")
    yield "rf3"


def test_health_of_a_fresh_cluster(cluster: DevCluster, rf3: str) -> None:
    wait_for(lambda: healthy(cluster), 20, what="a healthy cluster")
    health = as_json(cluster, "cluster", "health")
    assert set(health) == HEALTH_KEYS
    assert health["healthy"] is True and health["controller_id"] in (1, 2, 3)
    assert health["unavailable_brokers"] == [] and health["offline_partitions"] == []
    assert health["unavailable_controllers"] == []
    assert health["leaderless_count"] == health["under_replicated_count"] == health["under_min_isr_count"] == 0
    human = odradek(cluster, "cluster", "health", "--exit-code")
    assert human.returncode == 0 and "healthy: yes" in human.stdout


def test_leader_elect_when_leaders_are_preferred(cluster: DevCluster, rf3: str) -> None:
    described = as_json(cluster, "topic", "describe", rf3)
    preferred = {p["partition"]: p["replicas"][0] for p in described["partitions"]}
    assert {p["partition"]: p["leader"] for p in described["partitions"]} == preferred
    results = as_json(cluster, "leader", "elect", "--topic", rf3)
    assert [(r["topic"], r["partition"]) for r in results] == [(rf3, 0), (rf3, 1), (rf3, 2)]
    assert all(set(r) == {"topic", "partition", "leader", "error"} for r in results)
    assert all(r["error"] == "ELECTION_NOT_NEEDED" and r["leader"] == preferred[r["partition"]] for r in results)
    (single,) = as_json(cluster, "leader", "elect", "--topic", rf3, "--partition", "1")
    assert single["partition"] == 1 and single["error"] == "ELECTION_NOT_NEEDED"
    human = odradek(cluster, "leader", "elect", "--topic", rf3)
    assert human.returncode == 0 and "ELECTION_NOT_NEEDED" in human.stdout


def test_health_reports_a_paused_broker_then_recovers(cluster: DevCluster, rf3: str) -> None:
    victim = BROKERS[-1]
    cluster.signal(victim, signal.SIGSTOP)
    try:

        def fenced_and_moved() -> dict | None:
            h = as_json(cluster, "cluster", "health", without=victim)
            done = h["unavailable_brokers"] == [victim] and not h["offline_partitions"]
            return h if done and h["under_replicated_count"] >= 3 else None

        health = wait_for(fenced_and_moved, 30, interval=0.5, what=f"broker {victim} fenced and its ISRs shrunk")
        assert health["healthy"] is False and health["leaderless_count"] == 0
        under = {(p["topic"], p["partition"]) for p in health["under_replicated_partitions"]}
        assert {(rf3, 0), (rf3, 1), (rf3, 2)} <= under
        assert health["under_replicated_count"] == len(health["under_replicated_partitions"])

        report = odradek(cluster, "cluster", "health", "--format", "json", without=victim)
        assert report.returncode == 0  # a report, not a failure
        gated = odradek(cluster, "cluster", "health", "--exit-code", "--format", "json", without=victim, check=False)
        assert gated.returncode == 1 and json.loads(gated.stdout)["healthy"] is False
        table = odradek(cluster, "topic", "describe", rf3, without=victim).stdout
        assert table.count("UNDER-REPLICATED") >= 3 and "ISR" in table
        described = as_json(cluster, "topic", "describe", rf3, without=victim)
        assert all(victim not in p["isr"] and p["under_replicated"] for p in described["partitions"])
    finally:
        cluster.signal(victim, signal.SIGCONT)
    wait_for(lambda: healthy(cluster), 40, interval=0.5, what=f"broker {victim} back in every ISR")


def test_health_reports_a_paused_controller_then_recovers(cluster: DevCluster, rf3: str) -> None:
    leader = as_json(cluster, "cluster", "quorum")["leader_id"]
    victim = next(n.node_id for n in cluster.nodes if n.controller_port and n.node_id != leader)
    cluster.signal(victim, signal.SIGSTOP)
    try:
        health = wait_for(
            lambda: (h := as_json(cluster, "cluster", "health", without=victim))["unavailable_controllers"] and h,
            20,
            interval=0.5,
            what=f"controller {victim} reported as not following",
        )
        assert health["unavailable_controllers"] == [victim] and health["healthy"] is False
        assert health["unavailable_brokers"] == []  # the quorum still has its majority
    finally:
        cluster.signal(victim, signal.SIGCONT)
    wait_for(lambda: healthy(cluster), 30, interval=0.5, what=f"controller {victim} following again")


def test_preferred_election_restores_leadership(cluster: DevCluster, admin: Admin, rf3: str) -> None:
    # After the pause, broker 6 leads none of the partitions it prefers (unless the automatic rebalance ran).
    wait_for(lambda: healthy(cluster), 40, interval=0.5, what="every replica in sync")
    results = as_json(cluster, "leader", "elect", "--topic", rf3)
    assert len(results) == 3 and all(r["error"] in (None, "ELECTION_NOT_NEEDED") for r in results)
    wait_for(
        lambda: all(p.leader == p.replicas[0] for p in admin.describe_topic(rf3).partitions),
        15,
        what="every partition led by its preferred replica",
    )
    assert as_json(cluster, "leader", "elect") == []  # every partition: not-needed elections are left out


def test_partition_reassign_waits_for_the_move(cluster: DevCluster, admin: Admin) -> None:
    admin.create_topic("moving", partitions=1, replication_factor=2)
    with Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"}) as producer:
        sent = [producer.send("moving", f"v{i}".encode(), partition=0) for i in range(20)]
        assert [f.result(timeout=30).offset for f in sent] == list(range(20))
    before = admin.describe_topic("moving").partitions[0]
    spare = next(b for b in BROKERS if b not in before.replicas)
    target = [spare, before.replicas[0]]
    results = as_json(
        cluster,
        "partition",
        "reassign",
        "--topic",
        "moving",
        "--partition",
        "0",
        "--replicas",
        ",".join(map(str, target)),
        "--wait",
        "--timeout",
        "30",
    )
    assert results == [{"topic": "moving", "partition": 0, "error": None}]
    (p,) = as_json(cluster, "topic", "describe", "moving")["partitions"]
    assert set(p["replicas"]) == set(target) and set(p["isr"]) == set(target)
    assert p["adding_replicas"] == [] and p["removing_replicas"] == [] and not p["under_replicated"]
    wait_for(
        lambda: as_json(cluster, "topic", "describe", "moving")["partitions"][0]["high_watermark"] == 20,
        15,
        what="the moved partition serving its 20 records",
    )


def test_a_stuck_reassignment_times_out_and_cancels(cluster: DevCluster, admin: Admin) -> None:
    admin.create_topic("stuck", partitions=1, replication_factor=1)
    (owner,) = admin.describe_topic("stuck").partitions[0].replicas
    paused = next(b for b in BROKERS if b != owner)
    cluster.signal(paused, signal.SIGSTOP)  # registered but not fetching: it can never catch up
    try:
        move = ("partition", "reassign", "--topic", "stuck", "--partition", "0", "--replicas", f"{owner},{paused}")
        timed_out = odradek(cluster, *move, "--wait", "--timeout", "2", without=paused, check=False)
        one_line_error(timed_out, "not complete after 2s")
        (p,) = as_json(cluster, "topic", "describe", "stuck", without=paused)["partitions"]
        assert p["adding_replicas"] == [paused] and p["replicas"] == [owner, paused]
        assert "REASSIGNING +" in odradek(cluster, "topic", "describe", "stuck", without=paused).stdout
        cancel = ("partition", "reassign", "--topic", "stuck", "--partition", "0", "--cancel", "--wait")
        assert as_json(cluster, *cancel, "--timeout", "15", without=paused) == [
            {"topic": "stuck", "partition": 0, "error": None}
        ]
        (p,) = as_json(cluster, "topic", "describe", "stuck", without=paused)["partitions"]
        assert p["replicas"] == [owner] and p["adding_replicas"] == [] and p["removing_replicas"] == []
    finally:
        cluster.signal(paused, signal.SIGCONT)
    wait_for(lambda: healthy(cluster), 40, interval=0.5, what=f"broker {paused} back")


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("leader", "elect", "--topic", "nope"), "UNKNOWN_TOPIC_OR_PARTITION"),
        (("partition", "reassign", "--topic", "nope", "--partition", "0", "--replicas", "4"), "UNKNOWN_TOPIC"),
        (("partition", "reassign", "--topic", "rf3", "--partition", "0", "--replicas", "4,42"), "INVALID_REPLICA"),
        (("partition", "reassign", "--topic", "rf3", "--partition", "0", "--cancel"), "NO_REASSIGNMENT_IN_PROGRESS"),
    ],
)
def test_failures_exit_non_zero_with_one_line(
    cluster: DevCluster, rf3: str, args: tuple[str, ...], expected: str
) -> None:
    one_line_error(odradek(cluster, *args, check=False), expected)


def test_unclean_election_of_a_healthy_topic_changes_nothing(cluster: DevCluster, admin: Admin, rf3: str) -> None:
    leaders = {p.partition: p.leader for p in admin.describe_topic(rf3).partitions}
    results = as_json(cluster, "leader", "elect", "--topic", rf3, "--unclean")
    assert len(results) == 3 and all(r["error"] in (None, "ELECTION_NOT_NEEDED") for r in results)
    assert {p.partition: p.leader for p in admin.describe_topic(rf3).partitions} == leaders

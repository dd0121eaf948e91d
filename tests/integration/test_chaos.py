"""The chaos harness end to end: a short seeded run with leader kills, pauses, controller kills and network
partitions finds no violation and consistent metadata; the same harness with an injected bug (acks=all answered
before replication) is caught; nothing the runs created is left behind."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from odradek.chaos.nemesis import schedule
from odradek.chaos.netns import NetnsNetwork
from odradek.chaos.runner import RunOptions, run
from odradek.deploy.local import process_state

from .conftest import leftovers, namespaces

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not NetnsNetwork.available(), reason="network namespaces are not available here"),
]


def test_short_run_with_fifteen_faults_finds_no_violation(tmp_path: Path) -> None:
    before = namespaces()
    directory = tmp_path / "run"
    faults = ["kill-leader", "pause-leader", "kill", "pause", "kill-controller", "partition", "isolate-kill-leader"]
    # 40 writes/s per producer rather than the default 200, which costs the nodes and the runner CPU and checks
    # nothing more: 2 producers x 40/s over a 56 s run acknowledged 4,362 and 4,399 writes on a loaded 2-core machine.
    # 36 s schedule 15 faults of every kind listed (a longer run was the suite's slowest test).
    options = RunOptions(duration=36, interval=2.3, faults=faults, seed=20261123, rate=40, directory=directory)
    result = run(options, log=print)
    print(result.report.summary_table())
    kinds = {f["kind"] for f in result.report.to_dict()["faults"]}
    assert result.faults_injected >= 15
    assert "partition" in kinds
    assert kinds & {"kill-leader", "isolate-kill-leader"} and kinds & {"pause", "pause-leader"}
    assert result.mechanism == "netns"
    assert result.report.totals["acked"] > 1000
    assert result.report.ok, result.report.summary_table()
    assert result.metadata_consistent, result.metadata_detail
    assert not leftovers(before, directory)


def test_the_checker_catches_acks_before_replication(tmp_path: Path) -> None:
    before = namespaces()
    directory = tmp_path / "run"
    options = RunOptions(
        duration=13,
        interval=3,
        faults=["isolate-kill-leader"],
        seed=5,
        controllers=1,  # the faults here are the brokers': one controller spares the machine two nodes
        directory=directory,
        bug="ack-before-replication",
        keep=True,
    )
    result = run(options, log=print)
    violations = result.report.to_dict()["violations"]
    assert not result.report.ok
    assert violations["lost"]["count"] > 0, result.report.summary_table()
    # The run cleaned up its network and processes even though it kept its directory (node logs) as asked.
    assert namespaces() - before == set()
    pids = [
        int(line.split()[0])
        for line in subprocess.run(["pgrep", "-af", str(directory)], capture_output=True, text=True).stdout.splitlines()
    ]
    assert all(process_state(pid) == "stopped" for pid in pids)


def test_a_failed_run_still_removes_everything_it_created(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from odradek.chaos import workload

    def broken_final_read(self, timeout: float = 120.0) -> None:
        raise RuntimeError("injected failure")

    monkeypatch.setattr(workload.Workload, "final_read", broken_final_read)
    before = namespaces()
    directory = tmp_path / "run"
    with pytest.raises(RuntimeError, match="injected failure"):
        run(RunOptions(duration=4, interval=2, faults=["partition"], controllers=1, directory=directory), log=print)
    assert not leftovers(before, directory)
    out = subprocess.run(["pgrep", "-f", str(directory)], capture_output=True, text=True).stdout
    assert not out.split()


def test_a_run_that_finds_a_violation_keeps_its_evidence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A violation no injected bug explains keeps the run's directory (node logs and data) and its history, though
    the run was not asked to keep anything; its namespaces and processes are still removed."""
    from odradek.chaos import runner

    def finding(history):
        report = real_check(history)
        report.violations["lost"].add({"value": "stand-in"})
        return report

    real_check = runner.check
    monkeypatch.setattr(runner, "check", finding)
    before = namespaces()
    directory = tmp_path / "run"
    lines: list[str] = []
    options = RunOptions(duration=4, interval=2, faults=["kill"], controllers=1, directory=directory)
    result = run(options, log=lines.append)
    assert not result.report.ok
    assert any(str(directory) in line and "kept" in line for line in lines), lines
    assert (directory / "history.jsonl").stat().st_size > 0
    assert list(directory.glob("cluster/node-*/node.log"))
    assert not namespaces() - before
    assert not subprocess.run(["pgrep", "-f", str(directory)], capture_output=True, text=True).stdout.split()


def mounts_under(directory: Path) -> list[str]:
    return [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines() if str(directory) in line]


# What each newer fault's records must show to prove it reached the cluster. Each run must also pass the checker
# (before the eligible-leader and unclean-shutdown handling, crash-unsynced and wipe-disk lost hundreds of
# acknowledged records in such runs; disk-full, which halts one broker after another, left partitions offline until
# the controller's unclean recovery).
REACHED = {
    "lost-responses": r"lost_frames [1-9]",
    "late-responses": r"late_frames [1-9]",
    "crash-unsynced": r"[1-9]\d* files cut back",
    "wipe-disk": r"emptied and formatted again",
    "disk-full": r"data directory full \(\d+ MiB filler",
}
# Writes per second per producer: a quarter of the default, as what these faults leave in their records does not
# depend on the write rate (the default rate acknowledged 3,500 to 6,300 writes in these runs, so about 900 and
# more), except for crash-unsynced, whose crashes cut back what the brokers wrote and had not synced yet.
RATE = {kind: 50.0 for kind in REACHED} | {"crash-unsynced": None}
# The faults share runs two by two where their records cannot mix up (a cluster start per run is the larger cost):
# each pair's seed schedules each of its faults twice in its 15 s (nemesis.schedule, checked below).
RUNS = [("late-responses", "lost-responses"), ("disk-full", "wipe-disk"), ("crash-unsynced",)]


@pytest.mark.parametrize("kinds", RUNS, ids="+".join)
def test_each_newer_fault_is_injected_healed_and_cleaned_up(kinds: tuple[str, ...], tmp_path: Path) -> None:
    import re

    assert sorted(k for run_ in RUNS for k in run_) == sorted(REACHED)
    before = namespaces()
    directory = tmp_path / "run"
    paired = len(kinds) > 1
    options = RunOptions(
        duration=15 if paired else 11,
        interval=3.0 if paired else 3.3,
        faults=list(kinds),
        seed=1 if paired else 3,
        rate=RATE[kinds[0]],
        controllers=1,  # every one of these faults strikes a broker
        directory=directory,
        keep=True,
    )
    planned = [step.kind for step in schedule(options.seed, options.duration, options.faults, options.interval)]
    assert all(planned.count(kind) >= 2 for kind in kinds), planned
    result = run(options, log=print)
    print(result.report.summary_table())
    events = result.report.to_dict()["faults"]
    for kind in kinds:
        faults = [e for e in events if e["type"] == "fault" and e["kind"] == kind]
        heals = [e for e in events if e["type"] == "heal" and e["kind"] == kind]
        assert len(faults) == len(heals) >= 2, (kind, events)
        assert any(re.search(REACHED[kind], str(e["detail"])) for e in faults + heals), events
    assert result.faults_injected == len(planned)
    assert result.report.totals["acked"] > 300  # the cluster came back and the workload went on
    assert result.report.ok, result.report.summary_table()
    assert not namespaces() - before
    assert not mounts_under(directory)


def test_group_workload_under_coordinator_and_consumer_kills_finds_no_violation(tmp_path: Path) -> None:
    """The group workload: three members commit after processing while the coordinator is killed and paused and
    members crash; every acknowledged record is processed by the group and no acknowledged commit is lost or seen
    going back (chaos/checker.py's group rules)."""
    before = namespaces()
    directory = tmp_path / "run"
    faults = ["kill-coordinator", "kill-consumer", "pause-coordinator"]
    options = RunOptions(
        duration=25,
        interval=4,
        faults=faults,
        seed=2,
        consumers=3,
        workload="group",
        controllers=1,  # the coordinators and the members are the brokers' and the runner's
        directory=directory,
    )
    result = run(options, log=print)
    print(result.report.summary_table())
    kinds = {f["kind"] for f in result.report.to_dict()["faults"] if f["type"] == "fault"}
    assert {"kill-coordinator", "kill-consumer"} <= kinds
    totals = result.report.totals
    assert totals["acked"] > 1000 and totals["commits"] > 100
    assert totals["processed"] >= totals["acked"]
    assert result.report.ok, result.report.summary_table()
    assert not leftovers(before, directory)


def test_a_secured_cluster_with_a_least_privilege_transactional_workload_loses_nothing(tmp_path: Path) -> None:
    """``--security``: TLS everywhere, SCRAM, the authorizer on; the transactional workload logs in as a SCRAM user
    holding only the ACLs it needs (topic Read/Write, group Read, transactional-id Write, IdempotentWrite) through
    leader kills and pauses."""
    before = namespaces()
    directory = tmp_path / "run"
    options = RunOptions(
        duration=30,
        faults=["kill-leader", "pause-leader"],
        seed=7,
        controllers=1,
        workload="txn",
        security=True,
        directory=directory,
    )
    lines: list[str] = []
    result = run(options, log=lines.append)
    print("\n".join(lines), result.report.summary_table(), sep="\n")
    assert any("workload user chaos-workload" in line for line in lines)
    assert result.faults_injected >= 8
    assert result.report.totals["acked"] > 0
    assert result.report.ok, result.report.summary_table()
    assert result.metadata_consistent, result.metadata_detail
    assert not leftovers(before, directory)

"""Membership and combined faults end to end: replicas of the workload's topic and of its transaction coordinators'
``__transaction_state`` partitions move, a broker is retired and comes back empty, and steps inject two faults at
once; every scheduled fault is injected, the moves really happen, and the checker finds nothing wrong."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from odradek.chaos.combined import combine, halves
from odradek.chaos.membership import TRANSACTION_STATE_TOPIC
from odradek.chaos.nemesis import schedule
from odradek.chaos.netns import NetnsNetwork
from odradek.chaos.runner import RunOptions, RunResult, run

from .conftest import leftovers, namespaces

pytestmark = pytest.mark.integration

MOVE = re.compile(r"(\S+)-(\d+) \[([\d, ]*)\] -> \[([\d, ]*)\]")


def ids(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def events(result: RunResult, kind: str, type_: str) -> list[dict[str, object]]:
    return [e for e in result.report.to_dict()["faults"] if e["type"] == type_ and e["kind"] == kind]


def scheduled(options: RunOptions) -> Counter[str]:
    """How many faults of each kind the run's schedule holds, both halves of combined steps counted."""
    steps = combine(
        schedule(options.seed, options.duration, options.faults, options.interval),
        options.seed,
        options.faults,
        options.combine,
    )
    return Counter(h for s in steps for h in halves(s.kind))


def injected(result: RunResult) -> Counter[str]:
    return Counter(str(e["kind"]) for e in result.report.to_dict()["faults"] if e["type"] == "fault")


def assert_reassigned(result: RunResult) -> list[str]:
    """Each reassign's record names a new broker, and its heal saw the partition on the set asked for with every
    replica in sync; returns the topics moved."""
    faults, heals = events(result, "reassign", "fault"), events(result, "reassign", "heal")
    assert len(faults) == len(heals) >= 1
    topics = []
    for fault, heal in zip(faults, heals, strict=True):
        topic, partition, old, new = MOVE.search(str(fault["detail"])).groups()  # type: ignore[union-attr]
        assert heal["target"] == fault["target"] == f"{topic}-{partition}"
        assert len(ids(new)) == len(ids(old)) and set(ids(new)) - set(ids(old)), fault
        done = re.search(r"done: replicas \[([\d, ]*)\], ISR \[([\d, ]*)\]", str(heal["detail"]))
        assert done, heal
        assert set(ids(done.group(1))) == set(ids(done.group(2))) == set(ids(new)), heal
        topics.append(topic)
    return topics


def test_reassign_and_decommission_under_the_transactional_workload(tmp_path: Path) -> None:
    before = namespaces()
    directory = tmp_path / "run"
    options = RunOptions(
        duration=21,
        interval=5,
        faults=["reassign", "decommission"],
        seed=4,
        controllers=1,
        workload="txn",
        directory=directory,
    )
    lines: list[str] = []
    result = run(options, log=lines.append)
    print("\n".join(lines), result.report.summary_table(), sep="\n")
    assert any("4 brokers" in line for line in lines)  # one more than the replication factor
    expected = scheduled(options)
    assert set(expected) == {"reassign", "decommission"}
    assert injected(result) == expected and result.faults_injected == sum(expected.values())
    assert TRANSACTION_STATE_TOPIC in assert_reassigned(result)
    retired = zip(events(result, "decommission", "fault"), events(result, "decommission", "heal"), strict=True)
    for fault, heal in retired:
        victim = int(str(fault["target"]).removeprefix("node-"))
        moves = MOVE.findall(str(fault["detail"]))
        assert moves, fault
        assert all(victim in ids(old) and victim not in ids(new) for _, _, old, new in moves), fault
        assert "disk kept" not in str(fault["detail"])  # every replica left before the stop
        assert "wiped and formatted, restarted as a fresh broker" in str(heal["detail"])
        back = MOVE.findall(str(heal["detail"]))
        assert back and all(victim in ids(new) for _, _, _, new in back), heal
        assert "every ISR whole" in str(heal["detail"]), heal
    assert result.report.totals["acked"] > 0
    assert result.report.ok, result.report.summary_table()
    assert result.metadata_consistent, result.metadata_detail
    assert not leftovers(before, directory)


@pytest.mark.skipif(not NetnsNetwork.available(), reason="network namespaces are not available here")
def test_combined_faults_are_all_injected_and_healed_together(tmp_path: Path) -> None:
    before = namespaces()
    directory = tmp_path / "run"
    options = RunOptions(
        duration=17,
        interval=4,
        faults=["reassign", "kill", "partition", "pause-leader"],
        combine=1.0,
        seed=6,
        controllers=1,
        directory=directory,
    )
    lines: list[str] = []
    result = run(options, log=lines.append)
    print("\n".join(lines), result.report.summary_table(), sep="\n")
    expected = scheduled(options)
    assert any("+" in line and "reassign" in line for line in lines if line.startswith("  ") and " for " in line)
    assert injected(result) == expected and result.faults_injected == sum(expected.values()) // 2
    assert "reassign" in expected and len(expected) >= 3
    assert_reassigned(result)
    assert result.report.totals["acked"] > 500
    assert result.report.ok, result.report.summary_table()
    assert result.metadata_consistent, result.metadata_detail
    assert not leftovers(before, directory)

"""The transactional chaos workload end to end: transactional producers commit, abort and get fenced while
partition leaders and transaction coordinators are killed and paused and the network is partitioned; the checker
finds no lost commit, no aborted or uncommitted read, no partial transaction, no duplicate and no inconsistent
offset. The same workload with readers that ignore the transactions (the read-uncommitted bug) is caught."""

from __future__ import annotations

from pathlib import Path

import pytest

from odradek.chaos.netns import NetnsNetwork
from odradek.chaos.runner import RunOptions, run

from .conftest import leftovers, namespaces

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not NetnsNetwork.available(), reason="network namespaces are not available here"),
]


def test_txn_workload_under_leader_and_coordinator_faults_finds_no_violation(tmp_path: Path) -> None:
    before = namespaces()
    directory = tmp_path / "run"
    faults = ["kill-leader", "pause-leader", "partition", "kill-coordinator", "pause-coordinator"]
    options = RunOptions(
        duration=30,
        interval=3,
        faults=faults,
        seed=29,
        workload="txn",
        directory=directory,
        min_transactions=60,
        min_aborts=8,
    )
    result = run(options, log=print)
    print(result.report.summary_table())
    kinds = {f["kind"] for f in result.report.to_dict()["faults"] if f["type"] == "fault"}
    assert result.faults_injected >= 7
    assert {"kill-coordinator", "pause-coordinator", "partition", "kill-leader", "pause-leader"} <= kinds
    totals = result.report.totals  # a loaded 2-core machine commits about 100 in such a run
    assert totals["committed"] >= 40 and totals["aborted"] >= 8 and totals["fenced"] >= 3, totals
    assert totals["final_reads"] >= 80 and totals["uncommitted_reads"] > totals["final_reads"]
    assert result.report.ok, result.report.summary_table()
    assert result.metadata_consistent, result.metadata_detail
    assert not leftovers(before, directory)


def test_the_txn_checker_catches_readers_that_ignore_transactions(tmp_path: Path) -> None:
    before = namespaces()
    directory = tmp_path / "run"
    # Seed 55: both producers abort their first transaction, so the log starts with aborted writes, which a reader
    # ignoring transactions reads at once, however slowly a loaded machine lets the run go (with seed 1 a run that
    # made only 2 transactions on a busy machine read none of its aborted one).
    options = RunOptions(
        duration=6,
        interval=3,
        faults=["pause-leader"],
        seed=55,
        workload="txn",
        min_transactions=4,  # and however loaded the machine, enough of them for the reads to catch
        bug="read-uncommitted",
        directory=directory,
    )
    result = run(options, log=print)
    violations = result.report.to_dict()["violations"]
    assert not result.report.ok
    assert violations["aborted_read"]["count"] > 0, result.report.summary_table()
    assert violations["uncommitted_read"]["count"] > 0, result.report.summary_table()
    assert not leftovers(before, directory)

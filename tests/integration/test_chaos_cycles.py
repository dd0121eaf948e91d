"""The dependency-cycle check on a real run. Readers that ignore transactions (the read-uncommitted bug) read
records before their transactions' commits are invoked; each such read closes a cycle ``t -wr-> read -realtime->
t`` (or through ``lso``, a read past the open record), which the checker reports as G1c-realtime. The clean
transactional runs (tests/integration/test_chaos_txn.py) find none."""

from __future__ import annotations

from pathlib import Path

import pytest

from odradek.chaos.history import History
from odradek.chaos.netns import NetnsNetwork
from odradek.chaos.runner import RunOptions, run
from odradek.chaos.txn_checker import check, index_history

from .conftest import leftovers, namespaces

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not NetnsNetwork.available(), reason="network namespaces are not available here"),
]


def test_readers_that_ignore_transactions_close_dependency_cycles(tmp_path: Path) -> None:
    before = namespaces()
    directory = tmp_path / "run"
    history_path = tmp_path / "history.jsonl"
    options = RunOptions(
        duration=12,  # a loaded machine may commit nothing for the first seconds
        interval=6,
        min_transactions=10,  # enough committed transactions for some to be read before their commit
        faults=["pause-leader"],
        seed=31,
        workload="txn",
        bug="read-uncommitted",
        directory=directory,
        history_path=history_path,
    )
    result = run(options, log=print)
    summary = result.report.summary_table()
    print(summary)
    cycles = result.report.to_dict()["violations"]["cycle"]
    assert cycles["count"] > 0, summary
    for example in cycles["examples"]:
        kinds = {step["edge"] for step in example["steps"]}
        assert example["anomaly"] == "G1c-realtime" and "realtime" in kinds and kinds & {"wr", "lso"}, example
    totals = result.report.totals
    assert totals["graph_operations"] > totals["committed"] > 0 and totals["graph_wr"] > 0, summary
    # Each committed transaction read before its commit call is in a cycle with that read (and maybe more).
    ix = index_history(History.read_jsonl(history_path))
    early = {value: ix.writes[value].txn for value in ix.early if value in ix.writes}
    committed = {txn for txn in early.values() if ix.txns[txn].committed and not ix.txns[txn].aborted_by}
    reads = [value for value, txn in early.items() if txn in committed]
    assert committed, summary
    assert totals["graph_cyclic_operations"] >= len(committed) + len(reads), summary
    assert check(History.read_jsonl(history_path)).violations["cycle"].count == cycles["count"]
    assert not leftovers(before, directory)

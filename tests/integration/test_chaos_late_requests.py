"""Short real runs of the two faults about time: ``late-requests`` (the workload's requests to one broker held past
the client's timeout, then delivered: Jepsen's torn transactions come from such requests) over the transactional
Kafka workload, and ``clock-skew`` (one broker's wall clock offset by seconds to minutes) over the transactional
workload of odradek's own client. Every scheduled fault must be injected, its records must show that it reached
the cluster, and the checkers must find no violation."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from odradek.chaos.nemesis import schedule
from odradek.chaos.netns import NetnsNetwork
from odradek.chaos.runner import RunOptions, RunResult, run

from .conftest import leftovers, namespaces

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not NetnsNetwork.available(), reason="network namespaces are not available here"),
]


def short_run(tmp_path: Path, **options: Any) -> tuple[RunResult, list[dict[str, Any]]]:
    """A run on 1 controller and 3 brokers that must pass the checker, inject every step of its schedule and leave
    nothing behind; returns the result and the nemesis's records."""
    before = namespaces()
    directory = tmp_path / "run"
    lines: list[str] = []
    opts = RunOptions(controllers=1, directory=directory, **options)
    result = run(opts, log=lines.append)
    print("\n".join(lines), result.report.summary_table(), sep="\n")
    assert result.mechanism == "netns"
    assert result.report.ok, result.report.summary_table()
    assert result.metadata_consistent, result.metadata_detail
    assert result.faults_injected == len(schedule(opts.seed, opts.duration, opts.faults, opts.interval))
    assert not leftovers(before, directory)
    events = [e for e in result.report.to_dict()["faults"] if e["kind"] in opts.faults]
    assert [e["type"] for e in events] == ["fault", "heal"] * result.faults_injected
    return result, events


def test_late_requests_land_after_their_clients_gave_up_and_break_no_transaction(tmp_path: Path) -> None:
    result, events = short_run(
        tmp_path, workload="kafka-txn", faults=["late-requests"], duration=17, interval=5.5, seed=5
    )
    heals = [str(e["detail"]) for e in events if e["type"] == "heal"]
    counted = [re.search(r"held (\d+), landed (\d+) \((\d+) after their client closed", h) for h in heals]
    assert all(counted), heals
    held, landed, orphaned = (sum(int(m.group(i)) for m in counted if m) for i in (1, 2, 3))
    assert held > 0 and landed > 0
    assert orphaned > 0  # requests the client had timed out on (librdkafka then disconnects) still reached a broker
    totals = result.report.totals
    assert totals["committed"] > 0 and totals["final_reads"] > 0


def test_clock_skew_of_a_broker_is_seen_by_it_and_breaks_nothing(tmp_path: Path) -> None:
    result, events = short_run(tmp_path, workload="txn", faults=["clock-skew"], duration=16, interval=3, seed=8)
    faults = [str(e["detail"]) for e in events if e["type"] == "fault"]
    heals = [str(e["detail"]) for e in events if e["type"] == "heal"]
    assert all(re.search(r"wall clock [+-]\d+\.\d s", f) for f in faults), faults
    assert all("the node saw it" in h and "and its removal" in h for h in heals), heals
    assert result.report.totals["committed"] > 0

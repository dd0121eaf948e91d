"""A short run of the share group workload (``--workload kafka-share``): librdkafka share consumers, one SIGKILLed
holding its locks, under partition leader kills and kills and pauses of the group's and the share state's
coordinators, on 1 controller and 3 brokers. The checker finds no record lost, accepted twice or delivered past the
limit; the history shows records released and delivered again, accepted, rejected and archived at the limit."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from odradek.chaos.history import History, ShareDelivered
from odradek.chaos.netns import NetnsNetwork
from odradek.chaos.runner import RunOptions, run

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not NetnsNetwork.available(), reason="network namespaces are not available here"),
]


def namespaces() -> set[str]:
    """The network namespaces this test process made (the runner names them ``odr<pid><letters>-...``)."""
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    own = re.compile(rf"odr{os.getpid()}[a-z]+-")
    return {line.split()[0] for line in out.splitlines() if own.match(line)}


def test_share_workload_under_leader_coordinator_and_consumer_faults_finds_no_violation(tmp_path: Path) -> None:
    faults = ["kill-leader", "kill-coordinator", "pause-coordinator", "kill-consumer"]
    history_path, directory = tmp_path / "history.jsonl", tmp_path / "run"
    before = namespaces()
    lines: list[str] = []
    options = RunOptions(
        duration=13,
        interval=3,
        faults=faults,
        seed=5,
        controllers=1,
        consumers=3,
        workload="kafka-share",
        directory=directory,
        history_path=history_path,
    )
    result = run(options, log=lines.append)
    print("\n".join(lines), result.report.summary_table(), sep="\n")
    assert result.report.ok, result.report.summary_table()
    assert result.metadata_consistent, result.metadata_detail
    assert not directory.exists() and namespaces() <= before, "the run left its directory or namespaces"
    assert result.faults_injected >= 4
    t = result.report.totals
    assert t["records"] > 500 and t["lost"] == 0
    assert t["accepted"] > 0 and t["rejected"] > 0 and t["archived"] > 0
    assert t["redeliveries"] > 0 and t["max_delivery_count"] == t["delivery_limit"]
    events = History.read_jsonl(history_path).events()
    deliveries = [e for e in events if isinstance(e, ShareDelivered)]
    # Records went to more than one member, and some came back to another member than the one that let them go.
    holders: dict[tuple[int, int], set[str]] = {}
    for d in deliveries:
        holders.setdefault((d.partition, d.offset), set()).add(d.consumer)
    assert len({d.consumer for d in deliveries}) >= 3
    assert any(len(consumers) > 1 for consumers in holders.values())

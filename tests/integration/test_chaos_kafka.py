"""The chaos workloads over the brokers' Kafka listener, with librdkafka (confluent-kafka) as the client: the plain
workload (idempotent acks=all producers, assign readers), the group workload (members that commit what they
processed, one of them SIGKILLed), the transactional workload (over SASL_SSL with a least-privilege SCRAM user) and
the exactly-once copy workload each run 20 s of partition leader kills and pauses, and coordinator kills for the
last three. The same checkers as for odradek's own client (and the copy's exactly-once check) find no violation,
the nodes' metadata agrees, and nothing is left behind."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from odradek.chaos.history import History, Processed, Subscribed
from odradek.chaos.netns import NetnsNetwork
from odradek.chaos.runner import RunOptions, RunResult, run

from .conftest import leftovers, namespaces

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not NetnsNetwork.available(), reason="network namespaces are not available here"),
]


def short_run(
    tmp_path: Path, workload: str, faults: list[str], seed: int, duration: float = 20, **options: Any
) -> RunResult:
    """``duration`` s of faults, one every 3 s (6 steps in 20 s, 5 in 16), on 1 controller and 3 brokers; checks the
    run left nothing."""
    before = namespaces()
    directory = tmp_path / "run"
    lines: list[str] = []
    result = run(
        RunOptions(
            duration=duration,
            interval=3,
            faults=faults,
            seed=seed,
            controllers=1,
            workload=workload,
            directory=directory,
            **options,
        ),
        log=lines.append,
    )
    print("\n".join(lines), result.report.summary_table(), sep="\n")
    assert result.mechanism == "netns"
    assert result.report.ok, result.report.summary_table()
    assert result.metadata_consistent, result.metadata_detail
    assert not leftovers(before, directory)
    return result


def injected(result: RunResult) -> set[str]:
    return {str(f["kind"]) for f in result.report.to_dict()["faults"] if f["type"] == "fault"}


def test_kafka_workload_under_leader_kills_and_pauses_finds_no_violation(tmp_path: Path) -> None:
    result = short_run(tmp_path, "kafka", ["kill-leader", "pause-leader"], seed=4, duration=16)
    assert result.faults_injected >= 5
    assert injected(result) == {"kill-leader", "pause-leader"}
    assert result.report.totals["acked"] > 1000
    assert result.report.totals["reads"] > 1000


def test_kafka_group_workload_under_coordinator_and_member_kills_finds_no_violation(tmp_path: Path) -> None:
    faults = ["kill-leader", "pause-leader", "kill-coordinator", "kill-consumer"]
    history_path = tmp_path / "history.jsonl"
    result = short_run(tmp_path, "kafka-group", faults, seed=21, consumers=3, history_path=history_path)
    assert result.faults_injected >= 5
    assert {"kill-leader", "pause-leader", "kill-coordinator"} <= injected(result)
    totals = result.report.totals
    assert totals["acked"] > 1000 and totals["commits"] > 0
    assert totals["processed"] >= totals["acked"]
    # The member processes worked during the faults (not only the final member), in known generations, and a
    # SIGKILLed member's slot got a new incarnation.
    events = History.read_jsonl(history_path).events()
    processed = [e for e in events if isinstance(e, Processed) and e.consumer != "final-member"]
    assert processed and all(e.generation > 0 for e in processed)
    if "kill-consumer" in injected(result):
        assert any(isinstance(e, Subscribed) and not e.consumer.endswith(".0") for e in events)


def test_kafka_txn_workload_over_sasl_ssl_under_coordinator_kills_finds_no_violation(tmp_path: Path) -> None:
    faults = ["kill-leader", "pause-leader", "kill-coordinator"]
    result = short_run(tmp_path, "kafka-txn", faults, seed=3, duration=16, security=True)
    assert result.faults_injected >= 5
    assert injected(result) == set(faults)
    totals = result.report.totals
    assert totals["committed"] > 0 and totals["final_reads"] > 0
    assert totals["uncommitted_reads"] >= totals["final_reads"]


def test_kafka_copy_workload_copies_exactly_once_under_coordinator_kills(tmp_path: Path) -> None:
    """Consume-transform-produce with send_offsets_to_transaction: every input record has exactly one committed
    copy, with aborted attempts (some on purpose) invisible to read_committed readers."""
    faults = ["kill-leader", "pause-leader", "kill-coordinator"]
    result = short_run(tmp_path, "kafka-copy", faults, seed=3, duration=16)
    assert result.faults_injected >= 5
    assert injected(result) == set(faults)
    totals = result.report.totals
    assert totals["input.acked"] > 1000 and totals["inputs"] == totals["copied_once"] == totals["copies"]
    assert totals["output.committed"] > 0 and totals["output.aborted"] > 0

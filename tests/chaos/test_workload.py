"""The workloads' side of the checks: which produce errors count as definite (and that a definitely failed write
read back is then caught), the skip-records bug and how a run selects it, and, on a real one-broker cluster, that
the bug makes real consumers skip records the checker finds, and that a broker's refusal is recorded as definite."""

from __future__ import annotations

import time
from collections.abc import Iterator
from types import SimpleNamespace

import pytest

from odradek.chaos import runner
from odradek.chaos.checker import check
from odradek.chaos.group_workload import GROUP, GroupWorkload
from odradek.chaos.history import FinalRead, History, Read, Send, SendError
from odradek.chaos.runner import GROUP_NODE_SETTINGS, RunOptions
from odradek.chaos.txn_workload import TxnWorkload
from odradek.chaos.workload import SKIP_EVERY, Workload, definite_failure, skip_records
from odradek.client import Admin, Producer
from odradek.client.cli.main import main
from odradek.client.errors import (
    ClientTimeoutError,
    CorruptRecordError,
    ErrorCode,
    InvalidRecordError,
    NetworkError,
    NotEnoughReplicasAfterAppendError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    OdradekError,
    RecordTooLargeError,
    RequestTimedOutError,
    TopicAuthorizationFailedError,
    UnknownTopicOrPartitionError,
)
from odradek.client.structs import ConsumerRecord
from odradek.deploy.local import DevCluster


@pytest.mark.parametrize(
    ("error", "definite"),
    [
        (RecordTooLargeError("MESSAGE_TOO_LARGE"), True),
        (OdradekError("", code=ErrorCode.RECORD_LIST_TOO_LARGE), True),
        (InvalidRecordError("batch has 2 records for 3 offsets"), True),
        (OdradekError("", code=ErrorCode.INVALID_TOPIC_EXCEPTION), True),
        (OdradekError("", code=ErrorCode.INVALID_REQUIRED_ACKS), True),
        (TopicAuthorizationFailedError(), True),
        # Retriable, timed out, or after the append: an earlier attempt may have been appended.
        (RequestTimedOutError(), False),
        (ClientTimeoutError("expiring 1 record(s): delivery.timeout.ms"), False),
        (NetworkError("broker 4 stopped leading while the request waited"), False),
        (NotEnoughReplicasError(), False),
        (NotEnoughReplicasAfterAppendError(), False),
        (NotLeaderOrFollowerError(), False),
        (UnknownTopicOrPartitionError(), False),  # from a future: after retries (send() raising it is definite)
        (CorruptRecordError(), False),  # damaged in transit: another attempt may have passed
        (OdradekError("", code=ErrorCode.INVALID_TIMESTAMP), False),  # depends on when the attempt arrived
        (OdradekError("broker 4 did not answer for this partition"), False),
        (RuntimeError("compression failed"), False),
    ],
)
def test_definite_failures_are_the_errors_that_prove_nothing_was_appended(error: BaseException, definite: bool) -> None:
    assert definite_failure(error) is definite


class _Failed:
    """A record future that failed with ``error``."""

    def __init__(self, error: BaseException) -> None:
        self.error = error

    def exception(self, timeout: float | None = None) -> BaseException:
        return self.error


def test_a_write_refused_definitely_and_read_back_is_a_failed_write_visible() -> None:
    history = History()
    workload = Workload("127.0.0.1:1", "t", 1, history, producers=0, consumers=0)
    for value, error in (("big", RecordTooLargeError("MESSAGE_TOO_LARGE")), ("slow", RequestTimedOutError())):
        history.append(Send(value, "t", 0, process="p0"))
        workload._outcome("p0", value, 0)(_Failed(error))
    errors = [e for e in history if isinstance(e, SendError)]
    assert [(e.value, e.definite) for e in errors] == [("big", True), ("slow", False)]
    assert check(history).ok  # neither is in the log: both may be absent
    read_back = [
        *history,
        Read("c0", "t", 0, 0, "big", process="c0"),
        FinalRead("final", "t", 0, 0, "big", process="f"),
    ]
    report = check(read_back)
    assert {name: v.count for name, v in report.violations.items() if v.count} == {"failed_write_visible": 1}
    assert report.violations["failed_write_visible"].examples[0]["error"].startswith("RecordTooLargeError")
    # The indeterminate one may have been appended after all: present, it only counts as recovered.
    assert check([*history, FinalRead("final", "t", 0, 0, "slow", process="final")]).totals["recovered"] == 1


def test_the_skip_bug_passes_over_the_records_at_multiples_of_skip_every() -> None:
    records = [ConsumerRecord("t", 3, o, 0, 0, None, b"v", ()) for o in range(SKIP_EVERY - 2, 2 * SKIP_EVERY + 2)]
    kept = skip_records(records)
    assert [r.offset for r in records if r not in kept] == [SKIP_EVERY, 2 * SKIP_EVERY]
    assert skip_records([]) == []


def test_a_run_selects_the_skip_bug_for_the_workloads_of_odradeks_client(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(ValueError, match="unknown workload bug"):
        Workload("127.0.0.1:1", "t", 1, History(), bug="read-uncommitted")
    assert TxnWorkload("127.0.0.1:1", "t", 1, History(), bug="skip-records").bug == "skip-records"
    cluster = SimpleNamespace(bootstrap_servers="127.0.0.1:1", kafka_bootstrap_servers="127.0.0.1:2")
    for kind, expected in (("default", Workload), ("group", GroupWorkload), ("txn", TxnWorkload)):
        options = RunOptions(workload=kind, bug="skip-records")
        made = runner.make_workload(options, cluster, "t", History(), "skip-records", {})  # type: ignore[arg-type]
        assert type(made) is expected and made.bug == "skip-records"
    with pytest.raises(ValueError, match="odradek's own client"):
        runner.run(RunOptions(workload="kafka", bug="skip-records"))  # refused before anything is created
    seen: list[RunOptions] = []

    def fake_run(options: RunOptions, log=print) -> runner.RunResult:
        seen.append(options)
        raise RuntimeError("stop here")

    monkeypatch.setattr(runner, "run", fake_run)
    main(["chaos", "run", "--workload", "group", "--unsafe-bug", "skip-records", "--faults", "kill"])
    assert [(o.workload, o.bug) for o in seen] == [("group", "skip-records")]
    assert main(["chaos", "run", "--workload", "kafka", "--unsafe-bug", "skip-records"]) != 0
    assert "odradek's own client" in capsys.readouterr().err and len(seen) == 1


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevCluster]:
    cluster = DevCluster.create(
        tmp_path_factory.mktemp("workload") / "c", controllers=1, brokers=1, overrides=dict(GROUP_NODE_SETTINGS)
    )
    cluster.start_all_and_wait(60)
    try:
        yield cluster
    finally:
        cluster.stop_all()


def _run(workload: Workload, seconds: float) -> None:
    workload.start()
    time.sleep(seconds)
    workload.stop()
    workload.final_read(30)


def test_the_skip_bug_makes_real_readers_skip_records_and_the_checker_finds_them(cluster: DevCluster) -> None:
    with Admin({"bootstrap.servers": cluster.bootstrap_servers}) as admin:
        admin.create_topic("skips", 2, 1)
    history = History()
    _run(Workload(cluster.bootstrap_servers, "skips", 2, history, 1, 1, 300, bug="skip-records"), 3)
    report = check(history)
    found = {name: v.count for name, v in report.violations.items() if v.count}
    assert set(found) == {"read_skip"}, report.summary_table()
    assert found["read_skip"] >= 2 and report.totals["acked"] > 500
    example = report.violations["read_skip"].examples[0]
    assert example["offset"] == example["previous_offset"] + 2 and example["skipped"] == 1


def test_the_skip_bug_makes_real_group_members_skip_records_and_the_checker_finds_them(cluster: DevCluster) -> None:
    with Admin({"bootstrap.servers": cluster.bootstrap_servers}) as admin:
        admin.create_topic("member-skips", 2, 1)
    history = History()
    workload = GroupWorkload(
        cluster.bootstrap_servers, "member-skips", 2, history, 1, 1, 300, group=f"{GROUP}-skips", bug="skip-records"
    )
    _run(workload, 4)
    report = check(history)
    found = {name: v.count for name, v in report.violations.items() if v.count}
    # A skipped record is committed past, so nobody processes it, unless the member stopped before that commit.
    assert set(found) <= {"member_skip", "unprocessed"} and found.get("member_skip", 0) >= 2, report.summary_table()
    # Offset 0 is passed over right where the member started: its start was recorded, at the log start.
    starts = [e for e in report.violations["member_skip"].examples if (e["expected_offset"], e["offset"]) == (0, 1)]
    assert len(starts) == 2 and {e["consumer"] for e in starts} == {"g0.0"}


def test_a_record_the_broker_refuses_as_too_large_is_recorded_as_definite(cluster: DevCluster) -> None:
    with Admin({"bootstrap.servers": cluster.bootstrap_servers}) as admin:
        admin.create_topic("small", 1, 1, {"max.message.bytes": "200"})
    history = History()
    workload = Workload(cluster.bootstrap_servers, "small", 1, history, producers=0, consumers=0)
    with Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"}) as producer:
        producer.send("small", b"x" * 1000, partition=0).add_done_callback(workload._outcome("p0", "big", 0))
        producer.flush(10)
    errors = [e for e in history if isinstance(e, SendError)]
    assert len(errors) == 1 and errors[0].definite, errors
    assert "MESSAGE_TOO_LARGE" in errors[0].error or "RecordTooLargeError" in errors[0].error

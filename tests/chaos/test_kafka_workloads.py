"""The parts of the Kafka-listener workloads that need no cluster: the copy workload's exactly-once checker on
hand-built histories (a clean copy passes; a record not copied, copied twice, or a copy of nothing is caught, and
the input's and the output's own checks still apply), the bound on a librdkafka call that ignores its timeout,
and the group generation read from librdkafka's serialised consumer group metadata."""

from __future__ import annotations

import importlib.util
import sys
import threading
import time

import pytest

from odradek.chaos import runner
from odradek.chaos.copy_checker import check
from odradek.chaos.history import Ack, Event, FinalRead, Send, TxnAck, TxnEnd, TxnWrite
from odradek.chaos.kafka_copy_workload import _Stuck, bounded
from odradek.chaos.kafka_member import generation

IN, OUT = "chaos", "chaos-copy"


def written(*values: str) -> list[Event]:
    """Input values acknowledged and in the input's final read, partition 0 in order."""
    events: list[Event] = []
    for offset, v in enumerate(values):
        events += [Send(v, IN, 0, process="p0"), Ack(v, IN, 0, offset, process="p0")]
    return events + [FinalRead("final", IN, 0, o, v, process="final") for o, v in enumerate(values)]


def copied(txn: str, values: list[str], first: int, committed: bool = True) -> list[Event]:
    """Copies of ``values`` written by ``txn`` at output offsets from ``first``, then its end."""
    events: list[Event] = [TxnEnd(txn, "commit" if committed else "abort", "invoke", process="x0")]
    for i, v in enumerate(values):
        copy = f"{v}@{txn}"
        events += [TxnWrite(txn, copy, OUT, 0, process="x0"), TxnAck(txn, copy, OUT, 0, first + i, process="x0")]
    return [*events[1:], events[0], TxnEnd(txn, "commit" if committed else "abort", "ok", process="x0")]


def final_output(*copies: tuple[int, str]) -> list[Event]:
    return [FinalRead("final", OUT, 0, offset, copy, process="final") for offset, copy in copies]


def counts(history: list[Event]) -> dict[str, int]:
    report = check(history, IN, OUT)
    return {name: v.count for name, v in report.violations.items() if v.count}


def test_a_copy_with_an_aborted_attempt_passes() -> None:
    history = [
        *written("a", "b"),
        *copied("x0.0-0", ["a", "b"], 0, committed=False),  # aborted: offsets 0, 1, then a marker at 2
        *copied("x0.0-1", ["a", "b"], 3),
        *final_output((3, "a@x0.0-1"), (4, "b@x0.0-1")),
    ]
    report = check(history, IN, OUT)
    assert report.ok, report.summary_table()
    assert report.totals["copied_once"] == report.totals["inputs"] == 2
    assert report.totals["output.committed"] == 1 and report.totals["output.aborted"] == 1


def test_a_record_without_a_committed_copy_is_lost() -> None:
    history = [*written("a", "b"), *copied("x0.0-0", ["a"], 0), *final_output((0, "a@x0.0-0"))]
    assert counts(history) == {"copy_lost": 1}


def test_a_record_copied_by_two_committed_transactions_is_duplicated() -> None:
    history = [
        *written("a"),
        *copied("x0.0-0", ["a"], 0),
        *copied("x1.0-0", ["a"], 2),  # a second copier that started from a stale committed offset
        *final_output((0, "a@x0.0-0"), (2, "a@x1.0-0")),
    ]
    assert counts(history) == {"copy_duplicated": 1}


def test_a_copy_of_nothing_is_unexpected_and_the_output_rules_still_apply() -> None:
    history = [
        *written("a"),
        *copied("x0.0-0", ["a", "z"], 0),
        *copied("x0.0-1", ["a"], 3, committed=False),
        *final_output((0, "a@x0.0-0"), (1, "z@x0.0-0"), (3, "a@x0.0-1")),  # an aborted copy read back
    ]
    assert counts(history) == {"copy_unexpected": 1, "copy_duplicated": 1, "output.aborted_read": 1}


def test_the_input_rules_still_apply() -> None:
    history = [*written("a"), Ack("b", IN, 0, 1, process="p0"), *copied("x0.0-0", ["a"], 0)]
    history += final_output((0, "a@x0.0-0"))
    assert counts(history) == {"input.lost": 1}


def test_bounded_gives_up_on_a_call_blocked_past_its_timeout() -> None:
    release = threading.Event()

    def blocked() -> None:
        release.wait(5)

    started = time.monotonic()
    with pytest.raises(_Stuck):
        bounded(blocked, 0.2)
    assert time.monotonic() - started < 2
    release.set()
    bounded(lambda: None, 1)

    def fails() -> None:
        raise ValueError("from the call")

    with pytest.raises(ValueError, match="from the call"):
        bounded(fails, 1)


class _Metadata:
    def __init__(self, serialised: bytes) -> None:
        self.serialised = serialised

    def consumer_group_metadata(self) -> bytes:
        return self.serialised


def test_the_generation_comes_from_the_serialised_group_metadata() -> None:
    serialised = b"CGMDv2:" + (7).to_bytes(4, sys.byteorder, signed=True) + b"g\x00member\x00\x01"
    assert generation(_Metadata(serialised)) == 7  # type: ignore[arg-type]
    assert generation(_Metadata(b"CGMDv3:\x07\x00\x00\x00")) == -1  # type: ignore[arg-type]


def test_a_kafka_workload_without_confluent_kafka_is_refused_with_the_extra_to_install(monkeypatch) -> None:
    """The Kafka workloads need librdkafka, which only the chaos extra installs; the others run without it."""
    real = importlib.util.find_spec
    monkeypatch.setattr(
        runner.importlib.util, "find_spec", lambda name, *a: None if name == "confluent_kafka" else real(name, *a)
    )
    for workload in runner.KAFKA_WORKLOADS:
        with pytest.raises(ValueError, match=r"pip install 'odradek\[chaos\]'"):
            runner.kafka_workload_class(workload)
    monkeypatch.undo()
    assert runner.kafka_workload_class("kafka").__name__ == "KafkaWorkload"


def test_the_epoch_watch_records_each_producer_id_and_epoch_librdkafka_acquires() -> None:
    from odradek.chaos.history import History, ProducerEpoch
    from odradek.chaos.kafka_client import EpochWatch

    history = History()
    watch = EpochWatch("p0", history)
    fmt = "%s [%s] %s"  # as confluent-kafka calls its logger
    watch.log(7, fmt, "GETPID", "p0#producer-1", "[thrd:main]: Acquired PID{Id:1000,Epoch:0}")
    watch.log(7, fmt, "DRAIN", "p0#producer-1", "[thrd:main]: chaos [2] beginning partition drain")
    watch.log(7, fmt, "GETPID", "p0#producer-1", "[thrd:main]: Acquired PID{Id:1000,Epoch:1}")
    # An epoch bump after a skipped sequence (librdkafka bumps it itself, without InitProducerId), as logged in a
    # chaos run whose renumbered messages were written twice.
    watch.log(
        7, fmt, "DRAIN", "p0#producer-1", "[thrd:b/5]: All partitions drained, bumped epoch to PID{Id:1000,Epoch:2}"
    )
    assert [(e.producer_id, e.epoch, e.process) for e in history if isinstance(e, ProducerEpoch)] == [
        (1000, 0, "p0"),
        (1000, 1, "p0"),
        (1000, 2, "p0"),
    ]


def test_a_value_the_client_wrote_twice_is_two_records_each_copied_once() -> None:
    """librdkafka renumbered "a" after an epoch bump and wrote it again at offset 2: two input records. A copy
    names its record (``value@partition:offset@txn``), so each is copied exactly once, and a third copy of either
    is a duplicate; the input's second "a" is the client's (its producer took a new epoch before its ack)."""
    from odradek.chaos.history import ProducerEpoch

    inputs: list[Event] = [
        ProducerEpoch(7, 0, process="p0", time=0.0),
        Send("a", IN, 0, process="p0", time=1.0),
        Send("b", IN, 0, process="p0", time=1.1),
        Ack("b", IN, 0, 1, process="p0", time=1.2),
        ProducerEpoch(7, 1, process="p0", time=2.0),
        Ack("a", IN, 0, 2, process="p0", time=3.0),
        *(FinalRead("final", IN, 0, o, v, process="final", time=9.0) for o, v in enumerate(["a", "b", "a"])),
    ]

    def copies_of(*records: tuple[str, int], txn: str = "x0.0-0", first: int = 0) -> list[Event]:
        names = [f"{v}@0:{o}@{txn}" for v, o in records]
        events: list[Event] = [TxnEnd(txn, "commit", "invoke", process="x0", time=5.0)]
        for i, name in enumerate(names):
            events += [
                TxnWrite(txn, name, OUT, 0, process="x0", time=4.0),
                TxnAck(txn, name, OUT, 0, first + i, process="x0", time=4.5),
            ]
        done = [*events[1:], events[0], TxnEnd(txn, "commit", "ok", process="x0", time=6.0)]
        return done + [FinalRead("final", OUT, 0, first + i, n, process="final", time=9.0) for i, n in enumerate(names)]

    report = check([*inputs, *copies_of(("a", 0), ("b", 1), ("a", 2))], IN, OUT)
    assert report.ok, report.summary_table()
    assert report.totals["inputs"] == report.totals["copied_once"] == 3
    assert report.totals["input.renumbered_duplicates"] == 1
    assert counts([*inputs, *copies_of(("a", 0), ("b", 1))]) == {"copy_lost": 1}  # the second "a" was not copied
    again = copies_of(("a", 0), txn="x0.0-1", first=4)  # a second transaction copies the first "a" again
    twice = counts([*inputs, *copies_of(("a", 0), ("b", 1), ("a", 2)), *again])
    assert twice["copy_duplicated"] == 1 and "copy_lost" not in twice

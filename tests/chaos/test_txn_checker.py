"""The transactional checker on hand-built histories: a clean one with every kind of outcome (committed, aborted,
fenced with a zombie commit, unknown and visible, unknown and invisible, a refused write) passes, and each rule
fires alone on a history that breaks it (a read before its writer's commit was invoked also closes a dependency
cycle, as it must)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from odradek.chaos.history import (
    Event,
    FinalRead,
    History,
    Read,
    Seek,
    TxnAck,
    TxnEnd,
    TxnSendError,
    TxnWrite,
    UncommittedRead,
)
from odradek.chaos.txn_checker import VIOLATIONS, Inputs, check

T = "chaos"
LOG = {  # what each partition holds, value by offset ("" for a marker)
    0: ["a", "", "c", "", "e", "", "h", ""],
    1: ["b", "", "d", "", "e2", "", "f", ""],
}


def offset(value: str) -> tuple[int, int]:
    for partition, values in LOG.items():
        if value in values:
            return partition, values.index(value)
    raise KeyError(value)


def written(txn: str, *values: str, at: float = 0.0) -> list[Event]:
    events: list[Event] = []
    for v in values:
        p, o = offset(v)
        events.append(TxnWrite(txn, v, T, p, process="tp0", time=at))
        events.append(TxnAck(txn, v, T, p, o, process="tp0", time=at))
    return events


def end(txn: str, op: str, result: str, at: float, error: str = "") -> TxnEnd:
    return TxnEnd(txn, op, result, error, process="tp0", time=at)


def read(value: str, at: float, reader: str = "r0") -> Read:
    p, o = offset(value)
    return Read(reader, T, p, o, value, process=reader, time=at)


def final(value: str, at: float = 100.0) -> FinalRead:
    p, o = offset(value)
    return FinalRead("final", T, p, o, value, process="final", time=at)


def uncommitted(value: str) -> UncommittedRead:
    p, o = offset(value)
    return UncommittedRead("final-uncommitted", T, p, o, value, process="final-uncommitted", time=101.0)


CLEAN: list[Event] = [
    Seek("r0", T, 0, 0, process="r0", time=0.0),
    Seek("r0", T, 1, 0, process="r0", time=0.0),
    # t0: committed, read during the run after its commit was invoked.
    *written("t0", "a", "b", at=0.5),
    end("t0", "commit", "invoke", 1.0),
    end("t0", "commit", "ok", 2.0),
    read("a", 1.5),
    read("b", 2.5),
    # t1: aborted.
    *written("t1", "c", at=3.0),
    end("t1", "abort", "invoke", 3.1),
    end("t1", "abort", "ok", 3.2),
    # t2: abandoned, fenced by a new producer, then its zombie commit is refused.
    *written("t2", "d", at=4.0),
    end("t2", "fence", "ok", 5.0),
    end("t2", "commit", "invoke", 5.1),
    end("t2", "commit", "fail", 5.2, "ProducerFencedError()"),
    # t3: commit outcome unknown, and it did commit: all of it visible.
    *written("t3", "e", "e2", at=6.0),
    end("t3", "commit", "invoke", 6.5),
    end("t3", "commit", "fail", 7.0, "ClientTimeoutError()"),
    read("e", 7.5),
    # t4: commit outcome unknown, and it did not commit: none of it visible.
    *written("t4", "f", at=8.0),
    end("t4", "commit", "invoke", 8.5),
    end("t4", "commit", "fail", 9.0, "ClientTimeoutError()"),
    # t5: committed without a write send() refused.
    TxnWrite("t5", "g", T, 0, process="tp0", time=10.0),
    TxnSendError("t5", "g", T, 0, "ClientTimeoutError()", True, process="tp0", time=10.0),
    *written("t5", "h", at=10.1),
    end("t5", "commit", "invoke", 10.5),
    end("t5", "commit", "ok", 11.0),
    *(final(v) for v in ("a", "b", "e", "e2", "h")),
    *(uncommitted(v) for v in ("a", "b", "c", "d", "e", "e2", "f", "h")),
]


def violated(events: list[Event]) -> dict[str, int]:
    return {name: v.count for name, v in check(events).violations.items() if v.count}


def test_acks_without_an_offset_claim_no_location() -> None:
    """librdkafka may acknowledge a transactional write without its offset: two such acks on one partition are not
    two values at one offset, and neither is placed elsewhere than the final read found it."""
    unplaced = [
        TxnAck(e.txn, e.value, e.topic, e.partition, -1, process=e.process, time=e.time) if isinstance(e, TxnAck) else e
        for e in CLEAN
    ]
    assert violated(unplaced) == {}


def without(*dropped: Event) -> list[Event]:
    return [e for e in CLEAN if e not in dropped]


def test_a_clean_history_passes_with_every_outcome() -> None:
    report = check(CLEAN)
    assert report.ok, report.summary_table()
    t = report.totals
    assert (t["transactions"], t["committed"], t["aborted"], t["fenced"], t["unknown"]) == (6, 2, 1, 1, 2)
    assert (t["unknown_visible"], t["open"], t["writes"], t["acked"]) == (1, 0, 9, 8)
    assert (t["reads"], t["final_reads"], t["uncommitted_reads"]) == (3, 5, 8)
    assert set(report.violations) == set(VIOLATIONS)
    assert "OK" in report.summary_table()


BROKEN: dict[str, list[Event]] = {
    # a committed write missing from the final read
    "lost": without(final("b")),
    # a write of an aborted transaction read during the run
    "aborted_read": [*CLEAN, read("c", 4.0, reader="r1")],
    # a value read before its transaction's commit was invoked
    "uncommitted_read": [read("a", 0.9) if e == read("a", 1.5) else e for e in CLEAN],
    # an unknown transaction, one of its writes visible, the other not
    "partial": without(final("e2")),
    # one value at two offsets
    "duplicate": [*CLEAN, FinalRead("final", T, 0, 9, "h", process="final", time=100.0)],
    # two acknowledgements for one offset (nothing read there)
    "inconsistent_offset": [
        *CLEAN,
        TxnWrite("t6", "q", T, 1, process="tp0", time=12.0),
        TxnAck("t6", "q", T, 1, 6, process="tp0", time=12.0),
    ],
    # acknowledged at one offset, found at another
    "ack_mismatch": [
        *(e for e in CLEAN if not (isinstance(e, TxnAck) and e.value == "h")),
        TxnAck("t5", "h", T, 0, 9, process="tp0", time=10.2),
    ],
    # a reader going back without a seek
    "non_monotonic_read": [*CLEAN, read("a", 12.0)],
    # a new reader reads a at 0, then h at 6: it passed over e at 4, committed (t3's unknown commit went through)
    "read_skip": [*CLEAN, read("a", 12.0, reader="r1"), read("h", 12.1, reader="r1")],
    # t6, committed after t5, has its write q at 5, before t5's h at 6
    "reordered": [
        *CLEAN,
        TxnWrite("t6", "q", T, 0, process="tp0", time=12.0),
        TxnAck("t6", "q", T, 0, 5, process="tp0", time=12.0),
        end("t6", "commit", "invoke", 12.5),
        end("t6", "commit", "ok", 13.0),
        FinalRead("final", T, 0, 5, "q", process="final", time=100.0),
    ],
    # a value nobody wrote
    "unexpected_read": [*CLEAN, FinalRead("final", T, 0, 9, "zzz", process="final")],
    # r1, started at offset 10, read w there at 13.0, past t6's q at 8, whose commit was invoked only at 14.0: the
    # last stable offset forbids it (t6 -lso-> the read -realtime-> t6); no other rule sees it
    "cycle": [
        *CLEAN,
        TxnWrite("t6", "q", T, 0, process="tp1", time=11.5),
        TxnAck("t6", "q", T, 0, 8, process="tp1", time=11.6),
        TxnWrite("t7", "w", T, 0, process="tp2", time=12.0),
        TxnAck("t7", "w", T, 0, 10, process="tp2", time=12.0),
        TxnEnd("t7", "commit", "invoke", process="tp2", time=12.1),
        TxnEnd("t7", "commit", "ok", process="tp2", time=12.2),
        Seek("r1", T, 0, 10, process="r1", time=12.9),
        Read("r1", T, 0, 10, "w", process="r1", time=13.0),
        TxnEnd("t6", "commit", "invoke", process="tp1", time=14.0),
        TxnEnd("t6", "commit", "ok", process="tp1", time=14.5),
        FinalRead("final", T, 0, 8, "q", process="final", time=100.0),
        FinalRead("final", T, 0, 10, "w", process="final", time=100.0),
    ],
}
# A read before its writer's commit was invoked, of a transaction that then committed, is also a cycle
# (t -wr-> the read -realtime-> t): the graph proves what uncommitted_read sees from the times alone.
ALSO = {"uncommitted_read": {"cycle"}}


@pytest.mark.parametrize("rule", sorted(VIOLATIONS))
def test_each_rule_fires_alone_on_a_history_that_breaks_it(rule: str) -> None:
    report = check(BROKEN[rule])
    expected = {name: 1 for name in {rule, *ALSO.get(rule, ())}}
    assert {name: v.count for name, v in report.violations.items() if v.count} == expected, report.summary_table()
    assert report.violations[rule].examples and "FAIL" in report.summary_table()


def test_the_clean_history_has_a_dependency_graph_without_cycles() -> None:
    """Nodes: the committed t0 and t5, the unknown but visible t3, and the 3 reads; t4 (unknown, invisible), the
    aborted t1 and the fenced t2 are none. wr: t0 to the reads of a and b, t3 to the read of e; tp0's order:
    t0, t3, t5."""
    t = check(CLEAN).totals
    assert (t["graph_operations"], t["graph_wr"], t["graph_process"], t["graph_cyclic_operations"]) == (6, 3, 2, 0)
    assert t["graph_lso"] > 0 and t["graph_realtime"] > 0
    assert "dependency graph: 6 operations" in check(CLEAN).summary_table()


def test_a_cycle_names_its_anomaly_and_its_edges() -> None:
    report = check(BROKEN["cycle"])
    example = report.violations["cycle"].examples[0]
    assert example["anomaly"] == "G1c-realtime" and example["cycle"] == "t6 -lso-> r1 read chaos/0/10 -realtime-> t6"
    assert example["steps"] == [
        {
            "from": "t6",
            "edge": "lso",
            "topic": T,
            "partition": 0,
            "offset": 8,
            "read_offset": 10,
            "to": "r1 read chaos/0/10",
        },
        {"from": "r1 read chaos/0/10", "edge": "realtime", "took_effect_by": 13.0, "not_before": 14.0, "to": "t6"},
    ]
    assert "t6 -lso-> r1" in report.summary_table() and '"steps"' not in report.summary_table()


def test_the_same_read_once_t6_committed_closes_no_cycle() -> None:
    events = [e for e in BROKEN["cycle"] if not (isinstance(e, Read) and e.consumer == "r1")]
    events.append(Read("r1", T, 0, 10, "w", process="r1", time=14.6))
    assert violated(events) == {}


def test_transactions_that_consumed_each_others_writes_are_a_g1c() -> None:
    """t3 (unknown, visible) and u0 (another producer, committed), each consumed what the other wrote (say as
    copiers of each other's output): each must have committed before the other. No time orders them."""
    events = [
        *CLEAN,
        TxnWrite("u0", "u", "other", 0, process="tp1", time=6.1),
        TxnAck("u0", "u", "other", 0, 0, process="tp1", time=6.2),
        TxnEnd("u0", "commit", "invoke", process="tp1", time=6.6),
        TxnEnd("u0", "commit", "ok", process="tp1", time=7.2),
        FinalRead("final", "other", 0, 0, "u", process="final", time=100.0),
    ]
    assert violated(events) == {}
    consumed = Inputs(reads={"t3": [(("other", 0, 0), "u")], "u0": [((T, 0, 4), "e")]})
    report = check(events, inputs=consumed)
    assert {name: v.count for name, v in report.violations.items() if v.count} == {"cycle": 1}
    example = report.violations["cycle"].examples[0]
    assert example["anomaly"] == "G1c" and example["cycle"] == "t3 -wr-> u0 -wr-> t3", example


def test_a_fenced_transaction_read_by_the_final_read_is_an_aborted_read() -> None:
    report = check([*CLEAN, final("d")])
    assert violated([*CLEAN, final("d")]) == {"aborted_read": 1}
    assert report.violations["aborted_read"].examples[0]["aborted_by"] == "fence"


def test_a_zombie_commit_that_succeeds_is_caught() -> None:
    """The fence aborted t2; its old producer's commit then returned ok, and its write is visible: whichever way
    the log went, one rule fires."""
    events = [e for e in CLEAN if e != end("t2", "commit", "fail", 5.2, "ProducerFencedError()")]
    assert violated([*events, end("t2", "commit", "ok", 5.2)]) == {"lost": 1}
    assert violated([*events, end("t2", "commit", "ok", 5.2), final("d")]) == {"aborted_read": 1}


def test_a_read_of_a_transaction_never_committed_nor_aborted_is_an_uncommitted_read() -> None:
    q = [TxnWrite("t6", "q", T, 1, process="tp0", time=12.0), TxnAck("t6", "q", T, 1, 8, process="tp0", time=12.0)]
    events = [
        *CLEAN,
        *q,
        Seek("r0", T, 1, 8, process="r0", time=12.9),
        Read("r0", T, 1, 8, "q", process="r0", time=13.0),
    ]
    assert violated(events) == {"uncommitted_read": 1}
    assert check(events).violations["uncommitted_read"].examples[0]["commit_invoked"] == "never"


def test_a_read_skip_names_the_committed_record_passed_over() -> None:
    example = check(BROKEN["read_skip"]).violations["read_skip"].examples[0]
    assert example == {
        "reader": "r1",
        "topic": T,
        "partition": 0,
        "previous_offset": 0,
        "offset": 6,
        "skipped": 1,
        "first_skipped": {"offset": 4, "value": "e"},
    }


@pytest.mark.parametrize(
    "reads",
    [
        # b at 0, then e2 at 4: passes a marker, the fenced t2's d at 2, and another marker
        [read("b", 12.0, reader="r1"), read("e2", 12.1, reader="r1")],
        # a at 0, then e at 4: passes a marker, the aborted t1's c at 2, and another marker
        [read("a", 12.0, reader="r1"), read("e", 12.1, reader="r1")],
    ],
)
def test_markers_and_aborted_records_may_be_passed_over(reads: list[Event]) -> None:
    found = violated([*CLEAN, *reads])
    assert "read_skip" not in found, found


def _txn(name: str, producer: str, writes: list[tuple[str, int]], at: float) -> list[Event]:
    """A committed transaction writing ``(value, offset)`` pairs to partition 1 (from offset 9 on, past LOG)."""
    events: list[Event] = []
    for value, position in writes:
        events.append(TxnWrite(name, value, T, 1, process=producer, time=at))
        events.append(TxnAck(name, value, T, 1, position, process=producer, time=at))
    events += [
        TxnEnd(name, "commit", "invoke", process=producer, time=at + 0.1),
        TxnEnd(name, "commit", "ok", process=producer, time=at + 0.2),
    ]
    return events + [FinalRead("final", T, 1, o, v, process="final", time=100.0) for v, o in writes]


def test_one_transactions_writes_to_a_partition_out_of_send_order_are_reordered() -> None:
    events = [*CLEAN, *_txn("t6", "tp0", [("q1", 10), ("q2", 9)], at=12.0)]
    report = check(events)
    assert {name: v.count for name, v in report.violations.items() if v.count} == {"reordered": 1}
    example = report.violations["reordered"].examples[0]
    assert (example["earlier"], example["later"]) == (
        {"txn": "t6", "value": "q1", "offset": 10},
        {"txn": "t6", "value": "q2", "offset": 9},
    )


def test_producers_interleave_in_a_partition_each_in_its_own_order() -> None:
    """tp1's transaction u0 committed after tp0's t6 but lands first, and between t6 and t7: only the order of one
    producer's transactions is promised."""
    events = [
        *CLEAN,
        *_txn("u0", "tp1", [("u0-0", 9), ("u0-1", 11)], at=12.5),
        *_txn("t6", "tp0", [("t6-0", 10)], at=12.0),
        *_txn("t7", "tp0", [("t7-0", 12), ("t7-1", 13)], at=13.0),
    ]
    assert violated(events) == {}
    assert violated([*events, *_txn("t8", "tp0", [("t8-0", 8)], at=14.0)]) == {"reordered": 1}


def test_near_misses_pass() -> None:
    # a reader restarted (seek back to 0) may read a value again
    again = [*CLEAN, Seek("r0", T, 0, 0, process="r0", time=12.0), read("a", 12.1)]
    assert violated(again) == {}
    # the unknown transaction fully invisible, including during the run
    invisible = [e for e in CLEAN if e not in (read("e", 7.5), final("e"), final("e2"))]
    assert violated(invisible) == {}
    # a refused write of a committed transaction is missing: not lost
    assert "g" not in {str(x) for x in check(CLEAN).violations["lost"].examples}


def test_txn_events_round_trip_and_the_checker_command_picks_the_txn_rules(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    History(CLEAN).write_jsonl(path)
    assert History.read_jsonl(path).events() == CLEAN
    for module in ("odradek.chaos.checker", "odradek.chaos.txn_checker"):
        out = subprocess.run([sys.executable, "-m", module, str(path)], capture_output=True, text=True)
        assert out.returncode == 0 and "chaos check (transactions): OK" in out.stdout, out.stdout + out.stderr
    History(BROKEN["aborted_read"]).write_jsonl(path)
    out = subprocess.run([sys.executable, "-m", "odradek.chaos.checker", str(path)], capture_output=True, text=True)
    assert out.returncode == 1 and "aborted_read" in out.stdout


def test_the_runner_and_the_command_refuse_what_does_not_apply_to_the_txn_workload() -> None:
    from odradek.chaos.runner import RunOptions, run

    with pytest.raises(ValueError, match=r"need (the|a) group workload"):
        run(RunOptions(workload="txn", faults=["kill-coordinator", "kill-consumer"]))
    with pytest.raises(ValueError, match=r"needs (the|a) txn workload"):
        run(RunOptions(bug="read-uncommitted"))
    cli = [sys.executable, "-m", "odradek.client.cli.main", "chaos", "run"]
    out = subprocess.run([*cli, "--workload", "txn", "--faults", "kill-consumer"], capture_output=True, text=True)
    assert out.returncode != 0 and "kill-consumer (need --workload group)" in out.stderr
    out = subprocess.run([*cli, "--faults", "pause-coordinator"], capture_output=True, text=True)
    assert out.returncode != 0 and "pause-coordinator (need --workload group or txn)" in out.stderr
    out = subprocess.run([*cli, "--unsafe-bug", "read-uncommitted"], capture_output=True, text=True)
    assert out.returncode != 0 and "needs --workload txn" in out.stderr

"""The copy checker's dependency graph and exactly-once counts on hand-built histories: the input's writes and the
copiers' reads of them join the output's graph (a clean copy has no cycle, a copy of a record sent only after the
copier's commit returned closes one), and the report counts the input records copied once, not at all and more
than once, and the copies of nothing."""

from __future__ import annotations

from odradek.chaos.copy_checker import check
from odradek.chaos.history import Ack, Event, FinalRead, Processed, Read, Seek, Send, TxnAck, TxnEnd, TxnWrite

IN, OUT = "chaos", "chaos-copy"


def sent(value: str, offset: int, at: float) -> list[Event]:
    return [
        Send(value, IN, 0, process="p0", time=at),
        Ack(value, IN, 0, offset, process="p0", time=at + 0.1),
        FinalRead("final", IN, 0, offset, value, process="final", time=100.0),
    ]


def copier(txn: str, values: list[tuple[int, str]], first: int, at: float) -> list[Event]:
    """``txn`` copies the input records ``(offset, value)`` to output offsets from ``first``, invokes its commit at
    ``at + 0.5`` and sees it return at ``at + 1``; its copies are in the final read."""
    events: list[Event] = []
    for i, (offset, value) in enumerate(values):
        copy = f"{value}@{txn}"
        events += [
            Processed("x0.0", IN, 0, offset, value, 1, process="x0.0", time=at),
            TxnWrite(txn, copy, OUT, 0, process="x0", time=at),
            TxnAck(txn, copy, OUT, 0, first + i, process="x0", time=at),
        ]
    events += [
        TxnEnd(txn, "commit", "invoke", process="x0", time=at + 0.5),
        TxnEnd(txn, "commit", "ok", process="x0", time=at + 1.0),
    ]
    return events + [
        FinalRead("final", OUT, 0, first + i, f"{v}@{txn}", process="final", time=100.0)
        for i, (_, v) in enumerate(values)
    ]


def read_back(copy: str, offset: int, at: float) -> list[Event]:
    return [Seek("r0", OUT, 0, 0, process="r0", time=at), Read("r0", OUT, 0, offset, copy, process="r0", time=at)]


def violated(history: list[Event]) -> dict[str, int]:
    return {name: v.count for name, v in check(history, IN, OUT).violations.items() if v.count}


CLEAN = [*sent("a", 0, 0.1), *sent("b", 1, 0.2), *copier("x0.0-0", [(0, "a"), (1, "b")], 0, 1.0)]
CLEAN += read_back("a@x0.0-0", 0, 3.0)


def test_a_clean_copy_joins_the_input_to_the_output_graph_without_a_cycle() -> None:
    report = check(CLEAN, IN, OUT)
    assert report.ok, report.summary_table()
    t = report.totals
    # the writes of a and b, the copier, the read of a's copy; a and b to the copier, the copier to the read
    assert (t["output.graph_operations"], t["output.graph_wr"], t["output.graph_cyclic_operations"]) == (4, 3, 0)


def test_a_copy_of_a_record_sent_after_the_copiers_commit_returned_is_a_cycle() -> None:
    """The copier's commit returned at 2.0, b was sent at 2.5: b's write took effect after the copy that read it,
    which read it before. A history can only say so if it is wrong (a value misattributed, a clock gone back)."""
    history = [*sent("a", 0, 0.1), *copier("x0.0-0", [(0, "a"), (1, "b")], 0, 1.0), *sent("b", 1, 2.5)]
    report = check(history, IN, OUT)
    assert violated(history) == {"output.cycle": 1}, report.summary_table()
    example = report.violations["output.cycle"].examples[0]
    assert example["cycle"] == "x0.0-0 -realtime-> write b -wr-> x0.0-0", example
    assert example["steps"][1] == {
        "from": "write b",
        "edge": "wr",
        "value": "b",
        "topic": IN,
        "partition": 0,
        "offset": 1,
        "to": "x0.0-0",
    }


def test_the_exactly_once_counts() -> None:
    """a is copied by two committed transactions, b by none, c once, and z, copied, was never in the input."""
    history = [*sent("a", 0, 0.1), *sent("b", 1, 0.2), *sent("c", 2, 0.3)]
    history += copier("x0.0-0", [(0, "a"), (2, "c"), (9, "z")], 0, 1.0)
    history += copier("x0.0-1", [(0, "a")], 4, 3.0)
    report = check(history, IN, OUT)
    t = report.totals
    assert (t["inputs"], t["copied_once"], t["not_copied"], t["copied_more_than_once"]) == (3, 1, 1, 1)
    assert (t["copies"], t["extra_copies"], t["unexpected_copies"]) == (4, 1, 1)
    assert "not copied 1  copied more than once 1 (1 extra copies)" in report.summary_table()
    assert {k: v for k, v in violated(history).items() if k.startswith("copy_")} == {
        "copy_lost": 1,
        "copy_duplicated": 1,
        "copy_unexpected": 1,
    }

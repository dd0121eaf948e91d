"""The checker's consumer-group rules on hand-built histories: each violation caught alone by a minimal history,
its near misses passing, and a clean group history (members, a rebalance, a final member) passing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from odradek.chaos.checker import check
from odradek.chaos.history import (
    Ack,
    Assigned,
    Commit,
    Committed,
    Event,
    FinalRead,
    History,
    Processed,
    Send,
    Subscribed,
)


def write(value: str, offset: int, partition: int = 0) -> list[Event]:
    return [Send(value, "t", partition, process="p0"), Ack(value, "t", partition, offset, process="p0")]


def final(value: str, offset: int, partition: int = 0) -> FinalRead:
    return FinalRead("final", "t", partition, offset, value, process="final")


def subscribed(member: str) -> Subscribed:
    return Subscribed(member, "g", "t", process=member)


def processed(member: str, value: str, offset: int, partition: int = 0, generation: int = 1) -> Processed:
    return Processed(member, "t", partition, offset, value, generation, process=member)


def assigned(member: str, offset: int, partition: int = 0, generation: int = 1) -> Assigned:
    return Assigned(member, "t", partition, offset, generation, process=member)


def commit(member: str, offset: int, partition: int = 0, generation: int = 1) -> Commit:
    return Commit(member, "t", partition, offset, generation, process=member)


def committed(member: str, offset: int, partition: int = 0, last: bool = False) -> Committed:
    return Committed(member, "t", partition, offset, last, process=member)


def violated(events: list[Event]) -> dict[str, int]:
    return {name: v.count for name, v in check(events).violations.items() if v.count}


# Two members; m1 processes a and commits 1, then is killed; m2 takes over from the committed offset 1, processes
# b, commits 2; the final member finds nothing left and reads the committed offset 2.
CLEAN: list[Event] = [
    subscribed("m1"),
    subscribed("m2"),
    *write("a", 0),
    *write("b", 1),
    processed("m1", "a", 0),
    commit("m1", 1),
    committed("m2", 1),
    processed("m2", "b", 1, generation=2),
    commit("m2", 2, generation=2),
    subscribed("final"),
    committed("final", 2, last=True),
    final("a", 0),
    final("b", 1),
]


def test_a_clean_group_history_passes() -> None:
    report = check(CLEAN)
    assert report.ok, report.summary_table()
    assert (report.totals["processed"], report.totals["commits"]) == (2, 2)
    assert "group: processed 2  commits acknowledged 2" in report.summary_table()


@pytest.mark.parametrize(
    ("name", "events"),
    [
        # b was acknowledged but nobody processed it: the commit of 2 skipped it
        ("unprocessed", [e for e in CLEAN if not (isinstance(e, Processed) and e.value == "b")]),
        # the final fetch answers 1 though 2 was acknowledged
        ("commit_lost", [*CLEAN[:-3], committed("final", 1, last=True), *CLEAN[-2:]]),
        # no final fetch at all: the acknowledged commits cannot be confirmed
        ("commit_lost", [e for e in CLEAN if not (isinstance(e, Committed) and e.final)]),
        # m2 reads the committed offset as 1, then as 0
        ("commit_regressed", [*CLEAN[:9], committed("m2", 0), *CLEAN[9:]]),
        # m2 reads 1 after its own acknowledged commit of 2
        ("commit_regressed", [*CLEAN[:11], committed("m2", 1), *CLEAN[11:]]),
        # m1's own acknowledged commits go back from 1 to 0
        ("commit_regressed", [*CLEAN[:8], commit("m1", 0), *CLEAN[8:]]),
        # a committed offset that was there and is gone (-1: nothing committed)
        ("commit_regressed", [*CLEAN[:9], committed("m2", -1), *CLEAN[9:]]),
    ],
)
def test_each_group_violation_is_detected(name: str, events: list[Event]) -> None:
    found = violated(events)
    assert found.get(name, 0) >= 1, found
    assert set(found) <= {name, "commit_lost"}  # a regression seen by a member is not a loss by itself


def test_a_regression_alone_is_not_reported_as_lost() -> None:
    assert violated([*CLEAN[:9], committed("m2", 0), *CLEAN[9:]]) == {"commit_regressed": 1}


@pytest.mark.parametrize(
    "events",
    [
        # a topic nobody subscribed is not the group's business
        [*write("x", 0), final("x", 0)],
        # the final member processed what the others left
        [
            subscribed("m1"),
            *write("a", 0),
            subscribed("final"),
            processed("final", "a", 0, generation=3),
            commit("final", 1, generation=3),
            committed("final", 1, last=True),
            final("a", 0),
        ],
        # different members' views race: m1's late record of its commit 1 after m2's commit 2 is fine
        [*CLEAN[:7], *CLEAN[8:11], commit("m1", 1), *CLEAN[11:]],
        # a member reads the committed offset as -1 before anything is committed
        [committed("m1", -1), *CLEAN],
        # a final fetch above every acknowledged commit (an indeterminate commit that was applied)
        [*CLEAN[:-3], committed("final", 5, last=True), *CLEAN[-2:]],
    ],
)
def test_near_misses_pass(events: list[Event]) -> None:
    assert violated(events) == {}


# a, b, c at offsets 0, 1, 2, a transaction marker at 3 (nothing there in the final read), d at 4; m1 holds the
# partition in generation 1 from the committed offset 0.
FOUR: list[Event] = [
    subscribed("m1"),
    *(e for v, o in (("a", 0), ("b", 1), ("c", 2), ("d", 4)) for e in write(v, o)),
    *(final(v, o) for v, o in (("a", 0), ("b", 1), ("c", 2), ("d", 4))),
    assigned("m1", 0),
]


@pytest.mark.parametrize(
    ("records", "expected", "skipped"),
    [
        # a, then c: b passed over in one generation
        ([processed("m1", "a", 0), processed("m1", "c", 2), processed("m1", "d", 4)], 1, 1),
        # started at the committed offset 0, first processed b: a passed over
        ([processed("m1", "b", 1), processed("m1", "c", 2), processed("m1", "d", 4)], 0, 1),
        # a, then d: b and c passed over, the marker at 3 is no record
        ([processed("m1", "a", 0), processed("m1", "d", 4)], 1, 2),
    ],
)
def test_a_member_skipping_a_record_of_its_assignment_is_caught(
    records: list[Event], expected: int, skipped: int
) -> None:
    """m2 processes everything again in generation 2, so no record goes unprocessed: only m1's skip is wrong."""
    again = [processed("m2", v, o, generation=2) for v, o in (("a", 0), ("b", 1), ("c", 2), ("d", 4))]
    end = [commit("m2", 5, generation=2), subscribed("final"), committed("final", 5, last=True)]
    events = [*FOUR, *records, *again, *end]
    report = check(events)
    assert {name: v.count for name, v in report.violations.items() if v.count} == {"member_skip": 1}
    example = report.violations["member_skip"].examples[0]
    assert (example["consumer"], example["generation"], example["expected_offset"]) == ("m1", 1, expected)
    assert example["skipped"] == skipped


@pytest.mark.parametrize(
    "records",
    [
        # every record, the marker at 3 passed over
        [processed("m1", v, o) for v, o in (("a", 0), ("b", 1), ("c", 2), ("d", 4))],
        # m1 loses the partition after a; m2 processes b and commits 2; m1 gets it back in generation 3 at 2
        [
            processed("m1", "a", 0),
            assigned("m2", 1, generation=2),
            processed("m2", "b", 1, generation=2),
            commit("m2", 2, generation=2),
            assigned("m1", 2, generation=3),
            processed("m1", "c", 2, generation=3),
            processed("m1", "d", 4, generation=3),
        ],
        # the same without m1's start recorded in generation 3: its first record there starts the run
        [
            processed("m1", "a", 0),
            processed("m2", "b", 1, generation=2),
            processed("m1", "c", 2, generation=3),
            processed("m1", "d", 4, generation=3),
        ],
        # a record without a generation (just lost) ends the run
        [
            processed("m1", "a", 0),
            processed("m1", "b", 1, generation=-1),
            processed("m2", "c", 2, generation=2),
            processed("m1", "d", 4),
        ],
        # processing a again after its commit failed goes back, which is no skip
        [processed("m1", v, o) for v, o in (("a", 0), ("b", 1), ("a", 0), ("b", 1), ("c", 2), ("d", 4))],
    ],
)
def test_member_runs_that_skip_nothing(records: list[Event]) -> None:
    events = [*FOUR, *records, subscribed("final"), committed("final", 5, last=True)]
    assert violated(events) == {}


def test_group_events_round_trip_through_jsonl(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    History(FOUR).write_jsonl(path)
    assert History.read_jsonl(path).events() == FOUR


def test_group_faults_need_the_group_workload() -> None:
    from odradek.chaos.runner import RunOptions, run

    with pytest.raises(ValueError, match=r"need (the|a) group workload"):
        run(RunOptions(faults=["kill-coordinator"]))
    with pytest.raises(ValueError, match="unknown workload"):
        run(RunOptions(workload="groups"))
    out = subprocess.run(
        [sys.executable, "-m", "odradek.client.cli.main", "chaos", "run", "--faults", "kill-consumer"],
        capture_output=True,
        text=True,
    )
    assert out.returncode != 0 and "need --workload group" in out.stderr

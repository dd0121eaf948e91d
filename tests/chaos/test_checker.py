"""The chaos checker: each violation class caught by a minimal history, near misses passing, clean runs passing."""

from __future__ import annotations

import dataclasses
import json
import random
import subprocess
import sys
import threading
from collections import deque
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.chaos.checker import VIOLATIONS, check, main
from odradek.chaos.history import (
    Ack,
    Event,
    Fault,
    FinalRead,
    Heal,
    History,
    ProducerEpoch,
    Read,
    Seek,
    Send,
    SendError,
    from_json_line,
    to_json_line,
)


def send(value: str, partition: int = 0, producer: str = "p0") -> Send:
    return Send(value, "t", partition, process=producer)


def ack(value: str, offset: int, partition: int = 0, producer: str = "p0") -> Ack:
    return Ack(value, "t", partition, offset, process=producer)


def read(value: str, offset: int, partition: int = 0, consumer: str = "c0") -> Read:
    return Read(consumer, "t", partition, offset, value, process=consumer)


def final(value: str, offset: int, partition: int = 0) -> FinalRead:
    return FinalRead("final", "t", partition, offset, value, process="final")


def seek(offset: int, partition: int = 0, consumer: str = "c0") -> Seek:
    return Seek(consumer, "t", partition, offset, process=consumer)


def violated(events: list[Event]) -> dict[str, int]:
    return {name: v.count for name, v in check(events).violations.items() if v.count}


CLEAN: list[Event] = [
    send("a"),
    send("b"),
    ack("a", 0),
    read("a", 0),
    ack("b", 1),
    read("b", 1),
    final("a", 0),
    final("b", 1),
]


def test_clean_history_passes() -> None:
    report = check(CLEAN)
    assert report.ok
    assert report.totals == {
        "sent": 2,
        "acked": 2,
        "failed": 0,
        "indeterminate": 0,
        "recovered": 0,
        "reads": 2,
        "final_reads": 2,
        "faults": 0,
        "processed": 0,
        "commits": 0,
        "renumbered_duplicates": 0,
    }


@pytest.mark.parametrize(
    ("name", "events"),
    [
        ("lost", [send("a"), ack("a", 0)]),
        ("duplicate", [send("a"), ack("a", 0), final("a", 0), final("a", 1)]),
        # Two final passes that disagree about offset 0, each agreeing with an ack.
        (
            "inconsistent_offset",
            [
                send("a"),
                send("b", producer="p1"),
                ack("a", 0),
                ack("b", 0, producer="p1"),
                final("a", 0),
                final("b", 0),
            ],
        ),
        ("ack_mismatch", [send("a"), ack("a", 5), final("a", 0)]),
        ("reordered", [send("a"), send("b"), ack("a", 1), ack("b", 0), final("b", 0), final("a", 1)]),
        ("vanished_read", [send("a"), read("a", 0)]),
        ("non_monotonic_read", [*CLEAN, read("a", 0)]),
        ("non_monotonic_read", [*CLEAN, read("b", 1)]),  # the same offset twice is no progress
        ("non_monotonic_read", [send("a"), ack("a", 0), seek(1), read("a", 0), final("a", 0)]),  # below the seek
        # c1 reads offset 0, then 2: it passed over b at 1.
        (
            "read_skip",
            [*CLEAN, send("c"), ack("c", 2), final("c", 2), read("a", 0, consumer="c1"), read("c", 2, consumer="c1")],
        ),
        (
            "failed_write_visible",
            [send("a"), SendError("a", "t", 0, "NOT_ENOUGH_REPLICAS", True, process="p0"), final("a", 0)],
        ),
        ("unexpected_read", [final("x", 0)]),
    ],
)
def test_each_violation_is_detected_alone(name: str, events: list[Event]) -> None:
    report = check(events)
    assert not report.ok
    assert violated(events) == {name: 1}
    assert report.violations[name].examples


ABC: list[Event] = [
    *(e for v, o in (("a", 0), ("b", 1), ("c", 2)) for e in (send(v), ack(v, o), final(v, o))),
]


def test_a_read_skip_counts_one_jump_and_names_what_it_passed_over() -> None:
    events = [*ABC, send("d"), ack("d", 3), final("d", 3), read("a", 0), read("d", 3)]
    report = check(events)
    assert violated(events) == {"read_skip": 1}
    assert report.violations["read_skip"].examples == [
        {
            "consumer": "c0",
            "topic": "t",
            "partition": 0,
            "previous_offset": 0,
            "offset": 3,
            "skipped": 2,
            "first_skipped": {"offset": 1, "value": "b"},
        }
    ]


@pytest.mark.parametrize(
    "reads",
    [
        # A seek between the two reads starts a new run, wherever it lands.
        [read("a", 0), seek(2), read("c", 2)],
        [read("a", 0), seek(0), read("c", 2)],
        # Each partition and each consumer is its own run.
        [read("a", 0), read("a", 0, consumer="c1"), read("b", 1, consumer="c1"), read("b", 1), read("c", 2)],
        # Going back is non_monotonic_read's business; the next step forward is judged from where it went.
        [read("c", 2), read("a", 0), read("b", 1)],
    ],
)
def test_reads_that_skip_nothing(reads: list[Event]) -> None:
    found = violated([*ABC, *reads])
    assert "read_skip" not in found, found


def test_an_offset_the_final_read_lacks_may_be_passed_over() -> None:
    """A transaction marker, an aborted record or a compacted one: no value there in the final read. A value only
    other reads saw there, truncated since, is vanished_read's, not a skip."""
    gap = [send("a"), send("c"), ack("a", 0), ack("c", 2), final("a", 0), final("c", 2)]
    assert violated([*gap, read("a", 0), read("c", 2)]) == {}
    truncated = [*gap, send("b"), read("b", 1, consumer="c1"), read("a", 0), read("c", 2)]
    assert violated(truncated) == {"vanished_read": 1}


def test_non_monotonic_read_on_a_second_consumer() -> None:
    events = [*CLEAN, read("a", 0, consumer="c1"), read("b", 1, consumer="c1"), read("a", 0, consumer="c1")]
    assert violated(events) == {"non_monotonic_read": 1}


@pytest.mark.parametrize(
    "events",
    [
        # An indeterminate write may be present (and is counted as recovered) ...
        [send("a"), SendError("a", "t", 0, "REQUEST_TIMED_OUT", process="p0"), final("a", 0)],
        # ... or absent, and so may a write with no outcome at all.
        [send("a"), SendError("a", "t", 0, "REQUEST_TIMED_OUT", process="p0"), send("b")],
        # A definite failure that is absent.
        [send("a"), SendError("a", "t", 0, "NOT_ENOUGH_REPLICAS", True, process="p0")],
        # A seek, then lower offsets; offsets may have gaps (control batches, compaction).
        [*CLEAN, seek(0), read("a", 0), read("b", 1), seek(1), read("b", 1)],
        [send("a"), send("b"), ack("a", 0), ack("b", 7), read("a", 0), read("b", 7), final("a", 0), final("b", 7)],
        # Many consumers and the final pass reading one offset agree.
        [*CLEAN, read("a", 0, consumer="c1"), read("a", 0, consumer="c2"), final("a", 0)],
        # Only acknowledged writes carry the order promise: unacked "a" landing after acked "b" is fine.
        [send("a"), send("b"), ack("b", 0), final("b", 0), final("a", 1)],
        # Two producers interleaved in one partition, each in its own order.
        [
            send("x0", producer="p0"),
            send("y0", producer="p1"),
            send("x1", producer="p0"),
            ack("y0", 0, producer="p1"),
            ack("x0", 1),
            ack("x1", 2),
            final("y0", 0),
            final("x0", 1),
            final("x1", 2),
        ],
        # Faults are reported, not judged.
        [Fault("kill", "broker-1", process="nemesis"), *CLEAN, Heal("kill", "broker-1", process="nemesis")],
    ],
)
def test_near_misses_pass(events: list[Event]) -> None:
    assert violated(events) == {}


def test_an_ack_without_an_offset_is_checked_for_loss_not_placement() -> None:
    """librdkafka may report a delivery without its offset (under late requests); such an ack still must not be
    lost, but no placement can be held against it (it killed the workload's producer thread before)."""
    before = [send("x"), ack("x", 0), send("a"), ack("a", -1), final("x", 0)]
    assert violated([*before, final("a", 1)]) == {}
    assert violated(before) == {"lost": 1}
    # Two acks without an offset on one partition claim no common location (a campaign run reported one).
    two = [send("a"), ack("a", -1), send("b"), ack("b", -1), final("a", 0), final("b", 1)]
    assert violated(two) == {}


def epoch(at: float, epoch_number: int, producer: str = "p0") -> ProducerEpoch:
    return ProducerEpoch(7, epoch_number, process=producer, time=at)


def timed(event: Event, at: float) -> Event:
    return dataclasses.replace(event, time=at)


def test_a_copy_written_again_after_its_producers_epoch_bump_is_the_clients_not_a_violation() -> None:
    """librdkafka renumbers unacknowledged messages after an epoch bump: "a" was written at offset 0, its ack was
    lost, the producer took epoch 1 and wrote it again at 2 (acknowledged there). A duplicate without a bump in
    between, or of another producer, or with the bump before the send, stays a violation."""
    written_twice = [final("a", 0), final("b", 1), final("a", 2)]
    renumbered = [timed(send("a"), 1.0), epoch(0.5, 0), epoch(2.0, 1), timed(ack("a", 2), 3.0), timed(send("b"), 1.1)]
    report = check([*renumbered, timed(ack("b", 1), 1.2), *written_twice])
    assert report.ok and report.totals["renumbered_duplicates"] == 1
    assert "written again by the client after a producer epoch bump" in report.summary_table()
    no_bump = [timed(send("a"), 1.0), epoch(0.5, 0), timed(ack("a", 2), 3.0), timed(send("b"), 1.1)]
    assert violated([*no_bump, timed(ack("b", 1), 1.2), *written_twice]) == {"duplicate": 1}
    other = [timed(send("a"), 1.0), epoch(0.5, 0, "p1"), epoch(2.0, 1, "p1"), timed(ack("a", 2), 3.0)]
    assert violated([*other, timed(send("b"), 1.1), timed(ack("b", 1), 1.2), *written_twice]) == {"duplicate": 1}
    earlier = [epoch(0.5, 0), epoch(0.8, 1), timed(send("a"), 1.0), timed(ack("a", 2), 3.0)]
    assert violated([*earlier, timed(send("b"), 1.1), timed(ack("b", 1), 1.2), *written_twice]) == {"duplicate": 1}


def test_totals_classify_outcomes() -> None:
    events = [
        send("acked"),
        send("failed"),
        send("timed_out"),
        send("no_outcome"),
        ack("acked", 0),
        SendError("failed", "t", 0, "NOT_ENOUGH_REPLICAS", True, process="p0"),
        SendError("timed_out", "t", 0, "REQUEST_TIMED_OUT", process="p0"),
        final("acked", 0),
        final("timed_out", 1),
    ]
    totals = check(events).totals
    assert (totals["sent"], totals["acked"], totals["failed"], totals["indeterminate"], totals["recovered"]) == (
        4,
        1,
        1,
        2,
        1,
    )


def test_examples_are_capped_but_all_counted() -> None:
    events: list[Event] = []
    for i in range(30):
        events += [send(f"v{i}"), ack(f"v{i}", i)]
    report = check(events, max_examples=3)
    assert report.violations["lost"].count == 30
    assert [e["value"] for e in report.violations["lost"].examples] == ["v0", "v1", "v2"]


def test_report_json_and_table() -> None:
    events = [Fault("pause", "broker-0", "SIGSTOP", process="nemesis"), send("a"), ack("a", 3)]
    report = check(events)
    document = json.loads(report.to_json())
    assert document["ok"] is False
    assert list(document["violations"]) == list(VIOLATIONS)
    assert document["violations"]["lost"] == {
        "count": 1,
        "examples": [{"value": "a", "topic": "t", "partition": 0, "offset": 3}],
    }
    assert document["faults"][0]["kind"] == "pause"
    assert document["totals"]["faults"] == 1
    table = report.summary_table()
    assert table.splitlines()[0] == "chaos check: FAIL"
    assert "pause x1" in table
    assert all(name in table for name in VIOLATIONS)


ALL_KINDS: list[Event] = [
    *CLEAN,
    SendError("c", "t", 1, "NOT_ENOUGH_REPLICAS", True, process="p1"),
    seek(4, partition=2),
    Fault("partition", "broker-0|broker-1,broker-2", "iptables", process="nemesis"),
    Heal("partition", "broker-0|broker-1,broker-2", process="nemesis"),
    Send("ünïcode \udcff", "t", 0, process="p2"),  # undecodable bytes kept by surrogateescape
]


def test_jsonl_round_trip(tmp_path: Path) -> None:
    assert {type(e) for e in ALL_KINDS} == {Send, Ack, SendError, Read, FinalRead, Seek, Fault, Heal}
    assert [from_json_line(to_json_line(e)) for e in ALL_KINDS] == ALL_KINDS
    path = tmp_path / "history.jsonl"
    History(ALL_KINDS).write_jsonl(path)
    assert len(path.read_text().splitlines()) == len(ALL_KINDS)
    assert History.read_jsonl(path).events() == ALL_KINDS


def test_history_appends_from_many_threads() -> None:
    history = History()

    def produce(worker: int) -> None:
        for i in range(2000):
            history.append(send(f"p{worker}-{i}", producer=f"p{worker}"))

    threads = [threading.Thread(target=produce, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(history) == 8000
    assert check(history).totals["sent"] == 8000


def test_cli_exit_code_and_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good, bad = tmp_path / "good.jsonl", tmp_path / "bad.jsonl"
    History(CLEAN).write_jsonl(good)
    History([send("a"), ack("a", 0)]).write_jsonl(bad)
    report_path = tmp_path / "report.json"
    assert main([str(good), "--json", str(report_path)]) == 0
    assert "chaos check: OK" in capsys.readouterr().out
    assert json.loads(report_path.read_text())["ok"] is True
    assert main([str(bad)]) == 1
    assert "chaos check: FAIL" in capsys.readouterr().out
    run = subprocess.run([sys.executable, "-m", "odradek.chaos.checker", str(bad)], capture_output=True, text=True)
    assert run.returncode == 1
    assert "lost" in run.stdout


def simulate(rng: random.Random) -> list[Event]:
    """A run against a correct log: per-producer FIFO appends, acks only below the high watermark, truncation only
    above it, consumers reading below it with occasional seeks back, and a final read of everything."""
    partitions = [("t", p) for p in range(rng.randint(1, 3))]
    producers = [f"p{i}" for i in range(rng.randint(1, 3))]
    consumers = [f"c{i}" for i in range(rng.randint(0, 2))]
    logs: dict[tuple[str, int], list[str]] = {tp: [] for tp in partitions}
    hw = dict.fromkeys(partitions, 0)
    queued: dict[tuple[str, tuple[str, int]], deque[str]] = {(p, tp): deque() for p in producers for tp in partitions}
    unacked: dict[tuple[str, int], dict[int, tuple[str, str]]] = {
        tp: {} for tp in partitions
    }  # offset -> producer, value
    position = {(c, tp): 0 for c in consumers for tp in partitions}
    written = 0
    events: list[Event] = []

    def outcome(producer: str, value: str, tp: tuple[str, int], definite: bool) -> None:
        if rng.random() < 0.7:  # otherwise the producer died before hearing back
            events.append(SendError(value, *tp, "ERR", definite, process=producer))

    for _ in range(rng.randint(0, 300)):
        tp = rng.choice(partitions)
        producer = rng.choice(producers)
        step = rng.random()
        queue = queued[(producer, tp)]
        if step < 0.25:
            written += 1
            value = f"{producer}-{written:06d}"
            events.append(Send(value, *tp, process=producer))
            queue.append(value)
        elif step < 0.45 and queue:
            value = queue.popleft()
            if rng.random() < 0.1:
                outcome(producer, value, tp, definite=rng.random() < 0.5)  # rejected before the append
            else:
                unacked[tp][len(logs[tp])] = (producer, value)
                logs[tp].append(value)
        elif step < 0.55:
            hw[tp] = rng.randint(hw[tp], len(logs[tp]))
        elif step < 0.7:
            committed = [o for o in unacked[tp] if o < hw[tp]]
            if committed:
                offset = rng.choice(committed)
                owner, value = unacked[tp].pop(offset)
                if rng.random() < 0.1:
                    outcome(owner, value, tp, definite=False)  # appended, but the ack was lost
                else:
                    events.append(Ack(value, *tp, offset, process=owner))
        elif step < 0.75:
            for offset in [o for o in unacked[tp] if o >= hw[tp]]:
                owner, value = unacked[tp].pop(offset)
                outcome(owner, value, tp, definite=False)
            del logs[tp][hw[tp] :]
        elif consumers:
            consumer = rng.choice(consumers)
            at = position[(consumer, tp)]
            if step < 0.93 and at < hw[tp]:
                events.append(Read(consumer, *tp, at, logs[tp][at], process=consumer))
                position[(consumer, tp)] = at + 1
            elif step >= 0.93:
                position[(consumer, tp)] = rng.randint(0, at)
                events.append(Seek(consumer, *tp, position[(consumer, tp)], process=consumer))
    for (producer, tp), queue in queued.items():  # quiesce: the faults heal and the producers flush
        while queue and rng.random() < 0.97:
            unacked[tp][len(logs[tp])] = (producer, queue[0])
            logs[tp].append(queue.popleft())
    for tp in partitions:
        hw[tp] = len(logs[tp])
        for offset, (owner, value) in unacked[tp].items():
            if rng.random() < 0.9:
                events.append(Ack(value, *tp, offset, process=owner))
        events += [FinalRead("final", *tp, offset, value, process="final") for offset, value in enumerate(logs[tp])]
    return events


@settings(max_examples=200, deadline=None)
@given(st.randoms(use_true_random=False))
def test_random_clean_histories_pass(rng: random.Random) -> None:
    events = simulate(rng)
    report = check(events)
    assert report.ok, report.summary_table()
    assert report.totals["acked"] == sum(type(e) is Ack for e in events)


@settings(max_examples=100, deadline=None)
@given(st.randoms(use_true_random=False))
def test_dropping_a_read_between_two_others_of_its_run_is_a_read_skip(rng: random.Random) -> None:
    events = simulate(rng)
    final_values = {e.value for e in events if type(e) is FinalRead}
    runs: dict[tuple[str, int], list[int]] = {}  # (consumer, partition) -> indices of its reads since a seek
    victims = []
    for i, e in enumerate(events):
        if isinstance(e, Seek):
            runs[(e.consumer, e.partition)] = []
        elif type(e) is Read:
            run = runs.setdefault((e.consumer, e.partition), [])
            if len(run) >= 2 and events[run[-1]].value in final_values:
                victims.append(run[-1])
            run.append(i)
    if victims:
        del events[rng.choice(victims)]
        assert violated(events) == {"read_skip": 1}


@settings(max_examples=100, deadline=None)
@given(st.randoms(use_true_random=False))
def test_dropping_an_acked_record_from_the_final_read_is_lost(rng: random.Random) -> None:
    events = simulate(rng)
    acked = {e.value for e in events if type(e) is Ack}
    victims = [i for i, e in enumerate(events) if type(e) is FinalRead and e.value in acked]
    if victims:
        del events[rng.choice(victims)]
        assert check(events).violations["lost"].count == 1

"""The checker of the copy workload (``--workload kafka-copy``): exactly-once copying from an input topic to an
output topic.

The history holds two topics, each judged by the checker of its kind: the input's writes, the copiers' processing
and their group's commits by chaos/checker.py; the output's transactions and readers by chaos/txn_checker.py. Then
the copy itself: each record of the input's final read has exactly one copy in the output's final
``read_committed`` read (the writes of the committed transactions), and each copy there is of a record of the
input. A copy is ``<input value>@<transaction>``, unique to each attempt, so an aborted attempt and the committed
one are two values, and copying a record twice leaves two copies. The report counts the input records copied once,
not at all and more than once, and the copies of nothing.

The output's dependency graph (chaos/cycles.py) also gets the input: each record of the input's final read is a
write of its own (the producers write it without transactions), and each copier transaction read the records it
copied, where its copier processed them. ``check`` is pure.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from odradek.chaos import checker, txn_checker
from odradek.chaos.checker import Report, Violations
from odradek.chaos.cycles import Op
from odradek.chaos.history import Ack, Event, Fault, FinalRead, Heal, Processed, ProducerEpoch, Send, TxnEnd, TxnWrite
from odradek.chaos.txn_checker import Inputs, Location

VIOLATIONS: dict[str, str] = {
    "copy_lost": "an input record without a committed copy",
    "copy_duplicated": "an input record copied more than once",
    "copy_unexpected": "a committed copy of no input record",
}


def source(copy: str) -> str:
    """The input value a copy was made of (a copy is ``value@partition:offset@txn``, or ``value@txn``)."""
    return copy.split("@", 1)[0]


def origin(copy: str) -> tuple[int, int] | None:
    """The input record (partition, offset) a copy was made of, if it names one."""
    parts = copy.split("@")
    if len(parts) != 3:
        return None
    partition, _, offset = parts[1].partition(":")
    return int(partition), int(offset)


def split(history: Iterable[Event], input_topic: str, output_topic: str) -> tuple[list[Event], list[Event]]:
    """The input's events and the output's (faults in both; a transaction's end, which names no topic, in the
    output's)."""
    inputs: list[Event] = []
    outputs: list[Event] = []
    for event in history:
        topic = getattr(event, "topic", None)
        if isinstance(event, Fault | Heal):
            inputs.append(event)
            outputs.append(event)
        elif isinstance(event, ProducerEpoch):  # the input producers' epochs (the input's duplicates)
            inputs.append(event)
        elif topic == output_topic or isinstance(event, TxnEnd):
            outputs.append(event)
        elif topic == input_topic:
            inputs.append(event)
    return inputs, outputs


@dataclass(slots=True)
class CopyReport(Report):
    """The copy checks, with the input's and the output's reports: ``violations`` and ``totals`` hold all three,
    the others' prefixed ``input.`` and ``output.``."""

    sections: dict[str, Report] = field(default_factory=dict)

    def summary_table(self) -> str:
        t = self.totals
        lines = [
            f"chaos check (exactly-once copy): {'OK' if self.ok else 'FAIL'}",
            f"input records {t['inputs']}  copied once {t['copied_once']}  not copied {t['not_copied']}  copied more"
            f" than once {t['copied_more_than_once']} ({t['extra_copies']} extra copies)",
            f"committed copies {t['copies']}  of no input record {t['unexpected_copies']}",
            "",
            f"{'check':<22} {'count':>7}  {'meaning':<46} first example",
        ]
        for name, meaning in VIOLATIONS.items():
            v = self.violations[name]
            example = json.dumps(v.examples[0], separators=(",", ":")) if v.examples else ""
            if len(example) > 100:
                example = example[:97] + "..."
            lines.append(f"{name:<22} {v.count:>7}  {meaning:<46} {example}".rstrip())
        for prefix, report in self.sections.items():
            lines += ["", f"{prefix}:", report.summary_table()]
        return "\n".join(lines)


def copied_from(events: list[Event], input_topic: str, output_topic: str) -> Inputs:
    """The input's side of the dependency graph: each record of the input's final read as a write without a
    transaction (its commit point lies between its send and its acknowledgement), and the input records each copier
    transaction read (the record its copy names, else at the offset its copier processed it, else where the final
    read found it). A value the client wrote twice is two records, each its own write."""
    final: dict[str, Location] = {}
    records: dict[Location, str] = {}
    processed: dict[str, Location] = {}
    sent: dict[str, float] = {}
    acked: dict[str, float] = {}
    for e in events:
        if getattr(e, "topic", None) != input_topic:
            continue
        if isinstance(e, FinalRead):
            final.setdefault(e.value, (e.topic, e.partition, e.offset))
            records.setdefault((e.topic, e.partition, e.offset), e.value)
        elif isinstance(e, Processed):
            processed.setdefault(e.value, (e.topic, e.partition, e.offset))
        elif isinstance(e, Send):
            sent.setdefault(e.value, e.time)
        elif isinstance(e, Ack):
            acked.setdefault(e.value, e.time)
    reads: dict[str, list[tuple[Location, str]]] = {}
    for e in events:
        if isinstance(e, TxnWrite) and e.topic == output_topic:
            value, record = source(e.value), origin(e.value)
            location = (input_topic, *record) if record is not None else processed.get(value) or final.get(value)
            if location is not None:
                reads.setdefault(e.txn, []).append((location, value))
    twice = {v for v, n in Counter(records.values()).items() if n > 1}

    def named(location: Location, value: str) -> str:
        return f"write {value} at {location[1]}:{location[2]}" if value in twice else f"write {value}"

    writers = [
        Op(named(location, value), "write", sent.get(value), acked.get(value), writes=[(location, value)])
        for location, value in records.items()
    ]
    return Inputs(reads, writers)


def check(history: Iterable[Event], input_topic: str, output_topic: str, max_examples: int = 10) -> CopyReport:
    """Judge ``history`` (events in the order they were recorded; each worker's own events in its order)."""
    events = list(history)
    inputs, outputs = split(events, input_topic, output_topic)
    sections: dict[str, Report] = {
        "input": checker.check(inputs, max_examples),
        "output": txn_checker.check(outputs, max_examples, copied_from(events, input_topic, output_topic)),
    }
    records: dict[str, set[tuple[int, int]]] = {}  # input value -> its locations in the input's final read
    copies: dict[str, set[tuple[int, int]]] = {}  # copy -> its locations in the output's final read_committed read
    for e in events:
        if isinstance(e, FinalRead) and e.topic in (input_topic, output_topic):
            into = records if e.topic == input_topic else copies
            into.setdefault(e.value, set()).add((e.partition, e.offset))
    # Each input record's copies: by its location where copies name it (a value the client wrote twice is two
    # records, each copied once), else by its value.
    by_record: dict[tuple[str, tuple[int, int] | None], list[str]] = {}
    for copy in copies:
        by_record.setdefault((source(copy), origin(copy)), []).append(copy)
    named = any(origin(c) is not None for c in copies)
    keys = [(v, loc) for v, at in records.items() for loc in sorted(at)] if named else [(v, None) for v in records]
    found = {name: Violations(max_examples) for name in VIOLATIONS}
    for key in keys:
        value, place = key
        made = sorted(by_record.get(key, []))
        if not made:
            found["copy_lost"].add({"value": value, "at": [place] if place else sorted(records[value])})
        elif len(made) > 1:
            found["copy_duplicated"].add({"value": value, "copies": {c: sorted(copies[c]) for c in made}})
    known = set(keys)
    for copy, where in copies.items():
        if (source(copy), origin(copy)) not in known:
            found["copy_unexpected"].add({"copy": copy, "at": sorted(where)})
    times = [len(by_record.get(k, [])) for k in keys]  # how many copies each input record has
    totals = {
        "inputs": len(keys),
        "copies": len(copies),
        "copied_once": times.count(1),
        "not_copied": times.count(0),
        "copied_more_than_once": sum(1 for n in times if n > 1),
        "extra_copies": sum(n - 1 for n in times if n > 1),
        "unexpected_copies": sum(1 for c in copies if (source(c), origin(c)) not in known),
    }
    faults: list[dict[str, object]] = []
    for prefix, report in sections.items():
        totals |= {f"{prefix}.{k}": n for k, n in report.totals.items()}
        found |= {f"{prefix}.{k}": v for k, v in report.violations.items()}
        faults = report.faults
    return CopyReport(totals, found, faults, sections)

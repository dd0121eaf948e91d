"""The no-loss checker, in the spirit of Jepsen's queue workload: judges a history against what acks=all promises.

Every acknowledged value must be in the final read, once, at the offset its ack named, in its producer's send
order; every offset holds one value for all observers; consumers read forward and never see a record that is
later truncated; a write that failed definitely is never visible. Indeterminate writes (an error that may hide a
successful append, or no outcome at all) may or may not be present.

``check`` is pure and makes one pass over the history plus passes over its indexes, so a million events take
seconds. ``python -m odradek.chaos.checker history.jsonl [--json report.json]`` prints the table and exits 1 on
any violation.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import chain
from pathlib import Path

from odradek.chaos.history import Ack, Event, Fault, FinalRead, Heal, History, Read, Seek, Send, SendError

Location = tuple[str, int, int]  # topic, partition, offset

# Report order, with the one-line meaning the table prints.
VIOLATIONS: dict[str, str] = {
    "lost": "acknowledged, absent from the final read",
    "duplicate": "one value at more than one offset",
    "inconsistent_offset": "different values at one offset",
    "ack_mismatch": "acknowledged at another offset than read",
    "reordered": "one producer's acked writes out of send order",
    "vanished_read": "read by a consumer, then truncated",
    "non_monotonic_read": "a consumer read went backwards without a seek",
    "failed_write_visible": "a definitely failed write was read",
    "unexpected_read": "read a value nobody sent",
}


@dataclass(slots=True)
class Violations:
    """All occurrences are counted; only the first ``limit`` are kept as examples."""

    limit: int
    count: int = 0
    examples: list[dict[str, object]] = field(default_factory=list)

    def add(self, example: dict[str, object]) -> None:
        self.count += 1
        if len(self.examples) < self.limit:
            self.examples.append(example)


@dataclass(slots=True)
class Report:
    """The verdict: ``totals`` count outcomes (``recovered`` = indeterminate writes found in the final read),
    ``violations`` has every class of ``VIOLATIONS`` (zero counts included), ``faults`` lists Fault/Heal events."""

    totals: dict[str, int]
    violations: dict[str, Violations]
    faults: list[dict[str, object]]

    @property
    def ok(self) -> bool:
        return not any(v.count for v in self.violations.values())

    def to_dict(self) -> dict[str, object]:
        return {
            "ok": self.ok,
            "totals": self.totals,
            "violations": {name: {"count": v.count, "examples": v.examples} for name, v in self.violations.items()},
            "faults": self.faults,
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    def summary_table(self) -> str:
        t = self.totals
        kinds = Counter(f["kind"] for f in self.faults if f["type"] == "fault")
        lines = [
            f"chaos check: {'OK' if self.ok else 'FAIL'}",
            f"sent {t['sent']}  acked {t['acked']}  failed {t['failed']}  indeterminate {t['indeterminate']}"
            f" (present {t['recovered']})  reads {t['reads']}  final reads {t['final_reads']}",
            "faults " + (", ".join(f"{kind} x{n}" for kind, n in sorted(kinds.items())) or "none"),
            "",
            f"{'check':<22} {'count':>7}  {'meaning':<46} first example",
        ]
        for name, meaning in VIOLATIONS.items():
            v = self.violations[name]
            example = json.dumps(v.examples[0], separators=(",", ":")) if v.examples else ""
            if len(example) > 100:
                example = example[:97] + "..."
            lines.append(f"{name:<22} {v.count:>7}  {meaning:<46} {example}".rstrip())
        return "\n".join(lines)


def _loc(location: Location) -> dict[str, object]:
    return {"topic": location[0], "partition": location[1], "offset": location[2]}


def check(history: Iterable[Event], max_examples: int = 10) -> Report:
    """Judge ``history`` (events in the order they were recorded; each worker's own events in its order)."""
    found = {name: Violations(max_examples) for name in VIOLATIONS}
    sends: dict[str, Send] = {}
    sequences: dict[tuple[str, str, int], list[str]] = {}  # (producer, topic, partition) -> values in send order
    acks: dict[str, Ack] = {}  # the first ack of each value
    repeated_acks: list[Ack] = []  # a client bug, but each ack is a claim the log must match
    errors: dict[str, SendError] = {}
    at: dict[Location, str] = {}  # the first value observed (read or acked) at each location
    conflicts: dict[Location, set[str]] = {}
    where: dict[str, Location] = {}  # each value's first location in any read
    elsewhere: dict[str, set[Location]] = {}  # its other locations, if any
    final: dict[str, Location] = {}  # each value's first location in the final read
    final_elsewhere: dict[str, set[Location]] = {}
    first_read: dict[str, Read] = {}  # the first concurrent read of each value
    position: dict[tuple[str, str, int], int] = {}  # (consumer, topic, partition) -> lowest offset it may read next
    faults: list[dict[str, object]] = []
    reads = final_reads = 0

    def observe(location: Location, value: str) -> None:
        seen = at.setdefault(location, value)
        if seen != value:
            conflicts.setdefault(location, {seen}).add(value)

    def place(index: dict[str, Location], others: dict[str, set[Location]], value: str, location: Location) -> None:
        first = index.setdefault(value, location)
        if first != location:
            others.setdefault(value, set()).add(location)

    for event in history:
        kind = type(event)
        if kind is Read or kind is FinalRead:
            location = (event.topic, event.partition, event.offset)
            observe(location, event.value)
            place(where, elsewhere, event.value, location)
            if kind is FinalRead:
                final_reads += 1
                place(final, final_elsewhere, event.value, location)
                continue
            reads += 1
            first_read.setdefault(event.value, event)
            key = (event.consumer, event.topic, event.partition)
            lowest = position.get(key, 0)
            if event.offset < lowest:
                found["non_monotonic_read"].add(
                    {
                        "consumer": event.consumer,
                        **_loc(location),
                        "value": event.value,
                        "expected_at_least": lowest,
                    }
                )
            position[key] = event.offset + 1
        elif kind is Send:
            if sends.setdefault(event.value, event) is event:
                sequences.setdefault((event.process, event.topic, event.partition), []).append(event.value)
        elif kind is Ack:
            location = (event.topic, event.partition, event.offset)
            if acks.setdefault(event.value, event) is not event:
                repeated_acks.append(event)
            observe(location, event.value)
        elif kind is SendError:
            errors.setdefault(event.value, event)
        elif kind is Seek:
            position[(event.consumer, event.topic, event.partition)] = event.offset
        elif kind is Fault or kind is Heal:
            faults.append(
                {
                    "type": "fault" if kind is Fault else "heal",
                    "kind": event.kind,
                    "target": event.target,
                    "detail": event.detail,
                    "process": event.process,
                    "time": event.time,
                }
            )

    for value, ack in acks.items():
        if value not in final:
            found["lost"].add({"value": value, **_loc((ack.topic, ack.partition, ack.offset))})
    for ack in chain(acks.values(), repeated_acks):
        acked_at = (ack.topic, ack.partition, ack.offset)
        placed = final.get(ack.value)
        if placed is not None and placed != acked_at and acked_at not in final_elsewhere.get(ack.value, ()):
            located = sorted({placed, *final_elsewhere.get(ack.value, ())})
            found["ack_mismatch"].add({"value": ack.value, **_loc(acked_at), "found": [_loc(x) for x in located]})

    for value, others in elsewhere.items():
        located = sorted({where[value], *others})
        found["duplicate"].add(
            {"value": value, "locations": [_loc(x) for x in located], "in_final_read": value in final_elsewhere}
        )

    for location, values in sorted(conflicts.items()):
        found["inconsistent_offset"].add({**_loc(location), "values": sorted(values)})

    for (producer, topic, partition), values in sequences.items():
        previous: tuple[str, int] | None = None
        for value in values:
            ack = acks.get(value)
            if ack is None:
                continue  # unacknowledged writes carry no ordering promise
            placed = final.get(value)
            offset = placed[2] if placed is not None and placed[:2] == (topic, partition) else ack.offset
            if previous is not None and offset <= previous[1]:
                found["reordered"].add(
                    {
                        "producer": producer,
                        "topic": topic,
                        "partition": partition,
                        "earlier": {"value": previous[0], "offset": previous[1]},
                        "later": {"value": value, "offset": offset},
                    }
                )
            previous = (value, offset)

    for value, read in first_read.items():
        if value not in final:
            found["vanished_read"].add(
                {"value": value, "consumer": read.consumer, **_loc((read.topic, read.partition, read.offset))}
            )

    failed = 0
    for value, error in errors.items():
        if not error.definite or value in acks:
            continue
        failed += 1
        if value in where:
            found["failed_write_visible"].add({"value": value, "error": error.error, **_loc(where[value])})

    for value, location in where.items():
        if value not in sends and value not in acks and value not in errors:
            found["unexpected_read"].add({"value": value, **_loc(location)})

    indeterminate = [v for v in sends if v not in acks and not (v in errors and errors[v].definite)]
    totals = {
        "sent": len(sends),
        "acked": len(acks),
        "failed": failed,
        "indeterminate": len(indeterminate),
        "recovered": sum(1 for v in indeterminate if v in final),
        "reads": reads,
        "final_reads": final_reads,
        "faults": sum(1 for f in faults if f["type"] == "fault"),
    }
    return Report(totals, found, faults)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m odradek.chaos.checker", description="Check a chaos history.")
    parser.add_argument("history", type=Path, help="the run's history, JSON Lines")
    parser.add_argument("--json", type=Path, dest="json_path", help="also write the report as JSON here")
    parser.add_argument("--examples", type=int, default=10, help="examples kept per violation class")
    args = parser.parse_args(argv)
    report = check(History.read_jsonl(args.history), args.examples)
    print(report.summary_table())
    if args.json_path is not None:
        args.json_path.write_text(report.to_json() + "\n", encoding="utf-8")
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())

"""The no-loss checker, in the spirit of Jepsen's queue workload: judges a history against what acks=all promises.

Every acknowledged value must be in the final read, once, at the offset its ack named, in its producer's send
order; every offset holds one value for all observers; consumers read forward, never jump over a record the
final read holds, and never see a record that is later truncated; a write that failed definitely is never visible.
Indeterminate writes (an error that may hide a successful append, or no outcome at all) may or may not be present.

With a consumer group (the group workload), three more promises. Members commit only what they processed and a
new owner starts at the committed offset, so the committed offset of a partition never decreases: (1) every
acknowledged record of a subscribed topic was processed by some member (the final member, which reads from the
committed offsets to the end after the faults, included), or a commit skipped it; (2) the committed offset read
at the end is at least every commit that was acknowledged (none lost); (3) what one member observes of a
partition's committed offset, its own acknowledged commits and its OffsetFetch answers in the order it saw them,
never goes back; (4) a member processes every record of a partition it was given, from where it started it (the
committed offset it fetched) on, while its generation lasts. Comparisons across members use only (2): their records
of acknowledgements race with each other.

``check`` is pure: ``index_history`` makes the one pass over the history, then one function per violation class
(``CHECKS``) reads the index, so a million events take seconds. ``python -m odradek.chaos.checker history.jsonl
[--json report.json]`` prints the table and exits 1 on any violation; it judges a history of the transactional
workload with chaos/txn_checker.py.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from bisect import bisect_left
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from itertools import chain
from pathlib import Path

from odradek.chaos.history import (
    Ack,
    Assigned,
    Commit,
    Committed,
    Event,
    Fault,
    FinalRead,
    Heal,
    History,
    Processed,
    ProducerEpoch,
    Read,
    Seek,
    Send,
    SendError,
    Subscribed,
)

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
    "read_skip": "a read jumped over a record of the final read",
    "failed_write_visible": "a definitely failed write was read",
    "unexpected_read": "read a value nobody sent",
    "unprocessed": "acknowledged, never processed by the group",
    "commit_lost": "final committed offset below an acked commit",
    "commit_regressed": "a member saw its partition's commit go back",
    "member_skip": "a member skipped a record of its assignment",
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
            *(
                [f"group: processed {t['processed']}  commits acknowledged {t['commits']}"]
                if t.get("commits") or t.get("processed")
                else []
            ),
            *(
                [
                    f"written again by the client after a producer epoch bump (librdkafka): "
                    f"{t['renumbered_duplicates']} (not violations; docs/chaos.md)"
                ]
                if t.get("renumbered_duplicates")
                else []
            ),
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


@dataclass(slots=True)
class PartitionLog:
    """One partition as the final read found it, offsets ascending: the records every reader passing them had to
    see. Offsets it lacks (transaction markers, aborted records for read_committed, records compacted or truncated
    away) may be passed over: only the final read proves a visible record lives there."""

    offsets: list[int]
    values: list[str]

    def skipped(self, low: int, high: int) -> dict[str, object] | None:
        """What a reader moving from ``low`` straight to ``high`` jumped over (None: nothing)."""
        first, end = bisect_left(self.offsets, low), bisect_left(self.offsets, high)
        if first == end:
            return None
        return {"skipped": end - first, "first_skipped": {"offset": self.offsets[first], "value": self.values[first]}}


def partition_logs(final_at: Mapping[Location, str]) -> dict[tuple[str, int], PartitionLog]:
    """The final read of each partition, by offset (its first value where two passes disagree)."""
    records: dict[tuple[str, int], list[tuple[int, str]]] = {}
    for (topic, partition, offset), value in final_at.items():
        records.setdefault((topic, partition), []).append((offset, value))
    logs: dict[tuple[str, int], PartitionLog] = {}
    for key, found in records.items():
        found.sort()
        logs[key] = PartitionLog([offset for offset, _ in found], [value for _, value in found])
    return logs


def read_skips(
    cursor: Iterable[Read | Seek], logs: Mapping[tuple[str, int], PartitionLog], who: str = "consumer"
) -> Iterator[dict[str, object]]:
    """Each read that jumped from the reader's previous read of the partition (no seek between) over records of the
    final read: a fetch or a position that skipped them. Reads after a seek start a new run, wherever they land."""
    last: dict[tuple[str, str, int], int] = {}  # (reader, topic, partition) -> offset of its last read since a seek
    for event in cursor:
        key = (event.consumer, event.topic, event.partition)
        if isinstance(event, Seek):
            last.pop(key, None)
            continue
        before = last.get(key)
        last[key] = event.offset
        log = logs.get((event.topic, event.partition))
        if before is None or log is None or event.offset <= before + 1:
            continue
        skipped = log.skipped(before + 1, event.offset)
        if skipped is not None:
            where = {"topic": event.topic, "partition": event.partition}
            yield {who: event.consumer, **where, "previous_offset": before, "offset": event.offset, **skipped}


@dataclass(slots=True)
class HistoryIndex:
    """What the violation checks need from a history, gathered in one pass over it."""

    sends: dict[str, Send] = field(default_factory=dict)  # the first send of each value
    sequences: dict[tuple[str, str, int], list[str]] = field(default_factory=dict)  # (producer, topic, partition)
    acks: dict[str, Ack] = field(default_factory=dict)  # the first ack of each value
    repeated_acks: list[Ack] = field(default_factory=list)  # a client bug, but each ack is a claim the log must match
    errors: dict[str, SendError] = field(default_factory=dict)
    at: dict[Location, str] = field(default_factory=dict)  # the first value observed (read or acked) at each location
    conflicts: dict[Location, set[str]] = field(default_factory=dict)
    where: dict[str, Location] = field(default_factory=dict)  # each value's first location in any read
    elsewhere: dict[str, set[Location]] = field(default_factory=dict)  # its other locations, if any
    final: dict[str, Location] = field(default_factory=dict)  # each value's first location in the final read
    final_elsewhere: dict[str, set[Location]] = field(default_factory=dict)
    final_at: dict[Location, str] = field(default_factory=dict)  # the first value the final read found at each one
    logs: dict[tuple[str, int], PartitionLog] = field(default_factory=dict)  # final_at by partition, made at the end
    first_read: dict[str, Read] = field(default_factory=dict)  # the first concurrent read of each value
    cursor: list[Read | Seek] = field(default_factory=list)  # consumer reads and seeks, in recorded order
    faults: list[dict[str, object]] = field(default_factory=list)
    reads: int = 0
    final_reads: int = 0
    group_topics: set[str] = field(default_factory=set)  # topics some group member subscribed
    processed: set[str] = field(default_factory=set)  # values some group member processed
    processed_count: int = 0
    assignments: list[Assigned | Processed] = field(default_factory=list)  # members' starts and records, in order
    highest_commit: dict[tuple[str, int], Commit] = field(default_factory=dict)  # (topic, partition)
    final_committed: dict[tuple[str, int], int] = field(default_factory=dict)  # the last final OffsetFetch answer
    commit_views: list[Commit | Committed] = field(default_factory=list)  # acked commits and fetches, in order
    commits: int = 0
    epochs: dict[str, list[float]] = field(default_factory=dict)  # each producer's epoch acquisitions, in order

    def observe(self, location: Location, value: str) -> None:
        seen = self.at.setdefault(location, value)
        if seen != value:
            self.conflicts.setdefault(location, {seen}).add(value)


def _place(index: dict[str, Location], others: dict[str, set[Location]], value: str, location: Location) -> None:
    first = index.setdefault(value, location)
    if first != location:
        others.setdefault(value, set()).add(location)


def index_history(history: Iterable[Event]) -> HistoryIndex:
    """The one pass over the history (events in the order they were recorded; each worker's own in its order)."""
    ix = HistoryIndex()
    for event in history:
        if isinstance(event, Read | FinalRead):
            location = (event.topic, event.partition, event.offset)
            ix.observe(location, event.value)
            _place(ix.where, ix.elsewhere, event.value, location)
            if isinstance(event, FinalRead):
                ix.final_reads += 1
                _place(ix.final, ix.final_elsewhere, event.value, location)
                ix.final_at.setdefault(location, event.value)
                continue
            ix.reads += 1
            ix.first_read.setdefault(event.value, event)
            ix.cursor.append(event)
        elif isinstance(event, Processed):
            location = (event.topic, event.partition, event.offset)
            ix.observe(location, event.value)
            _place(ix.where, ix.elsewhere, event.value, location)
            ix.processed.add(event.value)
            ix.processed_count += 1
            ix.assignments.append(event)
        elif isinstance(event, Assigned):
            ix.assignments.append(event)
        elif isinstance(event, Commit):
            ix.commits += 1
            ix.commit_views.append(event)
            key = (event.topic, event.partition)
            if key not in ix.highest_commit or event.offset > ix.highest_commit[key].offset:
                ix.highest_commit[key] = event
        elif isinstance(event, Committed):
            ix.commit_views.append(event)
            if event.final:
                ix.final_committed[(event.topic, event.partition)] = event.offset
        elif isinstance(event, Subscribed):
            ix.group_topics.add(event.topic)
        elif isinstance(event, Send):
            if ix.sends.setdefault(event.value, event) is event:
                ix.sequences.setdefault((event.process, event.topic, event.partition), []).append(event.value)
        elif isinstance(event, Ack):
            if ix.acks.setdefault(event.value, event) is not event:
                ix.repeated_acks.append(event)
            if event.offset >= 0:  # acknowledged without an offset: it claims no location
                ix.observe((event.topic, event.partition, event.offset), event.value)
        elif isinstance(event, SendError):
            ix.errors.setdefault(event.value, event)
        elif isinstance(event, Seek):
            ix.cursor.append(event)
        elif isinstance(event, ProducerEpoch):
            ix.epochs.setdefault(event.process, []).append(event.time)
        elif isinstance(event, Fault | Heal):
            ix.faults.append(
                {
                    "type": "fault" if isinstance(event, Fault) else "heal",
                    "kind": event.kind,
                    "target": event.target,
                    "detail": event.detail,
                    "process": event.process,
                    "time": event.time,
                }
            )
    ix.logs = partition_logs(ix.final_at)
    return ix


Examples = Iterator[dict[str, object]]


def _lost(ix: HistoryIndex) -> Examples:
    for value, ack in ix.acks.items():
        if value not in ix.final:
            yield {"value": value, **_loc((ack.topic, ack.partition, ack.offset))}


def _renumbered(ix: HistoryIndex, value: str) -> bool:
    """Whether ``value``'s producer took a new epoch between sending it and its acknowledgement (or ever after, if
    none came): librdkafka then renumbers the messages it has not had acknowledged, and one the broker had already
    written is written again with the new epoch's sequence numbers, which no broker can tell from a new message
    (librdkafka issue 4953). Such a copy is the client's, counted apart from the violations."""
    send = ix.sends.get(value)
    if send is None:
        return False
    ack = ix.acks.get(value)
    end = ack.time if ack is not None else math.inf
    return any(send.time < t < end for t in ix.epochs.get(send.process, [])[1:])  # the first is no bump


def _duplicate(ix: HistoryIndex) -> Examples:
    for value, others in ix.elsewhere.items():
        if _renumbered(ix, value):
            continue
        located = sorted({ix.where[value], *others})
        yield {"value": value, "locations": [_loc(x) for x in located], "in_final_read": value in ix.final_elsewhere}


def _inconsistent_offset(ix: HistoryIndex) -> Examples:
    for location, values in sorted(ix.conflicts.items()):
        yield {**_loc(location), "values": sorted(values)}


def _ack_mismatch(ix: HistoryIndex) -> Examples:
    for ack in chain(ix.acks.values(), ix.repeated_acks):
        if ack.offset < 0:  # acknowledged without an offset: only where it is can be checked (lost, duplicate)
            continue
        acked_at = (ack.topic, ack.partition, ack.offset)
        placed = ix.final.get(ack.value)
        others = ix.final_elsewhere.get(ack.value, ())
        if placed is not None and placed != acked_at and acked_at not in others:
            located = sorted({placed, *others})
            yield {"value": ack.value, **_loc(acked_at), "found": [_loc(x) for x in located]}


def _reordered(ix: HistoryIndex) -> Examples:
    for (producer, topic, partition), values in ix.sequences.items():
        previous: tuple[str, int] | None = None
        for value in values:
            ack = ix.acks.get(value)
            if ack is None:
                continue  # unacknowledged writes carry no ordering promise
            placed = ix.final.get(value)
            offset = placed[2] if placed is not None and placed[:2] == (topic, partition) else ack.offset
            if offset < 0:
                continue  # acknowledged without an offset and not in the final read: its loss is reported
            if previous is not None and offset <= previous[1]:
                yield {
                    "producer": producer,
                    "topic": topic,
                    "partition": partition,
                    "earlier": {"value": previous[0], "offset": previous[1]},
                    "later": {"value": value, "offset": offset},
                }
            previous = (value, offset)


def _vanished_read(ix: HistoryIndex) -> Examples:
    for value, read in ix.first_read.items():
        if value not in ix.final:
            yield {"value": value, "consumer": read.consumer, **_loc((read.topic, read.partition, read.offset))}


def _non_monotonic_read(ix: HistoryIndex) -> Examples:
    position: dict[tuple[str, str, int], int] = {}  # (consumer, topic, partition) -> lowest offset it may read next
    for event in ix.cursor:
        key = (event.consumer, event.topic, event.partition)
        if isinstance(event, Seek):
            position[key] = event.offset
            continue
        lowest = position.get(key, 0)
        if event.offset < lowest:
            location = (event.topic, event.partition, event.offset)
            yield {"consumer": event.consumer, **_loc(location), "value": event.value, "expected_at_least": lowest}
        position[key] = event.offset + 1


def _read_skip(ix: HistoryIndex) -> Examples:
    return read_skips(ix.cursor, ix.logs)


def _definitely_failed(ix: HistoryIndex) -> list[str]:
    """Values whose write failed definitely and was never acknowledged."""
    return [value for value, error in ix.errors.items() if error.definite and value not in ix.acks]


def _failed_write_visible(ix: HistoryIndex) -> Examples:
    for value in _definitely_failed(ix):
        if value in ix.where:
            yield {"value": value, "error": ix.errors[value].error, **_loc(ix.where[value])}


def _unexpected_read(ix: HistoryIndex) -> Examples:
    for value, location in ix.where.items():
        if value not in ix.sends and value not in ix.acks and value not in ix.errors:
            yield {"value": value, **_loc(location)}


def _unprocessed(ix: HistoryIndex) -> Examples:
    for value, ack in ix.acks.items():
        if ack.topic in ix.group_topics and value not in ix.processed:
            yield {"value": value, **_loc((ack.topic, ack.partition, ack.offset))}


def _commit_lost(ix: HistoryIndex) -> Examples:
    for (topic, partition), commit in sorted(ix.highest_commit.items()):
        final = ix.final_committed.get((topic, partition))
        if final is None or final < commit.offset:
            yield {
                "topic": topic,
                "partition": partition,
                "acknowledged": commit.offset,
                "consumer": commit.consumer,
                "generation": commit.generation,
                "final_committed": final,
            }


def _commit_regressed(ix: HistoryIndex) -> Examples:
    seen: dict[tuple[str, str, int], Commit | Committed] = {}  # (observer, topic, partition) -> highest view
    for view in ix.commit_views:
        key = (view.consumer, view.topic, view.partition)
        before = seen.get(key)
        if before is not None and view.offset < before.offset:
            yield {
                "consumer": view.consumer,
                "topic": view.topic,
                "partition": view.partition,
                "earlier": {"kind": type(before).__name__.lower(), "offset": before.offset},
                "later": {"kind": type(view).__name__.lower(), "offset": view.offset},
            }
            continue
        seen[key] = view


def _member_skip(ix: HistoryIndex) -> Examples:
    """Within one generation a member owns its partitions alone and reads each forward from where it started it,
    so it processes every record of the final read from its start (or its first record, if its start was not
    recorded) on. A record without a generation (the member had just lost it) ends the run."""
    at: dict[tuple[str, str, int], tuple[int, int]] = {}  # (member, topic, partition) -> (generation, next offset)
    for event in ix.assignments:
        key = (event.consumer, event.topic, event.partition)
        if isinstance(event, Assigned):
            at[key] = (event.generation, event.offset)
            continue
        expected = at.pop(key, None)
        if event.generation < 0:
            continue
        at[key] = (event.generation, event.offset + 1)
        log = ix.logs.get((event.topic, event.partition))
        if expected is None or expected[0] != event.generation or log is None or event.offset <= expected[1]:
            continue
        skipped = log.skipped(expected[1], event.offset)
        if skipped is not None:
            yield {
                "consumer": event.consumer,
                "generation": event.generation,
                "topic": event.topic,
                "partition": event.partition,
                "expected_offset": expected[1],
                "offset": event.offset,
                **skipped,
            }


CHECKS: dict[str, Callable[[HistoryIndex], Examples]] = {
    "lost": _lost,
    "duplicate": _duplicate,
    "inconsistent_offset": _inconsistent_offset,
    "ack_mismatch": _ack_mismatch,
    "reordered": _reordered,
    "vanished_read": _vanished_read,
    "non_monotonic_read": _non_monotonic_read,
    "read_skip": _read_skip,
    "failed_write_visible": _failed_write_visible,
    "unexpected_read": _unexpected_read,
    "unprocessed": _unprocessed,
    "commit_lost": _commit_lost,
    "commit_regressed": _commit_regressed,
    "member_skip": _member_skip,
}
assert CHECKS.keys() == VIOLATIONS.keys()


def _totals(ix: HistoryIndex) -> dict[str, int]:
    indeterminate = [v for v in ix.sends if v not in ix.acks and not (v in ix.errors and ix.errors[v].definite)]
    return {
        "sent": len(ix.sends),
        "acked": len(ix.acks),
        "failed": len(_definitely_failed(ix)),
        "indeterminate": len(indeterminate),
        "recovered": sum(1 for v in indeterminate if v in ix.final),
        "reads": ix.reads,
        "final_reads": ix.final_reads,
        "faults": sum(1 for f in ix.faults if f["type"] == "fault"),
        "processed": ix.processed_count,
        "commits": ix.commits,
        "renumbered_duplicates": sum(1 for value in ix.elsewhere if _renumbered(ix, value)),
    }


def check(history: Iterable[Event], max_examples: int = 10) -> Report:
    """Judge ``history`` (events in the order they were recorded; each worker's own events in its order)."""
    ix = index_history(history)
    found = {name: Violations(max_examples) for name in VIOLATIONS}
    for name, find in CHECKS.items():
        for example in find(ix):
            found[name].add(example)
    return Report(_totals(ix), found, ix.faults)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m odradek.chaos.checker", description="Check a chaos history.")
    parser.add_argument("history", type=Path, help="the run's history, JSON Lines")
    parser.add_argument("--json", type=Path, dest="json_path", help="also write the report as JSON here")
    parser.add_argument("--examples", type=int, default=10, help="examples kept per violation class")
    args = parser.parse_args(argv)
    history = History.read_jsonl(args.history)
    from odradek.chaos import txn_checker  # it builds on this module's Report

    judge = txn_checker.check if txn_checker.is_transactional(history) else check
    report = judge(history, args.examples)
    print(report.summary_table())
    if args.json_path is not None:
        args.json_path.write_text(report.to_json() + "\n", encoding="utf-8")
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())

"""The transactional checker: judges a history of the transactional workload against what transactions and
``read_committed`` promise.

A transaction's outcome, as its producer learned it: **committed** once ``commit_transaction()`` returned,
**aborted** once ``abort_transaction()`` returned or a new producer with the same transactional id finished
``init_transactions()`` while the transaction was open and its commit had never been invoked (the coordinator
aborts what the fenced producer left open), **unknown** when a commit was invoked and failed. Then:

- every write of a committed transaction (but those ``send()`` refused) is in the final ``read_committed`` read;
- no ``read_committed`` reader ever sees a write of an aborted transaction (G1a), nor of a transaction whose commit
  had not been invoked yet when it read it (a transaction nobody committed can only abort);
- an unknown transaction is all or nothing: once a ``read_committed`` reader saw any of its writes, every write of
  it that was acknowledged or seen is in the final read;
- one value at one offset, one offset holding one value, for every observer (readers, the final
  ``read_committed`` and ``read_uncommitted`` passes and the produce acknowledgements), and each reader's offsets
  of a partition going forward except after a recorded seek, never jumping over a record of the final
  ``read_committed`` read (a committed one: markers and aborted records may be passed over);
- each producer's committed transactions in a partition in the order it committed them, and one transaction's
  writes to a partition in the order it sent them: a producer runs one transaction at a time, and the next begins
  only once the previous one's commit returned, or a new instance's ``init_transactions()`` completed it;
- no cycle in the dependency graph of the committed transactions and the readers' reads (chaos/cycles.py: what
  each read depends on, a producer's order, real time), which no correct run can close (G1c and its variants).

``check`` is pure: ``index_history`` makes one pass, each rule of ``CHECKS`` reads the index. ``python -m
odradek.chaos.txn_checker history.jsonl [--json report.json]`` prints the table and exits 1 on any violation.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from odradek.chaos.checker import PartitionLog, Report, Violations, partition_logs, read_skips
from odradek.chaos.cycles import EDGE_KINDS, Cycles, Op, find_cycles
from odradek.chaos.history import (
    Event,
    Fault,
    FinalRead,
    Heal,
    History,
    Read,
    Seek,
    TxnAck,
    TxnEnd,
    TxnSendError,
    TxnWrite,
    UncommittedRead,
)

Location = tuple[str, int, int]  # topic, partition, offset

# Report order, with the one-line meaning the table prints.
VIOLATIONS: dict[str, str] = {
    "lost": "committed, absent from the final read",
    "aborted_read": "a write of an aborted transaction read (G1a)",
    "uncommitted_read": "read before its commit was invoked",
    "partial": "an unknown transaction only partly visible",
    "duplicate": "one value at more than one offset",
    "inconsistent_offset": "different values at one offset",
    "ack_mismatch": "acknowledged at another offset than read",
    "non_monotonic_read": "a reader went backwards without a seek",
    "read_skip": "a reader jumped over a committed record",
    "reordered": "a producer's committed writes out of order",
    "unexpected_read": "read a value nobody sent",
    "cycle": "committed operations in a dependency cycle",
}


@dataclass(slots=True)
class Txn:
    """What the history says of one transaction."""

    values: list[str] = field(default_factory=list)  # in send order
    producer: str = ""  # the process that wrote it (one per transactional id)
    commit_invoked: float | None = None  # the time of the first commit call
    commit_order: int = -1  # the position of the first commit call in the history (-1: never called)
    committed: bool = False
    committed_at: float | None = None  # the time its commit returned
    begun: int = -1  # the position of its first event in the history
    aborted_by: str = ""  # "abort" or "fence" once an abort is acknowledged


@dataclass(frozen=True, slots=True)
class Inputs:
    """Records the transactions consumed from another topic (the copy workload's input), by transaction, and the
    operations that wrote them: more nodes and edges for the dependency graph."""

    reads: Mapping[str, Sequence[tuple[Location, str]]] = field(default_factory=dict)
    writers: Sequence[Op] = ()


@dataclass(slots=True)
class TxnIndex:
    """What the rules need from a history, gathered in one pass over it."""

    txns: dict[str, Txn] = field(default_factory=dict)
    writes: dict[str, TxnWrite] = field(default_factory=dict)  # the first write of each value
    acks: dict[str, TxnAck] = field(default_factory=dict)
    refused: set[str] = field(default_factory=set)  # values send() refused: never part of their transaction
    at: dict[Location, str] = field(default_factory=dict)  # the first value observed (read or acked) at each location
    conflicts: dict[Location, set[str]] = field(default_factory=dict)
    where: dict[str, set[Location]] = field(default_factory=dict)  # each value's locations in any read
    seen: dict[str, Read | FinalRead] = field(default_factory=dict)  # first read_committed observation per value
    early: dict[str, Read | FinalRead] = field(default_factory=dict)  # ... if it came before the commit was invoked
    final: set[str] = field(default_factory=set)  # values of the final read_committed read
    final_at: dict[Location, str] = field(default_factory=dict)  # the first value it found at each location
    logs: dict[tuple[str, int], PartitionLog] = field(default_factory=dict)  # final_at by partition, made at the end
    cursor: list[Read | Seek] = field(default_factory=list)  # readers' reads and seeks, in recorded order
    faults: list[dict[str, object]] = field(default_factory=list)
    reads: int = 0
    final_reads: int = 0
    uncommitted_reads: int = 0
    inputs: Inputs = field(default_factory=Inputs)
    graph: Cycles | None = None  # the dependency graph's cycles, once searched

    def txn(self, name: str, position: int = -1) -> Txn:
        txn = self.txns.get(name)
        if txn is None:
            txn = self.txns[name] = Txn(begun=position)
        return txn

    def observe(self, location: Location, value: str) -> None:
        seen = self.at.setdefault(location, value)
        if seen != value:
            self.conflicts.setdefault(location, {seen}).add(value)


def index_history(history: Iterable[Event]) -> TxnIndex:
    ix = TxnIndex()
    for position, event in enumerate(history):
        if isinstance(event, Read | FinalRead | UncommittedRead):
            location = (event.topic, event.partition, event.offset)
            ix.observe(location, event.value)
            ix.where.setdefault(event.value, set()).add(location)
            if isinstance(event, UncommittedRead):
                ix.uncommitted_reads += 1
                continue
            ix.seen.setdefault(event.value, event)
            if isinstance(event, FinalRead):
                ix.final_reads += 1
                ix.final.add(event.value)
                ix.final_at.setdefault(location, event.value)
            else:
                ix.reads += 1
                ix.cursor.append(event)
        elif isinstance(event, TxnWrite):
            if ix.writes.setdefault(event.value, event) is event:
                txn = ix.txn(event.txn, position)
                txn.values.append(event.value)
                txn.producer = txn.producer or event.process
        elif isinstance(event, TxnAck):
            ix.acks.setdefault(event.value, event)
            if event.offset >= 0:  # acknowledged without an offset (librdkafka, now and then): no location claimed
                ix.observe((event.topic, event.partition, event.offset), event.value)
        elif isinstance(event, TxnSendError):
            if event.definite:
                ix.refused.add(event.value)
        elif isinstance(event, TxnEnd):
            txn = ix.txn(event.txn, position)
            if event.op == "commit" and event.result == "invoke" and txn.commit_invoked is None:
                txn.commit_invoked = event.time
                txn.commit_order = position
            elif event.op == "commit" and event.result == "ok" and not txn.committed:
                txn.committed = True
                txn.committed_at = event.time
            elif event.op in ("abort", "fence") and event.result == "ok" and not txn.aborted_by:
                txn.aborted_by = event.op
        elif isinstance(event, Seek):
            ix.cursor.append(event)
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
    # Each value's first read_committed observation against its transaction's first commit call (one clock: the
    # workers are threads of one process).
    for value, read in ix.seen.items():
        write = ix.writes.get(value)
        if write is not None:
            invoked = ix.txn(write.txn).commit_invoked
            if invoked is None or read.time < invoked:
                ix.early[value] = read
    return ix


Examples = Iterator[dict[str, object]]


def _loc(location: Location) -> dict[str, object]:
    return {"topic": location[0], "partition": location[1], "offset": location[2]}


def _read(read: Read | FinalRead) -> dict[str, object]:
    location = (read.topic, read.partition, read.offset)
    return {"reader": read.consumer, "final": isinstance(read, FinalRead), **_loc(location)}


def _lost(ix: TxnIndex) -> Examples:
    for name, txn in ix.txns.items():
        if txn.committed:
            for value in txn.values:
                if value not in ix.refused and value not in ix.final:
                    ack = ix.acks.get(value)
                    where = _loc((ack.topic, ack.partition, ack.offset)) if ack is not None else {}
                    yield {"value": value, "txn": name, **where}


def _aborted_read(ix: TxnIndex) -> Examples:
    for name, txn in ix.txns.items():
        if txn.aborted_by:
            for value in txn.values:
                if value in ix.seen:
                    yield {"value": value, "txn": name, "aborted_by": txn.aborted_by, **_read(ix.seen[value])}


def _uncommitted_read(ix: TxnIndex) -> Examples:
    for value, read in ix.early.items():
        name = ix.writes[value].txn
        txn = ix.txns[name]
        if not txn.aborted_by:  # an aborted transaction's reads are aborted_read
            invoked = txn.commit_invoked
            when = "never" if invoked is None else f"{invoked - read.time:.3f}s after the read"
            yield {"value": value, "txn": name, "commit_invoked": when, **_read(read)}


def _partial(ix: TxnIndex) -> Examples:
    for name, txn in ix.txns.items():
        if txn.committed or txn.aborted_by or txn.commit_invoked is None:
            continue  # decided ones are judged by lost and aborted_read, never-committed ones by uncommitted_read
        visible = [v for v in txn.values if v in ix.seen]
        if not visible:
            continue
        due = [v for v in txn.values if v in ix.acks or v in ix.seen]
        missing = [v for v in due if v not in ix.final]
        if missing:
            yield {"txn": name, "visible": visible, "missing_from_final_read": missing}


def _duplicate(ix: TxnIndex) -> Examples:
    for value, locations in ix.where.items():
        if len(locations) > 1:
            yield {"value": value, "locations": [_loc(x) for x in sorted(locations)]}


def _inconsistent_offset(ix: TxnIndex) -> Examples:
    for location, values in sorted(ix.conflicts.items()):
        yield {**_loc(location), "values": sorted(values)}


def _ack_mismatch(ix: TxnIndex) -> Examples:
    for value, ack in ix.acks.items():
        if ack.offset < 0:
            continue
        acked_at = (ack.topic, ack.partition, ack.offset)
        found = ix.where.get(value, set())
        if found and acked_at not in found:
            yield {"value": value, **_loc(acked_at), "found": [_loc(x) for x in sorted(found)]}


def _non_monotonic_read(ix: TxnIndex) -> Examples:
    position: dict[tuple[str, str, int], int] = {}  # (reader, topic, partition) -> lowest offset it may read next
    for event in ix.cursor:
        key = (event.consumer, event.topic, event.partition)
        if isinstance(event, Seek):
            position[key] = event.offset
            continue
        lowest = position.get(key, 0)
        if event.offset < lowest:
            location = (event.topic, event.partition, event.offset)
            yield {"reader": event.consumer, **_loc(location), "value": event.value, "expected_at_least": lowest}
        position[key] = event.offset + 1


def _read_skip(ix: TxnIndex) -> Examples:
    return read_skips(ix.cursor, ix.logs, who="reader")


def _reordered(ix: TxnIndex) -> Examples:
    """Per partition and producer, the final read's records ranked by (commit call, send order) never go down.
    Transactions whose commit was never called are left to aborted_read and uncommitted_read."""
    rank: dict[str, tuple[str, int, int, str]] = {}  # value -> producer, commit order, send order, transaction
    for name, txn in ix.txns.items():
        if txn.commit_order >= 0:
            for sent, value in enumerate(txn.values):
                rank[value] = (txn.producer, txn.commit_order, sent, name)
    for (topic, partition), log in ix.logs.items():
        previous: dict[str, tuple[int, int, str, str, int]] = {}  # producer -> last record's rank, txn, value, offset
        for offset, value in zip(log.offsets, log.values):
            if value not in rank:
                continue
            producer, order, sent, name = rank[value]
            before = previous.get(producer)
            previous[producer] = (order, sent, name, value, offset)
            if before is not None and (order, sent) < before[:2]:
                yield {
                    "producer": producer,
                    "topic": topic,
                    "partition": partition,
                    "earlier": {"txn": name, "value": value, "offset": offset},  # committed or sent first
                    "later": {"txn": before[2], "value": before[3], "offset": before[4]},  # yet at a lower offset
                }


def _unexpected_read(ix: TxnIndex) -> Examples:
    for value, locations in ix.where.items():
        if value not in ix.writes:
            yield {"value": value, **_loc(min(locations))}


def graph_ops(ix: TxnIndex) -> list[Op]:
    """The dependency graph's nodes: the transactions that committed (commit returned, or unknown and in the final
    read; neither aborted nor fenced, which the other rules judge), each producer's in the order they began, with
    their writes where the final read found them; each record a reader read during the run; and ``ix.inputs``."""
    located: dict[str, Location] = {}
    for location, value in ix.final_at.items():
        located.setdefault(value, location)
    ops: list[Op] = []
    for name, txn in sorted(ix.txns.items(), key=lambda item: item[1].begun):
        visible = txn.commit_invoked is not None and any(v in ix.final for v in txn.values)
        if txn.aborted_by or not (txn.committed or visible):
            continue
        writes = [(located[v], v) for v in txn.values if v in located]
        reads = list(ix.inputs.reads.get(name, ()))
        ops.append(Op(name, "txn", txn.commit_invoked, txn.committed_at, txn.producer, writes, reads))
    for event in ix.cursor:
        if isinstance(event, Read):
            location = (event.topic, event.partition, event.offset)
            name = f"{event.consumer} read {event.topic}/{event.partition}/{event.offset}"
            ops.append(Op(name, "read", None, event.time, reads=[(location, event.value)]))
    return [*ops, *ix.inputs.writers]


def _graph(ix: TxnIndex) -> Cycles:
    if ix.graph is None:
        ix.graph = find_cycles(graph_ops(ix), limit=sys.maxsize)
    return ix.graph


def _cycle(ix: TxnIndex) -> Examples:
    """One shortest cycle per strongly connected component of the dependency graph."""
    return iter(_graph(ix).cycles)


CHECKS: dict[str, Callable[[TxnIndex], Examples]] = {
    "lost": _lost,
    "aborted_read": _aborted_read,
    "uncommitted_read": _uncommitted_read,
    "partial": _partial,
    "duplicate": _duplicate,
    "inconsistent_offset": _inconsistent_offset,
    "ack_mismatch": _ack_mismatch,
    "non_monotonic_read": _non_monotonic_read,
    "read_skip": _read_skip,
    "reordered": _reordered,
    "unexpected_read": _unexpected_read,
    "cycle": _cycle,
}
assert CHECKS.keys() == VIOLATIONS.keys()


def _totals(ix: TxnIndex) -> dict[str, int]:
    txns = ix.txns.values()
    graph = _graph(ix)
    unknown = [t for t in txns if not t.committed and not t.aborted_by and t.commit_invoked is not None]
    return {
        "transactions": len(ix.txns),
        "committed": sum(1 for t in txns if t.committed),
        "aborted": sum(1 for t in txns if t.aborted_by == "abort"),
        "fenced": sum(1 for t in txns if t.aborted_by == "fence"),
        "unknown": len(unknown),
        "unknown_visible": sum(1 for t in unknown if any(v in ix.final for v in t.values)),
        "open": sum(1 for t in txns if not t.committed and not t.aborted_by and t.commit_invoked is None),
        "writes": len(ix.writes),
        "acked": len(ix.acks),
        "reads": ix.reads,
        "final_reads": ix.final_reads,
        "uncommitted_reads": ix.uncommitted_reads,
        "faults": sum(1 for f in ix.faults if f["type"] == "fault"),
        "graph_operations": graph.nodes,
        "graph_edges": sum(graph.edges.values()),
        **{f"graph_{kind}": graph.edges[kind] for kind in EDGE_KINDS},
        "graph_cyclic_operations": graph.cyclic_ops,
    }


@dataclass(slots=True)
class TxnReport(Report):
    """The transactional verdict: the same shape as the checker's ``Report``, with the transactional rules."""

    def summary_table(self) -> str:
        t = self.totals
        kinds = Counter(f["kind"] for f in self.faults if f["type"] == "fault")
        lines = [
            f"chaos check (transactions): {'OK' if self.ok else 'FAIL'}",
            f"transactions {t['transactions']}: committed {t['committed']}  aborted {t['aborted']}  fenced"
            f" {t['fenced']}  unknown {t['unknown']} (visible {t['unknown_visible']})  open {t['open']}",
            f"writes {t['writes']}  acked {t['acked']}  reads {t['reads']}  final reads {t['final_reads']}"
            f"  uncommitted final reads {t['uncommitted_reads']}",
            f"dependency graph: {t['graph_operations']} operations, {t['graph_edges']} edges ("
            + "  ".join(f"{kind} {t[f'graph_{kind}']}" for kind in EDGE_KINDS)
            + f"), {t['graph_cyclic_operations']} operations in cycles",
            "faults " + (", ".join(f"{kind} x{n}" for kind, n in sorted(kinds.items())) or "none"),
            "",
            f"{'check':<22} {'count':>7}  {'meaning':<46} first example",
        ]
        for name, meaning in VIOLATIONS.items():
            v = self.violations[name]
            shown = {k: x for k, x in v.examples[0].items() if k != "steps"} if v.examples else {}
            example = json.dumps(shown, separators=(",", ":")) if shown else ""
            if len(example) > 100:
                example = example[:97] + "..."
            lines.append(f"{name:<22} {v.count:>7}  {meaning:<46} {example}".rstrip())
        return "\n".join(lines)


def is_transactional(history: Iterable[Event]) -> bool:
    """Whether ``history`` comes from the transactional workload."""
    return any(isinstance(e, TxnWrite) for e in history)


def check(history: Iterable[Event], max_examples: int = 10, inputs: Inputs | None = None) -> TxnReport:
    """Judge ``history`` (events in the order they were recorded; each worker's own events in its order);
    ``inputs``: what its transactions read from elsewhere, for the dependency graph."""
    ix = index_history(history)
    if inputs is not None:
        ix.inputs = inputs
    found = {name: Violations(max_examples) for name in VIOLATIONS}
    for name, find in CHECKS.items():
        for example in find(ix):
            found[name].add(example)
    return TxnReport(_totals(ix), found, ix.faults)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m odradek.chaos.txn_checker", description="Check a transactional chaos history."
    )
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

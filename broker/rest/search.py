"""The console's record search, without I/O: a filter made into a test of one record, a fetched chunk of a
partition scanned with it within bounds, and the pages of several partitions (several brokers' answers) merged
into one, with the cursor each partition continues from.

A search is paged: each answer holds at most ``max_matches`` records, and its cursor (each partition not yet at the
end it started with, and the offset to go on from) is what the next page sends back. No match is skipped or given
twice: a partition's matches are a prefix of what it scanned, and a page cut to ``max_matches`` (in time order)
moves the cursor of each partition back to its first match left out.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from odradek.broker.rest import errors
from odradek.broker.rest.requests import SearchFilter
from odradek.broker.rest.resources import iso_time
from odradek.client.record.batch import Record, read_batches

Matcher = Callable[[Record], bool]
JsonObject = dict[str, Any]

# Why a page stopped, in the order one broker's reason wins over another's when merging.
STOPPED = ("timeout", "max_scanned", "max_matches", "end")
PARTITIONS_HEADER = "x-odradek-search-partitions"  # on a search forwarded to a leader: its partitions, "0,2"
BUDGET_HEADER = "x-odradek-search-budget"  # ... and how many records it may scan over them

_PATH_STEP = re.compile(r"\.([A-Za-z_][A-Za-z0-9_-]*)|\[(\d+)\]|\['((?:[^'\\]|\\.)*)'\]")
_MISSING = object()


def json_path(text: str) -> tuple[str | int, ...]:
    """``$.a.b[0]['c d']`` as ``("a", "b", 0, "c d")``: members by name, array elements by index (no wildcards,
    slices or filters); 400 for anything else."""
    if not text.startswith("$"):
        raise errors.bad_request(f"a JSON path starts with '$' (like $.order.id or $.items[0]), not {text!r}")
    steps: list[str | int] = []
    position = 1
    while position < len(text):
        found = _PATH_STEP.match(text, position)
        if found is None:
            raise errors.bad_request(
                f"JSON path {text!r}: cannot read it from character {position + 1} (use .name, [index] or ['name'])"
            )
        name, index, quoted = found.groups()
        if name is not None:
            steps.append(name)
        elif index is not None:
            steps.append(int(index))
        else:
            steps.append(re.sub(r"\\(.)", r"\1", quoted))
        position = found.end()
    return tuple(steps)


def at_path(document: object, path: Sequence[str | int]) -> object:
    """The value at ``path`` in a parsed JSON document, or ``_MISSING``."""
    here = document
    for step in path:
        if isinstance(step, int) and isinstance(here, list) and step < len(here):
            here = here[step]
            continue
        if not (isinstance(step, str) and isinstance(here, dict) and step in here):
            return _MISSING
        here = here[step]
    return here


def canonical(value: object) -> str:
    """JSON text two equal values share (keys sorted, no spaces)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def matcher(f: SearchFilter) -> Matcher | None:
    """A test of one record for ``f`` (every condition must hold), the cheap ones first; None when ``f`` has none."""
    checks: list[Matcher] = []
    if f.key is not None:
        key = f.key
        checks.append(lambda r: r.key == key)
    if f.value_contains is not None:
        needle = f.value_contains
        checks.append(lambda r: r.value is not None and needle in r.value)
    if f.header is not None:
        name, wanted = f.header, f.header_value
        if wanted is None:
            checks.append(lambda r: any(n == name for n, _ in r.headers))
        else:
            checks.append(lambda r: any(n == name and v == wanted for n, v in r.headers))
    if f.json_path is not None:
        checks.append(_json_check(f.json_path, f.json_value))
    if not checks:
        return None
    if len(checks) == 1:
        return checks[0]
    return lambda r: all(check(r) for check in checks)


def _json_check(path: tuple[str | int, ...], wanted: str | None) -> Matcher:
    def check(r: Record) -> bool:
        if not r.value:
            return False
        try:
            document = json.loads(r.value)
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
            return False
        found = at_path(document, path)
        return found is not _MISSING and (wanted is None or canonical(found) == wanted)

    return check


@dataclass(frozen=True, slots=True)
class Scanned:
    """A chunk scanned: the records that matched, how many were looked at, where the partition's scan goes on,
    and whether a bound (matches or records scanned) stopped it inside the chunk."""

    matches: list[Record]
    scanned: int
    next_offset: int
    bounded: bool


def scan(data: bytes, start: int, end: int, match: Matcher | None, max_matches: int, max_scanned: int) -> Scanned:
    """The records of ``data`` (whole batches, as a fetch answers them) at offsets from ``start`` up to ``end``
    (excluded), tested with ``match`` (None: all match), until ``max_matches`` matched or ``max_scanned`` were looked
    at. Transaction markers (control batches) are passed over, not counted."""
    matches: list[Record] = []
    scanned = 0
    position = start
    for batch in read_batches(data):
        header = batch.header
        if header.next_offset <= position:
            continue
        if header.base_offset >= end:
            break
        if not header.is_control:
            for r in batch.records():
                offset = r.offset
                if offset < position:
                    continue
                if offset >= end:
                    return Scanned(matches, scanned, end, False)
                scanned += 1
                position = offset + 1
                if match is None or match(r):
                    matches.append(r)
                    if len(matches) >= max_matches:
                        return Scanned(matches, scanned, position, True)
                if scanned >= max_scanned:
                    return Scanned(matches, scanned, position, True)
        position = max(position, min(header.next_offset, end))
    return Scanned(matches, scanned, position, False)


def shares(budget: int, partitions: int) -> list[int]:
    """``budget`` records to scan split over ``partitions`` partitions as evenly as whole numbers go (each at least
    one)."""
    each, extra = divmod(budget, partitions)
    return [max(1, each + (1 if i < extra else 0)) for i in range(partitions)]


def forwarded_scope(partitions: Sequence[int], budget: int) -> tuple[tuple[str, str], ...]:
    """The headers of a search forwarded to the leader of ``partitions``."""
    return (PARTITIONS_HEADER, ",".join(str(p) for p in partitions)), (BUDGET_HEADER, str(budget))


def scope_of(partitions: str | None, budget: str | None) -> tuple[tuple[int, ...], int] | None:
    """The partitions and budget a forwarding broker gave (None: the search came from a client)."""
    if partitions is None or budget is None:
        return None
    try:
        return tuple(int(p) for p in partitions.split(",")), max(1, int(budget))
    except ValueError:
        raise errors.bad_request(f"malformed {PARTITIONS_HEADER} or {BUDGET_HEADER} header") from None


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode()


def found_record(partition: int, r: Record, decoded: Mapping[str, object] | None = None) -> JsonObject:
    """A match as the console reads it: key, value and header values in base64 (exact bytes, rendered by the
    console as text, JSON or hex), and the key and value decoded through the schema registry when asked."""
    out: JsonObject = {
        "partition_id": partition,
        "offset": r.offset,
        "timestamp": iso_time(r.timestamp),
        "timestamp_ms": r.timestamp,
        "key": _b64(r.key),
        "value": _b64(r.value),
        "headers": [{"name": name, "value": _b64(value)} for name, value in r.headers],
    }
    if decoded is not None:
        out.update(decoded)
    return out


@dataclass(frozen=True, slots=True)
class PartitionScan:
    """Where one partition's scan stands: the next offset, the end it stops at (the high watermark when it began),
    the records it has looked at and the offset the page began at (so a client pages with a progress: offsets
    scanned of those between where it started and the end)."""

    partition: int
    next_offset: int
    end_offset: int
    scanned: int = 0
    start_offset: int | None = None  # where this page began (None: at next_offset), for the console's progress

    @property
    def done(self) -> bool:
        return self.next_offset >= self.end_offset

    def body(self) -> JsonObject:
        return {
            "partition_id": self.partition,
            "start_offset": self.next_offset if self.start_offset is None else self.start_offset,
            "next_offset": self.next_offset,
            "end_offset": self.end_offset,
            "scanned": self.scanned,
            "done": self.done,
        }


def page(
    topic: str,
    cluster_id: str,
    partitions: Iterable[PartitionScan],
    matches: Sequence[JsonObject],
    stopped: str,
    elapsed_ms: int,
    throttled_ms: int = 0,
) -> JsonObject:
    """One broker's answer for the partitions it scanned; ``throttled_ms``: how long it waited on the caller's fetch
    quota."""
    states = sorted(partitions, key=lambda p: p.partition)
    return {
        "kind": "OdradekRecordSearch",
        "cluster_id": cluster_id,
        "topic_name": topic,
        "stopped": stopped,
        "elapsed_ms": elapsed_ms,
        "throttled_ms": throttled_ms,
        "scanned": sum(p.scanned for p in states),
        "partitions": [p.body() for p in states],
        "cursor": _cursor(states),
        "data": list(matches),
    }


def _cursor(states: Sequence[PartitionScan]) -> list[JsonObject] | None:
    rest = [{"partition_id": p.partition, "offset": p.next_offset} for p in states if not p.done]
    return rest or None


def merge(pages: Sequence[JsonObject], max_matches: int) -> JsonObject:
    """Several brokers' answers as one page of at most ``max_matches`` records in time order (then partition and
    offset); a partition whose matches were left out goes on from its first one left out."""
    states = {p["partition_id"]: p for page_ in pages for p in page_["partitions"]}
    found = sorted(
        (r for page_ in pages for r in page_["data"]), key=lambda r: (r["timestamp_ms"], r["partition_id"], r["offset"])
    )
    kept, left = found[:max_matches], found[max_matches:]
    scans = {
        number: PartitionScan(number, s["next_offset"], s["end_offset"], s["scanned"], s.get("start_offset"))
        for number, s in states.items()
    }
    for r in left:
        p = scans[r["partition_id"]]
        if r["offset"] < p.next_offset:
            scans[p.partition] = replace(p, next_offset=r["offset"])
    reasons = [str(page_["stopped"]) for page_ in pages]
    stopped = "max_matches" if left else min(reasons, key=STOPPED.index, default="end")
    elapsed = max((int(page_["elapsed_ms"]) for page_ in pages), default=0)
    throttled = max((int(page_.get("throttled_ms", 0)) for page_ in pages), default=0)
    first = pages[0] if pages else {}
    topic, cluster = str(first.get("topic_name", "")), str(first.get("cluster_id", ""))
    return page(topic, cluster, scans.values(), kept, stopped, elapsed, throttled)

"""Sorted, non-overlapping offset ranges, each with a value: the compact form of a share-partition's in-flight
records and of its durable state batches.

A share-partition has thousands of records in flight, but they come and go in runs (a fetched batch is acquired
at once, an acknowledgement covers a range), so they are kept as one entry per run of records in the same state,
not one object per record. An operation on a range splits the entries at its ends, changes those inside, and
merges neighbours that became equal again, so the list stays as short as the states are varied.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable
from typing import Protocol, Self, TypeVar


class Span(Protocol):
    """An entry: the offsets ``first``..``last`` (inclusive) and a value."""

    @property
    def first(self) -> int: ...

    @property
    def last(self) -> int: ...

    def clipped(self, first: int, last: int) -> Self:
        """The same value over other bounds."""
        ...

    def same_value(self, other: Self) -> bool:
        """Whether two entries hold the same value (adjacent ones then merge)."""
        ...


S = TypeVar("S", bound=Span)


def _split(spans: list[S], first: int, last: int) -> tuple[int, int]:
    """Split the entries at ``first`` and after ``last``; the index range of those now inside [first, last]."""
    lo = _split_at(spans, first)
    hi = _split_at(spans, last + 1)
    return lo, hi


def _split_at(spans: list[S], offset: int) -> int:
    """Make an entry start at ``offset`` if one covers it; the index of the first entry at or after it."""
    i = bisect_left(spans, offset, key=lambda s: s.last)
    if i < len(spans) and spans[i].first < offset:
        whole = spans[i]
        spans[i : i + 1] = [whole.clipped(whole.first, offset - 1), whole.clipped(offset, whole.last)]
        i += 1
    return i


def update(spans: list[S], first: int, last: int, change: Callable[[S], S]) -> None:
    """Replace each entry inside [first, last] (split at its ends) by ``change`` of it, which keeps its bounds."""
    lo, hi = _split(spans, first, last)
    spans[lo:hi] = [change(s) for s in spans[lo:hi]]
    merge(spans, lo - 1, hi + 1)


def assign(spans: list[S], span: S) -> None:
    """Overwrite [span.first, span.last] with ``span``, whatever was there (entries or a gap)."""
    lo, hi = _split(spans, span.first, span.last)
    spans[lo:hi] = [span]
    merge(spans, lo - 1, lo + 2)


def drop_below(spans: list[S], offset: int) -> None:
    """Remove every offset below ``offset``."""
    del spans[: _split_at(spans, offset)]


def merge(spans: list[S], lo: int, hi: int) -> None:
    """Merge adjacent equal entries between indexes ``lo`` and ``hi`` (clamped)."""
    i = max(lo, 0)
    end = min(hi, len(spans))
    while i + 1 < end:
        left, right = spans[i], spans[i + 1]
        if left.last + 1 == right.first and left.same_value(right):
            spans[i : i + 2] = [left.clipped(left.first, right.last)]
            end -= 1
        else:
            i += 1


def inside(spans: list[S], first: int, last: int) -> list[S]:
    """The entries overlapping [first, last], clipped to it (the list is not changed)."""
    i = bisect_left(spans, first, key=lambda s: s.last)
    out = []
    while i < len(spans) and spans[i].first <= last:
        s = spans[i]
        out.append(s.clipped(max(s.first, first), min(s.last, last)))
        i += 1
    return out

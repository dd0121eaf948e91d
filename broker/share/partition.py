"""One share-partition (KIP-932): the records of a topic-partition a share group is consuming, which of them are
in flight, locked by which member, how often delivered, and what became of them.

Records from the **share-partition start offset** (SPSO) on are in flight until each is done; the **end offset**
(SPEO) is the last offset the group has fetched. Each in-flight record is in one state:

- AVAILABLE: it may be delivered (again);
- ACQUIRED: delivered to one member, which holds an *acquisition lock* on it until a deadline
  (``group.share.record.lock.duration.ms``, 30 s); every acquisition counts one delivery;
- ACKNOWLEDGED: the member accepted it; ARCHIVED: rejected, or given up on. Both are final.

How records move:

- ``acquire`` (ShareFetch): from the log batches the shell read (headers only) starting at ``next_fetch_offset``,
  the AVAILABLE records in flight and the new records after the SPEO are acquired for the member, answered as
  ShareFetch's AcquiredRecords ranges with their delivery counts. ``max_records`` is a soft limit, as in Kafka:
  acquisition stops at the end of the log batch in which it was reached. New records are taken only while the
  in-flight offsets stay within ``group.share.partition.max.record.locks`` of the SPSO (a hard cap).
- ``acknowledge`` (ShareAcknowledge, or acknowledgements in a ShareFetch): per range, ACCEPT (1) makes records
  ACKNOWLEDGED, RELEASE (2) AVAILABLE again, REJECT (3) and GAP (0, an offset without a record) ARCHIVED. Only the
  member holding a record's lock may acknowledge it: a record not acquired, acquired by another member, or whose
  lock expired is INVALID_RECORD_STATE, and then nothing of the request is applied (all or nothing per partition).
- A lock that expires (``tick``, or any later input: every input first fires the locks due at its time) makes its
  records AVAILABLE again, and a member that leaves the group (``release_member``) has its records released the
  same way, their delivery counts kept. A record released by any of these ways whose delivery count reached
  ``group.share.delivery.count.limit`` (5) is ARCHIVED instead: it is not delivered again.
- The SPSO moves past every ACKNOWLEDGED or ARCHIVED record at the start of the in-flight records.
- Records that are never delivered are ARCHIVED when fetched (delivery count 0): control records (transaction
  markers), offsets the log no longer holds between batches (compaction), and, with ``share.isolation.level`` =
  ``read_committed``, records of aborted transactions (from the fetch's aborted transactions, as a read_committed
  consumer filters them; the shell then reads only up to the last stable offset).
- When the log start offset passes the SPSO (retention, DeleteRecords), the records below it are gone: they leave
  the in-flight records, whatever their state, and acknowledging them later is a no-op, as in Kafka.
- A new share-partition starts at the log end offset (``share.auto.offset.reset`` = ``latest``, the default) or at
  the log start offset (``earliest``), and stores that start with the result of its first input, so that a next
  leader starts at the same place; one with stored state resumes from it (``state_records``).

Sans-I/O: each input returns a ``PartitionResult``: the acquired records, an error, the ``StateWrite`` to persist
(ACQUIRED is never persisted; acquiring writes only what it archived), and events for the shell's log. The shell
arms a timer for ``next_deadline_ms``. In-flight records are kept as runs of records in one state
(``spans``), so thousands of them cost a few entries.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from enum import IntEnum
from functools import partial
from itertools import pairwise
from typing import Protocol

from odradek.broker.share import spans
from odradek.broker.share.state_records import RecordState, ShareState, StateBatch, StateWrite, combine
from odradek.client.errors import ErrorCode

EARLIEST = "earliest"
LATEST = "latest"
READ_UNCOMMITTED = "read_uncommitted"
READ_COMMITTED = "read_committed"
DONE = frozenset({RecordState.ACKNOWLEDGED, RecordState.ARCHIVED})


class AcknowledgeType(IntEnum):
    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3


@dataclass(frozen=True, slots=True)
class SharePartitionConfig:
    """The settings a share-partition reads (Kafka's names and defaults)."""

    record_lock_duration_ms: int = 30_000  # group.share.record.lock.duration.ms (group: share.record.lock.duration.ms)
    delivery_count_limit: int = 5  # group.share.delivery.count.limit (group: share.delivery.count.limit)
    max_record_locks: int = 2_000  # group.share.partition.max.record.locks
    auto_offset_reset: str = LATEST  # share.auto.offset.reset (a group config)
    isolation_level: str = READ_UNCOMMITTED  # share.isolation.level (a group config)

    def __post_init__(self) -> None:
        if self.record_lock_duration_ms < 1 or self.delivery_count_limit < 1 or self.max_record_locks < 1:
            raise ValueError("the record lock duration, delivery count limit and max record locks must be >= 1")
        if self.auto_offset_reset not in (EARLIEST, LATEST):
            raise ValueError(f"share.auto.offset.reset must be {EARLIEST} or {LATEST}")
        if self.isolation_level not in (READ_UNCOMMITTED, READ_COMMITTED):
            raise ValueError(f"share.isolation.level must be {READ_UNCOMMITTED} or {READ_COMMITTED}")


class FetchedBatch(Protocol):
    """A log batch read for a share fetch, its header only (the record codec's ``BatchHeader`` is one)."""

    @property
    def base_offset(self) -> int: ...

    @property
    def last_offset(self) -> int: ...

    @property
    def producer_id(self) -> int: ...

    @property
    def is_transactional(self) -> bool: ...

    @property
    def is_control(self) -> bool: ...


class AbortedTransaction(Protocol):
    """An aborted transaction overlapping the fetched range, as the log lists it for a fetch (``AbortedTxn``)."""

    @property
    def producer_id(self) -> int: ...

    @property
    def first_offset(self) -> int: ...


@dataclass(frozen=True, slots=True)
class AcquiredRecords:
    """ShareFetch's AcquiredRecords: a range delivered to the member, and how often it has been delivered."""

    first_offset: int
    last_offset: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class AcknowledgementBatch:
    """A range acknowledged with one type, or one type per offset (Kafka's AcknowledgementBatches)."""

    first_offset: int
    last_offset: int
    acknowledge_types: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class InFlight:
    """A run of in-flight records in one state; the member and deadline of their lock while ACQUIRED."""

    first: int
    last: int
    state: RecordState
    delivery_count: int
    member_id: str | None = None
    deadline_ms: int | None = None

    def clipped(self, first: int, last: int) -> InFlight:
        return replace(self, first=first, last=last)

    def same_value(self, other: InFlight) -> bool:
        return (self.state, self.delivery_count, self.member_id, self.deadline_ms) == (
            other.state,
            other.delivery_count,
            other.member_id,
            other.deadline_ms,
        )

    def durable(self) -> StateBatch:
        return StateBatch(self.first, self.last, self.state, self.delivery_count)


@dataclass(frozen=True, slots=True)
class PartitionResult:
    """What an input did: the records acquired (ShareFetch), the acknowledgement's error, the state to persist
    before answering (None: nothing changed that is stored), and what happened, for the shell's log."""

    acquired: tuple[AcquiredRecords, ...] = ()
    error: ErrorCode.ValueType = ErrorCode.NONE
    error_message: str | None = None
    write: StateWrite | None = None
    events: tuple[str, ...] = ()


class SharePartition:
    def __init__(self, config: SharePartitionConfig, start_offset: int, in_flight: Iterable[InFlight] = ()) -> None:
        """Records from ``start_offset`` on, ``in_flight`` covering every offset from it to the end offset."""
        self.config = config
        self.start = start_offset  # the SPSO
        self._runs: list[InFlight] = list(in_flight)
        self.end = self._runs[-1].last + 1 if self._runs else start_offset  # the next offset never fetched
        if self._runs and self._runs[0].first != start_offset:
            raise ValueError("the in-flight records must start at the start offset")
        spans.merge(self._runs, 0, len(self._runs))
        self._advance()
        self._start_unstored = False  # a start offset from share.auto.offset.reset, stored with the first result

    @classmethod
    def restore(
        cls, config: SharePartitionConfig, state: ShareState | None, log_start_offset: int, log_end_offset: int
    ) -> SharePartition:
        """The share-partition a new leader serves: from its stored state, else (nothing stored, or no start offset
        set) at the log end or start as ``share.auto.offset.reset`` says. Offsets between the stored batches were
        acquired and never stored: AVAILABLE with no delivery counted; a stored ACQUIRED is impossible (the codec
        refuses it). Offsets the log no longer has are skipped."""
        if state is None or state.start_offset < 0:
            fresh = cls(config, log_start_offset if config.auto_offset_reset == EARLIEST else log_end_offset)
            fresh._start_unstored = True
            return fresh
        start = max(state.start_offset, log_start_offset)
        runs: list[InFlight] = []
        cursor = start
        for batch in state.batches:
            if batch.last < start:
                continue
            first = max(batch.first, start)
            if first > cursor:
                runs.append(InFlight(cursor, first - 1, RecordState.AVAILABLE, 0))
            runs.append(InFlight(first, batch.last, batch.state, batch.delivery_count))
            cursor = batch.last + 1
        return cls(config, start, runs)

    # -- views ---------------------------------------------------------------------------------------------------

    @property
    def start_offset(self) -> int:
        """The SPSO."""
        return self.start

    @property
    def end_offset(self) -> int:
        """The SPEO: the last in-flight offset (the SPSO while nothing is in flight, as Kafka reports it)."""
        return self.end - 1 if self._runs else self.start

    @property
    def in_flight(self) -> tuple[InFlight, ...]:
        return tuple(self._runs)

    def next_fetch_offset(self) -> int:
        """Where the shell reads the log from for the next fetch: the first AVAILABLE record in flight, else the
        first offset never fetched."""
        return next((r.first for r in self._runs if r.state is RecordState.AVAILABLE), self.end)

    def can_acquire(self) -> bool:
        """Whether a fetch may acquire anything: some in-flight record is AVAILABLE, or the in-flight offsets are
        below the cap."""
        return self.next_fetch_offset() < self.end or self.end - self.start < self.config.max_record_locks

    def next_deadline_ms(self) -> int | None:
        """The earliest acquisition lock deadline."""
        return min((r.deadline_ms for r in self._runs if r.deadline_ms is not None), default=None)

    # -- inputs --------------------------------------------------------------------------------------------------

    def acquire(
        self,
        member_id: str,
        batches: Sequence[FetchedBatch],
        max_records: int,
        now_ms: int,
        aborted: Iterable[AbortedTransaction] = (),
    ) -> PartitionResult:
        """ShareFetch: acquire what may be delivered of ``batches`` (read from ``next_fetch_offset``, in offset
        order) for ``member_id``, up to ``max_records`` (a soft limit). ``aborted``: the fetch's aborted
        transactions, used with read_committed."""
        out = _Changes(self)
        self._expire(out, now_ms)
        if batches and max_records > 0:
            self._acquire(out, member_id, batches, max_records, now_ms, aborted)
        self._advance()
        return out.result()

    def acknowledge(self, member_id: str, batches: Sequence[AcknowledgementBatch], now_ms: int) -> PartitionResult:
        """ShareAcknowledge: all of it, or nothing (INVALID_REQUEST for a malformed batch, INVALID_RECORD_STATE for
        a record the member does not hold). Records below the SPSO are done already: their acknowledgement is a
        no-op."""
        out = _Changes(self)
        self._expire(out, now_ms)
        try:
            plan = self._plan_acknowledgements(member_id, batches)
        except _Refused as refused:
            self._advance()  # past what the expired locks archived
            return out.result(refused.error, str(refused))
        for first, last, kind in plan:
            self._set(out, first, last, partial(self._acknowledged, kind=kind))
        self._advance()
        return out.result()

    def release_member(self, member_id: str, now_ms: int) -> PartitionResult:
        """A member left the group (or its share session closed): every record it holds is released."""
        out = _Changes(self)
        self._expire(out, now_ms)
        held = [r for r in self._runs if r.state is RecordState.ACQUIRED and r.member_id == member_id]
        for r in held:
            self._set(out, r.first, r.last, self._released)
        if held:
            out.events.append(f"member {member_id} left: {_ranges(held)} released")
        self._advance()
        return out.result()

    def tick(self, now_ms: int) -> PartitionResult:
        """Fire the acquisition locks due at ``now_ms``."""
        out = _Changes(self)
        self._expire(out, now_ms)
        self._advance()
        return out.result()

    def log_start_moved(self, log_start_offset: int, now_ms: int) -> PartitionResult:
        """The log start offset moved (retention, DeleteRecords): the records below it leave the in-flight records
        and the SPSO moves up to it."""
        out = _Changes(self)
        self._expire(out, now_ms)
        if log_start_offset > self.start:
            gone = spans.inside(self._runs, self.start, log_start_offset - 1)
            spans.drop_below(self._runs, log_start_offset)
            self.start = log_start_offset
            self.end = max(self.end, log_start_offset)
            if gone:
                out.events.append(f"log start moved to {log_start_offset}: {_ranges(gone)} dropped")
        self._advance()
        return out.result()

    # -- acquisition ---------------------------------------------------------------------------------------------

    def _acquire(
        self,
        out: _Changes,
        member_id: str,
        batches: Sequence[FetchedBatch],
        max_records: int,
        now_ms: int,
        aborted: Iterable[AbortedTransaction],
    ) -> None:
        lo, hi = max(batches[0].base_offset, self.start), batches[-1].last_offset
        if lo > hi:
            return
        if not self._runs and lo > self.end:  # nothing in flight: the offsets before the fetched ones are gone
            self.start = self.end = lo
        skipped = self._undeliverable(batches, aborted)
        window_last = min(hi, self.end - 1)  # the fetched offsets already in flight
        new_first = max(lo, self.end)
        new_last = min(hi, self.start + self.config.max_record_locks - 1)
        wanted = [
            piece
            for r in spans.inside(self._runs, lo, window_last)
            if r.state is RecordState.AVAILABLE
            for piece in _without(r.first, r.last, skipped)
        ]
        if new_first <= new_last:
            wanted += _without(new_first, new_last, skipped)
        cutoff = _soft_limit(wanted, max_records, batches)
        deadline = now_ms + self.config.record_lock_duration_ms
        acquired: list[InFlight] = []

        def take(r: InFlight) -> InFlight:
            if _within(r.first, skipped):
                return replace(r, state=RecordState.ARCHIVED)
            taken = InFlight(r.first, r.last, RecordState.ACQUIRED, r.delivery_count + 1, member_id, deadline)
            acquired.append(taken)
            return taken

        for r in spans.inside(self._runs, lo, min(window_last, cutoff)):
            if r.state is RecordState.AVAILABLE:
                for first, last in _split_by(r.first, r.last, skipped):
                    self._set(out, first, last, take)
        last = min(new_last, cutoff)
        if new_first <= last:
            if new_first > self.end:  # offsets between the end and the fetched batches: no record there
                self._append(out, InFlight(self.end, new_first - 1, RecordState.ARCHIVED, 0))
            for first, last_piece in _split_by(new_first, last, skipped):
                self._append(out, take(InFlight(first, last_piece, RecordState.AVAILABLE, 0)))
        out.acquired.extend(acquired)

    def _undeliverable(
        self, batches: Sequence[FetchedBatch], aborted: Iterable[AbortedTransaction]
    ) -> list[tuple[int, int]]:
        """The fetched ranges never delivered: control batches, and with read_committed the batches of aborted
        transactions (a transactional batch of a producer whose aborted transaction started at or before it, until
        that producer's marker; the rule of a read_committed consumer)."""
        pending = sorted(aborted, key=lambda a: a.first_offset) if self.config.isolation_level == READ_COMMITTED else []
        aborting: set[int] = set()
        out: list[tuple[int, int]] = []
        i = 0
        for b in batches:
            while i < len(pending) and pending[i].first_offset <= b.last_offset:
                aborting.add(pending[i].producer_id)
                i += 1
            if b.is_control:
                aborting.discard(b.producer_id)
            elif not (b.is_transactional and b.producer_id in aborting):
                continue
            if out and out[-1][1] + 1 >= b.base_offset:
                out[-1] = (out[-1][0], b.last_offset)
            else:
                out.append((b.base_offset, b.last_offset))
        return out

    # -- acknowledgements ----------------------------------------------------------------------------------------

    def _plan_acknowledgements(
        self, member_id: str, batches: Sequence[AcknowledgementBatch]
    ) -> list[tuple[int, int, AcknowledgeType]]:
        """Check every batch before changing anything: each range with one type, from the SPSO on."""
        plan: list[tuple[int, int, AcknowledgeType]] = []
        previous = -1
        for b in batches:
            first, last, types = b.first_offset, b.last_offset, b.acknowledge_types
            if first > last or first <= previous:
                raise _Refused(ErrorCode.INVALID_REQUEST, "Acknowledgement batches must be in order, not overlap.")
            if len(types) not in (1, last - first + 1):
                raise _Refused(ErrorCode.INVALID_REQUEST, "Acknowledge types must be one, or one per offset.")
            if any(t not in AcknowledgeType._value2member_map_ for t in types):
                raise _Refused(ErrorCode.INVALID_REQUEST, f"Invalid acknowledge type: {list(types)}.")
            if last >= self.end:
                raise _Refused(ErrorCode.INVALID_REQUEST, "The last offset in request is past acquired records.")
            previous = last
            if last < self.start:
                continue
            for r in spans.inside(self._runs, max(first, self.start), last):
                if r.state is not RecordState.ACQUIRED:
                    raise _Refused(ErrorCode.INVALID_RECORD_STATE, f"Offsets {r.first}-{r.last} are not acquired.")
                if r.member_id != member_id:
                    raise _Refused(
                        ErrorCode.INVALID_RECORD_STATE, f"Member is not the owner of offsets {r.first}-{r.last}."
                    )
            for offset in range(max(first, self.start), last + 1):
                kind = AcknowledgeType(types[0] if len(types) == 1 else types[offset - first])
                if plan and plan[-1][1] == offset - 1 and plan[-1][2] is kind:
                    plan[-1] = (plan[-1][0], offset, kind)
                else:
                    plan.append((offset, offset, kind))
                if len(types) == 1:  # one type for the whole range
                    plan[-1] = (plan[-1][0], last, kind)
                    break
        return plan

    def _acknowledged(self, r: InFlight, *, kind: AcknowledgeType) -> InFlight:
        if kind is AcknowledgeType.ACCEPT:
            return InFlight(r.first, r.last, RecordState.ACKNOWLEDGED, r.delivery_count)
        if kind is AcknowledgeType.RELEASE:
            return self._released(r)
        return InFlight(r.first, r.last, RecordState.ARCHIVED, r.delivery_count)

    def _released(self, r: InFlight) -> InFlight:
        """A delivery attempt ended without an acknowledgement: AVAILABLE again, or ARCHIVED at the limit."""
        state = RecordState.ARCHIVED if r.delivery_count >= self.config.delivery_count_limit else RecordState.AVAILABLE
        return InFlight(r.first, r.last, state, r.delivery_count)

    # -- state changes -------------------------------------------------------------------------------------------

    def _expire(self, out: _Changes, now_ms: int) -> None:
        due = [r for r in self._runs if r.deadline_ms is not None and r.deadline_ms <= now_ms]
        for r in due:
            self._set(out, r.first, r.last, self._released)
            after = self._released(r)
            out.events.append(
                f"lock on {_bounds(r.first, r.last)} of {r.member_id} expired: {after.state.name}"
                f" (delivery {r.delivery_count})"
            )

    def _set(self, out: _Changes, first: int, last: int, change: Callable[[InFlight], InFlight]) -> None:
        """Change the records first..last, noting what must be stored."""

        def noted(r: InFlight) -> InFlight:
            after = change(r)
            if after.state is not RecordState.ACQUIRED:
                out.changes.append(after.durable())
            return after

        spans.update(self._runs, first, last, noted)

    def _append(self, out: _Changes, r: InFlight) -> None:
        self._runs.append(r)
        spans.merge(self._runs, len(self._runs) - 2, len(self._runs))
        self.end = r.last + 1
        if r.state is not RecordState.ACQUIRED:
            out.changes.append(r.durable())

    def _advance(self) -> None:
        """Move the SPSO past the finished records at the start."""
        done = 0
        while done < len(self._runs) and self._runs[done].state in DONE:
            done += 1
        if done:
            self.start = self._runs[done - 1].last + 1
            del self._runs[:done]


class _Refused(Exception):
    def __init__(self, error: ErrorCode.ValueType, message: str) -> None:
        super().__init__(message)
        self.error = error


@dataclass(slots=True)
class _Changes:
    """What one input changed: the stored states (later ones win), the records acquired, events."""

    partition: SharePartition
    start_before: int = field(init=False)
    changes: list[StateBatch] = field(default_factory=list)
    acquired: list[InFlight] = field(default_factory=list)
    events: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.start_before = self.partition.start

    def result(self, error: ErrorCode.ValueType = ErrorCode.NONE, message: str | None = None) -> PartitionResult:
        start = self.partition.start
        write = None
        if self.changes or start != self.start_before or self.partition._start_unstored:
            write = StateWrite(start, combine((), self.changes, start))
            self.partition._start_unstored = False
        return PartitionResult(_acquired_records(self.acquired), error, message, write, tuple(self.events))


def _acquired_records(runs: list[InFlight]) -> tuple[AcquiredRecords, ...]:
    """The acquired runs as AcquiredRecords, contiguous runs of one delivery count joined."""
    out: list[AcquiredRecords] = []
    for r in sorted(runs, key=lambda r: r.first):
        if out and out[-1].last_offset + 1 == r.first and out[-1].delivery_count == r.delivery_count:
            out[-1] = AcquiredRecords(out[-1].first_offset, r.last, r.delivery_count)
        else:
            out.append(AcquiredRecords(r.first, r.last, r.delivery_count))
    return tuple(out)


def _without(first: int, last: int, ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The parts of first..last outside the sorted, disjoint ``ranges``."""
    return [(a, b) for a, b in _split_by(first, last, ranges) if not _within(a, ranges)]


def _split_by(first: int, last: int, ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """first..last cut at the bounds of ``ranges``, so each piece is wholly inside one of them or outside all."""
    cuts = sorted({first, last + 1} | {x for a, b in ranges for x in (a, b + 1) if first < x <= last})
    return [(a, b - 1) for a, b in pairwise(cuts)]


def _within(offset: int, ranges: list[tuple[int, int]]) -> bool:
    i = bisect_right(ranges, offset, key=lambda r: r[0]) - 1
    return i >= 0 and ranges[i][1] >= offset


def _soft_limit(wanted: list[tuple[int, int]], max_records: int, batches: Sequence[FetchedBatch]) -> int:
    """The last offset a fetch may take: the end of the log batch holding the ``max_records``-th wanted record
    (all of them if there are fewer)."""
    count = 0
    for first, last in wanted:
        if count + last - first + 1 >= max_records:
            offset = first + max_records - count - 1
            i = bisect_right(batches, offset, key=lambda b: b.base_offset) - 1
            return batches[i].last_offset if i >= 0 and batches[i].last_offset >= offset else offset
        count += last - first + 1
    return batches[-1].last_offset


def _ranges(runs: Iterable[InFlight]) -> str:
    return ",".join(_bounds(r.first, r.last) for r in runs)


def _bounds(first: int, last: int) -> str:
    return str(first) if first == last else f"{first}-{last}"

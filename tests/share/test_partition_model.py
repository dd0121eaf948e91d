"""Seeded random schedules of one share-partition (fetches, acknowledgements, lock expiries, members leaving, the
log start moving) checked step by step against a naive model that keeps one entry per record.

The model restates the rules of ``broker/share/partition.py`` record by record, without runs; after every step the
share-partition's runs, SPSO, end, acquired records and errors must be the model's. Every write it asks for goes
through a ``ShareStateStore`` (encoded and decoded), and a leader restored from the store must see the model's
durable view: acquired records as they were last stored. ``SHARE_PARTITION_SCHEDULES=n`` runs n more seeds.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass

import pytest

from odradek.broker.share.partition import (
    AcknowledgementBatch,
    AcknowledgeType,
    SharePartition,
    SharePartitionConfig,
)
from odradek.broker.share.state_records import (
    RecordState,
    SharePartitionKey,
    ShareStateStore,
    StateWrite,
    decode_record,
    encode_record,
)
from odradek.client.errors import ErrorCode

SEEDS = 60 + int(os.environ.get("SHARE_PARTITION_SCHEDULES", "0"))
STEPS = 250
MEMBERS = ("a", "b", "c")
KEY = SharePartitionKey("g", bytes(16), 0)
AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVED = (
    RecordState.AVAILABLE,
    RecordState.ACQUIRED,
    RecordState.ACKNOWLEDGED,
    RecordState.ARCHIVED,
)


@dataclass(frozen=True)
class Batch:
    base_offset: int
    last_offset: int
    producer_id: int = -1
    is_transactional: bool = False
    is_control: bool = False


@dataclass
class Rec:
    state: RecordState
    count: int
    member: str | None = None
    deadline: int | None = None


class Model:
    """One entry per in-flight record; ``durable`` is what the writes stored of each."""

    def __init__(self, config: SharePartitionConfig, start: int) -> None:
        self.config = config
        self.start = self.end = start
        self.recs: dict[int, Rec] = {}
        self.durable: dict[int, tuple[RecordState, int]] = {}

    def set(self, offset: int, rec: Rec) -> None:
        self.recs[offset] = rec
        if rec.state is not ACQUIRED:
            self.durable[offset] = (rec.state, rec.count)

    def release(self, offset: int) -> None:
        count = self.recs[offset].count
        self.set(offset, Rec(ARCHIVED if count >= self.config.delivery_count_limit else AVAILABLE, count))

    def expire(self, now: int) -> None:
        for o in sorted(self.recs):
            r = self.recs[o]
            if r.state is ACQUIRED and r.deadline is not None and r.deadline <= now:
                self.release(o)

    def advance(self) -> None:
        while self.start < self.end and self.recs[self.start].state in (ACKNOWLEDGED, ARCHIVED):
            del self.recs[self.start]
            self.start += 1
        self.durable = {o: d for o, d in self.durable.items() if o >= self.start}

    def acquire(self, member: str, batches: list[Batch], max_records: int, now: int) -> list[tuple[int, int]]:
        self.expire(now)
        taken: list[tuple[int, int]] = []
        if batches and max_records > 0:
            taken = self._acquire(member, batches, max_records, now)
        self.advance()
        return taken

    def _acquire(self, member: str, batches: list[Batch], max_records: int, now: int) -> list[tuple[int, int]]:
        lo, hi = max(batches[0].base_offset, self.start), batches[-1].last_offset
        if lo > hi:
            return []
        if self.start == self.end and lo > self.end:
            self.start = self.end = lo
        control = {o for b in batches if b.is_control for o in range(b.base_offset, b.last_offset + 1)}
        cap_last = self.start + self.config.max_record_locks - 1
        wanted = [
            o
            for o in range(lo, hi + 1)
            if o not in control and ((o < self.end and self.recs[o].state is AVAILABLE) or (self.end <= o <= cap_last))
        ]
        cutoff = hi
        if len(wanted) >= max_records:
            o = wanted[max_records - 1]
            cutoff = next((b.last_offset for b in batches if b.base_offset <= o <= b.last_offset), o)
        deadline = now + self.config.record_lock_duration_ms
        taken = []
        end = self.end
        for o in range(lo, min(hi, cutoff) + 1):
            if o < end:
                r = self.recs[o]
                if r.state is not AVAILABLE:
                    continue
                if o in control:
                    self.set(o, Rec(ARCHIVED, r.count))
                else:
                    self.set(o, Rec(ACQUIRED, r.count + 1, member, deadline))
                    taken.append((o, r.count + 1))
            elif o <= cap_last:
                for gap in range(self.end, o):
                    self.set(gap, Rec(ARCHIVED, 0))
                if o in control:
                    self.set(o, Rec(ARCHIVED, 0))
                else:
                    self.set(o, Rec(ACQUIRED, 1, member, deadline))
                    taken.append((o, 1))
                self.end = o + 1
        return taken

    def acknowledge(self, member: str, batches: list[AcknowledgementBatch], now: int) -> int:
        self.expire(now)
        error = self._check(member, batches)
        if error == ErrorCode.NONE:
            self._apply(batches)
        self.advance()
        return error

    def _check(self, member: str, batches: list[AcknowledgementBatch]) -> int:
        previous = -1
        for b in batches:
            first, last, types = b.first_offset, b.last_offset, b.acknowledge_types
            if first > last or first <= previous or len(types) not in (1, last - first + 1):
                return ErrorCode.INVALID_REQUEST
            if any(t not in (0, 1, 2, 3) for t in types) or last >= self.end:
                return ErrorCode.INVALID_REQUEST
            previous = last
            for o in range(max(first, self.start), last + 1):
                r = self.recs[o]
                if r.state is not ACQUIRED or r.member != member:
                    return ErrorCode.INVALID_RECORD_STATE
        return ErrorCode.NONE

    def _apply(self, batches: list[AcknowledgementBatch]) -> None:
        for b in batches:
            for o in range(max(b.first_offset, self.start), b.last_offset + 1):
                kind = b.acknowledge_types[0 if len(b.acknowledge_types) == 1 else o - b.first_offset]
                count = self.recs[o].count
                if kind == AcknowledgeType.ACCEPT:
                    self.set(o, Rec(ACKNOWLEDGED, count))
                elif kind == AcknowledgeType.RELEASE:
                    self.release(o)
                else:
                    self.set(o, Rec(ARCHIVED, count))

    def release_member(self, member: str, now: int) -> None:
        self.expire(now)
        for o, r in sorted(self.recs.items()):
            if r.state is ACQUIRED and r.member == member:
                self.release(o)
        self.advance()

    def tick(self, now: int) -> None:
        self.expire(now)
        self.advance()

    def log_start_moved(self, log_start: int, now: int) -> None:
        self.expire(now)
        if log_start > self.start:
            self.recs = {o: r for o, r in self.recs.items() if o >= log_start}
            self.start = log_start
            self.end = max(self.end, log_start)
        self.advance()


def per_record(p: SharePartition) -> dict[int, Rec]:
    return {
        o: Rec(r.state, r.delivery_count, r.member_id, r.deadline_ms)
        for r in p.in_flight
        for o in range(r.first, r.last + 1)
    }


class Schedule:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.config = SharePartitionConfig(
            record_lock_duration_ms=self.rng.choice((50, 200)),
            delivery_count_limit=self.rng.randint(1, 4),
            max_record_locks=self.rng.choice((8, 30, 2000)),
        )
        self.partition = SharePartition.restore(self.config, None, 0, 0)
        self.model = Model(self.config, 0)
        self.store = ShareStateStore(snapshot_every=3)
        self.log: list[Batch] = []
        self.log_start = self.log_end = 0
        self.now = 0

    def persist(self, write: StateWrite | None) -> None:
        if write is not None:
            answer = self.store.write(KEY, 0, 0, write)
            assert answer.error == ErrorCode.NONE and answer.record is not None
            assert decode_record(*encode_record(answer.record)) == answer.record

    def step(self) -> str:
        rng, p, m = self.rng, self.partition, self.model
        self.now += rng.choice((0, 0, 10, 40, 120))
        roll = rng.random()
        if roll < 0.2:
            base = self.log_end + (rng.randint(1, 3) if rng.random() < 0.1 else 0)
            size = 1 if rng.random() < 0.15 else rng.randint(1, 4)
            self.log.append(Batch(base, base + size - 1, 5, is_transactional=size == 1, is_control=size == 1))
            self.log_end = base + size
            return "produce"
        holding = any(r.state is ACQUIRED for r in p.in_flight)
        if roll < 0.45 or (roll < 0.75 and not holding and rng.random() < 0.8):
            member, max_records = rng.choice(MEMBERS), rng.randint(1, 8)
            start = p.next_fetch_offset()
            batches = [b for b in self.log if b.last_offset >= start] if p.can_acquire() else []
            result = p.acquire(member, batches, max_records, self.now)
            taken = m.acquire(member, batches, max_records, self.now)
            got = [(o, a.delivery_count) for a in result.acquired for o in range(a.first_offset, a.last_offset + 1)]
            assert got == taken
            self.persist(result.write)
            return "fetch"
        if roll < 0.75:
            acks, member = self.acknowledgements()
            result = p.acknowledge(member, acks, self.now)
            assert result.error == m.acknowledge(member, acks, self.now), acks
            self.persist(result.write)
            return "ack"
        if roll < 0.82:
            member = rng.choice(MEMBERS)
            result = p.release_member(member, self.now)
            m.release_member(member, self.now)
            self.persist(result.write)
            return "release"
        if roll < 0.95:
            result = p.tick(self.now)
            m.tick(self.now)
            self.persist(result.write)
            return "tick"
        self.log_start = min(self.log_end, self.log_start + rng.randint(1, 6))
        self.log = [b for b in self.log if b.last_offset >= self.log_start]
        result = p.log_start_moved(self.log_start, self.now)
        m.log_start_moved(self.log_start, self.now)
        self.persist(result.write)
        return "delete-records"

    def acknowledgements(self) -> tuple[list[AcknowledgementBatch], str]:
        """Mostly parts of a run a member holds, sometimes another member's or offsets around the in-flight ones,
        now and then malformed (out of order, a wrong number of types)."""
        rng, m = self.rng, self.model
        runs = [r for r in self.partition.in_flight if r.state is ACQUIRED]
        if runs and rng.random() < 0.85:
            run = rng.choice(runs)
            lo, hi = run.first, run.last
            member = run.member_id if rng.random() < 0.9 else rng.choice(MEMBERS)
        else:
            lo = rng.randint(max(0, m.start - 3), m.end + 2)
            hi, member = lo + rng.randint(0, 4), rng.choice(MEMBERS)
        assert member is not None
        batches: list[AcknowledgementBatch] = []
        first = lo
        while first <= hi and len(batches) < 3:
            last = rng.randint(first, hi)
            if rng.random() < 0.5:
                types: tuple[int, ...] = (rng.choice((0, 1, 1, 2, 3)),)
            else:
                types = tuple(rng.choice((0, 1, 1, 2, 3)) for _ in range(first, last + 1))
            if rng.random() < 0.03:
                types = (*types, 1)
            batches.append(AcknowledgementBatch(first, last, types))
            first = last + 1 + (rng.random() < 0.3)
        if rng.random() < 0.03:
            batches.reverse()
        return batches, member

    def check(self, what: str) -> None:
        p, m = self.partition, self.model
        assert (p.start_offset, p.end) == (m.start, m.end), what
        assert per_record(p) == m.recs, what
        assert set(m.recs) == set(range(m.start, m.end)), what
        assert all(not a.same_value(b) or a.last + 1 < b.first for a, b in zip(p.in_flight, p.in_flight[1:])), what
        deadlines = [r.deadline for r in m.recs.values() if r.deadline is not None]
        assert p.next_deadline_ms() == min(deadlines, default=None), what

    def check_restore(self) -> None:
        """A new leader restored from the store: the model's records as last stored, acquired ones AVAILABLE."""
        m = self.model
        restored = SharePartition.restore(self.config, self.store.state(KEY), self.log_start, self.log_end)
        assert restored.start_offset == m.start
        records = per_record(restored)
        for o in range(m.start, m.end):
            state, count = m.durable.get(o, (AVAILABLE, 0))
            if o in records:
                assert (records[o].state, records[o].count) == (state, count), o
            else:
                assert o not in m.durable and o >= restored.end, o


@pytest.mark.parametrize("seed", range(SEEDS))
def test_random_schedules_match_the_per_record_model(seed: int) -> None:
    schedule = Schedule(seed)
    for i in range(STEPS):
        what = schedule.step()
        schedule.check(f"seed {seed} step {i} ({what})")
        if i % 10 == 9:
            schedule.check_restore()

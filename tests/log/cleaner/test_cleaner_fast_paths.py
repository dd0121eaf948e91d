"""The cleaner's fast paths against the plain ones they replace: the key scan against ``RecordBatch.records()``
(same offsets, keys, null values, same refusals of damaged records) and the offset map against a dict."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_cleaner_pass import append, latest, rows

from odradek.broker.log.cleaner.cleaner import Cleaner
from odradek.broker.log.cleaner.keyscan import PAUSE_EVERY, decode_span, scan_batch
from odradek.broker.log.cleaner.offset_map import SLOT_SIZE, OffsetMap
from odradek.broker.log.cleaner.policy import CompactionConfig
from odradek.broker.log.config import LogConfig
from odradek.broker.log.log import Log
from odradek.client.errors import CorruptRecordError
from odradek.client.record.batch import RecordBatch
from odradek.client.record.builder import encode_batch
from odradek.client.record.compression import compress
from odradek.client.record.header import COMPRESSION_CODES, HEADER_SIZE, parse_header, validate_batch

TS = 1_700_000_000_000
keys_st = st.none() | st.binary(max_size=20) | st.sampled_from([b"", b"k" * 200, b"K" * 20_000])
values_st = st.none() | st.binary(max_size=40) | st.sampled_from([b"", b"v" * 9000])
headers_st = st.lists(st.tuples(st.text(max_size=6), st.none() | st.binary(max_size=8)), max_size=3).map(tuple)
records_st = st.lists(st.tuples(keys_st, values_st, headers_st, st.integers(-(10**6), 10**6)), min_size=1, max_size=20)


def batch_of(records: list[tuple], codec: str, base_offset: int, log_append_time: bool) -> bytes:
    keys, values, headers, deltas = (list(column) for column in zip(*records, strict=True))
    return encode_batch(
        values,
        keys,
        [TS + d for d in deltas],
        headers,
        compression=codec,
        base_offset=base_offset,
        log_append_time=log_append_time,
    )


@settings(max_examples=150, deadline=None)
@given(
    records_st,
    st.sampled_from(list(COMPRESSION_CODES)),
    st.integers(0, 2**40),
    st.booleans(),
    st.integers(0, 64),
    st.data(),
)
def test_the_key_scan_reads_what_the_decoder_reads(
    records: list[tuple], codec: str, base_offset: int, log_append_time: bool, lead: int, data: st.DataObject
) -> None:
    buf = b"x" * lead + batch_of(records, codec, base_offset, log_append_time)  # a batch inside a larger buffer
    h = validate_batch(buf, lead)
    decoded = RecordBatch(buf, h).records()
    scanned = scan_batch(buf, h)
    assert scanned.offsets == [r.offset for r in decoded]
    assert scanned.keys == [r.key for r in decoded]
    assert scanned.tombstones == [i for i, r in enumerate(decoded) if r.value is None]
    assert len(scanned.starts) == len(decoded) + 1
    first = data.draw(st.integers(0, len(decoded) - 1))
    stop = data.draw(st.integers(first + 1, len(decoded)))
    assert decode_span(scanned, first, stop) == decoded[first:stop]


@pytest.mark.parametrize("codec", ["none", "zstd"])
def test_the_key_scan_refuses_exactly_the_damaged_records_the_decoder_refuses(codec: str) -> None:
    """Random byte damage in the records section (the CRC is not what is tested here: both read past it)."""
    rng = random.Random(7)
    checked = refused = 0
    for _ in range(400):
        records = [
            (rng.choice([None, b"", b"key-%d" % rng.randrange(9)]), rng.choice([None, b"v" * rng.randrange(200)]),
             rng.choice([(), (("h", b"1"), ("n", None))]), rng.randrange(-300, 300))
            for _ in range(rng.randint(1, 8))
        ]  # fmt: skip
        original = batch_of(records, "none", 5, False)
        section = bytearray(original[HEADER_SIZE:])
        for _ in range(rng.randint(1, 3)):
            section[rng.randrange(len(section))] = rng.choice([0x00, 0x01, 0x7F, 0x80, 0xFF, rng.randrange(256)])
        if codec == "none":
            buf = original[:HEADER_SIZE] + bytes(section)
        else:  # the same damage inside a compressed batch (lengths fixed up; the CRC is stale, and not read)
            head = batch_of(records, codec, 5, False)[:HEADER_SIZE]
            payload = compress(COMPRESSION_CODES[codec], bytes(section))
            buf = head[:8] + (HEADER_SIZE - 12 + len(payload)).to_bytes(4, "big") + head[12:] + payload
        h = parse_header(buf)
        try:
            decoded = RecordBatch(buf, h).records()
        except CorruptRecordError:
            refused += 1
            with pytest.raises(CorruptRecordError):
                scan_batch(buf, h)
            continue
        scanned = scan_batch(buf, h)
        checked += 1
        assert scanned.offsets == [r.offset for r in decoded] and scanned.keys == [r.key for r in decoded]
        assert scanned.tombstones == [i for i, r in enumerate(decoded) if r.value is None]
    assert checked > 20 and refused > 20  # both outcomes were exercised


@settings(max_examples=200, deadline=None)
@given(
    st.integers(1, 40),
    st.sampled_from([0.5, 0.9, 1.0]),
    st.lists(st.tuples(st.booleans(), st.lists(st.none() | st.integers(0, 60), min_size=1, max_size=8)), max_size=40),
)
def test_the_map_answers_as_a_dict_bounded_to_its_entries(
    slots: int, load_factor: float, ops: list[tuple[bool, list[int | None]]]
) -> None:
    """Small tables, so keys share home slots, probes wrap around and the table fills (load factor 1)."""
    m = OffsetMap(slots * SLOT_SIZE + SLOT_SIZE - 1, load_factor)
    assert m.slots == slots and m.memory_bytes == slots * SLOT_SIZE
    ref: dict[bytes, int] = {}
    offset = 0
    for is_put, numbers in ops:
        keys = [None if n is None else b"key-%d" % n for n in numbers]
        if is_put:
            offsets = list(range(offset, offset + len(keys)))
            offset += len(keys)
            overflow = False
            expected = dict(ref)
            for key, o in zip(keys, offsets, strict=True):
                if key is None:
                    continue
                if key not in expected and len(expected) >= m.max_entries:
                    overflow = True
                    break
                expected[key] = o
            if overflow:
                with pytest.raises(OverflowError):
                    m.put_batch(keys, offsets)
            else:
                m.put_batch(keys, offsets)
            ref = expected
        assert m.get_batch(keys) == [-1 if k is None else ref.get(k, -1) for k in keys]
        assert m.size == len(ref) and m.latest_offset == max(ref.values(), default=-1)
        assert m.has_room(m.max_entries - len(ref)) and not m.has_room(m.max_entries - len(ref) + 1)
    absent = [b"absent-%d" % i for i in range(5)]
    assert m.get_batch(absent) == [-1] * 5  # a full table too
    m.clear()
    assert m.size == 0 and m.get_batch([b"key-%d" % n for n in range(61)]) == [-1] * 61


def test_a_large_map_matches_a_dict_and_is_cleared_in_place() -> None:
    rng = random.Random(3)
    m = OffsetMap(3 << 20)  # several clearing chunks
    table = m._table
    ref: dict[bytes, int] = {}
    for round_ in range(2):
        for start in range(0, 20_000, 100):
            keys = [b"%d-%d" % (round_, rng.randrange(15_000)) for _ in range(100)]
            m.put_batch(keys, range(start, start + 100))
            ref.update(zip(keys, range(start, start + 100), strict=True))
        probe = list(ref) + [b"missing-%d" % i for i in range(1000)]
        assert m.get_batch(probe) == [ref.get(k, -1) for k in probe]
        assert m.size == len(ref)
        m.clear()
        ref.clear()
        assert m._table is table and table == b"\xff" * len(table)


def test_a_pass_over_large_batches_defers_every_few_hundred_records_and_keeps_the_last_values(
    open_log: Callable[..., Log], tmp_path: Path, clock: Any
) -> None:
    """Batches of 1000 records: the cleaner lets the event loop in within each (not only between batches), and the
    chunked scan, map and rebuild keep exactly the last value of each key."""
    log = open_log(tmp_path / "t-0", LogConfig(segment_bytes=64 * 1024), clock=clock)
    rng = random.Random(5)
    for _ in range(12):
        append(log, clock, [(b"key-%d" % rng.randrange(3000), rng.randbytes(8)) for _ in range(1000)])
    before = rows(log)
    active = log.segment_base_offsets[-1]
    deferrals: list[int] = []
    cleaner = Cleaner(1 << 20, clock=clock, defer=lambda: deferrals.append(1))
    stats = cleaner.clean(log, CompactionConfig(), 0, active, log.log_end_offset)
    assert rows(log) == latest(before, active) and stats.records_removed > 0
    batches = active // 1000
    assert len(deferrals) >= 2 * batches * (1 + 1000 // PAUSE_EVERY)  # per batch: read, scan, chunks; map, recopy

"""Building and reading batches: round trips, header fields, the fast bulk path against the general one."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.client.record.batch import Record, decode_records, read_batches
from odradek.client.record.builder import BatchBuilder, encode_batch, encode_record
from odradek.client.record.header import (
    COMPRESSION_CODES,
    HEADER_SIZE,
    check_record_count,
    validate_batch,
)

CODECS = list(COMPRESSION_CODES)
TS = 1_700_000_000_000

headers_st = st.lists(st.tuples(st.text(max_size=12), st.none() | st.binary(max_size=20)), max_size=4).map(tuple)
record_st = st.tuples(
    st.integers(min_value=TS - 10**6, max_value=TS + 10**6),  # deltas of both signs, some multi-byte
    st.none() | st.binary(max_size=30),
    st.none() | st.binary(max_size=300),
    headers_st,
)


def decode(buf: bytes) -> list[Record]:
    return [record for batch in read_batches(buf) for record in batch.records()]


def build(records: list[tuple], compression: str = "none", **kwargs) -> bytes:
    builder = BatchBuilder(compression, **kwargs)
    for timestamp, key, value, headers in records:
        assert builder.append(timestamp, key, value, headers) is not None
    return builder.build()


def expected(records: list[tuple], base_offset: int = 0) -> list[Record]:
    return [Record(base_offset + i, *record) for i, record in enumerate(records)]


@pytest.mark.parametrize("compression", CODECS)
def test_round_trip_every_codec(compression: str) -> None:
    records = [
        (TS, b"key", b"value " * 50, (("trace", b"abc"), ("empty", b""), ("null", None))),
        (TS - 5000, None, b"", ()),  # negative timestamp delta, null key, empty value
        (TS + 10**9, b"", None, ()),  # large delta, empty key, null value (tombstone)
        (TS, None, None, (("ü-ñ", b"\x00\xff"),)),
    ]
    buf = build(records, compression, base_offset=1000)
    header = validate_batch(buf)
    assert header.compression == COMPRESSION_CODES[compression]
    assert (header.base_offset, header.last_offset_delta, header.records_count) == (1000, 3, 4)
    assert (header.base_timestamp, header.max_timestamp) == (TS, TS + 10**9)
    assert decode(buf) == expected(records, 1000)


def test_header_fields_and_flags() -> None:
    buf = build(
        [(TS, None, b"v", ())],
        "gzip",
        producer_id=77,
        producer_epoch=3,
        base_sequence=41,
        is_transactional=True,
        partition_leader_epoch=9,
    )
    header = validate_batch(buf)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (77, 3, 41)
    assert header.partition_leader_epoch == 9
    assert header.is_transactional and not header.is_control and not header.is_log_append_time
    assert header.magic == 2 and header.size == len(buf)


def test_log_append_time_records_take_max_timestamp() -> None:
    buf = build([(TS, None, b"a", ()), (TS + 7, None, b"b", ())], log_append_time=True)
    header = validate_batch(buf)
    assert header.is_log_append_time
    assert [r.timestamp for r in decode(buf)] == [TS + 7, TS + 7]


def test_batch_size_limit() -> None:
    builder = BatchBuilder(batch_size=HEADER_SIZE + 60)
    assert builder.append(TS, None, b"x" * 500) == 0  # a lone record may exceed the limit
    assert builder.append(TS, None, b"y") is None
    builder = BatchBuilder(batch_size=200)
    deltas = []
    while (delta := builder.append(TS, b"k", b"v" * 20)) is not None:
        deltas.append(delta)
        assert builder.estimated_size() <= 200
    assert deltas == list(range(builder.records_count)) and builder.records_count > 1
    buf = builder.build()
    assert len(buf) == builder.estimated_size()
    assert [r.offset for r in decode(buf)] == deltas


def test_empty_batch_is_refused() -> None:
    with pytest.raises(ValueError):
        BatchBuilder().build()
    with pytest.raises(ValueError):
        encode_batch([])


def test_unknown_codec_name() -> None:
    with pytest.raises(KeyError):
        BatchBuilder("brotli")
    with pytest.raises(ValueError):
        BatchBuilder(7)


def test_encode_batch_matches_builder_on_every_path() -> None:
    values = [bytes([i % 256]) * (i % 300) for i in range(400)]
    keys = [None if i % 3 else str(i).encode() for i in range(400)]
    for kwargs in ({}, {"keys": keys}, {"keys": [b"k"] * 400}):
        builder_keys = kwargs.get("keys", [None] * 400)
        records = [(TS, k, v, ()) for k, v in zip(builder_keys, values)]
        assert encode_batch(values, timestamps=TS, **kwargs) == build(records)
    # per-record timestamps and headers take the general path
    timestamps = [TS + (i % 7) - 3 for i in range(400)]
    headers = [(("h", b"1"),) if i % 2 else () for i in range(400)]
    records = [(t, k, v, h) for t, k, v, h in zip(timestamps, keys, values, headers)]
    assert encode_batch(values, keys, timestamps, headers) == build(records)


def test_encode_batch_long_values_many_records_and_tombstones() -> None:
    # values past the varint tables, more records than the offset-delta table, a None value: all fall back
    cases = [
        [b"x" * 10_000, b"y" * 70_000, b""],
        [b"%d" % i for i in range(20_000)],
        [b"a", None, b"b"],
    ]
    for values in cases:
        buf = encode_batch(values, timestamps=TS, compression="lz4")
        assert decode(buf) == [Record(i, TS, None, v) for i, v in enumerate(values)]
        assert buf == build([(TS, None, v, ()) for v in values], "lz4")


def test_encode_batch_argument_checks() -> None:
    with pytest.raises(ValueError):
        encode_batch([b"a"], keys=[b"k", b"l"])
    with pytest.raises(ValueError):
        encode_batch([b"a"], timestamps=[1, 2])
    with pytest.raises(ValueError):
        encode_batch([b"a"], headers=[(), ()])
    header = validate_batch(encode_batch([b"a"]))  # timestamp defaults to now
    assert header.base_timestamp > TS


def test_multiple_batches_in_one_buffer() -> None:
    first = encode_batch([b"a", b"b"], timestamps=TS, base_offset=10)
    second = encode_batch([b"c"], timestamps=TS, base_offset=12, compression="zstd")
    batches = list(read_batches(first + second))
    assert [b.header.base_offset for b in batches] == [10, 12]
    assert [r.offset for b in batches for r in b.records()] == [10, 11, 12]
    # bytearray and memoryview buffers read the same
    for buf in (bytearray(first + second), memoryview(first + second)):
        assert [r.value for b in read_batches(buf) for r in b.records()] == [b"a", b"b", b"c"]


def test_decode_records_directly() -> None:
    body = encode_record(0, 0, None, b"v") + encode_record(1, -1, b"k", None)
    assert decode_records(body, 0, len(body), 2, 100, TS) == [
        Record(100, TS, None, b"v"),
        Record(101, TS - 1, b"k", None),
    ]


@settings(max_examples=150, deadline=None)
@given(st.lists(record_st, min_size=1, max_size=40), st.sampled_from(CODECS), st.integers(0, 2**40))
def test_builder_round_trip_property(records: list[tuple], compression: str, base_offset: int) -> None:
    buf = build(records, compression, base_offset=base_offset)
    header = validate_batch(buf)
    check_record_count(buf, header)
    assert header.max_timestamp == max(r[0] for r in records)
    assert decode(buf) == expected(records, base_offset)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.none() | st.binary(max_size=200), min_size=1, max_size=200),
    st.booleans(),
    st.integers(-1, 2**45),
)
def test_encode_batch_property(values: list[bytes | None], with_keys: bool, timestamp: int) -> None:
    keys = [v[:3] if v else None for v in values] if with_keys else None
    buf = encode_batch(values, keys, timestamp)
    check_record_count(buf, validate_batch(buf))
    assert decode(buf) == [Record(i, timestamp, keys[i] if keys else None, v) for i, v in enumerate(values)]


def test_large_headers_and_many_records() -> None:
    headers = tuple((f"header-{i}" * 20, bytes([i]) * 5000) for i in range(40))
    records = [(TS + i, b"k%d" % i, b"v" * i, headers if i % 50 == 0 else ()) for i in range(3000)]
    for compression in ("none", "snappy"):
        buf = build(records, compression)
        check_record_count(buf, validate_batch(buf))
        assert decode(buf) == expected(records)

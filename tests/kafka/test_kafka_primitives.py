"""The wire primitives: what Writer writes Reader reads back, varints agree with kafka-python's, bytes come back as
views of the frame, and any malformation raises ProtocolError and nothing else."""

from __future__ import annotations

import io
import struct
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.protocol.schemas.fields.codecs.types import UnsignedVarInt32, VarInt32, VarInt64

from odradek.broker.kafka.primitives import Reader, Writer, node_endpoints_field, uvarint_bytes
from odradek.broker.kafka.wire import ProtocolError

# The test machine is shared: an example's run time is no verdict.
untimed = settings(deadline=None)

I8 = st.integers(-(2**7), 2**7 - 1)
I16 = st.integers(-(2**15), 2**15 - 1)
I32 = st.integers(-(2**31), 2**31 - 1)
I64 = st.integers(-(2**63), 2**63 - 1)
U32 = st.integers(0, 2**32 - 1)
TEXT = st.text(max_size=40)
BLOB = st.binary(max_size=64)

# (writer method, reader method, values)
FIELDS: list[tuple[str, str, st.SearchStrategy[Any]]] = [
    ("int8", "int8", I8),
    ("int16", "int16", I16),
    ("int32", "int32", I32),
    ("int64", "int64", I64),
    ("uint32", "uint32", U32),
    ("uvarint", "uvarint", U32),
    ("varint", "varint", I32),
    ("varlong", "varlong", I64),
    ("uuid", "uuid", st.binary(min_size=16, max_size=16)),
    ("string", "string", TEXT),
    ("nullable_string", "nullable_string", st.none() | TEXT),
    ("compact_string", "compact_string", TEXT),
    ("compact_nullable_string", "compact_nullable_string", st.none() | TEXT),
    ("bytes_", "bytes_", BLOB),
    ("nullable_bytes", "nullable_bytes", st.none() | BLOB),
    ("compact_bytes", "compact_bytes", BLOB),
    ("compact_nullable_bytes", "compact_nullable_bytes", st.none() | BLOB),
]


@st.composite
def field_sequences(draw: st.DrawFn) -> list[tuple[str, str, Any]]:
    out = []
    for _ in range(draw(st.integers(1, 12))):
        write, read, values = draw(st.sampled_from(FIELDS))
        out.append((write, read, draw(values)))
    return out


def _plain(v: Any) -> Any:
    return bytes(v) if isinstance(v, memoryview) else v


@untimed
@given(field_sequences())
def test_what_the_writer_writes_the_reader_reads(fields: list[tuple[str, str, Any]]) -> None:
    w = Writer()
    for write, _, value in fields:
        getattr(w, write)(value)
    r = Reader(memoryview(bytes(w.buf)))
    assert [_plain(getattr(r, read)()) for _, read, _ in fields] == [v for _, _, v in fields]
    assert r.remaining() == 0


@untimed
@given(U32)
def test_unsigned_varint_matches_kafka_python(v: int) -> None:
    w = Writer()
    w.uvarint(v)
    assert bytes(w.buf) == UnsignedVarInt32.encode(v)
    assert UnsignedVarInt32.decode(io.BytesIO(bytes(w.buf))) == v


@untimed
@given(I32)
def test_varint_matches_kafka_python(v: int) -> None:
    w = Writer()
    w.varint(v)
    assert bytes(w.buf) == VarInt32.encode(v)
    assert Reader(VarInt32.encode(v)).varint() == v


@untimed
@given(I64)
def test_varlong_matches_kafka_python(v: int) -> None:
    w = Writer()
    w.varlong(v)
    assert bytes(w.buf) == VarInt64.encode(v)
    assert Reader(VarInt64.encode(v)).varlong() == v


@untimed
@given(st.lists(st.tuples(st.integers(0, 2**31 - 1), BLOB), max_size=4))
def test_tagged_fields_round_trip_and_skip(fields: list[tuple[int, bytes]]) -> None:
    w = Writer()
    w.tagged_fields(fields)
    w.int32(7)
    frame = bytes(w.buf)
    r = Reader(frame)
    assert [(tag, bytes(payload)) for tag, payload in r.tagged_fields()] == fields
    assert r.int32() == 7
    r = Reader(frame)
    r.skip_tagged_fields()
    assert r.int32() == 7


def test_bytes_are_views_of_the_frame_not_copies() -> None:
    frame = bytearray(b"\x00\x00\x00\x03abc\x04xyz")
    r = Reader(memoryview(frame))
    plain, compact = r.bytes_(), r.compact_bytes()
    assert plain.obj is frame and compact.obj is frame
    frame[4] = ord("A")
    frame[8] = ord("X")
    assert bytes(plain) == b"Abc" and bytes(compact) == b"Xyz"


def test_a_sub_reader_stops_at_its_end() -> None:
    r = Reader(b"\x00\x00\x00\x01\x00\x00\x00\x02", 0, 4)
    assert r.int32() == 1
    with pytest.raises(ProtocolError):
        r.int32()


def test_fixed_reads_a_run_of_fields_within_the_readers_end() -> None:
    layout = struct.Struct(">ihq")
    r = Reader(layout.pack(7, -2, 1 << 40) + b"\x01", 0, layout.size)
    assert r.fixed(layout, "a head") == (7, -2, 1 << 40)
    assert r.pos == layout.size
    short = Reader(layout.pack(7, -2, 1 << 40), 0, layout.size - 1)
    with pytest.raises(ProtocolError, match="inside a head at byte 0"):
        short.fixed(layout, "a head")
    assert short.pos == 0


def test_fixed_if_consumes_only_the_usual_shape() -> None:
    layout = struct.Struct(">Bq")
    r = Reader(layout.pack(2, 9) + layout.pack(3, 9))
    assert r.fixed_if(layout, lambda v: v[0] == 2) == (2, 9)
    assert r.pos == layout.size
    assert r.fixed_if(layout, lambda v: v[0] == 2) is None  # another shape: nothing consumed
    assert r.pos == layout.size
    assert Reader(b"\x02", 0).fixed_if(layout, lambda v: True) is None  # too short: nothing consumed, no error


def test_uvarint_bytes_is_what_the_writer_writes() -> None:
    for n in (0, 1, 127, 128, 10_000, 2**31):
        w = Writer()
        w.uvarint(n)
        assert uvarint_bytes(n) == bytes(w.buf)
        assert Reader(uvarint_bytes(n)).uvarint() == n


def test_node_endpoints_field() -> None:
    r = Reader(node_endpoints_field([(1, "h", 9092, None), (2, "k", 1, "rack")]))
    assert r.compact_array_length() == 2
    assert (r.int32(), r.compact_string(), r.int32(), r.compact_nullable_string()) == (1, "h", 9092, None)
    r.skip_tagged_fields()
    assert (r.int32(), r.compact_string(), r.int32(), r.compact_nullable_string()) == (2, "k", 1, "rack")


MALFORMED: list[tuple[str, bytes]] = [
    ("int8", b""),
    ("int16", b"\x00"),
    ("int32", b"\x00\x00\x00"),
    ("int64", b"\x00" * 7),
    ("uint32", b"\x00"),
    ("uuid", b"\x00" * 15),
    ("uvarint", b""),
    ("uvarint", b"\x80"),  # cut short
    ("uvarint", b"\x80\x80\x80\x80\x80\x01"),  # 6 bytes
    ("uvarint", b"\xff" * 9 + b"\x01"),  # a 10-byte varint where at most 5 are allowed
    ("varint", b"\xff" * 9 + b"\x01"),
    ("varlong", b"\xff" * 10 + b"\x01"),  # 11 bytes
    ("string", b"\xff\xff"),  # null where not nullable
    ("string", b"\xff\xfe"),  # -2
    ("string", b"\x00\x05abc"),  # past the end
    ("string", b"\x00\x02\xc3\x28"),  # invalid UTF-8
    ("nullable_string", b"\x80\x00"),  # -32768
    ("compact_string", b"\x00"),  # null where not nullable
    ("compact_string", b"\x05ab"),
    ("compact_nullable_string", b"\x03\xff\xfe"),  # invalid UTF-8
    ("bytes_", b"\xff\xff\xff\xff"),
    ("bytes_", b"\x7f\xff\xff\xffab"),  # huge
    ("nullable_bytes", b"\xff\xff\xff\xfe"),
    ("nullable_bytes", b"\x80\x00\x00\x00"),
    ("compact_bytes", b"\x00"),
    ("compact_nullable_bytes", b"\xff\xff\xff\xff\x0f"),  # 2^32 - 2 bytes
    ("array_length", b"\xff\xff\xff\xff"),
    ("array_length", b"\x7f\xff\xff\xff"),  # more elements than bytes left
    ("nullable_array_length", b"\xff\xff\xff\xfd"),
    ("compact_array_length", b"\x00"),
    ("compact_array_length", b"\x0a\x00"),
    ("compact_nullable_array_length", b"\xff\xff\xff\xff\x0f"),
    ("tagged_fields", b"\x05\x00"),  # more fields than bytes
    ("tagged_fields", b"\x01\x00\x09abc"),  # payload past the end
    ("tagged_fields", b"\x01\x80\x80\x80\x80\x80\x01"),  # tag varint too long
    ("skip_tagged_fields", b"\x01\x00\x09abc"),
    ("skip_tagged_fields", b"\x7f"),
]


@pytest.mark.parametrize(("method", "data"), MALFORMED)
def test_malformed_input_raises_protocol_error(method: str, data: bytes) -> None:
    with pytest.raises(ProtocolError):
        getattr(Reader(data), method)()


READERS = [read for _, read, _ in FIELDS] + [
    "array_length",
    "nullable_array_length",
    "compact_array_length",
    "compact_nullable_array_length",
    "tagged_fields",
    "skip_tagged_fields",
]


@settings(untimed, max_examples=300)
@given(st.binary(max_size=64), st.lists(st.sampled_from(READERS), min_size=1, max_size=20))
def test_random_bytes_raise_only_protocol_error(data: bytes, methods: list[str]) -> None:
    r = Reader(data)
    calls: list[Callable[[], object]] = [getattr(r, m) for m in methods]
    try:
        for call in calls:
            call()
    except ProtocolError:
        pass
    assert 0 <= r.pos <= len(data)


def test_reader_bounds_are_checked() -> None:
    with pytest.raises(ProtocolError):
        Reader(b"abc", 2, 5)

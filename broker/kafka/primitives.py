"""Kafka's wire primitives, read from a frame in place and written to a growing buffer.

The hot-path codecs (Produce, Fetch) are built on these so that record data is never copied: bytes fields come back
as slices of the frame. Every malformation (short buffer, bad length, over-long varint, invalid UTF-8) raises
``ProtocolError``, the one error the listener turns into closing the connection; nothing else escapes a decoder.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from odradek.broker.kafka.wire import ProtocolError

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_U32 = struct.Struct(">I")

_MAX_UVARINT_BYTES = 5  # an unsigned varint encodes at most 32 bits (Kafka's limit)
_MAX_VARINT_BYTES = 5
_MAX_VARLONG_BYTES = 10


def _short(what: str, pos: int) -> ProtocolError:
    return ProtocolError(f"frame ends inside {what} at byte {pos}")


class Reader:
    """A cursor over ``buf[pos:end]``. ``pos`` is public: a codec may save it and look at what it consumed."""

    __slots__ = ("_buf", "_end", "pos")

    def __init__(self, buf: memoryview | bytes | bytearray, pos: int = 0, end: int | None = None) -> None:
        view = buf if isinstance(buf, memoryview) else memoryview(buf)
        if view.format != "B" or view.ndim != 1:
            view = view.cast("B")
        self._buf = view
        self.pos = pos
        self._end = len(view) if end is None else end
        if not 0 <= pos <= self._end <= len(view):
            raise ProtocolError(f"bad reader bounds {pos}..{end} over {len(view)} bytes")

    @property
    def end(self) -> int:
        return self._end

    def remaining(self) -> int:
        return self._end - self.pos

    def _take(self, n: int, what: str) -> int:
        """Advance past ``n`` bytes and return where they start."""
        pos = self.pos
        if n > self._end - pos:
            raise _short(what, pos)
        self.pos = pos + n
        return pos

    # Fixed-size integers. The bounds check is explicit because a sub-reader's end is not the buffer's.

    def int8(self) -> int:
        pos = self._take(1, "an int8")
        return int(_I8.unpack_from(self._buf, pos)[0])

    def int16(self) -> int:
        pos = self._take(2, "an int16")
        return int(_I16.unpack_from(self._buf, pos)[0])

    def int32(self) -> int:
        pos = self._take(4, "an int32")
        return int(_I32.unpack_from(self._buf, pos)[0])

    def int64(self) -> int:
        pos = self._take(8, "an int64")
        return int(_I64.unpack_from(self._buf, pos)[0])

    def uint32(self) -> int:
        pos = self._take(4, "a uint32")
        return int(_U32.unpack_from(self._buf, pos)[0])

    def fixed(self, layout: struct.Struct, what: str) -> tuple[Any, ...]:
        """Several fixed-size fields in one unpack (a hot codec's run of them, one bounds check)."""
        pos = self._take(layout.size, what)
        return layout.unpack_from(self._buf, pos)

    def fixed_if(self, layout: struct.Struct, usual: Callable[[tuple[Any, ...]], bool]) -> tuple[Any, ...] | None:
        """The next fields in one unpack if they are there and ``usual`` accepts them (a codec's common shape, such
        as a known run of tags); else None, with nothing consumed, for the codec's field-by-field path."""
        pos = self.pos
        if self._end - pos < layout.size:
            return None
        values = layout.unpack_from(self._buf, pos)
        if not usual(values):
            return None
        self.pos = pos + layout.size
        return values

    def uuid(self) -> bytes:
        """16 bytes, as odradek's metadata holds topic ids."""
        pos = self._take(16, "a uuid")
        return bytes(self._buf[pos : pos + 16])

    # Varints.

    def _varint(self, max_bytes: int, what: str) -> int:
        buf, pos, end = self._buf, self.pos, self._end
        if pos < end and buf[pos] < 0x80:  # one byte: most lengths, counts and tag headers
            self.pos = pos + 1
            return buf[pos]
        result = 0
        shift = 0
        for _ in range(max_bytes):
            if pos >= end:
                raise _short(what, pos)
            b = buf[pos]
            pos += 1
            result |= (b & 0x7F) << shift
            if b < 0x80:
                self.pos = pos
                return result
            shift += 7
        raise ProtocolError(f"{what} longer than {max_bytes} bytes at byte {self.pos}")

    def uvarint(self) -> int:
        return self._varint(_MAX_UVARINT_BYTES, "an unsigned varint")

    def varint(self) -> int:
        """Zig-zag int32."""
        v = self._varint(_MAX_VARINT_BYTES, "a varint")
        return (v >> 1) ^ -(v & 1)

    def varlong(self) -> int:
        """Zig-zag int64."""
        v = self._varint(_MAX_VARLONG_BYTES, "a varlong")
        return (v >> 1) ^ -(v & 1)

    # Lengths: None for null (where the caller allows it), else a length known to fit in what is left.

    def _length(self, n: int, nullable: bool, what: str) -> int | None:
        if n < 0:
            if n == -1 and nullable:
                return None
            raise ProtocolError(f"{what} length {n} at byte {self.pos}")
        if n > self._end - self.pos:
            raise ProtocolError(f"{what} length {n} runs past the frame's end at byte {self.pos}")
        return n

    def _text(self, n: int | None) -> str | None:
        if n is None:
            return None
        pos = self.pos
        self.pos = pos + n
        try:
            return str(self._buf[pos : pos + n], "utf-8")
        except UnicodeDecodeError as e:
            raise ProtocolError(f"invalid UTF-8 in a string at byte {pos}") from e

    def _slice(self, n: int | None) -> memoryview | None:
        if n is None:
            return None
        pos = self.pos
        self.pos = pos + n
        return self._buf[pos : pos + n]

    def string(self) -> str:
        s = self._text(self._length(self.int16(), False, "string"))
        assert s is not None
        return s

    def nullable_string(self) -> str | None:
        return self._text(self._length(self.int16(), True, "string"))

    def compact_string(self) -> str:
        s = self._text(self._length(self.uvarint() - 1, False, "compact string"))
        assert s is not None
        return s

    def compact_nullable_string(self) -> str | None:
        return self._text(self._length(self.uvarint() - 1, True, "compact string"))

    def bytes_(self) -> memoryview:
        """A slice of the frame (no copy)."""
        b = self._slice(self._length(self.int32(), False, "bytes"))
        assert b is not None
        return b

    def nullable_bytes(self) -> memoryview | None:
        return self._slice(self._length(self.int32(), True, "bytes"))

    def compact_bytes(self) -> memoryview:
        b = self._slice(self._length(self.uvarint() - 1, False, "compact bytes"))
        assert b is not None
        return b

    def compact_nullable_bytes(self) -> memoryview | None:
        return self._slice(self._length(self.uvarint() - 1, True, "compact bytes"))

    # Arrays: every element takes at least one byte, so a count beyond what is left is malformed (and a hostile
    # count cannot make a decoder loop or allocate without bound).

    def array_length(self) -> int:
        n = self._length(self.int32(), False, "array")
        assert n is not None
        return n

    def nullable_array_length(self) -> int | None:
        return self._length(self.int32(), True, "array")

    def compact_array_length(self) -> int:
        n = self._length(self.uvarint() - 1, False, "compact array")
        assert n is not None
        return n

    def compact_nullable_array_length(self) -> int | None:
        return self._length(self.uvarint() - 1, True, "compact array")

    # Tagged fields (flexible versions): a count, then (tag, size, payload) each.

    def tagged_fields(self) -> list[tuple[int, memoryview]]:
        """Every tagged field as (tag, payload slice); the caller parses the tags it knows."""
        count = self._length(self.uvarint(), False, "tagged field")
        assert count is not None
        fields = []
        for _ in range(count):
            tag = self.uvarint()
            size = self._length(self.uvarint(), False, "tagged field")
            payload = self._slice(size)
            assert payload is not None
            fields.append((tag, payload))
        return fields

    def skip_tagged_fields(self) -> None:
        count = self.uvarint()
        if count == 0:  # the common case
            return
        if count > self._end - self.pos:
            raise ProtocolError(f"tagged field count {count} runs past the frame's end at byte {self.pos}")
        for _ in range(count):
            self.uvarint()
            size = self.uvarint()
            self._take(size, "a tagged field")


class Writer:
    """Appends Kafka primitives to ``buf``. Values out of a field's range raise ``struct.error`` (a caller's bug)."""

    __slots__ = ("buf",)

    def __init__(self, buf: bytearray | None = None) -> None:
        self.buf = bytearray() if buf is None else buf

    def raw(self, data: bytes | bytearray | memoryview) -> None:
        self.buf += data

    def int8(self, v: int) -> None:
        self.buf += _I8.pack(v)

    def int16(self, v: int) -> None:
        self.buf += _I16.pack(v)

    def int32(self, v: int) -> None:
        self.buf += _I32.pack(v)

    def int64(self, v: int) -> None:
        self.buf += _I64.pack(v)

    def uint32(self, v: int) -> None:
        self.buf += _U32.pack(v)

    def uuid(self, v: bytes) -> None:
        if len(v) != 16:
            raise ValueError(f"a uuid is 16 bytes, not {len(v)}")
        self.buf += v

    def uvarint(self, v: int) -> None:
        if not 0 <= v <= 0xFFFFFFFF:
            raise ValueError(f"unsigned varint out of range: {v}")
        self._varint(v)

    def varint(self, v: int) -> None:
        if not -(1 << 31) <= v < (1 << 31):
            raise ValueError(f"varint out of range: {v}")
        self._varint(((v << 1) ^ (v >> 31)) & 0xFFFFFFFF)

    def varlong(self, v: int) -> None:
        if not -(1 << 63) <= v < (1 << 63):
            raise ValueError(f"varlong out of range: {v}")
        self._varint(((v << 1) ^ (v >> 63)) & 0xFFFFFFFFFFFFFFFF)

    def _varint(self, v: int) -> None:
        buf = self.buf
        while v >= 0x80:
            buf.append((v & 0x7F) | 0x80)
            v >>= 7
        buf.append(v)

    def string(self, s: str) -> None:
        b = s.encode()
        self.int16(len(b))
        self.buf += b

    def nullable_string(self, s: str | None) -> None:
        if s is None:
            self.int16(-1)
        else:
            self.string(s)

    def compact_string(self, s: str) -> None:
        b = s.encode()
        self._varint(len(b) + 1)
        self.buf += b

    def compact_nullable_string(self, s: str | None) -> None:
        if s is None:
            self.buf.append(0)
        else:
            self.compact_string(s)

    def bytes_(self, b: bytes | bytearray | memoryview) -> None:
        view = memoryview(b)
        self.int32(view.nbytes)
        self.buf += view

    def nullable_bytes(self, b: bytes | bytearray | memoryview | None) -> None:
        if b is None:
            self.int32(-1)
        else:
            self.bytes_(b)

    def compact_bytes(self, b: bytes | bytearray | memoryview) -> None:
        view = memoryview(b)
        self._varint(view.nbytes + 1)
        self.buf += view

    def compact_nullable_bytes(self, b: bytes | bytearray | memoryview | None) -> None:
        if b is None:
            self.buf.append(0)
        else:
            self.compact_bytes(b)

    def array_length(self, n: int | None) -> None:
        """``None`` is a null array."""
        self.int32(-1 if n is None else n)

    def compact_array_length(self, n: int | None) -> None:
        self._varint(0 if n is None else n + 1)

    def tagged_fields(self, fields: Iterable[tuple[int, bytes | bytearray | memoryview]]) -> None:
        """(tag, payload) pairs, which must come in ascending tag order as Kafka requires."""
        items = list(fields)
        self._varint(len(items))
        for tag, payload in items:
            view = memoryview(payload)
            self._varint(tag)
            self._varint(view.nbytes)
            self.buf += view

    def no_tagged_fields(self) -> None:
        self.buf.append(0)


def uvarint_bytes(n: int) -> bytes:
    """``n`` (>= 0) as an unsigned varint, for codecs that match a known encoding whole."""
    w = Writer()
    w.uvarint(n)
    return bytes(w.buf)


NodeEndpoint = tuple[int, str, int, str | None]
"""(node id, host, port, rack): where a client finds a leader named in a NOT_LEADER_OR_FOLLOWER answer."""


def node_endpoints_field(endpoints: Sequence[NodeEndpoint]) -> bytes:
    """The payload of the NodeEndpoints tagged field that flexible Produce (v10+) and Fetch (v16+) answers carry."""
    w = Writer()
    w.compact_array_length(len(endpoints))
    for node_id, host, port, rack in endpoints:
        w.int32(node_id)
        w.compact_string(host)
        w.int32(port)
        w.compact_nullable_string(rack)
        w.no_tagged_fields()
    return bytes(w.buf)

"""The primitives of the ``__consumer_offsets`` record layout (Kafka's generated-message encoding), shared by the
classic records (``records``) and the KIP-848 consumer group records (``consumer_records``).

A classic field list uses int16-length strings (-1 = null), int32-length bytes and int32-count arrays; a flexible
one (every KIP-848 value, and version 4 of the classic values) uses unsigned varints of n+1 (0 = null) and ends
each struct with a tagged-field section. The writer writes one only where a record asks for it (``tagged_field``);
the reader hands them out by tag (``tagged_fields``) or skips them, since Kafka adds tagged fields to a released
version.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from typing import TypeVar

from odradek.client.errors import CorruptRecordError, InvalidRequestError

MAX_STRING_BYTES = 32767  # a classic string's int16 length


class OffsetsRecordError(CorruptRecordError):
    """A ``__consumer_offsets`` key or value that cannot be decoded: truncated, trailing bytes, bad lengths."""


class UnknownRecordVersionError(OffsetsRecordError):
    """A key or value version this codec does not know (``kind`` is ``"key"`` or the value's record type)."""

    def __init__(self, kind: str, version: int) -> None:
        self.kind = kind
        self.version = version
        super().__init__(f"unknown {kind} version {version}")


class RecordWriter:
    """Writes one key or value: classic fields, or flexible (compact lengths, tagged-field sections)."""

    def __init__(self, flexible: bool) -> None:
        self.flexible = flexible
        self.out = bytearray()

    def int16(self, v: int) -> None:
        self._pack(">h", v)

    def int32(self, v: int) -> None:
        self._pack(">i", v)

    def int64(self, v: int) -> None:
        self._pack(">q", v)

    def _pack(self, fmt: str, v: int) -> None:
        try:
            self.out += struct.pack(fmt, v)
        except struct.error as e:
            raise InvalidRequestError(f"{v} does not fit the record field ({fmt[1:]}): {e}") from None

    def int8(self, v: int) -> None:
        self._pack(">b", v)

    def uuid(self, v: bytes) -> None:
        if len(v) != 16:
            raise InvalidRequestError(f"a uuid is 16 bytes, not {len(v)}")
        self.out += v

    def string_array(self, items: Sequence[str]) -> None:
        self.array_length(len(items))
        for item in items:
            self.string(item)

    def int32_array(self, items: Sequence[int]) -> None:
        self.array_length(len(items))
        for item in items:
            self.int32(item)

    def uvarint(self, v: int) -> None:
        while v >= 0x80:
            self.out.append((v & 0x7F) | 0x80)
            v >>= 7
        self.out.append(v)

    def length(self, n: int | None, classic: Callable[[int], None]) -> None:
        if self.flexible:
            self.uvarint(0 if n is None else n + 1)
        else:
            classic(-1 if n is None else n)

    def string(self, s: str | None) -> None:
        if s is None:
            self.length(None, self.int16)
            return
        data = s.encode("utf-8")
        if len(data) > MAX_STRING_BYTES:
            raise InvalidRequestError(f"a string of {len(data)} bytes exceeds the record limit {MAX_STRING_BYTES}")
        self.length(len(data), self.int16)
        self.out += data

    def bytes_(self, b: bytes) -> None:
        self.length(len(b), self.int32)
        self.out += b

    def array_length(self, n: int) -> None:
        self.length(n, self.int32)

    def end_struct(self) -> None:
        if self.flexible:
            self.uvarint(0)  # no tagged fields

    def tagged_field(self, tag: int, payload: bytes) -> None:
        """End a flexible struct with one tagged field (its payload already encoded)."""
        self.uvarint(1)
        self.uvarint(tag)
        self.uvarint(len(payload))
        self.out += payload


_T = TypeVar("_T")


class RecordReader:
    """Reads one key or value; every fault is an ``OffsetsRecordError`` naming ``what`` and the byte."""

    def __init__(self, data: bytes, what: str) -> None:
        self.data = memoryview(data)
        self.pos = 0
        self.what = what
        self.flexible = False

    def fail(self, why: str) -> OffsetsRecordError:
        return OffsetsRecordError(f"corrupt {self.what}: {why} at byte {self.pos}")

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise self.fail(f"needs {n} bytes, {len(self.data) - self.pos} left")
        out = bytes(self.data[self.pos : self.pos + n])
        self.pos += n
        return out

    def _unpack(self, fmt: str, size: int) -> int:
        value: int = struct.unpack(fmt, self.take(size))[0]
        return value

    def int16(self) -> int:
        return self._unpack(">h", 2)

    def int32(self) -> int:
        return self._unpack(">i", 4)

    def int64(self) -> int:
        return self._unpack(">q", 8)

    def int8(self) -> int:
        return self._unpack(">b", 1)

    def uuid(self) -> bytes:
        return self.take(16)

    def string_array(self) -> tuple[str, ...]:
        return tuple(self.string() for _ in range(self.array_length()))

    def int32_array(self) -> tuple[int, ...]:
        return tuple(self.int32() for _ in range(self.array_length()))

    def uvarint(self) -> int:
        value = shift = 0
        for _ in range(5):  # an unsigned int32 takes at most 5 bytes
            byte = self.take(1)[0]
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7
        raise self.fail("varint longer than 5 bytes")

    def length(self, classic: Callable[[], int]) -> int | None:
        """A length or count; None for null."""
        if self.flexible:
            n = self.uvarint() - 1
        else:
            n = classic()
        if n < -1:
            raise self.fail(f"negative length {n}")
        return None if n == -1 else n

    def nullable_string(self) -> str | None:
        n = self.length(self.int16)
        if n is None:
            return None
        raw = self.take(n)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise self.fail(f"invalid UTF-8 ({e.reason})") from None

    def string(self) -> str:
        return self._required(self.nullable_string(), "string")

    def bytes_(self) -> bytes:
        return self.take(self._required(self.length(self.int32), "bytes"))

    def array_length(self) -> int:
        return self._required(self.length(self.int32), "array")

    def _required(self, value: _T | None, kind: str) -> _T:
        if value is None:
            raise self.fail(f"null {kind} in a non-nullable field")
        return value

    def end_struct(self) -> None:
        """Skip a flexible struct's tagged fields (none of them is known to this reader)."""
        self.tagged_fields()

    def tagged_fields(self) -> dict[int, bytes]:
        """A flexible struct's tagged fields: each one's payload by tag."""
        out: dict[int, bytes] = {}
        if not self.flexible:
            return out
        for _ in range(self.uvarint()):
            tag = self.uvarint()
            out[tag] = self.take(self.uvarint())
        return out

    def done(self) -> None:
        if self.pos != len(self.data):
            raise self.fail(f"{len(self.data) - self.pos} trailing bytes")

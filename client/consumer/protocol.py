"""Kafka's embedded "consumer" protocol: the subscription a member sends in JoinGroup and the assignment the leader
hands out in SyncGroup, in Kafka's exact binary layout so that Kafka clients could share a group with odradek's.

The coordinator never reads these bytes (it only compares protocol names), so the layout is a contract between
clients alone. Every message starts with an int16 version, followed by fixed-size big-endian fields:

- Subscription v0: topics ([]string), user_data (nullable bytes); v1 adds owned_partitions ([]{topic, []int32});
  v2 adds generation_id (int32); v3 adds rack_id (nullable string).
- Assignment v0-v3 (one layout): assigned_partitions ([]{topic, []int32}), user_data (nullable bytes).

Strings are an int16 length and UTF-8, bytes an int32 length, arrays an int32 count; -1 is null where nullable.
As in Kafka, a newer version than this code knows is read with the newest layout it knows and the rest is ignored
(versions only ever append fields), and an older one gets the defaults of the fields it lacks.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass, field

from odradek.client.errors import CorruptRecordError
from odradek.client.structs import TopicPartition

PROTOCOL_TYPE = "consumer"  # JoinGroup's protocol_type for every consumer group
SUBSCRIPTION_VERSION = 3  # the newest versions this code reads and writes
ASSIGNMENT_VERSION = 3
NO_GENERATION = -1  # generation_id of a member that owns nothing valid (Kafka's DEFAULT_GENERATION)

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT16_MAX = 0x7FFF
_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1


class ConsumerProtocolError(CorruptRecordError):
    """A subscription or assignment that does not parse: truncated, a negative length where null is not allowed,
    bad UTF-8, a negative version, or bytes left over in a version this code fully knows. Not retriable: the same
    bytes fail again."""

    @property
    def retriable(self) -> bool:
        return False


def _partitions(items: Iterable[TopicPartition]) -> tuple[TopicPartition, ...]:
    out = tuple(sorted({TopicPartition(tp.topic, tp.partition) for tp in items}))
    for tp in out:
        _check_string(tp.topic, "topic")
        _check_int32(tp.partition, "partition", minimum=0)
    return out


def _check_string(value: str, what: str) -> None:
    if len(value.encode()) > _INT16_MAX:
        raise ValueError(f"{what} {value[:40]!r}... is longer than {_INT16_MAX} bytes")


def _check_int32(value: int, what: str, minimum: int = _INT32_MIN) -> None:
    if not minimum <= value <= _INT32_MAX:
        raise ValueError(f"{what} {value} is outside [{minimum}, {_INT32_MAX}]")


@dataclass(frozen=True)
class Subscription:
    """What a member asks for when it joins. ``topics`` and ``owned_partitions`` are kept sorted and without
    duplicates (the order Kafka writes them in), so two equal subscriptions compare equal.

    ``owned_partitions`` and ``generation_id`` (the generation in which the member last received an assignment)
    let a sticky assignor keep partitions where they are and ignore claims from a stale generation.
    ``group_instance_id`` is not part of the bytes: the leader fills it in from the JoinGroup member list, as Kafka
    does, because the range and round-robin assignors order static members by it."""

    topics: tuple[str, ...]
    user_data: bytes | None = None
    owned_partitions: tuple[TopicPartition, ...] = ()
    generation_id: int = NO_GENERATION
    rack_id: str | None = None
    group_instance_id: str | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        topics = tuple(sorted(set(self.topics)))
        for topic in topics:
            _check_string(topic, "topic")
        _check_int32(self.generation_id, "generation_id")
        if self.rack_id is not None:
            _check_string(self.rack_id, "rack_id")
        object.__setattr__(self, "topics", topics)
        object.__setattr__(self, "owned_partitions", _partitions(self.owned_partitions))
        if self.user_data is not None:
            object.__setattr__(self, "user_data", bytes(self.user_data))

    def encode(self) -> bytes:
        """The version-prefixed bytes, at the newest version (v3), as Kafka writes them."""
        out = bytearray(_INT16.pack(SUBSCRIPTION_VERSION))
        out += _INT32.pack(len(self.topics))
        for topic in self.topics:
            _write_string(out, topic)
        _write_bytes(out, self.user_data)
        _write_topic_partitions(out, self.owned_partitions)
        out += _INT32.pack(self.generation_id)
        _write_string(out, self.rack_id)
        return bytes(out)

    @classmethod
    def decode(cls, data: bytes) -> Subscription:
        """Any version; see the module docstring for older and newer ones. An empty rack id reads as None, as in
        Kafka."""
        reader = _Reader(data, "subscription")
        version = reader.version()
        count = reader.array_length()
        topics = [reader.string() for _ in range(count)]
        user_data = reader.nullable_bytes()
        owned: list[TopicPartition] = []
        generation_id = NO_GENERATION
        rack_id: str | None = None
        if version >= 1:
            owned = reader.topic_partitions()
        if version >= 2:
            generation_id = reader.int32()
        if version >= 3:
            rack_id = reader.nullable_string() or None
        reader.finish(version, SUBSCRIPTION_VERSION)
        return cls(tuple(topics), user_data, tuple(owned), generation_id, rack_id)


@dataclass(frozen=True)
class Assignment:
    """The partitions the leader gives one member, kept sorted (so equal assignments compare equal), and optional
    assignor data."""

    partitions: tuple[TopicPartition, ...] = ()
    user_data: bytes | None = None

    def __post_init__(self) -> None:
        parts = [TopicPartition(tp.topic, tp.partition) for tp in self.partitions]
        if len(set(parts)) != len(parts):
            raise ValueError(f"an assignment lists a partition twice: {sorted(parts)}")
        object.__setattr__(self, "partitions", _partitions(parts))
        if self.user_data is not None:
            object.__setattr__(self, "user_data", bytes(self.user_data))

    def encode(self) -> bytes:
        """Version 3 (the same layout as 0-2), partitions grouped per topic."""
        out = bytearray(_INT16.pack(ASSIGNMENT_VERSION))
        _write_topic_partitions(out, self.partitions)
        _write_bytes(out, self.user_data)
        return bytes(out)

    @classmethod
    def decode(cls, data: bytes) -> Assignment:
        reader = _Reader(data, "assignment")
        version = reader.version()
        partitions = reader.topic_partitions()
        user_data = reader.nullable_bytes()
        reader.finish(version, ASSIGNMENT_VERSION)
        try:
            return cls(tuple(partitions), user_data)
        except ValueError as e:
            raise ConsumerProtocolError(f"assignment: {e}") from e


def _write_string(out: bytearray, value: str | None) -> None:
    if value is None:
        out += _INT16.pack(-1)
        return
    raw = value.encode()
    out += _INT16.pack(len(raw))
    out += raw


def _write_bytes(out: bytearray, value: bytes | None) -> None:
    if value is None:
        out += _INT32.pack(-1)
        return
    out += _INT32.pack(len(value))
    out += value


def _write_topic_partitions(out: bytearray, partitions: Iterable[TopicPartition]) -> None:
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    out += _INT32.pack(len(by_topic))
    for topic, numbers in by_topic.items():
        _write_string(out, topic)
        out += _INT32.pack(len(numbers))
        for number in numbers:
            out += _INT32.pack(number)


class _Reader:
    """A cursor over one message that turns every malformation into ConsumerProtocolError."""

    def __init__(self, data: bytes, what: str) -> None:
        self._data = memoryview(bytes(data))
        self._pos = 0
        self._what = what

    def _fail(self, problem: str) -> ConsumerProtocolError:
        return ConsumerProtocolError(f"corrupt consumer protocol {self._what} at byte {self._pos}: {problem}")

    def _take(self, size: int) -> bytes:
        if self._pos + size > len(self._data):
            raise self._fail(f"needs {size} bytes, {len(self._data) - self._pos} left")
        out = bytes(self._data[self._pos : self._pos + size])
        self._pos += size
        return out

    def version(self) -> int:
        version: int = _INT16.unpack(self._take(2))[0]
        if version < 0:
            raise self._fail(f"unsupported version {version}")
        return version

    def int32(self) -> int:
        value: int = _INT32.unpack(self._take(4))[0]
        return value

    def array_length(self) -> int:
        count = self.int32()
        if count < 0:
            raise self._fail(f"null or negative array length {count}")
        return count

    def nullable_string(self) -> str | None:
        length: int = _INT16.unpack(self._take(2))[0]
        if length == -1:
            return None
        if length < 0:
            raise self._fail(f"negative string length {length}")
        raw = self._take(length)
        try:
            return raw.decode()
        except UnicodeDecodeError as e:
            raise self._fail(f"string is not UTF-8 ({e.reason})") from e

    def string(self) -> str:
        value = self.nullable_string()
        if value is None:
            raise self._fail("null where a string is required")
        return value

    def nullable_bytes(self) -> bytes | None:
        length = self.int32()
        if length == -1:
            return None
        if length < 0:
            raise self._fail(f"negative bytes length {length}")
        return self._take(length)

    def topic_partitions(self) -> list[TopicPartition]:
        out: list[TopicPartition] = []
        for _ in range(self.array_length()):
            topic = self.string()
            for _ in range(self.array_length()):
                number = self.int32()
                if number < 0:
                    raise self._fail(f"negative partition {number} of topic {topic!r}")
                out.append(TopicPartition(topic, number))
        return out

    def finish(self, version: int, newest_known: int) -> None:
        """Left-over bytes are a newer version's fields when the version is newer, else corruption."""
        if version <= newest_known and self._pos != len(self._data):
            raise self._fail(f"{len(self._data) - self._pos} bytes left over after version {version}")

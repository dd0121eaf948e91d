"""A follower's Fetch on a leader's Kafka listener, sans-I/O: the request frame out, the answer's partitions in.

The request is Fetch v16 with the follower's ReplicaState (replica id and broker epoch, tagged field 1) and, per
partition, the same position the gRPC request carries, with the follower's durable offset (its recovery point) in a
partition-level tagged field of odradek's own (``DURABLE_OFFSET_TAG``). The answer has Kafka's own fields (high
watermark, log start offset, diverging epoch as tagged field 0) plus two values only odradek's followers use, as
partition-level tagged fields: the leader's log end offset (``LOG_END_OFFSET_TAG``) and the offset every replica
holds durably (``ALL_REPLICAS_OFFSET_TAG``), each an int64. odradek's tags are numbered far above Kafka's own so no
Kafka version will reuse them; a leader writes its two only in answers to replica fetches, and Kafka clients skip
unknown tags. Topics are named by id (v13+): the caller's metadata image maps names to ids and back. A malformed
answer raises ProtocolError only.

Fetches go in a fetch session (KIP-227, ``ReplicaSession``, Kafka's FetchSessionHandler): a full request with epoch
0 first, then incremental ones listing only the partitions whose position changed, forgetting those that left the
fetcher (moved, parked after an error), and the answers carry only the partitions with news. Any error or failed
exchange makes the next request a full one again, which closes the old session and opens a new one.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping
from typing import NamedTuple

from odradek.broker.fetch_response import FetchedPartition, PartitionFetch, ReplicaFetchRequest
from odradek.broker.fetch_session import FETCH_SESSION_ID_NOT_FOUND, next_epoch
from odradek.broker.kafka.fetch_codec import (
    ALL_REPLICAS_OFFSET_TAG,
    DURABLE_OFFSET_TAG,
    FETCH_KEY,
    LOG_END_OFFSET_TAG,
    int64_tag,
)
from odradek.broker.kafka.primitives import Reader, Writer, uvarint_bytes
from odradek.broker.kafka.wire import ProtocolError
from odradek.broker.partition import Divergence
from odradek.client.errors import ErrorCode

REPLICA_FETCH_VERSION = 16
REPLICA_FETCH_MIN_VERSION = 15  # the first with ReplicaState, which carries the broker epoch
DIVERGING_EPOCH_TAG = 0
REPLICA_STATE_TAG = 1
UNKNOWN_TOPIC_ID = 100  # Kafka's error for a topic id the leader does not know
# An answer partition's fixed head: index, error, high watermark, last stable offset, log start offset.
_PARTITION_HEAD = struct.Struct(">ihqqq")
# Its usual tail: exactly odradek's two tags, each a two-byte tag number, a size of 8 and an int64.
_USUAL_TAGS = struct.Struct(">B2sBq2sBq")
_LOG_END_TAG, _ALL_REPLICAS_TAG = uvarint_bytes(LOG_END_OFFSET_TAG), uvarint_bytes(ALL_REPLICAS_OFFSET_TAG)


def _usual_tags(values: tuple[int, bytes, int, int, bytes, int, int]) -> bool:
    count, tag, size, _, next_tag, next_size, _ = values
    return count == 2 and tag == _LOG_END_TAG and size == 8 and next_tag == _ALL_REPLICAS_TAG and next_size == 8


Key = tuple[str, int]
Topics = list[tuple[str, list[PartitionFetch]]]


class ReplicaFetchAnswer(NamedTuple):
    """The answer: its top-level error (STALE_BROKER_EPOCH for a fenced follower, a session error), its session id
    and each partition's values."""

    error_code: int
    partitions: dict[Key, FetchedPartition]
    session_id: int = 0


class SessionRequest(NamedTuple):
    """What one request sends in the session: its id and epoch, the partitions listed and those forgotten."""

    session_id: int
    epoch: int
    topics: Topics
    forgotten: list[tuple[str, list[int]]]


class ReplicaSession:
    """A follower's fetch session with one leader: which partitions the next request must list."""

    def __init__(self) -> None:
        self.session_id = 0
        self.epoch = 0  # 0: the next request is full (and closes ``session_id`` if it is set)
        self._held: dict[Key, PartitionFetch] = {}  # the partitions the leader's session holds, as last sent
        self._next: dict[Key, PartitionFetch] = {}  # what they will be once the request in flight is answered
        # The list ``_held`` was built from, and the one of the request in flight: a fetcher hands the same list
        # again while no position moved, and that round sends nothing without comparing thousands of entries.
        self._held_topics: Topics | None = None
        self._next_topics: Topics | None = None
        # The entries the request in flight changed, when the fetcher said which (``build``'s ``changes``): applied
        # to ``_held`` once answered, so a round costs what moved, not what the session holds.
        self._pending: Mapping[Key, PartitionFetch] | None = None

    def build(self, topics: Topics, changes: Mapping[Key, PartitionFetch] | None = None) -> SessionRequest:
        """The request for the partitions the fetcher wants now, at their current positions. Without ``changes``,
        ``topics`` is not changed afterwards (the fetcher builds a new list when a position moves) and is compared
        with what the session holds, unless it is the very list held. With ``changes`` (the entries whose position
        moved since the previous build, the set of partitions unchanged), only those are looked at: the fetcher
        may then update ``topics`` in place."""
        self._next_topics = topics
        self._pending = None
        if self.epoch != 0 and changes is not None:
            self._pending = changes
            moved: dict[str, list[PartitionFetch]] = {}
            held = self._held
            for key, p in changes.items():
                if held.get(key) != p:
                    moved.setdefault(key[0], []).append(p)
            return SessionRequest(self.session_id, self.epoch, list(moved.items()), [])
        if self.epoch != 0 and topics is self._held_topics:
            self._next = self._held
            return SessionRequest(self.session_id, self.epoch, [], [])
        wanted = {(name, p.partition): p for name, parts in topics for p in parts}
        self._next = wanted
        if self.epoch == 0:
            return SessionRequest(self.session_id, 0, topics, [])
        listed: dict[str, list[PartitionFetch]] = {}
        for key, p in wanted.items():
            if self._held.get(key) != p:
                listed.setdefault(key[0], []).append(p)
        forgotten: dict[str, list[int]] = {}
        for key in self._held.keys() - wanted.keys():
            forgotten.setdefault(key[0], []).append(key[1])
        return SessionRequest(self.session_id, self.epoch, list(listed.items()), list(forgotten.items()))

    def answered(self, error_code: int, session_id: int) -> None:
        """The leader answered the request ``build`` made."""
        if error_code:
            self.failed(forget=error_code == FETCH_SESSION_ID_NOT_FOUND)
        elif session_id == 0:  # no session (the leader keeps none, or closed it): full requests again
            self.session_id, self.epoch, self._held, self._held_topics = 0, 0, {}, None
        else:
            self.epoch = 1 if self.epoch == 0 or self.session_id != session_id else next_epoch(self.epoch)
            self.session_id = session_id
            if self._pending is not None:
                self._held.update(self._pending)
                self._held_topics = self._next_topics
            else:
                self._held, self._held_topics = self._next, self._next_topics
        self._pending = None

    def failed(self, forget: bool = False) -> None:
        """No usable answer: the next request is full, closing the session unless the leader no longer has it."""
        if forget:
            self.session_id = 0
        self.epoch = 0
        self._held, self._held_topics, self._pending = {}, None, None


def encode_replica_fetch(
    request: ReplicaFetchRequest,
    correlation_id: int,
    client_id: str,
    topic_id: Callable[[str], bytes | None],
    session: SessionRequest | None = None,
) -> bytes:
    """The whole frame: size prefix, request header v2, Fetch v16 body, all of ``request``'s partitions or, in a
    ``session``, those it lists and forgets. A topic ``topic_id`` does not know (deleted meanwhile) is left out: its
    partitions get no answer, as a partition the leader does not answer."""
    w = Writer()
    w.int16(FETCH_KEY)
    w.int16(REPLICA_FETCH_VERSION)
    w.int32(correlation_id)
    w.nullable_string(client_id)
    w.no_tagged_fields()
    w.int32(request.max_wait_ms)
    w.int32(request.min_bytes)
    w.int32(request.max_bytes)
    w.int8(0)  # isolation level: a follower reads everything up to the log end offset
    if session is None:
        w.int32(0)  # no fetch session: a full fetch
        w.int32(-1)
    else:
        w.int32(session.session_id)
        w.int32(session.epoch)
    listed = request.topics if session is None else session.topics
    topics = [(found, parts) for name, parts in listed if (found := topic_id(name)) is not None]
    w.compact_array_length(len(topics))
    for found, parts in topics:
        w.uuid(found)
        w.compact_array_length(len(parts))
        for p in parts:
            w.int32(p.partition)
            w.int32(p.current_leader_epoch)
            w.int64(p.fetch_offset)
            w.int32(p.last_fetched_epoch)
            w.int64(p.log_start_offset)
            w.int32(p.partition_max_bytes)
            durable = Writer()
            durable.int64(p.durable_offset)
            w.tagged_fields([(DURABLE_OFFSET_TAG, durable.buf)])
        w.no_tagged_fields()
    forgotten = [] if session is None else session.forgotten
    gone = [(found, parts) for name, parts in forgotten if (found := topic_id(name)) is not None]
    w.compact_array_length(len(gone))
    for found, indexes in gone:
        w.uuid(found)
        w.compact_array_length(len(indexes))
        for index in indexes:
            w.int32(index)
        w.no_tagged_fields()
    w.compact_string("")  # rack id
    state = Writer()
    state.int32(request.replica_id)
    state.int64(request.replica_epoch)
    state.no_tagged_fields()
    w.tagged_fields([(REPLICA_STATE_TAG, state.buf)])
    frame = Writer()
    frame.int32(len(w.buf))
    frame.raw(w.buf)
    return bytes(frame.buf)


def decode_replica_fetch_response(
    frame: memoryview | bytes, correlation_id: int, topic_name: Callable[[bytes], str | None]
) -> ReplicaFetchAnswer:
    """The answer frame (without its size prefix): response header v1, then the Fetch v16 body. Partitions of a
    topic id ``topic_name`` does not know are dropped; a partition answered twice keeps its first answer. Raises
    ProtocolError if the frame is malformed, answers another request, or lacks odradek's follower values."""
    r = Reader(frame)
    got = r.int32()
    if got != correlation_id:
        raise ProtocolError(f"an answer to request {got}, not {correlation_id}")
    r.skip_tagged_fields()
    r.int32()  # throttle time: followers are not throttled
    error_code = r.int16()
    session_id = r.int32()
    partitions: dict[Key, FetchedPartition] = {}
    for _ in range(r.compact_array_length()):
        name = topic_name(r.uuid())
        for _ in range(r.compact_array_length()):
            key, answer = _partition(r, name or "")
            if name is not None:
                partitions.setdefault(key, answer)
        r.skip_tagged_fields()
    r.skip_tagged_fields()
    if r.remaining():
        raise ProtocolError(f"{r.remaining()} bytes after the answer")
    return ReplicaFetchAnswer(error_code, partitions, session_id)


def _partition(r: Reader, name: str) -> tuple[Key, FetchedPartition]:
    index, error, high_watermark, _, log_start_offset = r.fixed(_PARTITION_HEAD, "a partition's answer")
    # (the last stable offset is skipped: followers read up to the log end offset)
    aborted = r.compact_nullable_array_length()
    for _ in range(aborted or 0):
        r.int64()
        r.int64()
        r.skip_tagged_fields()
    r.int32()  # preferred read replica
    records = r.compact_nullable_bytes()
    diverging = None
    log_end_offset = all_replicas_offset = None
    usual = r.fixed_if(_USUAL_TAGS, _usual_tags)
    if usual is not None:
        log_end_offset, all_replicas_offset = usual[3], usual[6]
    for tag, payload in r.tagged_fields() if usual is None else ():  # some other tags: one by one
        if tag == LOG_END_OFFSET_TAG:
            log_end_offset = int64_tag(payload, "log end offset")
        elif tag == ALL_REPLICAS_OFFSET_TAG:
            all_replicas_offset = int64_tag(payload, "all replicas offset")
        elif tag == DIVERGING_EPOCH_TAG:
            d = Reader(payload)
            diverging = Divergence(d.int32(), d.int64())
            d.skip_tagged_fields()
    if log_end_offset is None or all_replicas_offset is None:
        raise ProtocolError(f"the answer for {name}-{index} lacks the leader's log end or all-replicas offset")
    if error == UNKNOWN_TOPIC_ID:  # the leader knows the topic by another id: metadata settles it, as gRPC's error
        error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    return (name, index), FetchedPartition(
        error,
        b"" if records is None else bytes(records),
        high_watermark,
        log_start_offset,
        log_end_offset,
        diverging,
        all_replicas_offset,
    )

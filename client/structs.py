"""The small value types of the client API: partitions, delivery reports and consumed records."""

from __future__ import annotations

from typing import NamedTuple

CREATE_TIME = 0  # ConsumerRecord.timestamp_type: the producer's timestamp
LOG_APPEND_TIME = 1  # the broker's append time (topic config message.timestamp.type=LogAppendTime)


class TopicPartition(NamedTuple):
    topic: str
    partition: int


class RecordMetadata(NamedTuple):
    """Where a produced record landed. ``offset`` is -1 with acks=0, as in Kafka; ``timestamp`` is the record's
    own, or the broker's append time for LogAppendTime topics."""

    topic: str
    partition: int
    offset: int
    timestamp: int


class OffsetAndTimestamp(NamedTuple):
    """``offsets_for_times``'s answer for a partition: the first offset whose batch reaches the asked timestamp.
    The lookup is per batch, so records before that timestamp in the same batch may come first; ``timestamp`` is
    the one the broker reports for the lookup."""

    offset: int
    timestamp: int


class ConsumerRecord(NamedTuple):
    """One consumed record; ``key``/``value`` None is a null, ``headers`` keep their order."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]


class OffsetAndMetadata(NamedTuple):
    """A committed position: the offset of the next record to consume, free-form metadata (at most the broker's
    ``offset.metadata.max.bytes``) and the leader epoch of the last consumed record (None: unknown)."""

    offset: int
    metadata: str = ""
    leader_epoch: int | None = None


class GroupMetadata(NamedTuple):
    """Who the consumer is in its group (Kafka's ConsumerGroupMetadata): ``generation_id`` is -1 and ``member_id``
    empty while it is not a member of a generation."""

    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None


# Kafka's name for it: what ``Consumer.group_metadata()`` returns and ``Producer.send_offsets_to_transaction`` takes.
ConsumerGroupMetadata = GroupMetadata

"""Between the group coordinator's state and its offsets partition: the records it appends, and the replay of the
partition's log when it becomes the partition's leader.

Pure functions, so the shell only moves bytes: ``group_record`` and ``encode_records`` make the batch to append,
``replay_batches`` feeds what a loading coordinator reads into the ``OffsetStore``, into a map of each group's
last metadata record (a tombstone removes the group) and, for KIP-848 consumer groups and KIP-932 share groups,
into each group's live records (the last value of each key, as compaction leaves them; ``ConsumerGroup.restore``
and ``ShareGroup.restore`` replay them), and
``snapshot_of`` turns such a record back into the ``GroupSnapshot`` that ``ClassicGroup.restore`` takes.

A transactional commit is one transactional batch of the producer (``encode_records`` with a producer id: base
sequence -1, the coordinator's own append); replayed, its offsets wait in the store for that producer's control
batch, which commits or aborts them. A transaction whose marker is not in the log yet stays pending after the load.
"""

from __future__ import annotations

import logging
from collections.abc import MutableMapping, Sequence
from dataclasses import dataclass

from odradek.broker.groups.consumer_records import ConsumerRecordKey, ConsumerRecordValue
from odradek.broker.groups.messages import GroupSnapshot, MemberSnapshot
from odradek.broker.groups.offsets import OffsetStore
from odradek.broker.groups.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetsRecordError,
    RecordKey,
    RecordValue,
    decode_record,
    encode_key,
    encode_value,
)
from odradek.broker.groups.share_records import ShareRecordKey, ShareRecordValue
from odradek.client.errors import CorruptRecordError
from odradek.client.record.batch import Bytes, read_batches
from odradek.client.record.builder import BatchBuilder
from odradek.client.record.control import ControlType, parse_control_record
from odradek.client.record.header import NO_PRODUCER_EPOCH, NO_PRODUCER_ID

logger = logging.getLogger(__name__)


def group_record(snapshot: GroupSnapshot) -> tuple[GroupMetadataKey, GroupMetadataValue]:
    """The metadata record of a group the state machine asked to persist."""
    value = GroupMetadataValue(
        protocol_type=snapshot.protocol_type or "",
        generation=snapshot.generation_id,
        protocol=snapshot.protocol_name,
        leader=snapshot.leader,
        current_state_timestamp=-1
        if snapshot.current_state_timestamp_ms is None
        else snapshot.current_state_timestamp_ms,
        members=tuple(
            MemberMetadata(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                rebalance_timeout=m.rebalance_timeout_ms,
                session_timeout=m.session_timeout_ms,
                subscription=m.subscription,
                assignment=m.assignment,
            )
            for m in snapshot.members
        ),
    )
    return GroupMetadataKey(snapshot.group_id), value


def snapshot_of(group_id: str, value: GroupMetadataValue) -> GroupSnapshot:
    """A stored group metadata record as the state machine restores it."""
    return GroupSnapshot(
        group_id=group_id,
        protocol_type=value.protocol_type or None,
        generation_id=value.generation,
        protocol_name=value.protocol,
        leader=value.leader,
        current_state_timestamp_ms=None if value.current_state_timestamp < 0 else value.current_state_timestamp,
        members=tuple(
            MemberSnapshot(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                rebalance_timeout_ms=m.rebalance_timeout,
                session_timeout_ms=m.session_timeout,
                subscription=m.subscription,
                assignment=m.assignment,
            )
            for m in value.members
        ),
    )


def encode_records(
    records: Sequence[tuple[RecordKey, RecordValue | None]],
    timestamp_ms: int,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
) -> bytes:
    """One uncompressed batch of ``records`` (keys and values in Kafka's layout; None values are tombstones); with
    a producer id, a transactional batch of that producer (no sequence: the log does not check one for the
    coordinator's appends)."""
    if producer_id == NO_PRODUCER_ID:
        builder = BatchBuilder()
    else:
        builder = BatchBuilder(producer_id=producer_id, producer_epoch=producer_epoch, is_transactional=True)
    for key, value in records:
        builder.append(timestamp_ms, encode_key(key), encode_value(value))
    return builder.build()


@dataclass
class ReplayStats:
    records: int = 0
    skipped: int = 0


def replay_batches(
    data: Bytes,
    store: OffsetStore,
    groups: MutableMapping[str, GroupMetadataValue],
    stats: ReplayStats | None = None,
    consumer_groups: MutableMapping[str, dict[ConsumerRecordKey, ConsumerRecordValue]] | None = None,
    share_groups: MutableMapping[str, dict[ShareRecordKey, ShareRecordValue]] | None = None,
) -> None:
    """Apply every record of ``data`` (whole batches, in log order): offset commits to ``store``, group metadata to
    ``groups`` (the last record of a group wins; a tombstone removes it), consumer group records to
    ``consumer_groups`` (per group, the last value of each key; a tombstone removes the key, and a group left
    without keys), share group records likewise to ``share_groups``. Offsets of a transactional batch wait for
    the producer's control batch (COMMIT or ABORT); a record this codec cannot read (another coordinator's type, or
    corrupt), or a consumer (share) group record when ``consumer_groups`` (``share_groups``) is None, is skipped
    and counted."""
    stats = stats if stats is not None else ReplayStats()
    for batch in read_batches(data):
        header = batch.header
        if header.is_control:
            for record in batch.records():
                try:
                    marker = parse_control_record(record)
                except CorruptRecordError as e:
                    stats.skipped += 1
                    logger.warning("control record at offset %d skipped: %s", record.offset, e)
                    continue
                store.on_txn_marker(header.producer_id, marker.type is ControlType.COMMIT)
            continue
        producer_id = header.producer_id if header.is_transactional else NO_PRODUCER_ID
        for record in batch.records():
            if record.key is None:
                stats.skipped += 1
                continue
            try:
                key, value = decode_record(record.key, record.value)
            except OffsetsRecordError as e:
                stats.skipped += 1
                logger.warning("offsets record at offset %d skipped: %s", record.offset, e)
                continue
            if isinstance(key, ConsumerRecordKey):
                if consumer_groups is None:
                    stats.skipped += 1
                    continue
                live = consumer_groups.setdefault(key.group, {})
                live.pop(key, None)
                if isinstance(value, ConsumerRecordValue):
                    live[key] = value
                elif not live:
                    del consumer_groups[key.group]
                stats.records += 1
                continue
            if isinstance(key, ShareRecordKey):
                if share_groups is None:
                    stats.skipped += 1
                    continue
                _replay_live(share_groups, key, value if isinstance(value, ShareRecordValue) else None)
                stats.records += 1
                continue
            stats.records += 1
            if isinstance(key, GroupMetadataKey):
                if value is None:
                    groups.pop(key.group, None)
                elif isinstance(value, GroupMetadataValue):
                    groups[key.group] = value
            else:
                store.replay(key, value, producer_id)


def _replay_live(
    groups: MutableMapping[str, dict[ShareRecordKey, ShareRecordValue]],
    key: ShareRecordKey,
    value: ShareRecordValue | None,
) -> None:
    """A group's live records as compaction leaves them: the last value of each key; a group without keys goes."""
    live = groups.setdefault(key.group, {})
    live.pop(key, None)
    if value is not None:
        live[key] = value
    elif not live:
        del groups[key.group]

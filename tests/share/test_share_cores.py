"""Focused checks of the share group cores where a transcript is clumsy: the durable state's codec and store, the
compactness of the in-flight runs, the shell-facing inputs (real batch headers, the log's aborted transactions),
timing edges, the simple assignor's balance over many shapes, and the share group's ``__consumer_offsets`` records
(Kafka's layout, and a group restored from them)."""

from __future__ import annotations

import random

import pytest

from odradek.broker.groups.consumer_messages import TopicInfo
from odradek.broker.groups.consumer_records import TopicMetadata
from odradek.broker.groups.record_codec import OffsetsRecordError, UnknownRecordVersionError
from odradek.broker.groups.records import decode_record as decode_offsets_record
from odradek.broker.groups.records import describe_record, encode_key, encode_value
from odradek.broker.groups.server_assignors import AssignmentMember
from odradek.broker.groups.share_records import (
    ShareGroupCurrentMemberAssignmentKey,
    ShareGroupCurrentMemberAssignmentValue,
    ShareGroupMemberMetadataKey,
    ShareGroupMemberMetadataValue,
    ShareGroupMetadataKey,
    ShareGroupMetadataValue,
    ShareGroupPartitionMetadataKey,
    ShareGroupPartitionMetadataValue,
    ShareGroupStatePartitionMetadataKey,
    ShareGroupStatePartitionMetadataValue,
    ShareGroupTargetAssignmentMemberKey,
    ShareGroupTargetAssignmentMemberValue,
    ShareGroupTargetAssignmentMetadataKey,
    ShareGroupTargetAssignmentMetadataValue,
    ShareRecordKey,
    ShareRecordValue,
    StateTopic,
)
from odradek.broker.log.log import AbortedTxn
from odradek.broker.share import spans
from odradek.broker.share.assignor import SimpleAssignor
from odradek.broker.share.group import ShareGroup, ShareGroupConfig, ShareGroupResult, ShareHeartbeatRequest
from odradek.broker.share.partition import (
    READ_COMMITTED,
    AcknowledgementBatch,
    SharePartition,
    SharePartitionConfig,
)
from odradek.broker.share.state_records import (
    RecordState,
    SharePartitionKey,
    ShareSnapshotValue,
    ShareState,
    ShareStateRecord,
    ShareStateStore,
    ShareUpdateValue,
    StateBatch,
    StateWrite,
    combine,
    decode_record,
    encode_record,
)
from odradek.client.errors import ErrorCode
from odradek.client.record.builder import encode_batch
from odradek.client.record.control import ControlType, build_control_batch
from odradek.client.record.header import iter_batches

KEY = SharePartitionKey("group-1", bytes(range(16)), 3)
AVAILABLE, ACKNOWLEDGED, ARCHIVED = RecordState.AVAILABLE, RecordState.ACKNOWLEDGED, RecordState.ARCHIVED


# -- the durable state -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "record",
    [
        ShareStateRecord(KEY, ShareSnapshotValue(2, 5, 7, 100, (StateBatch(100, 104, ARCHIVED, 3),))),
        ShareStateRecord(
            KEY, ShareUpdateValue(2, 8, -1, (StateBatch(105, 105, AVAILABLE, 1), StateBatch(106, 9, ACKNOWLEDGED, 2)))
        ),
        ShareStateRecord(KEY, None),
    ],
    ids=["snapshot", "update", "tombstone"],
)
def test_records_round_trip_to_the_same_bytes(record: ShareStateRecord) -> None:
    key, value = encode_record(record)
    assert decode_record(key, value) == record
    assert encode_record(decode_record(key, value)) == (key, value)


def test_the_codec_refuses_what_it_cannot_read() -> None:
    snapshot = ShareStateRecord(KEY, ShareSnapshotValue(0, 0, 0, 0, (StateBatch(0, 0, ARCHIVED, 1),)))
    key, value = encode_record(snapshot)
    assert value is not None
    with pytest.raises(UnknownRecordVersionError):
        decode_record(b"\x00\x07" + key[2:], value)  # an unknown kind
    with pytest.raises(UnknownRecordVersionError):
        decode_record(key, b"\x00\x01" + value[2:])  # an unknown value version
    with pytest.raises(OffsetsRecordError, match="trailing"):
        decode_record(key, value + b"\x00")
    with pytest.raises(OffsetsRecordError, match="needs"):
        decode_record(key, value[:-3])
    acquired = bytearray(value)
    acquired[-5] = RecordState.ACQUIRED  # the state byte of the only batch: never stored
    with pytest.raises(OffsetsRecordError, match="cannot be stored"):
        decode_record(key, bytes(acquired))


def test_combine_lays_later_batches_over_earlier_ones_and_drops_what_is_below_the_start() -> None:
    base = [StateBatch(0, 9, AVAILABLE, 1)]
    changes = [StateBatch(3, 4, ARCHIVED, 1), StateBatch(4, 12, AVAILABLE, 1), StateBatch(20, 21, ACKNOWLEDGED, 2)]
    assert combine(base, changes, 2) == (
        StateBatch(2, 2, AVAILABLE, 1),
        StateBatch(3, 3, ARCHIVED, 1),
        StateBatch(4, 12, AVAILABLE, 1),
        StateBatch(20, 21, ACKNOWLEDGED, 2),
    )
    assert combine(base, [], -1) == tuple(base)


def test_the_store_fences_older_epochs_and_resets_at_a_new_state_epoch() -> None:
    store = ShareStateStore(snapshot_every=10)
    assert store.read(KEY, 0) == store.read(KEY, 0)
    assert store.read(KEY, 0).state is None  # nothing stored: the leader applies share.auto.offset.reset
    first = store.write(KEY, 0, 3, StateWrite(10, (StateBatch(10, 11, AVAILABLE, 1),)))
    assert isinstance(first.record and first.record.value, ShareSnapshotValue)
    assert store.write(KEY, 0, 2, StateWrite(12, ())).error == ErrorCode.FENCED_LEADER_EPOCH
    assert store.read(KEY, 2).error == ErrorCode.FENCED_LEADER_EPOCH
    # The group resets the share-partition (alter offsets): a new state epoch, no start (-1), nothing in flight.
    reset = store.initialize(KEY, 1, -1)
    assert reset.error == ErrorCode.NONE and store.state(KEY) == ShareState(1, -1, ())
    assert store.initialize(KEY, 1, 5).error == ErrorCode.FENCED_STATE_EPOCH
    assert store.write(KEY, 0, 3, StateWrite(12, ())).error == ErrorCode.FENCED_STATE_EPOCH
    restored = SharePartition.restore(SharePartitionConfig(auto_offset_reset="earliest"), store.state(KEY), 4, 50)
    assert (restored.start_offset, restored.in_flight) == (4, ())
    # Deleted: a tombstone, after which nothing is stored; replaying the same records gives the same state.
    deleted = store.delete(KEY)
    assert deleted.record == ShareStateRecord(KEY, None) and store.state(KEY) is None
    assert store.delete(KEY).record is None


def test_an_update_whose_snapshot_is_gone_is_the_whole_state() -> None:
    store = ShareStateStore()
    store.replay(ShareStateRecord(KEY, ShareUpdateValue(4, 1, 30, (StateBatch(31, 31, ARCHIVED, 2),))))
    assert store.state(KEY) == ShareState(0, 30, (StateBatch(31, 31, ARCHIVED, 2),))


def test_restore_fills_the_offsets_between_stored_batches_and_skips_what_the_log_lost() -> None:
    state = ShareState(0, 10, (StateBatch(12, 12, ACKNOWLEDGED, 1), StateBatch(14, 15, AVAILABLE, 2)))
    p = SharePartition.restore(SharePartitionConfig(), state, 11, 100)
    runs = [(r.first, r.last, r.state, r.delivery_count) for r in p.in_flight]
    assert p.start_offset == 11
    assert runs == [(11, 11, AVAILABLE, 0), (12, 12, ACKNOWLEDGED, 1), (13, 13, AVAILABLE, 0), (14, 15, AVAILABLE, 2)]
    assert p.next_fetch_offset() == 11 and p.end == 16


# -- the share-partition -----------------------------------------------------------------------------------------


def test_a_late_acknowledgement_fails_even_before_the_lock_timer_fired() -> None:
    """Every input first fires the locks due at its time, so the answer does not depend on when the shell's timer
    ran."""
    p = SharePartition.restore(SharePartitionConfig(record_lock_duration_ms=1000), None, 0, 0)
    batch = iter_batches(encode_batch([b"v"] * 3, timestamps=0))
    assert p.acquire("a", batch, 10, now_ms=0).acquired[0].last_offset == 2
    assert p.next_deadline_ms() == 1000
    late = p.acknowledge("a", [AcknowledgementBatch(0, 2, (1,))], now_ms=1000)
    assert late.error == ErrorCode.INVALID_RECORD_STATE
    assert late.write is not None and late.write.batches == (StateBatch(0, 2, AVAILABLE, 1),)
    assert p.next_deadline_ms() is None


def test_thousands_of_records_in_flight_are_a_few_runs() -> None:
    """10,000 records in 100-record batches, acquired by ten members, then acknowledged batch by batch with a
    release every tenth batch: the in-flight records stay a handful of runs."""
    log = b"".join(encode_batch([b"v"] * 100, timestamps=0, base_offset=i * 100) for i in range(100))
    p = SharePartition.restore(SharePartitionConfig(max_record_locks=10_000), None, 0, 0)
    headers = iter_batches(log)
    for member in range(10):
        start = p.next_fetch_offset()
        batches = [h for h in headers if h.base_offset >= start]
        assert p.acquire(f"m{member}", batches, 1000, now_ms=member).acquired[0].delivery_count == 1
    assert len(p.in_flight) == 10
    for i in range(99, 0, -1):  # from the end, so the SPSO does not move until the very last
        kind = 2 if i % 10 == 0 else 1
        result = p.acknowledge(f"m{i // 10}", [AcknowledgementBatch(i * 100, i * 100 + 99, (kind,))], now_ms=20)
        assert result.error == ErrorCode.NONE
    assert len(p.in_flight) <= 20
    p.acknowledge("m0", [AcknowledgementBatch(0, 99, (1,))], now_ms=30)
    assert p.start_offset == 1000 and p.next_fetch_offset() == 1000


def test_the_log_s_batch_headers_and_aborted_transactions_are_taken_as_they_are() -> None:
    """The shell passes the record codec's batch headers and the log's AbortedTxn entries unchanged."""
    log = (
        encode_batch([b"a"] * 2, timestamps=0, base_offset=0, producer_id=9, producer_epoch=0, is_transactional=True)
        + encode_batch([b"b"], timestamps=0, base_offset=2)
        + build_control_batch(ControlType.ABORT, 9, 0, 0, 0, base_offset=3)
    )
    p = SharePartition.restore(SharePartitionConfig(isolation_level=READ_COMMITTED), None, 0, 0)
    result = p.acquire("a", iter_batches(log), 100, now_ms=0, aborted=[AbortedTxn(9, 0)])
    assert [(a.first_offset, a.last_offset) for a in result.acquired] == [(2, 2)]
    assert result.write == StateWrite(2, (StateBatch(3, 3, ARCHIVED, 0),))  # 0-1 archived: the SPSO moved past


def test_configs_are_checked() -> None:
    with pytest.raises(ValueError, match="auto"):
        SharePartitionConfig(auto_offset_reset="by_duration:PT1H")
    with pytest.raises(ValueError, match="isolation"):
        SharePartitionConfig(isolation_level="read_nothing")
    with pytest.raises(ValueError, match="must be >= 1"):
        SharePartitionConfig(delivery_count_limit=0)
    with pytest.raises(ValueError, match="heartbeat"):
        ShareGroupConfig(session_timeout_ms=1000, heartbeat_interval_ms=1000)
    with pytest.raises(ValueError, match="snapshot"):
        ShareStateStore(snapshot_every=0)


# -- spans -------------------------------------------------------------------------------------------------------


def test_spans_split_merge_and_overwrite() -> None:
    runs = [StateBatch(0, 9, AVAILABLE, 1)]
    spans.update(runs, 3, 5, lambda b: StateBatch(b.first, b.last, ARCHIVED, 1))
    assert runs == [StateBatch(0, 2, AVAILABLE, 1), StateBatch(3, 5, ARCHIVED, 1), StateBatch(6, 9, AVAILABLE, 1)]
    spans.update(runs, 3, 5, lambda b: StateBatch(b.first, b.last, AVAILABLE, 1))
    assert runs == [StateBatch(0, 9, AVAILABLE, 1)]
    spans.assign(runs, StateBatch(12, 14, ARCHIVED, 0))
    spans.drop_below(runs, 8)
    assert runs == [StateBatch(8, 9, AVAILABLE, 1), StateBatch(12, 14, ARCHIVED, 0)]
    assert spans.inside(runs, 9, 12) == [StateBatch(9, 9, AVAILABLE, 1), StateBatch(12, 12, ARCHIVED, 0)]


# -- the simple assignor -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(30))
def test_the_simple_assignor_shares_every_partition_evenly_and_sticks(seed: int) -> None:
    rng = random.Random(seed)
    topics = {bytes([t]) * 16: rng.randint(1, 6) for t in range(rng.randint(1, 3))}
    members = [AssignmentMember(f"m{i:02}", None, frozenset(topics)) for i in range(rng.randint(1, 12))]
    assignor = SimpleAssignor()
    first = assignor.assign(members, topics, {})
    partitions = sum(topics.values())
    sharing = -(-len(members) // partitions)
    holders = {(t, p): sum((t, p) in a for a in first.values()) for t, n in topics.items() for p in range(n)}
    assert set(holders.values()) == {sharing}
    counts = [len(a) for a in first.values()]
    assert max(counts) - min(counts) <= 1 and sum(counts) == sharing * partitions
    # One more member: what the others keep, they keep; the balance holds.
    joined = [*members, AssignmentMember("zz", None, frozenset(topics))]
    second = assignor.assign(joined, topics, first)
    counts = [len(a) for a in second.values()]
    assert max(counts) - min(counts) <= 1
    moved = sum(len(first[m.member_id] - second[m.member_id]) for m in members)
    assert moved <= max(counts)


# -- the share group's __consumer_offsets records ----------------------------------------------------------------

TOPIC = bytes(range(16))
SHARE_RECORDS: list[tuple[ShareRecordKey, ShareRecordValue]] = [
    (ShareGroupPartitionMetadataKey("g"), ShareGroupPartitionMetadataValue((TopicMetadata(TOPIC, "t", 3),))),
    (ShareGroupMemberMetadataKey("g", "m"), ShareGroupMemberMetadataValue("r1", "c", "/10.0.0.1", ("t", "u"))),
    (ShareGroupMemberMetadataKey("g", "n"), ShareGroupMemberMetadataValue(None, "", "", ("t",))),
    (ShareGroupMetadataKey("g"), ShareGroupMetadataValue(7)),
    (ShareGroupTargetAssignmentMetadataKey("g"), ShareGroupTargetAssignmentMetadataValue(6)),
    (ShareGroupTargetAssignmentMemberKey("g", "m"), ShareGroupTargetAssignmentMemberValue(frozenset({(TOPIC, 2)}))),
    (
        ShareGroupCurrentMemberAssignmentKey("g", "m"),
        ShareGroupCurrentMemberAssignmentValue(6, 5, frozenset({(TOPIC, 0), (TOPIC, 2)})),
    ),
    (
        ShareGroupStatePartitionMetadataKey("g"),
        ShareGroupStatePartitionMetadataValue(
            (StateTopic(TOPIC, "t", (0, 1, 2)),), (StateTopic(TOPIC, "t", (3,)),), (StateTopic(TOPIC, "old"),)
        ),
    ),
]


@pytest.mark.parametrize(("key", "value"), SHARE_RECORDS, ids=lambda x: type(x).__name__)
def test_share_group_records_round_trip(key: ShareRecordKey, value: ShareRecordValue) -> None:
    assert decode_offsets_record(encode_key(key), encode_value(value)) == (key, value)
    assert decode_offsets_record(encode_key(key), None) == (key, None)
    view = describe_record(encode_key(key), encode_value(value))
    assert str(view["type"]).startswith("share_group_") and view["key"]["group"] == "g"  # type: ignore[index]


def test_share_group_records_in_kafkas_layout() -> None:
    # Key: int16 record type (11: ShareGroupMetadata), then the group id; value: int16 version 0, the epoch, no
    # tagged fields. Kafka 4.1's value adds the metadata hash (int64), which is read and left aside.
    assert encode_key(ShareGroupMetadataKey("g")) == b"\x00\x0b\x00\x01g"
    assert encode_value(ShareGroupMetadataValue(5)) == b"\x00\x00\x00\x00\x00\x05\x00"
    with_hash = b"\x00\x00\x00\x00\x00\x05" + (123).to_bytes(8, "big") + b"\x00"
    assert decode_offsets_record(b"\x00\x0b\x00\x01g", with_hash) == (
        ShareGroupMetadataKey("g"),
        ShareGroupMetadataValue(5),
    )
    member = ShareGroupCurrentMemberAssignmentKey("g", "m")
    assert encode_key(member) == b"\x00\x0e\x00\x01g\x00\x01m"
    assert encode_value(ShareGroupCurrentMemberAssignmentValue(2, 1, frozenset({(TOPIC, 4)}))) == (
        b"\x00\x00"
        + b"\x00\x00\x00\x02"
        + b"\x00\x00\x00\x01"
        + b"\x00"
        + b"\x02"
        + TOPIC
        + b"\x02\x00\x00\x00\x04\x00\x00"
    )


def test_a_restored_share_group_is_the_group_that_stored_its_records() -> None:
    config = ShareGroupConfig(session_timeout_ms=10_000, heartbeat_interval_ms=1000)
    group = ShareGroup("g", config)
    topics = {"t": TopicInfo(TOPIC, "t", 4)}
    live: dict[ShareRecordKey, ShareRecordValue] = {}

    def step(result: ShareGroupResult) -> ShareGroupResult:
        for key, value in result.records:
            live.pop(key, None)
            if value is not None:
                live[key] = value
        return result

    for member in ("a", "b", "c"):
        step(group.heartbeat(ShareHeartbeatRequest(member, 0, subscribed_topic_names=("t",)), 0, topics))
    step(group.heartbeat(ShareHeartbeatRequest("a", 1), 100, topics))
    step(group.heartbeat(ShareHeartbeatRequest("c", -1), 200, topics))  # leaves: its records go
    assert live == group.records()
    restored = ShareGroup.restore("g", live, 5_000, config)
    assert restored.describe() == group.describe()
    assert restored.records() == group.records()
    assert restored.next_deadline_ms() == 15_000  # every session starts at the restore
    # The epochs continue: b, still at epoch 2, heartbeats and moves to the assignment epoch the leave made.
    r = step(restored.heartbeat(ShareHeartbeatRequest("b", 2), 5_100, topics)).response
    assert r is not None and (r.error, r.member_epoch) == (ErrorCode.NONE, group.group_epoch)
    again = restored.heartbeat(ShareHeartbeatRequest("b", group.group_epoch), 5_200, topics)
    assert again.records == ()  # nothing changed: nothing to store

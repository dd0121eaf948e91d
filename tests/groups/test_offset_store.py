"""The offset store of one offsets-topic partition (broker/groups/offsets.py), with plain-int clocks."""

from __future__ import annotations

import pytest

from odradek.broker.groups.offsets import (
    DEFAULT_OFFSETS_RETENTION_MS,
    NO_OFFSET,
    USE_COMMIT_TIMESTAMP,
    Append,
    OffsetAndMetadata,
    OffsetStore,
)
from odradek.broker.groups.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    RecordKey,
    RecordValue,
    decode_record,
    encode_key,
    encode_value,
)
from odradek.client.errors import ConfigError, ErrorCode
from odradek.client.structs import TopicPartition

T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)
U0 = TopicPartition("u", 0)
DAY = 24 * 60 * 60 * 1000


def commit(store: OffsetStore, group: str, offsets: dict[TopicPartition, int], now: int = 100) -> Append:
    result = store.prepare_commit(group, {tp: OffsetAndMetadata(o) for tp, o in offsets.items()}, now)
    assert result.append is not None
    store.on_appended(result.append.append_id)
    return result.append


def offsets_of(store: OffsetStore, group: str) -> dict[TopicPartition, int]:
    return {tp: v.offset for tp, v in store.fetch(group).items()}


def test_a_commit_becomes_visible_only_when_its_append_is_acknowledged() -> None:
    store = OffsetStore()
    result = store.prepare_commit("g", {T0: OffsetAndMetadata(10, leader_epoch=3, metadata="m")}, now_ms=500)
    assert result.errors == {T0: ErrorCode.NONE}
    assert result.append is not None
    [(key, value)] = result.append.records
    assert key == OffsetCommitKey("g", "t", 0)
    assert value == OffsetCommitValue(offset=10, metadata="m", commit_timestamp=500, leader_epoch=3)
    assert store.fetch("g", [T0]) == {T0: NO_OFFSET}
    assert store.has_pending("g")
    store.on_appended(result.append.append_id)
    assert store.fetch("g", [T0]) == {T0: value}
    assert not store.has_pending("g")


def test_a_failed_append_rolls_the_commit_back() -> None:
    store = OffsetStore()
    commit(store, "g", {T0: 5})
    result = store.prepare_commit("g", {T0: OffsetAndMetadata(9)}, 200)
    assert result.append is not None
    store.on_append_failed(result.append.append_id)
    assert offsets_of(store, "g") == {T0: 5}
    assert not store.has_pending("g")
    with pytest.raises(KeyError):
        store.on_appended(result.append.append_id)


def test_abort_pending_drops_every_append_in_flight() -> None:
    store = OffsetStore()
    a = store.prepare_commit("g", {T0: OffsetAndMetadata(1)}, 1).append
    b = store.prepare_commit("h", {T0: OffsetAndMetadata(1)}, 1).append
    assert a is not None and b is not None
    assert sorted(store.abort_pending()) == sorted([a.append_id, b.append_id])
    assert store.groups() == set()


def test_metadata_too_large_fails_only_that_partition() -> None:
    store = OffsetStore(offset_metadata_max_bytes=4)
    result = store.prepare_commit(
        "g",
        {T0: OffsetAndMetadata(1, metadata="abcd"), T1: OffsetAndMetadata(2, metadata="abcde")},
        now_ms=1,
    )
    assert result.errors == {T0: ErrorCode.NONE, T1: ErrorCode.OFFSET_METADATA_TOO_LARGE}
    assert result.append is not None
    assert [key.partition for key, _ in result.append.records] == [0]
    store.on_appended(result.append.append_id)
    assert offsets_of(store, "g") == {T0: 1}


def test_the_metadata_limit_counts_utf8_bytes_and_defaults_to_4096() -> None:
    store = OffsetStore()
    ok = store.prepare_commit("g", {T0: OffsetAndMetadata(1, metadata="x" * 4096)}, 1)
    too_big = store.prepare_commit("g", {T0: OffsetAndMetadata(1, metadata="é" * 2049)}, 1)  # 4098 bytes
    assert ok.errors[T0] == ErrorCode.NONE
    assert too_big.errors[T0] == ErrorCode.OFFSET_METADATA_TOO_LARGE
    assert too_big.append is None


def test_a_commit_that_cannot_be_a_record_is_refused_per_partition() -> None:
    store = OffsetStore()
    result = store.prepare_commit(
        "g", {TopicPartition("t", -1): OffsetAndMetadata(1), T0: OffsetAndMetadata(2**63)}, now_ms=1
    )
    assert result.errors == {
        TopicPartition("t", -1): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        T0: ErrorCode.INVALID_REQUEST,
    }
    assert result.append is None


@pytest.mark.parametrize("bad", [-1, "4096", 1.5, True])
def test_a_bad_metadata_limit_is_a_config_error(bad: object) -> None:
    with pytest.raises(ConfigError):
        OffsetStore(offset_metadata_max_bytes=bad)  # type: ignore[arg-type]


def test_fetch_all_or_some_partitions() -> None:
    store = OffsetStore()
    commit(store, "g", {T0: 5, U0: 7})
    commit(store, "other", {T0: 99})
    assert offsets_of(store, "g") == {T0: 5, U0: 7}
    fetched = store.fetch("g", [T0, T1])
    assert fetched[T0].offset == 5 and fetched[T1] == NO_OFFSET and fetched[T1].offset == -1
    assert store.fetch("unknown") == {}
    assert store.fetch("unknown", [T0]) == {T0: NO_OFFSET}


def test_a_later_commit_wins_even_if_acknowledged_first() -> None:
    store = OffsetStore()
    first = store.prepare_commit("g", {T0: OffsetAndMetadata(1)}, 1).append
    second = store.prepare_commit("g", {T0: OffsetAndMetadata(2)}, 2).append
    assert first is not None and second is not None
    store.on_appended(second.append_id)
    store.on_appended(first.append_id)
    assert offsets_of(store, "g") == {T0: 2}


def test_delete_offsets_of_some_topics() -> None:
    store = OffsetStore()
    commit(store, "g", {T0: 1, T1: 2, U0: 3})
    append = store.delete_offsets("g", ["t"])
    assert append is not None
    assert append.records == ((OffsetCommitKey("g", "t", 0), None), (OffsetCommitKey("g", "t", 1), None))
    assert offsets_of(store, "g") == {T0: 1, T1: 2, U0: 3}  # not before the tombstones are acknowledged
    store.on_appended(append.append_id)
    assert offsets_of(store, "g") == {U0: 3}
    assert store.delete_offsets("g", ["missing"]) is None


def test_delete_offsets_also_covers_a_commit_in_flight() -> None:
    store = OffsetStore()
    pending = store.prepare_commit("g", {T0: OffsetAndMetadata(4)}, 1).append
    tombstones = store.delete_offsets("g", ["t"])
    assert pending is not None and tombstones is not None
    assert tombstones.records == ((OffsetCommitKey("g", "t", 0), None),)
    store.on_appended(pending.append_id)
    store.on_appended(tombstones.append_id)
    assert store.fetch("g") == {}


def test_a_deleted_topic_takes_its_offsets_in_every_group_committed_in_flight_or_transactional() -> None:
    """Kafka's OffsetMetadataManager.onPartitionsDeleted: a tombstone for each group's offset of a deleted
    partition (the main store and pending transactional offsets); other topics keep theirs."""
    store = OffsetStore()
    commit(store, "g", {T0: 1, U0: 3})
    commit(store, "h", {T1: 8})
    in_flight = store.prepare_commit("i", {T0: OffsetAndMetadata(4)}, 1).append
    txn = store.prepare_txn_commit("j", 7, 0, {T1: OffsetAndMetadata(5)}, 1).append
    assert in_flight is not None and txn is not None
    store.on_appended(txn.append_id)  # acknowledged, waiting for its marker
    tombstones = store.on_partitions_deleted([T0, T1])
    assert tombstones is not None
    assert tombstones.records == tuple(
        (OffsetCommitKey(group, "t", p), None) for group, p in (("g", 0), ("h", 1), ("i", 0), ("j", 1))
    )
    store.on_appended(in_flight.append_id)
    store.on_appended(tombstones.append_id)
    store.on_txn_marker(7, committed=True)
    assert {g: offsets_of(store, g) for g in ("g", "h", "i", "j")} == {"g": {U0: 3}, "h": {}, "i": {}, "j": {}}
    assert store.on_partitions_deleted([T0, T1]) is None  # nothing left to delete


def test_delete_group_removes_all_its_offsets() -> None:
    store = OffsetStore()
    commit(store, "g", {T0: 1, U0: 3})
    commit(store, "h", {T0: 8})
    append = store.delete_group("g")
    assert append is not None and len(append.records) == 2
    assert all(value is None for _, value in append.records)
    store.on_appended(append.append_id)
    assert not store.has_offsets("g")
    assert store.groups() == {"h"}
    assert store.delete_group("g") is None


def test_replay_rebuilds_the_view_later_records_win_and_tombstones_delete() -> None:
    log: list[tuple[RecordKey, RecordValue | None]] = [
        (OffsetCommitKey("g", "t", 0), OffsetCommitValue(1, "", 10)),
        (OffsetCommitKey("g", "t", 1), OffsetCommitValue(2, "", 10)),
        (GroupMetadataKey("g"), GroupMetadataValue("consumer", 1, "range", "m", 10, ())),
        (OffsetCommitKey("g", "t", 0), OffsetCommitValue(5, "x", 20, 3)),
        (OffsetCommitKey("g", "t", 1), None),
        (OffsetCommitKey("h", "u", 0), OffsetCommitValue(9, "", 30)),
    ]
    store = OffsetStore()
    for key, value in log:
        # through the bytes, as a loading coordinator reads them
        store.replay(*decode_record(encode_key(key), encode_value(value)))
    assert store.fetch("g") == {T0: OffsetCommitValue(5, "x", 20, 3)}
    assert offsets_of(store, "h") == {U0: 9}
    # a commit after loading still wins over the replayed one
    commit(store, "g", {T0: 6})
    assert offsets_of(store, "g") == {T0: 6}


def test_replay_rejects_a_mismatched_value() -> None:
    with pytest.raises(TypeError):
        OffsetStore().replay(OffsetCommitKey("g", "t", 0), GroupMetadataValue("consumer", 1, None, None))


# ---- retention (KIP-211) ----


def expired_keys(store: OffsetStore, now: int, empty_since: dict[str, int | None]) -> set[tuple[str, str, int]]:
    append = store.expired(now, DAY, lambda group: empty_since.get(group, USE_COMMIT_TIMESTAMP))
    if append is None:
        return set()
    assert all(value is None for _, value in append.records)
    store.on_append_failed(append.append_id)  # only asking: the next question sees the same offsets
    return {(key.group, key.topic, key.partition) for key, _ in append.records}


def test_offsets_of_a_group_with_members_never_expire() -> None:
    store = OffsetStore()
    commit(store, "active", {T0: 1}, now=0)
    assert expired_keys(store, 100 * DAY, {"active": None}) == set()


def test_offsets_of_an_empty_group_expire_retention_after_it_became_empty() -> None:
    store = OffsetStore()
    commit(store, "g", {T0: 1}, now=0)
    commit(store, "g", {T1: 1}, now=5 * DAY)  # the commit time does not matter for a group that had members
    emptied = 3 * DAY
    assert expired_keys(store, emptied + DAY - 1, {"g": emptied}) == set()
    assert expired_keys(store, emptied + DAY, {"g": emptied}) == {("g", "t", 0), ("g", "t", 1)}


def test_offsets_of_a_standalone_consumer_expire_retention_after_each_commit() -> None:
    store = OffsetStore()
    commit(store, "simple", {T0: 1}, now=0)
    commit(store, "simple", {T1: 1}, now=DAY // 2)
    assert expired_keys(store, DAY - 1, {}) == set()
    assert expired_keys(store, DAY, {}) == {("simple", "t", 0)}
    assert expired_keys(store, DAY + DAY // 2, {}) == {("simple", "t", 0), ("simple", "t", 1)}


def test_expiry_takes_effect_when_acknowledged_and_spares_partitions_in_flight() -> None:
    store = OffsetStore()
    commit(store, "g", {T0: 1, T1: 1}, now=0)
    pending = store.prepare_commit("g", {T1: OffsetAndMetadata(2)}, DAY)
    append = store.expired(DAY, DAY, lambda group: USE_COMMIT_TIMESTAMP)
    assert append is not None
    assert append.records == ((OffsetCommitKey("g", "t", 0), None),)
    assert store.expired(DAY, DAY, lambda group: USE_COMMIT_TIMESTAMP) is None  # its tombstone is in flight
    store.on_appended(append.append_id)
    assert pending.append is not None
    store.on_appended(pending.append.append_id)
    assert offsets_of(store, "g") == {T1: 2}


def test_an_explicit_expire_timestamp_wins_once_the_group_has_no_members() -> None:
    store = OffsetStore()
    store.replay(OffsetCommitKey("g", "t", 0), OffsetCommitValue(1, "", commit_timestamp=0, expire_timestamp=50))
    assert expired_keys(store, 49, {"g": 0}) == set()
    assert expired_keys(store, 50, {"g": 0}) == {("g", "t", 0)}
    assert expired_keys(store, 50, {"g": None}) == set()


def test_the_default_retention_is_seven_days() -> None:
    assert DEFAULT_OFFSETS_RETENTION_MS == 7 * DAY

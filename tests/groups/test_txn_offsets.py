"""Transactional offset commits in the offset store and in the replay of the offsets log: pending per producer id
until the producer's marker, committed in the place of their own record (as compaction keeps the log), dropped on
ABORT, and left alone by retention."""

from __future__ import annotations

import pytest

from odradek.broker.groups.loader import ReplayStats, encode_records, replay_batches
from odradek.broker.groups.offsets import NO_OFFSET, USE_COMMIT_TIMESTAMP, Append, OffsetAndMetadata, OffsetStore
from odradek.broker.groups.records import GroupMetadataValue, OffsetCommitKey, OffsetCommitValue
from odradek.client.record.batch import read_batches
from odradek.client.record.builder import BatchBuilder
from odradek.client.record.control import ControlType, build_control_batch
from odradek.client.structs import TopicPartition

T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)
DAY = 24 * 60 * 60 * 1000


def plain(store: OffsetStore, group: str, offsets: dict[TopicPartition, int], now: int = 100) -> None:
    append = store.prepare_commit(group, {tp: OffsetAndMetadata(o) for tp, o in offsets.items()}, now).append
    assert append is not None
    store.on_appended(append.append_id)


def txn(
    store: OffsetStore, group: str, pid: int, offsets: dict[TopicPartition, int], now: int = 100, ack: bool = True
) -> Append:
    result = store.prepare_txn_commit(group, pid, 3, {tp: OffsetAndMetadata(o) for tp, o in offsets.items()}, now)
    assert result.append is not None
    if ack:
        store.on_appended(result.append.append_id)
    return result.append


def offsets_of(store: OffsetStore, group: str) -> dict[TopicPartition, int]:
    return {tp: v.offset for tp, v in store.fetch(group).items()}


# ---- the store ----


def test_a_transactional_commit_is_visible_only_after_its_commit_marker() -> None:
    store = OffsetStore()
    append = txn(store, "g", 7, {T0: 10}, ack=False)
    assert (append.producer_id, append.producer_epoch) == (7, 3)
    assert store.has_pending_txn("g", T0) and not store.has_pending_txn("g", T1)
    store.on_appended(append.append_id)
    assert store.fetch("g", [T0]) == {T0: NO_OFFSET}  # in the log, but its transaction is open
    assert store.has_pending_txn("g", T0) and store.has_pending("g") and store.groups() == {"g"}
    assert store.pending_txn_partitions("g") == {T0}
    assert store.on_txn_marker(7, committed=True) == [OffsetCommitKey("g", "t", 0)]
    assert offsets_of(store, "g") == {T0: 10}
    assert not store.has_pending_txn("g", T0) and not store.has_pending("g")
    assert store.on_txn_marker(7, committed=True) == []  # a retried marker changes nothing


def test_an_aborted_transaction_leaves_the_committed_offset_as_it_was() -> None:
    store = OffsetStore()
    plain(store, "g", {T0: 5})
    txn(store, "g", 7, {T0: 10, T1: 11})
    assert store.on_txn_marker(7, committed=False) == []
    assert offsets_of(store, "g") == {T0: 5}
    assert store.pending_producers() == set() and not store.has_pending_txn("g", T1)


def test_a_committed_transaction_wins_over_earlier_plain_commits_and_loses_to_later_ones() -> None:
    """Ordered by the records' places in the log, as compaction keeps them: a plain commit appended after the
    transactional one (even before the marker) stays."""
    store = OffsetStore()
    plain(store, "g", {T0: 5, T1: 5})
    txn(store, "g", 7, {T0: 10, T1: 10})
    plain(store, "g", {T1: 6})
    assert offsets_of(store, "g") == {T0: 5, T1: 6}
    assert store.on_txn_marker(7, committed=True) == [OffsetCommitKey("g", "t", 0)]
    assert offsets_of(store, "g") == {T0: 10, T1: 6}
    plain(store, "g", {T0: 12})  # and a later plain commit wins again
    assert offsets_of(store, "g") == {T0: 12, T1: 6}


def test_several_producers_are_kept_apart() -> None:
    store = OffsetStore()
    txn(store, "g", 1, {T0: 10})
    txn(store, "g", 2, {T0: 20, T1: 21})
    txn(store, "h", 1, {T1: 30})
    assert store.pending_producers() == {1, 2}
    store.on_txn_marker(2, committed=False)
    assert store.has_pending_txn("g", T0) and not store.has_pending_txn("g", T1)
    store.on_txn_marker(1, committed=True)
    assert offsets_of(store, "g") == {T0: 10} and offsets_of(store, "h") == {T1: 30}
    assert store.pending_producers() == set()


def test_a_later_commit_of_the_same_transaction_wins() -> None:
    store = OffsetStore()
    txn(store, "g", 7, {T0: 10})
    txn(store, "g", 7, {T0: 15})
    store.on_txn_marker(7, committed=True)
    assert offsets_of(store, "g") == {T0: 15}


@pytest.mark.parametrize("committed", [True, False])
def test_a_marker_reported_before_the_acknowledgement_decides_the_append_in_flight(committed: bool) -> None:
    store = OffsetStore()
    append = txn(store, "g", 7, {T0: 10}, ack=False)
    store.on_txn_marker(7, committed)
    assert not store.has_pending_txn("g", T0)
    store.on_appended(append.append_id)
    assert offsets_of(store, "g") == ({T0: 10} if committed else {})
    assert store.pending_producers() == set()


def test_a_failed_transactional_append_leaves_nothing_pending() -> None:
    store = OffsetStore()
    append = txn(store, "g", 7, {T0: 10}, ack=False)
    store.on_append_failed(append.append_id)
    assert not store.has_pending_txn("g", T0)
    store.on_txn_marker(7, committed=True)
    assert offsets_of(store, "g") == {}


def test_retention_leaves_partitions_with_pending_transactional_offsets_alone() -> None:
    store = OffsetStore()
    plain(store, "g", {T0: 1, T1: 1}, now=0)
    txn(store, "g", 7, {T0: 10}, now=0)
    expired = store.expired(8 * DAY, 7 * DAY, lambda group: USE_COMMIT_TIMESTAMP)
    assert expired is not None
    assert [key for key, _ in expired.records] == [OffsetCommitKey("g", "t", 1)]
    store.on_appended(expired.append_id)
    assert store.has_pending_txn("g", T0)
    store.on_txn_marker(7, committed=True)
    assert offsets_of(store, "g") == {T0: 10}


def test_a_tombstone_drops_the_pending_transactional_offsets_of_its_key() -> None:
    store = OffsetStore()
    txn(store, "g", 7, {T0: 10, T1: 11})
    tombstones = store.delete_partitions("g", [T0])
    assert tombstones is not None and tombstones.records == ((OffsetCommitKey("g", "t", 0), None),)
    store.on_appended(tombstones.append_id)
    assert not store.has_pending_txn("g", T0) and store.has_pending_txn("g", T1)
    store.on_txn_marker(7, committed=True)
    assert offsets_of(store, "g") == {T1: 11}


def test_delete_group_covers_its_pending_transactional_offsets() -> None:
    store = OffsetStore()
    txn(store, "g", 7, {T0: 10})
    append = store.delete_group("g")
    assert append is not None and append.records == ((OffsetCommitKey("g", "t", 0), None),)


def test_a_transactional_commit_needs_a_producer_id_and_epoch() -> None:
    store = OffsetStore()
    for pid, epoch in ((-1, 0), (1, -1), (1, 2**15)):
        with pytest.raises(ValueError):
            store.prepare_txn_commit("g", pid, epoch, {T0: OffsetAndMetadata(1)}, 1)


# ---- the loader ----


def rec(group: str, tp: TopicPartition, offset: int) -> tuple[OffsetCommitKey, OffsetCommitValue]:
    return OffsetCommitKey(group, tp.topic, tp.partition), OffsetCommitValue(offset, commit_timestamp=1)


def marker(pid: int, commit: bool) -> bytes:
    return build_control_batch(ControlType.COMMIT if commit else ControlType.ABORT, pid, 4, 0, 1)


def load(*batches: bytes) -> tuple[OffsetStore, ReplayStats]:
    store, stats = OffsetStore(), ReplayStats()
    groups: dict[str, GroupMetadataValue] = {}
    replay_batches(b"".join(batches), store, groups, stats)
    return store, stats


def test_a_transactional_batch_is_the_producers_without_a_sequence() -> None:
    [batch] = list(read_batches(encode_records([rec("g", T0, 1)], 5, producer_id=7, producer_epoch=3)))
    h = batch.header
    assert h.is_transactional and not h.is_control
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (7, 3, -1)
    [plain_batch] = list(read_batches(encode_records([rec("g", T0, 1)], 5)))
    assert not plain_batch.header.is_transactional and plain_batch.header.producer_id == -1


def test_replay_commits_and_aborts_transactions_at_their_markers() -> None:
    store, stats = load(
        encode_records([rec("g", T0, 5)], 1),
        encode_records([rec("g", T0, 10), rec("g", T1, 10)], 2, 7, 3),
        encode_records([rec("g", T0, 20)], 3, 8, 0),  # another producer, interleaved
        marker(8, commit=False),
        marker(7, commit=True),
    )
    assert offsets_of(store, "g") == {T0: 10, T1: 10}
    assert store.pending_producers() == set()
    assert stats.skipped == 0


def test_replay_orders_a_committed_transaction_by_its_record_as_compaction_would() -> None:
    txn_record = encode_records([rec("g", T0, 10)], 2, 7, 3)
    later_plain = encode_records([rec("g", T0, 12)], 3)
    full, _ = load(txn_record, later_plain, marker(7, commit=True))
    compacted, _ = load(later_plain, marker(7, commit=True))  # the cleaner kept only the key's last record
    assert offsets_of(full, "g") == offsets_of(compacted, "g") == {T0: 12}


def test_a_transaction_open_at_the_end_of_the_log_stays_pending_until_its_marker() -> None:
    store, _ = load(
        encode_records([rec("g", T0, 5)], 1),
        encode_records([rec("g", T0, 10)], 2, 7, 3),
    )
    assert offsets_of(store, "g") == {T0: 5}
    assert store.has_pending_txn("g", T0) and store.pending_producers() == {7}
    # a later marker (reported by the partition after the load) completes it; a new commit still wins after it
    store.on_txn_marker(7, committed=True)
    assert offsets_of(store, "g") == {T0: 10}
    plain(store, "g", {T0: 11})
    assert offsets_of(store, "g") == {T0: 11}


def test_a_group_with_only_pending_transactional_offsets_is_one_of_the_stores_groups() -> None:
    store, _ = load(encode_records([rec("h", T0, 10)], 2, 7, 3))
    assert store.groups() == {"h"} and store.has_pending("h") and store.fetch("h") == {}


def test_a_corrupt_control_record_is_skipped_and_counted() -> None:
    builder = BatchBuilder(producer_id=7, producer_epoch=0, is_transactional=True, is_control=True)
    builder.append(1, b"\x00", b"")
    store, stats = load(encode_records([rec("g", T0, 10)], 2, 7, 3), builder.build())
    assert stats.skipped == 1 and store.has_pending_txn("g", T0)

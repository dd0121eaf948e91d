import copy
from collections.abc import Callable
from pathlib import Path

import pytest

from odradek.broker.log.producer_state import (
    MAX_RETAINED_BATCHES,
    BatchMetadata,
    ProducerEntry,
    ProducerStateManager,
    increment_sequence,
)
from odradek.client.errors import ErrorCode, InvalidProducerEpochError, OutOfOrderSequenceError

PID = 1000
T0 = 1_700_000_000_000
MAX_SEQ = 2**31 - 1


def append(
    state: ProducerStateManager, pid: int, epoch: int, first_seq: int, count: int, first_offset: int, ts: int = T0
) -> BatchMetadata:
    """Check then update, as a leader appends a client batch of ``count`` records at ``first_offset``."""
    last_seq = increment_sequence(first_seq, count - 1)
    assert state.check(pid, epoch, first_seq, last_seq) is None
    state.update(pid, epoch, first_seq, last_seq, first_offset, first_offset + count - 1, ts)
    return BatchMetadata(first_seq, last_seq, first_offset, first_offset + count - 1, ts)


def six_batches(state: ProducerStateManager) -> list[BatchMetadata]:
    """Producer PID, epoch 0: one more batch of 10 records than are retained, from sequence 0 at offset 0."""
    return [append(state, PID, 0, 10 * i, 10, 10 * i, T0 + i) for i in range(MAX_RETAINED_BATCHES + 1)]


def snapshot_state(state: ProducerStateManager) -> dict[int, ProducerEntry]:
    return copy.deepcopy(dict(state.producers))


def test_duplicates_of_the_retained_batches_only(tmp_path: Path) -> None:
    state = ProducerStateManager(tmp_path)
    batches = six_batches(state)
    for b in batches[1:]:
        assert state.check(PID, 0, b.first_seq, b.last_seq) == b
    assert list(state.producers[PID].batches) == batches[1:]
    # the oldest is forgotten: a retry of it is no longer a duplicate but out of sequence
    with pytest.raises(OutOfOrderSequenceError):
        state.check(PID, 0, batches[0].first_seq, batches[0].last_seq)


def test_duplicate_needs_the_same_epoch_and_range(tmp_path: Path) -> None:
    state = ProducerStateManager(tmp_path)
    last = six_batches(state)[-1]
    with pytest.raises(OutOfOrderSequenceError):
        state.check(PID, 0, last.first_seq, last.first_seq + 5)  # same first sequence, different last
    with pytest.raises(OutOfOrderSequenceError):
        state.check(PID, 1, last.first_seq, last.last_seq)  # a new epoch must start at 0, whatever was retained


def test_in_sequence_batches_are_accepted(tmp_path: Path) -> None:
    state = ProducerStateManager(tmp_path)
    end = six_batches(state)[-1].last_seq + 1
    assert state.check(PID, 0, end, end) is None
    append(state, PID, 0, end, 1, end)
    assert state.producers[PID].last_seq == end
    assert state.map_end_offset == end + 1


@pytest.mark.parametrize("shift", [-1, 1, 40, -(10 * MAX_RETAINED_BATCHES + 10)])
def test_gap_or_overlap_is_out_of_order(tmp_path: Path, shift: int) -> None:
    state = ProducerStateManager(tmp_path)
    first_seq = six_batches(state)[-1].last_seq + 1 + shift
    with pytest.raises(OutOfOrderSequenceError) as e:
        state.check(PID, 0, first_seq, first_seq + 9)
    assert e.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_older_epoch_is_fenced(tmp_path: Path) -> None:
    state = ProducerStateManager(tmp_path)
    append(state, PID, 3, 0, 5, 0)
    with pytest.raises(InvalidProducerEpochError) as e:
        state.check(PID, 2, 5, 9)
    assert e.value.code == ErrorCode.INVALID_PRODUCER_EPOCH


def test_new_epoch_must_start_at_zero_and_clears_batches(tmp_path: Path) -> None:
    state = ProducerStateManager(tmp_path)
    six_batches(state)
    with pytest.raises(OutOfOrderSequenceError):
        state.check(PID, 1, 60, 60)
    new = append(state, PID, 1, 0, 3, 60)
    entry = state.producers[PID]
    assert entry.epoch == 1 and list(entry.batches) == [new]
    # epoch 0 is now fenced, even for what used to be a duplicate
    with pytest.raises(InvalidProducerEpochError):
        state.check(PID, 0, 50, 59)


def test_unknown_producer_accepts_any_sequence(tmp_path: Path) -> None:
    state = ProducerStateManager(tmp_path)
    six_batches(state)
    assert state.check(PID + 1, 7, 12345, 12350) is None
    append(state, PID + 1, 7, 12345, 6, 60)
    assert state.check(PID + 1, 7, 12351, 12351) is None
    assert len(state) == 2


def test_sequence_wraps_around_int32(tmp_path: Path) -> None:
    state = ProducerStateManager(tmp_path)
    wrapped = append(state, PID, 0, MAX_SEQ - 2, 5, 0)  # MAX-2 .. MAX, 0, 1
    assert wrapped.last_seq == 1
    assert state.check(PID, 0, MAX_SEQ - 2, 1) == wrapped
    assert state.check(PID, 0, 2, 2) is None
    append(state, PID, 0, 2, 1, 5)

    state = ProducerStateManager(tmp_path)
    append(state, PID, 0, MAX_SEQ, 1, 0)
    assert state.check(PID, 0, 0, 0) is None  # after 2**31 - 1 comes 0
    with pytest.raises(OutOfOrderSequenceError):
        state.check(PID, 0, MAX_SEQ + 1, MAX_SEQ + 1)


def test_check_does_not_mutate(tmp_path: Path) -> None:
    state = ProducerStateManager(tmp_path)
    last = six_batches(state)[-1]
    before, end = snapshot_state(state), state.map_end_offset
    nxt = last.last_seq + 1
    state.check(PID, 0, nxt, nxt + 9)  # valid new batch
    state.check(PID, 0, last.first_seq, last.last_seq)  # duplicate
    state.check(PID + 1, 0, 7, 7)  # unknown producer
    for args in [(PID, 0, nxt + 10, nxt + 19), (PID, 1, 5, 5), (PID, -1, 0, 0)]:
        with pytest.raises((OutOfOrderSequenceError, InvalidProducerEpochError)):
            state.check(*args)
    assert snapshot_state(state) == before and state.map_end_offset == end


def test_update_does_not_validate(tmp_path: Path) -> None:
    """Followers and replay apply whatever the log holds, including a lower epoch."""
    state = ProducerStateManager(tmp_path)
    append(state, PID, 5, 0, 1, 0)
    state.update(PID, 4, 17, 17, 1, 1, T0)
    entry = state.producers[PID]
    assert entry.epoch == 4 and entry.last_seq == 17 and len(entry.batches) == 1


def many_producers(state: ProducerStateManager) -> None:
    """Three producers, one with more than five batches, one across an epoch bump; offsets 0-99."""
    offset = 0
    for i in range(7):
        append(state, 1, 0, 2 * i, 2, offset, T0 + offset)
        offset += 2
    append(state, 2, 3, 0, 10, offset, T0 + offset)
    offset += 10
    append(state, 2, 4, 0, 20, offset, T0 + offset)
    offset += 20
    append(state, 3, 0, MAX_SEQ - 4, 10, offset, T0 + offset)
    state.map_end_offset = 100


def test_snapshot_round_trip(tmp_path: Path) -> None:
    state = ProducerStateManager(tmp_path)
    many_producers(state)
    path = state.take_snapshot()
    assert path.name == "00000000000000000100.snapshot"
    assert state.snapshot_offsets() == [100]
    assert not list(tmp_path.glob("*.tmp"))

    loaded = ProducerStateManager(tmp_path)
    assert loaded.load(0, 100) == 100
    assert loaded.map_end_offset == 100
    assert dict(loaded.producers) == dict(state.producers)
    assert list(loaded.producers[1].batches) == list(state.producers[1].batches)[-MAX_RETAINED_BATCHES:]
    # duplicate detection survives the restart for all retained batches
    for b in loaded.producers[1].batches:
        assert loaded.check(1, 0, b.first_seq, b.last_seq) == b
    assert loaded.check(3, 0, 5, 5) is None  # the wrapped sequence continues


def test_empty_snapshot_round_trip(tmp_path: Path) -> None:
    state = ProducerStateManager(tmp_path)
    state.map_end_offset = 42
    state.take_snapshot()
    loaded = ProducerStateManager(tmp_path)
    assert loaded.load(0, 50) == 42
    assert len(loaded) == 0


def test_load_without_snapshot_replays_from_log_start(tmp_path: Path) -> None:
    state = ProducerStateManager(tmp_path)
    six_batches(state)
    assert state.load(7, 60) == 7  # also replaces the in-memory state
    assert len(state) == 0 and state.map_end_offset == 7


def two_snapshots(tmp_path: Path) -> tuple[ProducerStateManager, dict[int, ProducerEntry]]:
    """Snapshots at 30 (producer PID, three batches) and 60 (six batches); returns the state at 30."""
    state = ProducerStateManager(tmp_path)
    for i in range(3):
        append(state, PID, 0, 10 * i, 10, 10 * i, T0 + i)
    at_30 = snapshot_state(state)
    state.take_snapshot()
    for i in range(3, 6):
        append(state, PID, 0, 10 * i, 10, 10 * i, T0 + i)
    state.take_snapshot()
    assert state.snapshot_offsets() == [30, 60]
    return state, at_30


def snapshot_path(tmp_path: Path, offset: int) -> Path:
    return tmp_path / f"{offset:020d}.snapshot"


@pytest.mark.parametrize(
    "damage",
    [
        lambda data: data[: len(data) // 2],  # torn
        lambda data: data[:3],  # torn inside the header
        lambda data: b"",
        lambda data: data[:-10] + bytes([data[-10] ^ 0x01]) + data[-9:],  # bit flip
        lambda data: b"\x00\x63" + data[2:],  # unknown version
        lambda data: data + b"\x00",  # trailing garbage
    ],
)
def test_corrupt_snapshot_is_ignored_and_deleted(tmp_path: Path, damage: Callable[[bytes], bytes]) -> None:
    _, at_30 = two_snapshots(tmp_path)
    newest = snapshot_path(tmp_path, 60)
    newest.write_bytes(damage(newest.read_bytes()))

    loaded = ProducerStateManager(tmp_path)
    assert loaded.load(0, 60) == 30
    assert dict(loaded.producers) == at_30
    assert loaded.snapshot_offsets() == [30]


def test_misnamed_snapshot_is_corrupt(tmp_path: Path) -> None:
    two_snapshots(tmp_path)
    snapshot_path(tmp_path, 30).rename(snapshot_path(tmp_path, 45))
    loaded = ProducerStateManager(tmp_path)
    assert loaded.load(0, 50) == 0
    assert len(loaded) == 0
    assert loaded.snapshot_offsets() == []  # 45 is corrupt, 60 above the log end


def test_load_deletes_snapshots_above_log_end(tmp_path: Path) -> None:
    _, at_30 = two_snapshots(tmp_path)
    loaded = ProducerStateManager(tmp_path)
    assert loaded.load(0, 59) == 30
    assert dict(loaded.producers) == at_30
    assert loaded.snapshot_offsets() == [30]


def test_load_drops_producers_below_log_start(tmp_path: Path) -> None:
    state = ProducerStateManager(tmp_path)
    many_producers(state)  # producer 1 at 0-13, producer 2 at 14-43, producer 3 at 44-53
    state.take_snapshot()
    loaded = ProducerStateManager(tmp_path)
    assert loaded.load(44, 100) == 100
    assert sorted(loaded.producers) == [3]
    assert loaded.load(43, 100) == 100
    assert sorted(loaded.producers) == [2, 3]  # producer 2's last batch ends at 43
    # a snapshot below the log start: replay starts at the log start, the batches before it are gone
    assert loaded.load(120, 130) == 120
    assert len(loaded) == 0


def test_truncate_then_reload_and_replay(tmp_path: Path) -> None:
    state, at_30 = two_snapshots(tmp_path)
    state.truncate(40)
    assert state.snapshot_offsets() == [30]
    assert len(state) == 0 and state.map_end_offset == 0

    # the caller's contract: load, then replay the batches from the returned offset to the log end (30-39)
    assert state.load(0, 40) == 30
    assert dict(state.producers) == at_30
    state.update(PID, 0, 30, 39, 30, 39, T0 + 3)
    state.map_end_offset = 40
    assert state.check(PID, 0, 40, 49) is None
    assert state.check(PID, 0, 30, 39) is not None  # duplicate
    with pytest.raises(OutOfOrderSequenceError):
        state.check(PID, 0, 50, 59)  # the truncated batch's successor no longer follows


def test_truncate_keeps_snapshot_at_the_offset(tmp_path: Path) -> None:
    state, _ = two_snapshots(tmp_path)
    state.truncate(30)
    assert state.snapshot_offsets() == [30]
    state.truncate(29)
    assert state.snapshot_offsets() == []
    assert state.load(0, 29) == 0 and len(state) == 0


def test_delete_snapshots_below_keeps_the_newest_at_or_below(tmp_path: Path) -> None:
    state = ProducerStateManager(tmp_path)
    for offset in (10, 20, 30, 40):
        state.map_end_offset = offset
        state.take_snapshot()
    state.delete_snapshots_below(5)
    assert state.snapshot_offsets() == [10, 20, 30, 40]
    state.delete_snapshots_below(25)
    assert state.snapshot_offsets() == [20, 30, 40]
    state.delete_snapshots_below(30)
    assert state.snapshot_offsets() == [30, 40]


def test_snapshot_offsets_ignores_other_files(tmp_path: Path) -> None:
    state = ProducerStateManager(tmp_path)
    state.map_end_offset = 7
    state.take_snapshot()
    for name in (
        "00000000000000000000.log",
        "leader-epoch-checkpoint",
        "x.snapshot",
        "00000000000000000009.snapshot.tmp",
    ):
        (tmp_path / name).write_bytes(b"")
    assert state.snapshot_offsets() == [7]


def test_expiry(tmp_path: Path) -> None:
    state = ProducerStateManager(tmp_path, expiration_ms=1000)
    append(state, 1, 0, 0, 1, 0, ts=T0)
    append(state, 2, 0, 0, 1, 1, ts=T0 + 500)
    append(state, 1, 0, 1, 1, 2, ts=T0 + 100)  # producer 1 last wrote at T0 + 100
    assert state.remove_expired(T0 + 1099) == 0
    assert state.remove_expired(T0 + 1100) == 1
    assert sorted(state.producers) == [2]
    assert state.remove_expired(T0 + 10_000) == 1
    assert len(state) == 0
    # an expired producer is unknown: it may continue from any sequence
    assert state.check(1, 0, 99, 99) is None


def test_producers_view_is_read_only(tmp_path: Path) -> None:
    state = ProducerStateManager(tmp_path)
    append(state, PID, 0, 0, 1, 0)
    with pytest.raises(TypeError):
        state.producers[PID + 1] = state.producers[PID]  # type: ignore[index]


def test_snapshot_v2_round_trips_transactions(tmp_path: Path) -> None:
    from odradek.client.record.control import ControlMarker, ControlType

    state = ProducerStateManager(tmp_path)
    state.update(PID, 0, 0, 1, 0, 1, T0, is_transactional=True)
    state.update(PID + 1, 3, 0, 0, 2, 2, T0, is_transactional=True)
    done = state.update(PID + 1, 4, -1, -1, 3, 3, T0, marker=ControlMarker(ControlType.ABORT, 7))
    assert done is not None and done.is_aborted and done.first_offset == 2
    state.take_snapshot()
    loaded = ProducerStateManager(tmp_path)
    assert loaded.load(0, 4) == 4
    assert snapshot_state(loaded) == snapshot_state(state)
    assert loaded.ongoing_transaction(PID) == 0
    assert loaded.producers[PID + 1].epoch == 4 and loaded.producers[PID + 1].coordinator_epoch == 7
    assert not loaded.producers[PID + 1].batches  # the marker's new epoch forgot the old batches
    assert loaded.first_unstable_offset == 0
    loaded.on_high_watermark(4)
    assert loaded.first_unstable_offset == 0  # PID's transaction is still open
    state.update(PID, 1, -1, -1, 4, 4, T0, marker=ControlMarker(ControlType.COMMIT, 7))
    state.take_snapshot()
    reloaded = ProducerStateManager(tmp_path)
    reloaded.load(0, 5)
    assert reloaded.first_unstable_offset == 0  # the commit marker (offset 4) is not below the high watermark
    reloaded.on_high_watermark(5)
    assert reloaded.first_unstable_offset is None


def test_a_version_1_snapshot_still_loads(tmp_path: Path) -> None:
    import struct

    from crc32c import crc32c

    body = struct.pack(">qi", 20, 1) + struct.pack(">qhqB", PID, 2, T0, 1) + struct.pack(">iiqqq", 0, 9, 10, 19, T0)
    snapshot_path(tmp_path, 20).write_bytes(struct.pack(">hI", 1, crc32c(body)) + body)
    state = ProducerStateManager(tmp_path)
    assert state.load(0, 20) == 20
    entry = state.producers[PID]
    assert (entry.epoch, entry.last_seq, entry.last_offset, entry.coordinator_epoch) == (2, 9, 19, -1)
    assert entry.txn_first_offset is None and state.first_unstable_offset is None
    assert state.check(PID, 2, 10, 12) is None  # the sequence continues

"""The log with producer state: duplicates acknowledged with their original offsets, sequence and epoch errors,
and the state rebuilt after a clean or unclean restart and after truncation."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from odradek.broker.log.config import LogConfig
from odradek.broker.log.log import Log
from odradek.broker.log.producer_state import MAX_RETAINED_BATCHES
from odradek.client.errors import InvalidProducerEpochError, InvalidRecordError, OutOfOrderSequenceError
from odradek.client.record.builder import encode_batch

PID = 4000
TS = int(time.time() * 1000)  # producer state expires by batch timestamps against the clock


def batch(seq: int, count: int = 2, epoch: int = 0, pid: int = PID, tag: str = "r") -> bytes:
    values = [f"{tag}-{seq + i}".encode() for i in range(count)]
    return encode_batch(values, timestamps=TS, producer_id=pid, producer_epoch=epoch, base_sequence=seq)


def open_log(directory: Path, **kwargs) -> Log:
    return Log.open(directory / "t-0", LogConfig(segment_bytes=4096), **kwargs)


def test_a_retried_batch_is_acknowledged_with_its_original_offsets_and_not_appended(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    first = log.append_as_leader(batch(0), 0)
    log.append_as_leader(encode_batch([b"other"], timestamps=TS), 0)  # a non-idempotent producer in between
    second = log.append_as_leader(batch(2), 0)
    end = log.log_end_offset
    again = log.append_as_leader(batch(0), 0)
    assert (again.first_offset, again.last_offset, again.batch_count) == (first.first_offset, first.last_offset, 0)
    assert log.append_as_leader(batch(2), 0).first_offset == second.first_offset
    assert log.log_end_offset == end


def test_sequence_gaps_old_epochs_and_shared_records_are_refused_without_appending(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(batch(0), 0)
    with pytest.raises(OutOfOrderSequenceError):
        log.append_as_leader(batch(5), 0)
    log.append_as_leader(batch(0, epoch=1), 0)  # a bumped epoch starts again at 0
    with pytest.raises(InvalidProducerEpochError):
        log.append_as_leader(batch(2, epoch=0), 0)
    assert log.log_end_offset == 4


def test_several_batches_of_a_producer_append_together_when_their_sequences_chain(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    together = log.append_as_leader(batch(0) + batch(2) + batch(4), 0)
    assert (together.first_offset, together.last_offset, together.batch_count) == (0, 5, 3)
    # Each is remembered on its own: a retry of the middle one (sent alone) gets its original offsets.
    assert log.append_as_leader(batch(2), 0).first_offset == 2
    with pytest.raises(OutOfOrderSequenceError):
        log.append_as_leader(batch(6) + batch(9), 0)  # a gap inside the request
    with pytest.raises(InvalidRecordError):
        log.append_as_leader(batch(4) + batch(6), 0)  # a duplicate must come alone
    with pytest.raises(InvalidRecordError):  # more than are remembered
        log.append_as_leader(b"".join(batch(seq) for seq in range(6, 6 + 2 * (MAX_RETAINED_BATCHES + 1), 2)), 0)
    with pytest.raises(InvalidRecordError):
        log.append_as_leader(batch(6) + batch(0, pid=PID + 1), 0)
    assert log.log_end_offset == 6


def test_state_survives_clean_and_unclean_restarts(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    originals = [log.append_as_leader(batch(seq, count=20), 0).first_offset for seq in range(0, 400, 20)]
    assert log.num_segments > 1  # rolls took snapshots
    log.close()
    log = open_log(tmp_path, clean_shutdown=True, recovery_point=log.recovery_point)
    assert log.append_as_leader(batch(380, count=20), 0).first_offset == originals[-1]
    log.append_as_leader(batch(400, count=20), 0)
    # Crash: no close, so the newest snapshot is the last roll's and the rest is replayed from the log.
    crashed = open_log(tmp_path)
    assert crashed.append_as_leader(batch(400, count=20), 0).batch_count == 0
    assert crashed.append_as_leader(batch(360, count=20), 0).first_offset == originals[-2]
    with pytest.raises(OutOfOrderSequenceError):
        crashed.append_as_leader(batch(460, count=20), 0)


def test_truncation_forgets_the_batches_it_removes(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(batch(0), 0)
    kept_end = log.log_end_offset
    log.append_as_leader(batch(2), 0)
    log.truncate_to(kept_end)
    # The removed batch is new again (a follower truncated its divergent tail; the producer retries it).
    retried = log.append_as_leader(batch(2), 1)
    assert retried.batch_count == 1 and retried.first_offset == kept_end


def test_followers_build_the_state_a_new_leader_deduplicates_with(tmp_path: Path) -> None:
    leader, follower = open_log(tmp_path / "a"), open_log(tmp_path / "b")
    for seq in (0, 2, 4):
        leader.append_as_leader(batch(seq), 0)
    follower.append_as_follower(bytes(leader.read(0, 1 << 20).records))
    # The follower becomes leader; the producer retries its last batch.
    assert follower.append_as_leader(batch(4), 1).first_offset == 4
    assert follower.log_end_offset == 6

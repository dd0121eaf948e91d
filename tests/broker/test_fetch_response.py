"""The follower's rule for one partition's Fetch answer (``decide``), and its application to a real replica."""

from __future__ import annotations

from pathlib import Path

import pytest

from odradek.broker.fetch_response import (
    Append,
    FetchedPartition,
    FetchPosition,
    Refused,
    RestartAt,
    Stale,
    Truncate,
    apply_fetched,
    decide,
    position_of,
)
from odradek.broker.log.log import Log, UnexpectedAppendOffsetError
from odradek.broker.partition import Divergence, Partition
from odradek.broker.replication import IsrChange
from odradek.client.common.metadata_image import PartitionRegistration
from odradek.client.errors import ErrorCode, OffsetOutOfRangeError
from odradek.client.record.builder import encode_batch

AT = FetchPosition(fetch_offset=100, last_fetched_epoch=3, leader_epoch=3)
DATA = FetchedPartition(ErrorCode.NONE, b"records", high_watermark=90, log_start_offset=0, log_end_offset=120)


@pytest.mark.parametrize(
    "now",
    [
        FetchPosition(0, -1, 3),  # truncated or restarted meanwhile
        FetchPosition(100, 2, 3),  # same offset, other epoch history
        FetchPosition(100, 3, 4),  # a new leader epoch
        FetchPosition(102, 3, 3),  # appended meanwhile
    ],
)
def test_any_move_since_the_request_makes_the_answer_stale(now: FetchPosition) -> None:
    for answer in (
        DATA,
        DATA._replace(diverging=Divergence(2, 50)),
        FetchedPartition(ErrorCode.OFFSET_OUT_OF_RANGE, log_start_offset=200, log_end_offset=300),
        FetchedPartition(ErrorCode.NOT_LEADER_OR_FOLLOWER),
    ):
        assert decide(AT, now, answer) == Stale(AT, now)


def test_an_answer_to_the_current_position() -> None:
    assert decide(AT, AT, DATA) == Append(b"records", 90, 120, 0)
    assert decide(AT, AT, DATA._replace(diverging=Divergence(2, 50))) == Truncate(Divergence(2, 50))
    out_of_range = FetchedPartition(ErrorCode.OFFSET_OUT_OF_RANGE, log_start_offset=200, log_end_offset=300)
    assert decide(AT, AT, out_of_range) == RestartAt(200)
    ahead = FetchedPartition(ErrorCode.OFFSET_OUT_OF_RANGE, log_start_offset=0, log_end_offset=60)
    assert decide(AT, AT, ahead) == Truncate(Divergence(-1, 60))
    refused = FetchedPartition(ErrorCode.FENCED_LEADER_EPOCH)
    assert decide(AT, AT, refused) == Refused(ErrorCode.FENCED_LEADER_EPOCH)


def test_a_stale_answer_leaves_no_hole_on_the_replica(tmp_path: Path) -> None:
    """Offsets 100..101 fetched for a follower at 100 that has since restarted at 0: nothing is appended, whether
    the fetcher checks the position (``apply_fetched``) or the records reach the log anyway."""
    state = PartitionRegistration(b"\x07" * 16, 0, (2, 1), (2, 1), 2, 3, 0)
    leader = Partition("t", 0, Log.open(tmp_path / "b2" / "t-0"), 2)
    follower = Partition("t", 0, Log.open(tmp_path / "b1" / "t-0"), 1)
    for p in (leader, follower):
        p.update(state, 1, 0)
    leader.append_as_leader(encode_batch([b"x"] * 100, timestamps=1_000))
    leader.append_as_leader(encode_batch([b"tail"] * 2, timestamps=1_000))
    read = leader.read_for_follower(1, 100, 3, 1 << 20, 3, 0)
    assert read.data is not None
    stale = FetchedPartition(ErrorCode.NONE, bytes(read.data.records), read.high_watermark, 0, 102)
    sent = FetchPosition(100, 3, 3)

    assert position_of(follower) == FetchPosition(0, -1, 3)
    assert apply_fetched(follower, sent, stale) == Stale(sent, FetchPosition(0, -1, 3))
    with pytest.raises(UnexpectedAppendOffsetError):
        follower.append_as_follower(stale.records, stale.high_watermark)
    assert follower.log.log_end_offset == 0

    current = position_of(follower)
    read = leader.read_for_follower(1, current.fetch_offset, current.last_fetched_epoch, 1 << 20, 3, 0)
    assert read.data is not None
    fresh = FetchedPartition(ErrorCode.NONE, bytes(read.data.records), read.high_watermark, 0, 102)
    assert isinstance(apply_fetched(follower, current, fresh), Append)
    assert follower.log.log_end_offset == 102
    # the leader counts the follower as holding only what it really has
    leader.read_for_follower(1, *follower.fetch_position(), 1 << 20, 3, 0)
    assert leader.leader_state is not None and leader.leader_state.followers[1].log_end_offset == 102


def round_trip(leader: Partition, follower: Partition, replica_id: int = 1) -> object:
    """One fetch of ``follower`` from ``leader``, answered as the leader's data plane answers it (an out-of-range
    offset becomes OFFSET_OUT_OF_RANGE with the leader's log start and end), and applied as the fetcher does."""
    sent = position_of(follower)
    try:
        read = leader.read_for_follower(
            replica_id, sent.fetch_offset, sent.last_fetched_epoch, 1 << 20, sent.leader_epoch, 0,
            follower.log.log_start_offset,
        )  # fmt: skip
    except OffsetOutOfRangeError:
        log = leader.log
        answer = FetchedPartition(ErrorCode.OFFSET_OUT_OF_RANGE, b"", -1, log.log_start_offset, log.log_end_offset)
    else:
        assert read.data is not None and read.diverging is None
        answer = FetchedPartition(
            ErrorCode.NONE, bytes(read.data.records), read.high_watermark, read.log_start_offset, read.log_end_offset
        )
    return apply_fetched(follower, sent, answer)


def test_a_replica_restarted_at_a_midbatch_log_start_catches_up(tmp_path: Path) -> None:
    """DeleteRecords into a batch, then a new (or emptied) replica: it restarts at the leader's log start, takes the
    batch holding it whole, reaches the leader's end and joins the ISR, with the leader's open transaction."""
    state = PartitionRegistration(b"\x07" * 16, 0, (2, 1), (2,), 2, 3, 0)
    leader = Partition("t", 0, Log.open(tmp_path / "b2" / "t-0"), 2)
    changes: list[IsrChange] = []
    leader.request_isr_change = lambda _p, change: changes.append(change)
    follower = Partition("t", 0, Log.open(tmp_path / "b1" / "t-0"), 1)
    for p in (leader, follower):
        p.update(state, 1, 0)
    txn = encode_batch(
        [b"t%d" % i for i in range(10)], timestamps=1_000, producer_id=9, producer_epoch=0, base_sequence=0,
        is_transactional=True,
    )  # fmt: skip
    leader.append_as_leader(txn)  # 0..9, left open
    leader.append_as_leader(encode_batch([b"p%d" % i for i in range(10)], timestamps=1_000))  # 10..19
    assert leader.delete_records(5) == 5

    assert round_trip(leader, follower) == RestartAt(5)
    assert isinstance(round_trip(leader, follower), Append)
    assert (follower.log.log_start_offset, follower.log.log_end_offset, follower.log.high_watermark) == (5, 20, 20)
    assert follower.log.first_unstable_offset == leader.log.first_unstable_offset == 5
    assert isinstance(round_trip(leader, follower), Append)  # reports its end: the leader asks to add it
    assert [c.new_isr for c in changes] == [(2, 1)]
    for p in (leader, follower):
        p.log.close()

"""DeleteRecords on real logs wired by direct calls: the leader advances its log start only up to the high
watermark, followers take it from their fetch answers, and the answer waits until every ISR replica has."""

from __future__ import annotations

from pathlib import Path

import pytest

from odradek.broker.delete_records import check_topic
from odradek.broker.fetch_response import Append, FetchedPartition, apply_fetched, position_of
from odradek.broker.log.log import Log
from odradek.broker.partition import HIGH_WATERMARK, Partition
from odradek.broker.replication import LeaderState
from odradek.client.common.metadata_image import PartitionRegistration
from odradek.client.errors import ErrorCode, OdradekError, OffsetOutOfRangeError
from odradek.client.record.builder import encode_batch

TOPIC_ID = b"\x07" * 16


def state(isr: tuple[int, ...] = (2, 1), leader: int = 2, leader_epoch: int = 3, partition_epoch: int = 0):
    return PartitionRegistration(TOPIC_ID, 0, (2, 1), isr, leader, leader_epoch, partition_epoch)


def fetch(leader: Partition, follower: Partition) -> None:
    """One follower fetch round: the request carries its position and log start, the answer is applied."""
    sent = position_of(follower)
    read = leader.read_for_follower(
        1, sent.fetch_offset, sent.last_fetched_epoch, 1 << 20, 3, 0, follower.log.log_start_offset
    )
    assert read.data is not None
    answer = FetchedPartition(
        ErrorCode.NONE, bytes(read.data.records), read.high_watermark, read.log_start_offset, read.log_end_offset
    )
    assert isinstance(apply_fetched(follower, sent, answer), Append)


@pytest.fixture
def pair(tmp_path: Path) -> tuple[Partition, Partition]:
    """Leader 2 and follower 1 holding offsets 0..9, all committed (high watermark 10 on both)."""
    leader = Partition("t", 0, Log.open(tmp_path / "b2" / "t-0"), 2)
    follower = Partition("t", 0, Log.open(tmp_path / "b1" / "t-0"), 1)
    for p in (leader, follower):
        p.update(state(), 1, 0)
    leader.append_as_leader(encode_batch([b"x"] * 10, timestamps=1_000))
    fetch(leader, follower)  # replicates 0..9
    fetch(leader, follower)  # reports 10: the high watermark moves, and reaches the follower
    assert leader.log.high_watermark == follower.log.high_watermark == 10
    return leader, follower


async def test_the_answer_waits_until_every_isr_replica_starts_at_the_offset(pair) -> None:
    leader, follower = pair
    assert leader.delete_records(4) == 4
    assert leader.log.log_start_offset == 4
    waiter = leader.wait_for_low_watermark(4)
    assert not waiter.done() and leader.low_watermark() == 0  # the follower still starts at 0
    fetch(leader, follower)  # the answer carries the leader's log start: the follower takes it
    assert follower.log.log_start_offset == 4 and not waiter.done()
    fetch(leader, follower)  # its next fetch reports it
    assert waiter.done() and waiter.result() == (ErrorCode.NONE, 4)
    assert leader.low_watermark() == 4
    with pytest.raises(OffsetOutOfRangeError):
        follower.log.read(2, 1 << 20)  # consumers below the new start are out of range on every replica


async def test_only_committed_records_can_be_deleted(pair) -> None:
    leader, follower = pair
    leader.append_as_leader(encode_batch([b"y"] * 5, timestamps=1_000))  # 10..14, not replicated yet
    with pytest.raises(OffsetOutOfRangeError, match="the high watermark is 10"):
        leader.delete_records(11)
    with pytest.raises(OffsetOutOfRangeError):
        leader.delete_records(-2)
    assert leader.log.log_start_offset == 0
    assert leader.delete_records(HIGH_WATERMARK) == 10  # -1: up to the high watermark
    assert leader.log.log_start_offset == 10
    assert leader.delete_records(3) == 3  # below the log start: nothing changes, and nothing to wait for
    assert leader.log.log_start_offset == 10
    with pytest.raises(OdradekError) as e:
        follower.delete_records(5)
    assert e.value.code == ErrorCode.NOT_LEADER_OR_FOLLOWER


async def test_a_replica_leaving_the_isr_no_longer_holds_the_answer_back(pair) -> None:
    leader, _follower = pair
    leader.delete_records(6)
    waiter = leader.wait_for_low_watermark(6)
    assert not waiter.done()
    leader.update(state(isr=(2,), partition_epoch=1), 1, 0)
    assert waiter.done() and waiter.result() == (ErrorCode.NONE, 6)
    # The follower rejoins before it has reported its new log start: the answer keeps the low watermark reached.
    leader.update(state(isr=(2, 1), partition_epoch=2), 1, 0)
    assert leader.low_watermark() < 6 and waiter.result().low_watermark == 6


async def test_losing_leadership_answers_not_leader(pair) -> None:
    leader, _follower = pair
    leader.delete_records(6)
    waiter = leader.wait_for_low_watermark(6)
    leader.update(state(leader=1, leader_epoch=4), 1, 0)
    assert waiter.done() and waiter.result().error == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_the_low_watermark_is_the_lowest_isr_log_start() -> None:
    s = LeaderState(1, 0, 0, (1, 2, 3), (1, 2), 0, 0, 1, 0)
    assert s.low_watermark(5) == -1  # follower 2 has not reported yet
    s.on_follower_fetch(2, 10, 10, 0, log_start_offset=4)
    s.on_follower_fetch(3, 10, 10, 0, log_start_offset=0)  # out of the ISR: does not count
    assert s.low_watermark(5) == 4
    assert s.low_watermark(3) == 3


@pytest.mark.parametrize(
    ("topic", "policies", "refused"),
    [
        ("t", {"delete"}, False),
        ("t", {"compact", "delete"}, False),
        ("t", {"compact"}, True),
        ("__consumer_offsets", {"compact"}, True),
    ],
)
def test_compacted_and_internal_topics_are_refused(topic: str, policies: set[str], refused: bool) -> None:
    if not refused:
        check_topic(topic, policies)
        return
    with pytest.raises(OdradekError) as e:
        check_topic(topic, policies)
    assert e.value.code == ErrorCode.POLICY_VIOLATION


async def test_a_new_leader_catching_up_answers_offset_not_available(pair) -> None:
    """Its high watermark (10) lags the start of its epoch (15): trimming against it could refuse an offset every
    client has seen committed, or (-1) trim less than asked."""
    leader, _follower = pair
    leader.append_as_leader(encode_batch([b"y"] * 5, timestamps=1_000))  # 10..14, not committed yet
    leader.update(state(leader_epoch=4), 1, 0)  # leads again at a new epoch starting at 15, high watermark 10
    with pytest.raises(OdradekError) as e:
        leader.delete_records(HIGH_WATERMARK)
    assert e.value.code == ErrorCode.OFFSET_NOT_AVAILABLE
    assert leader.log.log_start_offset == 0

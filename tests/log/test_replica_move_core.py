"""The decisions of a replica moving between log dirs, without I/O (broker/log/replica_move.py, future_dirs.py):
each AlterReplicaLogDirs answer as Kafka's ReplicaManager gives it, each copy round's action, the copy throttle
(replica.alter.log.dirs.io.max.bytes.per.second) on simulated time, and the rule that settles at start what a crash
left of a move."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from odradek.broker.log.future_dirs import FutureFound, Settle, future_dir_name, parse_future_dir, settle
from odradek.broker.log.replica_move import (
    UNDEFINED_EPOCH,
    UNTHROTTLED,
    Append,
    CaughtUp,
    CopyThrottle,
    Decision,
    FutureCopy,
    Grant,
    Placement,
    Position,
    StartAt,
    Truncate,
    decide,
)
from odradek.client.errors import ErrorCode

A, B, C = Path("/d/a"), Path("/d/b"), Path("/d/c")
ON_A = Placement(known=True, current_dir=A, current_offline=False, future_dir=None)


# -- the request ----------------------------------------------------------------------------------------------


def test_a_destination_that_is_not_a_log_dir_is_log_dir_not_found() -> None:
    assert decide("t", 0, None, False, False, ON_A) == Decision(ErrorCode.LOG_DIR_NOT_FOUND)


def test_an_offline_destination_or_replica_is_a_storage_error() -> None:
    assert decide("t", 0, B, False, True, ON_A) == Decision(ErrorCode.KAFKA_STORAGE_ERROR)
    offline = ON_A._replace(current_offline=True)
    assert decide("t", 0, B, True, True, offline) == Decision(ErrorCode.KAFKA_STORAGE_ERROR)


def test_a_replica_not_hosted_here_keeps_the_destination_for_when_it_comes() -> None:
    absent = Placement(known=True, current_dir=None, current_offline=False, future_dir=None)
    assert decide("t", 0, B, True, False, absent) == Decision(ErrorCode.REPLICA_NOT_AVAILABLE, prefer=B)
    unknown = absent._replace(known=False)
    assert decide("t", 0, B, True, False, unknown) == Decision(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, prefer=B)


def test_the_current_dir_is_a_no_op_and_cancels_a_move_elsewhere() -> None:
    assert decide("t", 0, A, True, False, ON_A) == Decision(ErrorCode.NONE)
    moving = ON_A._replace(future_dir=B)
    assert decide("t", 0, A, True, False, moving) == Decision(ErrorCode.NONE, cancel=True)


def test_a_move_starts_once_and_a_new_destination_replaces_it() -> None:
    assert decide("t", 0, B, True, False, ON_A) == Decision(ErrorCode.NONE, start=B)
    moving = ON_A._replace(future_dir=B)
    assert decide("t", 0, B, True, False, moving) == Decision(ErrorCode.NONE)  # already on its way
    assert decide("t", 0, C, True, False, moving) == Decision(ErrorCode.NONE, cancel=True, start=C)


def test_no_future_log_is_created_while_a_dir_is_offline() -> None:
    # Kafka creates no log while any log dir is offline; the move to B elsewhere is still cancelled.
    moving = ON_A._replace(future_dir=C)
    assert decide("t", 0, B, True, True, moving) == Decision(ErrorCode.KAFKA_STORAGE_ERROR, cancel=True)


def test_a_topic_name_too_long_for_a_future_dir_is_refused() -> None:
    assert decide("x" * 249, 0, B, True, False, ON_A).error == ErrorCode.INVALID_TOPIC_EXCEPTION
    assert decide("x" * 213, 7, B, True, False, ON_A).error == ErrorCode.NONE  # 255 characters: the limit
    assert decide("x" * 213, 17, B, True, False, ON_A).error == ErrorCode.INVALID_TOPIC_EXCEPTION


# -- the copy -------------------------------------------------------------------------------------------------


def pos(start: int, end: int, hw: int = 0, epoch: int | None = None) -> Position:
    return Position(start, end, hw, epoch)


def test_a_read_with_records_appends_and_says_when_the_end_is_near() -> None:
    copy = FutureCopy("t", 0, B, max_bytes=1000)
    assert copy.on_read(pos(0, 10), pos(0, 500, 400), 1000) == Append(10, 400, 0, near_end=False, size=1000)
    assert copy.lag == 490
    assert copy.on_read(pos(0, 480), pos(5, 500, 490), 300) == Append(480, 490, 5, near_end=True, size=300)
    # A round the throttle granted less: a full answer to what it asked is not the end.
    assert copy.on_read(pos(0, 10), pos(0, 500), 200, asked=200) == Append(10, 0, 0, near_end=False, size=200)


def test_an_empty_read_is_caught_up_also_below_an_end_whose_last_batches_were_cleaned_away() -> None:
    copy = FutureCopy("t", 0, B, max_bytes=1000)
    assert copy.on_read(pos(0, 500), pos(0, 500), 0) == CaughtUp()
    assert copy.lag == 0
    # The current log's last batches before its end were cleaned away (its active segment is empty): a read from
    # the future's end finds no batch, so the future holds them all; the swap moves its end to 500.
    copy.on_read(pos(0, 10), pos(0, 500), 1000)
    assert copy.on_read(pos(0, 480), pos(0, 500), 0) == CaughtUp()
    assert copy.lag == 0


def test_a_diverging_epoch_truncates_to_where_both_logs_agree() -> None:
    copy = FutureCopy("t", 0, B, max_bytes=1000)
    future = pos(0, 120, epoch=3)
    # The current log (a follower) was truncated and went on at epoch 4: epoch 3 ends at 100 there.
    assert copy.on_diverging(future, 3, 100, (3, 120)) == Truncate(100)
    # The current log has no epoch 3 any more: it answers its largest epoch before it; ours ends earlier.
    assert copy.on_diverging(future, 2, 90, (2, 80)) == Truncate(80)
    assert copy.on_diverging(future, 2, 90, (UNDEFINED_EPOCH, -1)) == Truncate(90)
    # Diverging below the future's own start: start again.
    assert copy.on_diverging(pos(50, 120, epoch=3), 3, 40, (3, 120)) == StartAt(40)


def test_out_of_range_restarts_at_the_current_start_or_truncates_to_its_end() -> None:
    copy = FutureCopy("t", 0, B, max_bytes=1000)
    # DeleteRecords or retention moved the current log start past the copy's end.
    assert copy.on_out_of_range(pos(0, 100), pos(150, 300)) == StartAt(150)
    # A follower restarting at its leader's start beyond everything the copy has.
    assert copy.on_out_of_range(pos(400, 450), pos(0, 300)) == StartAt(0)
    # The current log ends before the copy does (a truncation without epochs to show it).
    assert copy.on_out_of_range(pos(0, 350), pos(0, 300)) == Truncate(300)
    assert copy.lag == 0


# -- the copy throttle (simulated time) ------------------------------------------------------------------------


def test_unthrottled_grants_every_round_in_full() -> None:
    throttle = CopyThrottle(UNTHROTTLED, 0.0)
    for _ in range(3):
        assert throttle.grant(1 << 20, 0.0) == Grant(1 << 20, 0.0)
        throttle.spent(1 << 20, 1 << 20, 0.0)


def test_a_round_gets_at_most_a_second_of_the_rate_and_waits_for_the_credit() -> None:
    throttle = CopyThrottle(1000, 0.0)
    assert throttle.grant(4096, 0.0) == Grant(1000, 0.0)  # one second of credit at the start, no more
    throttle.spent(1000, 1000, 0.0)
    assert throttle.grant(4096, 0.0) == Grant(0, 1.0)
    assert throttle.grant(4096, 0.25) == Grant(0, 0.75)
    assert throttle.grant(4096, 1.0) == Grant(1000, 0.0)
    # A round that wants less than a second's worth waits only for that much.
    throttle.spent(1000, 1000, 1.0)
    assert throttle.grant(100, 1.0) == Grant(0, 0.1)
    # Idle for a minute: still one second of credit, not sixty.
    throttle.spent(0, 0, 61.0)
    assert throttle.grant(4096, 61.0) == Grant(1000, 0.0)
    assert throttle.grant(4096, 61.0).bytes == 0


def test_unused_credit_goes_back_and_a_batch_larger_than_the_grant_is_a_debt() -> None:
    throttle = CopyThrottle(1000, 0.0)
    assert throttle.grant(1000, 0.0).bytes == 1000
    throttle.spent(1000, 400, 0.0)  # the read found 400 bytes
    assert throttle.grant(600, 0.0) == Grant(600, 0.0)
    throttle.spent(600, 2600, 0.0)  # one batch of 2600 bytes: reads answer whole batches
    assert throttle.grant(1000, 0.0) == Grant(0, 3.0)  # 2000 bytes of debt, then a second's worth


def test_moves_share_one_budget() -> None:
    throttle = CopyThrottle(1000, 0.0)
    first, second = throttle.grant(800, 0.0), throttle.grant(800, 0.0)
    assert (first.bytes, second.bytes) == (800, 0) and second.wait_s == pytest.approx(0.6)


def test_a_rate_of_zero_copies_nothing() -> None:
    throttle = CopyThrottle(0, 0.0)
    assert throttle.grant(1000, 0.0) == Grant(0, math.inf)
    assert throttle.grant(1000, 3600.0).bytes == 0
    with pytest.raises(ValueError):
        CopyThrottle(-1, 0.0)


def test_a_throttled_copy_takes_the_time_its_rate_says() -> None:
    """Copy 50,000 bytes of 100-byte batches through the core at 5,000 bytes per second, as the shell drives it:
    ask, wait what the grant says, read (whole batches, up to the grant), tell what was copied."""
    batch, total, rate = 100, 50_000, 5_000
    copy = FutureCopy("t", 0, B, max_bytes=4096)
    throttle = CopyThrottle(rate, 0.0)
    now, copied, reads = 0.0, 0, 0
    while True:
        grant = throttle.grant(copy.max_bytes, now)
        if not grant.bytes:
            now += grant.wait_s
            continue
        size = min(total - copied, max(batch, grant.bytes // batch * batch))
        action = copy.on_read(pos(0, copied // batch), pos(0, total // batch), size, grant.bytes)
        throttle.spent(grant.bytes, size, now)
        if isinstance(action, CaughtUp):
            break
        assert isinstance(action, Append)
        copied, reads = copied + size, reads + 1
        # Never more than a second's worth ahead of the rate.
        assert copied <= rate * (now + 1)
    assert copied == total
    # The first second's credit is spent at once, the rest comes at the rate; the last round (the one that finds
    # nothing more) waits for a round's worth of credit too.
    assert (total - rate) / rate <= now <= (total - rate + copy.max_bytes) / rate
    assert reads == 13  # rounds of 4,000 bytes: whole batches within a grant of 4,096


# -- the rule at start ----------------------------------------------------------------------------------------


def test_future_dir_names_round_trip_and_nothing_else_parses() -> None:
    name = future_dir_name("orders.v2-eu", 17)
    assert name.endswith("-future") and parse_future_dir(name) == ("orders.v2-eu", 17)
    for other in ("orders-17", "orders-17.abc-delete", "orders.abc-future", "-17.abc-future", "orders-x.abc-future"):
        assert parse_future_dir(other) is None


@pytest.mark.parametrize(
    ("current", "futures", "expected"),
    [
        # The swap began (its marker): promoted, whether the current dir is still there or already renamed away.
        (True, [FutureFound("f1", True)], {"f1": Settle.PROMOTE}),
        (False, [FutureFound("f1", True)], {"f1": Settle.PROMOTE}),
        # An interrupted copy: resumed with its source, dropped without it.
        (True, [FutureFound("f1", False)], {"f1": Settle.RESUME}),
        (False, [FutureFound("f1", False)], {"f1": Settle.DROP}),
        # Never more than one kept: the marked one, else the first by name.
        (True, [FutureFound("f2", False), FutureFound("f1", True)], {"f1": Settle.PROMOTE, "f2": Settle.DROP}),
        (True, [FutureFound("f2", False), FutureFound("f1", False)], {"f1": Settle.RESUME, "f2": Settle.DROP}),
    ],
)
def test_settle(current: bool, futures: list[FutureFound], expected: dict[str, Settle]) -> None:
    assert settle(current, futures) == expected

"""LeaderState: the leader's sans-I/O replication state of one partition (follower progress, ISR, high watermark).

Deterministic: time is a plain int of ms passed to every event. The leader is broker 1 throughout.
"""

from __future__ import annotations

import random

import pytest

from odradek.broker.replication import (
    NO_PROGRESS,
    UNKNOWN_OFFSET,
    IsrChange,
    IsrCommitted,
    IsrExpandRequested,
    LeaderState,
    Progress,
)

LEADER = 1
LAG_MS = 1000
LEADER_EPOCH = 5
PARTITION_EPOCH = 10


def make_leader(
    replicas: tuple[int, ...] = (1, 2, 3),
    isr: tuple[int, ...] | None = None,
    *,
    epoch_start: int = 0,
    hw: int = 0,
    min_isr: int = 1,
    now: int = 0,
) -> LeaderState:
    return LeaderState(
        LEADER,
        LEADER_EPOCH,
        PARTITION_EPOCH,
        replicas,
        replicas if isr is None else isr,
        epoch_start_offset=epoch_start,
        high_watermark=hw,
        min_isr=min_isr,
        now_ms=now,
    )


# -- high watermark ------------------------------------------------------------------------------------------------


def test_hw_is_min_leo_over_isr_and_never_moves_backwards() -> None:
    s = make_leader()
    # (replica, fetch offset, leader LEO, expected new HW or None for unchanged)
    steps = [
        (2, 40, 100, None),  # 3 has not fetched yet: its unknown LEO holds the HW
        (3, 30, 100, 30),
        (2, 50, 100, None),  # min is still 3's 30
        (3, 60, 100, 50),
        (3, 20, 100, None),  # 3 went back (truncated): the HW does not follow
        (2, 20, 100, None),
        (2, 100, 100, None),
        (3, 100, 100, 100),
    ]
    for replica, offset, leo, expected in steps:
        before = s.high_watermark
        progress = s.on_follower_fetch(replica, offset, leo, now_ms=0)
        assert progress.high_watermark == expected, (replica, offset)
        assert progress.isr_change is None
        assert s.high_watermark == (before if expected is None else expected)


def test_hw_is_capped_by_the_leader_log_end_offset() -> None:
    s = make_leader((1, 2))
    assert s.on_follower_fetch(2, 10, leader_leo=10, now_ms=0) == Progress(10)
    assert s.on_append(15) is NO_PROGRESS  # the follower has not fetched the new records
    assert s.on_follower_fetch(2, 15, leader_leo=15, now_ms=0) == Progress(15)
    assert s.high_watermark == 15


def test_unknown_follower_leo_holds_the_hw() -> None:
    s = make_leader((1, 2, 3), hw=7)
    assert s.followers[2].log_end_offset == UNKNOWN_OFFSET
    assert s.on_append(50) is NO_PROGRESS
    assert s.on_follower_fetch(2, 50, 50, now_ms=0) is NO_PROGRESS
    assert s.high_watermark == 7  # the constructor's HW is kept, not lowered to -1
    assert s.on_follower_fetch(3, 40, 50, now_ms=0) == Progress(40)


def test_leader_only_isr_advances_on_append() -> None:
    s = make_leader((1, 2, 3), isr=(1,))
    assert s.on_append(5) == Progress(5)
    assert s.on_append(5) is NO_PROGRESS
    assert s.on_append(9) == Progress(9)


def test_constructor_hw_is_the_floor() -> None:
    s = make_leader((1, 2), hw=30)
    assert s.on_follower_fetch(2, 20, 40, now_ms=0) is NO_PROGRESS
    assert s.high_watermark == 30
    assert s.on_follower_fetch(2, 35, 40, now_ms=0) == Progress(35)


def test_fetch_from_unknown_replica_is_ignored() -> None:
    s = make_leader((1, 2))
    assert s.on_follower_fetch(9, 10, 10, now_ms=0) is NO_PROGRESS
    assert s.on_follower_fetch(LEADER, 10, 10, now_ms=0) is NO_PROGRESS  # the leader is not its own follower
    assert 9 not in s.followers and LEADER not in s.followers


def test_follower_lag() -> None:
    s = make_leader()
    s.on_follower_fetch(2, 7, 10, now_ms=0)
    assert s.follower_lag(10) == {2: 3, 3: 10}  # 3's unknown LEO counts as the whole log


# -- caught up and shrink ------------------------------------------------------------------------------------------


def test_fetch_at_leader_leo_is_caught_up_now() -> None:
    s = make_leader((1, 2), now=0)
    s.on_follower_fetch(2, 10, leader_leo=10, now_ms=500)
    assert s.followers[2].last_caught_up_ms == 500
    s.on_follower_fetch(2, 10, leader_leo=20, now_ms=800)  # behind the LEO of this moment: not caught up at 800
    assert s.followers[2].last_caught_up_ms == 500
    s.on_follower_fetch(2, 20, leader_leo=20, now_ms=900)
    assert s.followers[2].last_caught_up_ms == 900


def test_fetch_reaching_previous_leader_leo_is_caught_up_at_previous_fetch_time() -> None:
    s = make_leader((1, 2), now=0)
    s.on_follower_fetch(2, 5, leader_leo=10, now_ms=1000)  # behind: not caught up
    assert s.followers[2].last_caught_up_ms == 0
    s.on_follower_fetch(2, 10, leader_leo=20, now_ms=1500)  # reached 10, the leader's LEO at its fetch at 1000
    assert s.followers[2].last_caught_up_ms == 1000
    s.on_follower_fetch(2, 15, leader_leo=30, now_ms=2000)  # 15 < 20 (LEO at the 1500 fetch): no proof
    assert s.followers[2].last_caught_up_ms == 1000
    s.on_follower_fetch(2, 30, leader_leo=30, now_ms=2600)
    assert s.followers[2].last_caught_up_ms == 2600


def test_previous_fetch_rule_never_moves_caught_up_time_backwards() -> None:
    s = make_leader((1, 2), now=0)
    s.on_follower_fetch(2, 10, leader_leo=10, now_ms=1000)  # caught up at 1000
    s.on_follower_fetch(2, 10, leader_leo=10, now_ms=1200)  # caught up at 1200
    assert s.followers[2].last_caught_up_ms == 1200


def test_steady_stream_follower_is_not_shrunk() -> None:
    """A follower that always fetches up to the leader LEO of its previous fetch keeps pace though never equal."""
    s = make_leader((1, 2), now=0)
    leo, fetch_offset = 10, 0
    for now in range(0, 20 * LAG_MS, LAG_MS // 2):
        s.on_follower_fetch(2, fetch_offset, leo, now_ms=now)
        fetch_offset = leo  # it receives everything up to this LEO ...
        leo += 10  # ... while the producer appends more
        assert s.check_lagging(leo, now, LAG_MS) is NO_PROGRESS
    assert s.pending is None


@pytest.mark.parametrize(
    ("caught_up_at", "now", "shrinks"),
    [(0, LAG_MS - 1, False), (0, LAG_MS, False), (0, LAG_MS + 1, True), (500, LAG_MS + 500, False), (500, 2000, True)],
)
def test_shrink_only_after_lag_time(caught_up_at: int, now: int, shrinks: bool) -> None:
    s = make_leader((1, 2, 3), now=0)
    s.on_follower_fetch(2, 10, leader_leo=10, now_ms=caught_up_at)
    s.on_follower_fetch(3, 10, leader_leo=10, now_ms=now)  # 3 is always fresh
    progress = s.check_lagging(leader_leo=20, now_ms=now, lag_max_ms=LAG_MS)
    if shrinks:
        assert progress.isr_change == IsrChange((1, 3), LEADER_EPOCH, PARTITION_EPOCH)
        assert s.pending == progress.isr_change
    else:
        assert progress is NO_PROGRESS
        assert s.pending is None


def test_isr_members_start_caught_up_at_leader_start() -> None:
    s = make_leader((1, 2), now=5000)
    assert s.check_lagging(10, 5000 + LAG_MS, LAG_MS) is NO_PROGRESS
    change = s.check_lagging(10, 5001 + LAG_MS, LAG_MS).isr_change
    assert change is not None and change.new_isr == (1,)


def test_idle_follower_at_leader_leo_is_not_shrunk() -> None:
    s = make_leader((1, 2), now=0)
    s.on_follower_fetch(2, 10, leader_leo=10, now_ms=0)
    assert s.check_lagging(10, 100 * LAG_MS, LAG_MS) is NO_PROGRESS
    assert s.pending is None


def test_shrink_removes_every_lagging_follower_keeping_isr_order() -> None:
    s = make_leader((1, 2, 3, 4), isr=(3, 1, 4, 2), now=0)
    s.on_follower_fetch(4, 10, leader_leo=10, now_ms=2 * LAG_MS)
    change = s.check_lagging(10, 2 * LAG_MS, LAG_MS).isr_change
    assert change == IsrChange((1, 4), LEADER_EPOCH, PARTITION_EPOCH)


def test_shrink_request_carries_current_epochs() -> None:
    s = make_leader((1, 2, 3), now=0)
    s.on_follower_fetch(3, 0, 0, now_ms=0)
    s.on_metadata(PARTITION_EPOCH + 3, (1, 2, 3), (1, 2, 3), leader_leo=0, now_ms=0)
    s.on_follower_fetch(3, 10, 10, now_ms=5 * LAG_MS)
    change = s.check_lagging(10, 5 * LAG_MS, LAG_MS).isr_change
    assert change == IsrChange((1, 3), LEADER_EPOCH, PARTITION_EPOCH + 3)


def test_no_second_request_while_one_is_pending() -> None:
    s = make_leader((1, 2, 3, 4), isr=(1, 2, 3), now=0)
    first = s.check_lagging(10, LAG_MS + 1, LAG_MS).isr_change
    assert first is not None and first.new_isr == (1,)
    assert s.check_lagging(10, 10 * LAG_MS, LAG_MS) is NO_PROGRESS
    # 4 reaches the HW: it would be added, but a change is already in flight.
    assert s.on_follower_fetch(4, 10, 10, now_ms=10 * LAG_MS).isr_change is None
    assert s.pending == first


def test_on_change_failed_allows_a_new_request() -> None:
    s = make_leader((1, 2), now=0)
    first = s.check_lagging(10, LAG_MS + 1, LAG_MS).isr_change
    assert first is not None
    assert s.check_lagging(10, LAG_MS + 2, LAG_MS) is NO_PROGRESS
    assert s.on_change_failed(10) is NO_PROGRESS  # a refused shrink moves nothing
    assert s.pending is None
    again = s.check_lagging(10, LAG_MS + 3, LAG_MS).isr_change
    assert again == first


def test_a_refused_expansion_releases_the_high_watermark_it_held() -> None:
    """A follower caught up is asked into the ISR, then fetches no more (it is shutting down): while the expansion
    is pending it holds the high watermark; refused, it no longer does, and the HW moves at once."""
    s = make_leader((1, 2), isr=(1,), now=0)
    s.on_append(3)
    change = s.on_follower_fetch(2, 3, 3, now_ms=1).isr_change
    assert change is not None and change.new_isr == (1, 2) and s.high_watermark == 3
    assert s.on_append(4).high_watermark is None  # 2 is at 3: the pending expansion holds the HW
    assert s.on_change_failed(4).high_watermark == 4


# -- committed metadata --------------------------------------------------------------------------------------------


def test_on_metadata_settles_pending_shrink_and_hw_advances() -> None:
    s = make_leader((1, 2, 3), now=0)
    s.on_follower_fetch(2, 50, 50, now_ms=LAG_MS + 1)
    s.on_follower_fetch(3, 10, 50, now_ms=0)
    assert s.high_watermark == 10
    change = s.check_lagging(50, LAG_MS + 1, LAG_MS).isr_change
    assert change == IsrChange((1, 2), LEADER_EPOCH, PARTITION_EPOCH)
    # While the removal is in flight 3 still counts (maximal ISR): the HW waits for it.
    assert s.maximal_isr == {1, 2, 3}
    assert s.on_append(50) is NO_PROGRESS
    assert s.high_watermark == 10
    progress = s.on_metadata(PARTITION_EPOCH + 1, (1, 2, 3), (1, 2), leader_leo=50, now_ms=LAG_MS + 2)
    assert progress == Progress(50, events=(IsrCommitted((1, 2, 3), (1, 2)),))
    assert s.pending is None and s.isr == (1, 2) and s.partition_epoch == PARTITION_EPOCH + 1


@pytest.mark.parametrize("partition_epoch", [PARTITION_EPOCH - 1, PARTITION_EPOCH])
def test_stale_partition_epoch_is_ignored(partition_epoch: int) -> None:
    s = make_leader((1, 2, 3), now=0)
    change = s.check_lagging(10, LAG_MS + 1, LAG_MS).isr_change
    assert change is not None
    assert s.on_metadata(partition_epoch, (1, 2, 3), (1,), leader_leo=10, now_ms=LAG_MS + 1) is NO_PROGRESS
    assert s.isr == (1, 2, 3)
    assert s.pending == change
    assert s.partition_epoch == PARTITION_EPOCH


def test_on_metadata_settles_pending_even_when_it_commits_something_else() -> None:
    s = make_leader((1, 2, 3), now=0)
    assert s.check_lagging(10, LAG_MS + 1, LAG_MS).isr_change is not None
    # The controller committed another change (say a fence of 3 only): the leader re-decides from scratch.
    s.on_metadata(PARTITION_EPOCH + 1, (1, 2, 3), (1, 2), leader_leo=10, now_ms=LAG_MS + 1)
    assert s.pending is None
    change = s.check_lagging(10, LAG_MS + 2, LAG_MS).isr_change
    assert change == IsrChange((1,), LEADER_EPOCH, PARTITION_EPOCH + 1)


# -- expansion -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("hw", "epoch_start", "follower_leo", "expands"),
    [
        (20, 10, 15, False),  # below the HW
        (20, 10, 20, True),  # at the HW, past the epoch start
        (20, 30, 25, False),  # at the HW but before the epoch start
        (20, 30, 30, True),
        (20, 30, 40, True),
        (0, 0, 0, True),
    ],
)
def test_expand_when_follower_reaches_hw_and_epoch_start(
    hw: int, epoch_start: int, follower_leo: int, expands: bool
) -> None:
    s = make_leader((1, 2, 3), isr=(1, 2), epoch_start=epoch_start, hw=hw)
    progress = s.on_follower_fetch(3, follower_leo, leader_leo=40, now_ms=0)
    if expands:
        assert progress.isr_change == IsrChange((1, 2, 3), LEADER_EPOCH, PARTITION_EPOCH)
        assert s.pending == progress.isr_change
    else:
        assert progress.isr_change is None
        assert s.pending is None
    assert s.isr == (1, 2)  # nothing changes until the controller commits it


def test_expansion_request_lists_replicas_in_replica_order() -> None:
    s = make_leader((3, 1, 2), isr=(1, 2))
    change = s.on_follower_fetch(3, 0, 0, now_ms=0).isr_change
    assert change is not None and change.new_isr == (3, 1, 2)


def test_isr_member_fetching_asks_for_nothing() -> None:
    s = make_leader((1, 2, 3))
    for offset in (0, 10, 20):
        assert s.on_follower_fetch(2, offset, 20, now_ms=0).isr_change is None
    assert s.pending is None


def test_pending_expansion_member_counts_for_hw() -> None:
    s = make_leader((1, 2, 3), isr=(1, 2))
    assert s.on_follower_fetch(2, 30, 40, now_ms=0) == Progress(30)
    change = s.on_follower_fetch(3, 30, 40, now_ms=0).isr_change
    assert change is not None and change.new_isr == (1, 2, 3)
    assert s.maximal_isr == {1, 2, 3}
    # 2 reaches the LEO but 3, being added, holds the HW at its LEO.
    assert s.on_follower_fetch(2, 40, 40, now_ms=0) is NO_PROGRESS
    assert s.high_watermark == 30
    assert s.on_follower_fetch(3, 40, 40, now_ms=0) == Progress(40)


def test_expansion_commit_then_member_holds_hw() -> None:
    s = make_leader((1, 2, 3), isr=(1, 2))
    s.on_follower_fetch(2, 10, 10, now_ms=0)
    s.on_follower_fetch(3, 10, 10, now_ms=0)
    committed = s.on_metadata(PARTITION_EPOCH + 1, (1, 2, 3), (1, 2, 3), leader_leo=10, now_ms=0)
    assert committed == Progress(events=(IsrCommitted((1, 2), (1, 2, 3)),))
    assert s.pending is None and s.isr == (1, 2, 3)
    s.on_append(20)
    s.on_follower_fetch(2, 20, 20, now_ms=0)
    assert s.high_watermark == 10
    assert s.on_follower_fetch(3, 20, 20, now_ms=0) == Progress(20)


# -- KIP-966: no HW progress below min ISR -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("replicas", "isr", "min_isr", "advances"),
    [
        ((1, 2, 3), (1, 2), 2, True),
        ((1, 2, 3), (1,), 2, False),
        ((1, 2, 3), (1,), 1, True),
        ((1, 2, 3), (1, 2), 3, False),
        ((1,), (1,), 2, True),  # min ISR capped at the replica count
        ((1, 2), (1,), 3, False),  # capped at 2, ISR has 1
        ((1, 2), (1, 2), 3, True),
    ],
)
def test_hw_does_not_advance_below_min_isr(
    replicas: tuple[int, ...], isr: tuple[int, ...], min_isr: int, advances: bool
) -> None:
    s = make_leader(replicas, isr=isr, min_isr=min_isr)
    for r in isr:
        if r != LEADER:
            s.on_follower_fetch(r, 10, 10, now_ms=0)
    s.on_append(10)
    assert s.high_watermark == (10 if advances else 0)


def test_lowering_min_isr_releases_hw() -> None:
    s = make_leader((1, 2, 3), isr=(1,), min_isr=2)
    assert s.on_append(10) is NO_PROGRESS
    assert s.set_min_isr(1, 10) == Progress(10)


def test_raising_min_isr_freezes_hw() -> None:
    s = make_leader((1, 2), min_isr=1)
    s.on_metadata(PARTITION_EPOCH + 1, (1, 2), (1,), leader_leo=0, now_ms=0)
    assert s.on_append(5) == Progress(5)
    assert s.set_min_isr(2, 5) is NO_PROGRESS
    assert s.on_append(9) is NO_PROGRESS
    assert s.high_watermark == 5


def test_expansion_is_requested_below_min_isr_and_commit_releases_hw() -> None:
    s = make_leader((1, 2, 3), isr=(1,), min_isr=2)
    s.on_append(10)
    progress = s.on_follower_fetch(2, 10, 10, now_ms=0)
    assert progress.isr_change == IsrChange((1, 2), LEADER_EPOCH, PARTITION_EPOCH)
    assert progress == Progress(None, progress.isr_change, (IsrExpandRequested((1, 2), 2, 10),))
    assert s.high_watermark == 0  # the pending member counts as ISR for the min, but only the committed ISR does
    released = s.on_metadata(PARTITION_EPOCH + 1, (1, 2, 3), (1, 2), leader_leo=10, now_ms=0)
    assert released == Progress(10, events=(IsrCommitted((1,), (1, 2)),))


def test_shrink_below_min_isr_freezes_hw() -> None:
    s = make_leader((1, 2, 3), min_isr=2)
    s.on_follower_fetch(2, 10, 10, now_ms=0)
    s.on_follower_fetch(3, 10, 10, now_ms=0)
    assert s.on_append(10) is NO_PROGRESS and s.high_watermark == 10
    s.on_metadata(PARTITION_EPOCH + 1, (1, 2, 3), (1,), leader_leo=10, now_ms=0)
    assert s.on_append(20) is NO_PROGRESS
    assert s.high_watermark == 10


# -- replica set changes (reassignment) ----------------------------------------------------------------------------


def test_reassignment_adds_and_removes_follower_states() -> None:
    s = make_leader((1, 2, 3), now=0)
    s.on_follower_fetch(2, 10, 10, now_ms=100)
    s.on_follower_fetch(3, 4, 10, now_ms=100)
    assert s.high_watermark == 4

    # Adding 4 (not yet in the ISR): a fresh state with an unknown LEO, not caught up.
    assert s.on_metadata(PARTITION_EPOCH + 1, (1, 2, 3, 4), (1, 2, 3), leader_leo=10, now_ms=200) is NO_PROGRESS
    assert set(s.followers) == {2, 3, 4}
    assert s.followers[4].log_end_offset == UNKNOWN_OFFSET and s.followers[4].last_caught_up_ms == 0
    assert s.followers[2].log_end_offset == 10 and s.followers[2].last_caught_up_ms == 100  # kept as it was

    change = s.on_follower_fetch(4, 10, 10, now_ms=300).isr_change
    assert change == IsrChange((1, 2, 3, 4), LEADER_EPOCH, PARTITION_EPOCH + 1)
    committed = s.on_metadata(PARTITION_EPOCH + 2, (1, 2, 3, 4), (1, 2, 3, 4), leader_leo=10, now_ms=300)
    assert committed.high_watermark is None and committed.isr_change is None

    # Removing 3 from replicas and ISR: its state goes and it no longer holds the HW.
    removed = s.on_metadata(PARTITION_EPOCH + 3, (1, 2, 4), (1, 2, 4), leader_leo=10, now_ms=400)
    assert removed == Progress(10, events=(IsrCommitted((1, 2, 3, 4), (1, 2, 4)),))
    assert set(s.followers) == {2, 4}
    assert s.on_follower_fetch(3, 10, 10, now_ms=500) is NO_PROGRESS
    assert 3 not in s.followers


def test_replica_added_straight_into_isr_starts_caught_up() -> None:
    s = make_leader((1, 2), now=0)
    s.on_metadata(PARTITION_EPOCH + 1, (1, 2, 5), (1, 2, 5), leader_leo=0, now_ms=4000)
    assert s.followers[5].last_caught_up_ms == 4000
    s.on_follower_fetch(2, 10, 10, now_ms=4000 + LAG_MS)
    assert s.check_lagging(10, 4000 + LAG_MS, LAG_MS) is NO_PROGRESS
    change = s.check_lagging(10, 4001 + LAG_MS, LAG_MS).isr_change
    assert change is not None and change.new_isr == (1, 2)


# -- randomized simulation -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(20))
def test_simulated_invariants(seed: int) -> None:
    """Random appends, follower fetches (that only move forward), lag checks, and a controller that commits or
    refuses requests. Invariants: the HW never moves backwards; never passes the leader LEO or the LEO of any member
    of the maximal ISR; and whenever it moves, at least min(min ISR, replicas) replicas (the committed ISR) hold it.
    """
    rng = random.Random(seed)
    replicas = (1, 2, 3, 4)
    min_isr = rng.choice((1, 2, 3))
    now = 0
    s = make_leader(replicas, min_isr=min_isr, now=now)
    leo = 0
    follower_leo = {r: 0 for r in replicas if r != LEADER}
    partition_epoch = PARTITION_EPOCH
    in_flight: IsrChange | None = None
    for _ in range(400):
        now += rng.randrange(0, 400)
        before = s.high_watermark
        event = rng.random()
        if event < 0.25:
            leo += rng.randrange(1, 5)
            progress = s.on_append(leo)
        elif event < 0.75:
            r = rng.choice(list(follower_leo))
            if rng.random() < 0.8:  # a live follower moves toward the LEO; a stuck one stays
                follower_leo[r] = rng.randint(follower_leo[r], leo)
            progress = s.on_follower_fetch(r, follower_leo[r], leo, now)
        elif event < 0.9:
            progress = s.check_lagging(leo, now, LAG_MS)
        elif in_flight is not None:
            if rng.random() < 0.8:
                partition_epoch += 1
                progress = s.on_metadata(partition_epoch, replicas, in_flight.new_isr, leo, now)
            else:
                progress = s.on_change_failed(leo)
            in_flight = None
        else:
            progress = NO_PROGRESS
        if progress.isr_change is not None:
            assert in_flight is None
            assert progress.isr_change.partition_epoch == partition_epoch
            assert progress.isr_change.leader_epoch == LEADER_EPOCH
            assert LEADER in progress.isr_change.new_isr
            in_flight = progress.isr_change
        hw = s.high_watermark
        assert hw >= before
        assert (progress.high_watermark is not None) == (hw != before)
        assert hw <= leo
        for r in s.maximal_isr - {LEADER}:
            assert hw <= follower_leo[r], (r, hw)
        if len(s.isr) >= min(min_isr, len(replicas)):  # and never held back: as high as the maximal ISR allows
            allowed = min([leo, *(s.followers[r].log_end_offset for r in s.maximal_isr - {LEADER})])
            assert hw == max(before, allowed), (hw, before, allowed, s.maximal_isr)
        if hw != before:
            holders = 1 + sum(1 for r, f in follower_leo.items() if f >= hw)
            assert holders >= min(min_isr, len(replicas))
            assert len(s.isr) >= min(min_isr, len(replicas))

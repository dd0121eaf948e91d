"""A tombstone is removed only below the offset every replica of the partition holds durably: a replica that was
away longer than ``delete.retention.ms``, or lost unflushed records to a power loss, comes back, catches up, is
elected, and no deleted key comes back.

Three replicas of t-0 over real logs, the leader and the followers each running the real cleaner. Broker 3 stops
fetching after it holds ``k=old``; the key is deleted, every segment rolls, ``delete.retention.ms`` (0 here)
passes and both remaining replicas clean. Broker 3 returns, catches up and is elected. The same run with the
horizon every replica's cleaner would use without the rule (its high watermark: Kafka's behaviour) shows the
instant is reached: there the tombstone is gone from the others and broker 3 leads with ``k=old``.

The offset every replica reached belongs to one replica set: the later tests add a replica (a reassignment) and
check that neither a follower holding its leader's older word nor a pass already under way removes a tombstone the
new replica still needs.

What a replica holds is what survives its power loss (its recovery point), not what it appended: acks do not wait
for fsync. The last tests run with the fsync ledger (durability.py): a follower, then a leader, loses power with
the tombstone in its active (never fsynced) segment while the other replica has already cleaned, comes back with
``k=old`` only, catches up and leads. The same runs with the horizon counting appended offsets show the instant is
reached: the returning replica leads with ``k=old``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from controller_images import brokers, build, epoch_of, partition, topic
from replicas import Controller, Replicas, latest_values

from odradek.broker.isr_batcher import IsrChangeBatcher
from odradek.broker.log import durability
from odradek.broker.log.cleaner.cleaner import Cleaner
from odradek.broker.log.cleaner.manager import CleanerManager
from odradek.broker.log.cleaner.policy import CompactionConfig
from odradek.broker.log.cleaner.runner import CleanerThread, CompactedLog
from odradek.broker.log.config import LogConfig
from odradek.broker.partition import Partition
from odradek.broker.replication import LeaderState
from odradek.client.errors import StorageError
from odradek.client.record.builder import encode_batch

NOW = 10_000_000
CONFIG = CompactionConfig(min_cleanable_dirty_ratio=0.0, delete_retention_ms=0)
LOG = LogConfig(segment_bytes=160)  # about two single-record batches a segment


def put(p: Partition, key: bytes, value: bytes | None) -> None:
    p.append_as_leader(encode_batch([value], [key], timestamps=1_000))


def latest(p: Partition) -> dict[bytes, bytes | None]:
    return latest_values(p.log)


def clean(p: Partition, horizon: Callable[[Partition], int]) -> None:
    """Cleaner passes over ``p`` until none is due (the first stamps the tombstones' delete horizon)."""
    thread = CleanerThread(
        "cleaner",
        CleanerManager(NOW),
        Cleaner(1 << 20, clock=lambda: NOW),
        lambda: {"t-0": CompactedLog(p.log, CONFIG, horizon(p), lambda: horizon(p))},
        clock=lambda: NOW,
    )
    for _ in range(4):
        if not thread.run_once():
            return


def fsynced(*parts: Partition) -> int:
    """The offset below which each of ``parts`` has fsynced its log (its recovery point: at most its active
    segment's base, since nothing here flushes but a roll)."""
    return min(p.log.recovery_point for p in parts)


def old_rule(p: Partition) -> int:
    return p.log.high_watermark


@pytest.mark.parametrize(("horizon", "resurrected"), [(Partition.tombstone_horizon, False), (old_rule, True)])
def test_a_replica_away_past_delete_retention_never_brings_a_deleted_key_back(
    tmp_path: Path, horizon: Callable[[Partition], int], resurrected: bool
) -> None:
    controller = Controller(build(brokers(1, 2, 3), topic(), partition(0, (1, 2, 3), leader=1)))
    replicas = Replicas(tmp_path, config=LOG)
    try:
        replicas.publish(controller.image)
        leader = replicas.parts[1]
        put(leader, b"k", b"old")
        for _ in range(2):
            for b in (2, 3):
                replicas.fetch(b)
        # broker 3 goes away holding k=old, leaves the ISR; the key is deleted and many segments roll over it
        put(leader, b"k", None)
        replicas.fetch(2)
        replicas.fetch(2)  # the leader learns that 2 caught up
        leader.check_lagging(now_ms=60_000, lag_max_ms=1000)
        batcher = IsrChangeBatcher(1)
        batcher.submit(*replicas.requests[-1])
        controller.answer(batcher.request(batcher.take(), epoch_of(1)))
        assert controller.image.partition("t", 0).isr == (1, 2)
        replicas.publish(controller.image)
        for i in range(6):
            put(leader, b"other-%d" % i, b"v")
        for _ in range(8):  # a fetch reads one segment
            replicas.fetch(2)
        assert leader.log.high_watermark == leader.log.log_end_offset
        for b in (1, 2):
            clean(replicas.parts[b], horizon)
            assert b"k" in latest(replicas.parts[b]) or resurrected  # the rule keeps the tombstone on both

        # broker 3 returns, catches up from where it stopped, and is elected
        for _ in range(8):
            replicas.fetch(3)
        assert replicas.parts[3].log.log_end_offset == leader.log.log_end_offset
        replicas.publish(build(brokers(1, 2, 3), topic(), partition(0, (1, 2, 3), leader=3, leader_epoch=5)))
        assert replicas.parts[3].is_leader
        assert latest(replicas.parts[3]).get(b"k", None) == (b"old" if resurrected else None)
    finally:
        replicas.close()


def test_once_every_replica_has_the_tombstone_every_cleaner_removes_it(tmp_path: Path) -> None:
    image = build(brokers(1, 2, 3), topic(), partition(0, (1, 2, 3), leader=1))
    replicas = Replicas(tmp_path, config=LOG)
    try:
        replicas.publish(image)
        leader = replicas.parts[1]
        put(leader, b"k", b"old")
        put(leader, b"k", None)
        for i in range(6):
            put(leader, b"other-%d" % i, b"v")
        for _ in range(8):
            for b in (2, 3):
                replicas.fetch(b)  # the last rounds tell each follower what both hold durably
        durable = fsynced(*replicas.parts.values())
        assert durable > 1 and leader.tombstone_horizon() == durable
        for b in (1, 2, 3):
            assert replicas.parts[b].tombstone_horizon() == durable
            clean(replicas.parts[b], Partition.tombstone_horizon)
            assert b"k" not in latest(replicas.parts[b])
            assert latest(replicas.parts[b]) == {b"other-%d" % i: b"v" for i in range(6)}
    finally:
        replicas.close()


def test_the_offset_every_replica_holds_durably_is_capped_by_each_replica_and_the_high_watermark() -> None:
    s = LeaderState(1, 0, 0, (1, 2, 3), (1, 2, 3), 0, 0, min_isr=1, now_ms=0)
    assert s.all_replicas_offset(10) == 0  # no follower has fetched from this leader yet
    s.on_follower_fetch(2, 8, 10, now_ms=0, durable_offset=8)
    assert s.all_replicas_offset(10) == 0
    s.on_follower_fetch(3, 6, 10, now_ms=0, durable_offset=6)
    assert (s.high_watermark, s.all_replicas_offset(10)) == (6, 6)
    s.on_follower_fetch(3, 10, 10, now_ms=0, durable_offset=4)  # appended up to 10, fsynced up to 4 only
    assert (s.high_watermark, s.all_replicas_offset(10)) == (8, 4)
    s.on_follower_fetch(3, 10, 10, now_ms=0, durable_offset=10)
    assert s.all_replicas_offset(10) == 8
    assert s.all_replicas_offset(5) == 5  # nor beyond what the leader itself fsynced
    s.on_follower_fetch(2, 7, 10, now_ms=0, durable_offset=9)  # never beyond what the follower holds
    assert s.all_replicas_offset(10) == 7
    s.on_follower_fetch(2, 10, 10, now_ms=0)  # a follower that does not say (an older one): nothing durable
    assert s.all_replicas_offset(10) == 0
    s.on_follower_fetch(2, 10, 10, now_ms=0, durable_offset=10)
    s.on_metadata(1, (1, 2, 3, 4), (1, 2, 3), 10, now_ms=0)  # a replica added: nothing is known of it
    assert s.all_replicas_offset(10) == 0


def deleted_then_filled(leader: Partition) -> None:
    """k=old, two fillers (so k=old and its tombstone lie in different segments), the tombstone, six more keys."""
    put(leader, b"k", b"old")
    put(leader, b"a", b"v")
    put(leader, b"b", b"v")
    put(leader, b"k", None)
    for i in range(6):
        put(leader, b"other-%d" % i, b"v")


def test_a_follower_drops_the_leaders_horizon_when_a_replica_is_added_and_the_delete_survives_a_failover(
    tmp_path: Path,
) -> None:
    """A reassignment adds broker 3, which copies k=old from leader 1; follower 2 hears nothing from 1 for a while
    and cleans; 1 fails, 2 leads, 3 catches up from 2 and is elected. The offset 1 last told 2 counted the old
    replica set only, so 2 must not remove the tombstone with it."""
    replicas = Replicas(tmp_path, config=LOG)
    try:
        replicas.publish(build(brokers(1, 2, 3), topic(), partition(0, (1, 2), leader=1)), to=(1, 2))
        leader, follower, added = replicas.parts[1], replicas.parts[2], replicas.parts[3]
        deleted_then_filled(leader)
        for _ in range(8):
            replicas.fetch(2)
        end = leader.log.log_end_offset
        assert follower.tombstone_horizon() == fsynced(leader, follower) > 3
        grown = partition(0, (1, 2, 3), isr=(1, 2), leader=1, partition_epoch=1, adding=(3,))
        replicas.publish(build(brokers(1, 2, 3), topic(), grown))
        assert follower.tombstone_horizon() == 0  # nothing is known yet of what broker 3 holds
        replicas.fetch(3)
        assert latest(added) == {b"k": b"old", b"a": b"v"}
        clean(follower, Partition.tombstone_horizon)
        assert latest(follower)[b"k"] is None
        failover = partition(0, (1, 2, 3), isr=(2,), leader=2, leader_epoch=1, partition_epoch=2, adding=(3,))
        replicas.publish(build(brokers(1, 2, 3), topic(), failover), to=(2, 3))
        for _ in range(8):
            replicas.fetch(3, leader=2)
        assert added.log.log_end_offset == end
        replicas.publish(build(brokers(1, 2, 3), topic(), partition(0, (3, 2), leader=3, leader_epoch=2,
                                                                      partition_epoch=3)), to=(2, 3))  # fmt: skip
        assert added.is_leader and latest(added)[b"k"] is None
    finally:
        replicas.close()


def test_a_follower_drops_the_horizon_of_a_previous_leader(tmp_path: Path) -> None:
    replicas = Replicas(tmp_path, config=LOG)
    try:
        replicas.publish(build(brokers(1, 2, 3), topic(), partition(0, (1, 2, 3), leader=1)))
        deleted_then_filled(replicas.parts[1])
        for _ in range(8):
            for b in (2, 3):
                replicas.fetch(b)
        durable = fsynced(*replicas.parts.values())
        assert replicas.parts[3].tombstone_horizon() == durable > 0
        replicas.publish(build(brokers(1, 2, 3), topic(), partition(0, (1, 2, 3), leader=2, leader_epoch=1)))
        assert replicas.parts[3].tombstone_horizon() == 0  # until the new leader answers
        replicas.fetch(1, leader=2)
        replicas.fetch(3, leader=2)
        assert replicas.parts[3].tombstone_horizon() == durable
    finally:
        replicas.close()


def test_a_replica_added_while_a_pass_runs_makes_its_swap_keep_the_tombstone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Broker 1 copied k=old, fell out of the ISR, and copied the tombstone only after leader 2 had stamped its
    delete horizon (already passed): once 1 leads, one pass of its cleaner removes both. Broker 3 is added after
    that pass read its horizon and copies k=old before the swap: the swap must see that the horizon fell and keep
    the tombstone, or broker 3 reads on past it and keeps k=old for good."""
    replicas = Replicas(tmp_path, config=LOG)
    try:
        lagging = partition(0, (1, 2), isr=(2,), leader=2)
        replicas.publish(build(brokers(1, 2, 3), topic(), lagging), to=(1, 2))
        before, leader, added = replicas.parts[2], replicas.parts[1], replicas.parts[3]
        deleted_then_filled(before)
        replicas.fetch(1, leader=2)  # broker 1 copies k=old
        clean(before, Partition.tombstone_horizon)  # 2 drops k=old and stamps the tombstone, kept for 1
        assert latest(before)[b"k"] is None
        for _ in range(8):
            replicas.fetch(1, leader=2)
        end = before.log.log_end_offset
        assert replicas.values(1)[0] == b"old" and latest(leader)[b"k"] is None
        # broker 1 is elected (a preferred-leader election) and learns that 2 has everything
        replicas.publish(build(brokers(1, 2, 3), topic(), partition(0, (1, 2), leader=1, leader_epoch=1)), to=(1, 2))
        for _ in range(2):
            replicas.fetch(2)
        assert leader.tombstone_horizon() == fsynced(leader, before) > 3

        swap = leader.log.replace_segments
        grown = partition(0, (1, 2, 3), isr=(1, 2), leader=1, leader_epoch=1, partition_epoch=1, adding=(3,))

        def replica_added_first(*args: object, **kwargs: object) -> bool:
            monkeypatch.setattr(leader.log, "replace_segments", swap)
            replicas.publish(build(brokers(1, 2, 3), topic(), grown))
            replicas.fetch(3)  # before the first swap: broker 3 copies the segment holding k=old
            assert replicas.values(3)[0] == b"old"
            return swap(*args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(leader.log, "replace_segments", replica_added_first)
        clean(leader, Partition.tombstone_horizon)
        assert latest(leader)[b"k"] is None  # kept for broker 3
        for _ in range(8):
            replicas.fetch(3)
        assert added.log.log_end_offset == end and latest(added)[b"k"] is None
    finally:
        replicas.close()


@pytest.fixture
def fsync_ledger(tmp_path: Path) -> Iterator[Path]:
    """Record every fsync (durability.py), so that a power loss can cut a broker's files back to what was durable."""
    ledger = tmp_path / "fsync-ledger"
    durability.enable(ledger)
    try:
        yield ledger
    finally:
        durability.disable()


def lose_power(replicas: Replicas, broker: int, ledger: Path) -> None:
    """``broker`` loses power and restarts: its files are cut back to their last fsync and its log recovers."""
    replicas.parts[broker].log.take_offline(StorageError("power loss"))  # closes the files without a flush
    durability.lose_unsynced(ledger, [replicas.root / f"b{broker}"])
    replicas.restart(broker)


def pre_crash_rule(leader: Partition) -> Callable[[Partition], int]:
    """The horizon counting each follower's log end offset as it last fetched, durable or not."""

    def horizon(p: Partition) -> int:
        state = leader.leader_state
        assert state is not None
        return min(leader.log.high_watermark, *(f.log_end_offset for f in state.followers.values()))

    return horizon


@pytest.mark.parametrize("rule", ["durable", "pre-crash"])
def test_a_follower_that_loses_its_unflushed_tombstone_meets_it_again(
    tmp_path: Path, fsync_ledger: Path, rule: str
) -> None:
    """Broker 3 fetched k=old and, in its next segment, the tombstone, then stopped fetching (paused). Its segment
    holding the tombstone is still active, so not fsynced. The leader and broker 2 clean; then broker 3 loses power:
    it recovers with k=old and without the tombstone, catches up and is elected. A tombstone removed because broker 3
    had fetched past it, not made it durable, would be gone for good (the "pre-crash" run shows the instant is
    reached: broker 3 leads with k=old)."""
    replicas = Replicas(tmp_path, config=LOG)
    try:
        replicas.publish(build(brokers(1, 2, 3), topic(), partition(0, (1, 2, 3), leader=1)))
        leader, away = replicas.parts[1], replicas.parts[3]
        for key in (b"k", b"a", b"b"):
            put(leader, key, b"old" if key == b"k" else b"v")
        put(leader, b"k", None)
        for _ in range(3):
            replicas.fetch(3)  # caught up: k=old in a sealed (fsynced) segment, the tombstone in the active one
        assert away.log.log_end_offset == 4 and away.log.recovery_point == 2
        for i in range(6):
            put(leader, b"other-%d" % i, b"v")  # the leader rolls past the tombstone; broker 3 fetches no more
        for _ in range(8):
            replicas.fetch(2)
        replicas.fetch(2)  # broker 2 learns the leader's horizon
        assert (leader.tombstone_horizon(), pre_crash_rule(leader)(leader)) == (2, 4)  # the tombstone is at 3
        horizon = Partition.tombstone_horizon if rule == "durable" else pre_crash_rule(leader)
        for b in (1, 2):
            clean(replicas.parts[b], horizon)
            assert latest(replicas.parts[b]).get(b"k", b"gone") is None or rule == "pre-crash"

        lose_power(replicas, 3, fsync_ledger)
        away = replicas.parts[3]
        assert away.log.log_end_offset == 2 and latest(away) == {b"k": b"old", b"a": b"v"}
        replicas.publish(build(brokers(1, 2, 3), topic(), partition(0, (1, 2, 3), leader=1)), to=(3,))
        replicas.fetch(3)
        assert pre_crash_rule(leader)(leader) == 2  # falls back once broker 3 fetches again: too late
        for _ in range(8):
            replicas.fetch(3)
        assert away.log.log_end_offset == leader.log.log_end_offset
        replicas.publish(build(brokers(1, 2, 3), topic(), partition(0, (1, 2, 3), leader=3, leader_epoch=5)))
        assert away.is_leader
        assert latest(away).get(b"k") == (b"old" if rule == "pre-crash" else None)
    finally:
        replicas.close()


@pytest.mark.parametrize("rule", ["durable", "pre-crash"])
def test_a_leader_that_loses_its_unflushed_tombstone_meets_it_again(
    tmp_path: Path, fsync_ledger: Path, rule: str
) -> None:
    """The same from the other side: the leader's segment holding the tombstone is still active, broker 2's is sealed.
    Their segments start at different offsets: broker 2 started its log at the leader's log start, which a
    DeleteRecords had moved into a segment. Broker 2 cleans; the leader loses power, recovers with k=old and without
    the tombstone, follows broker 2 and is elected again. The offset every replica holds is capped by the leader's
    own recovery point too."""
    replicas = Replicas(tmp_path, ids=(1, 2), config=LOG)
    try:
        replicas.publish(build(brokers(1, 2), topic(), partition(0, (1, 2), isr=(1,), leader=1)), to=(1, 2))
        leader, follower = replicas.parts[1], replicas.parts[2]
        for key in (b"a", b"b", b"c"):
            put(leader, key, b"v")
        put(leader, b"k", b"old")
        assert leader.delete_records(3) == 3
        put(leader, b"k", None)  # the leader rolls: k=old fsynced, the tombstone in its active segment
        follower.reset_to_leader_start(3)  # its first fetch, from 0, was below the leader's log start
        replicas.fetch(2)
        replicas.fetch(2)  # broker 2's active segment: k=old and the tombstone
        put(leader, b"z", b"v")
        replicas.fetch(2)  # broker 2 rolls (fsyncs k=old and the tombstone), the leader does not
        assert (leader.log.recovery_point, follower.log.recovery_point) == (4, 5)
        joined = partition(0, (1, 2), isr=(1, 2), leader=1, partition_epoch=1)
        replicas.publish(build(brokers(1, 2), topic(), joined), to=(1, 2))
        replicas.fetch(2)  # broker 2 learns the leader's horizon
        horizon = Partition.tombstone_horizon if rule == "durable" else pre_crash_rule(leader)
        clean(follower, horizon)
        assert latest(follower).get(b"k", b"gone") is None or rule == "pre-crash"

        lose_power(replicas, 1, fsync_ledger)
        restarted = replicas.parts[1]
        assert restarted.log.log_end_offset == 4 and latest(restarted)[b"k"] == b"old"
        failover = partition(0, (1, 2), isr=(2,), leader=2, leader_epoch=1, partition_epoch=2)
        replicas.publish(build(brokers(1, 2), topic(), failover), to=(1, 2))
        for _ in range(4):
            replicas.fetch(1, leader=2)
        assert restarted.log.log_end_offset == follower.log.log_end_offset
        back = partition(0, (1, 2), leader=1, leader_epoch=2, partition_epoch=3)
        replicas.publish(build(brokers(1, 2), topic(), back), to=(1, 2))
        assert restarted.is_leader
        assert latest(restarted)[b"k"] == (b"old" if rule == "pre-crash" else None)
    finally:
        replicas.close()

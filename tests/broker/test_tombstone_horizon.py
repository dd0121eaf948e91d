"""A tombstone is removed only below the offset every replica of the partition has reached: a replica that was
away longer than ``delete.retention.ms`` comes back, catches up, is elected, and no deleted key comes back.

Three replicas of t-0 over real logs, the leader and the followers each running the real cleaner. Broker 3 stops
fetching after it holds ``k=old``; the key is deleted, every segment rolls, ``delete.retention.ms`` (0 here)
passes and both remaining replicas clean. Broker 3 returns, catches up and is elected. The same run with the
horizon every replica's cleaner would use without the rule (its high watermark: Kafka's behaviour) shows the
instant is reached: there the tombstone is gone from the others and broker 3 leads with ``k=old``.

The offset every replica reached belongs to one replica set: the later tests add a replica (a reassignment) and
check that neither a follower holding its leader's older word nor a pass already under way removes a tombstone the
new replica still needs.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from controller_images import brokers, build, epoch_of, partition, topic
from replicas import Controller, Replicas, latest_values

from odradek.broker.isr_changes import IsrChangeBatcher
from odradek.broker.log.cleaner.cleaner import Cleaner
from odradek.broker.log.cleaner.manager import CleanerManager
from odradek.broker.log.cleaner.policy import CompactionConfig
from odradek.broker.log.cleaner.runner import CleanerThread, CompactedLog
from odradek.broker.log.config import LogConfig
from odradek.broker.partition import Partition
from odradek.broker.replication import LeaderState
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
                replicas.fetch(b)  # the last rounds tell each follower what both have reached
        assert leader.tombstone_horizon() == leader.log.log_end_offset
        for b in (1, 2, 3):
            assert replicas.parts[b].tombstone_horizon() == leader.log.log_end_offset
            clean(replicas.parts[b], Partition.tombstone_horizon)
            assert b"k" not in latest(replicas.parts[b])
            assert latest(replicas.parts[b]) == {b"other-%d" % i: b"v" for i in range(6)}
    finally:
        replicas.close()


def test_the_offset_every_replica_reached_is_capped_by_each_follower_and_the_high_watermark() -> None:
    s = LeaderState(1, 0, 0, (1, 2, 3), (1, 2, 3), 0, 0, min_isr=1, now_ms=0)
    assert s.all_replicas_offset() == 0  # no follower has fetched from this leader yet
    s.on_follower_fetch(2, 8, 10, now_ms=0)
    assert s.all_replicas_offset() == 0
    s.on_follower_fetch(3, 6, 10, now_ms=0)
    assert (s.high_watermark, s.all_replicas_offset()) == (6, 6)
    s.on_follower_fetch(3, 10, 10, now_ms=0)
    assert (s.high_watermark, s.all_replicas_offset()) == (8, 8)
    s.on_metadata(1, (1, 2, 3, 4), (1, 2, 3), 10, now_ms=0)  # a replica added: nothing is known of it
    assert s.all_replicas_offset() == 0


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
        assert follower.tombstone_horizon() == end
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
        end = replicas.parts[1].log.log_end_offset
        assert replicas.parts[3].tombstone_horizon() == end
        replicas.publish(build(brokers(1, 2, 3), topic(), partition(0, (1, 2, 3), leader=2, leader_epoch=1)))
        assert replicas.parts[3].tombstone_horizon() == 0  # until the new leader answers
        replicas.fetch(1, leader=2)
        replicas.fetch(3, leader=2)
        assert replicas.parts[3].tombstone_horizon() == end
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
        assert leader.tombstone_horizon() == end

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

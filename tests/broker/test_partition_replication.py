"""Partition replication over real logs: a leader and followers wired by direct calls (an in-process "network").

Each broker's replica is a ``Partition`` over a ``Log`` in its own directory. The "controller" is the test: it
hands every live broker a ``PartitionRegistration``. A follower fetch is the leader's ``read_for_follower`` followed by
the follower's ``truncate_to_leader`` or ``append_as_follower``, as the fetcher applies a Fetch response.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from odradek.broker.log.log import Log
from odradek.broker.partition import Divergence, FollowerRead, Partition
from odradek.broker.replication import IsrChange
from odradek.client.common.metadata_image import PartitionRegistration
from odradek.client.errors import (
    ErrorCode,
    FencedLeaderEpochError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
    UnknownLeaderEpochError,
)
from odradek.client.record.builder import encode_batch
from odradek.client.record.header import parse_header

TOPIC_ID = b"\x07" * 16
MAX_BYTES = 1 << 20
LAG_MS = 1000
ALL = -1


def batch(tag: str, n: int = 2) -> bytes:
    return encode_batch([f"{tag}-{i}".encode() for i in range(n)], timestamps=1_000)


def batches_in(buf: bytes | memoryview) -> list[tuple[int, int, int]]:
    """(base offset, last offset, partition leader epoch) of each batch in ``buf``."""
    out, pos = [], 0
    while pos < len(buf):
        h = parse_header(buf, pos)
        out.append((h.base_offset, h.last_offset, h.partition_leader_epoch))
        pos += h.size
    return out


def dump(log: Log) -> bytes:
    """Every batch of the log, as stored."""
    out, offset = [], log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, MAX_BYTES)
        assert data.records, f"no batch at {offset}"
        out.append(bytes(data.records))
        offset = data.next_offset
    return b"".join(out)


class Cluster:
    """Replicas of partition t-0 on brokers ``ids``, with a captured request_isr_change callback."""

    def __init__(self, root: Path, ids: tuple[int, ...] = (1, 2, 3)) -> None:
        self.root = root
        self.changes: list[tuple[int, IsrChange]] = []
        self.parts: dict[int, Partition] = {}
        for b in ids:
            log = Log.open(root / f"broker-{b}" / "t-0")
            self.parts[b] = Partition("t", 0, log, b, request_isr_change=self._capture)

    def _capture(self, p: Partition, change: IsrChange) -> None:
        self.changes.append((p.broker_id, change))

    def __getitem__(self, broker: int) -> Partition:
        return self.parts[broker]

    def close(self) -> None:
        for p in self.parts.values():
            p.close()
            p.log.close()

    def publish(
        self,
        leader: int,
        leader_epoch: int,
        partition_epoch: int,
        isr: tuple[int, ...],
        *,
        to: tuple[int, ...] | None = None,
        replicas: tuple[int, ...] = (1, 2, 3),
        min_isr: int = 1,
        now: int = 0,
    ) -> PartitionRegistration:
        """Committed partition metadata reaching brokers ``to`` (default: every broker)."""
        state = PartitionRegistration(TOPIC_ID, 0, replicas, isr, leader, leader_epoch, partition_epoch)
        for b in self.parts if to is None else to:
            self.parts[b].update(state, min_isr, now)
        return state

    def fetch(self, follower: int, leader: int, now: int = 0, max_bytes: int = MAX_BYTES) -> FollowerRead:
        """One fetch round trip from ``follower`` to ``leader``, applied as the fetcher applies it."""
        f = self.parts[follower]
        offset, epoch = f.fetch_position()
        read = self.parts[leader].read_for_follower(follower, offset, epoch, max_bytes, f.leader_epoch, now)
        if read.diverging is not None:
            f.truncate_to_leader(read.diverging)
        else:
            assert read.data is not None
            f.append_as_follower(bytes(read.data.records), read.high_watermark)
        return read

    def catch_up(self, leader: int, followers: tuple[int, ...], now: int = 0) -> None:
        """Fetch until every follower is at the leader's LEO and has fetched from there (the HW covers all)."""
        for _ in range(50):
            for f in followers:
                self.fetch(f, leader, now)
            leo = self.parts[leader].log.log_end_offset
            if all(self.parts[f].log.log_end_offset == leo for f in followers):
                for f in followers:
                    self.fetch(f, leader, now)  # report the LEO to the leader
                return
        raise AssertionError("followers did not catch up")


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(tmp_path)
    yield c
    c.close()


def assert_consumer_view_below_hw(p: Partition) -> None:
    hw = p.log.high_watermark
    offset = p.log.log_start_offset
    while True:
        data = p.read(offset, MAX_BYTES)
        if not data.records:
            break
        for _, last, _ in batches_in(data.records):
            assert last < hw
        offset = data.next_offset
    assert offset <= hw
    assert not p.read(hw, MAX_BYTES).records


# -- (a) steady replication ----------------------------------------------------------------------------------------


async def test_three_replicas_replicate_and_hw_follows_fetches(cluster: Cluster) -> None:
    cluster.publish(1, 0, 0, (1, 2, 3), min_isr=2)
    leader = cluster[1]
    assert leader.is_leader and cluster[2].is_follower and cluster[3].is_follower

    a = leader.append_as_leader(batch("a"), MAX_BYTES, acks=ALL)
    b = leader.append_as_leader(batch("b", 3), MAX_BYTES, acks=ALL)
    assert (a.first_offset, a.last_offset, b.first_offset, b.last_offset) == (0, 1, 2, 4)
    fa, fb = leader.wait_for_commit(a.last_offset + 1), leader.wait_for_commit(b.last_offset + 1)
    assert leader.log.high_watermark == 0 and not fa.done() and not fb.done()
    assert not leader.read(0, MAX_BYTES).records  # nothing committed, nothing visible

    # First round: the followers get the data, but their fetch offsets (0) prove nothing yet.
    r2 = cluster.fetch(2, 1)
    assert r2.data is not None and batches_in(r2.data.records) == [(0, 1, 0), (2, 4, 0)]
    cluster.fetch(3, 1)
    assert leader.log.high_watermark == 0 and not fa.done()

    # Second round: 2 at 5 alone is not enough, 3 is still in the ISR.
    cluster.fetch(2, 1)
    assert leader.log.high_watermark == 0 and not fa.done()
    cluster.fetch(3, 1)
    assert leader.log.high_watermark == 5
    assert fa.done() and fb.done()
    assert fa.result() == ErrorCode.NONE and fb.result() == ErrorCode.NONE
    assert_consumer_view_below_hw(leader)

    # Followers learn the HW on their next fetch.
    assert cluster[2].log.high_watermark == 0
    cluster.fetch(2, 1)
    assert cluster[2].log.high_watermark == 5


async def test_acks_all_complete_exactly_when_hw_covers_them(cluster: Cluster) -> None:
    """A random schedule of appends and fetches; after every step each acks=all future is done iff the HW covers
    its batch, the HW moved only on a follower fetch, and consumers never see data at or above the HW."""
    cluster.publish(1, 0, 0, (1, 2, 3), min_isr=2)
    leader = cluster[1]
    rng = random.Random(1234)
    futures: list[tuple[int, asyncio.Future]] = []
    hw_history = [0]
    for step in range(150):
        before = leader.log.high_watermark
        if rng.random() < 0.35:
            info = leader.append_as_leader(batch(f"s{step}", rng.randint(1, 4)), MAX_BYTES, acks=ALL)
            futures.append((info.last_offset + 1, leader.wait_for_commit(info.last_offset + 1)))
            assert leader.log.high_watermark == before  # an append alone never commits with followers in the ISR
        else:
            follower = rng.choice((2, 3))
            cluster.fetch(follower, 1, max_bytes=rng.choice((1, 200, MAX_BYTES)))
            f = cluster[follower]
            assert f.log.high_watermark <= f.log.log_end_offset
            assert f.log.high_watermark <= leader.log.high_watermark
        hw = leader.log.high_watermark
        assert hw >= hw_history[-1]
        hw_history.append(hw)
        for end, fut in futures:
            assert fut.done() == (end <= hw), (step, end, hw)
        assert_consumer_view_below_hw(leader)
    assert len(set(hw_history)) > 5  # the HW really moved along the way

    cluster.catch_up(1, (2, 3))
    assert leader.log.high_watermark == leader.log.log_end_offset
    assert all(fut.done() and fut.result() == ErrorCode.NONE for _, fut in futures)
    assert dump(cluster[2].log) == dump(cluster[3].log) == dump(leader.log)


async def test_follower_hw_never_passes_its_own_log(cluster: Cluster) -> None:
    cluster.publish(1, 0, 0, (1, 2))  # 3 is a replica outside the ISR
    for i in range(4):
        cluster[1].append_as_leader(batch(f"x{i}"), MAX_BYTES)
    cluster.catch_up(1, (2,))
    assert cluster[1].log.high_watermark == 8
    read = cluster.fetch(3, 1, max_bytes=1)  # at least one whole batch, no more
    assert read.high_watermark == 8 and read.data is not None and batches_in(read.data.records) == [(0, 1, 0)]
    assert cluster[3].log.log_end_offset == 2 and cluster[3].log.high_watermark == 2
    cluster.fetch(3, 1, max_bytes=1)
    assert cluster[3].log.high_watermark == 4
    cluster.catch_up(1, (3,))
    assert cluster[3].log.high_watermark == cluster[3].log.log_end_offset == 8


async def test_leader_only_isr_commits_on_append(cluster: Cluster) -> None:
    cluster.publish(1, 0, 0, (1,), min_isr=1)
    info = cluster[1].append_as_leader(batch("solo"), MAX_BYTES, acks=ALL)
    assert cluster[1].log.high_watermark == info.last_offset + 1
    fut = cluster[1].wait_for_commit(info.last_offset + 1)
    assert fut.done() and fut.result() == ErrorCode.NONE


# -- (b) failover and divergence -----------------------------------------------------------------------------------


async def test_failover_truncates_old_leader_to_new_leader_epoch_end(cluster: Cluster) -> None:
    l1, l2, f3 = cluster[1], cluster[2], cluster[3]
    cluster.publish(1, 0, 0, (1, 2, 3))
    l1.append_as_leader(batch("a1"), MAX_BYTES)
    l1.append_as_leader(batch("a2"), MAX_BYTES)
    cluster.fetch(2, 1)
    cluster.fetch(3, 1)
    cluster.fetch(2, 1)
    cluster.fetch(3, 1)
    assert l1.log.high_watermark == 4
    l1.append_as_leader(batch("a3"), MAX_BYTES)
    cluster.fetch(2, 1)
    cluster.fetch(3, 1)  # both now have 0..5, but the leader's HW is still 4
    assert l1.log.high_watermark == 4 and l2.log.log_end_offset == f3.log.log_end_offset == 6

    # L1 appends records nobody fetches, with acks=all: they will never commit at epoch 0.
    x = l1.append_as_leader(batch("x1", 3), MAX_BYTES, acks=ALL)
    l1.append_as_leader(batch("x2", 3), MAX_BYTES)
    parked = l1.wait_for_commit(x.last_offset + 1)
    assert l1.log.log_end_offset == 12 and not parked.done()

    # L1 is cut off; the controller elects 2 at epoch 1 with ISR {2, 3}.
    cluster.publish(2, 1, 1, (2, 3), to=(2, 3))
    assert l2.is_leader and f3.is_follower
    assert l2.append_as_leader(batch("y1"), MAX_BYTES).first_offset == 6
    cluster.catch_up(2, (3,))
    assert l2.log.high_watermark == 8

    # L1 comes back and learns it follows 2 at epoch 1: its parked produce is answered.
    cluster.publish(2, 1, 1, (2, 3), to=(1,))
    assert l1.is_follower
    assert parked.done() and parked.result() == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert l1.fetch_position() == (12, 0)
    read = cluster.fetch(1, 2)
    assert read.data is None
    assert read.diverging == Divergence(0, 6)
    # Truncated to L2's end offset for epoch 0 (6), not to its own high watermark (4).
    assert l1.log.log_end_offset == 6 and l1.log.high_watermark == 4
    assert l1.fetch_position() == (6, 0)

    read = cluster.fetch(1, 2)
    assert read.diverging is None and read.data is not None
    assert batches_in(read.data.records) == [(6, 7, 1)]
    assert l1.log.log_end_offset == l2.log.log_end_offset == 8 and l1.log.high_watermark == 8
    assert dump(l1.log) == dump(l2.log) == dump(f3.log)
    assert l1.log.epoch_entries() == l2.log.epoch_entries() == [(0, 0), (1, 6)]
    assert cluster.changes == []  # 1 fetched from 6, below the HW (8): not yet
    cluster.fetch(1, 2)
    # 1 reached the HW and the epoch start: the leader asks to add it back.
    assert cluster.changes[-1] == (2, IsrChange((1, 2, 3), 1, 1))


async def test_divergence_before_new_leader_appends(cluster: Cluster) -> None:
    """The new leader has not written at its epoch yet: its end for epoch 0 is its log end offset."""
    cluster.publish(1, 0, 0, (1, 2, 3))
    cluster[1].append_as_leader(batch("a"), MAX_BYTES)
    cluster.catch_up(1, (2, 3))
    cluster[1].append_as_leader(batch("lost", 4), MAX_BYTES)
    cluster.publish(2, 1, 1, (2, 3))
    read = cluster.fetch(1, 2)
    assert read.diverging == Divergence(0, 2)
    assert cluster[1].log.log_end_offset == 2
    cluster[2].append_as_leader(batch("b"), MAX_BYTES)
    cluster.catch_up(2, (1, 3))
    assert dump(cluster[1].log) == dump(cluster[2].log) == dump(cluster[3].log)


async def test_multi_step_divergence_with_epochs_the_leader_never_had(cluster: Cluster) -> None:
    b1, b2, b3 = cluster[1], cluster[2], cluster[3]
    # Epoch 0, leader 1: offsets 0..3 everywhere.
    cluster.publish(1, 0, 0, (1, 2, 3))
    b1.append_as_leader(batch("a1"), MAX_BYTES)
    b1.append_as_leader(batch("a2"), MAX_BYTES)
    cluster.catch_up(1, (2, 3))
    # Epoch 1, leader 2 alone: 4..7 at epoch 1, never replicated.
    cluster.publish(2, 1, 1, (2,), to=(2,))
    b2.append_as_leader(batch("b1"), MAX_BYTES)
    b2.append_as_leader(batch("b2"), MAX_BYTES)
    # Epoch 2, leader 3 (unclean), 1 follows: 4..9 at epoch 2.
    cluster.publish(3, 2, 2, (3,), to=(1, 3))
    for tag in ("c1", "c2", "c3"):
        b3.append_as_leader(batch(tag), MAX_BYTES)
    cluster.catch_up(3, (1,))
    # Epoch 3, leader 2 again (unclean): 8..9 at epoch 3 on top of its epoch-1 records.
    cluster.publish(2, 3, 3, (2,), to=(2,))
    b2.append_as_leader(batch("d1"), MAX_BYTES)
    assert b2.log.epoch_entries() == [(0, 0), (1, 4), (3, 8)]
    # Epoch 4, leader 1 (which has epochs 0 and 2 only), everybody hears of it.
    cluster.publish(1, 4, 4, (1, 3), min_isr=1)
    b1.append_as_leader(batch("e1"), MAX_BYTES)
    assert b1.log.epoch_entries() == [(0, 0), (2, 4), (4, 10)]
    cluster.catch_up(1, (3,))

    assert b2.fetch_position() == (10, 3)
    divergences = []
    for _ in range(10):
        read = cluster.fetch(2, 1)
        if read.diverging is None:
            break
        divergences.append((read.diverging, b2.log.log_end_offset))
    # Epoch 3 is unknown to the leader: it answers for epoch 2 (ending at 10); 2 knows only epoch 1 below that,
    # which ends at 8. Asked again for epoch 1, the leader answers epoch 0 ending at 4.
    assert divergences == [(Divergence(2, 10), 8), (Divergence(0, 4), 4)]
    cluster.catch_up(1, (2, 3))
    assert dump(b2.log) == dump(b1.log) == dump(b3.log)
    assert b2.log.epoch_entries() == b1.log.epoch_entries()


async def test_follower_with_newer_epoch_than_new_leader_keeps_committed_records(cluster: Cluster) -> None:
    b1, b2, b3 = cluster[1], cluster[2], cluster[3]
    cluster.publish(1, 0, 0, (1, 2, 3))
    for i in range(5):
        b1.append_as_leader(batch(f"a{i}"), MAX_BYTES)
    cluster.catch_up(1, (2, 3))
    assert b1.log.high_watermark == 10
    cluster.fetch(2, 1)
    cluster.fetch(3, 1)
    assert b2.log.high_watermark == b3.log.high_watermark == 10  # 0..9 are committed everywhere
    # Preferred-leader election: 2 leads epoch 1 (ISR unchanged) and writes 10..14 that nobody fetches.
    cluster.publish(2, 1, 1, (1, 2, 3))
    b2.append_as_leader(batch("b", 5), MAX_BYTES)
    # Leadership moves on to 3 at epoch 2 before 3 appended anything: becoming leader starts its epoch.
    cluster.publish(3, 2, 2, (1, 2, 3))
    assert b3.log.epoch_entries() == [(0, 0), (2, 10)]
    assert b2.fetch_position() == (15, 1)
    read = cluster.fetch(2, 3)
    # The leader answers with the largest epoch <= 1 it knows (0), ending where its epoch 2 starts (10), and the
    # follower keeps the committed 0..9.
    assert b2.log.log_end_offset == 10, f"truncated to {b2.log.log_end_offset} after {read.diverging}"
    assert read.diverging == Divergence(0, 10)


async def test_follower_with_newer_epoch_than_leader_that_appended_truncates_to_epoch_end(cluster: Cluster) -> None:
    """As above, but the new leader has written at its epoch: its epoch cache answers epoch 0 ending at 10."""
    b2, b3 = cluster[2], cluster[3]
    cluster.publish(1, 0, 0, (1, 2, 3))
    for i in range(5):
        cluster[1].append_as_leader(batch(f"a{i}"), MAX_BYTES)
    cluster.catch_up(1, (2, 3))
    cluster.publish(2, 1, 1, (1, 2, 3))
    b2.append_as_leader(batch("b", 5), MAX_BYTES)
    cluster.publish(3, 2, 2, (1, 2, 3))
    b3.append_as_leader(batch("c"), MAX_BYTES)
    read = cluster.fetch(2, 3)
    assert read.diverging == Divergence(0, 10)
    assert b2.log.log_end_offset == 10
    cluster.catch_up(3, (1, 2))
    assert dump(b2.log) == dump(b3.log) == dump(cluster[1].log)


async def test_follower_ahead_without_epochs_truncates_to_leader_end(cluster: Cluster) -> None:
    """The fetcher's answer to OFFSET_OUT_OF_RANGE when the follower is ahead: Divergence(-1, leader LEO)."""
    cluster.publish(1, 0, 0, (1, 2, 3))
    for tag in ("a", "b", "c"):
        cluster[1].append_as_leader(batch(tag), MAX_BYTES)
    cluster.catch_up(1, (2,))
    cluster[1].log.truncate_to(2)  # pretend the leader lost its tail
    with pytest.raises(OffsetOutOfRangeError):
        cluster[1].read_for_follower(2, 6, -1, MAX_BYTES, client_epoch=0, now_ms=0)
    assert cluster[2].truncate_to_leader(Divergence(-1, 2)) == 2
    assert dump(cluster[2].log) == dump(cluster[1].log)


# -- (c) min ISR and the fate of acks=all --------------------------------------------------------------------------


async def test_acks_all_below_min_isr_is_refused_before_append(cluster: Cluster) -> None:
    cluster.publish(1, 0, 0, (1,), min_isr=2)
    leader = cluster[1]
    with pytest.raises(NotEnoughReplicasError) as e:
        leader.append_as_leader(batch("no"), MAX_BYTES, acks=ALL)
    assert e.value.code == ErrorCode.NOT_ENOUGH_REPLICAS
    assert leader.log.log_end_offset == 0
    assert dump(leader.log) == b""
    # acks=1 is accepted, but (KIP-966) not committed while the ISR is below min.insync.replicas.
    leader.append_as_leader(batch("yes"), MAX_BYTES, acks=1)
    assert leader.log.log_end_offset == 2 and leader.log.high_watermark == 0
    assert not leader.read(0, MAX_BYTES).records


async def test_parked_ack_fails_when_committed_isr_shrinks_below_min(cluster: Cluster) -> None:
    cluster.publish(1, 0, 0, (1, 2, 3), min_isr=2)
    leader = cluster[1]
    info = leader.append_as_leader(batch("p"), MAX_BYTES, acks=ALL)
    fut = leader.wait_for_commit(info.last_offset + 1)
    cluster.publish(1, 0, 1, (1,), min_isr=2)
    assert fut.done() and fut.result() == ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
    assert leader.log.high_watermark == 0
    with pytest.raises(NotEnoughReplicasError):
        leader.append_as_leader(batch("q"), MAX_BYTES, acks=ALL)


async def test_parked_ack_completes_when_shrink_leaves_enough_replicas(cluster: Cluster) -> None:
    cluster.publish(1, 0, 0, (1, 2, 3), min_isr=2)
    leader = cluster[1]
    info = leader.append_as_leader(batch("p"), MAX_BYTES, acks=ALL)
    fut = leader.wait_for_commit(info.last_offset + 1)
    cluster.fetch(2, 1)
    cluster.fetch(2, 1)  # 2 has it, 3 never fetched
    assert not fut.done()
    cluster.publish(1, 0, 1, (1, 2), min_isr=2)
    assert fut.done() and fut.result() == ErrorCode.NONE
    assert leader.log.high_watermark == 2


async def test_parked_ack_fails_when_leadership_moves(cluster: Cluster) -> None:
    cluster.publish(1, 0, 0, (1, 2, 3), min_isr=2)
    leader = cluster[1]
    info = leader.append_as_leader(batch("p"), MAX_BYTES, acks=ALL)
    fut = leader.wait_for_commit(info.last_offset + 1)
    cluster.publish(2, 1, 1, (2, 3), min_isr=2)
    assert not leader.is_leader
    assert fut.done() and fut.result() == ErrorCode.NOT_LEADER_OR_FOLLOWER
    later = leader.wait_for_commit(info.last_offset + 1)
    assert later.done() and later.result() == ErrorCode.NOT_LEADER_OR_FOLLOWER
    with pytest.raises(NotLeaderOrFollowerError):
        leader.append_as_leader(batch("q"), MAX_BYTES, acks=ALL)


async def test_raising_min_isr_freezes_hw_and_lowering_releases_it(cluster: Cluster) -> None:
    cluster.publish(1, 0, 0, (1, 2), min_isr=1)
    cluster.publish(1, 0, 1, (1,), min_isr=1)
    leader = cluster[1]
    leader.append_as_leader(batch("a"), MAX_BYTES)
    assert leader.log.high_watermark == 2
    cluster.publish(1, 0, 1, (1,), min_isr=2, to=(1,))  # same partition epoch: only the topic config changed
    info = leader.append_as_leader(batch("b"), MAX_BYTES, acks=1)
    fut = leader.wait_for_commit(info.last_offset + 1)
    assert leader.log.high_watermark == 2 and not fut.done()
    cluster.publish(1, 0, 1, (1,), min_isr=1, to=(1,))
    assert leader.log.high_watermark == 4
    assert fut.done() and fut.result() == ErrorCode.NONE


# -- (d) fetch errors ----------------------------------------------------------------------------------------------


async def test_follower_fetch_epoch_errors(cluster: Cluster) -> None:
    cluster.publish(1, 3, 0, (1, 2, 3))
    leader = cluster[1]
    leader.append_as_leader(batch("a"), MAX_BYTES)
    with pytest.raises(FencedLeaderEpochError) as fenced:
        leader.read_for_follower(2, 0, -1, MAX_BYTES, client_epoch=2, now_ms=0)
    assert fenced.value.code == ErrorCode.FENCED_LEADER_EPOCH
    with pytest.raises(UnknownLeaderEpochError) as unknown:
        leader.read_for_follower(2, 0, -1, MAX_BYTES, client_epoch=4, now_ms=0)
    assert unknown.value.code == ErrorCode.UNKNOWN_LEADER_EPOCH
    # Refused fetches record nothing: the follower's LEO stays unknown.
    assert leader.leader_state is not None and leader.leader_state.followers[2].log_end_offset == -1
    read = leader.read_for_follower(2, 0, -1, MAX_BYTES, client_epoch=3, now_ms=0)
    assert read.data is not None and read.data.records


async def test_follower_epoch_errors_on_a_follower_replica(cluster: Cluster) -> None:
    cluster.publish(1, 3, 0, (1, 2, 3))
    follower = cluster[2]
    with pytest.raises(FencedLeaderEpochError):
        follower.read_for_follower(3, 0, -1, MAX_BYTES, client_epoch=2, now_ms=0)
    with pytest.raises(UnknownLeaderEpochError):
        follower.read_for_follower(3, 0, -1, MAX_BYTES, client_epoch=4, now_ms=0)
    with pytest.raises(NotLeaderOrFollowerError) as e:
        follower.read_for_follower(3, 0, -1, MAX_BYTES, client_epoch=3, now_ms=0)
    assert e.value.code == ErrorCode.NOT_LEADER_OR_FOLLOWER


async def test_non_replica_fetch_is_refused(cluster: Cluster) -> None:
    cluster.publish(1, 0, 0, (1, 2), replicas=(1, 2))
    cluster[1].append_as_leader(batch("a"), MAX_BYTES)
    with pytest.raises(NotLeaderOrFollowerError):
        cluster[1].read_for_follower(3, 0, -1, MAX_BYTES, client_epoch=0, now_ms=0)
    with pytest.raises(NotLeaderOrFollowerError):
        cluster[1].read_for_follower(3, 0, -1, MAX_BYTES, client_epoch=-1, now_ms=0)


async def test_consumer_read_errors(cluster: Cluster) -> None:
    cluster.publish(1, 3, 0, (1, 2, 3))
    with pytest.raises(FencedLeaderEpochError):
        cluster[1].read(0, MAX_BYTES, client_epoch=2)
    with pytest.raises(UnknownLeaderEpochError):
        cluster[1].read(0, MAX_BYTES, client_epoch=4)
    with pytest.raises(NotLeaderOrFollowerError):
        cluster[2].read(0, MAX_BYTES)
    with pytest.raises(OffsetOutOfRangeError):
        cluster[1].read(1, MAX_BYTES)


async def test_follower_fetch_out_of_range(cluster: Cluster) -> None:
    leader = cluster[1]
    leader.log.truncate_fully_and_start_at(20)
    cluster.publish(1, 0, 0, (1, 2, 3))
    leader.append_as_leader(batch("a"), MAX_BYTES)
    assert (leader.log.log_start_offset, leader.log.log_end_offset) == (20, 22)
    with pytest.raises(OffsetOutOfRangeError):
        leader.read_for_follower(2, 23, -1, MAX_BYTES, client_epoch=0, now_ms=0)
    with pytest.raises(OffsetOutOfRangeError):
        leader.read_for_follower(2, 10, -1, MAX_BYTES, client_epoch=0, now_ms=0)
    assert leader.leader_state is not None and leader.leader_state.followers[2].log_end_offset == -1
    read = leader.read_for_follower(2, 22, -1, MAX_BYTES, client_epoch=0, now_ms=0)
    assert read.data is not None and not read.data.records and read.log_end_offset == 22


async def test_fetch_past_leo_at_the_leader_epoch_diverges(cluster: Cluster) -> None:
    cluster.publish(1, 0, 0, (1, 2, 3))
    cluster[1].append_as_leader(batch("a"), MAX_BYTES)
    read = cluster[1].read_for_follower(2, 5, 0, MAX_BYTES, client_epoch=0, now_ms=0)
    assert read.diverging == Divergence(0, 2) and read.data is None


# -- (e) ISR change requests ---------------------------------------------------------------------------------------


async def test_isr_changes_reach_the_callback_and_commit(cluster: Cluster) -> None:
    cluster.publish(1, 0, 0, (1, 2, 3), min_isr=1, now=0)
    leader = cluster[1]
    leader.append_as_leader(batch("a"), MAX_BYTES)
    cluster.fetch(2, 1, now=LAG_MS + 1)
    cluster.fetch(2, 1, now=LAG_MS + 1)  # 2 is caught up; 3 never fetched
    assert cluster.changes == []
    leader.check_lagging(LAG_MS, LAG_MS)
    assert cluster.changes == []
    leader.check_lagging(LAG_MS + 1, LAG_MS)
    shrink = IsrChange((1, 2), 0, 0)
    assert cluster.changes == [(1, shrink)]
    assert leader.log.high_watermark == 0  # 3 still counts until the shrink commits
    leader.check_lagging(LAG_MS + 2, LAG_MS)
    assert len(cluster.changes) == 1  # one request at a time

    # The controller refuses it: a new check asks again.
    leader.isr_change_failed(IsrChange((1,), 0, 0))  # not the pending one: ignored
    leader.check_lagging(LAG_MS + 3, LAG_MS)
    assert len(cluster.changes) == 1
    leader.isr_change_failed(shrink)
    leader.check_lagging(LAG_MS + 4, LAG_MS)
    assert cluster.changes == [(1, shrink), (1, shrink)]

    # Committed: the HW advances to 2's LEO.
    cluster.publish(1, 0, 1, (1, 2), now=LAG_MS + 5)
    assert leader.isr == (1, 2) and leader.log.high_watermark == 2
    assert leader.leader_state is not None and leader.leader_state.pending is None

    # 3 comes back and catches up to the HW: the leader asks to add it.
    cluster.fetch(3, 1, now=LAG_MS + 6)
    assert len(cluster.changes) == 2
    cluster.fetch(3, 1, now=LAG_MS + 6)
    assert cluster.changes[-1] == (1, IsrChange((1, 2, 3), 0, 1))
    cluster.publish(1, 0, 2, (1, 2, 3), now=LAG_MS + 7)
    assert leader.isr == (1, 2, 3) and leader.leader_state.isr == (1, 2, 3)


async def test_an_acks_all_wait_ends_when_an_expansion_holding_it_is_refused(cluster: Cluster) -> None:
    """The leader alone in the ISR asks to add a caught-up follower that then stops (a broker in controlled
    shutdown: the controller refuses it, INELIGIBLE_REPLICA). A record appended meanwhile waits on the follower;
    once the change is given up it is committed, with no further append or fetch to move it along."""
    cluster.publish(1, 0, 0, (1,), replicas=(1, 2))
    leader = cluster[1]
    leader.append_as_leader(batch("a"), MAX_BYTES)
    cluster.fetch(2, 1)
    cluster.fetch(2, 1)  # caught up: asked into the ISR
    expansion = IsrChange((1, 2), 0, 0)
    assert cluster.changes == [(1, expansion)]
    info = leader.append_as_leader(batch("b"), MAX_BYTES, acks=ALL)
    waiting = leader.wait_for_commit(info.last_offset + 1)
    assert not waiting.done()  # 2 counts while it is being added
    leader.isr_change_failed(expansion)
    assert waiting.done() and waiting.result() == ErrorCode.NONE
    assert leader.log.high_watermark == info.last_offset + 1


async def test_reassignment_through_partition(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, ids=(1, 2, 3, 4))
    try:
        leader = cluster[1]
        cluster.publish(1, 0, 0, (1, 2, 3), to=(1, 2, 3))
        leader.append_as_leader(batch("a"), MAX_BYTES)
        cluster.catch_up(1, (2, 3))
        # Add 4: it appears as a replica outside the ISR; once it reaches the HW the leader asks to add it.
        cluster.publish(1, 0, 1, (1, 2, 3), replicas=(1, 2, 3, 4))
        assert leader.leader_state is not None and set(leader.leader_state.followers) == {2, 3, 4}
        cluster.catch_up(1, (4,))
        assert cluster.changes == [(1, IsrChange((1, 2, 3, 4), 0, 1))]
        cluster.publish(1, 0, 2, (1, 2, 3, 4), replicas=(1, 2, 3, 4))
        # Remove 3: it may no longer fetch, and no longer holds the HW.
        cluster.publish(1, 0, 3, (1, 2, 4), replicas=(1, 2, 4))
        assert set(leader.leader_state.followers) == {2, 4}
        with pytest.raises(NotLeaderOrFollowerError):
            cluster.fetch(3, 1)
        info = leader.append_as_leader(batch("b"), MAX_BYTES, acks=ALL)
        fut = leader.wait_for_commit(info.last_offset + 1)
        cluster.catch_up(1, (2, 4))
        assert fut.done() and fut.result() == ErrorCode.NONE
        assert dump(cluster[4].log) == dump(leader.log)
    finally:
        cluster.close()


async def test_stale_partition_state_is_ignored(cluster: Cluster) -> None:
    cluster.publish(1, 2, 5, (1, 2, 3))
    assert cluster[1].update(PartitionRegistration(TOPIC_ID, 0, (1, 2, 3), (1,), 1, 2, 5), 1, 0) is False
    assert cluster[1].update(PartitionRegistration(TOPIC_ID, 0, (1, 2, 3), (1,), 2, 1, 9), 1, 0) is False
    assert cluster[1].isr == (1, 2, 3) and cluster[1].is_leader
    assert cluster[1].update(PartitionRegistration(TOPIC_ID, 0, (1, 2, 3), (1, 2), 1, 2, 6), 1, 0) is False
    assert cluster[1].isr == (1, 2)
    assert cluster[1].update(PartitionRegistration(TOPIC_ID, 0, (1, 2, 3), (1, 2), 2, 3, 7), 1, 0) is True
    assert cluster[1].is_follower


async def test_a_leader_that_never_wrote_in_its_epoch_converges_as_a_follower(cluster: Cluster) -> None:
    """Found by the chaos harness: becoming leader starts the epoch at the log end even if nothing is written
    in it; as a follower later, that empty epoch must be dropped on divergence, not sent forever."""
    b1, b2, b3 = cluster[1], cluster[2], cluster[3]
    cluster.publish(1, 0, 0, (1, 2, 3))
    for i in range(3):
        b1.append_as_leader(batch(f"a{i}"), MAX_BYTES)
    cluster.catch_up(1, (2, 3))
    cluster.publish(2, 1, 1, (1, 2, 3), to=(2,))  # 2 leads epoch 1 alone (cut off), writes nothing
    assert b2.log.epoch_entries()[-1] == (1, b2.log.log_end_offset)
    cluster.publish(3, 2, 2, (1, 3))  # meanwhile 3 was elected at epoch 2 and writes
    b3.append_as_leader(batch("c"), MAX_BYTES)
    for _ in range(4):
        cluster.fetch(2, 3)
    assert b2.fetch_position()[1] == 2  # past the divergence, following epoch 2
    assert dump(b2.log) == dump(b3.log)

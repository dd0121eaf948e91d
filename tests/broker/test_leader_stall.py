"""A leader that stalled (SIGSTOP, a frozen event loop) does not drop followers it was not listening to."""

from __future__ import annotations

from pathlib import Path

from odradek.broker.log.config import LogConfig
from odradek.broker.log.manager import LogManager
from odradek.broker.partition import Partition
from odradek.broker.replica_manager import ReplicaManager, monotonic_ms
from odradek.broker.replication import IsrChange, LeaderState
from odradek.client.common.metadata_image import MetadataDelta, MetadataImage
from odradek.proto import metadata_pb2 as md

TOPIC_ID = b"s" * 16
LAG_MS = 1000


def test_on_stall_gives_followers_a_new_window() -> None:
    state = LeaderState(1, 0, 0, (1, 2, 3), (1, 2, 3), 0, 0, min_isr=1, now_ms=0)
    state.on_follower_fetch(2, 0, 5, now_ms=0)  # behind: last caught up at the start
    state.on_stall(now_ms=60_000)
    assert state.check_lagging(5, 60_000 + LAG_MS, LAG_MS).isr_change is None
    shrink = state.check_lagging(5, 60_000 + LAG_MS + 1, LAG_MS).isr_change
    assert shrink is not None and shrink.new_isr == (1,)


def test_on_stall_never_moves_a_caught_up_time_backwards() -> None:
    state = LeaderState(1, 0, 0, (1, 2), (1, 2), 0, 0, min_isr=1, now_ms=0)
    state.on_follower_fetch(2, 0, 0, now_ms=5_000)
    state.on_stall(now_ms=4_000)
    assert state.followers[2].last_caught_up_ms == 5_000


def leading(tmp_path: Path) -> tuple[ReplicaManager, list[IsrChange]]:
    asked: list[IsrChange] = []

    def record(_p: Partition, change: IsrChange) -> None:
        asked.append(change)

    rm = ReplicaManager(1, LogManager([tmp_path]), LogConfig(), isr_changes=record)
    records = [md.MetadataRecord(topic=md.TopicRecord(name="s", topic_id=TOPIC_ID))]
    for b in (1, 2):
        endpoint = md.BrokerEndpoint(host="127.0.0.1", port=1)
        register = md.RegisterBrokerRecord(broker_id=b, broker_epoch=b, endpoint=endpoint, fenced=False)
        records.append(md.MetadataRecord(register_broker=register))
    partition = md.PartitionRecord(topic_id=TOPIC_ID, partition=0, replicas=[1, 2], isr=[1, 2], leader=1)
    records.append(md.MetadataRecord(partition=partition))
    delta = MetadataDelta(MetadataImage())
    delta.replay_all(records)
    rm.apply(delta.image(), delta)
    assert rm.get("s", 0).is_leader
    return rm, asked


def test_a_silent_follower_is_dropped_after_the_lag_window(tmp_path: Path) -> None:
    rm, asked = leading(tmp_path)
    start = monotonic_ms()
    for step in range(1, 9):  # checks every quarter window, as the broker runs them
        rm.check_lagging(LAG_MS, now_ms=start + step * LAG_MS // 4)
    assert [c.new_isr for c in asked] == [(1,)]


def test_a_leader_resumed_from_a_stall_keeps_its_followers_for_a_new_window(tmp_path: Path) -> None:
    rm, asked = leading(tmp_path)
    start = monotonic_ms()
    rm.check_lagging(LAG_MS, now_ms=start)
    resumed = start + 20 * LAG_MS  # stopped for twenty windows: no check ran, no fetch was heard
    for step in range(4):
        rm.check_lagging(LAG_MS, now_ms=resumed + step * LAG_MS // 4)
    assert asked == []
    for step in range(4, 9):  # the follower stays silent a whole window after the leader resumed
        rm.check_lagging(LAG_MS, now_ms=resumed + step * LAG_MS // 4)
    assert [c.new_isr for c in asked] == [(1,)]

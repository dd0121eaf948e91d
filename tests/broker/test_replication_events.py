"""The replication state reports ISR transitions as events, and the partition shell logs them at INFO."""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path

import pytest

from odradek.broker.log.config import LogConfig
from odradek.broker.log.manager import LogManager
from odradek.broker.replica_manager import ReplicaManager, monotonic_ms
from odradek.broker.replication import (
    IsrCommitted,
    IsrExpandRequested,
    IsrShrinkRequested,
    LagWindowRestarted,
    LeaderState,
)
from odradek.client.common.metadata_image import MetadataDelta, MetadataImage
from odradek.proto import metadata_pb2 as md

LAG_MS = 1000
TOPIC_ID = b"o" * 16


def test_a_shrink_names_the_lagging_follower_and_how_long() -> None:
    s = LeaderState(1, 0, 0, (1, 2, 3), (1, 2, 3), 0, 0, min_isr=1, now_ms=0)
    s.on_follower_fetch(2, 5, 5, now_ms=11_000)
    progress = s.check_lagging(5, 12_000, LAG_MS)
    assert progress.events == (IsrShrinkRequested((1, 2), ((3, 12_000),)),)
    assert progress.events[0].describe("orders-3") == (
        "ISR of orders-3 shrinks to 1,2: 3 lagging 12.0 s (asking the controller)"
    )
    committed = s.on_metadata(1, (1, 2, 3), (1, 2), 5, now_ms=12_001)
    assert committed.events == (IsrCommitted((1, 2, 3), (1, 2)),)
    assert committed.events[0].describe("orders-3") == "ISR of orders-3 shrank to 1,2 (was 1,2,3)"


def test_an_expansion_names_the_follower_that_caught_up() -> None:
    s = LeaderState(1, 0, 0, (1, 2, 3), (1, 2), 0, 0, min_isr=1, now_ms=0)
    s.on_follower_fetch(2, 8, 8, now_ms=0)
    progress = s.on_follower_fetch(3, 8, 8, now_ms=0)
    assert progress.events == (IsrExpandRequested((1, 2, 3), 3, 8),)
    assert progress.events[0].describe("orders-3") == (
        "ISR of orders-3 grows to 1,2,3: 3 caught up at offset 8 (asking the controller)"
    )
    assert s.on_follower_fetch(3, 8, 8, now_ms=0).events == ()  # one request in flight: nothing new to report
    committed = s.on_metadata(1, (1, 2, 3), (1, 2, 3), 8, now_ms=0)
    assert committed.events[0].describe("orders-3") == "ISR of orders-3 grew to 1,2,3 (was 1,2)"


def test_a_stall_reports_only_followers_whose_window_restarts() -> None:
    s = LeaderState(1, 0, 0, (1, 2, 3), (1, 2, 3), 0, 0, min_isr=1, now_ms=0)
    s.on_follower_fetch(2, 0, 0, now_ms=9_000)
    assert s.on_stall(now_ms=5_000) == LagWindowRestarted((3,), 5_000)
    assert s.on_stall(now_ms=5_000) is None
    assert LagWindowRestarted((2, 3), 1).describe("orders-3") == (
        "orders-3: leader stalled: followers 2,3 get a new lag window"
    )


def test_the_partition_shell_logs_isr_changes(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="odradek.broker.partition")
    rm = ReplicaManager(1, LogManager([tmp_path]), LogConfig(), isr_changes=lambda p, c: None)
    records = [md.MetadataRecord(topic=md.TopicRecord(name="orders", topic_id=TOPIC_ID))]
    for b in (1, 2):
        register = md.RegisterBrokerRecord(broker_id=b, broker_epoch=b, endpoint=md.BrokerEndpoint(), fenced=False)
        records.append(md.MetadataRecord(register_broker=register))
    partition = md.PartitionRecord(topic_id=TOPIC_ID, partition=3, replicas=[1, 2], isr=[1, 2], leader=1)
    records.append(md.MetadataRecord(partition=partition))
    delta = MetadataDelta(MetadataImage())
    delta.replay_all(records)
    rm.apply(delta.image(), delta)
    p = rm.get("orders", 3)

    start = monotonic_ms()  # the replica manager made the leader state with the monotonic clock
    p.on_leader_stall(now_ms=start + LAG_MS)
    p.check_lagging(now_ms=start + 3 * LAG_MS, lag_max_ms=LAG_MS)  # a window from the stall, silent since
    shrunk = replace(delta.image().partition("orders", 3), isr=(1,), partition_epoch=1)
    p.update(shrunk, min_isr=1, now_ms=start + 3 * LAG_MS)
    lines = [r.getMessage() for r in caplog.records if r.name == "odradek.broker.partition"]
    assert lines[-3:] == [
        "orders-3: leader stalled: followers 2 get a new lag window",
        "ISR of orders-3 shrinks to 1: 2 lagging 2.0 s (asking the controller)",
        "ISR of orders-3 shrank to 1 (was 1,2)",
    ]

"""The transaction coordinator's clock follows steps of the node's wall clock (a chaos run's ``clock-skew``), as
Kafka's transaction timeouts follow the wall clock: a step ahead times open transactions out, and a step back
must not hold off the timeout checks, which are spaced on the monotonic clock."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from test_coordinator_shell import Cluster, ManualClock, ProducerIds, state, until

from odradek.broker.coordinator.clock import Clock
from odradek.broker.transactions.coordinator import TransactionCoordinator, TxnCoordinatorConfig
from odradek.broker.transactions.markers import MarkerChannel
from odradek.broker.transactions.metadata import TxnState
from odradek.broker.transactions.records import TRANSACTION_STATE_TOPIC
from odradek.client.common import clock
from odradek.client.errors import ErrorCode
from odradek.client.structs import TopicPartition

TP = TopicPartition("t", 0)


@pytest.fixture
def offset_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    path = tmp_path / "clock-offset"
    monkeypatch.setattr(clock, "CHECK_INTERVAL_S", 0.0)
    clock.configure(path)
    yield path
    clock.configure(None)


def test_the_transaction_clock_follows_the_offset_and_the_group_clock_does_not(offset_file: Path) -> None:
    following, steady = Clock(follow_skew=True), Clock()
    offset_file.write_text("120")
    assert following() - steady() >= 119_000
    offset_file.write_text("-60")
    assert steady() - following() >= 59_000
    offset_file.unlink()
    assert abs(following() - steady()) < 1000


def coordinator(cluster: Cluster, now: ManualClock) -> TransactionCoordinator:
    async def create(partitions: int, replication_factor: int) -> None:
        raise AssertionError("the topic exists")

    c = TransactionCoordinator(
        1,
        lambda: cluster.image,
        TxnCoordinatorConfig(abort_interval_ms=50),
        create,
        ProducerIds(),
        MarkerChannel(lambda: cluster.image, cluster.send, backoff_ms=10),
        cluster.offsets_partitions,
        now,
    )
    c.on_leadership({(TRANSACTION_STATE_TOPIC, 0): cluster.state})
    return c


async def test_a_step_back_does_not_hold_off_the_timeout_of_a_later_transaction(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path)
    now = ManualClock()
    c = coordinator(cluster, now)
    try:
        await until(lambda: c.partitions[0].loaded, "the partition loads")
        now.now -= 300_000  # the clock steps back 5 minutes, after the timers ran at least once
        _, pid, epoch = await c.init_producer_id("tx", 1000)
        assert await c.add_partitions("tx", pid, epoch, [TP]) == (ErrorCode.NONE, {TP: ErrorCode.NONE})
        now.now += 2000  # the transaction is open for longer than its 1 s timeout
        await until(lambda: state(c) is TxnState.COMPLETE_ABORT, "the timed-out transaction aborted", timeout=3)
        assert c.aborted == 1
    finally:
        await c.close()
        cluster.state.log.close()

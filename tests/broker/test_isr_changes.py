"""The ISR change sender's core (IsrChangeBatcher) against the real controller decision (alter_partition).

The scenario the sender must survive: the controller commits an ISR expansion but its answer is lost (an RPC
deadline while the write waited for the quorum, or a controller failover); the retry at the old partition epoch is
refused with INVALID_UPDATE_VERSION. The leader must keep the expansion pending, so the new member keeps holding
the high watermark, until the committed metadata reaches it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from controller_images import brokers, build, epoch_of, partition, topic
from replicas import Controller, Replicas, batch

from odradek.broker.isr_batcher import IsrChangeBatcher
from odradek.broker.log.log import Log
from odradek.broker.partition import Partition
from odradek.broker.replication import IsrChange
from odradek.client.errors import ErrorCode
from odradek.proto import controller_pb2 as cpb


@pytest.fixture
def replicas(tmp_path: Path):
    r = Replicas(tmp_path)
    yield r
    r.close()


def _send(batcher: IsrChangeBatcher, controller: Controller, lose_answer: bool):
    items = batcher.take()
    response = controller.answer(batcher.request(items, epoch_of(1)))
    return items, batcher.on_response(items, None if lose_answer else response)


async def test_committed_expansion_whose_answer_was_lost_keeps_holding_the_high_watermark(replicas) -> None:
    controller = Controller(build(brokers(1, 2, 3), topic(), partition(0, (1, 3, 2), (1, 2), leader=1)))
    batcher = IsrChangeBatcher(1)
    leader = replicas.parts[1]
    replicas.publish(controller.image)
    leader.append_as_leader(batch("a"), acks=-1)
    for _ in range(2):
        replicas.fetch(2)
        replicas.fetch(3)
    [(p, change)] = replicas.requests
    assert change.new_isr == (1, 3, 2)
    batcher.submit(p, change)

    items, outcome = _send(batcher, controller, lose_answer=True)  # committed, answer lost
    assert controller.image.partition("t", 0).isr == (1, 3, 2)
    assert outcome.retry == items and not outcome.not_applied
    batcher.requeue(outcome.retry)
    _, outcome = _send(batcher, controller, lose_answer=False)  # the retry: INVALID_UPDATE_VERSION
    assert not outcome.retry and not outcome.not_applied  # neither resent nor given up
    assert leader.leader_state is not None and leader.leader_state.pending == change
    assert 3 in leader.leader_state.maximal_isr

    info = leader.append_as_leader(batch("b"), acks=-1)
    ack = leader.wait_for_commit(info.last_offset + 1)
    replicas.fetch(2)
    replicas.fetch(2)  # broker 3 is slow and fetches nothing
    assert not ack.done() and leader.log.high_watermark <= info.first_offset  # 3 still holds the HW

    replicas.publish(controller.image)  # the committed ISR arrives and settles the pending change
    assert leader.isr == (1, 3, 2) and leader.leader_state.pending is None
    follower3 = leader.leader_state.followers[3]
    assert follower3.log_end_offset >= leader.log.high_watermark  # committed members hold the HW
    replicas.fetch(3)
    replicas.fetch(3)
    assert ack.done() and ack.result() == ErrorCode.NONE


@pytest.mark.parametrize(
    ("code", "retried", "given_up"),
    [
        (ErrorCode.NONE, False, False),
        (ErrorCode.NOT_CONTROLLER, True, False),
        (ErrorCode.REQUEST_TIMED_OUT, True, False),
        (ErrorCode.INVALID_UPDATE_VERSION, False, False),
        (ErrorCode.FENCED_LEADER_EPOCH, False, False),
        (ErrorCode.NOT_LEADER_OR_FOLLOWER, False, False),
        (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, False, False),
        (ErrorCode.NEW_LEADER_ELECTED, False, False),
        (ErrorCode.INVALID_REQUEST, False, True),
        (ErrorCode.INELIGIBLE_REPLICA, False, True),
    ],
)
def test_only_answers_that_prove_nothing_was_applied_give_a_change_up(
    tmp_path: Path, code: int, retried: bool, given_up: bool
) -> None:
    item = (_leader(tmp_path), IsrChange((1, 2), 0, 0))
    response = cpb.AlterPartitionResponse(
        topics=[cpb.AlterPartitionTopicResponse(name="t", partitions=[cpb.AlterPartitionItemResponse(error=code)])]
    )
    outcome = IsrChangeBatcher(1).on_response([item], response)
    assert (outcome.retry == [item]) is retried
    assert (outcome.not_applied == [item]) is given_up


@pytest.mark.parametrize(
    "code", [ErrorCode.STALE_BROKER_EPOCH, ErrorCode.NOT_CONTROLLER, ErrorCode.UNKNOWN_SERVER_ERROR, None]
)
def test_whole_request_refusals_and_lost_answers_are_retried(tmp_path: Path, code: int | None) -> None:
    item = (_leader(tmp_path), IsrChange((1, 2), 0, 0))
    response = None if code is None else cpb.AlterPartitionResponse(error=code)
    outcome = IsrChangeBatcher(1).on_response([item], response)
    assert outcome.retry == [item] and not outcome.not_applied


def test_take_drops_changes_the_partition_no_longer_waits_for(tmp_path: Path) -> None:
    p = _leader(tmp_path)
    assert p.leader_state is not None
    batcher = IsrChangeBatcher(1)
    stale = IsrChange((1, 3), 0, 0)
    batcher.submit(p, stale)
    assert batcher.take() == []  # the leader now waits for another change (or none)
    current = p.leader_state.pending = IsrChange((1, 2), 0, 0)
    batcher.submit(p, current)
    assert batcher.take() == [(p, current)]
    assert batcher.take() == []


def _leader(root: Path) -> Partition:
    """Broker 1 leading t-0 (replicas 1, 2, 3)."""
    p = Partition("t", 0, Log.open(root / "t-0"), 1)
    p.update(build(brokers(1, 2, 3), topic(), partition(0, (1, 2, 3), leader=1)).partition("t", 0), 1, 0)
    return p

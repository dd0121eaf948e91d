"""The last in-sync replica returns with a wiped log: the controller (eligible leader replicas, unclean-shutdown
registration) and the partitions over real logs together must keep every acknowledged record.

ISR (1, 2, 3) with min.insync.replicas 2; an acks=all record reaches all three; 2 and 3 fall behind and the
leader shrinks the ISR to itself; the leader loses power and comes back on an empty disk.
"""

from __future__ import annotations

from controller_images import apply, brokers, build, epoch_of, partition, topic
from replicas import Controller, Replicas, batch

from odradek.broker.isr_batcher import IsrChangeBatcher
from odradek.client.errors import ErrorCode
from odradek.controller.brokers import BrokerControl


async def test_a_wiped_last_isr_member_is_never_elected_and_acknowledged_records_survive(tmp_path) -> None:
    controller = Controller(build(brokers(1, 2, 3), topic(), partition(0, (1, 2, 3), leader=1)), lambda _t: 2)
    replicas = Replicas(tmp_path, min_isr=2)
    try:
        replicas.publish(controller.image)
        info = replicas.parts[1].append_as_leader(batch("committed"), acks=-1)
        ack = replicas.parts[1].wait_for_commit(info.last_offset + 1)
        for _ in range(2):
            replicas.fetch(2)
            replicas.fetch(3)
        assert ack.done() and ack.result() == ErrorCode.NONE

        # 2 and 3 lag: the leader shrinks the ISR to itself (the shrink is committed, below the minimum).
        batcher = IsrChangeBatcher(1)
        p = replicas.parts[1]
        late = p.append_as_leader(batch("late"), acks=-1)
        late_ack = p.wait_for_commit(late.last_offset + 1)
        p.check_lagging(now_ms=60_000, lag_max_ms=1000)
        batcher.submit(*replicas.requests[-1])
        items = batcher.take()
        controller.answer(batcher.request(items, epoch_of(1)))
        assert controller.image.partition("t", 0).isr == (1,)
        replicas.publish(controller.image)
        assert late_ack.result() == ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND  # never acknowledged

        # Broker 1 loses power; its session expires. An eligible leader replica takes over at once.
        life = BrokerControl("c", session_timeout_ms=1000, unclean_allowed=lambda _t: False, min_isr=lambda _t: 2)
        life.became_active(controller.image, 0)
        for b in (2, 3):
            life.heartbeat(
                controller.image, broker_id=b, broker_epoch=epoch_of(b), metadata_offset=10**6, want_fence=False,
                want_shutdown=False, now_ms=1500,
            )  # fmt: skip
        image = apply(controller.image, life.expire_sessions(controller.image, 2000, next_offset=100))
        assert image.partition("t", 0).leader == 2

        # It returns on an empty disk: no clean-shutdown epoch, so it leaves the ELR and is not elected.
        replicas.replace_disk(1, "-new")
        d = life.register(
            image, broker_id=1, cluster_id="c", incarnation_id=b"\x99" * 16, host="h", port=1, rack="",
            log_dirs=["/d"], next_offset=200, now_ms=3000, previous_broker_epoch=-1,
        )  # fmt: skip
        image = apply(image, d.records)
        d = life.heartbeat(
            image, broker_id=1, broker_epoch=200, metadata_offset=200, want_fence=False, want_shutdown=False,
            now_ms=3100,
        )  # fmt: skip
        image = apply(image, d.records)
        state = image.partition("t", 0)
        assert state.leader == 2 and 1 not in state.isr and 1 not in state.eligible_leader_replicas

        replicas.publish(image)
        for _ in range(3):
            replicas.fetch(1, leader=2)
            replicas.fetch(3, leader=2)
        committed = [b"committed-0", b"committed-1"]
        assert replicas.values(2) == replicas.values(3) == replicas.values(1) == committed
    finally:
        replicas.close()

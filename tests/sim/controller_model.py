"""The active controller: the REAL sans-I/O decisions (BrokerControl, alter_partition, the elections inside them)
over a committed metadata log kept as a list of record batches.

A decision commits at once (the Raft quorum is not simulated here); its answer then travels over the lossy
network like any other. A failover makes the controller unreachable for a while, then a fresh BrokerControl
takes over (every session restarts), as when another controller wins the election: answers in flight are lost.
"""

from __future__ import annotations

from dataclasses import dataclass

from world import World

from odradek.client.common.metadata_image import MetadataDelta, MetadataImage
from odradek.controller.brokers import BrokerControl, Decision
from odradek.controller.isr import AlterPartitionResults, IsrItem, alter_partition
from odradek.proto import metadata_pb2 as md

CLUSTER_ID = "sim"
TOPIC = "t"
TOPIC_ID = b"T" * 16


def register(lifecycle: BrokerControl, image: MetadataImage, previous_broker_epoch: int, **kwargs) -> Decision:
    """Registration with ``previous_broker_epoch``: the broker's last epoch after a clean stop, else -1."""
    return lifecycle.register(image, previous_broker_epoch=previous_broker_epoch, **kwargs)


@dataclass(frozen=True)
class Batch:
    first_offset: int
    records: tuple[md.MetadataRecord, ...]


def describe(records: list[md.MetadataRecord] | tuple[md.MetadataRecord, ...]) -> str:
    parts = []
    for r in records:
        kind = r.WhichOneof("record")
        body = getattr(r, kind)
        if kind == "partition_change":
            fields = [f"p{body.partition}"]
            if body.HasField("leader"):
                fields.append(f"leader={body.leader}")
            if body.isr_changed:
                fields.append(f"isr={list(body.isr)}")
            parts.append("change(" + " ".join(fields) + ")")
        elif kind in ("register_broker", "fence_broker", "unfence_broker", "broker_registration_change"):
            parts.append(f"{kind}({body.broker_id}@{body.broker_epoch})")
        else:
            parts.append(kind)
    return ", ".join(parts)


class SimController:
    def __init__(self, world: World, brokers: int, partitions: int, session_timeout_ms: int, min_isr: int) -> None:
        self.min_isr = min_isr
        self.world = world
        self.session_timeout_ms = session_timeout_ms
        self.batches: list[Batch] = []
        self.image = MetadataImage()
        self.active = True
        self.term = 0
        # Every (partition, leader epoch) -> (leader, its incarnation then) the committed metadata ever named.
        self.elected: dict[tuple[int, int], tuple[int, bytes | None]] = {}
        self.lifecycle = self._new_lifecycle()
        self.listeners: list = []  # called with the new batch index after each commit
        records = []
        for b in range(1, brokers + 1):
            epoch = len(records)
            records.append(
                md.MetadataRecord(
                    register_broker=md.RegisterBrokerRecord(
                        broker_id=b,
                        incarnation_id=f"b{b}-g1".encode().ljust(16, b"."),
                        broker_epoch=epoch,
                        endpoint=md.BrokerEndpoint(host="sim", port=b),
                        fenced=True,
                    )
                )
            )
            records.append(md.MetadataRecord(unfence_broker=md.UnfenceBrokerRecord(broker_id=b, broker_epoch=epoch)))
        records.append(md.MetadataRecord(topic=md.TopicRecord(name=TOPIC, topic_id=TOPIC_ID)))
        for i in range(partitions):
            replicas = [(i + k) % brokers + 1 for k in range(3)]
            records.append(
                md.MetadataRecord(
                    partition=md.PartitionRecord(
                        topic_id=TOPIC_ID, partition=i, replicas=replicas, isr=replicas, leader=replicas[0]
                    )
                )
            )
        self.commit(records)
        self.lifecycle.became_active(self.image, 0)

    def _new_lifecycle(self) -> BrokerControl:
        return BrokerControl(CLUSTER_ID, self.session_timeout_ms, lambda topic: False, lambda topic: self.min_isr)

    @property
    def next_offset(self) -> int:
        return self.image.offset + 1

    def broker_epoch(self, broker_id: int) -> int:
        b = self.image.brokers.get(broker_id)
        return -1 if b is None else b.epoch

    def commit(self, records: list[md.MetadataRecord]) -> None:
        if not records:
            return
        first = self.next_offset
        delta = MetadataDelta(self.image)
        delta.replay_all(records)
        delta.set_position(first + len(records) - 1, self.term)
        self.image = delta.image()
        self.batches.append(Batch(first, tuple(records)))
        self.world.log(f"CTL  commit @{first}: {describe(records)}")
        topic = self.image.topic(TOPIC)
        for p in topic.partitions.values():
            leader = self.image.brokers.get(p.leader)
            self.elected.setdefault(
                (p.partition, p.leader_epoch), (p.leader, None if leader is None else leader.incarnation_id)
            )
        for listener in self.listeners:
            listener(len(self.batches))

    # -- requests (called when they arrive; None = not answered) -------------------------------------------------

    def on_register(self, broker_id: int, incarnation: bytes, previous_broker_epoch: int) -> Decision | None:
        if not self.active:
            return None
        d = register(
            self.lifecycle,
            self.image,
            previous_broker_epoch,
            broker_id=broker_id,
            cluster_id=CLUSTER_ID,
            incarnation_id=incarnation,
            host="sim",
            port=broker_id,
            rack="",
            log_dirs=["/sim"],
            next_offset=self.next_offset,
            now_ms=self.world.now,
        )
        self.commit(d.records)
        return d

    def on_heartbeat(
        self, broker_id: int, broker_epoch: int, metadata_offset: int, want_shutdown: bool
    ) -> Decision | None:
        if not self.active:
            return None
        d = self.lifecycle.heartbeat(
            self.image,
            broker_id=broker_id,
            broker_epoch=broker_epoch,
            metadata_offset=metadata_offset,
            want_fence=False,
            want_shutdown=want_shutdown,
            now_ms=self.world.now,
            next_offset=self.next_offset,
        )
        self.commit(d.records)
        return d

    def on_alter_partition(
        self, broker_id: int, broker_epoch: int, items: list[IsrItem]
    ) -> AlterPartitionResults | None:
        if not self.active:
            return None
        records, results = alter_partition(self.image, broker_id, broker_epoch, items, lambda topic: self.min_isr)
        self.commit(records)
        return results

    # -- periodic and faults -------------------------------------------------------------------------------------

    def expire_sessions(self) -> None:
        if self.active:
            self.commit(self.lifecycle.expire_sessions(self.image, self.world.now, self.next_offset))

    def fail_over(self, down_ms: int) -> None:
        if not self.active:
            return
        self.active = False
        self.world.log(f"CTL  FAILOVER: unreachable for {down_ms} ms")
        self.world.after(down_ms, "controller elected", self._take_over)

    def _take_over(self) -> None:
        self.term += 1
        self.lifecycle = self._new_lifecycle()
        self.lifecycle.became_active(self.image, self.world.now)
        self.active = True
        self.world.log(f"CTL  new active controller (term {self.term}): every session restarts")

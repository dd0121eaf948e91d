"""The broker lifecycle on the active controller: registration, heartbeats, fencing, controlled shutdown.

Sans-I/O: methods take the current image and the time and return the metadata records to append plus the
answer for the broker. Sessions (last heartbeat times) live only in the active controller's memory; a new active
controller gives every broker a full session timeout before fencing it.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field

from odradek.client.common.metadata_image import MetadataDelta, MetadataImage, listener_messages
from odradek.client.errors import ErrorCode
from odradek.controller.elections import (
    MinIsr,
    changes_after_broker_loss,
    changes_after_unclean_shutdown,
    changes_for_offline_partitions,
    one_replica,
)
from odradek.controller.offline_replicas import Replica, offline_replica_records
from odradek.proto import metadata_pb2 as md


@dataclass
class Decision:
    """Records to append (in one batch) and the fields of the answer."""

    records: list[md.MetadataRecord] = field(default_factory=list)
    error: ErrorCode.ValueType = ErrorCode.NONE
    message: str = ""
    broker_epoch: int = -1
    is_caught_up: bool = False
    is_fenced: bool = True
    should_shut_down: bool = False


def _apply(image: MetadataImage, records: list[md.MetadataRecord]) -> MetadataImage:
    delta = MetadataDelta(image)
    delta.replay_all(records)
    return delta.image()


def _partition_records(changes: list[md.PartitionChangeRecord]) -> list[md.MetadataRecord]:
    return [md.MetadataRecord(partition_change=c) for c in changes]


class BrokerControl:
    def __init__(
        self,
        cluster_id: str,
        session_timeout_ms: int,
        unclean_allowed: Callable[[str], bool],
        min_isr: MinIsr = one_replica,
    ) -> None:
        self.cluster_id = cluster_id
        self.session_timeout_ms = session_timeout_ms
        self.unclean_allowed = unclean_allowed
        self.min_isr = min_isr
        self._last_seen: dict[int, int] = {}
        # Offset of the record that fenced each broker: it is unfenced only once its metadata has reached it, so a
        # broker resuming from a pause never acts again on the partition leaderships it lost meanwhile.
        self._fenced_at: dict[int, int] = {}

    def became_active(self, image: MetadataImage, now_ms: int) -> None:
        """A new active controller: every registered broker starts a fresh session; a fenced one must catch up
        with everything committed so far (where its fence record is, this controller does not know)."""
        self._last_seen = {broker_id: now_ms for broker_id in image.brokers}
        self._fenced_at = {b.broker_id: image.offset for b in image.brokers.values() if b.fenced}

    def _session_alive(self, broker_id: int, now_ms: int) -> bool:
        seen = self._last_seen.get(broker_id)
        return seen is not None and now_ms - seen < self.session_timeout_ms

    def register(
        self,
        image: MetadataImage,
        *,
        broker_id: int,
        cluster_id: str,
        incarnation_id: bytes,
        host: str,
        port: int,
        rack: str,
        log_dirs: list[str],
        next_offset: int,
        now_ms: int,
        previous_broker_epoch: int = -1,
        listeners: Sequence[tuple[str, str, int]] = (),
    ) -> Decision:
        """Register (or re-register after a restart). The broker epoch is the registration record's offset.

        ``previous_broker_epoch`` is the epoch the broker recorded at its last clean shutdown (-1: none, its last
        stop was unclean or its log dir is new). Unless it matches the current registration, the broker may miss
        records it had acknowledged, so it leaves every ISR and ELR in the same batch. ``listeners`` are its other
        advertised listeners as (name, host, port), e.g. its Kafka listener; a new registration replaces them."""
        if cluster_id != self.cluster_id:
            return Decision(
                error=ErrorCode.INCONSISTENT_CLUSTER_ID,
                message=f"broker belongs to cluster {cluster_id!r}, this is {self.cluster_id!r}",
            )
        current = image.brokers.get(broker_id)
        if current is not None and current.incarnation_id == incarnation_id:
            self._last_seen[broker_id] = now_ms  # a retried registration of the same process
            return Decision(broker_epoch=current.epoch, is_fenced=current.fenced)
        if current is not None and not current.fenced and self._session_alive(broker_id, now_ms):
            return Decision(
                error=ErrorCode.DUPLICATE_BROKER_REGISTRATION,
                message=f"another live process is registered as broker {broker_id}",
            )
        record = md.RegisterBrokerRecord(
            broker_id=broker_id,
            incarnation_id=incarnation_id,
            broker_epoch=next_offset,
            endpoint=md.BrokerEndpoint(host=host, port=port),
            rack=rack,
            fenced=True,
            log_dirs=log_dirs,
            listeners=listener_messages(listeners),
        )
        records = [md.MetadataRecord(register_broker=record)]
        if current is not None and not current.fenced:
            # The old incarnation is gone (session over or no session): its partitions move before it returns.
            records += _partition_records(
                changes_after_broker_loss(image, {broker_id}, self.unclean_allowed, self.min_isr)
            )
        if current is not None and previous_broker_epoch != current.epoch:
            after = _apply(image, records)
            records += _partition_records(changes_after_unclean_shutdown(after, broker_id, self.min_isr))
        self._last_seen[broker_id] = now_ms
        self._fenced_at.pop(broker_id, None)  # a new registration: catching up to it is enough
        return Decision(records=records, broker_epoch=next_offset)

    def heartbeat(
        self,
        image: MetadataImage,
        *,
        broker_id: int,
        broker_epoch: int,
        metadata_offset: int,
        want_fence: bool,
        want_shutdown: bool,
        now_ms: int,
        next_offset: int = -1,
        offline_replicas: Collection[Replica] = (),
    ) -> Decision:
        current = image.brokers.get(broker_id)
        if current is None:
            return Decision(error=ErrorCode.BROKER_ID_NOT_REGISTERED, message=f"broker {broker_id} is not registered")
        if current.epoch != broker_epoch:
            return Decision(
                error=ErrorCode.STALE_BROKER_EPOCH,
                message=f"broker epoch {broker_epoch} is not the current {current.epoch}",
            )
        self._last_seen[broker_id] = now_ms
        caught_up = metadata_offset >= max(current.epoch, self._fenced_at.get(broker_id, -1))
        decision = Decision(broker_epoch=current.epoch, is_caught_up=caught_up, is_fenced=current.fenced)
        if want_shutdown:
            return self._controlled_shutdown(image, broker_id, decision)
        if current.fenced and caught_up and not want_fence:
            unfence = md.MetadataRecord(
                unfence_broker=md.UnfenceBrokerRecord(broker_id=broker_id, broker_epoch=current.epoch)
            )
            after = _apply(image, [unfence])
            decision.records = [
                unfence,
                *_partition_records(changes_for_offline_partitions(after, self.unclean_allowed, self.min_isr)),
            ]
            decision.is_fenced = False
        elif not current.fenced and want_fence:
            self._fenced_at[broker_id] = next_offset
            decision.records = self._fence(image, broker_id)
            decision.is_fenced = True
        if offline_replicas:  # a failed log dir: leadership and ISR membership leave those replicas
            decision.records += offline_replica_records(
                image, decision.records, broker_id, offline_replicas, self.unclean_allowed, self.min_isr
            )
        return decision

    def _controlled_shutdown(self, image: MetadataImage, broker_id: int, decision: Decision) -> Decision:
        current = image.brokers[broker_id]
        records: list[md.MetadataRecord] = []
        if not current.in_controlled_shutdown and not current.fenced:
            records.append(
                md.MetadataRecord(
                    broker_registration_change=md.BrokerRegistrationChangeRecord(
                        broker_id=broker_id, broker_epoch=current.epoch, in_controlled_shutdown=True
                    )
                )
            )
        records += _partition_records(changes_after_broker_loss(image, {broker_id}, self.unclean_allowed, self.min_isr))
        after = _apply(image, records) if records else image
        leads = any(p.leader == broker_id for t in after.topics.values() for p in t.partitions.values())
        decision.records = records
        decision.should_shut_down = not leads
        return decision

    def _fence(self, image: MetadataImage, broker_id: int) -> list[md.MetadataRecord]:
        epoch = image.brokers[broker_id].epoch
        fence = md.MetadataRecord(fence_broker=md.FenceBrokerRecord(broker_id=broker_id, broker_epoch=epoch))
        return [
            fence,
            *_partition_records(changes_after_broker_loss(image, {broker_id}, self.unclean_allowed, self.min_isr)),
        ]

    def expire_sessions(self, image: MetadataImage, now_ms: int, next_offset: int) -> list[md.MetadataRecord]:
        """Fence every unfenced broker whose session ran out, moving its leaderships in the same batch (committed at
        ``next_offset``)."""
        expired = {
            b.broker_id for b in image.brokers.values() if not b.fenced and not self._session_alive(b.broker_id, now_ms)
        }
        if not expired:
            return []
        for b in expired:
            self._fenced_at[b] = next_offset
        records = [
            md.MetadataRecord(fence_broker=md.FenceBrokerRecord(broker_id=b, broker_epoch=image.brokers[b].epoch))
            for b in sorted(expired)
        ]
        return records + _partition_records(
            changes_after_broker_loss(image, expired, self.unclean_allowed, self.min_isr)
        )

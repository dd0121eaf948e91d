"""The metadata state machine: folds committed Raft entries into the metadata image and snapshots it.

Controllers and brokers run the same one. Each Raft entry holds a ``MetadataBatch``; a batch is applied
atomically, and listeners see each new image together with the delta that produced it, so a broker can act on
just the partitions that changed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from odradek.client.common.metadata_image import MetadataDelta, MetadataImage, image_from_records
from odradek.controller.raft import Entry, LeaderAndEpoch, Role
from odradek.controller.raft.snapshot import SnapshotId
from odradek.proto import metadata_pb2 as md

logger = logging.getLogger(__name__)

Listener = Callable[[MetadataImage, MetadataDelta], None]


def encode_batch(records: list[md.MetadataRecord]) -> bytes:
    return md.MetadataBatch(records=records).SerializeToString()


class MetadataStateMachine:
    def __init__(self, cluster_id: str, snapshot_interval_entries: int = 20_000) -> None:
        self.cluster_id = cluster_id
        self.image = MetadataImage()
        self.snapshot_interval = snapshot_interval_entries
        self._since_snapshot = 0
        self._listeners: list[Listener] = []
        self._leader_listeners: list[Callable[[LeaderAndEpoch], None]] = []
        self._offset_waiters: list[tuple[int, asyncio.Future[None]]] = []
        self.leader = LeaderAndEpoch(None, 0, Role.UNATTACHED)

    def on_change(self, listener: Listener) -> None:
        self._listeners.append(listener)

    def on_leader_change(self, listener: Callable[[LeaderAndEpoch], None]) -> None:
        self._leader_listeners.append(listener)

    async def wait_for_offset(self, offset: int, timeout: float) -> bool:
        """Wait until the image has applied ``offset``, so that what was committed up to there shows in this node's
        answers; False if ``timeout`` seconds pass first."""
        if self.image.offset >= offset:
            return True
        waiter = (offset, asyncio.get_running_loop().create_future())
        self._offset_waiters.append(waiter)
        try:
            async with asyncio.timeout(timeout):
                await waiter[1]
            return True
        except TimeoutError:
            return False
        finally:
            self._offset_waiters.remove(waiter)

    # -- StateMachine protocol --

    def load_snapshot(self, snapshot_id: SnapshotId, data: bytes) -> None:
        snapshot = md.MetadataSnapshot.FromString(data)
        image = image_from_records(snapshot.records, offset=snapshot_id.end_offset - 1, epoch=snapshot_id.epoch)
        # Listeners see a snapshot as a change of every topic in it and a deletion of every topic not in it.
        delta = MetadataDelta(self.image)
        delta.mark_whole(image.topics)
        delta.changed_brokers = set(image.brokers) | set(self.image.brokers)
        delta.deleted_topics = {tid: t for tid, t in self.image.topics.items() if tid not in image.topics}
        self._publish(image, delta)
        self._since_snapshot = 0

    def apply(self, entries: list[Entry]) -> None:
        delta = MetadataDelta(self.image)
        for entry in entries:
            if entry.data and not entry.control:
                try:
                    batch = md.MetadataBatch.FromString(entry.data)
                except Exception:  # a record this version cannot parse would corrupt the image: stop loudly
                    logger.critical("undecodable metadata entry at offset %d", entry.offset)
                    raise
                delta.replay_all(batch.records)
            delta.set_position(entry.offset, entry.epoch)
        self._since_snapshot += len(entries)
        self._publish(delta.image(), delta)

    def snapshot(self) -> tuple[SnapshotId, bytes] | None:
        if self._since_snapshot < self.snapshot_interval or self.image.offset < 0:
            return None
        self._since_snapshot = 0
        image = self.image
        data = md.MetadataSnapshot(
            end_offset=image.offset + 1, epoch=image.epoch, cluster_id=self.cluster_id, records=image.to_records()
        ).SerializeToString()
        return SnapshotId(image.offset + 1, image.epoch), data

    def leader_changed(self, leader: LeaderAndEpoch) -> None:
        self.leader = leader
        for listener in self._leader_listeners:
            listener(leader)

    def _publish(self, image: MetadataImage, delta: MetadataDelta) -> None:
        self.image = image
        for listener in self._listeners:
            listener(image, delta)
        for offset, waiter in self._offset_waiters:
            if offset <= image.offset and not waiter.done():
                waiter.set_result(None)

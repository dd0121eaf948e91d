"""Replicas of t-0 over real logs wired by direct calls, and the active controller's real decisions: the harness
of the broker tests that follow a scenario through the controller and the partitions together."""

from __future__ import annotations

from pathlib import Path

from controller_images import apply

from odradek.broker.isr_changes import Item
from odradek.broker.log.config import LogConfig
from odradek.broker.log.log import Log
from odradek.broker.partition import Partition
from odradek.client.record.batch import read_batches
from odradek.client.record.builder import encode_batch
from odradek.controller.isr import MinIsr, alter_partition, isr_items
from odradek.controller.metadata.image import MetadataImage, PartitionRegistration
from odradek.proto import controller_pb2 as cpb

MAX = 1 << 20


def batch(tag: str) -> bytes:
    return encode_batch([f"{tag}-{i}".encode() for i in range(2)], timestamps=1_000)


class Controller:
    """The active controller's AlterPartition decision, committing what it accepts."""

    def __init__(self, image: MetadataImage, min_isr: MinIsr | None = None) -> None:
        self.image = image
        self.min_isr = min_isr or (lambda _t: 1)

    def answer(self, request: cpb.AlterPartitionRequest) -> cpb.AlterPartitionResponse:
        records, out = alter_partition(
            self.image, request.broker_id, request.broker_epoch, isr_items(request), self.min_isr
        )
        self.image = apply(self.image, records)
        return out.response()


class Replicas:
    def __init__(
        self, root: Path, ids: tuple[int, ...] = (1, 2, 3), min_isr: int = 1, config: LogConfig | None = None
    ) -> None:
        self.root = root
        self.min_isr = min_isr
        self.config = config
        self.requests: list[Item] = []
        self.parts = {b: self._open(b, "") for b in ids}

    def _open(self, broker: int, disk: str) -> Partition:
        p = Partition("t", 0, Log.open(self.root / f"b{broker}{disk}" / "t-0", self.config), broker)
        p.request_isr_change = lambda p, c: self.requests.append((p, c))
        return p

    def replace_disk(self, broker: int, disk: str) -> None:
        """``broker`` comes back on another (empty) disk."""
        self.parts[broker].log.close()
        self.parts[broker] = self._open(broker, disk)

    def publish(self, image: MetadataImage, to: tuple[int, ...] = (1, 2, 3)) -> None:
        for b in to:
            self.parts[b].update(image.partition("t", 0), self.min_isr, 0)

    def fetch(self, follower: int, leader: int = 1) -> None:
        """One fetch round trip, applied as the fetcher applies it."""
        f = self.parts[follower]
        offset, epoch = f.fetch_position()
        read = self.parts[leader].read_for_follower(follower, offset, epoch, MAX, f.leader_epoch, 0)
        if read.diverging is not None:
            f.truncate_to_leader(read.diverging)
        else:
            assert read.data is not None
            f.append_as_follower(
                bytes(read.data.records),
                read.high_watermark,
                read.log_start_offset,
                read.all_replicas_offset,
                fetch_offset=offset,
            )

    def values(self, broker: int) -> list[bytes | None]:
        """Every record value in ``broker``'s log."""
        log, out = self.parts[broker].log, []
        offset = log.log_start_offset
        while offset < log.log_end_offset:
            data = log.read(offset, MAX)
            out += [r.value for b in read_batches(bytes(data.records)) for r in b.records()]
            offset = data.next_offset
        return out

    def close(self) -> None:
        for p in self.parts.values():
            p.log.close()


class OneReplica:
    """The slice of ReplicaManager the data plane (BrokerService) uses, over one broker's replica of t-0."""

    def __init__(self, partition: Partition, state: PartitionRegistration) -> None:
        self.partitions = {("t", 0): partition}
        self.state = state
        self.image = self

    def get(self, topic: str, partition: int) -> Partition:
        return self.partitions[(topic, partition)]

    def partition(self, topic: str, partition: int) -> PartitionRegistration:
        return self.state

"""AllocateProducerIds decisions (controller/producer_ids.py): epochs, disjoint increasing blocks, snapshots."""

from __future__ import annotations

import random
from itertools import pairwise

from controller_images import apply, brokers, build, epoch_of

from odradek.client.common.metadata_image import MetadataImage, image_from_records
from odradek.client.errors import ErrorCode, OdradekError
from odradek.controller.active import NotControllerError
from odradek.controller.producer_ids import INT64_MAX, allocate_producer_ids
from odradek.controller.services import ControllerService
from odradek.proto import controller_pb2 as cpb
from odradek.proto import metadata_pb2 as md


def test_blocks_are_disjoint_and_increasing_across_brokers() -> None:
    image = build(brokers(1, 2, 3))
    rng = random.Random(7)
    blocks = []
    for _ in range(50):
        b = rng.choice((1, 2, 3))
        records, out = allocate_producer_ids(image, b, epoch_of(b))
        assert out.error == ErrorCode.NONE and out.length == 1000
        [record] = records
        assert record.producer_ids == md.ProducerIdsRecord(
            broker_id=b, broker_epoch=epoch_of(b), next_producer_id=out.start + 1000
        )
        image = apply(image, records)
        assert image.next_producer_id == out.start + out.length
        blocks.append((out.start, out.start + out.length))
    assert blocks[0][0] == 0
    assert all(end <= next_start for (_, end), (next_start, _) in pairwise(blocks))


def test_next_block_survives_a_snapshot_round_trip() -> None:
    image = build(brokers(1, 2))
    seen: set[int] = set()
    for b in (1, 2, 1):
        records, out = allocate_producer_ids(image, b, epoch_of(b), block_size=10)
        image = apply(image, records)
        seen.update(range(out.start, out.start + out.length))
    restored = image_from_records(image.to_records())
    assert restored.next_producer_id == image.next_producer_id == 30
    _, out = allocate_producer_ids(restored, 2, epoch_of(2), block_size=10)
    assert out.start == 30 and not seen & set(range(out.start, out.start + out.length))


def test_unknown_broker_and_other_epoch_are_stale() -> None:
    image = build(brokers(1))
    for broker, epoch in ((9, 0), (1, epoch_of(1) + 1), (1, -1)):
        records, out = allocate_producer_ids(image, broker, epoch)
        assert (records, out.error, out.start, out.length) == ([], ErrorCode.STALE_BROKER_EPOCH, -1, 0)
        assert out.message


def test_a_fenced_broker_may_allocate() -> None:
    image = build(brokers(1, fenced=(1,)))
    assert image.brokers[1].fenced
    records, out = allocate_producer_ids(image, 1, epoch_of(1))
    assert out.error == ErrorCode.NONE and records


def _at(next_id: int) -> MetadataImage:
    return apply(build(brokers(1)), [md.MetadataRecord(producer_ids=md.ProducerIdsRecord(next_producer_id=next_id))])


def test_int64_overflow_is_refused() -> None:
    records, out = allocate_producer_ids(_at(INT64_MAX - 1000), 1, epoch_of(1))
    assert out.error == ErrorCode.NONE and records[0].producer_ids.next_producer_id == INT64_MAX
    records, out = allocate_producer_ids(_at(INT64_MAX - 999), 1, epoch_of(1))
    assert (records, out.error, out.start) == ([], ErrorCode.UNKNOWN_SERVER_ERROR, -1)
    assert "exhausted" in out.message


class FakeController:
    """Just ``write``: decides on an image and keeps the result, as the active controller would after commit."""

    def __init__(self, image: MetadataImage, error: OdradekError | None = None) -> None:
        self.image = image
        self.error = error

    async def write(self, decide):
        if self.error is not None:
            raise self.error
        records, result = decide(self.image, self.image.offset + 1)
        self.image = apply(self.image, records)
        return result


async def test_service_answers_blocks_and_errors() -> None:
    controller = FakeController(build(brokers(1, 2)))
    service = ControllerService(controller)  # type: ignore[arg-type]
    first = await service.AllocateProducerIds(cpb.AllocateProducerIdsRequest(broker_id=1, broker_epoch=10), None)
    second = await service.AllocateProducerIds(cpb.AllocateProducerIdsRequest(broker_id=2, broker_epoch=20), None)
    assert (first.error, first.producer_id_start, first.producer_id_len) == (ErrorCode.NONE, 0, 1000)
    assert (second.error, second.producer_id_start, second.producer_id_len) == (ErrorCode.NONE, 1000, 1000)
    stale = await service.AllocateProducerIds(cpb.AllocateProducerIdsRequest(broker_id=2, broker_epoch=1), None)
    assert (stale.error, stale.producer_id_start) == (ErrorCode.STALE_BROKER_EPOCH, -1)
    controller.error = NotControllerError(3)
    moved = await service.AllocateProducerIds(cpb.AllocateProducerIdsRequest(broker_id=1, broker_epoch=10), None)
    assert (moved.error, moved.producer_id_start, moved.producer_id_len) == (ErrorCode.NOT_CONTROLLER, -1, 0)

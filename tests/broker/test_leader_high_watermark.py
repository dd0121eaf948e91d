"""After a leader change no client-visible offset goes backwards.

A new leader's high watermark is the one it had as a follower, which lags the previous leader's by a fetch. Until
it reaches the start of the new leader epoch, ListOffsets LATEST and consumer fetches answer OFFSET_NOT_AVAILABLE
(retriable) instead of an older end and an empty read of records that were already committed and consumed.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from replicas import OneReplica

from odradek.broker.api.data import EARLIEST, LATEST, DataService
from odradek.broker.dataplane import BrokerService
from odradek.broker.log.log import Log
from odradek.broker.partition import Partition
from odradek.client.common.metadata_image import PartitionRegistration
from odradek.client.errors import ErrorCode, OffsetNotAvailableError
from odradek.client.record.builder import encode_batch
from odradek.proto import broker_pb2 as pb

TOPIC_ID = b"\x07" * 16
MAX_BYTES = 1 << 20
REPLICAS = (1, 2, 3)


class Brokers:
    def __init__(self, root: Path) -> None:
        self.parts = {b: Partition("t", 0, Log.open(root / f"b{b}" / "t-0"), b) for b in REPLICAS}
        self.state = PartitionRegistration(TOPIC_ID, 0, REPLICAS, REPLICAS, -1, -1, -1)

    def __getitem__(self, broker: int) -> Partition:
        return self.parts[broker]

    def publish(self, leader: int, leader_epoch: int, isr: tuple[int, ...] = REPLICAS) -> None:
        self.state = PartitionRegistration(TOPIC_ID, 0, REPLICAS, isr, leader, leader_epoch, leader_epoch)
        for p in self.parts.values():
            p.update(self.state, 1, 0)

    def fetch(self, follower: int, leader: int) -> None:
        f = self.parts[follower]
        read = self.parts[leader].read_for_follower(follower, *f.fetch_position(), MAX_BYTES, f.leader_epoch, 0)
        assert read.diverging is None and read.data is not None
        f.append_as_follower(bytes(read.data.records), read.high_watermark)

    def service(self, broker: int) -> BrokerService:
        return BrokerService(broker, "c", OneReplica(self.parts[broker], self.state))  # type: ignore[arg-type]

    def close(self) -> None:
        for p in self.parts.values():
            p.log.close()


@pytest.fixture
def brokers(tmp_path: Path) -> Iterator[Brokers]:
    b = Brokers(tmp_path)
    b.publish(leader=1, leader_epoch=1)
    b[1].append_as_leader(encode_batch([b"a", b"b"], timestamps=1_000), acks=-1)
    for f in (2, 3, 2, 3):  # the second round reports the followers' log end: the leader's HW reaches 2
        b.fetch(f, 1)
    assert b[1].log.high_watermark == 2 and b[2].log.high_watermark == 0  # the followers learn it a fetch later
    yield b
    b.close()


class _Call:
    """The little of a gRPC call's context the servicer reads (a client's call on a listener without SASL)."""

    def peer(self) -> str:
        return "ipv4:127.0.0.1:50000"

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return ()


CALL = _Call()


async def list_latest(service: BrokerService) -> pb.ListOffsetsPartitionResponse:
    request = pb.ListOffsetsRequest(
        replica_id=-1,
        topics=[
            pb.ListOffsetsTopic(
                name="t", partitions=[pb.ListOffsetsPartition(partition=0, timestamp=LATEST, current_leader_epoch=2)]
            )
        ],
    )
    return (await service.ListOffsets(request, CALL)).topics[0].partitions[0]  # type: ignore[arg-type]


async def consumer_fetch(service: BrokerService, offset: int) -> pb.FetchPartitionResponse:
    request = pb.FetchRequest(
        replica_id=-1,
        max_wait_ms=0,
        max_bytes=MAX_BYTES,
        topics=[
            pb.FetchTopic(
                name="t",
                partitions=[
                    pb.FetchPartition(
                        partition=0, current_leader_epoch=2, fetch_offset=offset, partition_max_bytes=MAX_BYTES
                    )
                ],
            )
        ],
    )
    return (await service.Fetch(request, CALL)).topics[0].partitions[0]  # type: ignore[arg-type]


def test_a_new_leader_answers_offset_not_available_until_its_high_watermark_reaches_its_epoch(
    brokers: Brokers,
) -> None:
    brokers.publish(leader=2, leader_epoch=2, isr=(2, 3))  # broker 1 died
    new = brokers[2]
    assert new.log.high_watermark == 0
    with pytest.raises(OffsetNotAvailableError) as e:
        new.read(0, MAX_BYTES)
    assert e.value.retriable
    with pytest.raises(OffsetNotAvailableError):
        DataService._offset_for(new, LATEST)
    with pytest.raises(OffsetNotAvailableError):
        DataService._offset_for(new, 1_000)  # not found below a stale high watermark is no answer either
    assert DataService._offset_for(new, EARLIEST) == (0, -1)

    brokers.fetch(3, 2)  # the follower reports its log end at the new epoch: the high watermark catches up
    assert new.visible_high_watermark() == 2
    assert DataService._offset_for(new, LATEST) == (2, -1)
    assert DataService._offset_for(new, 1_000) == (0, 1_000)
    assert bytes(new.read(0, MAX_BYTES).records) == bytes(brokers[1].log.read(0, MAX_BYTES).records)


def test_a_preferred_leader_election_does_not_move_the_end_back(brokers: Brokers) -> None:
    brokers.publish(leader=2, leader_epoch=2)
    brokers.fetch(1, 2), brokers.fetch(3, 2)
    brokers[2].append_as_leader(encode_batch([b"c"], timestamps=1_000))
    brokers.fetch(1, 2), brokers.fetch(3, 2), brokers.fetch(1, 2), brokers.fetch(3, 2)
    assert DataService._offset_for(brokers[2], LATEST) == (3, -1)
    assert brokers[1].log.high_watermark == 2  # a fetch behind

    brokers.publish(leader=1, leader_epoch=3)  # back to the preferred leader
    with pytest.raises(OffsetNotAvailableError):
        brokers[1].visible_high_watermark()
    brokers.fetch(2, 1), brokers.fetch(3, 1)
    assert DataService._offset_for(brokers[1], LATEST) == (3, -1)


async def test_list_offsets_and_consumer_fetches_answer_offset_not_available_meanwhile(brokers: Brokers) -> None:
    brokers.publish(leader=2, leader_epoch=2, isr=(2, 3))
    service = brokers.service(2)

    latest = await list_latest(service)
    assert (latest.error, latest.offset) == (ErrorCode.OFFSET_NOT_AVAILABLE, -1)
    fetched = await consumer_fetch(service, 0)
    assert fetched.error == ErrorCode.OFFSET_NOT_AVAILABLE and not fetched.records
    assert fetched.high_watermark == -1  # never the stale 0
    assert fetched.current_leader.leader_id == 2  # the leader is right: no metadata refresh needed

    brokers.fetch(3, 2)
    latest = await list_latest(service)
    assert (latest.error, latest.offset) == (ErrorCode.NONE, 2)
    fetched = await consumer_fetch(service, 0)
    assert fetched.error == ErrorCode.NONE and fetched.high_watermark == 2 and fetched.records

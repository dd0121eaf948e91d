"""ListOffsets and OffsetForLeaderEpoch on the Kafka listener over a real partition and log: ListOffsets through the
broker's real ListOffsets service, OffsetForLeaderEpoch through the partition's leader checks and the log's epoch
cache, at every served version."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka.protocol.consumer.offsets import ListOffsetsRequest, OffsetForLeaderEpochRequest
from kafka_harness import call, served

from odradek.broker.dataplane import BrokerService
from odradek.broker.kafka import offset_apis
from odradek.broker.kafka.apis import ApiRegistry
from odradek.broker.kafka.backend import KafkaBackend
from odradek.broker.log.log import Log
from odradek.broker.partition import Partition
from odradek.client.common.access import OPEN, AccessControl, AuthorizerSettings
from odradek.client.common.acls import AclBinding, AclOperation, AclPermissionType, PatternType, ResourceType
from odradek.client.common.metadata_image import MetadataImage, PartitionRegistration, TopicImage
from odradek.client.errors import ErrorCode, NotLeaderOrFollowerError, UnknownTopicOrPartitionError
from odradek.client.record.builder import encode_batch

T_ID = b"\x05" * 16
ALICE = "User:alice"
DESCRIBE, ALLOW = AclOperation.DESCRIBE, AclPermissionType.ALLOW


class Replicas:
    """The little of the replica manager these services read: t-0 led here, t-1 led elsewhere."""

    def __init__(self, leader: Partition) -> None:
        self.leader = leader
        other = PartitionRegistration(T_ID, 1, (2,), (2,), 2, 4, 0)
        self.image = MetadataImage(
            topics={T_ID: TopicImage("t", T_ID, {0: leader_state(5), 1: other})}, topic_ids={"t": T_ID}
        )

    def get(self, topic: str, partition: int) -> Partition:
        if (topic, partition) == ("t", 0):
            return self.leader
        if self.image.partition(topic, partition) is not None:
            raise NotLeaderOrFollowerError(f"broker 1 hosts no replica of {topic}-{partition}")
        raise UnknownTopicOrPartitionError(f"unknown topic or partition {topic}-{partition}")


def leader_state(epoch: int) -> PartitionRegistration:
    return PartitionRegistration(T_ID, 0, (1,), (1,), 1, epoch, epoch)


def registry_over(p: Partition, access: AccessControl = OPEN) -> ApiRegistry:
    replicas = Replicas(p)
    data = BrokerService(1, "c", replicas, access=access)  # type: ignore[arg-type]
    backend: Any = KafkaBackend(
        1, "c", "KAFKA", lambda: replicas.image, lambda: -1, lambda _n: None, data, None, None, None
    )  # type: ignore[arg-type]
    r = ApiRegistry()
    offset_apis.register(r, backend)
    return r


@pytest.fixture
def leader(tmp_path: Path) -> Iterator[Partition]:
    """t-0 led by broker 1: offsets 0-2 at leader epoch 3 (timestamps 1000), 3-6 at epoch 5 (timestamps 2000)."""
    p = Partition("t", 0, Log.open(tmp_path / "t-0"), 1)
    p.update(leader_state(3), 1, 0)
    p.append_as_leader(encode_batch([b"a"] * 3, timestamps=1_000))
    p.update(leader_state(5), 1, 0)
    p.append_as_leader(encode_batch([b"b"] * 4, timestamps=2_000))
    yield p
    p.log.close()


@pytest.fixture
def reg(leader: Partition) -> ApiRegistry:
    return registry_over(leader)


def list_offsets(version: int, *parts: tuple[int, int, int], isolation: int = 0) -> ListOffsetsRequest:
    """``parts``: (partition, timestamp, current leader epoch) of topic t."""
    r = ListOffsetsRequest
    return r(
        version=version,
        replica_id=-1,
        isolation_level=isolation,
        topics=[
            r.ListOffsetsTopic(
                name="t",
                partitions=[
                    r.ListOffsetsTopic.ListOffsetsPartition(partition_index=p, timestamp=ts, current_leader_epoch=e)
                    for p, ts, e in parts
                ],
            )
        ],
    )


def test_served_versions(reg: ApiRegistry) -> None:
    assert served(reg, ListOffsetsRequest) == range(1, 10)
    assert served(reg, OffsetForLeaderEpochRequest) == range(2, 5)


@pytest.mark.parametrize("version", range(1, 10))
async def test_list_offsets(reg: ApiRegistry, version: int) -> None:
    request = list_offsets(version, (0, -2, -1), (0, -1, -1), (0, 1_500, -1), (0, 9_999, -1), (1, -1, -1), (7, -1, -1))
    r = await call(reg, request, version)
    [t] = r.topics
    earliest, latest, by_time, after_all, elsewhere, unknown = t.partitions
    assert (earliest.error_code, earliest.offset, earliest.timestamp) == (0, 0, -1)
    assert (latest.error_code, latest.offset) == (0, 7)
    assert (by_time.offset, by_time.timestamp) == (3, 2_000)  # the first record at or after 1500
    assert (after_all.error_code, after_all.offset, after_all.timestamp) == (0, -1, -1)
    assert (elsewhere.error_code, elsewhere.offset) == (6, -1)  # NOT_LEADER_OR_FOLLOWER
    assert unknown.error_code == 3
    if version >= 4:
        assert latest.leader_epoch == 5 and elsewhere.leader_epoch == -1


@pytest.mark.parametrize("version", range(1, 10))
async def test_list_offsets_answers_kafkas_other_specs(reg: ApiRegistry, version: int) -> None:
    """-3: the first record with the largest timestamp, even with a later, older record after it; -4: the log start
    (every segment is local); -5: -1, as Kafka answers for a topic without tiered storage."""
    r = await call(reg, list_offsets(version, (0, -3, -1), (0, -4, -1), (0, -5, -1), (0, -6, -1)), version)
    max_ts, earliest_local, latest_tiered, unknown_spec = r.topics[0].partitions
    assert (max_ts.error_code, max_ts.offset, max_ts.timestamp) == (0, 3, 2_000)
    assert (earliest_local.error_code, earliest_local.offset, earliest_local.timestamp) == (0, 0, -1)
    assert (latest_tiered.error_code, latest_tiered.offset, latest_tiered.timestamp) == (0, -1, -1)
    assert unknown_spec.error_code == 42  # INVALID_REQUEST: no such spec


async def test_max_timestamp_is_the_first_record_that_carries_it(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "m-0")
    try:
        assert log.max_timestamp_offset() is None  # nothing written
        log.append_as_leader(encode_batch([b"a"] * 2, timestamps=5_000), 0)
        log.append_as_leader(encode_batch([b"b"] * 2, timestamps=9_000), 0)
        log.append_as_leader(encode_batch([b"c"] * 2, timestamps=9_000), 0)
        log.append_as_leader(encode_batch([b"d"], timestamps=1_000), 0)
        found = log.max_timestamp_offset()
        assert found is not None and (found.offset, found.timestamp) == (2, 9_000)
    finally:
        log.close()


@pytest.mark.parametrize("version", [4, 6])
async def test_list_offsets_fences_on_the_current_leader_epoch(reg: ApiRegistry, version: int) -> None:
    r = await call(reg, list_offsets(version, (0, -1, 4), (0, -1, 6), (0, -1, 5)), version)
    old, new, current = r.topics[0].partitions
    assert old.error_code == 74  # FENCED_LEADER_EPOCH
    assert new.error_code == 75  # UNKNOWN_LEADER_EPOCH
    assert (current.error_code, current.offset) == (0, 7)


async def test_list_offsets_read_committed_answers_the_last_stable_offset(reg: ApiRegistry) -> None:
    r = await call(reg, list_offsets(2, (0, -1, -1), isolation=1), 2)
    assert r.topics[0].partitions[0].offset == 7  # no open transaction: the high watermark


def epochs_request(version: int, *parts: tuple[int, int, int], topic: str = "t") -> OffsetForLeaderEpochRequest:
    """``parts``: (partition, leader epoch asked, current leader epoch)."""
    r = OffsetForLeaderEpochRequest
    return r(
        version=version,
        replica_id=-1,
        topics=[
            r.OffsetForLeaderTopic(
                topic=topic,
                partitions=[
                    r.OffsetForLeaderTopic.OffsetForLeaderPartition(partition=p, leader_epoch=e, current_leader_epoch=c)
                    for p, e, c in parts
                ],
            )
        ],
    )


@pytest.mark.parametrize("version", range(2, 5))
async def test_offset_for_leader_epoch(reg: ApiRegistry, version: int) -> None:
    request = epochs_request(version, (0, 3, 5), (0, 4, -1), (0, 5, -1), (0, 8, -1), (0, 2, -1), (1, 3, -1))
    r = await call(reg, request, version)
    [t] = r.topics
    got = [(p.error_code, p.leader_epoch, p.end_offset) for p in t.partitions]
    assert got == [
        (0, 3, 3),  # epoch 3 ends where epoch 5 starts
        (0, 3, 3),  # no epoch 4: the largest epoch below it
        (0, 5, 7),  # the latest epoch ends at the log end
        (0, -1, -1),  # an epoch above all: undefined
        (0, 2, 0),  # below all known epochs: the first epoch's start
        (6, -1, -1),  # not the leader here
    ]


@pytest.mark.parametrize("version", [2, 4])
async def test_offset_for_leader_epoch_fences_on_the_current_leader_epoch(reg: ApiRegistry, version: int) -> None:
    r = await call(reg, epochs_request(version, (0, 3, 4), (0, 3, 6)), version)
    assert [p.error_code for p in r.topics[0].partitions] == [74, 75]
    r = await call(reg, epochs_request(version, (0, 3, -1), topic="nope"), version)
    assert r.topics[0].partitions[0].error_code == 3


async def test_with_an_authorizer_both_need_describe_on_the_topic(leader: Partition) -> None:
    """As Kafka: ListOffsets and OffsetForLeaderEpoch answer TOPIC_AUTHORIZATION_FAILED for a topic the caller may
    not describe, and the offsets for one it may."""
    bindings = {b"1": AclBinding(ResourceType.TOPIC, "t", PatternType.LITERAL, ALICE, "*", DESCRIBE, ALLOW)}
    reg = registry_over(leader, AccessControl(AuthorizerSettings(), lambda: bindings))
    for who, expected in ((ALICE, 0), ("User:bob", ErrorCode.TOPIC_AUTHORIZATION_FAILED)):
        r = await call(reg, epochs_request(4, (0, 3, -1)), 4, principal=who)
        assert r.topics[0].partitions[0].error_code == expected
        r = await call(reg, list_offsets(9, (0, -1, -1)), 9, principal=who)
        assert r.topics[0].partitions[0].error_code == expected
        assert (r.topics[0].partitions[0].offset == 7) == (expected == 0)

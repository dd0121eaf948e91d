"""A replica whose log dir failed stops alone: the broker's metadata listener applies every other change."""

from __future__ import annotations

from pathlib import Path

import pytest

from odradek.broker.log.config import LogConfig
from odradek.broker.log.manager import LogManager
from odradek.broker.replica_manager import ReplicaManager
from odradek.client.common.metadata_image import MetadataDelta, MetadataImage
from odradek.client.errors import ErrorCode, NotLeaderOrFollowerError, StorageError
from odradek.proto import metadata_pb2 as md

TOPIC_ID = b"t" * 16


def replay(image: MetadataImage, *records: md.MetadataRecord) -> tuple[MetadataImage, MetadataDelta]:
    delta = MetadataDelta(image)
    delta.replay_all(list(records))
    return delta.image(), delta


def cluster() -> list[md.MetadataRecord]:
    records = [md.MetadataRecord(topic=md.TopicRecord(name="t", topic_id=TOPIC_ID))]
    for b in (1, 2):
        records.append(
            md.MetadataRecord(
                register_broker=md.RegisterBrokerRecord(
                    broker_id=b, broker_epoch=b, endpoint=md.BrokerEndpoint(host="127.0.0.1", port=1), fenced=False
                )
            )
        )
    return records


def part(index: int, leader: int) -> md.MetadataRecord:
    return md.MetadataRecord(
        partition=md.PartitionRecord(topic_id=TOPIC_ID, partition=index, replicas=[1, 2], isr=[1, 2], leader=leader)
    )


def change(index: int, leader: int) -> md.MetadataRecord:
    return md.MetadataRecord(
        partition_change=md.PartitionChangeRecord(topic_id=TOPIC_ID, partition=index, leader=leader)
    )


def test_one_offline_partition_does_not_stop_metadata_for_the_others(tmp_path: Path) -> None:
    logs = LogManager([tmp_path / "a", tmp_path / "b"])
    rm = ReplicaManager(1, logs, LogConfig())
    image, delta = replay(MetadataImage(), *cluster(), part(0, leader=1), part(1, leader=1))
    rm.apply(image, delta)
    assert logs.dir_of("t", 0) != logs.dir_of("t", 1)
    p0, p1 = rm.get("t", 0), rm.get("t", 1)
    assert p0.is_leader and p1.is_leader

    p0.log.take_offline(StorageError("t-0: append failed: EIO"))  # as a failed write would
    # The next metadata batch moves both leaderships to broker 2 and brings the offline replica back as leader:
    image, delta = replay(image, change(0, leader=2), change(1, leader=2), change(0, leader=1))
    rm.apply(image, delta)  # does not raise

    assert not p1.is_leader and p1.leader_id == 2  # the healthy partition followed the change
    assert not p0.is_leader  # the offline one leads nothing, whatever the metadata says
    with pytest.raises(StorageError) as e:
        rm.get("t", 0)
    assert e.value.code == ErrorCode.KAFKA_STORAGE_ERROR
    with pytest.raises(NotLeaderOrFollowerError):
        p1.append_as_leader(b"")
    assert rm.offline_replicas() == {TOPIC_ID: [0]}

    image, delta = replay(image, change(1, leader=1))
    rm.apply(image, delta)
    assert rm.get("t", 1).is_leader  # and keeps doing so
    logs.close()


def test_a_replica_that_cannot_get_a_log_is_offline(tmp_path: Path) -> None:
    logs = LogManager([tmp_path / "a"])
    rm = ReplicaManager(1, logs, LogConfig())
    logs.inject_dir_failure(logs.log_dirs[0])
    image, delta = replay(MetadataImage(), *cluster(), part(0, leader=2))
    rm.apply(image, delta)  # does not raise
    with pytest.raises(StorageError):
        rm.get("t", 0)
    assert rm.offline_replicas() == {TOPIC_ID: [0]}
    logs.close()


def test_an_io_error_writing_a_new_leader_epoch_takes_the_replica_offline_not_the_listener(tmp_path: Path) -> None:
    logs = LogManager([tmp_path / "a", tmp_path / "b"])
    rm = ReplicaManager(1, logs, LogConfig())
    logs.on_dir_offline(lambda _: rm.check_offline())  # as the broker wires them (through its event loop)
    image, delta = replay(MetadataImage(), *cluster(), part(0, leader=2), part(1, leader=2))
    rm.apply(image, delta)
    # The leader-epoch checkpoint of t-0 cannot be written: its temp file's name is taken by a directory.
    (logs.dir_of("t", 0) / "t-0" / "leader-epoch-checkpoint.tmp").mkdir()
    image, delta = replay(image, change(0, leader=1), change(1, leader=1))
    rm.apply(image, delta)  # does not raise: the new epochs are written by the log manager's next pass
    assert rm.get("t", 0).is_leader and rm.get("t", 1).is_leader
    logs.tick()
    assert rm.get("t", 1).is_leader
    assert logs.offline_dirs() == [logs.dir_of("t", 0)]
    with pytest.raises(StorageError):
        rm.get("t", 0)
    logs.close()

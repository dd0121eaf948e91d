"""The broker applies a metadata change to the partitions it names: a change of one partition of a large topic
costs one partition's work, while a new topic, a topic config change or new cluster defaults reach every one."""

from __future__ import annotations

from pathlib import Path

import pytest

from odradek.broker.log.config import LogConfig
from odradek.broker.log.manager import LogManager
from odradek.broker.replica_manager import ReplicaManager
from odradek.client.common.metadata_image import (
    BROKER_RESOURCE,
    CLUSTER_DEFAULT,
    TOPIC_RESOURCE,
    MetadataDelta,
    MetadataImage,
    PartitionRegistration,
)
from odradek.proto import metadata_pb2 as md

TOPIC_ID = b"t" * 16


def replay(image: MetadataImage, *records: md.MetadataRecord) -> tuple[MetadataImage, MetadataDelta]:
    delta = MetadataDelta(image)
    delta.replay_all(list(records))
    return delta.image(), delta


def topic(partitions: int) -> list[md.MetadataRecord]:
    records = [md.MetadataRecord(topic=md.TopicRecord(name="t", topic_id=TOPIC_ID))]
    for b in (1, 2):
        endpoint = md.BrokerEndpoint(host="127.0.0.1", port=1)
        registration = md.RegisterBrokerRecord(broker_id=b, broker_epoch=b, endpoint=endpoint, fenced=False)
        records.append(md.MetadataRecord(register_broker=registration))
    for i in range(partitions):
        p = md.PartitionRecord(topic_id=TOPIC_ID, partition=i, replicas=[1, 2], isr=[1, 2], leader=1 + i % 2)
        records.append(md.MetadataRecord(partition=p))
    return records


def shrink(index: int) -> md.MetadataRecord:
    change = md.PartitionChangeRecord(topic_id=TOPIC_ID, partition=index, isr=[1], isr_changed=True)
    return md.MetadataRecord(partition_change=change)


def config(resource_type: int, resource: str, name: str, value: str) -> md.MetadataRecord:
    record = md.ConfigRecord(resource_type=resource_type, resource_name=resource, name=name, value=value)
    return md.MetadataRecord(config=record)


def test_the_delta_names_the_partitions_that_changed() -> None:
    image, delta = replay(MetadataImage(), *topic(4))
    assert delta.whole_topics == {TOPIC_ID}
    assert [p.partition for p in delta.changed_in(image.topics[TOPIC_ID])] == [0, 1, 2, 3]

    image, delta = replay(image, shrink(3), shrink(1))
    assert delta.changed_topics == {TOPIC_ID} and not delta.whole_topics
    assert [p.partition for p in delta.changed_in(image.topics[TOPIC_ID])] == [1, 3]

    image, delta = replay(image, config(TOPIC_RESOURCE, "t", "retention.ms", "1000"))
    assert len(list(delta.changed_in(image.topics[TOPIC_ID]))) == 4  # its configs: every partition re-reads them

    _, delta = replay(image, md.MetadataRecord(remove_topic=md.RemoveTopicRecord(topic_id=TOPIC_ID)))
    assert not delta.changed_topics and not delta.changed_partitions and not delta.whole_topics


@pytest.fixture
def applied(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[ReplicaManager, list[int]]:
    """A broker hosting 8 partitions of ``t``, recording which partitions each later change applies."""
    rm = ReplicaManager(1, LogManager([tmp_path]), LogConfig())
    rm.apply(*replay(MetadataImage(), *topic(8)))
    seen: list[int] = []
    apply_partition = rm._apply_partition

    def recording(key: tuple[str, int], state: PartitionRegistration, *args: object) -> None:
        seen.append(key[1])
        apply_partition(key, state, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(rm, "_apply_partition", recording)
    return rm, seen


def test_an_isr_change_applies_that_partition_only(applied: tuple[ReplicaManager, list[int]]) -> None:
    rm, seen = applied
    rm.apply(*replay(rm.image, shrink(5)))
    assert seen == [5]
    assert rm.get("t", 5).isr == (1,) and rm.get("t", 4).isr == (1, 2)


def test_a_topic_config_change_reaches_every_partition(applied: tuple[ReplicaManager, list[int]]) -> None:
    rm, seen = applied
    rm.apply(*replay(rm.image, config(TOPIC_RESOURCE, "t", "retention.ms", "1000")))
    assert sorted(seen) == list(range(8))
    assert all(rm.get("t", i).log.config.retention_ms == 1000 for i in range(8))


def test_new_cluster_defaults_reach_every_partition(applied: tuple[ReplicaManager, list[int]]) -> None:
    rm, seen = applied
    rm.apply(*replay(rm.image, config(BROKER_RESOURCE, CLUSTER_DEFAULT, "log.retention.ms", "2000")))
    assert sorted(seen) == list(range(8))
    assert all(rm.get("t", i).log.config.retention_ms == 2000 for i in range(8))


def test_a_new_topic_syncs_its_log_dir_once_before_apply_returns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[Path] = []
    monkeypatch.setattr("odradek.broker.log.manager.fsync_dir", synced.append)
    monkeypatch.setattr("odradek.broker.log.recovery.fsync_dir", synced.append)
    rm = ReplicaManager(1, LogManager([tmp_path]), LogConfig())
    rm.apply(*replay(MetadataImage(), *topic(8)))
    # Each new log's directory, then the log dir once for the 8 of them, not once each.
    assert sorted(synced[:8]) == sorted(tmp_path / f"t-{p}" for p in range(8)) and synced[8:] == [tmp_path]


def test_a_log_dir_that_fails_its_sync_takes_the_new_replicas_offline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def failing(path: Path) -> None:
        raise OSError(5, "EIO")

    monkeypatch.setattr("odradek.broker.log.manager.fsync_dir", failing)
    logs = LogManager([tmp_path])
    rm = ReplicaManager(1, logs, LogConfig())
    rm.apply(*replay(MetadataImage(), *topic(2)))
    assert logs.offline_dirs() == [tmp_path]
    assert set(rm.offline) == {("t", 0), ("t", 1)}

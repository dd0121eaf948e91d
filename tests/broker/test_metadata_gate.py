"""A restarted broker takes up no partition role from the metadata of its previous incarnation.

Its metadata log replays to where the old process stopped, perhaps still naming it leader at the old leader epoch.
If it acted on that (with a wiped disk, or writes lost with the page cache), followers would fetch from it at that
epoch and truncate their committed records to its short log. The replica manager waits until the image holds this
broker's own registration (whose batch moves the old incarnation's leaderships away).
"""

from __future__ import annotations

from pathlib import Path

from controller_images import brokers, build, partition, topic

from odradek.broker.log.config import LogConfig
from odradek.broker.log.manager import LogManager
from odradek.broker.replica_manager import ReplicaManager
from odradek.client.common.metadata_image import MetadataDelta, MetadataImage
from odradek.controller.elections import changes_after_broker_loss
from odradek.proto import metadata_pb2 as md


def replay(image: MetadataImage, records: list[md.MetadataRecord], offset: int) -> tuple[MetadataImage, MetadataDelta]:
    delta = MetadataDelta(image)
    delta.replay_all(records)
    delta.set_position(offset, 1)
    return delta.image(), delta


def test_no_role_before_the_image_holds_this_incarnations_registration(tmp_path: Path) -> None:
    epoch = {"value": -1}
    logs = LogManager([tmp_path / "data"])
    rm = ReplicaManager(1, logs, LogConfig(), registered_epoch=lambda: epoch["value"])
    old = build(brokers(1, 2, 3), topic(), partition(0, (1, 2, 3), leader=1))  # the old incarnation led t-0
    rm.publish(old, MetadataDelta(old))
    assert rm.partitions == {}  # not registered yet: nothing taken up

    epoch["value"] = 100  # registered: the record is at offset 100, the image has not reached it
    rm.publish(old)
    assert rm.partitions == {}

    moved = [md.MetadataRecord(partition_change=c) for c in changes_after_broker_loss(old, {1}, lambda _t: False)]
    image, delta = replay(old, moved, offset=100)  # the registration batch moved the leadership away
    rm.publish(image, delta)
    p = rm.get("t", 0)
    assert not p.is_leader and p.leader_id == 2 and p.leader_epoch == 1
    logs.close()


def test_registration_completing_after_the_image_caught_up_publishes_at_once(tmp_path: Path) -> None:
    epoch = {"value": -1}
    logs = LogManager([tmp_path / "data"])
    rm = ReplicaManager(1, logs, LogConfig(), registered_epoch=lambda: epoch["value"])
    image, _ = replay(MetadataImage(), [*brokers(1, 2), topic(), partition(0, (2, 1), leader=2)], offset=50)
    rm.publish(image)
    assert rm.partitions == {}
    epoch["value"] = 40  # the registration answer arrives after the image passed it
    rm.publish(image)
    assert rm.get("t", 0).leader_id == 2
    logs.close()

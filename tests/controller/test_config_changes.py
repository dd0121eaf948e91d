"""IncrementalAlterConfigs decided against an image: the operations, validation that changes nothing, internal
topics, and the ELR cleared in the same batch as a change of min.insync.replicas."""

from __future__ import annotations

import pytest
from controller_images import apply, brokers, build, partition, topic

from odradek.client.common.metadata_image import TOPIC_RESOURCE, MetadataImage
from odradek.client.errors import ErrorCode
from odradek.controller.config_changes import ConfigOp, alter_cluster_defaults, alter_topic_configs
from odradek.proto import metadata_pb2 as md

DEFAULTS = {"cleanup.policy": "delete", "min.insync.replicas": "1", "retention.ms": "604800000"}
OFFSETS_ID = b"o" * 16


def config(name: str, key: str, value: str) -> md.MetadataRecord:
    return md.MetadataRecord(
        config=md.ConfigRecord(resource_type=TOPIC_RESOURCE, resource_name=name, name=key, value=value)
    )


def image(*extra: md.MetadataRecord) -> MetadataImage:
    return build(brokers(1, 2, 3), topic("t"), partition(0, [1, 2, 3]), config("t", "retention.ms", "1000"), *extra)


def alter(img: MetadataImage, *ops: ConfigOp, name: str = "t"):
    out = alter_topic_configs(img, name, ops, DEFAULTS.get)
    return out, apply(img, out.records).topic_configs(name)


def test_set_delete_append_and_subtract_change_only_what_they_name() -> None:
    out, configs = alter(image(), ConfigOp("segment.bytes", "set", "1024"), ConfigOp("retention.ms", "delete"))
    assert out.error == ErrorCode.NONE
    assert dict(configs) == {"segment.bytes": "1024"}
    out, configs = alter(image(), ConfigOp("retention.ms", "set", "1000"))  # the value it has: no record
    assert out.records == [] and dict(configs) == {"retention.ms": "1000"}
    out, configs = alter(image(), ConfigOp("cleanup.policy", "subtract", "delete"))
    assert out.error == ErrorCode.NONE and dict(configs)["cleanup.policy"] == ""  # Kafka allows an empty list


@pytest.mark.parametrize(
    ("ops", "error", "named"),
    [
        ((ConfigOp("retention.ms", "set", "soon"),), ErrorCode.INVALID_CONFIG, "retention.ms"),
        ((ConfigOp("retention.mss", "set", "1"),), ErrorCode.INVALID_CONFIG, "retention.mss"),
        ((ConfigOp("segment.bytes", "set", "1"),), ErrorCode.INVALID_CONFIG, "segment.bytes"),
        ((ConfigOp("retention.ms", "append", "1"),), ErrorCode.INVALID_CONFIG, "retention.ms"),
        ((ConfigOp("cleanup.policy", "append", "shred"),), ErrorCode.INVALID_CONFIG, "cleanup.policy"),
        ((ConfigOp("min.compaction.lag.ms", "set", "-5"),), ErrorCode.INVALID_CONFIG, "min.compaction.lag.ms"),
        ((ConfigOp("min.cleanable.dirty.ratio", "set", "1.5"),), ErrorCode.INVALID_CONFIG, "min.cleanable.dirty.ratio"),
        ((ConfigOp("max.compaction.lag.ms", "set", "0"),), ErrorCode.INVALID_CONFIG, "max.compaction.lag.ms"),
        (
            (ConfigOp("segment.bytes", "set", "1024"), ConfigOp("segment.bytes", "delete")),
            ErrorCode.INVALID_REQUEST,
            "segment.bytes",
        ),
        (  # a good change with a bad one: neither applies
            (ConfigOp("segment.bytes", "set", "1024"), ConfigOp("flush.ms", "set", "-4")),
            ErrorCode.INVALID_CONFIG,
            "flush.ms",
        ),
    ],
)
def test_a_bad_change_is_refused_naming_the_config_and_nothing_changes(ops, error, named: str) -> None:
    out, configs = alter(image(), *ops)
    assert (out.error, out.records) == (error, [])
    assert named in out.message
    assert dict(configs) == {"retention.ms": "1000"}


def test_an_unknown_topic_is_refused() -> None:
    out = alter_topic_configs(image(), "nope", [ConfigOp("retention.ms", "set", "5")], DEFAULTS.get)
    assert out.error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and out.records == []


def test_an_internal_topic_stays_compacted() -> None:
    img = build(
        brokers(1, 2, 3),
        topic("__consumer_offsets", OFFSETS_ID),
        partition(0, [1, 2, 3], topic_id=OFFSETS_ID),
        config("__consumer_offsets", "cleanup.policy", "compact"),
    )
    for op in (ConfigOp("cleanup.policy", "set", "delete"), ConfigOp("cleanup.policy", "delete")):
        out, _ = alter(img, op, name="__consumer_offsets")
        assert out.error == ErrorCode.INVALID_CONFIG and "compact" in out.message
    out, configs = alter(img, ConfigOp("segment.bytes", "set", "1048576"), name="__consumer_offsets")
    assert out.error == ErrorCode.NONE and configs["segment.bytes"] == "1048576"


def elr_image() -> MetadataImage:
    """t-0 with min.insync.replicas 2 whose ISR shrank to the leader: 2 and 3 are its ELR."""
    return build(
        brokers(1, 2, 3),
        topic("t"),
        partition(0, [1, 2, 3], isr=[1]),
        partition(1, [2, 3, 1]),
        config("t", "min.insync.replicas", "3"),
        md.MetadataRecord(
            partition_change=md.PartitionChangeRecord(
                topic_id=b"t" * 16, partition=0, eligible_leader_replicas=[2, 3], elr_changed=True
            )
        ),
    )


@pytest.mark.parametrize("new_min", ["2", "1"])
def test_a_change_of_min_insync_replicas_clears_the_elr_in_the_same_batch(new_min: str) -> None:
    img = elr_image()
    assert img.partition("t", 0).eligible_leader_replicas == (2, 3)
    out = alter_topic_configs(img, "t", [ConfigOp("min.insync.replicas", "set", new_min)], DEFAULTS.get)
    assert [r.WhichOneof("record") for r in out.records] == ["config", "partition_change"]  # one batch
    after = apply(img, out.records)
    assert after.partition("t", 0).eligible_leader_replicas == ()
    assert after.partition("t", 1).eligible_leader_replicas == ()  # it had none: no record for it
    assert after.topic_configs("t")["min.insync.replicas"] == new_min


def test_an_unchanged_effective_minimum_keeps_the_elr() -> None:
    img = elr_image()
    out = alter_topic_configs(img, "t", [ConfigOp("retention.ms", "set", "5000")], DEFAULTS.get)
    assert [r.WhichOneof("record") for r in out.records] == ["config"]
    unset = alter_topic_configs(  # deleting the topic's value to a default of the same number changes nothing
        img, "t", [ConfigOp("min.insync.replicas", "delete")], {"min.insync.replicas": "3"}.get
    )
    assert [r.WhichOneof("record") for r in unset.records] == ["config"]


KEYS = {
    "log.retention.ms": "retention.ms",
    "min.insync.replicas": "min.insync.replicas",
    "log.cleanup.policy": "cleanup.policy",
}
STATIC = {"log.retention.ms": "604800000", "min.insync.replicas": "3", "log.cleanup.policy": "delete"}.get


def test_cluster_defaults_take_dynamic_node_keys_only_and_validate_them() -> None:
    img = image()
    out = alter_cluster_defaults(img, [ConfigOp("log.retention.ms", "set", "60000")], KEYS, STATIC)
    assert out.error == ErrorCode.NONE and apply(img, out.records).cluster_defaults() == {"log.retention.ms": "60000"}
    for op, named in (
        (ConfigOp("retention.ms", "set", "5"), "retention.ms"),  # the topic name of it: not a broker key
        (ConfigOp("num.partitions", "set", "5"), "num.partitions"),  # a broker key, not a dynamic one
        (ConfigOp("log.retention.ms", "set", "soon"), "log.retention.ms"),
        (ConfigOp("log.cleanup.policy", "append", "shred"), "log.cleanup.policy"),
    ):
        bad = alter_cluster_defaults(img, [op], KEYS, STATIC)
        assert (bad.error, bad.records) == (ErrorCode.INVALID_CONFIG, []) and named in bad.message


def test_a_cluster_wide_min_isr_change_clears_the_elr_of_topics_without_their_own() -> None:
    with_own = elr_image()  # t sets min.insync.replicas itself: the cluster default does not apply to it
    out = alter_cluster_defaults(with_own, [ConfigOp("min.insync.replicas", "set", "2")], KEYS, STATIC)
    assert [r.WhichOneof("record") for r in out.records] == ["config"]
    without_own = alter_topic_configs(with_own, "t", [ConfigOp("min.insync.replicas", "delete")], STATIC)
    img = apply(with_own, [r for r in without_own.records if r.WhichOneof("record") == "config"])
    assert img.partition("t", 0).eligible_leader_replicas == (2, 3)  # built under 3, the file's default too
    out = alter_cluster_defaults(img, [ConfigOp("min.insync.replicas", "set", "2")], KEYS, STATIC)
    assert [r.WhichOneof("record") for r in out.records] == ["config", "partition_change"]
    assert apply(img, out.records).partition("t", 0).eligible_leader_replicas == ()

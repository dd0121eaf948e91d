"""KIP-848 group configs (Kafka's GROUP config resource, type 32): validated as Kafka's GroupConfig validates them,
stored as ConfigRecords of the GROUP resource type that every image replays, described with their sources, and
authorized per group (DescribeConfigs / AlterConfigs on the GROUP resource)."""

from __future__ import annotations

from types import SimpleNamespace

from controller_images import build

from odradek.broker.config import NodeConfig
from odradek.broker.topic_defaults import topic_defaults
from odradek.client.common.access import AccessControl, AuthorizerSettings
from odradek.client.common.acls import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from odradek.client.common.group_configs import (
    GroupConfigSettings,
    ShareOverrides,
    describe_group_configs,
    group_overrides,
    share_overrides,
    validate_group_configs,
)
from odradek.client.common.metadata_image import GROUP_RESOURCE
from odradek.client.errors import ErrorCode
from odradek.controller.admin.grpc_adapter import AdminGrpcService
from odradek.controller.admin.service import NodeAdmin
from odradek.controller.config_changes import ConfigOp, alter_group_configs
from odradek.controller.raft import Role
from odradek.proto import admin_pb2 as apb

SETTINGS = GroupConfigSettings()  # Kafka's defaults: session 45 s in [45 s, 60 s], heartbeat 5 s in [5 s, 15 s]


def test_kafkas_validation_rules() -> None:
    ok = {"consumer.session.timeout.ms": "50000", "consumer.heartbeat.interval.ms": "6000"}
    assert validate_group_configs(ok, SETTINGS) is None
    assert validate_group_configs({}, SETTINGS) is None
    cases = {
        "consumer.max.poll.records": "Unknown group config name: consumer.max.poll.records",
        "streams.session.timeout.ms": "Unknown group config name: streams.session.timeout.ms",
    }
    for name, message in cases.items():
        assert validate_group_configs({name: "1"}, SETTINGS) == message
    session = "consumer.session.timeout.ms"
    assert validate_group_configs({session: "abc"}, SETTINGS) == (
        "Invalid value abc for configuration consumer.session.timeout.ms: Not a number of type INT"
    )
    assert validate_group_configs({session: "0"}, SETTINGS) == (
        "Invalid value 0 for configuration consumer.session.timeout.ms: Value must be at least 1"
    )
    assert validate_group_configs({session: "44999"}, SETTINGS) == (
        "consumer.session.timeout.ms must be greater than or equal to group.consumer.min.session.timeout.ms"
    )
    assert validate_group_configs({session: "60001"}, SETTINGS) == (
        "consumer.session.timeout.ms must be less than or equal to group.consumer.max.session.timeout.ms"
    )
    assert validate_group_configs({"consumer.heartbeat.interval.ms": "4999"}, SETTINGS) == (
        "consumer.heartbeat.interval.ms must be greater than or equal to group.consumer.min.heartbeat.interval.ms"
    )
    assert validate_group_configs({"consumer.heartbeat.interval.ms": "15001"}, SETTINGS) == (
        "consumer.heartbeat.interval.ms must be less than or equal to group.consumer.max.heartbeat.interval.ms"
    )
    wide = GroupConfigSettings(
        {"group.consumer.min.session.timeout.ms": 1000, "group.consumer.max.heartbeat.interval.ms": 60_000}
    )
    assert validate_group_configs({session: "10000", "consumer.heartbeat.interval.ms": "10000"}, wide) == (
        "consumer.session.timeout.ms must be greater than consumer.heartbeat.interval.ms"
    )


def test_kafkas_share_group_config_rules() -> None:
    ok = {
        "share.session.timeout.ms": "20000",
        "share.heartbeat.interval.ms": "6000",
        "share.record.lock.duration.ms": "15000",
        "share.auto.offset.reset": "by_duration:P1DT2H30M0.5S",
        "share.isolation.level": "read_committed",
    }
    assert validate_group_configs(ok, SETTINGS) is None
    assert validate_group_configs({"share.auto.offset.reset": "EARLIEST"}, SETTINGS) is None
    cases = {
        "share.session.timeout.ms": ("14999", "share.session.timeout.ms must be greater than or equal to "
                                     "group.share.min.session.timeout.ms"),
        "share.heartbeat.interval.ms": ("15001", "share.heartbeat.interval.ms must be less than or equal to "
                                        "group.share.max.heartbeat.interval.ms"),
        "share.record.lock.duration.ms": ("60001", "share.record.lock.duration.ms must be less than or equal to "
                                          "group.share.max.record.lock.duration.ms"),
        "share.auto.offset.reset": ("by_duration:1h", "Invalid value by_duration:1h for configuration "
                                    "share.auto.offset.reset: Unable to parse duration"),
        "share.isolation.level": ("serializable", "Invalid value serializable for configuration "
                                  "share.isolation.level: String must be one of: read_committed, read_uncommitted"),
    }  # fmt: skip
    for name, (value, message) in cases.items():
        assert validate_group_configs({name: value}, SETTINGS) == message
    assert validate_group_configs({"share.auto.offset.reset": "newest"}, SETTINGS).startswith(  # type: ignore[union-attr]
        "Invalid value newest for configuration share.auto.offset.reset: the value must be either"
    )
    pair = {"share.session.timeout.ms": "15000", "share.heartbeat.interval.ms": "15000"}
    assert (
        validate_group_configs(pair, SETTINGS)
        == "share.session.timeout.ms must be greater than share.heartbeat.interval.ms"
    )
    own = share_overrides({**ok, "share.auto.offset.reset": "Latest"})
    assert own == ShareOverrides(20000, 6000, 15000, "latest", "read_committed")


def test_the_bounds_come_from_the_node_config() -> None:
    node = NodeConfig(
        {
            "process.roles": "controller",
            "node.id": 1,
            "controller.quorum.voters": "1@127.0.0.1:9093",
            "listeners": "CONTROLLER://127.0.0.1:9093",
            "group.consumer.session.timeout.ms": 20000,
            "group.consumer.min.session.timeout.ms": 10000,
            "group.consumer.max.heartbeat.interval.ms": 8000,
        }
    )
    settings = GroupConfigSettings.from_node(node)
    assert settings.from_node_config == frozenset({"group.consumer.session.timeout.ms"})
    wanted = {
        "group.consumer.session.timeout.ms": 20000,
        "group.consumer.min.session.timeout.ms": 10000,
        "group.consumer.max.session.timeout.ms": 60000,
        "group.consumer.max.heartbeat.interval.ms": 8000,
        "group.share.min.record.lock.duration.ms": 15000,
    }
    assert {k: settings.node(k) for k in wanted} == wanted


def test_changes_are_config_records_of_the_group_resource_that_images_replay() -> None:
    image = build()
    out = alter_group_configs(image, "g", [ConfigOp("consumer.session.timeout.ms", "set", "50000")], SETTINGS)
    assert out.error == ErrorCode.NONE
    [record] = out.records
    assert (record.config.resource_type, record.config.resource_name) == (GROUP_RESOURCE, "g")
    assert (record.config.name, record.config.value) == ("consumer.session.timeout.ms", "50000")
    image = build(*out.records)
    assert dict(image.group_configs("g")) == {"consumer.session.timeout.ms": "50000"}
    assert group_overrides(image.group_configs("g")) == (50000, None)
    assert dict(image.group_configs("h")) == {}
    # DELETE removes the group's value (a record without one); the image forgets it.
    out = alter_group_configs(image, "g", [ConfigOp("consumer.session.timeout.ms", "delete")], SETTINGS)
    [record] = out.records
    assert not record.config.HasField("value")
    assert dict(build(*image.to_records(), *out.records).group_configs("g")) == {}


def test_refusals_change_nothing() -> None:
    image = build()
    unknown = alter_group_configs(image, "g", [ConfigOp("session.timeout.ms", "set", "1")], SETTINGS)
    assert (unknown.error, unknown.message, unknown.records) == (
        ErrorCode.INVALID_CONFIG,
        "Unknown group config name: session.timeout.ms",
        [],
    )
    append = alter_group_configs(image, "g", [ConfigOp("consumer.session.timeout.ms", "append", "1")], SETTINGS)
    assert append.error == ErrorCode.INVALID_CONFIG and "not LIST" in append.message
    twice = [ConfigOp("consumer.session.timeout.ms", "set", "50000")] * 2
    assert alter_group_configs(image, "g", twice, SETTINGS).error == ErrorCode.INVALID_REQUEST
    default = alter_group_configs(image, "", [ConfigOp("consumer.session.timeout.ms", "set", "50000")], SETTINGS)
    assert (default.error, default.message) == (ErrorCode.INVALID_REQUEST, "Default group resources are not allowed.")


def test_describe_shows_the_groups_own_value_else_the_nodes() -> None:
    image = build(
        *alter_group_configs(
            build(), "g", [ConfigOp("consumer.heartbeat.interval.ms", "set", "6000")], SETTINGS
        ).records
    )
    settings = GroupConfigSettings(from_node_config=frozenset({"group.consumer.session.timeout.ms"}))
    described = describe_group_configs(image, "g", settings)
    assert [(c.name, c.value, c.source) for c in described.configs] == [
        ("consumer.session.timeout.ms", "45000", apb.STATIC_BROKER_CONFIG),
        ("consumer.heartbeat.interval.ms", "6000", apb.GROUP_CONFIG),
        ("share.session.timeout.ms", "45000", apb.DEFAULT_CONFIG),
        ("share.heartbeat.interval.ms", "5000", apb.DEFAULT_CONFIG),
        ("share.record.lock.duration.ms", "30000", apb.DEFAULT_CONFIG),
        ("share.auto.offset.reset", "latest", apb.DEFAULT_CONFIG),
        ("share.isolation.level", "read_uncommitted", apb.DEFAULT_CONFIG),
    ]
    picked = describe_group_configs(image, "g", settings, ["consumer.heartbeat.interval.ms", "nope"])
    assert [c.name for c in picked.configs] == ["consumer.heartbeat.interval.ms"]


async def test_the_admin_service_authorizes_each_group() -> None:
    """DescribeConfigs needs DescribeConfigs on the group, IncrementalAlterConfigs AlterConfigs (as Kafka's); a
    denied group answers GROUP_AUTHORIZATION_FAILED in its place."""
    binding = AclBinding(
        ResourceType.GROUP,
        "open",
        PatternType.LITERAL,
        "User:ANONYMOUS",
        "*",
        AclOperation.ALL,
        AclPermissionType.ALLOW,
    )
    sm = SimpleNamespace(image=build(), cluster_id="c", leader=SimpleNamespace(leader_id=None))
    driver = SimpleNamespace(node_id=1, leader=SimpleNamespace(role=Role.FOLLOWER))
    access = AccessControl(AuthorizerSettings(), lambda: {b"1": binding})
    service = AdminGrpcService(NodeAdmin(sm, driver, {}, {}, access=access, topic_defaults=topic_defaults()))  # type: ignore[arg-type]
    context = SimpleNamespace(peer=lambda: "ipv4:10.0.0.5:5555")  # the anonymous principal
    answer = await service.DescribeConfigs(apb.DescribeConfigsRequest(groups=["open", "closed"]), context)
    assert [(g.group, g.error) for g in answer.groups] == [
        ("open", ErrorCode.NONE),
        ("closed", ErrorCode.GROUP_AUTHORIZATION_FAILED),
    ]
    alter = apb.IncrementalAlterConfigsRequest(
        groups=[
            apb.AlterGroupConfigs(group="closed", configs=[apb.AlterableConfig(name="consumer.session.timeout.ms")]),
            apb.AlterGroupConfigs(group="open", configs=[apb.AlterableConfig(name="consumer.session.timeout.ms")]),
        ]
    )
    answer = await service.IncrementalAlterConfigs(alter, context)
    # "open" is forwarded to the active controller, which no one knows here: NOT_CONTROLLER.
    assert [(r.topic, r.error) for r in answer.group_results] == [
        ("closed", ErrorCode.GROUP_AUTHORIZATION_FAILED),
        ("open", ErrorCode.NOT_CONTROLLER),
    ]

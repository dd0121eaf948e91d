"""Configs: DescribeConfigs (from this node's image and defaults) and IncrementalAlterConfigs (decided by
controller/config_changes.py on the active controller), for topics, the cluster-wide dynamic broker defaults and
groups (Kafka's GROUP resource)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Literal

from odradek.client.common.acls import AclOperation
from odradek.client.common.admin.configs import (
    AlterableConfig,
    AlterConfigsResult,
    AlterGroupConfigs,
    AlterOp,
    ConfigEntry,
    ConfigSource,
    DescribeConfigs,
    DescribeConfigsAnswer,
    DescribedConfig,
    GroupConfigs,
    IncrementalAlterConfigs,
    IncrementalAlterConfigsAnswer,
    TopicConfigs,
    topic_config_entries,
)
from odradek.client.common.group_configs import GROUP_CONFIGS, NODE_KEYS, GroupConfigSettings
from odradek.client.common.metadata_image import MetadataImage
from odradek.client.common.request_context import RequestContext
from odradek.client.common.topic_rules import TopicDefault, dynamic_broker_keys
from odradek.client.errors import ErrorCode, OdradekError
from odradek.controller.admin.base import (
    CLUSTER_DENIED,
    DENIED_MESSAGE,
    GROUP_DENIED,
    NONE,
    NOT_CONTROLLER,
    TOPIC_DENIED,
    AdminBase,
    merged,
    write,
)
from odradek.controller.config_changes import (
    AlterOutcome,
    ConfigOp,
    alter_cluster_defaults,
    alter_group_configs,
    alter_topic_configs,
)
from odradek.proto import metadata_pb2 as md

_OPS: dict[int, Literal["set", "delete", "append", "subtract"]] = {
    AlterOp.SET: "set",
    AlterOp.DELETE: "delete",
    AlterOp.APPEND: "append",
    AlterOp.SUBTRACT: "subtract",
}


def describe_topic_configs(
    image: MetadataImage, name: str, defaults: Mapping[str, TopicDefault], names: Sequence[str] = ()
) -> TopicConfigs:
    """Each topic config's effective value and its source (see ``topic_config_entries``): set on the topic, else
    the node's default, where no cluster-wide dynamic default overrides it. ``names`` picks configs (empty: all)."""
    if image.topic(name) is None:
        return TopicConfigs(
            topic=name, error=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, error_message=f"unknown topic '{name}'"
        )
    entries = topic_config_entries(image.topic_configs(name), image.cluster_defaults(), defaults, names)
    return TopicConfigs(topic=name, configs=entries)


def describe_cluster_defaults(
    image: MetadataImage, defaults: Mapping[str, TopicDefault]
) -> tuple[DescribedConfig, ...]:
    """Each dynamic broker config: its cluster-wide dynamic value, else this node's file or built-in default."""
    dynamic = image.cluster_defaults()
    out = []
    for key, topic in sorted(dynamic_broker_keys().items()):
        source: ConfigSource
        if key in dynamic:
            value, source = dynamic[key], ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
        else:
            default = defaults[topic]
            value = default.value
            source = ConfigSource.STATIC_BROKER_CONFIG if default.from_node_config else ConfigSource.DEFAULT_CONFIG
        out.append(DescribedConfig(name=key, value=value, source=source))
    return tuple(out)


def describe_group_configs(
    image: MetadataImage, group: str, settings: GroupConfigSettings, names: Sequence[str] = ()
) -> GroupConfigs:
    """Each group config's effective value: the group's own (GROUP_CONFIG), else the node's setting (from its config
    file, STATIC_BROKER_CONFIG, or Kafka's default, DEFAULT_CONFIG), as Kafka's brokers describe a GROUP resource.
    ``names`` picks configs (empty: all); a name that is no group config is left out."""
    if not group:
        return GroupConfigs(group=group, error=ErrorCode.INVALID_REQUEST, error_message="Group name must not be empty")
    own = image.group_configs(group)
    entries = []
    for name in [n for n in dict.fromkeys(names) if n in GROUP_CONFIGS] if names else GROUP_CONFIGS:
        source: ConfigSource
        if name in own:
            value, source = own[name], ConfigSource.GROUP_CONFIG
        else:
            value = str(settings.default_of(name))
            from_file = NODE_KEYS.get(name) in settings.from_node_config
            source = ConfigSource.STATIC_BROKER_CONFIG if from_file else ConfigSource.DEFAULT_CONFIG
        entries.append(DescribedConfig(name=name, value=value, source=source))
    return GroupConfigs(group=group, configs=tuple(entries))


def _ops(configs: Sequence[AlterableConfig]) -> list[ConfigOp]:
    return [ConfigOp(c.name, _OPS[c.op], c.value) for c in configs]


def _result(name: str, out: AlterOutcome) -> AlterConfigsResult:
    configs = tuple(ConfigEntry(k, v) for k, v in out.configs.items())
    return AlterConfigsResult(name=name, error=out.error, error_message=out.message, configs=configs)


def _failed(name: str, e: OdradekError) -> AlterConfigsResult:
    return AlterConfigsResult(name=name, error=e.code, error_message=str(e))


def _topic_refusal(name: str) -> TopicConfigs:
    return TopicConfigs(topic=name, error=TOPIC_DENIED, error_message=DENIED_MESSAGE)


def _alter_refusal(name: str) -> AlterConfigsResult:
    return AlterConfigsResult(name=name, error=TOPIC_DENIED, error_message=DENIED_MESSAGE)


def _group_alter_refusal(name: str) -> AlterConfigsResult:
    return AlterConfigsResult(name=name, error=GROUP_DENIED, error_message=DENIED_MESSAGE)


def _later(a: int | None, b: int | None) -> int | None:
    """The later of two offsets an answer may cover, either unknown."""
    return b if a is None else a if b is None else max(a, b)


class ConfigAdmin(AdminBase):
    async def describe_configs(self, request: DescribeConfigs, ctx: RequestContext) -> DescribeConfigsAnswer:
        """Needs DescribeConfigs on each topic, on each group for its configs, and on the cluster for the
        cluster-wide defaults. Group configs are answered from this node's image and settings."""
        if request.groups:
            groups = self._describe_group_configs(request, ctx)
            if not request.topics and not request.cluster_defaults:
                return DescribeConfigsAnswer(node_id=self.driver.node_id, groups=groups)
            answer = await self.describe_configs(replace(request, groups=()), ctx)
            return replace(answer, groups=answer.groups + groups)
        if request.cluster_defaults and self.cluster_denied(ctx, AclOperation.DESCRIBE_CONFIGS, "DescribeConfigs"):
            if not request.topics:
                return DescribeConfigsAnswer(
                    error=CLUSTER_DENIED, cluster_defaults_error=CLUSTER_DENIED, node_id=self.driver.node_id
                )
            topics_only = DescribeConfigs(topics=request.topics, config_names=request.config_names)
            answer = await self._describe_topic_configs(topics_only, ctx)
            return replace(answer, cluster_defaults_error=CLUSTER_DENIED)
        return await self._describe_topic_configs(request, ctx)

    async def _describe_topic_configs(self, request: DescribeConfigs, ctx: RequestContext) -> DescribeConfigsAnswer:
        """The topics the caller may describe the configs of (and the cluster defaults, when asked and allowed);
        the others answer TOPIC_AUTHORIZATION_FAILED in their place."""
        names = list(request.topics)
        denied = self.topics_denied(ctx, AclOperation.DESCRIBE_CONFIGS, names, "DescribeConfigs")
        if not denied:
            return await self._describe_configs(request)
        allowed = tuple(n for n in request.topics if n not in denied)
        answer = await self._describe_configs(replace(request, topics=allowed))
        return replace(answer, topics=merged(names, denied, answer.topics, _topic_refusal))

    def _describe_group_configs(self, request: DescribeConfigs, ctx: RequestContext) -> tuple[GroupConfigs, ...]:
        denied = self.groups_denied(ctx, AclOperation.DESCRIBE_CONFIGS, request.groups, "DescribeConfigs")
        image = self.sm.image
        return tuple(
            GroupConfigs(group=g, error=GROUP_DENIED, error_message=DENIED_MESSAGE)
            if g in denied
            else describe_group_configs(image, g, self.group_settings, request.config_names)
            for g in request.groups
        )

    async def _describe_configs(self, request: DescribeConfigs) -> DescribeConfigsAnswer:
        image = self.sm.image
        names = list(request.topics)
        if self.local_controller() is None and any(image.topic(n) is None for n in names):
            # As DescribeTopics: a topic created a moment ago may not be applied here yet; the active controller
            # has every committed write (its node config then gives the defaults, and node_id says so).
            forwarded = await self.forward.describe_configs(request)
            if forwarded is not None:
                return forwarded  # else answer from this node's image
        return DescribeConfigsAnswer(
            node_id=self.driver.node_id,
            topics=tuple(describe_topic_configs(image, n, self.topic_defaults, request.config_names) for n in names),
            cluster_defaults=describe_cluster_defaults(image, self.topic_defaults) if request.cluster_defaults else (),
        )

    @write
    async def incremental_alter_configs(
        self, request: IncrementalAlterConfigs, ctx: RequestContext
    ) -> IncrementalAlterConfigsAnswer:
        """Needs AlterConfigs on each topic, on each group for its configs, and on the cluster for the cluster-wide
        defaults."""
        if not request.groups:
            return await self._alter_topic_configs(request, ctx)
        names = [g.group for g in request.groups]
        denied = self.groups_denied(ctx, AclOperation.ALTER_CONFIGS, names, "IncrementalAlterConfigs")
        rest = replace(request, groups=())
        answer = (
            await self._alter_topic_configs(rest, ctx)
            if rest.topics or rest.cluster_defaults
            else IncrementalAlterConfigsAnswer()
        )
        allowed = [g for g in request.groups if g.group not in denied]
        results, offset = (
            await self._alter_group_configs(allowed, request.validate_only, ctx) if allowed else ([], None)
        )
        return replace(
            answer,
            group_results=answer.group_results + merged(names, denied, results, _group_alter_refusal),
            metadata_offset=_later(answer.metadata_offset, offset),
        )

    async def _alter_group_configs(
        self, groups: Sequence[AlterGroupConfigs], validate_only: bool, ctx: RequestContext
    ) -> tuple[list[AlterConfigsResult], int | None]:
        """Each group's changes, decided by the active controller against its own group.consumer.* bounds; and
        the offset a forwarded answer covers."""
        controller = self.local_controller()
        if controller is None:
            forwarded = await self.forward.incremental_alter_configs(
                IncrementalAlterConfigs(groups=tuple(groups), validate_only=validate_only), ctx
            )
            if forwarded is None:
                forwarded = IncrementalAlterConfigsAnswer(error=NOT_CONTROLLER)
            if forwarded.error != NONE:
                return [AlterConfigsResult(name=g.group, error=forwarded.error) for g in groups], None
            return list(forwarded.group_results), forwarded.metadata_offset
        results = []
        for g in groups:
            ops = _ops(g.configs)

            def decide(
                image: MetadataImage, _offset: int, group: str = g.group, ops: list[ConfigOp] = ops
            ) -> tuple[list[md.MetadataRecord], AlterOutcome]:
                out = alter_group_configs(image, group, ops, self.group_settings)
                return ([] if validate_only or out.error != ErrorCode.NONE else out.records), out

            try:
                results.append(_result(g.group, await controller.write(decide)))
            except OdradekError as e:
                results.append(_failed(g.group, e))
        return results, None

    async def _alter_topic_configs(
        self, request: IncrementalAlterConfigs, ctx: RequestContext
    ) -> IncrementalAlterConfigsAnswer:
        names = [t.topic for t in request.topics]
        denied = self.topics_denied(ctx, AclOperation.ALTER_CONFIGS, names, "IncrementalAlterConfigs")
        cluster_denied = bool(request.cluster_defaults) and self.cluster_denied(
            ctx, AclOperation.ALTER_CONFIGS, "IncrementalAlterConfigs"
        )
        if not denied and not cluster_denied:
            return await self._incremental_alter_configs(request, ctx)
        allowed = replace(
            request,
            topics=tuple(t for t in request.topics if t.topic not in denied),
            cluster_defaults=() if cluster_denied else request.cluster_defaults,
        )
        answer = (
            await self._incremental_alter_configs(allowed, ctx)
            if allowed.topics or allowed.cluster_defaults
            else IncrementalAlterConfigsAnswer()
        )
        answer = replace(answer, results=merged(names, denied, answer.results, _alter_refusal))
        if cluster_denied:
            refusal = AlterConfigsResult(error=CLUSTER_DENIED, error_message=DENIED_MESSAGE)
            answer = replace(answer, cluster_defaults_result=refusal)
        return answer

    async def _incremental_alter_configs(
        self, request: IncrementalAlterConfigs, ctx: RequestContext
    ) -> IncrementalAlterConfigsAnswer:
        controller = self.local_controller()
        if controller is None:
            forwarded = await self.forward.incremental_alter_configs(request, ctx)
            return forwarded if forwarded is not None else IncrementalAlterConfigsAnswer(error=NOT_CONTROLLER)

        def default_of(name: str) -> str | None:
            default = self.topic_defaults.get(name)
            return None if default is None else default.value

        results = []
        cluster_result = None
        if request.cluster_defaults:
            ops = _ops(request.cluster_defaults)
            keys = dynamic_broker_keys()

            def static_default_of(name: str) -> str | None:
                return default_of(keys[name]) if name in keys else None

            def decide_defaults(image: MetadataImage, _offset: int) -> tuple[list[md.MetadataRecord], AlterOutcome]:
                out = alter_cluster_defaults(image, ops, keys, static_default_of)
                return ([] if request.validate_only or out.error != ErrorCode.NONE else out.records), out

            try:
                cluster_result = _result("", await controller.write(decide_defaults))
            except OdradekError as e:
                cluster_result = _failed("", e)
        for t in request.topics:
            topic_ops = _ops(t.configs)

            def decide(
                image: MetadataImage, _offset: int, topic: str = t.topic, ops: list[ConfigOp] = topic_ops
            ) -> tuple[list[md.MetadataRecord], AlterOutcome]:
                out = alter_topic_configs(image, topic, ops, default_of)
                return ([] if request.validate_only or out.error != ErrorCode.NONE else out.records), out

            try:
                results.append(_result(t.topic, await controller.write(decide)))
            except OdradekError as e:
                results.append(_failed(t.topic, e))
        return IncrementalAlterConfigsAnswer(results=tuple(results), cluster_defaults_result=cluster_result)

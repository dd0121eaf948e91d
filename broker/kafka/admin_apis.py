"""Kafka's admin APIs on the Kafka listener, each translated onto the service the gRPC listener serves: the typed
admin service (``KafkaBackend.admin``: topics, partitions, configs, cluster, client quotas; writes forwarded to the
active controller there) and the broker's DeleteRecords. No rule is decided here; only what Kafka's protocol can say
and odradek's cannot (a topic named by id, a resource type, an endpoint type) is resolved or refused before the
call.

Served versions (docs/kafka-protocol.md lists them with the other APIs):
- CreateTopics v2-v7; DeleteTopics v1-v6 (v6 ids resolved in this broker's image); CreatePartitions v0-v3;
  DeleteRecords v0-v2.
- DescribeConfigs v1-v4, AlterConfigs v0-v2 and IncrementalAlterConfigs v0-v1: topics, the broker resource as
  odradek has it (the cluster-wide dynamic defaults, which every broker applies; no per-broker dynamic configs; a
  broker id's resource also lists this broker's static configs, from its node config), and Kafka's GROUP resource
  (type 32): a KIP-848 group's consumer.session.timeout.ms and consumer.heartbeat.interval.ms
  (client/common/group_configs.py). AlterConfigs replaces a resource's whole set of dynamic configs (KIP-133), as an
  IncrementalAlterConfigs call that sets the given ones and deletes every other.
- DescribeCluster v0-v2 (broker endpoints only); DescribeClientQuotas v0-v1; AlterClientQuotas v0-v1.
"""

from __future__ import annotations

import functools
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from kafka.protocol.admin.client_quotas import (
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
    DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
)
from kafka.protocol.admin.cluster import DescribeClusterRequest, DescribeClusterResponse
from kafka.protocol.admin.configs import (
    AlterConfigsRequest,
    AlterConfigsResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from kafka.protocol.admin.topics import (
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
)

from odradek.broker.api.replicas import DeleteRecordsRequest as DeleteRecordsTarget
from odradek.broker.config import SCHEMA, Endpoint, NodeConfig, Voter
from odradek.broker.kafka.apis import ApiRegistry, schema_api
from odradek.broker.kafka.backend import KafkaBackend
from odradek.broker.kafka.metadata_apis import (
    UNKNOWN_TOPIC_ID,
    ZERO_UUID,
    client_controller_id,
    topic_uuid,
)
from odradek.broker.kafka.wire import KafkaContext
from odradek.broker.topic_defaults import config_text, topic_defaults
from odradek.client.common.admin.cluster import DescribeCluster
from odradek.client.common.admin.configs import (
    AlterableConfig,
    AlterConfigsResult,
    AlterGroupConfigs,
    AlterOp,
    AlterTopicConfigs,
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
from odradek.client.common.admin.quotas import (
    AlterClientQuotas,
    DescribeClientQuotas,
    EntityComponent,
    QuotaAlteration,
    QuotaAlterOp,
    QuotaFilterComponent,
    QuotaMatch,
)
from odradek.client.common.admin.topics import (
    CreatableTopic,
    CreatePartitions,
    CreatePartitionsTopic,
    CreateTopics,
    CreateTopicsAnswer,
    DeleteTopics,
    DeleteTopicsAnswer,
    TopicResult,
)
from odradek.client.common.group_configs import GROUP_CONFIGS, INT_CONFIGS
from odradek.client.common.topic_rules import TOPIC_CONFIGS, TopicDefault, dynamic_broker_keys, node_key
from odradek.client.errors import ErrorCode

CREATE_TOPICS_VERSIONS = (2, 7)
DELETE_TOPICS_VERSIONS = (1, 6)
CREATE_PARTITIONS_VERSIONS = (0, 3)
DELETE_RECORDS_VERSIONS = (0, 2)
DESCRIBE_CONFIGS_VERSIONS = (1, 4)
ALTER_CONFIGS_VERSIONS = (0, 2)
INCREMENTAL_ALTER_CONFIGS_VERSIONS = (0, 1)
DESCRIBE_CLUSTER_VERSIONS = (0, 2)
DESCRIBE_CLIENT_QUOTAS_VERSIONS = (0, 1)
ALTER_CLIENT_QUOTAS_VERSIONS = (0, 1)

# Kafka's config resource types and DescribeCluster endpoint types.
TOPIC_RESOURCE, BROKER_RESOURCE, GROUP_RESOURCE = 2, 4, 32
# Every resource type Kafka defines (with BROKER_LOGGER, CLIENT_METRICS and GROUP): an alter naming another is
# UNSUPPORTED_VERSION, one odradek does not serve INVALID_REQUEST, as Kafka's controller answers.
_KAFKA_RESOURCE_TYPES = frozenset({TOPIC_RESOURCE, BROKER_RESOURCE, 8, 16, GROUP_RESOURCE})
_SERVED_RESOURCE_TYPES = frozenset({TOPIC_RESOURCE, BROKER_RESOURCE, GROUP_RESOURCE})
BROKER_ENDPOINT = 1
# Kafka's codes for an endpoint type that is not this listener's, or none Kafka knows (odradek has no such codes:
# its controllers serve gRPC only).
MISMATCHED_ENDPOINT_TYPE, UNSUPPORTED_ENDPOINT_TYPE = 114, 115

# odradek's ConfigSource -> Kafka's (whose numbering differs).
_CONFIG_SOURCES: dict[int, int] = {
    ConfigSource.UNKNOWN: 0,
    ConfigSource.TOPIC_CONFIG: 1,  # DYNAMIC_TOPIC_CONFIG
    ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG: 3,
    ConfigSource.STATIC_BROKER_CONFIG: 4,
    ConfigSource.DEFAULT_CONFIG: 5,
    ConfigSource.GROUP_CONFIG: 8,  # GROUP_CONFIG
}

# Kafka's ConfigSource ids, for synonyms below the effective value.
DYNAMIC_DEFAULT_SOURCE, STATIC_SOURCE, DEFAULT_SOURCE = 3, 4, 5

# Kafka's config types (DescribeConfigs v3+).
BOOLEAN, STRING, INT, LONG, DOUBLE, LIST = 1, 2, 3, 5, 6, 7

# Each topic config's type as Kafka defines it; the node property that defaults one has the same type.
TOPIC_CONFIG_TYPES = {
    "cleanup.policy": LIST,
    "compression.type": STRING,
    "delete.retention.ms": LONG,
    "flush.messages": LONG,
    "flush.ms": LONG,
    "index.interval.bytes": INT,
    "max.compaction.lag.ms": LONG,
    "max.message.bytes": INT,
    "message.format.version": STRING,
    "message.timestamp.type": STRING,
    "min.cleanable.dirty.ratio": DOUBLE,
    "min.compaction.lag.ms": LONG,
    "min.insync.replicas": INT,
    "retention.bytes": LONG,
    "retention.ms": LONG,
    "segment.bytes": INT,
    "segment.index.bytes": INT,
    "segment.ms": LONG,
    "unclean.leader.election.enable": BOOLEAN,
    "unclean.recovery.strategy": STRING,
}


def _listeners_text(listeners: Mapping[str, Endpoint]) -> str | None:
    """Kafka's ``NAME://host:port,...``; None for none (advertised.listeners unset: Kafka's null, under which the
    listeners are advertised)."""
    return ",".join(f"{e.name}://{e}" for e in listeners.values()) or None


def _voters_text(voters: Sequence[Voter]) -> str:
    return ",".join(f"{v.node_id}@{v.host}:{v.port}" for v in voters)


class StaticConfig(NamedTuple):
    """A static broker config Kafka brokers report and odradek has: the node property giving it (broker.id is
    node.id, as in KRaft), its text as Kafka writes it, Kafka's type, and whether Kafka 3.9 reports it read-only."""

    key: str
    text: Callable[[Any], str | None]
    type: int
    read_only: bool = True


ADVERTISED_LISTENERS = "Advertised listeners cannot be altered when using a Raft-based metadata quorum."
STATIC_BROKER_CONFIGS = {
    # Kafka 3.9 lists advertised.listeners among the per-broker dynamic configs, so reports it not read-only, though
    # a KRaft broker refuses to change it ("cannot be altered when using a Raft-based metadata quorum"); 4.0 reports
    # it read-only. odradek reports it as 3.9 does and refuses the change with that message (ADVERTISED_LISTENERS).
    "advertised.listeners": StaticConfig("advertised.listeners", _listeners_text, STRING, read_only=False),
    "auto.create.topics.enable": StaticConfig("auto.create.topics.enable", config_text, BOOLEAN),
    "broker.id": StaticConfig("node.id", str, INT),
    "controller.quorum.voters": StaticConfig("controller.quorum.voters", _voters_text, LIST),
    "default.replication.factor": StaticConfig("default.replication.factor", str, INT),
    "listeners": StaticConfig("listeners", _listeners_text, STRING),
    "log.dirs": StaticConfig("log.dirs", ",".join, STRING),
    "node.id": StaticConfig("node.id", str, INT),
    "num.partitions": StaticConfig("num.partitions", str, INT),
    # A dynamic broker config in Kafka (per broker or cluster-wide); odradek reads it from the node config only, so
    # reports it read-only, as the static configs, and refuses to alter it (not a dynamic broker config here).
    "replica.alter.log.dirs.io.max.bytes.per.second": StaticConfig(
        "replica.alter.log.dirs.io.max.bytes.per.second", str, LONG
    ),
}

# The node properties that default a topic config (node key -> topic key): the dynamic broker configs.
_DYNAMIC_BROKER_KEYS = dynamic_broker_keys()

# Kafka's IncrementalAlterConfigs operations (SET, DELETE, APPEND, SUBTRACT), numbered as odradek's AlterOp.
_ALTER_OPS = frozenset(AlterOp)


def register(registry: ApiRegistry, backend: KafkaBackend) -> None:
    apis = [
        (CreateTopicsRequest, CREATE_TOPICS_VERSIONS, _create_topics),
        (DeleteTopicsRequest, DELETE_TOPICS_VERSIONS, _delete_topics),
        (CreatePartitionsRequest, CREATE_PARTITIONS_VERSIONS, _create_partitions),
        (DeleteRecordsRequest, DELETE_RECORDS_VERSIONS, _delete_records),
        (DescribeConfigsRequest, DESCRIBE_CONFIGS_VERSIONS, _describe_configs),
        (AlterConfigsRequest, ALTER_CONFIGS_VERSIONS, _alter_configs),
        (IncrementalAlterConfigsRequest, INCREMENTAL_ALTER_CONFIGS_VERSIONS, _incremental_alter_configs),
        (DescribeClusterRequest, DESCRIBE_CLUSTER_VERSIONS, _describe_cluster),
        (DescribeClientQuotasRequest, DESCRIBE_CLIENT_QUOTAS_VERSIONS, _describe_client_quotas),
        (AlterClientQuotasRequest, ALTER_CLIENT_QUOTAS_VERSIONS, _alter_client_quotas),
    ]
    for request_cls, (low, high), translate in apis:

        async def handler(ctx: KafkaContext, version: int, request: Any, translate=translate) -> Any:
            return await translate(backend, ctx, version, request)

        registry.add(*schema_api(request_cls, low, high, handler))


# ---- topics ----


def _creation_problem(topic: Any) -> tuple[ErrorCode.ValueType, str] | None:
    """What Kafka refuses in a CreateTopics entry that the gRPC request cannot carry: a null config value
    (INVALID_CONFIG) and, with counts of -1, manual assignments whose partition indexes are not 0, 1, 2...
    (INVALID_REPLICA_ASSIGNMENT)."""
    nulls = [c.name for c in topic.configs if c.value is None]
    if nulls:
        return ErrorCode.INVALID_CONFIG, "Null value not supported for topic configs: " + ",".join(nulls)
    if topic.num_partitions != -1 or topic.replication_factor != -1:
        return None  # the controller refuses counts given beside an assignment
    indexes = [a.partition_index for a in topic.assignments]
    twice = sorted({i for i in indexes if indexes.count(i) > 1})
    if twice:
        return (
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            f"Found multiple manual partition assignments for partition {twice[0]}",
        )
    if sorted(indexes) != list(range(len(indexes))):
        return ErrorCode.INVALID_REPLICA_ASSIGNMENT, "partitions should be a consecutive 0-based integer sequence"
    return None


async def _create_topics(backend: KafkaBackend, ctx: KafkaContext, version: int, request: Any) -> Any:
    """Manual replica assignments go to the controller in partition order, after the checks of
    :func:`_creation_problem`."""
    problems = {t.name: p for t in request.topics if (p := _creation_problem(t)) is not None}
    passed = [t for t in request.topics if t.name not in problems]
    answer = (
        await backend.admin.create_topics(
            CreateTopics(
                topics=tuple(
                    CreatableTopic(
                        name=t.name,
                        num_partitions=t.num_partitions,
                        replication_factor=t.replication_factor,
                        configs=tuple(ConfigEntry(c.name, c.value) for c in t.configs),
                        assignments=tuple(
                            tuple(a.broker_ids) for a in sorted(t.assignments, key=lambda a: a.partition_index)
                        ),
                    )
                    for t in passed
                ),
                timeout_ms=request.timeout_ms,
                validate_only=request.validate_only,
            ),
            ctx.request_context,
        )
        if passed
        else CreateTopicsAnswer(())
    )
    answers = iter(answer.topics)
    refused = {name: TopicResult(name=name, error=code, error_message=why) for name, (code, why) in problems.items()}
    topics = [refused[t.name] if t.name in refused else next(answers) for t in request.topics]
    result = CreateTopicsResponse.CreatableTopicResult
    asked = {t.name: t for t in request.topics}
    dynamic = backend.image().cluster_defaults()

    def configs(t: TopicResult) -> list[Any]:
        """v5+: a created topic's configs as DescribeConfigs on this broker will show them (its own, as asked, and
        the defaults in force here); none for a topic not created, as Kafka answers."""
        if version < 5 or t.error != ErrorCode.NONE:
            return []
        own = {c.name: c.value for c in asked[t.name].configs}
        return [
            result.CreatableTopicConfigs(
                name=c.name,
                value=c.value,
                read_only=c.read_only,
                config_source=_CONFIG_SOURCES.get(c.source, 0),
                is_sensitive=c.sensitive,
            )
            for c in topic_config_entries(own, dynamic, backend.admin.topic_defaults)
        ]

    return CreateTopicsResponse(
        version=version,
        throttle_time_ms=0,
        topics=[
            # v5+: the partition count and replication factor the controller gave the topic; -1 where unknown (a
            # refused topic, or an answer from a node that does not say them), which clients read as "not returned".
            result(
                name=t.name,
                topic_id=topic_uuid(t.topic_id) if t.error == ErrorCode.NONE else ZERO_UUID,
                error_code=int(t.error),
                error_message=t.error_message or None,
                num_partitions=t.num_partitions or -1,
                replication_factor=t.replication_factor or -1,
                configs=configs(t),
            )
            for t in topics
        ],
    )


async def _delete_topics(backend: KafkaBackend, ctx: KafkaContext, version: int, request: Any) -> Any:
    """v6 may name topics by id: an id is resolved in this broker's image (the topic's current id), and one it does
    not know is UNKNOWN_TOPIC_ID; the service deletes by name."""
    image = backend.image()
    asked: list[tuple[str | None, uuid.UUID]] = []  # (name or None if unknown, id)
    if version >= 6:
        for s in request.topics:
            if s.name is not None:
                asked.append((s.name, topic_uuid(image.topic_ids.get(s.name, b""))))
            else:
                found = image.topics.get(s.topic_id.bytes) if s.topic_id is not None else None
                asked.append((None if found is None else found.name, s.topic_id or ZERO_UUID))
    else:
        asked = [(n, topic_uuid(image.topic_ids.get(n, b""))) for n in request.topic_names]
    names = [n for n, _ in asked if n is not None]
    answer = (
        await backend.admin.delete_topics(DeleteTopics(tuple(names), request.timeout_ms), ctx.request_context)
        if names
        else DeleteTopicsAnswer(())
    )
    results = iter(answer.topics)
    result = DeleteTopicsResponse.DeletableTopicResult
    out = []
    for name, topic_id in asked:
        if name is None:
            message = f"unknown topic id {topic_id}"
            out.append(result(name=None, topic_id=topic_id, error_code=UNKNOWN_TOPIC_ID, error_message=message))
            continue
        t = next(results)
        out.append(
            result(name=t.name, topic_id=topic_id, error_code=int(t.error), error_message=t.error_message or None)
        )
    return DeleteTopicsResponse(version=version, throttle_time_ms=0, responses=out)


async def _create_partitions(backend: KafkaBackend, ctx: KafkaContext, version: int, request: Any) -> Any:
    """Each topic's new count and, if given, the replicas of each new partition (a null list: the controller
    places them)."""
    answer = await backend.admin.create_partitions(
        CreatePartitions(
            topics=tuple(
                CreatePartitionsTopic(
                    name=t.name, count=t.count, assignments=tuple(tuple(a.broker_ids) for a in t.assignments or ())
                )
                for t in request.topics
            ),
            timeout_ms=request.timeout_ms,
            validate_only=request.validate_only,
        ),
        ctx.request_context,
    )
    result = CreatePartitionsResponse.CreatePartitionsTopicResult
    out = [result(name=r.name, error_code=int(r.error), error_message=r.error_message or None) for r in answer.topics]
    return CreatePartitionsResponse(version=version, throttle_time_ms=0, results=out)


async def _delete_records(backend: KafkaBackend, ctx: KafkaContext, version: int, request: Any) -> Any:
    asked = DeleteRecordsTarget(
        [(t.name, [(p.partition_index, p.offset) for p in t.partitions]) for t in request.topics], request.timeout_ms
    )
    answer = await backend.data.replica_service.delete_records(asked, ctx.request_context)
    topic = DeleteRecordsResponse.DeleteRecordsTopicResult
    partition = topic.DeleteRecordsPartitionResult
    return DeleteRecordsResponse(
        version=version,
        throttle_time_ms=0,
        topics=[
            topic(
                name=name,
                partitions=[
                    partition(partition_index=d.partition, low_watermark=d.low_watermark, error_code=d.error)
                    for d in deleted
                ],
            )
            for name, deleted in answer
        ],
    )


# ---- configs ----


def config_type(name: str) -> int:
    """Kafka's type of a topic config, of the node property that defaults one, or of a static broker config; 0
    (UNKNOWN) for any other."""
    topic = _DYNAMIC_BROKER_KEYS.get(name, name)
    static = STATIC_BROKER_CONFIGS.get(name)
    return TOPIC_CONFIG_TYPES.get(topic) or (static.type if static is not None else 0)


@functools.cache
def _built_in_defaults() -> dict[str, TopicDefault]:
    """odradek's own default of each topic config (what a node whose file sets nothing applies)."""
    return topic_defaults()


Synonym = tuple[str, str | None, int]  # name, value, Kafka's config source


def _static_broker_configs(config: NodeConfig) -> list[tuple[str, list[Synonym]]]:
    """The static configs of this broker that Kafka's brokers report too, as this node runs with them (only a
    restart with another config file changes them), each with its synonyms as Kafka lists them, the effective value
    first: the config file's value (STATIC_BROKER_CONFIG), then odradek's default (DEFAULT_CONFIG). A key the file
    does not set has its default alone, so its source is DEFAULT_CONFIG."""
    out = []
    for name, static in sorted(STATIC_BROKER_CONFIGS.items()):
        parse, default = SCHEMA[static.key]
        own = [(name, static.text(config[static.key]), STATIC_SOURCE)] if config.is_set(static.key) else []
        built_in = [] if default is None else [(name, static.text(parse(default)), DEFAULT_SOURCE)]
        out.append((name, own + built_in))
    return out


def _synonyms(
    name: str, value: str, source: int, dynamic: Mapping[str, str], node_defaults: Mapping[str, TopicDefault]
) -> list[Synonym]:
    """The effective value (``name``: a topic config set on the topic, or a node property), then each value of
    lower precedence the config has, named as Kafka's brokers name them (the node property): the cluster-wide
    dynamic default, this node's config file, odradek's built-in default."""
    topic = _DYNAMIC_BROKER_KEYS.get(name, name)
    node = node_key(topic)
    if node is None:
        return [(name, value, source)]
    lower = [(node, dynamic[node], DYNAMIC_DEFAULT_SOURCE)] if node in dynamic else []
    from_file = node_defaults.get(topic)
    if from_file is not None and from_file.from_node_config:
        lower.append((node, from_file.value, STATIC_SOURCE))
    lower.append((node, _built_in_defaults()[topic].value, DEFAULT_SOURCE))
    return [(name, value, source), *(s for s in lower if s[2] > source)]


def _broker_resource_error(backend: KafkaBackend, name: str) -> str | None:
    """Why a broker resource cannot be served here, or None. "" is the cluster-wide default; a broker id must be
    this broker's, as Kafka requires (its admin clients send a broker's resource to that broker)."""
    if name == "" or name == str(backend.broker_id):
        return None
    return f"unexpected broker id {name!r}: expected {backend.broker_id} or the empty name (the cluster default)"


def _entry(name: str, synonyms: Sequence[Synonym], read_only: bool, sensitive: bool, with_synonyms: bool) -> Any:
    """Kafka's entry of one config whose effective value is ``synonyms[0]``; no documentation."""
    entry = DescribeConfigsResponse.DescribeConfigsResult.DescribeConfigsResourceResult
    synonym = entry.DescribeConfigsSynonym
    _, value, source = synonyms[0]
    return entry(
        name=name,
        value=None if sensitive else value,
        read_only=read_only,
        config_source=source,
        is_sensitive=sensitive,
        synonyms=[synonym(name=n, value=None if sensitive else v, source=s) for n, v, s in synonyms]
        if with_synonyms
        else [],
        config_type=config_type(name),
        documentation=None,
    )


async def _describe_configs(backend: KafkaBackend, ctx: KafkaContext, version: int, request: Any) -> Any:
    """Topics: each config's effective value and source. The broker resource: the configs odradek can set for the
    whole cluster at runtime (those defaulting a topic config) with their values here, and for this broker's id its
    static configs too (read-only but for advertised.listeners, as Kafka 3.9 reports them; see
    ``_static_broker_configs``); the empty name (the cluster-wide default) lists
    only those set dynamically, as Kafka does. Keys a resource does not have are left out, as Kafka leaves them.
    Synonyms as ``_synonyms`` gives them; config types are Kafka's."""
    rctx = ctx.request_context
    result = DescribeConfigsResponse.DescribeConfigsResult
    dynamic = backend.image().cluster_defaults()
    with_synonyms = request.include_synonyms

    def configs(described: Iterable[DescribedConfig], topic: bool) -> list[Any]:
        out = []
        for c in described:
            source = _CONFIG_SOURCES.get(c.source, 0)
            effective = c.name if not topic or c.source == ConfigSource.TOPIC_CONFIG else node_key(c.name) or c.name
            synonyms = _synonyms(effective, c.value, source, dynamic, backend.admin.topic_defaults)
            out.append(_entry(c.name, synonyms, c.read_only, c.sensitive, with_synonyms))
        return out

    defaults: DescribeConfigsAnswer | None = None  # the cluster-wide defaults, asked once
    results = []
    for r in request.resources:
        keys = set(r.configuration_keys or ())
        kind, name = r.resource_type, r.resource_name
        error: int = ErrorCode.NONE
        message: str | None = None
        found: list[Any] = []
        if kind == TOPIC_RESOURCE:
            answer = await backend.admin.describe_configs(DescribeConfigs(topics=(name,)), rctx)
            [t] = answer.topics if answer.error == ErrorCode.NONE else [TopicConfigs(name, error=answer.error)]
            error, message = t.error, t.error_message or None
            found = configs(t.configs, topic=True)
        elif kind == GROUP_RESOURCE:
            answer = await backend.admin.describe_configs(DescribeConfigs(groups=(name,)), rctx)
            [g] = answer.groups if answer.error == ErrorCode.NONE else [GroupConfigs(name, error=answer.error)]
            error, message = g.error, g.error_message or None
            found = [_group_entry(c, with_synonyms) for c in g.configs]
        elif kind == BROKER_RESOURCE and (message := _broker_resource_error(backend, name)) is None:
            if defaults is None:
                defaults = await backend.admin.describe_configs(DescribeConfigs(cluster_defaults=True), rctx)
            error = defaults.error
            described = [
                c
                for c in defaults.cluster_defaults
                if name != "" or c.source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
            ]
            found = configs(described, topic=False)
            if name != "":
                static = _static_broker_configs(backend.node_config())
                found += [
                    _entry(n, synonyms, STATIC_BROKER_CONFIGS[n].read_only, False, with_synonyms)
                    for n, synonyms in static
                ]
        else:
            error = ErrorCode.INVALID_REQUEST
            message = message or f"unsupported config resource type {kind}"
        results.append(
            result(
                error_code=int(error),
                error_message=message,
                resource_type=kind,
                resource_name=name,
                configs=[c for c in found if not keys or c.name in keys] if error == ErrorCode.NONE else [],
            )
        )
    return DescribeConfigsResponse(version=version, throttle_time_ms=0, results=results)


def _group_entry(c: DescribedConfig, with_synonyms: bool) -> Any:
    """A group config's entry: an int (the share offset reset and isolation level: strings), its own value
    (GROUP_CONFIG) or the node's (DEFAULT_CONFIG or STATIC_BROKER_CONFIG), with no other synonym."""
    entry = DescribeConfigsResponse.DescribeConfigsResult.DescribeConfigsResourceResult
    source = _CONFIG_SOURCES.get(c.source, 0)
    return entry(
        name=c.name,
        value=c.value,
        read_only=False,
        config_source=source,
        is_sensitive=False,
        synonyms=[entry.DescribeConfigsSynonym(name=c.name, value=c.value, source=source)] if with_synonyms else [],
        config_type=INT if c.name in INT_CONFIGS else STRING,
        documentation=None,
    )


Outcome = tuple[int, str | None]  # a resource's error code and message
Plan = list[AlterableConfig] | Outcome  # a resource's operations, or its refusal


def _alter_refusal(resource: Any, counts: Counter[tuple[int, str]]) -> Outcome | None:
    """Why a resource of an alter request is refused before the service is asked, or None. Kafka's answers to a
    resource type it does not define (UNSUPPORTED_VERSION) and to one named twice (INVALID_REQUEST); then odradek's:
    topics, groups and the broker resource's empty name (the cluster-wide default, which every broker applies) are
    served, per-broker dynamic configs and other resource types are not (INVALID_REQUEST), and a per-broker change of
    advertised.listeners gets Kafka 3.9's refusal (INVALID_CONFIG)."""
    kind, name = resource.resource_type, resource.resource_name
    if kind not in _KAFKA_RESOURCE_TYPES:
        return ErrorCode.UNSUPPORTED_VERSION, f"Unknown resource type {kind}."
    if counts[kind, name] > 1:
        return ErrorCode.INVALID_REQUEST, "Duplicate resource."
    if kind == BROKER_RESOURCE and name != "":
        if any(c.name == "advertised.listeners" for c in resource.configs):
            return ErrorCode.INVALID_CONFIG, ADVERTISED_LISTENERS
        return (
            ErrorCode.INVALID_REQUEST,
            "per-broker dynamic configs are not supported: alter the cluster default (empty name)",
        )
    if kind not in _SERVED_RESOURCE_TYPES:
        return ErrorCode.INVALID_REQUEST, f"unsupported config resource type {kind}"
    return None


def _plans(resources: Sequence[Any], ops: Callable[[Any], Plan]) -> tuple[list[Any], list[Plan]]:
    """The resources an alter request is answered for (a resource named twice once, as Kafka's controller answers
    it) and each one's plan: its refusal, else what ``ops`` makes of it."""
    counts = Counter((r.resource_type, r.resource_name) for r in resources)
    seen: set[tuple[int, str]] = set()
    answered, plans = [], []
    for r in resources:
        key = (r.resource_type, r.resource_name)
        if key in seen and r.resource_type in _KAFKA_RESOURCE_TYPES:
            continue
        seen.add(key)
        answered.append(r)
        plans.append(_alter_refusal(r, counts) or ops(r))
    return answered, plans


async def _alter(
    backend: KafkaBackend, ctx: KafkaContext, resources: Sequence[Any], plans: Sequence[Plan], validate_only: bool
) -> list[Outcome]:
    """One IncrementalAlterConfigs call with the operations of every planned resource (topics, the cluster-wide
    default); each resource's outcome in order (a refusal as planned)."""
    planned = [(r, p) for r, p in zip(resources, plans, strict=True) if isinstance(p, list)]
    topics = tuple(
        AlterTopicConfigs(r.resource_name, tuple(p)) for r, p in planned if r.resource_type == TOPIC_RESOURCE
    )
    defaults = tuple(op for r, p in planned if r.resource_type == BROKER_RESOURCE for op in p)
    groups = tuple(
        AlterGroupConfigs(r.resource_name, tuple(p)) for r, p in planned if r.resource_type == GROUP_RESOURCE
    )
    answer = IncrementalAlterConfigsAnswer()
    if topics or defaults or groups:
        answer = await backend.admin.incremental_alter_configs(
            IncrementalAlterConfigs(
                topics=topics, cluster_defaults=defaults, groups=groups, validate_only=validate_only
            ),
            ctx.request_context,
        )
    topic_results = iter(answer.results)
    group_results = iter(answer.group_results)
    out: list[Outcome] = []
    for r, p in zip(resources, plans, strict=True):
        if not isinstance(p, list):
            out.append(p)
        elif answer.error != ErrorCode.NONE:
            out.append((answer.error, None))
        else:
            if r.resource_type == TOPIC_RESOURCE:
                t = next(topic_results)
            elif r.resource_type == GROUP_RESOURCE:
                t = next(group_results)
            else:
                t = answer.cluster_defaults_result or AlterConfigsResult()
            out.append((t.error, t.error_message or None))
    return out


async def _incremental_alter_configs(backend: KafkaBackend, ctx: KafkaContext, version: int, request: Any) -> Any:
    """Kafka's operation codes (SET, DELETE, APPEND, SUBTRACT) are odradek's; an operation Kafka does not define is
    refused (INVALID_REQUEST)."""

    def ops(r: Any) -> Plan:
        if any(c.config_operation not in _ALTER_OPS for c in r.configs):
            return (
                ErrorCode.INVALID_REQUEST,
                f"unknown config operation in {sorted({c.config_operation for c in r.configs})}",
            )
        return [AlterableConfig(name=c.name, op=c.config_operation, value=c.value or "") for c in r.configs]

    resources, plans = _plans(request.resources, ops)
    outcomes = await _alter(backend, ctx, resources, plans, request.validate_only)
    result = IncrementalAlterConfigsResponse.AlterConfigsResourceResponse
    return IncrementalAlterConfigsResponse(
        version=version,
        throttle_time_ms=0,
        responses=[
            result(error_code=int(e), error_message=m, resource_type=r.resource_type, resource_name=r.resource_name)
            for r, (e, m) in zip(resources, outcomes, strict=True)
        ],
    )


def _replacement(configs: Iterable[Any], known: Iterable[str]) -> list[AlterableConfig]:
    """The operations that make a resource's dynamic configs exactly ``configs`` (Kafka's names and nullable values;
    of a name given twice the last counts, as Kafka's map keeps it): SET each value, DELETE every other config the
    resource may have (``known``) and each name given without a value."""
    given = {c.name: c.value for c in configs}
    kept = {name: value for name, value in given.items() if value is not None}
    removed = sorted((set(known) | set(given)) - set(kept))
    return [AlterableConfig(name=n, op=AlterOp.SET, value=v) for n, v in kept.items()] + [
        AlterableConfig(name=n, op=AlterOp.DELETE) for n in removed
    ]


async def _alter_configs(backend: KafkaBackend, ctx: KafkaContext, version: int, request: Any) -> Any:
    """KIP-133's AlterConfigs: a resource's dynamic configs become exactly those given; a config left out or given
    a null value is removed (its default applies again). Sent as one IncrementalAlterConfigs call that sets the
    given values and deletes every other config the resource may have (all of them, not only those this broker's
    image shows set, which may lag the controller), so each resource changes all or nothing, as in Kafka."""
    image = backend.image()

    def ops(r: Any) -> Plan:
        if r.resource_type == TOPIC_RESOURCE:
            return _replacement(r.configs, [*TOPIC_CONFIGS, *image.topic_configs(r.resource_name)])
        if r.resource_type == GROUP_RESOURCE:
            return _replacement(r.configs, [*GROUP_CONFIGS, *image.group_configs(r.resource_name)])
        return _replacement(r.configs, [*_DYNAMIC_BROKER_KEYS, *image.cluster_defaults()])

    resources, plans = _plans(request.resources, ops)
    outcomes = await _alter(backend, ctx, resources, plans, request.validate_only)
    result = AlterConfigsResponse.AlterConfigsResourceResponse
    return AlterConfigsResponse(
        version=version,
        throttle_time_ms=0,
        responses=[
            result(error_code=int(e), error_message=m, resource_type=r.resource_type, resource_name=r.resource_name)
            for r, (e, m) in zip(resources, outcomes, strict=True)
        ],
    )


# ---- cluster ----


async def _describe_cluster(backend: KafkaBackend, ctx: KafkaContext, version: int, request: Any) -> Any:
    """The brokers with an address on the Kafka listener, at that address (v2: fenced ones too if asked). Asked for
    controller endpoints (v1+), a broker answers MISMATCHED_ENDPOINT_TYPE as Kafka's do: odradek's controllers
    serve gRPC only."""
    endpoint_type = request.endpoint_type if version >= 1 else BROKER_ENDPOINT
    if endpoint_type != BROKER_ENDPOINT:
        code = MISMATCHED_ENDPOINT_TYPE if endpoint_type == 2 else UNSUPPORTED_ENDPOINT_TYPE
        return DescribeClusterResponse(
            version=version,
            error_code=code,
            error_message=f"this is a broker listener; endpoint type {endpoint_type} is not served here",
            endpoint_type=endpoint_type,
            cluster_id="",
            controller_id=-1,
            brokers=[],
            authorized_operations=None,
        )
    answer = await backend.admin.describe_cluster(DescribeCluster(), ctx.request_context)
    fenced_too = version >= 2 and request.include_fenced_brokers
    brokers, live = [], set()
    for b in answer.brokers:
        endpoint = backend.endpoint(b.node_id)
        if endpoint is None or (b.fenced and not fenced_too):
            continue
        if not b.fenced:
            live.add(b.node_id)
        brokers.append(
            DescribeClusterResponse.DescribeClusterBroker(
                broker_id=b.node_id, host=endpoint[0], port=endpoint[1], rack=b.rack or None, is_fenced=b.fenced
            )
        )
    return DescribeClusterResponse(
        version=version,
        throttle_time_ms=0,
        error_code=int(answer.error),
        error_message=None,
        endpoint_type=BROKER_ENDPOINT,
        cluster_id=answer.cluster_id,
        controller_id=client_controller_id(backend, answer.controller_id, live),
        brokers=brokers,
        authorized_operations=None,  # -2147483648: not computed (no ACLs yet)
    )


# ---- client quotas ----


async def _describe_client_quotas(backend: KafkaBackend, ctx: KafkaContext, version: int, request: Any) -> Any:
    """Kafka's match types (EXACT 0, DEFAULT 1, ANY 2) are odradek's."""
    answer = await backend.admin.describe_client_quotas(
        DescribeClientQuotas(
            components=tuple(
                QuotaFilterComponent(c.entity_type, QuotaMatch.of(c.match_type), c.match or "")
                for c in request.components
            ),
            strict=request.strict,
        ),
        ctx.request_context,
    )
    entry = DescribeClientQuotasResponse.EntryData
    return DescribeClientQuotasResponse(
        version=version,
        throttle_time_ms=0,
        error_code=int(answer.error),
        error_message=answer.error_message or None,
        entries=None
        if answer.error != ErrorCode.NONE
        else [
            entry(
                entity=[entry.EntityData(entity_type=c.entity_type, entity_name=c.name) for c in e.entity],
                values=[entry.ValueData(key=k, value=v) for k, v in e.values],
            )
            for e in answer.entries
        ],
    )


async def _alter_client_quotas(backend: KafkaBackend, ctx: KafkaContext, version: int, request: Any) -> Any:
    """Kafka's entity (a null name is the entity type's default) is odradek's."""
    answer = await backend.admin.alter_client_quotas(
        AlterClientQuotas(
            entries=tuple(
                QuotaAlteration(
                    entity=tuple(EntityComponent(c.entity_type, c.entity_name) for c in e.entity),
                    ops=tuple(QuotaAlterOp(key=o.key, value=o.value, remove=o.remove) for o in e.ops),
                )
                for e in request.entries
            ),
            validate_only=request.validate_only,
        ),
        ctx.request_context,
    )
    entry = AlterClientQuotasResponse.EntryData
    out = []
    for i, e in enumerate(request.entries):
        if answer.error != ErrorCode.NONE or i >= len(answer.entries):
            error, message = int(answer.error or ErrorCode.UNKNOWN_SERVER_ERROR), None
        else:
            error, message = int(answer.entries[i].error), answer.entries[i].error_message or None
        out.append(
            entry(
                error_code=error,
                error_message=message,
                entity=[entry.EntityData(entity_type=c.entity_type, entity_name=c.entity_name) for c in e.entity],
            )
        )
    return AlterClientQuotasResponse(version=version, throttle_time_ms=0, entries=out)

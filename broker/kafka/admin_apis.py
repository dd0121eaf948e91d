"""Kafka's admin APIs on the Kafka listener, each translated onto the service the gRPC listener serves: the Admin
service (topics, partitions, configs, cluster, client quotas; writes forwarded to the active controller there) and
the broker's DeleteRecords. No rule is decided here; only what Kafka's protocol can say and gRPC's cannot (a topic
named by id, a resource type, an endpoint type) is resolved or refused before the call.

Served versions (docs/kafka-protocol.md lists them with the other APIs):
- CreateTopics v2-v7; DeleteTopics v1-v6 (v6 ids resolved in this broker's image); CreatePartitions v0-v3;
  DeleteRecords v0-v2.
- DescribeConfigs v1-v4 and IncrementalAlterConfigs v0-v1: topics, and the broker resource as odradek has it (the
  cluster-wide dynamic defaults, which every broker applies; no per-broker dynamic configs).
- DescribeCluster v0-v2 (broker endpoints only); DescribeClientQuotas v0-v1; AlterClientQuotas v0-v1.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from kafka.protocol.admin.client_quotas import (
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
    DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
)
from kafka.protocol.admin.cluster import DescribeClusterRequest, DescribeClusterResponse
from kafka.protocol.admin.configs import (
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

from odradek.broker.kafka.apis import ApiRegistry, schema_api
from odradek.broker.kafka.backend import KafkaBackend
from odradek.broker.kafka.metadata_apis import (
    UNKNOWN_TOPIC_ID,
    ZERO_UUID,
    client_controller_id,
    service_context,
    topic_uuid,
)
from odradek.broker.kafka.wire import RequestContext
from odradek.broker.topic_defaults import node_key
from odradek.client.errors import ErrorCode
from odradek.proto import admin_pb2 as apb
from odradek.proto import broker_pb2 as pb

CREATE_TOPICS_VERSIONS = (2, 7)
DELETE_TOPICS_VERSIONS = (1, 6)
CREATE_PARTITIONS_VERSIONS = (0, 3)
DELETE_RECORDS_VERSIONS = (0, 2)
DESCRIBE_CONFIGS_VERSIONS = (1, 4)
INCREMENTAL_ALTER_CONFIGS_VERSIONS = (0, 1)
DESCRIBE_CLUSTER_VERSIONS = (0, 2)
DESCRIBE_CLIENT_QUOTAS_VERSIONS = (0, 1)
ALTER_CLIENT_QUOTAS_VERSIONS = (0, 1)

# Kafka's config resource types and DescribeCluster endpoint types.
TOPIC_RESOURCE, BROKER_RESOURCE = 2, 4
BROKER_ENDPOINT = 1
# Kafka's codes for an endpoint type that is not this listener's, or none Kafka knows (odradek has no such codes:
# its controllers serve gRPC only).
MISMATCHED_ENDPOINT_TYPE, UNSUPPORTED_ENDPOINT_TYPE = 114, 115

# odradek's ConfigSource -> Kafka's (whose numbering differs).
_CONFIG_SOURCES = {
    apb.CONFIG_SOURCE_UNKNOWN: 0,
    apb.TOPIC_CONFIG: 1,  # DYNAMIC_TOPIC_CONFIG
    apb.DYNAMIC_DEFAULT_BROKER_CONFIG: 3,
    apb.STATIC_BROKER_CONFIG: 4,
    apb.DEFAULT_CONFIG: 5,
}

# Kafka's IncrementalAlterConfigs operations (SET, DELETE, APPEND, SUBTRACT), numbered as odradek's AlterConfigOp.
_ALTER_OPS = frozenset({apb.SET, apb.DELETE, apb.APPEND, apb.SUBTRACT})


def register(registry: ApiRegistry, backend: KafkaBackend) -> None:
    apis = [
        (CreateTopicsRequest, CREATE_TOPICS_VERSIONS, _create_topics),
        (DeleteTopicsRequest, DELETE_TOPICS_VERSIONS, _delete_topics),
        (CreatePartitionsRequest, CREATE_PARTITIONS_VERSIONS, _create_partitions),
        (DeleteRecordsRequest, DELETE_RECORDS_VERSIONS, _delete_records),
        (DescribeConfigsRequest, DESCRIBE_CONFIGS_VERSIONS, _describe_configs),
        (IncrementalAlterConfigsRequest, INCREMENTAL_ALTER_CONFIGS_VERSIONS, _incremental_alter_configs),
        (DescribeClusterRequest, DESCRIBE_CLUSTER_VERSIONS, _describe_cluster),
        (DescribeClientQuotasRequest, DESCRIBE_CLIENT_QUOTAS_VERSIONS, _describe_client_quotas),
        (AlterClientQuotasRequest, ALTER_CLIENT_QUOTAS_VERSIONS, _alter_client_quotas),
    ]
    for request_cls, (low, high), translate in apis:

        async def handler(ctx: RequestContext, version: int, request: Any, translate=translate) -> Any:
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


async def _create_topics(backend: KafkaBackend, ctx: RequestContext, version: int, request: Any) -> Any:
    """Manual replica assignments go to the controller in partition order, after the checks of
    :func:`_creation_problem`."""
    problems = {t.name: p for t in request.topics if (p := _creation_problem(t)) is not None}
    passed = [t for t in request.topics if t.name not in problems]
    answer = (
        await backend.admin.CreateTopics(
            apb.CreateTopicsRequest(
                topics=[
                    apb.CreatableTopic(
                        name=t.name,
                        num_partitions=t.num_partitions,
                        replication_factor=t.replication_factor,
                        configs=[apb.ConfigEntry(name=c.name, value=c.value) for c in t.configs],
                        assignments=[
                            apb.ReplicaList(replicas=a.broker_ids)
                            for a in sorted(t.assignments, key=lambda a: a.partition_index)
                        ],
                    )
                    for t in passed
                ],
                timeout_ms=request.timeout_ms,
                validate_only=request.validate_only,
            ),
            service_context(ctx),
        )
        if passed
        else apb.CreateTopicsResponse()
    )
    answers = iter(answer.topics)
    refused = {
        name: apb.TopicResult(name=name, error=code, error_message=why) for name, (code, why) in problems.items()
    }
    topics = [refused[t.name] if t.name in refused else next(answers) for t in request.topics]
    result = CreateTopicsResponse.CreatableTopicResult
    return CreateTopicsResponse(
        version=version,
        throttle_time_ms=answer.throttle_time_ms,
        topics=[
            # v5+: the created topic's partition count, replication factor and configs are not known here (the
            # service answers the outcome only): -1 and no configs, which clients read as "not returned".
            result(
                name=t.name,
                topic_id=topic_uuid(t.topic_id) if t.error == ErrorCode.NONE else ZERO_UUID,
                error_code=int(t.error),
                error_message=t.error_message or None,
                num_partitions=-1,
                replication_factor=-1,
                configs=[],
            )
            for t in topics
        ],
    )


async def _delete_topics(backend: KafkaBackend, ctx: RequestContext, version: int, request: Any) -> Any:
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
        await backend.admin.DeleteTopics(
            apb.DeleteTopicsRequest(names=names, timeout_ms=request.timeout_ms), service_context(ctx)
        )
        if names
        else apb.DeleteTopicsResponse()
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
    return DeleteTopicsResponse(version=version, throttle_time_ms=answer.throttle_time_ms, responses=out)


async def _create_partitions(backend: KafkaBackend, ctx: RequestContext, version: int, request: Any) -> Any:
    """Each topic's new count and, if given, the replicas of each new partition (a null list: the controller
    places them)."""
    answer = await backend.admin.CreatePartitions(
        apb.CreatePartitionsRequest(
            topics=[
                apb.CreatePartitionsTopic(
                    name=t.name,
                    count=t.count,
                    assignments=[apb.ReplicaList(replicas=a.broker_ids) for a in t.assignments or ()],
                )
                for t in request.topics
            ],
            timeout_ms=request.timeout_ms,
            validate_only=request.validate_only,
        ),
        service_context(ctx),
    )
    result = CreatePartitionsResponse.CreatePartitionsTopicResult
    out = [result(name=r.name, error_code=int(r.error), error_message=r.error_message or None) for r in answer.topics]
    return CreatePartitionsResponse(version=version, throttle_time_ms=answer.throttle_time_ms, results=out)


async def _delete_records(backend: KafkaBackend, ctx: RequestContext, version: int, request: Any) -> Any:
    answer = await backend.data.DeleteRecords(
        pb.DeleteRecordsRequest(
            topics=[
                pb.DeleteRecordsTopic(
                    name=t.name,
                    partitions=[
                        pb.DeleteRecordsPartition(partition=p.partition_index, offset=p.offset) for p in t.partitions
                    ],
                )
                for t in request.topics
            ],
            timeout_ms=request.timeout_ms,
        ),
        service_context(ctx),
    )
    topic = DeleteRecordsResponse.DeleteRecordsTopicResult
    partition = topic.DeleteRecordsPartitionResult
    return DeleteRecordsResponse(
        version=version,
        throttle_time_ms=answer.throttle_time_ms,
        topics=[
            topic(
                name=t.name,
                partitions=[
                    partition(partition_index=p.partition, low_watermark=p.low_watermark, error_code=int(p.error))
                    for p in t.partitions
                ],
            )
            for t in answer.topics
        ],
    )


# ---- configs ----


def _broker_resource_error(backend: KafkaBackend, name: str) -> str | None:
    """Why a broker resource cannot be served here, or None. "" is the cluster-wide default; a broker id must be
    this broker's, as Kafka requires (its admin clients send a broker's resource to that broker)."""
    if name == "" or name == str(backend.broker_id):
        return None
    return f"unexpected broker id {name!r}: expected {backend.broker_id} or the empty name (the cluster default)"


async def _describe_configs(backend: KafkaBackend, ctx: RequestContext, version: int, request: Any) -> Any:
    """Topics: each config's effective value and source. The broker resource: the configs odradek can set for the
    whole cluster at runtime (those defaulting a topic config), with their values here; the empty name (the
    cluster-wide default) lists only those set dynamically, as Kafka does. Synonyms: the source the value comes
    from (odradek does not track the lower-precedence ones). No documentation or config types."""
    sctx = service_context(ctx)
    result = DescribeConfigsResponse.DescribeConfigsResult
    entry = result.DescribeConfigsResourceResult
    synonym = entry.DescribeConfigsSynonym

    def configs(described: Sequence[apb.DescribedConfig], topic: bool) -> list[Any]:
        out = []
        for c in described:
            source = _CONFIG_SOURCES.get(c.source, 0)
            synonym_name = c.name
            if topic and c.source != apb.TOPIC_CONFIG:
                synonym_name = node_key(c.name) or c.name
            value = None if c.sensitive else c.value
            out.append(
                entry(
                    name=c.name,
                    value=value,
                    read_only=c.read_only,
                    config_source=source,
                    is_sensitive=c.sensitive,
                    synonyms=[synonym(name=synonym_name, value=value, source=source)]
                    if request.include_synonyms
                    else [],
                    config_type=0,
                    documentation=None,
                )
            )
        return out

    broker_configs: list[apb.DescribedConfig] | None = None
    results = []
    for r in request.resources:
        keys = list(r.configuration_keys or ())
        kind, name = r.resource_type, r.resource_name
        error, message, found = ErrorCode.NONE, None, []
        if kind == TOPIC_RESOURCE:
            answer = await backend.admin.DescribeConfigs(
                apb.DescribeConfigsRequest(topics=[name], config_names=keys), sctx
            )
            [t] = answer.topics if answer.error == ErrorCode.NONE else [apb.TopicConfigs(error=answer.error)]
            error, message = t.error, t.error_message or None
            found = configs(t.configs, topic=True)
        elif kind == BROKER_RESOURCE and (message := _broker_resource_error(backend, name)) is None:
            if broker_configs is None:
                answer = await backend.admin.DescribeConfigs(apb.DescribeConfigsRequest(cluster_defaults=True), sctx)
                error = answer.error
                broker_configs = list(answer.cluster_defaults)
            chosen = [
                c
                for c in broker_configs
                if (not keys or c.name in keys) and (name != "" or c.source == apb.DYNAMIC_DEFAULT_BROKER_CONFIG)
            ]
            found = configs(chosen, topic=False)
        else:
            error = ErrorCode.INVALID_REQUEST
            message = message or f"unsupported config resource type {kind}"
        results.append(
            result(
                error_code=int(error),
                error_message=message,
                resource_type=kind,
                resource_name=name,
                configs=found if error == ErrorCode.NONE else [],
            )
        )
    return DescribeConfigsResponse(version=version, throttle_time_ms=0, results=results)


async def _incremental_alter_configs(backend: KafkaBackend, ctx: RequestContext, version: int, request: Any) -> Any:
    """Topic resources, and the broker resource's empty name (the cluster-wide default, applied by every broker).
    odradek has no per-broker dynamic configs: a broker id is refused. Kafka's operation codes (SET, DELETE,
    APPEND, SUBTRACT) are odradek's; an operation Kafka does not define is refused (INVALID_REQUEST)."""
    topics: list[apb.AlterTopicConfigs] = []
    defaults: list[apb.AlterableConfig] = []
    refused: dict[int, str] = {}  # resource index -> why
    for i, r in enumerate(request.resources):
        ops = [apb.AlterableConfig(name=c.name, op=c.config_operation, value=c.value or "") for c in r.configs]
        if any(c.config_operation not in _ALTER_OPS for c in r.configs):
            refused[i] = f"unknown config operation in {sorted({c.config_operation for c in r.configs})}"
        elif r.resource_type == TOPIC_RESOURCE:
            topics.append(apb.AlterTopicConfigs(topic=r.resource_name, configs=ops))
        elif r.resource_type == BROKER_RESOURCE and r.resource_name == "":
            defaults.extend(ops)
        elif r.resource_type == BROKER_RESOURCE:
            refused[i] = "per-broker dynamic configs are not supported: alter the cluster default (empty name)"
        else:
            refused[i] = f"unsupported config resource type {r.resource_type}"
    answer = apb.IncrementalAlterConfigsResponse()
    if topics or defaults:
        answer = await backend.admin.IncrementalAlterConfigs(
            apb.IncrementalAlterConfigsRequest(
                topics=topics, cluster_defaults=defaults, validate_only=request.validate_only
            ),
            service_context(ctx),
        )
    topic_results = iter(answer.results)
    result = IncrementalAlterConfigsResponse.AlterConfigsResourceResponse
    out = []
    for i, r in enumerate(request.resources):
        if i in refused:
            error, message = ErrorCode.INVALID_REQUEST, refused[i]
        elif answer.error != ErrorCode.NONE:
            error, message = answer.error, None
        elif r.resource_type == TOPIC_RESOURCE:
            t = next(topic_results)
            error, message = t.error, t.error_message or None
        else:
            d = answer.cluster_defaults_result
            error, message = d.error, d.error_message or None
        out.append(
            result(
                error_code=int(error),
                error_message=message,
                resource_type=r.resource_type,
                resource_name=r.resource_name,
            )
        )
    return IncrementalAlterConfigsResponse(version=version, throttle_time_ms=0, responses=out)


# ---- cluster ----


async def _describe_cluster(backend: KafkaBackend, ctx: RequestContext, version: int, request: Any) -> Any:
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
    answer = await backend.admin.DescribeCluster(apb.DescribeClusterRequest(), service_context(ctx))
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


def _entity(components: Sequence[Any]) -> list[apb.QuotaEntityComponent]:
    """Kafka's entity (a null name is the entity type's default) as odradek's."""
    return [
        apb.QuotaEntityComponent(entity_type=c.entity_type, name=c.entity_name or "", is_default=c.entity_name is None)
        for c in components
    ]


async def _describe_client_quotas(backend: KafkaBackend, ctx: RequestContext, version: int, request: Any) -> Any:
    """Kafka's match types (EXACT 0, DEFAULT 1, ANY 2) are odradek's."""
    answer = await backend.admin.DescribeClientQuotas(
        apb.DescribeClientQuotasRequest(
            components=[
                apb.QuotaFilterComponent(entity_type=c.entity_type, match_type=c.match_type, match=c.match or "")
                for c in request.components
            ],
            strict=request.strict,
        ),
        service_context(ctx),
    )
    entry = DescribeClientQuotasResponse.EntryData
    return DescribeClientQuotasResponse(
        version=version,
        throttle_time_ms=answer.throttle_time_ms,
        error_code=int(answer.error),
        error_message=answer.error_message or None,
        entries=None
        if answer.error != ErrorCode.NONE
        else [
            entry(
                entity=[
                    entry.EntityData(entity_type=c.entity_type, entity_name=None if c.is_default else c.name)
                    for c in e.entity
                ],
                values=[entry.ValueData(key=v.key, value=v.value) for v in e.values],
            )
            for e in answer.entries
        ],
    )


async def _alter_client_quotas(backend: KafkaBackend, ctx: RequestContext, version: int, request: Any) -> Any:
    answer = await backend.admin.AlterClientQuotas(
        apb.AlterClientQuotasRequest(
            entries=[
                apb.QuotaAlteration(
                    entity=_entity(e.entity),
                    ops=[apb.QuotaAlterOp(key=o.key, value=o.value, remove=o.remove) for o in e.ops],
                )
                for e in request.entries
            ],
            validate_only=request.validate_only,
        ),
        service_context(ctx),
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
    return AlterClientQuotasResponse(version=version, throttle_time_ms=answer.throttle_time_ms, entries=out)

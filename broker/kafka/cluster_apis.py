"""Kafka's cluster-admin APIs on the Kafka listener: log dirs, leader elections, partition reassignments, the
metadata quorum and paged topic descriptions, each translated onto the service the gRPC listener serves (the
broker's DescribeLogDirs, the typed admin service ``KafkaBackend.admin``, which forwards writes and the quorum
description to the active controller). What Kafka's protocol can say and odradek's cannot (a partition filter, a
replication-factor guard, an empty reassignment target) is resolved before the call, and a request that asks for
nothing is answered here.

Served versions (docs/kafka-protocol.md lists them with the other APIs):
- DescribeLogDirs v1-v4: this broker's own log dirs, as each Kafka broker answers for its own, future replicas
  (moving between them) included.
- AlterReplicaLogDirs v1-v2: moves of this broker's replicas between its own log dirs (v0, which Kafka 4.0
  removed, is not in kafka-python's schemas).
- ElectLeaders v0-v2; AlterPartitionReassignments v0-v1; ListPartitionReassignments v0.
- DescribeQuorum v0-v2. v2's voter endpoints are those of a static quorum, as Kafka's lists them: each voter's
  address in ``controller.quorum.voters`` on the controllers' listener (the first of ``controller.listener.names``),
  and zero directory ids.
- DescribeTopicPartitions v0.

Authorization is the services' (cluster Alter for elections, reassignments and log-dir moves, cluster Describe for
log dirs and the quorum, topic Describe for topic descriptions). Only where no service is called does this module
check the caller itself: ListPartitionReassignments (cluster Describe, as Kafka requires; no gRPC call lists
reassignments), and the requests that ask for nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from kafka.protocol.admin.cluster import (
    AlterReplicaLogDirsRequest,
    AlterReplicaLogDirsResponse,
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
    DescribeQuorumRequest,
    DescribeQuorumResponse,
)
from kafka.protocol.admin.topics import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    DescribeTopicPartitionsRequest,
    DescribeTopicPartitionsResponse,
    ElectLeadersRequest,
    ElectLeadersResponse,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
)

from odradek.broker.config import NodeConfig
from odradek.broker.kafka.apis import ApiRegistry, schema_api
from odradek.broker.kafka.backend import KafkaBackend, request_caller
from odradek.broker.kafka.metadata_apis import ZERO_UUID, topic_uuid
from odradek.broker.kafka.wire import KafkaContext
from odradek.client.common.acls import AclOperation
from odradek.client.common.admin.cluster import DescribeQuorum, ReplicaState
from odradek.client.common.admin.partitions import (
    AlterReassignments,
    AlterReassignmentsAnswer,
    ElectionResult,
    ElectionType,
    ElectLeaders,
    Reassignment,
)
from odradek.client.common.admin.topics import DescribeTopics, TopicDescription
from odradek.client.common.metadata_image import MetadataImage, PartitionRegistration
from odradek.client.common.topic_rules import validate_topic_name
from odradek.client.errors import ErrorCode

DESCRIBE_LOG_DIRS_VERSIONS = (1, 4)
ALTER_REPLICA_LOG_DIRS_VERSIONS = (1, 2)
ELECT_LEADERS_VERSIONS = (0, 2)
ALTER_PARTITION_REASSIGNMENTS_VERSIONS = (0, 1)
LIST_PARTITION_REASSIGNMENTS_VERSIONS = (0, 0)
DESCRIBE_QUORUM_VERSIONS = (0, 2)
DESCRIBE_TOPIC_PARTITIONS_VERSIONS = (0, 0)

# The metadata log as Kafka names it: the one partition DescribeQuorum describes.
METADATA_TOPIC, METADATA_PARTITION = "__cluster_metadata", 0
# Kafka's cap on DescribeTopicPartitions' response_partition_limit (max.request.partition.size.limit's default).
MAX_RESPONSE_PARTITIONS = 2000
UNKNOWN_AUTHORIZED_OPERATIONS = -2147483648  # not computed, as in Metadata answers
NO_LEADER = -1


def register(registry: ApiRegistry, backend: KafkaBackend) -> None:
    apis = [
        (DescribeLogDirsRequest, DESCRIBE_LOG_DIRS_VERSIONS, _describe_log_dirs),
        (AlterReplicaLogDirsRequest, ALTER_REPLICA_LOG_DIRS_VERSIONS, _alter_replica_log_dirs),
        (ElectLeadersRequest, ELECT_LEADERS_VERSIONS, _elect_leaders),
        (AlterPartitionReassignmentsRequest, ALTER_PARTITION_REASSIGNMENTS_VERSIONS, _alter_reassignments),
        (ListPartitionReassignmentsRequest, LIST_PARTITION_REASSIGNMENTS_VERSIONS, _list_reassignments),
        (DescribeQuorumRequest, DESCRIBE_QUORUM_VERSIONS, _describe_quorum),
        (DescribeTopicPartitionsRequest, DESCRIBE_TOPIC_PARTITIONS_VERSIONS, _describe_topic_partitions),
    ]
    for request_cls, (low, high), translate in apis:

        async def handler(ctx: KafkaContext, version: int, request: Any, translate=translate) -> Any:
            return await translate(backend, ctx, version, request)

        registry.add(*schema_api(request_cls, low, high, handler))


def _cluster_refusal(
    backend: KafkaBackend, ctx: KafkaContext, operation: AclOperation, api: str
) -> ErrorCode.ValueType:
    """CLUSTER_AUTHORIZATION_FAILED when the caller may not perform ``operation`` on the cluster, else NONE: for
    the requests this module answers without a service that would check."""
    caller = request_caller(backend, ctx)
    if caller is None or backend.access.allows_cluster(caller, operation, api=api):
        return ErrorCode.NONE
    return ErrorCode.CLUSTER_AUTHORIZATION_FAILED


def _grouped(items: Iterable[tuple[str, Any]]) -> list[tuple[str, list[Any]]]:
    """(topic, item) pairs as (topic, its items), topics in order of first appearance."""
    by_topic: dict[str, list[Any]] = {}
    for topic, item in items:
        by_topic.setdefault(topic, []).append(item)
    return list(by_topic.items())


# ---- log dirs ----


async def _describe_log_dirs(backend: KafkaBackend, ctx: KafkaContext, version: int, request: Any) -> Any:
    """This broker's log dirs: each one's state and disk figures, and the replicas in it of the partitions asked
    (null: all; an empty list: none, every dir still described). Lag is behind the partition's leader, -1 where not
    known; a future replica's is behind the replica it will replace. odradek has no cordoned dirs."""
    wanted = None if request.topics is None else {(t.topic, p) for t in request.topics for p in t.partitions}
    names = sorted({t.topic for t in request.topics or ()})
    answer = await backend.data.replica_service.describe_log_dirs(names, ctx.request_context)
    result = DescribeLogDirsResponse.DescribeLogDirsResult
    topic = result.DescribeLogDirsTopic
    partition = topic.DescribeLogDirsPartition
    results = []
    for d in answer.dirs:
        replicas = [r for r in d.replicas if wanted is None or (r.topic, r.partition) in wanted]
        topics = [
            topic(
                name=name,
                partitions=[
                    partition(
                        partition_index=r.partition,
                        partition_size=r.size_bytes,
                        offset_lag=r.offset_lag,
                        is_future_key=r.is_future,
                    )
                    for r in in_topic
                ],
            )
            for name, in_topic in _grouped((r.topic, r) for r in replicas)
        ]
        results.append(
            result(
                error_code=d.error,
                log_dir=d.path,
                topics=topics,
                total_bytes=d.total_bytes,
                usable_bytes=d.free_bytes,
                is_cordoned=False,
            )
        )
    # v1-v2 have no top-level error: a refused caller gets no dirs, as from Kafka.
    return DescribeLogDirsResponse(version=version, throttle_time_ms=0, error_code=answer.error, results=results)


async def _alter_replica_log_dirs(backend: KafkaBackend, ctx: KafkaContext, version: int, request: Any) -> Any:
    """Each partition's answer, grouped by topic in the order asked; a partition named under two dirs goes to the
    last, as Kafka's map of partition to dir keeps it."""
    destinations = {(t.name, index): d.path for d in request.dirs for t in d.topics for index in t.partitions}
    _, codes = backend.data.replica_service.alter_replica_log_dirs(destinations, ctx.request_context)
    result = AlterReplicaLogDirsResponse.AlterReplicaLogDirTopicResult
    partition = result.AlterReplicaLogDirPartitionResult
    results = [
        result(topic_name=name, partitions=[partition(partition_index=index, error_code=code) for index, code in parts])
        for name, parts in _grouped((topic, (index, code)) for (topic, index), code in codes.items())
    ]
    return AlterReplicaLogDirsResponse(version=version, throttle_time_ms=0, results=results)


# ---- leader elections ----


def _election_answer(version: int, error: int, results: Sequence[ElectionResult]) -> Any:
    """Kafka's answer: each partition's result under its topic, and the top-level error (v1+)."""
    topic = ElectLeadersResponse.ReplicaElectionResult
    partition = topic.PartitionResult
    return ElectLeadersResponse(
        version=version,
        throttle_time_ms=0,
        error_code=error,
        replica_election_results=[
            topic(
                topic=name,
                partition_result=[
                    partition(
                        partition_id=r.partition,
                        error_code=int(r.error),
                        error_message=r.error_message or None if r.error != ErrorCode.NONE else None,
                    )
                    for r in in_topic
                ],
            )
            for name, in_topic in _grouped((r.topic, r) for r in results)
        ],
    )


async def _elect_leaders(backend: KafkaBackend, ctx: KafkaContext, version: int, request: Any) -> Any:
    """Preferred (v0's only type) and unclean elections; a null list elects every partition and answers only those
    whose election was needed, as Kafka does. An election type Kafka does not define is INVALID_REQUEST. A
    top-level error is every partition's too, as in Kafka's error answer (v0 has only the partitions')."""
    election = request.election_type if version >= 1 else ElectionType.PREFERRED
    asked = (
        None
        if request.topic_partitions is None
        else [(t.topic, p) for t in request.topic_partitions for p in t.partitions]
    )
    error: int = ErrorCode.NONE
    message: str | None = None
    if election not in (ElectionType.PREFERRED, ElectionType.UNCLEAN):
        error, message = ErrorCode.INVALID_REQUEST, f"Unknown election type {election}"
    elif asked == []:  # none asked: only the caller's authorization is answered
        error = _cluster_refusal(backend, ctx, AclOperation.ALTER, "ElectLeaders")
    else:
        answer = await backend.admin.elect_leaders(
            ElectLeaders(election, None if asked is None else tuple(asked)), ctx.request_context
        )
        if answer.error == ErrorCode.NONE:
            return _election_answer(version, ErrorCode.NONE, answer.results)
        error = answer.error
    message = message or ErrorCode.Name(ErrorCode.ValueType(error))
    failed = [ElectionResult(topic, partition, error, message) for topic, partition in asked or ()]
    return _election_answer(version, int(error), failed)


# ---- partition reassignments ----


def _heading_replicas(p: PartitionRegistration) -> int:
    """How many replicas the partition is to have: its reassignment's target while one is in progress."""
    return len([r for r in p.replicas if r not in p.removing_replicas])


Refusal = tuple[int, str]


def _reassignment_refusal(
    image: MetadataImage, topic: str, index: int, replicas: list[int] | None, allow_rf: bool
) -> Refusal | None:
    """Kafka's refusal of one target that the gRPC request cannot carry, or None: an empty target (gRPC's empty list
    cancels) and, where the request forbids it (v1), a change of replication factor."""
    if replicas is None:
        return None
    p = image.partition(topic, index)
    if p is None and not replicas:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find partition {topic}:{index}."
    if not replicas:
        return ErrorCode.INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment includes an empty replica list."
    if p is not None and not allow_rf and len(replicas) != _heading_replicas(p):
        return (
            ErrorCode.INVALID_REPLICATION_FACTOR,
            f"The replication factor is changed from {_heading_replicas(p)} to {len(replicas)}",
        )
    return None


async def _alter_reassignments(backend: KafkaBackend, ctx: KafkaContext, version: int, request: Any) -> Any:
    """Start, change or cancel (null replicas) reassignments. Those Kafka refuses before its controller decides
    (see ``_reassignment_refusal``, judged on this broker's image) are answered here, the others by the service;
    a top-level error (not authorized, no controller) is every partition's too, as in Kafka's error answer."""
    allow_rf = version < 1 or request.allow_replication_factor_change
    image = backend.image()
    asked = [(t.name, p.partition_index, p.replicas) for t in request.topics for p in t.partitions]
    refused = {i: _reassignment_refusal(image, *a, allow_rf) for i, a in enumerate(asked)}
    passed = tuple(
        Reassignment(topic, index, tuple(replicas) if replicas else None)  # None: cancel
        for i, (topic, index, replicas) in enumerate(asked)
        if refused[i] is None
    )
    if passed:
        answer = await backend.admin.alter_partition_reassignments(AlterReassignments(passed), ctx.request_context)
    else:
        refusal = _cluster_refusal(backend, ctx, AclOperation.ALTER, "AlterPartitionReassignments")
        answer = AlterReassignmentsAnswer(error=refusal)
    error = answer.error
    message = ErrorCode.Name(ErrorCode.ValueType(error)) if error != ErrorCode.NONE else None
    results = iter(answer.results)
    outcomes = []
    for i, (topic, index, _) in enumerate(asked):
        refused_here = refused[i]
        if error != ErrorCode.NONE:
            outcome: tuple[int, str | None] = (error, message)
        elif refused_here is not None:
            outcome = refused_here
        else:
            r = next(results)
            outcome = (int(r.error), r.error_message or None)
        outcomes.append((topic, (index, *outcome)))
    topic_cls = AlterPartitionReassignmentsResponse.ReassignableTopicResponse
    partition = topic_cls.ReassignablePartitionResponse
    return AlterPartitionReassignmentsResponse(
        version=version,
        throttle_time_ms=0,
        allow_replication_factor_change=allow_rf,
        error_code=error,
        error_message=message,
        responses=[
            topic_cls(
                name=name,
                partitions=[
                    partition(partition_index=index, error_code=code, error_message=text)
                    for index, code, text in in_topic
                ],
            )
            for name, in_topic in _grouped(outcomes)
        ],
    )


async def _list_reassignments(backend: KafkaBackend, ctx: KafkaContext, version: int, request: Any) -> Any:
    """The reassignments in progress, from this broker's metadata image (the partitions asked, or all for a null
    list); a topic or partition without one, or unknown, is left out, as Kafka leaves it. Needs Describe on the
    cluster, as in Kafka."""
    refusal = _cluster_refusal(backend, ctx, AclOperation.DESCRIBE, "ListPartitionReassignments")
    topic = ListPartitionReassignmentsResponse.OngoingTopicReassignment
    partition = topic.OngoingPartitionReassignment
    if refusal != ErrorCode.NONE:
        return ListPartitionReassignmentsResponse(
            version=version, throttle_time_ms=0, error_code=refusal, error_message=ErrorCode.Name(refusal), topics=[]
        )
    image = backend.image()
    if request.topics is None:
        asked = [(t.name, sorted(t.partitions)) for t in image.sorted_topics()]
    else:
        asked = [(t.name, t.partition_indexes) for t in request.topics]
    topics = []
    for name, indexes in asked:
        ongoing = [
            partition(
                partition_index=i,
                replicas=list(p.replicas),
                adding_replicas=list(p.adding_replicas),
                removing_replicas=list(p.removing_replicas),
            )
            for i in indexes
            if (p := image.partition(name, i)) is not None and (p.adding_replicas or p.removing_replicas)
        ]
        if ongoing:
            topics.append(topic(name=name, partitions=ongoing))
    return ListPartitionReassignmentsResponse(
        version=version, throttle_time_ms=0, error_code=0, error_message=None, topics=topics
    )


# ---- the metadata quorum ----


def _known_ms(ms: int) -> int:
    """A time of the quorum description, -1 (Kafka's unknown) where the controller has none (-1, or proto3's 0)."""
    return ms if ms > 0 else -1


def _replica_states(replicas: Sequence[ReplicaState]) -> list[Any]:
    """Kafka's replica states, with the times the leader keeps as Kafka's does (the controller's answer). Directory
    ids are zero, as a static quorum's (v2)."""
    state = DescribeQuorumResponse.TopicData.PartitionData.ReplicaState
    return [
        state(
            replica_id=r.node_id,
            replica_directory_id=ZERO_UUID,
            log_end_offset=r.log_end_offset,
            last_fetch_timestamp=_known_ms(r.last_fetch_timestamp_ms),
            last_caught_up_timestamp=_known_ms(r.last_caught_up_timestamp_ms),
        )
        for r in replicas
    ]


def _voter_nodes(config: NodeConfig) -> list[Any]:
    """v2's nodes: each voter's endpoint by listener name, as Kafka's static quorum knows it: its address in
    controller.quorum.voters on the controllers' listener (the first of controller.listener.names, upper-cased as
    Kafka normalises listener names)."""
    node = DescribeQuorumResponse.Node
    name = config["controller.listener.names"][0].upper()
    return [
        node(node_id=v.node_id, listeners=[node.Listener(name=name, host=v.host, port=v.port)]) for v in config.voters
    ]


async def _describe_quorum(backend: KafkaBackend, ctx: KafkaContext, version: int, request: Any) -> Any:
    """The metadata quorum as its leader knows it (the service asks the active controller). The request must name
    the metadata partition alone, as Kafka's requires (else UNKNOWN_TOPIC_OR_PARTITION for what it named)."""
    topic = DescribeQuorumResponse.TopicData
    partition = topic.PartitionData
    asked = [(t.topic_name, [p.partition_index for p in t.partitions]) for t in request.topics]
    if asked != [(METADATA_TOPIC, [METADATA_PARTITION])]:
        refusal = _cluster_refusal(backend, ctx, AclOperation.DESCRIBE, "DescribeQuorum")
        unknown = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        return DescribeQuorumResponse(
            version=version,
            error_code=refusal,
            topics=[]
            if refusal != ErrorCode.NONE
            else [
                topic(
                    topic_name=name,
                    partitions=[
                        partition(partition_index=i, error_code=unknown, leader_id=NO_LEADER, leader_epoch=-1)
                        for i in indexes
                    ],
                )
                for name, indexes in asked
            ],
        )
    answer = await backend.admin.describe_quorum(DescribeQuorum(), ctx.request_context)
    if answer.error != ErrorCode.NONE:
        return DescribeQuorumResponse(version=version, error_code=int(answer.error), topics=[])
    return DescribeQuorumResponse(
        version=version,
        error_code=0,
        topics=[
            topic(
                topic_name=METADATA_TOPIC,
                partitions=[
                    partition(
                        partition_index=METADATA_PARTITION,
                        error_code=0,
                        leader_id=answer.leader_id,
                        leader_epoch=answer.leader_epoch,
                        high_watermark=answer.high_watermark,
                        current_voters=_replica_states(answer.voters),
                        observers=_replica_states(answer.observers),
                    )
                ],
            )
        ],
        nodes=_voter_nodes(backend.node_config()) if version >= 2 else [],
    )


# ---- paged topic descriptions ----


def _topic_error(name: str, error: int) -> Any:
    return DescribeTopicPartitionsResponse.DescribeTopicPartitionsResponseTopic(
        error_code=error,
        name=name,
        topic_id=ZERO_UUID,
        is_internal=False,
        partitions=[],
        topic_authorized_operations=UNKNOWN_AUTHORIZED_OPERATIONS,
    )


def _described_topic(backend: KafkaBackend, t: TopicDescription, partitions: Iterable[Any]) -> Any:
    """A topic with ``partitions``: a leader without an address on this listener is -1, and every replica without
    one (fenced, unknown, no Kafka listener) is offline, as Kafka's brokers answer for their listener."""
    cls = DescribeTopicPartitionsResponse.DescribeTopicPartitionsResponseTopic
    partition = cls.DescribeTopicPartitionsResponsePartition
    return cls(
        error_code=0,
        name=t.name,
        topic_id=topic_uuid(t.topic_id),
        is_internal=t.is_internal,
        partitions=[
            partition(
                error_code=0,
                partition_index=p.partition,
                leader_id=p.leader if backend.endpoint(p.leader) is not None else NO_LEADER,
                leader_epoch=p.leader_epoch,
                replica_nodes=list(p.replicas),
                isr_nodes=list(p.isr),
                eligible_leader_replicas=list(p.eligible_leader_replicas),
                last_known_elr=list(p.last_known_elr),
                offline_replicas=[r for r in p.replicas if backend.endpoint(r) is None],
            )
            for p in partitions
        ],
        topic_authorized_operations=UNKNOWN_AUTHORIZED_OPERATIONS,
    )


async def _describe_topic_partitions(backend: KafkaBackend, ctx: KafkaContext, version: int, request: Any) -> Any:
    """Topics (those named, or every one the caller may describe, internal ones too) in name order from the cursor
    on, at most ``response_partition_limit`` partitions (capped at 2000, as Kafka's default cap) per answer, and
    the cursor to continue from. As Kafka: a cursor naming a topic the list does not is INVALID_REQUEST for every
    topic named; a topic the caller may not describe is TOPIC_AUTHORIZATION_FAILED, after the others and outside
    the limit; an unknown one UNKNOWN_TOPIC_OR_PARTITION (INVALID_TOPIC_EXCEPTION for a name no topic may have)."""
    cursor = request.cursor
    start_topic = cursor.topic_name if cursor is not None else ""
    named = sorted({t.name for t in request.topics if t.name >= start_topic})
    if request.topics and cursor is not None and cursor.topic_name not in named:
        return DescribeTopicPartitionsResponse(
            version=version,
            throttle_time_ms=0,
            topics=[_topic_error(t.name, ErrorCode.INVALID_REQUEST) for t in request.topics],
            next_cursor=None,
        )
    answer = await backend.admin.describe_topics(
        DescribeTopics(names=tuple(named), include_internal=True), ctx.request_context
    )
    described = sorted((t for t in answer.topics if t.name >= start_topic), key=lambda t: t.name)
    denied = [t for t in described if t.error == ErrorCode.TOPIC_AUTHORIZATION_FAILED]
    out, next_cursor = [], None
    remaining = min(MAX_RESPONSE_PARTITIONS, request.response_partition_limit)
    for t in described:
        if t.error == ErrorCode.TOPIC_AUTHORIZATION_FAILED:
            continue
        if remaining == 0:
            next_cursor = DescribeTopicPartitionsResponse.Cursor(topic_name=t.name, partition_index=0)
            break
        if remaining < 0:
            break
        if t.error != ErrorCode.NONE:
            invalid = t.error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and validate_topic_name(t.name) is not None
            out.append(_topic_error(t.name, ErrorCode.INVALID_TOPIC_EXCEPTION if invalid else int(t.error)))
            continue
        first = cursor.partition_index if cursor is not None and t.name == cursor.topic_name else 0
        end = min(len(t.partitions), first + remaining)
        out.append(_described_topic(backend, t, [p for p in t.partitions if first <= p.partition < end]))
        if end < len(t.partitions):
            next_cursor = DescribeTopicPartitionsResponse.Cursor(topic_name=t.name, partition_index=end)
            break
        remaining -= max(0, end - first)
    out += [_topic_error(t.name, ErrorCode.TOPIC_AUTHORIZATION_FAILED) for t in denied]
    return DescribeTopicPartitionsResponse(version=version, throttle_time_ms=0, topics=out, next_cursor=next_cursor)

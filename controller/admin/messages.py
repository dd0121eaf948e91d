"""The Admin service's protobuf messages (``proto/admin.proto``) to the typed requests and answers of
``client/common/admin/`` and back: what the gRPC adapter (``grpc_adapter.py``) reads and writes, and what the
forwarding client (``forwarding.py``) sends to the active controller and reads of its answer.

``*_of`` reads a message; ``*_message``, ``*_request`` and ``*_response`` write one. Proto3 cannot tell an empty
list from an absent one: ElectLeaders' empty partition list is every partition (None here), a reassignment's empty
replica list cancels (None here).
"""

from __future__ import annotations

from collections.abc import Iterable

from odradek.client.common.acls import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from odradek.client.common.admin.acls import (
    AclCreationResult,
    AclDeletionResult,
    CreateAcls,
    CreateAclsAnswer,
    DeleteAcls,
    DeleteAclsAnswer,
    DescribeAcls,
    DescribeAclsAnswer,
)
from odradek.client.common.admin.cluster import (
    BrokerInfo,
    ControllerNode,
    DescribeClusterAnswer,
    DescribeQuorumAnswer,
    ReplicaState,
)
from odradek.client.common.admin.configs import (
    AlterableConfig,
    AlterConfigsResult,
    AlterGroupConfigs,
    AlterTopicConfigs,
    ConfigEntry,
    DescribeConfigs,
    DescribeConfigsAnswer,
    DescribedConfig,
    GroupConfigs,
    IncrementalAlterConfigs,
    IncrementalAlterConfigsAnswer,
    TopicConfigs,
)
from odradek.client.common.admin.partitions import (
    AlterReassignments,
    AlterReassignmentsAnswer,
    ElectionResult,
    ElectLeaders,
    ElectLeadersAnswer,
    Reassignment,
)
from odradek.client.common.admin.quotas import (
    AlterClientQuotas,
    AlterClientQuotasAnswer,
    ClientQuotaEntry,
    DescribeClientQuotas,
    DescribeClientQuotasAnswer,
    EntityComponent,
    QuotaAlteration,
    QuotaAlterationResult,
    QuotaAlterOp,
    QuotaFilterComponent,
    QuotaMatch,
)
from odradek.client.common.admin.scram import (
    AlterScramCredentials,
    AlterScramCredentialsAnswer,
    AlterScramResult,
    DescribeScramCredentials,
    DescribeScramCredentialsAnswer,
    ScramCredentialInfo,
    ScramDeletion,
    ScramUpsertion,
    UserScramCredentials,
)
from odradek.client.common.admin.topics import (
    CreatableTopic,
    CreatePartitions,
    CreatePartitionsAnswer,
    CreatePartitionsTopic,
    CreateTopics,
    CreateTopicsAnswer,
    DeleteTopics,
    DeleteTopicsAnswer,
    DescribeTopics,
    DescribeTopicsAnswer,
    PartitionDescription,
    TopicDescription,
    TopicResult,
)
from odradek.client.errors import ErrorCode
from odradek.proto import admin_pb2 as apb
from odradek.proto import common_pb2


def _code(error: int) -> ErrorCode.ValueType:
    return ErrorCode.ValueType(error)


def _entries(configs: Iterable[apb.ConfigEntry]) -> tuple[ConfigEntry, ...]:
    return tuple(ConfigEntry(c.name, c.value) for c in configs)


def _entry_messages(configs: Iterable[ConfigEntry]) -> list[apb.ConfigEntry]:
    return [apb.ConfigEntry(name=c.name, value=c.value) for c in configs]


# ---- topics ----


def create_topics_of(m: apb.CreateTopicsRequest) -> CreateTopics:
    return CreateTopics(
        topics=tuple(
            CreatableTopic(
                name=t.name,
                num_partitions=t.num_partitions,
                replication_factor=t.replication_factor,
                configs=_entries(t.configs),
                assignments=tuple(tuple(a.replicas) for a in t.assignments),
            )
            for t in m.topics
        ),
        timeout_ms=m.timeout_ms,
        validate_only=m.validate_only,
    )


def create_topics_request(r: CreateTopics) -> apb.CreateTopicsRequest:
    return apb.CreateTopicsRequest(
        topics=[
            apb.CreatableTopic(
                name=t.name,
                num_partitions=t.num_partitions,
                replication_factor=t.replication_factor,
                configs=_entry_messages(t.configs),
                assignments=[apb.ReplicaList(replicas=a) for a in t.assignments],
            )
            for t in r.topics
        ],
        timeout_ms=r.timeout_ms,
        validate_only=r.validate_only,
    )


def topic_result_of(m: apb.TopicResult) -> TopicResult:
    return TopicResult(
        name=m.name,
        error=m.error,
        error_message=m.error_message,
        topic_id=m.topic_id,
        num_partitions=m.num_partitions,
        replication_factor=m.replication_factor,
    )


def topic_result_message(r: TopicResult) -> apb.TopicResult:
    return apb.TopicResult(
        name=r.name,
        error=_code(r.error),
        error_message=r.error_message,
        topic_id=r.topic_id,
        num_partitions=r.num_partitions,
        replication_factor=r.replication_factor,
    )


def create_topics_answer_of(m: apb.CreateTopicsResponse) -> CreateTopicsAnswer:
    return CreateTopicsAnswer(tuple(topic_result_of(t) for t in m.topics))


def create_topics_response(a: CreateTopicsAnswer) -> apb.CreateTopicsResponse:
    return apb.CreateTopicsResponse(topics=[topic_result_message(t) for t in a.topics])


def delete_topics_of(m: apb.DeleteTopicsRequest) -> DeleteTopics:
    return DeleteTopics(tuple(m.names), m.timeout_ms)


def delete_topics_request(r: DeleteTopics) -> apb.DeleteTopicsRequest:
    return apb.DeleteTopicsRequest(names=r.names, timeout_ms=r.timeout_ms)


def delete_topics_answer_of(m: apb.DeleteTopicsResponse) -> DeleteTopicsAnswer:
    return DeleteTopicsAnswer(tuple(topic_result_of(t) for t in m.topics))


def delete_topics_response(a: DeleteTopicsAnswer) -> apb.DeleteTopicsResponse:
    return apb.DeleteTopicsResponse(topics=[topic_result_message(t) for t in a.topics])


def create_partitions_of(m: apb.CreatePartitionsRequest) -> CreatePartitions:
    return CreatePartitions(
        topics=tuple(
            CreatePartitionsTopic(t.name, t.count, tuple(tuple(a.replicas) for a in t.assignments)) for t in m.topics
        ),
        timeout_ms=m.timeout_ms,
        validate_only=m.validate_only,
    )


def create_partitions_request(r: CreatePartitions) -> apb.CreatePartitionsRequest:
    return apb.CreatePartitionsRequest(
        topics=[
            apb.CreatePartitionsTopic(
                name=t.name, count=t.count, assignments=[apb.ReplicaList(replicas=a) for a in t.assignments]
            )
            for t in r.topics
        ],
        timeout_ms=r.timeout_ms,
        validate_only=r.validate_only,
    )


def create_partitions_answer_of(m: apb.CreatePartitionsResponse) -> CreatePartitionsAnswer:
    return CreatePartitionsAnswer(tuple(topic_result_of(t) for t in m.topics))


def create_partitions_response(a: CreatePartitionsAnswer) -> apb.CreatePartitionsResponse:
    return apb.CreatePartitionsResponse(topics=[topic_result_message(t) for t in a.topics])


def describe_topics_of(m: apb.DescribeTopicsRequest) -> DescribeTopics:
    return DescribeTopics(tuple(m.names), m.include_internal, m.include_offsets)


def describe_topics_request(r: DescribeTopics) -> apb.DescribeTopicsRequest:
    return apb.DescribeTopicsRequest(
        names=r.names, include_internal=r.include_internal, include_offsets=r.include_offsets
    )


def _partition_of(m: apb.PartitionDescription) -> PartitionDescription:
    return PartitionDescription(
        partition=m.partition,
        leader=m.leader,
        leader_epoch=m.leader_epoch,
        partition_epoch=m.partition_epoch,
        replicas=tuple(m.replicas),
        isr=tuple(m.isr),
        eligible_leader_replicas=tuple(m.eligible_leader_replicas),
        log_start_offset=m.log_start_offset,
        high_watermark=m.high_watermark,
        under_replicated=m.under_replicated,
        adding_replicas=tuple(m.adding_replicas),
        removing_replicas=tuple(m.removing_replicas),
        error=m.error,
        last_known_elr=tuple(m.last_known_elr),
        last_known_leader=m.last_known_leader,
    )


def _partition_message(p: PartitionDescription) -> apb.PartitionDescription:
    return apb.PartitionDescription(
        partition=p.partition,
        leader=p.leader,
        leader_epoch=p.leader_epoch,
        partition_epoch=p.partition_epoch,
        replicas=p.replicas,
        isr=p.isr,
        eligible_leader_replicas=p.eligible_leader_replicas,
        log_start_offset=p.log_start_offset,
        high_watermark=p.high_watermark,
        under_replicated=p.under_replicated,
        adding_replicas=p.adding_replicas,
        removing_replicas=p.removing_replicas,
        error=_code(p.error),
        last_known_elr=p.last_known_elr,
        last_known_leader=p.last_known_leader,
    )


def topic_description_of(m: apb.TopicDescription) -> TopicDescription:
    return TopicDescription(
        name=m.name,
        error=m.error,
        error_message=m.error_message,
        topic_id=m.topic_id,
        is_internal=m.is_internal,
        configs=_entries(m.configs),
        partitions=tuple(_partition_of(p) for p in m.partitions),
    )


def topic_description_message(t: TopicDescription) -> apb.TopicDescription:
    return apb.TopicDescription(
        name=t.name,
        error=_code(t.error),
        error_message=t.error_message,
        topic_id=t.topic_id,
        is_internal=t.is_internal,
        configs=_entry_messages(t.configs),
        partitions=[_partition_message(p) for p in t.partitions],
    )


def describe_topics_answer_of(m: apb.DescribeTopicsResponse) -> DescribeTopicsAnswer:
    return DescribeTopicsAnswer(tuple(topic_description_of(t) for t in m.topics))


def describe_topics_response(a: DescribeTopicsAnswer) -> apb.DescribeTopicsResponse:
    return apb.DescribeTopicsResponse(topics=[topic_description_message(t) for t in a.topics])


# ---- configs ----


def _described_of(configs: Iterable[apb.DescribedConfig]) -> tuple[DescribedConfig, ...]:
    return tuple(DescribedConfig(c.name, c.value, c.source, c.read_only, c.sensitive) for c in configs)


def _described_messages(configs: Iterable[DescribedConfig]) -> list[apb.DescribedConfig]:
    return [
        apb.DescribedConfig(
            name=c.name,
            value=c.value,
            source=apb.ConfigSource.ValueType(c.source),
            read_only=c.read_only,
            sensitive=c.sensitive,
        )
        for c in configs
    ]


def describe_configs_of(m: apb.DescribeConfigsRequest) -> DescribeConfigs:
    return DescribeConfigs(tuple(m.topics), tuple(m.config_names), m.cluster_defaults, tuple(m.groups))


def describe_configs_request(r: DescribeConfigs) -> apb.DescribeConfigsRequest:
    return apb.DescribeConfigsRequest(
        topics=r.topics, config_names=r.config_names, cluster_defaults=r.cluster_defaults, groups=r.groups
    )


def describe_configs_answer_of(m: apb.DescribeConfigsResponse) -> DescribeConfigsAnswer:
    return DescribeConfigsAnswer(
        error=m.error,
        node_id=m.node_id,
        topics=tuple(TopicConfigs(t.topic, t.error, t.error_message, _described_of(t.configs)) for t in m.topics),
        cluster_defaults=_described_of(m.cluster_defaults),
        cluster_defaults_error=m.cluster_defaults_error,
        groups=tuple(GroupConfigs(g.group, g.error, g.error_message, _described_of(g.configs)) for g in m.groups),
    )


def describe_configs_response(a: DescribeConfigsAnswer) -> apb.DescribeConfigsResponse:
    return apb.DescribeConfigsResponse(
        error=_code(a.error),
        node_id=a.node_id,
        topics=[
            apb.TopicConfigs(
                topic=t.topic,
                error=_code(t.error),
                error_message=t.error_message,
                configs=_described_messages(t.configs),
            )
            for t in a.topics
        ],
        cluster_defaults=_described_messages(a.cluster_defaults),
        cluster_defaults_error=_code(a.cluster_defaults_error),
        groups=[
            apb.GroupConfigs(
                group=g.group,
                error=_code(g.error),
                error_message=g.error_message,
                configs=_described_messages(g.configs),
            )
            for g in a.groups
        ],
    )


def _alterable_of(configs: Iterable[apb.AlterableConfig]) -> tuple[AlterableConfig, ...]:
    return tuple(AlterableConfig(c.name, c.op, c.value) for c in configs)


def _alterable_messages(configs: Iterable[AlterableConfig]) -> list[apb.AlterableConfig]:
    return [apb.AlterableConfig(name=c.name, op=apb.AlterConfigOp.ValueType(c.op), value=c.value) for c in configs]


def incremental_alter_configs_of(m: apb.IncrementalAlterConfigsRequest) -> IncrementalAlterConfigs:
    return IncrementalAlterConfigs(
        topics=tuple(AlterTopicConfigs(t.topic, _alterable_of(t.configs)) for t in m.topics),
        validate_only=m.validate_only,
        cluster_defaults=_alterable_of(m.cluster_defaults),
        groups=tuple(AlterGroupConfigs(g.group, _alterable_of(g.configs)) for g in m.groups),
    )


def incremental_alter_configs_request(r: IncrementalAlterConfigs) -> apb.IncrementalAlterConfigsRequest:
    return apb.IncrementalAlterConfigsRequest(
        topics=[apb.AlterTopicConfigs(topic=t.topic, configs=_alterable_messages(t.configs)) for t in r.topics],
        validate_only=r.validate_only,
        cluster_defaults=_alterable_messages(r.cluster_defaults),
        groups=[apb.AlterGroupConfigs(group=g.group, configs=_alterable_messages(g.configs)) for g in r.groups],
    )


def _alter_result_of(m: apb.AlterConfigsResult) -> AlterConfigsResult:
    return AlterConfigsResult(m.topic, m.error, m.error_message, _entries(m.configs))


def _alter_result_message(r: AlterConfigsResult) -> apb.AlterConfigsResult:
    return apb.AlterConfigsResult(
        topic=r.name, error=_code(r.error), error_message=r.error_message, configs=_entry_messages(r.configs)
    )


def incremental_alter_configs_answer_of(m: apb.IncrementalAlterConfigsResponse) -> IncrementalAlterConfigsAnswer:
    return IncrementalAlterConfigsAnswer(
        error=m.error,
        results=tuple(_alter_result_of(r) for r in m.results),
        cluster_defaults_result=(
            _alter_result_of(m.cluster_defaults_result) if m.HasField("cluster_defaults_result") else None
        ),
        group_results=tuple(_alter_result_of(r) for r in m.group_results),
    )


def incremental_alter_configs_response(a: IncrementalAlterConfigsAnswer) -> apb.IncrementalAlterConfigsResponse:
    return apb.IncrementalAlterConfigsResponse(
        error=_code(a.error),
        results=[_alter_result_message(r) for r in a.results],
        cluster_defaults_result=(
            None if a.cluster_defaults_result is None else _alter_result_message(a.cluster_defaults_result)
        ),
        group_results=[_alter_result_message(r) for r in a.group_results],
    )


# ---- elections and reassignments ----


def elect_leaders_of(m: apb.ElectLeadersRequest) -> ElectLeaders:
    partitions = tuple((p.topic, p.partition) for p in m.partitions)
    return ElectLeaders(m.election_type, partitions or None)


def elect_leaders_request(r: ElectLeaders) -> apb.ElectLeadersRequest:
    if r.partitions == ():
        raise ValueError("an election of no partition has no message: its empty list means every partition")
    return apb.ElectLeadersRequest(
        election_type=apb.ElectionType.ValueType(r.election_type),
        partitions=[apb.PartitionRef(topic=t, partition=p) for t, p in r.partitions or ()],
    )


def _election_results_of(results: Iterable[apb.ElectionResult]) -> tuple[ElectionResult, ...]:
    return tuple(ElectionResult(r.topic, r.partition, r.error, r.error_message, r.leader) for r in results)


def _election_result_messages(results: Iterable[ElectionResult]) -> list[apb.ElectionResult]:
    return [
        apb.ElectionResult(
            topic=r.topic, partition=r.partition, error=_code(r.error), error_message=r.error_message, leader=r.leader
        )
        for r in results
    ]


def elect_leaders_answer_of(m: apb.ElectLeadersResponse) -> ElectLeadersAnswer:
    return ElectLeadersAnswer(m.error, _election_results_of(m.results))


def elect_leaders_response(a: ElectLeadersAnswer) -> apb.ElectLeadersResponse:
    return apb.ElectLeadersResponse(error=_code(a.error), results=_election_result_messages(a.results))


def alter_reassignments_of(m: apb.AlterPartitionReassignmentsRequest) -> AlterReassignments:
    return AlterReassignments(
        tuple(Reassignment(r.topic, r.partition, tuple(r.replicas) or None) for r in m.reassignments)
    )


def alter_reassignments_request(r: AlterReassignments) -> apb.AlterPartitionReassignmentsRequest:
    return apb.AlterPartitionReassignmentsRequest(
        reassignments=[
            apb.Reassignment(topic=a.topic, partition=a.partition, replicas=a.replicas or ()) for a in r.reassignments
        ]
    )


def alter_reassignments_answer_of(m: apb.AlterPartitionReassignmentsResponse) -> AlterReassignmentsAnswer:
    return AlterReassignmentsAnswer(m.error, _election_results_of(m.results))


def alter_reassignments_response(a: AlterReassignmentsAnswer) -> apb.AlterPartitionReassignmentsResponse:
    return apb.AlterPartitionReassignmentsResponse(error=_code(a.error), results=_election_result_messages(a.results))


# ---- the cluster and the quorum ----


def describe_cluster_answer_of(m: apb.DescribeClusterResponse) -> DescribeClusterAnswer:
    return DescribeClusterAnswer(
        error=m.error,
        cluster_id=m.cluster_id,
        controller_id=m.controller_id,
        brokers=tuple(
            BrokerInfo(
                b.node_id,
                b.host,
                b.port,
                b.rack,
                b.fenced,
                b.epoch,
                b.in_controlled_shutdown,
                tuple((li.name, li.host, li.port) for li in b.listeners),
            )
            for b in m.brokers
        ),
        controllers=tuple(ControllerNode(c.node_id, c.host, c.port) for c in m.controllers),
    )


def describe_cluster_response(a: DescribeClusterAnswer) -> apb.DescribeClusterResponse:
    return apb.DescribeClusterResponse(
        error=_code(a.error),
        cluster_id=a.cluster_id,
        controller_id=a.controller_id,
        brokers=[
            apb.BrokerInfo(
                node_id=b.node_id,
                host=b.host,
                port=b.port,
                rack=b.rack,
                fenced=b.fenced,
                epoch=b.epoch,
                in_controlled_shutdown=b.in_controlled_shutdown,
                listeners=[common_pb2.Listener(name=n, host=h, port=p) for n, h, p in b.listeners],
            )
            for b in a.brokers
        ],
        controllers=[common_pb2.Node(node_id=c.node_id, host=c.host, port=c.port) for c in a.controllers],
    )


def _replica_states_of(states: Iterable[apb.ReplicaState]) -> tuple[ReplicaState, ...]:
    return tuple(
        ReplicaState(s.node_id, s.log_end_offset, s.last_fetch_timestamp_ms, s.last_caught_up_timestamp_ms)
        for s in states
    )


def _replica_state_messages(states: Iterable[ReplicaState]) -> list[apb.ReplicaState]:
    return [
        apb.ReplicaState(
            node_id=s.node_id,
            log_end_offset=s.log_end_offset,
            last_fetch_timestamp_ms=s.last_fetch_timestamp_ms,
            last_caught_up_timestamp_ms=s.last_caught_up_timestamp_ms,
        )
        for s in states
    ]


def describe_quorum_answer_of(m: apb.DescribeQuorumResponse) -> DescribeQuorumAnswer:
    return DescribeQuorumAnswer(
        error=m.error,
        leader_id=m.leader_id,
        leader_epoch=m.leader_epoch,
        high_watermark=m.high_watermark,
        voters=_replica_states_of(m.voters),
        observers=_replica_states_of(m.observers),
    )


def describe_quorum_response(a: DescribeQuorumAnswer) -> apb.DescribeQuorumResponse:
    return apb.DescribeQuorumResponse(
        error=_code(a.error),
        leader_id=a.leader_id,
        leader_epoch=a.leader_epoch,
        high_watermark=a.high_watermark,
        voters=_replica_state_messages(a.voters),
        observers=_replica_state_messages(a.observers),
    )


# ---- client quotas ----


def _component_of(c: apb.QuotaEntityComponent) -> EntityComponent:
    return EntityComponent(c.entity_type, None if c.is_default else c.name)


def _component_messages(entity: Iterable[EntityComponent]) -> list[apb.QuotaEntityComponent]:
    return [
        apb.QuotaEntityComponent(entity_type=c.entity_type, name=c.name or "", is_default=c.name is None)
        for c in entity
    ]


def alter_client_quotas_of(m: apb.AlterClientQuotasRequest) -> AlterClientQuotas:
    return AlterClientQuotas(
        tuple(
            QuotaAlteration(
                tuple(_component_of(c) for c in e.entity),
                tuple(QuotaAlterOp(o.key, o.value, o.remove) for o in e.ops),
            )
            for e in m.entries
        ),
        m.validate_only,
    )


def alter_client_quotas_request(r: AlterClientQuotas) -> apb.AlterClientQuotasRequest:
    return apb.AlterClientQuotasRequest(
        entries=[
            apb.QuotaAlteration(
                entity=_component_messages(e.entity),
                ops=[apb.QuotaAlterOp(key=o.key, value=o.value, remove=o.remove) for o in e.ops],
            )
            for e in r.entries
        ],
        validate_only=r.validate_only,
    )


def alter_client_quotas_answer_of(m: apb.AlterClientQuotasResponse) -> AlterClientQuotasAnswer:
    return AlterClientQuotasAnswer(m.error, tuple(QuotaAlterationResult(e.error, e.error_message) for e in m.entries))


def alter_client_quotas_response(
    a: AlterClientQuotasAnswer, request: apb.AlterClientQuotasRequest
) -> apb.AlterClientQuotasResponse:
    """Each entry's result names its entity as the request gave it."""
    asked = list(request.entries)
    return apb.AlterClientQuotasResponse(
        error=_code(a.error),
        entries=[
            apb.QuotaAlterationResult(
                entity=asked[i].entity if i < len(asked) else [], error=_code(e.error), error_message=e.error_message
            )
            for i, e in enumerate(a.entries)
        ],
    )


def describe_client_quotas_of(m: apb.DescribeClientQuotasRequest) -> DescribeClientQuotas:
    return DescribeClientQuotas(
        tuple(QuotaFilterComponent(c.entity_type, QuotaMatch.of(c.match_type), c.match) for c in m.components),
        m.strict,
    )


def describe_client_quotas_request(r: DescribeClientQuotas) -> apb.DescribeClientQuotasRequest:
    return apb.DescribeClientQuotasRequest(
        components=[
            apb.QuotaFilterComponent(
                entity_type=c.entity_type, match_type=apb.QuotaMatchType.ValueType(c.match_type), match=c.match
            )
            for c in r.components
        ],
        strict=r.strict,
    )


def describe_client_quotas_response(a: DescribeClientQuotasAnswer) -> apb.DescribeClientQuotasResponse:
    return apb.DescribeClientQuotasResponse(
        error=_code(a.error),
        error_message=a.error_message,
        entries=[
            apb.ClientQuotaEntry(
                entity=_component_messages(e.entity), values=[apb.QuotaValue(key=k, value=v) for k, v in e.values]
            )
            for e in a.entries
        ],
    )


def describe_client_quotas_answer_of(m: apb.DescribeClientQuotasResponse) -> DescribeClientQuotasAnswer:
    return DescribeClientQuotasAnswer(
        m.error,
        m.error_message,
        tuple(
            ClientQuotaEntry(tuple(_component_of(c) for c in e.entity), tuple((v.key, v.value) for v in e.values))
            for e in m.entries
        ),
    )


# ---- ACLs ----


def acl_binding_of(b: apb.AclBinding) -> AclBinding:
    """The binding a request carries; unknown enum numbers become UNKNOWN, which validation refuses."""
    return AclBinding(
        ResourceType.from_code(b.resource_type),
        b.resource_name,
        PatternType.from_code(b.pattern_type),
        b.principal,
        b.host,
        AclOperation.from_code(b.operation),
        AclPermissionType.from_code(b.permission_type),
    )


def acl_binding_message(b: AclBinding) -> apb.AclBinding:
    return apb.AclBinding(
        resource_type=apb.AclResourceType.ValueType(b.resource_type),
        resource_name=b.resource_name,
        pattern_type=apb.AclPatternType.ValueType(b.pattern_type),
        principal=b.principal,
        host=b.host,
        operation=apb.AclOperation.ValueType(b.operation),
        permission_type=apb.AclPermissionType.ValueType(b.permission),
    )


def acl_filter_of(f: apb.AclBindingFilter) -> AclBindingFilter:
    return AclBindingFilter(
        resource_type=ResourceType.from_code(f.resource_type) if f.HasField("resource_type") else None,
        resource_name=f.resource_name if f.HasField("resource_name") else None,
        pattern_type=PatternType.from_code(f.pattern_type) if f.HasField("pattern_type") else None,
        principal=f.principal if f.HasField("principal") else None,
        host=f.host if f.HasField("host") else None,
        operation=AclOperation.from_code(f.operation) if f.HasField("operation") else None,
        permission=AclPermissionType.from_code(f.permission_type) if f.HasField("permission_type") else None,
    )


def acl_filter_message(f: AclBindingFilter) -> apb.AclBindingFilter:
    out = apb.AclBindingFilter()
    if f.resource_type is not None:
        out.resource_type = apb.AclResourceType.ValueType(f.resource_type)
    if f.resource_name is not None:
        out.resource_name = f.resource_name
    if f.pattern_type is not None:
        out.pattern_type = apb.AclPatternType.ValueType(f.pattern_type)
    if f.principal is not None:
        out.principal = f.principal
    if f.host is not None:
        out.host = f.host
    if f.operation is not None:
        out.operation = apb.AclOperation.ValueType(f.operation)
    if f.permission is not None:
        out.permission_type = apb.AclPermissionType.ValueType(f.permission)
    return out


def create_acls_of(m: apb.CreateAclsRequest) -> CreateAcls:
    return CreateAcls(tuple(acl_binding_of(b) for b in m.creations))


def create_acls_request(r: CreateAcls) -> apb.CreateAclsRequest:
    return apb.CreateAclsRequest(creations=[acl_binding_message(b) for b in r.creations])


def create_acls_answer_of(m: apb.CreateAclsResponse) -> CreateAclsAnswer:
    return CreateAclsAnswer(m.error, tuple(AclCreationResult(r.error, r.error_message) for r in m.results))


def create_acls_response(a: CreateAclsAnswer) -> apb.CreateAclsResponse:
    return apb.CreateAclsResponse(
        error=_code(a.error),
        results=[apb.AclCreationResult(error=_code(r.error), error_message=r.error_message) for r in a.results],
    )


def describe_acls_of(m: apb.DescribeAclsRequest) -> DescribeAcls:
    return DescribeAcls(acl_filter_of(m.filter))


def describe_acls_request(r: DescribeAcls) -> apb.DescribeAclsRequest:
    return apb.DescribeAclsRequest(filter=acl_filter_message(r.filter))


def describe_acls_response(a: DescribeAclsAnswer) -> apb.DescribeAclsResponse:
    return apb.DescribeAclsResponse(
        error=_code(a.error), error_message=a.error_message, bindings=[acl_binding_message(b) for b in a.bindings]
    )


def describe_acls_answer_of(m: apb.DescribeAclsResponse) -> DescribeAclsAnswer:
    return DescribeAclsAnswer(m.error, m.error_message, tuple(acl_binding_of(b) for b in m.bindings))


def delete_acls_of(m: apb.DeleteAclsRequest) -> DeleteAcls:
    return DeleteAcls(tuple(acl_filter_of(f) for f in m.filters))


def delete_acls_request(r: DeleteAcls) -> apb.DeleteAclsRequest:
    return apb.DeleteAclsRequest(filters=[acl_filter_message(f) for f in r.filters])


def delete_acls_answer_of(m: apb.DeleteAclsResponse) -> DeleteAclsAnswer:
    return DeleteAclsAnswer(
        m.error,
        tuple(
            AclDeletionResult(r.error, r.error_message, tuple(acl_binding_of(b) for b in r.deleted)) for r in m.results
        ),
    )


def delete_acls_response(a: DeleteAclsAnswer) -> apb.DeleteAclsResponse:
    return apb.DeleteAclsResponse(
        error=_code(a.error),
        results=[
            apb.AclDeletionResult(
                error=_code(r.error),
                error_message=r.error_message,
                deleted=[acl_binding_message(b) for b in r.deleted],
            )
            for r in a.results
        ],
    )


# ---- SCRAM credentials ----


def alter_scram_credentials_of(m: apb.AlterUserScramCredentialsRequest) -> AlterScramCredentials:
    return AlterScramCredentials(
        deletions=tuple(ScramDeletion(d.user, d.mechanism) for d in m.deletions),
        upsertions=tuple(
            ScramUpsertion(u.user, u.mechanism, u.iterations, u.salt, u.salted_password) for u in m.upsertions
        ),
    )


def alter_scram_credentials_request(r: AlterScramCredentials) -> apb.AlterUserScramCredentialsRequest:
    return apb.AlterUserScramCredentialsRequest(
        deletions=[apb.ScramCredentialDeletion(user=d.user, mechanism=d.mechanism) for d in r.deletions],
        upsertions=[
            apb.ScramCredentialUpsertion(
                user=u.user,
                mechanism=u.mechanism,
                iterations=u.iterations,
                salt=u.salt,
                salted_password=u.salted_password,
            )
            for u in r.upsertions
        ],
    )


def alter_scram_credentials_answer_of(m: apb.AlterUserScramCredentialsResponse) -> AlterScramCredentialsAnswer:
    return AlterScramCredentialsAnswer(
        m.error, tuple(AlterScramResult(r.user, r.error, r.error_message) for r in m.results)
    )


def alter_scram_credentials_response(a: AlterScramCredentialsAnswer) -> apb.AlterUserScramCredentialsResponse:
    return apb.AlterUserScramCredentialsResponse(
        error=_code(a.error),
        results=[
            apb.AlterUserScramCredentialsResult(user=r.user, error=_code(r.error), error_message=r.error_message)
            for r in a.results
        ],
    )


def describe_scram_credentials_of(m: apb.DescribeUserScramCredentialsRequest) -> DescribeScramCredentials:
    return DescribeScramCredentials(tuple(m.users))


def describe_scram_credentials_request(r: DescribeScramCredentials) -> apb.DescribeUserScramCredentialsRequest:
    return apb.DescribeUserScramCredentialsRequest(users=r.users)


def describe_scram_credentials_response(
    a: DescribeScramCredentialsAnswer,
) -> apb.DescribeUserScramCredentialsResponse:
    return apb.DescribeUserScramCredentialsResponse(
        error=_code(a.error),
        error_message=a.error_message,
        results=[
            apb.UserScramCredentials(
                user=r.user,
                error=_code(r.error),
                error_message=r.error_message,
                credentials=[
                    apb.ScramCredentialInfo(mechanism=c.mechanism, iterations=c.iterations) for c in r.credentials
                ],
            )
            for r in a.results
        ],
    )


def describe_scram_credentials_answer_of(
    m: apb.DescribeUserScramCredentialsResponse,
) -> DescribeScramCredentialsAnswer:
    return DescribeScramCredentialsAnswer(
        m.error,
        m.error_message,
        tuple(
            UserScramCredentials(
                r.user,
                r.error,
                r.error_message,
                tuple(ScramCredentialInfo(c.mechanism, c.iterations) for c in r.credentials),
            )
            for r in m.results
        ),
    )

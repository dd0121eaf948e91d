"""gRPC services backed by the metadata quorum: ``Controller`` (on controllers) and ``Admin`` (on every node).

Any node answers admin reads from its own metadata image. Writes, and the quorum description, need the active
controller: a node that is not it forwards the request there (Kafka's request forwarding), so clients can
bootstrap from any node.
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

import grpc
from google.protobuf.message import Message

from odradek.client.common import clock
from odradek.client.common.access import OPEN, AccessControl
from odradek.client.common.acls import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from odradek.client.common.caller import caller_of
from odradek.client.common.group_configs import GroupConfigSettings, describe_group_configs
from odradek.client.common.metadata_image import MetadataImage, PartitionRegistration, listener_messages
from odradek.client.common.topic_rules import (
    INTERNAL_TOPICS,
    TopicDefault,
    dynamic_broker_keys,
    node_key,
)
from odradek.client.connection import ChannelPool
from odradek.client.errors import ErrorCode, OdradekError
from odradek.controller.acl_changes import create_acls, delete_acls, describe_acls
from odradek.controller.active import ActiveController, now_ms
from odradek.controller.client_quotas import (
    Alteration,
    Component,
    FilterComponent,
    QuotaOp,
    alter_client_quotas,
    components_of,
    describe_client_quotas,
)
from odradek.controller.config_changes import (
    ConfigOp,
    alter_cluster_defaults,
    alter_group_configs,
    alter_topic_configs,
)
from odradek.controller.elections import PartitionOutcome, elect_leaders, every_partition
from odradek.controller.isr import alter_partition, isr_items
from odradek.controller.metadata.state_machine import MetadataStateMachine
from odradek.controller.producer_ids import allocate_producer_ids
from odradek.controller.quorum.driver import RaftDriver
from odradek.controller.raft import PeerProgress, Role
from odradek.controller.reassignment import ReassignmentRequest, alter_reassignments
from odradek.controller.replica_logs import Answers
from odradek.controller.scram_changes import (
    Deletion,
    Upsertion,
    alter_user_scram_credentials,
    describe_user_scram_credentials,
)
from odradek.controller.topics import (
    DEFAULT_MAX_PARTITIONS_PER_BROKER,
    TopicOutcome,
    TopicRequest,
    create_partitions,
    create_topic,
    delete_topic,
    internal_topic_request,
)
from odradek.controller.unclean_recovery import Inspection, Recovery, operator_choice, operator_inspection
from odradek.proto import admin_pb2 as apb
from odradek.proto import admin_pb2_grpc, common_pb2, controller_pb2_grpc
from odradek.proto import controller_pb2 as cpb
from odradek.proto import metadata_pb2 as md

logger = logging.getLogger(__name__)
# ACL and credential changes, one line each, on the controller that commits them.
audit = logging.getLogger("odradek.audit")

R = TypeVar("R", bound=Message)

# Trailing metadata of an Admin write's answer: the metadata log offset that covers the write, the last one committed
# when it was answered (see AdminService._forward).
METADATA_OFFSET_KEY = "odradek-metadata-offset"
# How long a node that forwarded a write waits at most for its own image to apply it before answering.
READ_YOUR_WRITES_WAIT_S = 5.0


class ControllerService(controller_pb2_grpc.ControllerServicer):
    def __init__(self, controller: ActiveController) -> None:
        self.controller = controller

    def _leader(self) -> int:
        leader = self.controller.driver.leader.leader_id
        return -1 if leader is None else leader

    async def RegisterBroker(
        self,
        request: cpb.BrokerRegistrationRequest,
        context: grpc.aio.ServicerContext[cpb.BrokerRegistrationRequest, cpb.BrokerRegistrationResponse],
    ) -> cpb.BrokerRegistrationResponse:
        def decide(image: MetadataImage, next_offset: int):
            d = self.controller.lifecycle.register(
                image,
                broker_id=request.broker_id,
                cluster_id=request.cluster_id,
                incarnation_id=request.incarnation_id,
                host=request.listener.host,
                port=request.listener.port,
                rack=request.rack,
                log_dirs=list(request.log_dirs),
                next_offset=next_offset,
                now_ms=now_ms(),
                previous_broker_epoch=request.previous_broker_epoch,
                listeners=[(li.name, li.host, li.port) for li in request.listeners],
            )
            return (d.records if d.error == ErrorCode.NONE else []), d

        try:
            d = await self.controller.write(decide)
        except OdradekError as e:
            return cpb.BrokerRegistrationResponse(
                error=ErrorCode.ValueType(e.code), leader_id=self._leader(), error_message=str(e)
            )
        return cpb.BrokerRegistrationResponse(
            error=d.error, broker_epoch=d.broker_epoch, leader_id=self._leader(), error_message=d.message
        )

    async def BrokerHeartbeat(
        self,
        request: cpb.BrokerHeartbeatRequest,
        context: grpc.aio.ServicerContext[cpb.BrokerHeartbeatRequest, cpb.BrokerHeartbeatResponse],
    ) -> cpb.BrokerHeartbeatResponse:
        def decide(image: MetadataImage, next_offset: int):
            d = self.controller.lifecycle.heartbeat(
                image,
                next_offset=next_offset,
                broker_id=request.broker_id,
                broker_epoch=request.broker_epoch,
                metadata_offset=request.current_metadata_offset,
                want_fence=request.want_fence,
                want_shutdown=request.want_shutdown_now,
                now_ms=now_ms(),
                offline_replicas=[(r.topic_id, i) for r in request.offline_replicas for i in r.partitions],
            )
            return (d.records if d.error == ErrorCode.NONE else []), d

        try:
            d = await self.controller.write(decide)
        except OdradekError as e:
            return cpb.BrokerHeartbeatResponse(error=ErrorCode.ValueType(e.code), leader_id=self._leader())
        if d.records:  # the answer reflects the committed change
            d.is_fenced = self.controller.image.brokers[request.broker_id].fenced
        return cpb.BrokerHeartbeatResponse(
            error=d.error,
            is_caught_up=d.is_caught_up,
            is_fenced=d.is_fenced,
            should_shut_down=d.should_shut_down,
            leader_id=self._leader(),
        )

    async def AlterPartition(
        self,
        request: cpb.AlterPartitionRequest,
        context: grpc.aio.ServicerContext[cpb.AlterPartitionRequest, cpb.AlterPartitionResponse],
    ) -> cpb.AlterPartitionResponse:
        items = isr_items(request)

        def decide(image: MetadataImage, _next_offset: int):
            return alter_partition(
                image, request.broker_id, request.broker_epoch, items, self.controller.lifecycle.min_isr
            )

        try:
            out = await self.controller.write(decide)
        except OdradekError as e:
            return cpb.AlterPartitionResponse(error=ErrorCode.ValueType(e.code))
        return out.response()

    async def AllocateProducerIds(
        self,
        request: cpb.AllocateProducerIdsRequest,
        context: grpc.aio.ServicerContext[cpb.AllocateProducerIdsRequest, cpb.AllocateProducerIdsResponse],
    ) -> cpb.AllocateProducerIdsResponse:
        def decide(image: MetadataImage, _next_offset: int):
            return allocate_producer_ids(image, request.broker_id, request.broker_epoch)

        try:
            block = await self.controller.write(decide)
        except OdradekError as e:
            return cpb.AllocateProducerIdsResponse(error=ErrorCode.ValueType(e.code), producer_id_start=-1)
        return cpb.AllocateProducerIdsResponse(
            error=block.error, producer_id_start=block.start, producer_id_len=block.length
        )

    async def CreateInternalTopic(self, request, context):
        """A broker's first use of an internal topic (the offsets or transaction state topic): created with the
        internal configs."""
        if request.name not in INTERNAL_TOPICS:
            return cpb.CreateInternalTopicResponse(
                error=ErrorCode.INVALID_TOPIC_EXCEPTION, error_message=f"'{request.name}' is not an internal topic"
            )

        def decide(image: MetadataImage, _next_offset: int):
            if image.topic(request.name) is not None:
                return [], None
            topic_request = internal_topic_request(
                image,
                request.name,
                request.num_partitions,
                request.replication_factor,
                request.segment_bytes,
                request.min_insync_replicas,
            )
            out = create_topic(image, topic_request, internal=True)
            return out.records, out

        try:
            out = await self.controller.write(decide)
        except OdradekError as e:
            return cpb.CreateInternalTopicResponse(error=ErrorCode.ValueType(e.code), error_message=str(e))
        if out is None:
            return cpb.CreateInternalTopicResponse()
        return cpb.CreateInternalTopicResponse(error=out.error, error_message=out.message)


def under_replicated(p: PartitionRegistration) -> bool:
    """Some replica that is to stay out of sync. During a reassignment the replicas being added are still
    catching up by design; they are not counted (as Kafka's describe counts the replication factor)."""
    return any(r not in p.isr for r in p.replicas if r not in p.adding_replicas)


def _election_results(outcomes: list[PartitionOutcome]) -> list[apb.ElectionResult]:
    return [
        apb.ElectionResult(
            topic=o.topic, partition=o.partition, error=o.error, error_message=o.message, leader=o.leader
        )
        for o in outcomes
    ]


def topic_description(image: MetadataImage, name: str) -> apb.TopicDescription:
    topic = image.topic(name)
    if topic is None:
        return apb.TopicDescription(
            name=name, error=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, error_message=f"unknown topic '{name}'"
        )
    return apb.TopicDescription(
        name=name,
        topic_id=topic.topic_id,
        is_internal=name in INTERNAL_TOPICS,  # Kafka's own internal topics only, not every "__" name
        configs=[apb.ConfigEntry(name=k, value=v) for k, v in sorted(image.topic_configs(name).items())],
        partitions=[
            apb.PartitionDescription(
                partition=p.partition,
                leader=p.leader,
                leader_epoch=p.leader_epoch,
                partition_epoch=p.partition_epoch,
                replicas=p.replicas,
                isr=p.isr,
                eligible_leader_replicas=p.eligible_leader_replicas,
                log_start_offset=-1,
                high_watermark=-1,
                under_replicated=under_replicated(p),
                adding_replicas=p.adding_replicas,
                removing_replicas=p.removing_replicas,
                last_known_elr=p.last_known_elr,
                last_known_leader=p.last_known_leader,
            )
            for p in sorted(topic.partitions.values(), key=lambda p: p.partition)
        ],
    )


def describe_topic_configs(
    image: MetadataImage, name: str, defaults: Mapping[str, TopicDefault], names: Sequence[str] = ()
) -> apb.TopicConfigs:
    """Each topic config's effective value and its source: set on the topic, else the node's default (from its
    config file, or odradek's built-in), where no cluster-wide dynamic default overrides those. ``names`` picks
    configs (empty: all), each once; a name the topic has no config of is left out, as Kafka leaves it. Every one
    can be altered (IncrementalAlterConfigs); none is sensitive."""
    if image.topic(name) is None:
        return apb.TopicConfigs(
            topic=name, error=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, error_message=f"unknown topic '{name}'"
        )
    entries = topic_config_entries(image.topic_configs(name), image.cluster_defaults(), defaults, names)
    return apb.TopicConfigs(topic=name, configs=entries)


def topic_config_entries(
    own: Mapping[str, str], dynamic: Mapping[str, str], defaults: Mapping[str, TopicDefault], names: Sequence[str] = ()
) -> list[apb.DescribedConfig]:
    """The configs of a topic whose own configs are ``own``, under the cluster-wide dynamic defaults ``dynamic``
    (see :func:`describe_topic_configs`); also what CreateTopics answers for a topic it creates."""
    known = set(own) | set(defaults)
    entries = []
    for key in [n for n in dict.fromkeys(names) if n in known] if names else sorted(known):
        node = node_key(key)
        if key in own:
            value, source = own[key], apb.TOPIC_CONFIG
        elif node is not None and node in dynamic:
            value, source = dynamic[node], apb.DYNAMIC_DEFAULT_BROKER_CONFIG
        else:
            default = defaults[key]
            value = default.value
            source = apb.STATIC_BROKER_CONFIG if default.from_node_config else apb.DEFAULT_CONFIG
        entries.append(apb.DescribedConfig(name=key, value=value, source=source, read_only=False))
    return entries


async def _topic_result(
    controller: ActiveController,
    name: str,
    decide: Callable[[MetadataImage, int], tuple[list[md.MetadataRecord], TopicOutcome]],
) -> apb.TopicResult:
    """Commit one topic's decision; its outcome (or the write's failure) as the topic's result."""
    try:
        out = await controller.write(decide)
    except OdradekError as e:
        return apb.TopicResult(name=name, error=ErrorCode.ValueType(e.code), error_message=str(e))
    return apb.TopicResult(name=name, error=out.error, error_message=out.message, topic_id=out.topic_id)


def describe_cluster_defaults(image: MetadataImage, defaults: Mapping[str, TopicDefault]) -> list[apb.DescribedConfig]:
    """Each dynamic broker config: its cluster-wide dynamic value, else this node's file or built-in default."""
    dynamic = image.cluster_defaults()
    out = []
    for key, topic in sorted(dynamic_broker_keys().items()):
        if key in dynamic:
            value, source = dynamic[key], apb.DYNAMIC_DEFAULT_BROKER_CONFIG
        else:
            default = defaults[topic]
            value = default.value
            source = apb.STATIC_BROKER_CONFIG if default.from_node_config else apb.DEFAULT_CONFIG
        out.append(apb.DescribedConfig(name=key, value=value, source=source))
    return out


def _write(method: Callable[[AdminService, M, Any], Awaitable[R]]) -> Callable[[AdminService, M, Any], Awaitable[R]]:
    """An Admin write: answered by the active controller on this node, it names the offset of the image it answered
    from, which holds the write and everything committed before it (a write waits for its commit and apply)."""

    @functools.wraps(method)
    async def write(self: AdminService, request: M, context: Any) -> R:
        local = self._local_controller() is not None
        answer = await method(self, request, context)
        if local:
            _tell_offset(context, self.sm.image.offset)
        return answer

    return write


def _tell_offset(context: Any, offset: int) -> None:
    """Name ``offset`` in the answer's trailing metadata, for a node that forwarded the call. Callers in this
    process (the Kafka listener, tests) have no trailing metadata, nor need it: they read this node's image."""
    set_trailing_metadata = getattr(context, "set_trailing_metadata", None)
    if set_trailing_metadata is not None:
        set_trailing_metadata(((METADATA_OFFSET_KEY, str(offset)),))


def _metadata_offset(trailing: Iterable[tuple[str, str | bytes]] | None) -> int | None:
    """The offset an answer's trailing metadata names; None for an answer that names none (a read)."""
    for key, value in trailing or ():
        if key == METADATA_OFFSET_KEY:
            return int(value)
    return None


def _wait_budget(context: Any) -> float:
    """How long to wait for this node's image: READ_YOUR_WRITES_WAIT_S at most, and only half the caller's time
    left, so that the answer (the write is done) arrives before the caller's deadline."""
    time_remaining = getattr(context, "time_remaining", None)
    remaining = None if time_remaining is None else time_remaining()
    return READ_YOUR_WRITES_WAIT_S if remaining is None else min(READ_YOUR_WRITES_WAIT_S, remaining / 2)


class AdminService(admin_pb2_grpc.AdminServicer):
    """Admin on any node. ``controller`` is set on controllers; brokers forward writes to the active one."""

    def __init__(
        self,
        state_machine: MetadataStateMachine,
        driver: RaftDriver,
        voters: dict[int, str],
        defaults: dict[str, int],
        controller: ActiveController | None = None,
        *,
        topic_defaults: Mapping[str, TopicDefault],
        access: AccessControl = OPEN,
        group_settings: GroupConfigSettings | None = None,
    ) -> None:
        self.sm = state_machine
        # Authorization, checked on the node a client called (a forwarded request is checked again at the active
        # controller as the forwarding node, which must be allowed everything: a super user).
        self.access = access
        self.driver = driver
        self.voters = voters
        self.defaults = defaults
        self.controller = controller
        # Each topic config's default on this node (DescribeConfigs).
        self.topic_defaults = topic_defaults
        # This node's group.consumer.* settings: group configs default to them and keep to their bounds.
        self.group_settings = group_settings or GroupConfigSettings()
        self._pool = ChannelPool()

    async def close(self) -> None:
        await self._pool.close()

    def _leader_address(self) -> str | None:
        leader = self.sm.leader.leader_id
        return self.voters.get(leader) if leader is not None else None

    async def _forward(
        self, call: Callable[[admin_pb2_grpc.AdminAsyncStub], grpc.aio.UnaryUnaryCall[Any, R]], empty: R, context: Any
    ) -> R:
        """Send to the active controller; answer ``empty`` when none is known or reachable: it carries
        NOT_CONTROLLER (retriable), per item where its response has no top-level error (CreateTopics).

        A write's answer names the metadata offset that covers it: this node answers once its own image has applied
        that offset, so the caller's next read here sees the write, and names it in turn to a node that forwarded
        to this one."""
        address = self._leader_address()
        if address is None:
            return empty
        try:
            rpc = call(admin_pb2_grpc.AdminStub(self._pool.get(address)))
            answer = await rpc
            offset = _metadata_offset(await rpc.trailing_metadata())
        except grpc.aio.AioRpcError:
            return empty
        if offset is not None:
            await self._catch_up(offset, context)
            _tell_offset(context, offset)
        return answer

    async def _catch_up(self, offset: int, context: Any) -> None:
        """Wait, bounded, until this node's image has applied ``offset``; the write is done either way."""
        if not await self.sm.wait_for_offset(offset, _wait_budget(context)):
            logger.debug(
                "answering a write before this node's metadata reached offset %d (at %d)", offset, self.sm.image.offset
            )

    def _local_controller(self) -> ActiveController | None:
        c = self.controller
        return c if c is not None and self.driver.leader.role is Role.LEADER else None

    # -- authorization --------------------------------------------------------------------------------------

    def _cluster_denied(self, context: Any, operation: AclOperation, api: str) -> bool:
        access = self.access
        return access.enabled and not access.allows_cluster(caller_of(context), operation, api=api)

    def _topics_denied(
        self,
        context: Any,
        operation: AclOperation,
        names: Iterable[str],
        api: str,
        *,
        or_cluster: AclOperation | None = None,
    ) -> set[str]:
        """The topics among ``names`` the caller may not perform ``operation`` on; none when ``or_cluster`` is
        allowed on the cluster (as cluster Create allows creating any topic)."""
        access = self.access
        if not access.enabled:
            return set()
        caller = caller_of(context)
        if or_cluster is not None and access.allows_cluster(caller, or_cluster, api=api, audit_denial=False):
            return set()
        return access.denied(caller, operation, ResourceType.TOPIC, names, api=api)

    def _groups_denied(self, context: Any, operation: AclOperation, names: Iterable[str], api: str) -> set[str]:
        """The groups among ``names`` the caller may not perform ``operation`` on (their config resources)."""
        access = self.access
        if not access.enabled:
            return set()
        return access.denied(caller_of(context), operation, ResourceType.GROUP, names, api=api)

    async def _per_topic(
        self, request: M, context: Any, check: _TopicCheck, serve: Callable[[M, Any], Awaitable[R]]
    ) -> R:
        """Serve ``request`` for the topics the caller may perform ``check.operation`` on; the others answer
        TOPIC_AUTHORIZATION_FAILED in their place, in request order."""
        names = [check.name_of(item) for item in getattr(request, check.field)]
        denied = self._topics_denied(context, check.operation, names, check.api, or_cluster=check.or_cluster)
        if not denied:
            return await serve(request, context)
        allowed = _without(request, check.field, denied, check.name_of)
        left = getattr(allowed, check.field) or check.serve_without_topics
        answer = await serve(allowed, context) if left else check.response()
        results = getattr(answer, check.results)
        merged = _merged(names, denied, list(results), check.refusal)
        del results[:]
        results.extend(merged)
        return answer

    @_write
    async def CreateTopics(
        self,
        request: apb.CreateTopicsRequest,
        context: grpc.aio.ServicerContext[apb.CreateTopicsRequest, apb.CreateTopicsResponse],
    ) -> apb.CreateTopicsResponse:
        """Needs cluster Create, or Create on each topic."""
        return await self._per_topic(request, context, _CREATE_TOPICS, self._create_topics)

    @_write
    async def CreatePartitions(
        self,
        request: apb.CreatePartitionsRequest,
        context: grpc.aio.ServicerContext[apb.CreatePartitionsRequest, apb.CreatePartitionsResponse],
    ) -> apb.CreatePartitionsResponse:
        """Needs Alter on each topic."""
        return await self._per_topic(request, context, _CREATE_PARTITIONS, self._create_partitions)

    @_write
    async def DeleteTopics(
        self,
        request: apb.DeleteTopicsRequest,
        context: grpc.aio.ServicerContext[apb.DeleteTopicsRequest, apb.DeleteTopicsResponse],
    ) -> apb.DeleteTopicsResponse:
        """Needs Delete on each topic."""
        return await self._per_topic(request, context, _DELETE_TOPICS, self._delete_topics)

    async def DescribeTopics(
        self,
        request: apb.DescribeTopicsRequest,
        context: grpc.aio.ServicerContext[apb.DescribeTopicsRequest, apb.DescribeTopicsResponse],
    ) -> apb.DescribeTopicsResponse:
        """Needs Describe on each topic named; a listing of every topic leaves out those the caller may not
        describe."""
        access = self.access
        if not access.enabled or request.names:
            return await self._per_topic(request, context, _DESCRIBE_TOPICS, self._describe_topics)
        answer = await self._describe_topics(request, context)
        caller = caller_of(context)
        visible = [
            t
            for t in answer.topics
            if access.allows(caller, AclOperation.DESCRIBE, ResourceType.TOPIC, t.name, audit_denial=False)
        ]
        return apb.DescribeTopicsResponse(topics=visible)

    async def DescribeConfigs(
        self,
        request: apb.DescribeConfigsRequest,
        context: grpc.aio.ServicerContext[apb.DescribeConfigsRequest, apb.DescribeConfigsResponse],
    ) -> apb.DescribeConfigsResponse:
        """Needs DescribeConfigs on each topic, on each group for its configs, and on the cluster for the
        cluster-wide defaults. Group configs are answered from this node's image and settings."""
        if request.groups:
            groups = self._describe_group_configs(request, context)
            if not request.topics and not request.cluster_defaults:
                return apb.DescribeConfigsResponse(node_id=self.driver.node_id, groups=groups)
            rest = apb.DescribeConfigsRequest()
            rest.CopyFrom(request)
            del rest.groups[:]
            answer = await self.DescribeConfigs(rest, context)
            answer.groups.extend(groups)
            return answer
        if request.cluster_defaults and self._cluster_denied(context, AclOperation.DESCRIBE_CONFIGS, "DescribeConfigs"):
            if not request.topics:
                return apb.DescribeConfigsResponse(
                    error=_CLUSTER_DENIED, cluster_defaults_error=_CLUSTER_DENIED, node_id=self.driver.node_id
                )
            topics_only = apb.DescribeConfigsRequest(topics=request.topics, config_names=request.config_names)
            answer = await self._per_topic(topics_only, context, _DESCRIBE_CONFIGS, self._describe_configs)
            answer.cluster_defaults_error = _CLUSTER_DENIED
            return answer
        return await self._per_topic(request, context, _DESCRIBE_CONFIGS, self._describe_configs)

    def _describe_group_configs(self, request: apb.DescribeConfigsRequest, context: Any) -> list[apb.GroupConfigs]:
        denied = self._groups_denied(context, AclOperation.DESCRIBE_CONFIGS, request.groups, "DescribeConfigs")
        image = self.sm.image
        return [
            apb.GroupConfigs(group=g, error=_GROUP_DENIED, error_message=_DENIED_MESSAGE)
            if g in denied
            else describe_group_configs(image, g, self.group_settings, request.config_names)
            for g in request.groups
        ]

    @_write
    async def IncrementalAlterConfigs(
        self,
        request: apb.IncrementalAlterConfigsRequest,
        context: grpc.aio.ServicerContext[apb.IncrementalAlterConfigsRequest, apb.IncrementalAlterConfigsResponse],
    ) -> apb.IncrementalAlterConfigsResponse:
        """Needs AlterConfigs on each topic, on each group for its configs, and on the cluster for the cluster-wide
        defaults."""
        if not request.groups:
            return await self._alter_topic_configs(request, context)
        names = [g.group for g in request.groups]
        denied = self._groups_denied(context, AclOperation.ALTER_CONFIGS, names, "IncrementalAlterConfigs")
        rest = apb.IncrementalAlterConfigsRequest()
        rest.CopyFrom(request)
        del rest.groups[:]
        answer = (
            await self._alter_topic_configs(rest, context)
            if rest.topics or rest.cluster_defaults
            else apb.IncrementalAlterConfigsResponse()
        )
        allowed = [g for g in request.groups if g.group not in denied]
        results = (
            await self._incremental_alter_group_configs(allowed, request.validate_only, context) if allowed else []
        )
        answer.group_results.extend(_merged(names, denied, results, _group_alter_refusal))
        return answer

    async def _incremental_alter_group_configs(
        self, groups: Sequence[apb.AlterGroupConfigs], validate_only: bool, context: Any
    ) -> list[apb.AlterConfigsResult]:
        """Each group's changes, decided by the active controller against its own group.consumer.* bounds."""
        controller = self._local_controller()
        if controller is None:
            forwarded = await self._forward(
                lambda s: s.IncrementalAlterConfigs(
                    apb.IncrementalAlterConfigsRequest(groups=groups, validate_only=validate_only), timeout=30
                ),
                apb.IncrementalAlterConfigsResponse(error=ErrorCode.NOT_CONTROLLER),
                context,
            )
            if forwarded.error != ErrorCode.NONE:
                return [apb.AlterConfigsResult(topic=g.group, error=forwarded.error) for g in groups]
            return list(forwarded.group_results)
        results = []
        for g in groups:
            ops = [ConfigOp(c.name, _OPS[c.op], c.value) for c in g.configs]

            def decide(image: MetadataImage, _offset: int, group: str = g.group, ops: list[ConfigOp] = ops):
                out = alter_group_configs(image, group, ops, self.group_settings)
                return ([] if validate_only or out.error != ErrorCode.NONE else out.records), out

            try:
                out = await controller.write(decide)
                configs = [apb.ConfigEntry(name=k, value=v) for k, v in out.configs.items()]
                results.append(
                    apb.AlterConfigsResult(topic=g.group, error=out.error, error_message=out.message, configs=configs)
                )
            except OdradekError as e:
                results.append(
                    apb.AlterConfigsResult(topic=g.group, error=ErrorCode.ValueType(e.code), error_message=str(e))
                )
        return results

    async def _alter_topic_configs(
        self, request: apb.IncrementalAlterConfigsRequest, context: Any
    ) -> apb.IncrementalAlterConfigsResponse:
        names = [t.topic for t in request.topics]
        denied = self._topics_denied(context, AclOperation.ALTER_CONFIGS, names, "IncrementalAlterConfigs")
        cluster_denied = bool(request.cluster_defaults) and self._cluster_denied(
            context, AclOperation.ALTER_CONFIGS, "IncrementalAlterConfigs"
        )
        if not denied and not cluster_denied:
            return await self._incremental_alter_configs(request, context)
        allowed = _without(request, "topics", denied, lambda t: t.topic)
        if cluster_denied:
            del allowed.cluster_defaults[:]
        answer = (
            await self._incremental_alter_configs(allowed, context)
            if allowed.topics or allowed.cluster_defaults
            else apb.IncrementalAlterConfigsResponse()
        )
        merged = _merged(names, denied, answer.results, _alter_refusal)
        del answer.results[:]
        answer.results.extend(merged)
        if cluster_denied:
            answer.cluster_defaults_result.CopyFrom(
                apb.AlterConfigsResult(error=_CLUSTER_DENIED, error_message=_DENIED_MESSAGE)
            )
        return answer

    async def DescribeCluster(
        self,
        request: apb.DescribeClusterRequest,
        context: grpc.aio.ServicerContext[apb.DescribeClusterRequest, apb.DescribeClusterResponse],
    ) -> apb.DescribeClusterResponse:
        image = self.sm.image
        leader = self.sm.leader.leader_id
        return apb.DescribeClusterResponse(
            cluster_id=self.sm.cluster_id,
            controller_id=-1 if leader is None else leader,
            brokers=[
                apb.BrokerInfo(
                    node_id=b.broker_id,
                    host=b.host,
                    port=b.port,
                    rack=b.rack,
                    fenced=b.fenced,
                    epoch=b.epoch,
                    in_controlled_shutdown=b.in_controlled_shutdown,
                    listeners=listener_messages(b.listeners),
                )
                for b in sorted(image.brokers.values(), key=lambda b: b.broker_id)
            ],
            controllers=[
                common_pb2.Node(node_id=i, host=a.rpartition(":")[0], port=int(a.rpartition(":")[2]))
                for i, a in sorted(self.voters.items())
            ],
        )

    async def DescribeQuorum(
        self,
        request: apb.DescribeQuorumRequest,
        context: grpc.aio.ServicerContext[apb.DescribeQuorumRequest, apb.DescribeQuorumResponse],
    ) -> apb.DescribeQuorumResponse:
        if self._cluster_denied(context, AclOperation.DESCRIBE, "DescribeQuorum"):
            return apb.DescribeQuorumResponse(error=_CLUSTER_DENIED)
        if self.driver.leader.role is not Role.LEADER:
            return await self._forward(
                lambda s: s.DescribeQuorum(request, timeout=5),
                apb.DescribeQuorumResponse(error=ErrorCode.NOT_CONTROLLER),
                context,
            )
        node = self.driver.node
        if node is None:  # a node serves Admin only once its Raft driver has started
            raise RuntimeError("the Raft driver is not started")
        tick_ms = self.driver.tick_ms
        wall = clock.wall_ms()

        def at(tick: int | None) -> int:
            """A tick of the Raft core as wall-clock ms; -1 for never, Kafka's unknown."""
            return -1 if tick is None else wall - max(0, (node.now - tick) * tick_ms)

        def state(r: PeerProgress) -> apb.ReplicaState:
            fetched, caught_up = at(r.last_fetch_tick), at(r.last_caught_up_tick)
            return apb.ReplicaState(
                node_id=r.node_id,
                log_end_offset=r.end_offset,
                last_fetch_timestamp_ms=fetched,
                last_caught_up_timestamp_ms=caught_up,
            )

        replicas = node.peer_progress()
        # The leader fetched and caught up now, as Kafka reports it.
        now = node.now
        leader = PeerProgress(node.node_id, True, node.log.end_offset, last_fetch_tick=now, last_caught_up_tick=now)
        voters = [state(leader)] + [state(r) for r in replicas if r.voter]
        observers = [state(r) for r in replicas if not r.voter]
        return apb.DescribeQuorumResponse(
            leader_id=node.node_id,
            leader_epoch=node.epoch,
            high_watermark=node.high_watermark,
            voters=voters,
            observers=observers,
        )

    def _topic_request(self, t: apb.CreatableTopic) -> TopicRequest | apb.TopicResult:
        """A creation as the controller decides it. -1 (as in Kafka) asks for the cluster default; 0 and other
        negatives are refused by create_topic. With an explicit assignment both counts must be -1, as Kafka
        requires."""
        if t.assignments:
            if t.num_partitions != -1 or t.replication_factor != -1:
                return apb.TopicResult(
                    name=t.name,
                    error=ErrorCode.INVALID_REQUEST,
                    error_message="Both numPartitions or replicationFactor and replicasAssignments were set. "
                    "Both cannot be used at the same time.",
                )
            assignments = tuple(tuple(a.replicas) for a in t.assignments)
            return TopicRequest(
                name=t.name,
                partitions=len(assignments),
                replication_factor=len(assignments[0]),
                configs={c.name: c.value for c in t.configs},
                assignments=assignments,
            )
        return TopicRequest(
            name=t.name,
            partitions=t.num_partitions if t.num_partitions != -1 else self.defaults["num.partitions"],
            replication_factor=(
                t.replication_factor if t.replication_factor != -1 else self.defaults["default.replication.factor"]
            ),
            configs={c.name: c.value for c in t.configs},
        )

    async def _create_topics(
        self,
        request: apb.CreateTopicsRequest,
        context: grpc.aio.ServicerContext[apb.CreateTopicsRequest, apb.CreateTopicsResponse],
    ) -> apb.CreateTopicsResponse:
        controller = self._local_controller()
        if controller is None:
            return await self._forward(
                lambda s: s.CreateTopics(request, timeout=request.timeout_ms / 1000 or 30),
                apb.CreateTopicsResponse(
                    topics=[apb.TopicResult(name=t.name, error=ErrorCode.NOT_CONTROLLER) for t in request.topics]
                ),
                context,
            )
        results = []
        limit = self.defaults.get("max.partitions.per.broker", DEFAULT_MAX_PARTITIONS_PER_BROKER)
        for t in request.topics:
            topic_request = self._topic_request(t)
            if isinstance(topic_request, apb.TopicResult):
                results.append(topic_request)
                continue

            def decide(image: MetadataImage, _offset: int, topic_request=topic_request):
                out = create_topic(image, topic_request, max_partitions_per_broker=limit)
                return ([] if request.validate_only else out.records), out

            result = await _topic_result(controller, t.name, decide)
            if result.error == ErrorCode.NONE:  # created, or would be (validate_only): with what it has
                result.num_partitions = topic_request.partitions
                result.replication_factor = topic_request.replication_factor
            results.append(result)
        return apb.CreateTopicsResponse(topics=results)

    async def _create_partitions(
        self,
        request: apb.CreatePartitionsRequest,
        context: grpc.aio.ServicerContext[apb.CreatePartitionsRequest, apb.CreatePartitionsResponse],
    ) -> apb.CreatePartitionsResponse:
        controller = self._local_controller()
        if controller is None:
            return await self._forward(
                lambda s: s.CreatePartitions(request, timeout=request.timeout_ms / 1000 or 30),
                apb.CreatePartitionsResponse(
                    topics=[apb.TopicResult(name=t.name, error=ErrorCode.NOT_CONTROLLER) for t in request.topics]
                ),
                context,
            )
        limit = self.defaults.get("max.partitions.per.broker", DEFAULT_MAX_PARTITIONS_PER_BROKER)
        results = []
        for t in request.topics:

            def decide(image: MetadataImage, _offset: int, t=t):
                assignments = [tuple(a.replicas) for a in t.assignments]
                out = create_partitions(image, t.name, t.count, limit, assignments)
                return ([] if request.validate_only else out.records), out

            results.append(await _topic_result(controller, t.name, decide))
        return apb.CreatePartitionsResponse(topics=results)

    async def _delete_topics(
        self,
        request: apb.DeleteTopicsRequest,
        context: grpc.aio.ServicerContext[apb.DeleteTopicsRequest, apb.DeleteTopicsResponse],
    ) -> apb.DeleteTopicsResponse:
        controller = self._local_controller()
        if controller is None:
            return await self._forward(
                lambda s: s.DeleteTopics(request, timeout=request.timeout_ms / 1000 or 30),
                apb.DeleteTopicsResponse(
                    topics=[apb.TopicResult(name=n, error=ErrorCode.NOT_CONTROLLER) for n in request.names]
                ),
                context,
            )
        results = []
        for name in request.names:

            def decide(image: MetadataImage, _offset: int, name=name):
                out = delete_topic(image, name)
                return out.records, out

            results.append(await _topic_result(controller, name, decide))
        return apb.DeleteTopicsResponse(topics=results)

    async def _describe_topics(
        self,
        request: apb.DescribeTopicsRequest,
        context: grpc.aio.ServicerContext[apb.DescribeTopicsRequest, apb.DescribeTopicsResponse],
    ) -> apb.DescribeTopicsResponse:
        image = self.sm.image
        names = list(request.names) or sorted(
            n for n in image.topic_ids if request.include_internal or n not in INTERNAL_TOPICS
        )
        local = self._local_controller()
        if request.names and local is not None and any(image.topic(n) is None for n in names):
            # A just-elected leader applies what its predecessor committed only once its own epoch's first entry
            # commits: wait for that (as writes do) rather than call a committed topic unknown.
            with contextlib.suppress(OdradekError):
                await local.wait_active(5.0)
            image = self.sm.image
        elif request.names and local is None and any(image.topic(n) is None for n in names):
            # A topic unknown here may be committed but not yet applied on this node: the active controller has
            # every committed write, so a client can describe a topic right after creating it.
            address = self._leader_address()
            if address is not None:
                try:
                    return await admin_pb2_grpc.AdminStub(self._pool.get(address)).DescribeTopics(request, timeout=5)
                except grpc.aio.AioRpcError:
                    pass  # answer from this node's image
        return apb.DescribeTopicsResponse(topics=[topic_description(image, n) for n in names])

    @_write
    async def ElectLeaders(
        self,
        request: apb.ElectLeadersRequest,
        context: grpc.aio.ServicerContext[apb.ElectLeadersRequest, apb.ElectLeadersResponse],
    ) -> apb.ElectLeadersResponse:
        if self._cluster_denied(context, AclOperation.ALTER, "ElectLeaders"):
            return apb.ElectLeadersResponse(error=_CLUSTER_DENIED)
        controller = self._local_controller()
        if controller is None:
            return await self._forward(
                lambda s: s.ElectLeaders(request, timeout=30),
                apb.ElectLeadersResponse(error=ErrorCode.NOT_CONTROLLER),
                context,
            )
        if request.election_type not in (apb.PREFERRED, apb.UNCLEAN):
            return apb.ElectLeadersResponse(error=ErrorCode.INVALID_REQUEST)
        partitions = [(r.topic, r.partition) for r in request.partitions] or None
        unclean = request.election_type == apb.UNCLEAN
        min_isr = controller.lifecycle.min_isr
        recovered: list[Recovery] = []
        try:
            inspections, answers = await self._inspect_for_unclean(controller, partitions) if unclean else ([], {})

            def decide(image: MetadataImage, _offset: int) -> tuple[list[md.MetadataRecord], list[PartitionOutcome]]:
                inspected = operator_choice(image, inspections, answers, min_isr, recovered)
                return elect_leaders(image, partitions, unclean=unclean, min_isr=min_isr, inspected=inspected)

            outcomes = await controller.write(decide)
        except OdradekError as e:
            return apb.ElectLeadersResponse(error=ErrorCode.ValueType(e.code))
        for r in recovered:
            logger.warning("operator's %s", r.describe())
        return apb.ElectLeadersResponse(results=_election_results(outcomes))

    @staticmethod
    async def _inspect_for_unclean(
        controller: ActiveController, partitions: list[tuple[str, int]] | None
    ) -> tuple[list[Inspection], Answers]:
        """The logs of the leaderless partitions' active replicas, for an unclean election to pick the best."""
        image = controller.image
        inspections = []
        for topic, index in partitions if partitions is not None else every_partition(image):
            p = image.partition(topic, index)
            inspection = None if p is None else operator_inspection(image, topic, p)
            if inspection is not None:
                inspections.append(inspection)
        if not inspections:
            return [], {}
        await controller.wait_active(5.0)
        return inspections, await controller.inspector.inspect(image, inspections)

    @_write
    async def AlterPartitionReassignments(
        self,
        request: apb.AlterPartitionReassignmentsRequest,
        context: grpc.aio.ServicerContext[
            apb.AlterPartitionReassignmentsRequest, apb.AlterPartitionReassignmentsResponse
        ],
    ) -> apb.AlterPartitionReassignmentsResponse:
        if self._cluster_denied(context, AclOperation.ALTER, "AlterPartitionReassignments"):
            return apb.AlterPartitionReassignmentsResponse(error=_CLUSTER_DENIED)
        controller = self._local_controller()
        if controller is None:
            return await self._forward(
                lambda s: s.AlterPartitionReassignments(request, timeout=30),
                apb.AlterPartitionReassignmentsResponse(error=ErrorCode.NOT_CONTROLLER),
                context,
            )
        # On the wire an empty replica list cancels (proto3 cannot tell it from an absent one).
        requests = [ReassignmentRequest(r.topic, r.partition, tuple(r.replicas) or None) for r in request.reassignments]
        unclean_allowed = controller.lifecycle.unclean_allowed
        try:
            outcomes = await controller.write(
                lambda image, _offset: alter_reassignments(image, requests, unclean_allowed)
            )
        except OdradekError as e:
            return apb.AlterPartitionReassignmentsResponse(error=ErrorCode.ValueType(e.code))
        return apb.AlterPartitionReassignmentsResponse(results=_election_results(outcomes))

    async def _describe_configs(
        self,
        request: apb.DescribeConfigsRequest,
        context: grpc.aio.ServicerContext[apb.DescribeConfigsRequest, apb.DescribeConfigsResponse],
    ) -> apb.DescribeConfigsResponse:
        image = self.sm.image
        names = list(request.topics)
        if self._local_controller() is None and any(image.topic(n) is None for n in names):
            # As DescribeTopics: a topic created a moment ago may not be applied here yet; the active controller
            # has every committed write (its node config then gives the defaults, and node_id says so).
            address = self._leader_address()
            if address is not None:
                try:
                    stub = admin_pb2_grpc.AdminStub(self._pool.get(address))
                    return await stub.DescribeConfigs(request, timeout=5)
                except grpc.aio.AioRpcError:
                    pass  # answer from this node's image
        return apb.DescribeConfigsResponse(
            node_id=self.driver.node_id,
            topics=[describe_topic_configs(image, n, self.topic_defaults, request.config_names) for n in names],
            cluster_defaults=describe_cluster_defaults(image, self.topic_defaults) if request.cluster_defaults else [],
        )

    async def _incremental_alter_configs(
        self,
        request: apb.IncrementalAlterConfigsRequest,
        context: grpc.aio.ServicerContext[apb.IncrementalAlterConfigsRequest, apb.IncrementalAlterConfigsResponse],
    ) -> apb.IncrementalAlterConfigsResponse:
        controller = self._local_controller()
        if controller is None:
            return await self._forward(
                lambda s: s.IncrementalAlterConfigs(request, timeout=30),
                apb.IncrementalAlterConfigsResponse(error=ErrorCode.NOT_CONTROLLER),
                context,
            )

        def default_of(name: str) -> str | None:
            default = self.topic_defaults.get(name)
            return None if default is None else default.value

        results = []
        cluster_result = None
        if request.cluster_defaults:
            ops = [ConfigOp(c.name, _OPS[c.op], c.value) for c in request.cluster_defaults]
            keys = dynamic_broker_keys()

            def static_default_of(name: str) -> str | None:
                return default_of(keys[name]) if name in keys else None

            def decide_defaults(image: MetadataImage, _offset: int):
                out = alter_cluster_defaults(image, ops, keys, static_default_of)
                return ([] if request.validate_only or out.error != ErrorCode.NONE else out.records), out

            try:
                out = await controller.write(decide_defaults)
                configs = [apb.ConfigEntry(name=k, value=v) for k, v in out.configs.items()]
                cluster_result = apb.AlterConfigsResult(error=out.error, error_message=out.message, configs=configs)
            except OdradekError as e:
                cluster_result = apb.AlterConfigsResult(error=ErrorCode.ValueType(e.code), error_message=str(e))
        for t in request.topics:
            ops = [ConfigOp(c.name, _OPS[c.op], c.value) for c in t.configs]

            def decide(image: MetadataImage, _offset: int, topic: str = t.topic, ops: list[ConfigOp] = ops):
                out = alter_topic_configs(image, topic, ops, default_of)
                return ([] if request.validate_only or out.error != ErrorCode.NONE else out.records), out

            try:
                out = await controller.write(decide)
                configs = [apb.ConfigEntry(name=k, value=v) for k, v in out.configs.items()]
                results.append(
                    apb.AlterConfigsResult(topic=t.topic, error=out.error, error_message=out.message, configs=configs)
                )
            except OdradekError as e:
                code = ErrorCode.ValueType(e.code)
                results.append(apb.AlterConfigsResult(topic=t.topic, error=code, error_message=str(e)))
        return apb.IncrementalAlterConfigsResponse(results=results, cluster_defaults_result=cluster_result)

    @_write
    async def AlterClientQuotas(
        self,
        request: apb.AlterClientQuotasRequest,
        context: grpc.aio.ServicerContext[apb.AlterClientQuotasRequest, apb.AlterClientQuotasResponse],
    ) -> apb.AlterClientQuotasResponse:
        if self._cluster_denied(context, AclOperation.ALTER_CONFIGS, "AlterClientQuotas"):
            return apb.AlterClientQuotasResponse(error=_CLUSTER_DENIED)
        controller = self._local_controller()
        if controller is None:
            return await self._forward(
                lambda s: s.AlterClientQuotas(request, timeout=30),
                apb.AlterClientQuotasResponse(error=ErrorCode.NOT_CONTROLLER),
                context,
            )
        alterations = [
            Alteration(
                [_component(c) for c in entry.entity],
                [QuotaOp(op.key, op.value, op.remove) for op in entry.ops],
            )
            for entry in request.entries
        ]

        def decide(image: MetadataImage, _offset: int):
            results = alter_client_quotas(image, alterations)
            records = [] if request.validate_only else [r for out in results for r in out.records]
            return records, results

        try:
            results = await controller.write(decide)
        except OdradekError as e:
            return apb.AlterClientQuotasResponse(error=ErrorCode.ValueType(e.code))
        return apb.AlterClientQuotasResponse(
            entries=[
                apb.QuotaAlterationResult(entity=entry.entity, error=out.error, error_message=out.message)
                for entry, out in zip(request.entries, results)
            ]
        )

    async def DescribeClientQuotas(
        self,
        request: apb.DescribeClientQuotasRequest,
        context: grpc.aio.ServicerContext[apb.DescribeClientQuotasRequest, apb.DescribeClientQuotasResponse],
    ) -> apb.DescribeClientQuotasResponse:
        """From this node's own image: what this node's brokers enforce."""
        if self._cluster_denied(context, AclOperation.DESCRIBE_CONFIGS, "DescribeClientQuotas"):
            return apb.DescribeClientQuotasResponse(error=_CLUSTER_DENIED, error_message=_DENIED_MESSAGE)
        filters = [
            FilterComponent(c.entity_type, _MATCHES.get(c.match_type, "exact"), c.match) for c in request.components
        ]
        try:
            found = describe_client_quotas(self.sm.image.client_quotas, filters, request.strict)
        except OdradekError as e:
            return apb.DescribeClientQuotasResponse(error=ErrorCode.ValueType(e.code), error_message=str(e))
        return apb.DescribeClientQuotasResponse(
            entries=[
                apb.ClientQuotaEntry(
                    entity=[
                        apb.QuotaEntityComponent(
                            entity_type=c.entity_type, name=c.name or "", is_default=c.name is None
                        )
                        for c in components_of(entity)
                    ],
                    values=[apb.QuotaValue(key=k, value=v) for k, v in sorted(values.items())],
                )
                for entity, values in found
            ]
        )

    @_write
    async def CreateAcls(
        self,
        request: apb.CreateAclsRequest,
        context: grpc.aio.ServicerContext[apb.CreateAclsRequest, apb.CreateAclsResponse],
    ) -> apb.CreateAclsResponse:
        if self._cluster_denied(context, AclOperation.ALTER, "CreateAcls"):
            return apb.CreateAclsResponse(error=_CLUSTER_DENIED)
        controller = self._local_controller()
        if controller is None:
            return await self._forward(
                lambda s: s.CreateAcls(request, timeout=30),
                apb.CreateAclsResponse(error=ErrorCode.NOT_CONTROLLER),
                context,
            )
        bindings = [acl_binding_of(b) for b in request.creations]

        def decide(image: MetadataImage, _offset: int):
            results = create_acls(image, bindings)
            return [r for out in results for r in out.records], results

        try:
            results = await controller.write(decide)
        except OdradekError as e:
            return apb.CreateAclsResponse(error=ErrorCode.ValueType(e.code))
        for binding, out in zip(bindings, results):
            if out.records:
                audit.info("ACL created: %s", describe_binding(binding))
        return apb.CreateAclsResponse(
            results=[apb.AclCreationResult(error=out.error, error_message=out.message) for out in results]
        )

    async def DescribeAcls(
        self,
        request: apb.DescribeAclsRequest,
        context: grpc.aio.ServicerContext[apb.DescribeAclsRequest, apb.DescribeAclsResponse],
    ) -> apb.DescribeAclsResponse:
        """From this node's own image: the bindings this node's authorizer holds."""
        if self._cluster_denied(context, AclOperation.DESCRIBE, "DescribeAcls"):
            return apb.DescribeAclsResponse(error=_CLUSTER_DENIED, error_message=_DENIED_MESSAGE)
        try:
            found = describe_acls(self.sm.image, acl_filter_of(request.filter))
        except OdradekError as e:
            return apb.DescribeAclsResponse(error=ErrorCode.ValueType(e.code), error_message=str(e))
        return apb.DescribeAclsResponse(bindings=[acl_binding_message(b) for b in found])

    @_write
    async def DeleteAcls(
        self,
        request: apb.DeleteAclsRequest,
        context: grpc.aio.ServicerContext[apb.DeleteAclsRequest, apb.DeleteAclsResponse],
    ) -> apb.DeleteAclsResponse:
        if self._cluster_denied(context, AclOperation.ALTER, "DeleteAcls"):
            return apb.DeleteAclsResponse(error=_CLUSTER_DENIED)
        controller = self._local_controller()
        if controller is None:
            return await self._forward(
                lambda s: s.DeleteAcls(request, timeout=30),
                apb.DeleteAclsResponse(error=ErrorCode.NOT_CONTROLLER),
                context,
            )
        filters = [acl_filter_of(f) for f in request.filters]

        def decide(image: MetadataImage, _offset: int):
            results = delete_acls(image, filters)
            return [r for out in results for r in out.records], results

        try:
            results = await controller.write(decide)
        except OdradekError as e:
            return apb.DeleteAclsResponse(error=ErrorCode.ValueType(e.code))
        for out in results:
            for binding in out.deleted:
                audit.info("ACL deleted: %s", describe_binding(binding))
        return apb.DeleteAclsResponse(
            results=[
                apb.AclDeletionResult(
                    error=out.error,
                    error_message=out.message,
                    deleted=[acl_binding_message(b) for b in out.deleted],
                )
                for out in results
            ]
        )

    @_write
    async def AlterUserScramCredentials(
        self,
        request: apb.AlterUserScramCredentialsRequest,
        context: grpc.aio.ServicerContext[apb.AlterUserScramCredentialsRequest, apb.AlterUserScramCredentialsResponse],
    ) -> apb.AlterUserScramCredentialsResponse:
        if self._cluster_denied(context, AclOperation.ALTER, "AlterUserScramCredentials"):
            return apb.AlterUserScramCredentialsResponse(error=_CLUSTER_DENIED)
        controller = self._local_controller()
        if controller is None:
            return await self._forward(
                lambda s: s.AlterUserScramCredentials(request, timeout=30),
                apb.AlterUserScramCredentialsResponse(error=ErrorCode.NOT_CONTROLLER),
                context,
            )
        upsertions = [
            Upsertion(u.user, u.mechanism, u.iterations, u.salt, u.salted_password) for u in request.upsertions
        ]
        deletions = [Deletion(d.user, d.mechanism) for d in request.deletions]

        def decide(image: MetadataImage, _offset: int):
            results = alter_user_scram_credentials(image, upsertions, deletions)
            return [r for out in results for r in out.records], results

        try:
            results = await controller.write(decide)
        except OdradekError as e:
            return apb.AlterUserScramCredentialsResponse(error=ErrorCode.ValueType(e.code))
        for out in results:
            for record in out.records:
                kind = record.WhichOneof("record")
                change = getattr(record, kind)
                verb = "set" if kind == "user_scram_credential" else "deleted"
                audit.info("SCRAM credential %s: user %r, %s", verb, change.name, change.mechanism)
        return apb.AlterUserScramCredentialsResponse(
            results=[
                apb.AlterUserScramCredentialsResult(user=out.user, error=out.error, error_message=out.message)
                for out in results
            ]
        )

    async def DescribeUserScramCredentials(
        self,
        request: apb.DescribeUserScramCredentialsRequest,
        context: grpc.aio.ServicerContext[
            apb.DescribeUserScramCredentialsRequest, apb.DescribeUserScramCredentialsResponse
        ],
    ) -> apb.DescribeUserScramCredentialsResponse:
        """From this node's own image: the users this node's brokers can authenticate, never their keys."""
        if self._cluster_denied(context, AclOperation.DESCRIBE, "DescribeUserScramCredentials"):
            return apb.DescribeUserScramCredentialsResponse(error=_CLUSTER_DENIED, error_message=_DENIED_MESSAGE)
        found = describe_user_scram_credentials(self.sm.image, list(request.users))
        return apb.DescribeUserScramCredentialsResponse(
            results=[
                apb.UserScramCredentials(
                    user=d.user,
                    error=d.error,
                    error_message=d.message,
                    credentials=[apb.ScramCredentialInfo(mechanism=m, iterations=i) for m, i in d.credentials],
                )
                for d in found
            ]
        )


_CLUSTER_DENIED = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
_TOPIC_DENIED = ErrorCode.TOPIC_AUTHORIZATION_FAILED
_GROUP_DENIED = ErrorCode.GROUP_AUTHORIZATION_FAILED
_DENIED_MESSAGE = "not authorized (see the broker's odradek.audit log)"

M = TypeVar("M", bound=Message)
T = TypeVar("T")


def _without(request: M, field: str, denied: set[str], name_of: Callable[[Any], str]) -> M:
    """A copy of ``request`` whose repeated ``field`` keeps only the items not named in ``denied``."""
    kept = [item for item in getattr(request, field) if name_of(item) not in denied]
    copy = type(request)()
    copy.CopyFrom(request)
    del getattr(copy, field)[:]
    getattr(copy, field).extend(kept)  # copies the original's items
    return copy


def _merged(names: Sequence[str], denied: set[str], answered: Iterable[T], refusal: Callable[[str], T]) -> list[T]:
    """Results in request order: a refusal for each denied name, the answer to the rest in turn."""
    rest = iter(list(answered))
    out: list[T] = []
    for name in names:
        if name in denied:
            out.append(refusal(name))
        else:
            result = next(rest, None)
            if result is not None:
                out.append(result)
    return out


def _topic_refusal(name: str) -> apb.TopicResult:
    return apb.TopicResult(name=name, error=_TOPIC_DENIED, error_message=_DENIED_MESSAGE)


def _description_refusal(name: str) -> apb.TopicDescription:
    return apb.TopicDescription(name=name, error=_TOPIC_DENIED, error_message=_DENIED_MESSAGE)


def _configs_refusal(name: str) -> apb.TopicConfigs:
    return apb.TopicConfigs(topic=name, error=_TOPIC_DENIED, error_message=_DENIED_MESSAGE)


def _alter_refusal(name: str) -> apb.AlterConfigsResult:
    return apb.AlterConfigsResult(topic=name, error=_TOPIC_DENIED, error_message=_DENIED_MESSAGE)


def _group_alter_refusal(name: str) -> apb.AlterConfigsResult:
    return apb.AlterConfigsResult(topic=name, error=_GROUP_DENIED, error_message=_DENIED_MESSAGE)


@dataclass(frozen=True)
class _TopicCheck:
    """How one per-topic Admin API is authorized: the request's repeated field of topics and each item's name, the
    operation each topic needs (or the cluster operation that allows them all), and the answer's results."""

    api: str
    operation: AclOperation
    field: str
    name_of: Callable[[Any], str]
    response: Callable[[], Any]
    results: str
    refusal: Callable[[str], Any]
    or_cluster: AclOperation | None = None
    serve_without_topics: bool = False  # the request asks for more than its topics (cluster-wide defaults)


def _name(item: Any) -> str:
    return item.name


def _itself(item: str) -> str:
    return item


_CREATE_TOPICS = _TopicCheck(
    "CreateTopics",
    AclOperation.CREATE,
    "topics",
    _name,
    apb.CreateTopicsResponse,
    "topics",
    _topic_refusal,
    or_cluster=AclOperation.CREATE,
)
_CREATE_PARTITIONS = _TopicCheck(
    "CreatePartitions", AclOperation.ALTER, "topics", _name, apb.CreatePartitionsResponse, "topics", _topic_refusal
)
_DELETE_TOPICS = _TopicCheck(
    "DeleteTopics", AclOperation.DELETE, "names", _itself, apb.DeleteTopicsResponse, "topics", _topic_refusal
)
_DESCRIBE_TOPICS = _TopicCheck(
    "DescribeTopics",
    AclOperation.DESCRIBE,
    "names",
    _itself,
    apb.DescribeTopicsResponse,
    "topics",
    _description_refusal,
)
_DESCRIBE_CONFIGS = _TopicCheck(
    "DescribeConfigs",
    AclOperation.DESCRIBE_CONFIGS,
    "topics",
    _itself,
    apb.DescribeConfigsResponse,
    "topics",
    _configs_refusal,
    serve_without_topics=True,
)


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


def describe_binding(b: AclBinding) -> str:
    """A binding in one line for the audit log, in kafka-acls.sh's words."""
    return (
        f"{b.permission.display_name} {b.principal} {b.operation.display_name} from host {b.host} on"
        f" {b.resource_type.display_name}:{b.pattern_type.name}:{b.resource_name}"
    )


def _component(c: apb.QuotaEntityComponent) -> Component:
    return Component(c.entity_type, None if c.is_default else c.name)


_MATCHES: dict[int, Literal["exact", "default", "any"]] = {
    apb.QUOTA_MATCH_EXACT: "exact",
    apb.QUOTA_MATCH_DEFAULT: "default",
    apb.QUOTA_MATCH_ANY: "any",
}

_OPS: dict[int, Literal["set", "delete", "append", "subtract"]] = {
    apb.SET: "set",
    apb.DELETE: "delete",
    apb.APPEND: "append",
    apb.SUBTRACT: "subtract",
}

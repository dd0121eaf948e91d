"""Topics: CreateTopics, DeleteTopics, CreatePartitions (writes, decided by controller/topics.py on the active
controller) and DescribeTopics (from this node's image)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import replace

from odradek.client.common.acls import AclOperation, ResourceType
from odradek.client.common.admin.configs import ConfigEntry
from odradek.client.common.admin.topics import (
    DEFAULT,
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
from odradek.client.common.metadata_image import MetadataImage, PartitionRegistration
from odradek.client.common.request_context import RequestContext
from odradek.client.common.topic_rules import INTERNAL_TOPICS
from odradek.client.errors import ErrorCode, OdradekError
from odradek.controller.active import ActiveController
from odradek.controller.admin.base import (
    DENIED_MESSAGE,
    NONE,
    NOT_CONTROLLER,
    TOPIC_DENIED,
    AdminBase,
    merged,
    write,
)
from odradek.controller.topics import (
    DEFAULT_MAX_PARTITIONS_PER_BROKER,
    TopicOutcome,
    TopicRequest,
    create_partitions,
    create_topic,
    delete_topic,
)
from odradek.proto import metadata_pb2 as md


def under_replicated(p: PartitionRegistration) -> bool:
    """Some replica that is to stay out of sync. During a reassignment the replicas being added are still
    catching up by design; they are not counted (as Kafka's describe counts the replication factor)."""
    return any(r not in p.isr for r in p.replicas if r not in p.adding_replicas)


def topic_description(image: MetadataImage, name: str) -> TopicDescription:
    topic = image.topic(name)
    if topic is None:
        return TopicDescription(
            name=name, error=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, error_message=f"unknown topic '{name}'"
        )
    return TopicDescription(
        name=name,
        topic_id=topic.topic_id,
        is_internal=name in INTERNAL_TOPICS,  # Kafka's own internal topics only, not every "__" name
        configs=tuple(ConfigEntry(k, v) for k, v in sorted(image.topic_configs(name).items())),
        partitions=tuple(
            PartitionDescription(
                partition=p.partition,
                leader=p.leader,
                leader_epoch=p.leader_epoch,
                partition_epoch=p.partition_epoch,
                replicas=tuple(p.replicas),
                isr=tuple(p.isr),
                eligible_leader_replicas=tuple(p.eligible_leader_replicas),
                log_start_offset=-1,
                high_watermark=-1,
                under_replicated=under_replicated(p),
                adding_replicas=tuple(p.adding_replicas),
                removing_replicas=tuple(p.removing_replicas),
                last_known_elr=tuple(p.last_known_elr),
                last_known_leader=p.last_known_leader,
            )
            for p in sorted(topic.partitions.values(), key=lambda p: p.partition)
        ),
    )


def topic_refusal(name: str) -> TopicResult:
    return TopicResult(name=name, error=TOPIC_DENIED, error_message=DENIED_MESSAGE)


def _description_refusal(name: str) -> TopicDescription:
    return TopicDescription(name=name, error=TOPIC_DENIED, error_message=DENIED_MESSAGE)


async def _topic_result(
    controller: ActiveController,
    name: str,
    decide: Callable[[MetadataImage, int], tuple[list[md.MetadataRecord], TopicOutcome]],
) -> TopicResult:
    """Commit one topic's decision; its outcome (or the write's failure) as the topic's result."""
    try:
        out = await controller.write(decide)
    except OdradekError as e:
        return TopicResult(name=name, error=e.code, error_message=str(e))
    return TopicResult(name=name, error=out.error, error_message=out.message, topic_id=out.topic_id)


class TopicAdmin(AdminBase):
    @write
    async def create_topics(self, request: CreateTopics, ctx: RequestContext) -> CreateTopicsAnswer:
        """Needs cluster Create, or Create on each topic."""
        names = [t.name for t in request.topics]
        denied = self.topics_denied(ctx, AclOperation.CREATE, names, "CreateTopics", or_cluster=AclOperation.CREATE)
        if not denied:
            return await self._create_topics(request, ctx)
        allowed = tuple(t for t in request.topics if t.name not in denied)
        answer = await self._create_topics(replace(request, topics=allowed), ctx) if allowed else CreateTopicsAnswer(())
        return replace(answer, topics=merged(names, denied, answer.topics, topic_refusal))

    @write
    async def create_partitions(self, request: CreatePartitions, ctx: RequestContext) -> CreatePartitionsAnswer:
        """Needs Alter on each topic."""
        names = [t.name for t in request.topics]
        denied = self.topics_denied(ctx, AclOperation.ALTER, names, "CreatePartitions")
        if not denied:
            return await self._create_partitions(request, ctx)
        allowed = tuple(t for t in request.topics if t.name not in denied)
        answer = (
            await self._create_partitions(replace(request, topics=allowed), ctx)
            if allowed
            else CreatePartitionsAnswer(())
        )
        return replace(answer, topics=merged(names, denied, answer.topics, topic_refusal))

    @write
    async def delete_topics(self, request: DeleteTopics, ctx: RequestContext) -> DeleteTopicsAnswer:
        """Needs Delete on each topic."""
        names = list(request.names)
        denied = self.topics_denied(ctx, AclOperation.DELETE, names, "DeleteTopics")
        if not denied:
            return await self._delete_topics(request, ctx)
        allowed = tuple(n for n in request.names if n not in denied)
        answer = await self._delete_topics(replace(request, names=allowed), ctx) if allowed else DeleteTopicsAnswer(())
        return replace(answer, topics=merged(names, denied, answer.topics, topic_refusal))

    async def describe_topics(self, request: DescribeTopics, ctx: RequestContext) -> DescribeTopicsAnswer:
        """Needs Describe on each topic named; a listing of every topic leaves out those the caller may not
        describe."""
        access = self.access
        if not access.enabled or request.names:
            names = list(request.names)
            denied = self.topics_denied(ctx, AclOperation.DESCRIBE, names, "DescribeTopics")
            if not denied:
                return await self._describe_topics(request)
            allowed = tuple(n for n in request.names if n not in denied)
            answer = (
                await self._describe_topics(replace(request, names=allowed)) if allowed else DescribeTopicsAnswer(())
            )
            return DescribeTopicsAnswer(merged(names, denied, answer.topics, _description_refusal))
        answer = await self._describe_topics(request)
        caller = ctx.caller
        visible = tuple(
            t
            for t in answer.topics
            if access.allows(caller, AclOperation.DESCRIBE, ResourceType.TOPIC, t.name, audit_denial=False)
        )
        return DescribeTopicsAnswer(visible)

    # -- serving the topics the caller may ----------------------------------------------------------------------

    def _max_partitions_per_broker(self) -> int:
        return self.defaults.get("max.partitions.per.broker", DEFAULT_MAX_PARTITIONS_PER_BROKER)

    def _topic_request(self, t: CreatableTopic) -> TopicRequest | TopicResult:
        """A creation as the controller decides it. -1 (as in Kafka) asks for the cluster default; 0 and other
        negatives are refused by create_topic. With an explicit assignment both counts must be -1, as Kafka
        requires."""
        if t.assignments:
            if t.num_partitions != DEFAULT or t.replication_factor != DEFAULT:
                return TopicResult(
                    name=t.name,
                    error=ErrorCode.INVALID_REQUEST,
                    error_message="Both numPartitions or replicationFactor and replicasAssignments were set. "
                    "Both cannot be used at the same time.",
                )
            return TopicRequest(
                name=t.name,
                partitions=len(t.assignments),
                replication_factor=len(t.assignments[0]),
                configs={c.name: c.value for c in t.configs},
                assignments=t.assignments,
            )
        return TopicRequest(
            name=t.name,
            partitions=t.num_partitions if t.num_partitions != DEFAULT else self.defaults["num.partitions"],
            replication_factor=(
                t.replication_factor if t.replication_factor != DEFAULT else self.defaults["default.replication.factor"]
            ),
            configs={c.name: c.value for c in t.configs},
        )

    async def _create_topics(self, request: CreateTopics, ctx: RequestContext) -> CreateTopicsAnswer:
        controller = self.local_controller()
        if controller is None:
            forwarded = await self.forward.create_topics(request, ctx)
            if forwarded is None:
                return CreateTopicsAnswer(tuple(TopicResult(t.name, NOT_CONTROLLER) for t in request.topics))
            return forwarded
        results = []
        limit = self._max_partitions_per_broker()
        for t in request.topics:
            topic_request = self._topic_request(t)
            if isinstance(topic_request, TopicResult):
                results.append(topic_request)
                continue

            def decide(
                image: MetadataImage, _offset: int, topic_request: TopicRequest = topic_request
            ) -> tuple[list[md.MetadataRecord], TopicOutcome]:
                out = create_topic(image, topic_request, max_partitions_per_broker=limit)
                return ([] if request.validate_only else out.records), out

            result = await _topic_result(controller, t.name, decide)
            if result.error == NONE:  # created, or would be (validate_only): with what it has
                result = replace(
                    result,
                    num_partitions=topic_request.partitions,
                    replication_factor=topic_request.replication_factor,
                )
            results.append(result)
        return CreateTopicsAnswer(tuple(results))

    async def _create_partitions(self, request: CreatePartitions, ctx: RequestContext) -> CreatePartitionsAnswer:
        controller = self.local_controller()
        if controller is None:
            forwarded = await self.forward.create_partitions(request, ctx)
            if forwarded is None:
                return CreatePartitionsAnswer(tuple(TopicResult(t.name, NOT_CONTROLLER) for t in request.topics))
            return forwarded
        limit = self._max_partitions_per_broker()
        results = []
        for t in request.topics:

            def decide(
                image: MetadataImage, _offset: int, t: CreatePartitionsTopic = t
            ) -> tuple[list[md.MetadataRecord], TopicOutcome]:
                out = create_partitions(image, t.name, t.count, limit, list(t.assignments))
                return ([] if request.validate_only else out.records), out

            results.append(await _topic_result(controller, t.name, decide))
        return CreatePartitionsAnswer(tuple(results))

    async def _delete_topics(self, request: DeleteTopics, ctx: RequestContext) -> DeleteTopicsAnswer:
        controller = self.local_controller()
        if controller is None:
            forwarded = await self.forward.delete_topics(request, ctx)
            if forwarded is None:
                return DeleteTopicsAnswer(tuple(TopicResult(n, NOT_CONTROLLER) for n in request.names))
            return forwarded
        results = []
        for name in request.names:

            def decide(
                image: MetadataImage, _offset: int, name: str = name
            ) -> tuple[list[md.MetadataRecord], TopicOutcome]:
                out = delete_topic(image, name)
                return out.records, out

            results.append(await _topic_result(controller, name, decide))
        return DeleteTopicsAnswer(tuple(results))

    async def _describe_topics(self, request: DescribeTopics) -> DescribeTopicsAnswer:
        image = self.sm.image
        names = list(request.names) or sorted(
            n for n in image.topic_ids if request.include_internal or n not in INTERNAL_TOPICS
        )
        local = self.local_controller()
        if request.names and local is not None and any(image.topic(n) is None for n in names):
            # A just-elected leader applies what its predecessor committed only once its own epoch's first entry
            # commits: wait for that (as writes do) rather than call a committed topic unknown.
            with contextlib.suppress(OdradekError):
                await local.wait_active(5.0)
            image = self.sm.image
        elif request.names and local is None and any(image.topic(n) is None for n in names):
            # A topic unknown here may be committed but not yet applied on this node: the active controller has
            # every committed write, so a client can describe a topic right after creating it.
            forwarded = await self.forward.describe_topics(request)
            if forwarded is not None:
                return forwarded  # else answer from this node's image
        return DescribeTopicsAnswer(tuple(topic_description(image, n) for n in names))

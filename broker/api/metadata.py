"""Metadata, whatever the listener: the brokers, the topics a caller may describe with their partitions' leaders
and replicas, and the automatic creation of missing topics a request allows (``auto.create.topics.enable``).

The gRPC servicer (``BrokerService.Metadata``) and the Kafka listener's Metadata handler call it with a typed
request and the caller's ``RequestContext``, and translate its answer.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from odradek.broker.auto_create import TopicAutoCreation
from odradek.client.common.access import OPEN, AccessControl
from odradek.client.common.acls import AclOperation, ResourceType
from odradek.client.common.metadata_image import MetadataImage
from odradek.client.common.request_context import RequestContext
from odradek.client.common.topic_rules import INTERNAL_TOPICS, validate_topic_name
from odradek.client.errors import ErrorCode


@dataclass(frozen=True, slots=True)
class MetadataRequest:
    """``topics`` None: every topic (never created); else those named, created where missing if
    ``allow_auto_topic_creation``."""

    topics: Sequence[str] | None
    allow_auto_topic_creation: bool = False


@dataclass(frozen=True, slots=True)
class BrokerNode:
    broker_id: int
    host: str
    port: int
    rack: str


@dataclass(frozen=True, slots=True)
class PartitionMetadata:
    partition: int
    error: int
    leader: int  # -1 when it has no live leader
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class TopicMetadata:
    name: str
    error: int = ErrorCode.NONE
    topic_id: bytes = b""
    is_internal: bool = False
    partitions: tuple[PartitionMetadata, ...] = ()


@dataclass(frozen=True, slots=True)
class MetadataAnswer:
    brokers: tuple[BrokerNode, ...]  # the live (unfenced) brokers, by id
    cluster_id: str
    controller_id: int  # the active controller as this broker knows it, -1 if none
    topics: tuple[TopicMetadata, ...]
    metadata_offset: int  # the image's offset: a client that saw a later one knows this answer is older


class MetadataService:
    def __init__(
        self,
        cluster_id: str,
        image: Callable[[], MetadataImage],
        controller_id: Callable[[], int] = lambda: -1,
        access: AccessControl = OPEN,
        auto_create: TopicAutoCreation | None = None,
    ) -> None:
        self.cluster_id = cluster_id
        self._image = image
        self.controller_id = controller_id
        self.access = access
        # Creates the missing topics a request names and allows creating; None: the node does not.
        self.auto_create = auto_create

    async def metadata(self, request: MetadataRequest, ctx: RequestContext) -> MetadataAnswer:
        """As Kafka: a topic the caller may not describe is TOPIC_AUTHORIZATION_FAILED when named, left out of a
        listing of every topic; a missing topic is UNKNOWN_TOPIC_OR_PARTITION (INVALID_TOPIC_EXCEPTION for a name
        no topic may have), or LEADER_NOT_AVAILABLE once its automatic creation is under way."""
        image = self._image()
        brokers = tuple(
            BrokerNode(b.broker_id, b.host, b.port, b.rack)
            for b in sorted(image.brokers.values(), key=lambda b: b.broker_id)
            if not b.fenced
        )
        live = {b.broker_id for b in brokers}
        caller = ctx.caller if self.access.enabled else None
        every = request.topics is None
        names = sorted(image.topic_ids) if request.topics is None else list(request.topics)
        # Only topics named one by one are created (as Kafka: never for a request for every topic).
        auto_create = self.auto_create if request.allow_auto_topic_creation and not every else None
        missing: list[str] = []
        topics: list[TopicMetadata] = []
        for name in names:
            if caller is not None and not self.access.allows(
                caller, AclOperation.DESCRIBE, ResourceType.TOPIC, name, api="Metadata", audit_denial=not every
            ):
                if not every:  # a listing of every topic leaves out those the caller may not describe
                    topics.append(TopicMetadata(name, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                continue
            topic = image.topic(name)
            if topic is None:
                invalid = validate_topic_name(name) is not None
                error = ErrorCode.INVALID_TOPIC_EXCEPTION if invalid else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                topics.append(TopicMetadata(name, error))
                missing.append(name)
                continue
            partitions = tuple(
                PartitionMetadata(
                    p.partition,
                    ErrorCode.NONE if p.leader in live else ErrorCode.LEADER_NOT_AVAILABLE,
                    p.leader if p.leader in live else -1,
                    p.leader_epoch,
                    tuple(p.replicas),
                    tuple(p.isr),
                    tuple(r for r in p.replicas if r not in live),
                )
                for p in sorted(topic.partitions.values(), key=lambda p: p.partition)
            )
            topics.append(TopicMetadata(name, ErrorCode.NONE, topic.topic_id, name in INTERNAL_TOPICS, partitions))
        if auto_create is not None and missing:
            created = await auto_create.create(missing, ctx)
            topics = [
                TopicMetadata(t.name, created[t.name]) if t.name in created and not t.partitions else t for t in topics
            ]
        return MetadataAnswer(brokers, self.cluster_id, self.controller_id(), tuple(topics), image.offset)

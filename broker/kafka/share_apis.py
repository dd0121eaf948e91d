"""The KIP-932 share group APIs on the Kafka listener: ShareGroupHeartbeat (76), ShareGroupDescribe (77), ShareFetch
(78) and ShareAcknowledge (79), translated into the ``ShareService``'s typed calls and their answers back. Every rule
is the share cores' and shells' (``broker/share/``); this is only how each version spells them.

Served versions: 1 of each, as Kafka 4.1 serves them and librdkafka 2.16's share consumer sends them (version 0 was
Kafka 4.0's early access, which Kafka 4.1 dropped). kafka-python has no definitions of these APIs: they are in
``schemas/``, and its generic codec encodes them; ShareFetch's records are the log's batches as the read returned
them.

A request names a partition by topic id, possibly in two entries of the same topic (librdkafka writes the partitions
it adds and those it acknowledges separately): they are merged. The answer lists the partitions with acquired
records, an error, or acknowledgements; the endpoints of the leaders a NOT_LEADER_OR_FOLLOWER names go with it.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from kafka.protocol.api_message import ApiMessage

from odradek.broker.groups.consumer_records import Partitions, by_topic
from odradek.broker.kafka import schemas
from odradek.broker.kafka.apis import ApiRegistry, schema_api
from odradek.broker.kafka.backend import KafkaBackend
from odradek.broker.kafka.consumer_group_apis import described_assignment
from odradek.broker.kafka.wire import KafkaContext
from odradek.broker.share.group import ShareHeartbeatRequest
from odradek.broker.share.leader import PartitionAnswer
from odradek.broker.share.leader import ShareAcknowledgeRequest as AcknowledgeCall
from odradek.broker.share.leader import ShareFetchRequest as FetchCall
from odradek.broker.share.partition import AcknowledgementBatch
from odradek.broker.share.service import ShareService
from odradek.broker.share.sessions import TopicIdPartition

UNKNOWN_AUTHORIZED_OPERATIONS = -(2**31)
VERSION = 1


class ShareGroupHeartbeatRequest(ApiMessage, load_json=schemas):  # type: ignore[call-arg]
    pass


class ShareGroupHeartbeatResponse(ApiMessage, load_json=schemas):  # type: ignore[call-arg]
    pass


class ShareGroupDescribeRequest(ApiMessage, load_json=schemas):  # type: ignore[call-arg]
    pass


class ShareGroupDescribeResponse(ApiMessage, load_json=schemas):  # type: ignore[call-arg]
    pass


class ShareFetchRequest(ApiMessage, load_json=schemas):  # type: ignore[call-arg]
    pass


class ShareFetchResponse(ApiMessage, load_json=schemas):  # type: ignore[call-arg]
    pass


class ShareAcknowledgeRequest(ApiMessage, load_json=schemas):  # type: ignore[call-arg]
    pass


class ShareAcknowledgeResponse(ApiMessage, load_json=schemas):  # type: ignore[call-arg]
    pass


def acknowledgements(topics: Any) -> dict[TopicIdPartition, tuple[AcknowledgementBatch, ...]]:
    """Each partition's acknowledgement batches (entries of one partition merged), partitions without any left out."""
    out: dict[TopicIdPartition, tuple[AcknowledgementBatch, ...]] = {}
    for t in topics:
        for p in t.partitions:
            batches = tuple(
                AcknowledgementBatch(b.first_offset, b.last_offset, tuple(b.acknowledge_types))
                for b in p.acknowledgement_batches
            )
            if batches:
                tp = (t.topic_id.bytes, p.partition_index)
                out[tp] = (*out.get(tp, ()), *batches)
    return out


def _partitions(topics: Any) -> tuple[TopicIdPartition, ...]:
    return tuple(dict.fromkeys((t.topic_id.bytes, p.partition_index) for t in topics for p in t.partitions))


def _forgotten(topics: Any) -> tuple[TopicIdPartition, ...]:
    return tuple(dict.fromkeys((t.topic_id.bytes, p) for t in topics for p in t.partitions))


def _by_topic(
    answers: Mapping[TopicIdPartition, PartitionAnswer],
) -> list[tuple[bytes, list[tuple[int, PartitionAnswer]]]]:
    topics: dict[bytes, list[tuple[int, PartitionAnswer]]] = {}
    for (topic_id, index), answer in sorted(answers.items()):
        topics.setdefault(topic_id, []).append((index, answer))
    return list(topics.items())


class ShareApis:
    def __init__(self, backend: KafkaBackend, share: ShareService) -> None:
        self.backend = backend
        self.share = share

    def _endpoints(self, answers: Iterable[PartitionAnswer], cls: Any) -> list[Any]:
        """The NodeEndpoints of the leaders the answers name."""
        image = self.backend.image()
        out = []
        for node in sorted({a.leader[0] for a in answers if a.leader is not None and a.leader[0] >= 0}):
            found = self.backend.endpoint(node)
            if found is not None:
                broker = image.brokers.get(node)
                rack = broker.rack if broker is not None and broker.rack else None
                out.append(cls(node_id=node, host=found[0], port=found[1], rack=rack))
        return out

    # -- ShareGroupHeartbeat, ShareGroupDescribe -------------------------------------------------------------------

    async def heartbeat(self, ctx: KafkaContext, v: int, req: Any) -> Any:
        names = req.subscribed_topic_names
        request = ShareHeartbeatRequest(
            member_id=req.member_id,
            member_epoch=req.member_epoch,
            rack_id=req.rack_id,
            subscribed_topic_names=None if names is None else tuple(names),
            client_id=ctx.client_id,
        )
        r = await self.share.heartbeat(req.group_id, request, ctx.request_context)
        assignment = None
        if r.assignment is not None:
            Assignment = ShareGroupHeartbeatResponse.Assignment
            assignment = Assignment(
                topic_partitions=[
                    Assignment.TopicPartitions(topic_id=uuid.UUID(bytes=t), partitions=ps)
                    for t, ps in by_topic(r.assignment)
                ]
            )
        return ShareGroupHeartbeatResponse(
            version=v,
            throttle_time_ms=0,
            error_code=int(r.error),
            error_message=r.error_message,
            member_id=r.member_id,
            member_epoch=r.member_epoch,
            heartbeat_interval_ms=r.heartbeat_interval_ms,
            assignment=assignment,
        )

    async def describe(self, ctx: KafkaContext, v: int, req: Any) -> Any:
        Group = ShareGroupDescribeResponse.DescribedGroup
        Member = Group.Member
        Assignment = Member.Assignment
        context = ctx.request_context
        groups = []
        for group_id in req.group_ids:
            d = self.share.describe(group_id, context)

            def assignment(partitions: Partitions, names: Mapping[bytes, str] = d.topic_names) -> Any:
                return described_assignment(Assignment, partitions, names)

            g = d.group
            groups.append(
                Group(
                    error_code=int(d.error),
                    error_message=d.message,
                    group_id=group_id,
                    group_state=g.state if g else "",
                    group_epoch=g.group_epoch if g else -1,
                    assignment_epoch=g.assignment_epoch if g else -1,
                    assignor_name=g.assignor_name if g else "",
                    members=[
                        Member(
                            member_id=m.member_id,
                            rack_id=m.rack_id,
                            member_epoch=m.member_epoch,
                            client_id=m.client_id,
                            client_host=m.client_host,
                            subscribed_topic_names=list(m.subscribed_topic_names),
                            assignment=assignment(m.assignment),
                        )
                        for m in (g.members if g else ())
                    ],
                    authorized_operations=UNKNOWN_AUTHORIZED_OPERATIONS,
                )
            )
        return ShareGroupDescribeResponse(version=v, throttle_time_ms=0, groups=groups)

    # -- ShareFetch, ShareAcknowledge ------------------------------------------------------------------------------

    async def fetch(self, ctx: KafkaContext, v: int, req: Any) -> Any:
        request = FetchCall(
            group_id=req.group_id or "",
            member_id=req.member_id or "",
            session_epoch=req.share_session_epoch,
            max_wait_ms=req.max_wait_ms,
            min_bytes=req.min_bytes,
            max_bytes=req.max_bytes,
            max_records=req.max_records,
            partitions=_partitions(req.topics),
            acknowledgements=acknowledgements(req.topics),
            forgotten=_forgotten(req.forgotten_topics_data),
        )
        answer = await self.share.fetch(request, ctx.request_context)
        R = ShareFetchResponse
        Topic = R.ShareFetchableTopicResponse
        Partition = Topic.PartitionData
        responses = [
            Topic(
                topic_id=uuid.UUID(bytes=topic_id),
                partitions=[
                    Partition(
                        partition_index=index,
                        error_code=int(a.error),
                        error_message=a.message,
                        acknowledge_error_code=int(a.ack_error),
                        acknowledge_error_message=a.ack_message,
                        current_leader=Partition.LeaderIdAndEpoch(*(a.leader or (-1, -1))),
                        records=a.records,
                        acquired_records=[
                            Partition.AcquiredRecords(
                                first_offset=r.first_offset, last_offset=r.last_offset, delivery_count=r.delivery_count
                            )
                            for r in a.acquired
                        ],
                    )
                    for index, a in partitions
                ],
            )
            for topic_id, partitions in _by_topic(answer.partitions)
        ]
        return R(
            version=v,
            throttle_time_ms=0,
            error_code=int(answer.error),
            error_message=answer.message,
            acquisition_lock_timeout_ms=answer.lock_duration_ms,
            responses=responses,
            node_endpoints=self._endpoints(answer.partitions.values(), R.NodeEndpoint),
        )

    async def acknowledge(self, ctx: KafkaContext, v: int, req: Any) -> Any:
        request = AcknowledgeCall(
            group_id=req.group_id or "",
            member_id=req.member_id or "",
            session_epoch=req.share_session_epoch,
            acknowledgements=acknowledgements(req.topics),
        )
        answer = await self.share.acknowledge(request, ctx.request_context)
        R = ShareAcknowledgeResponse
        Topic = R.ShareAcknowledgeTopicResponse
        Partition = Topic.PartitionData
        responses = [
            Topic(
                topic_id=uuid.UUID(bytes=topic_id),
                partitions=[
                    Partition(
                        partition_index=index,
                        error_code=int(a.ack_error),
                        error_message=a.ack_message,
                        current_leader=Partition.LeaderIdAndEpoch(*(a.leader or (-1, -1))),
                    )
                    for index, a in partitions
                ],
            )
            for topic_id, partitions in _by_topic(answer.partitions)
        ]
        return R(
            version=v,
            throttle_time_ms=0,
            error_code=int(answer.error),
            error_message=answer.message,
            responses=responses,
            node_endpoints=self._endpoints(answer.partitions.values(), R.NodeEndpoint),
        )


def register(registry: ApiRegistry, backend: KafkaBackend) -> None:
    """Registered (so advertised) only where the broker runs share groups."""
    if backend.share is None:
        return
    apis = ShareApis(backend, backend.share)
    registry.add(*schema_api(ShareGroupHeartbeatRequest, VERSION, VERSION, apis.heartbeat))
    registry.add(*schema_api(ShareGroupDescribeRequest, VERSION, VERSION, apis.describe))
    registry.add(*schema_api(ShareFetchRequest, VERSION, VERSION, apis.fetch))
    registry.add(*schema_api(ShareAcknowledgeRequest, VERSION, VERSION, apis.acknowledge))

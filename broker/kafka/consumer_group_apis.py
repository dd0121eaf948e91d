"""The KIP-848 consumer group APIs on the Kafka listener: ConsumerGroupHeartbeat (68) and ConsumerGroupDescribe
(69), translated into the group service's typed requests and their answers back. Every rule is the
coordinator's (``broker/groups/consumer_group.py``); this is only how each version spells them.

kafka-python 3.0.12 has no definitions of these two APIs, so their message definitions are in ``schemas/`` (the
fields of Kafka's own definitions, in the JSON format kafka-python reads), and its generic codec encodes them.

Served versions: ConsumerGroupHeartbeat 0-1 (v1: the consumer makes its member id, KIP-1082, and may subscribe with
a regular expression, evaluated by the coordinator) and ConsumerGroupDescribe 0-1 (v1 adds each member's type:
consumer, or classic for a member of the classic protocol in the group, after an online upgrade).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from kafka.protocol.api_message import ApiMessage

from odradek.broker.groups.consumer_messages import ConsumerHeartbeatRequest
from odradek.broker.groups.consumer_records import Partitions, by_topic
from odradek.broker.groups.requests import ConsumerGroupDescribe, ConsumerGroupHeartbeat
from odradek.broker.kafka import schemas
from odradek.broker.kafka.apis import ApiRegistry, schema_api
from odradek.broker.kafka.backend import KafkaBackend
from odradek.broker.kafka.wire import KafkaContext

CLASSIC_MEMBER_TYPE, CONSUMER_MEMBER_TYPE = 0, 1  # ConsumerGroupDescribe v1's MemberType
UNKNOWN_AUTHORIZED_OPERATIONS = -(2**31)


class ConsumerGroupHeartbeatRequest(ApiMessage, load_json=schemas):  # type: ignore[call-arg]
    pass


class ConsumerGroupHeartbeatResponse(ApiMessage, load_json=schemas):  # type: ignore[call-arg]
    pass


class ConsumerGroupDescribeRequest(ApiMessage, load_json=schemas):  # type: ignore[call-arg]
    pass


class ConsumerGroupDescribeResponse(ApiMessage, load_json=schemas):  # type: ignore[call-arg]
    pass


def owned_partitions(topics: Any) -> Partitions | None:
    """A heartbeat's TopicPartitions (null: unchanged since the last heartbeat)."""
    if topics is None:
        return None
    return frozenset((t.topic_id.bytes, p) for t in topics for p in t.partitions)


class ConsumerGroupApis:
    def __init__(self, backend: KafkaBackend) -> None:
        self.groups = backend.groups

    async def heartbeat(self, ctx: KafkaContext, v: int, req: Any) -> Any:
        request = ConsumerHeartbeatRequest(
            member_id=req.member_id,
            member_epoch=req.member_epoch,
            instance_id=req.instance_id,
            rack_id=req.rack_id,
            rebalance_timeout_ms=req.rebalance_timeout_ms,
            subscribed_topic_names=None if req.subscribed_topic_names is None else tuple(req.subscribed_topic_names),
            subscribed_topic_regex=req.subscribed_topic_regex if v >= 1 else None,
            server_assignor=req.server_assignor,
            owned=owned_partitions(req.topic_partitions),
            client_id=ctx.client_id,
            member_id_required=v >= 1,
        )
        response = await self.groups.consumer_group_heartbeat(
            ConsumerGroupHeartbeat(req.group_id, request), ctx.request_context
        )
        assignment = None
        if response.assignment is not None:
            Assignment = ConsumerGroupHeartbeatResponse.Assignment
            assignment = Assignment(
                topic_partitions=[
                    Assignment.TopicPartitions(topic_id=uuid.UUID(bytes=t), partitions=ps)
                    for t, ps in by_topic(response.assignment)
                ]
            )
        return ConsumerGroupHeartbeatResponse(
            version=v,
            throttle_time_ms=0,
            error_code=int(response.error),
            error_message=response.error_message,
            member_id=response.member_id,
            member_epoch=response.member_epoch,
            heartbeat_interval_ms=response.heartbeat_interval_ms,
            assignment=assignment,
        )

    async def describe(self, ctx: KafkaContext, v: int, req: Any) -> Any:
        Group = ConsumerGroupDescribeResponse.DescribedGroup
        Member = Group.Member
        Assignment = Member.Assignment
        groups = []
        answer = await self.groups.consumer_group_describe(
            ConsumerGroupDescribe(tuple(req.group_ids)), ctx.request_context
        )
        for group_id, d in zip(req.group_ids, answer.groups, strict=True):

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
                            instance_id=m.instance_id,
                            rack_id=m.rack_id,
                            member_epoch=m.member_epoch,
                            client_id=m.client_id,
                            client_host=m.client_host,
                            subscribed_topic_names=list(m.subscribed_topic_names),
                            subscribed_topic_regex=m.subscribed_topic_regex,
                            assignment=assignment(m.assignment),
                            target_assignment=assignment(m.target_assignment),
                            member_type=CLASSIC_MEMBER_TYPE if m.classic else CONSUMER_MEMBER_TYPE,
                        )
                        for m in (g.members if g else ())
                    ],
                    authorized_operations=UNKNOWN_AUTHORIZED_OPERATIONS,
                )
            )
        return ConsumerGroupDescribeResponse(version=v, throttle_time_ms=0, groups=groups)


def register(registry: ApiRegistry, backend: KafkaBackend) -> None:
    apis = ConsumerGroupApis(backend)
    registry.add(*schema_api(ConsumerGroupHeartbeatRequest, 0, 1, apis.heartbeat))
    registry.add(*schema_api(ConsumerGroupDescribeRequest, 0, 1, apis.describe))


def described_assignment(assignment_cls: Any, partitions: Partitions, names: Mapping[bytes, str]) -> Any:
    """A member's assignment as ConsumerGroupDescribe and ShareGroupDescribe answer it: by topic id, with names."""
    return assignment_cls(
        topic_partitions=[
            assignment_cls.TopicPartitions(topic_id=uuid.UUID(bytes=t), topic_name=names.get(t, ""), partitions=ps)
            for t, ps in by_topic(partitions)
        ]
    )

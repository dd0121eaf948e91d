"""ConsumerGroupHeartbeat and ConsumerGroupDescribe on the Kafka listener (broker/kafka/consumer_group_apis.py):
each served version's request, in Kafka's encoding, reaches the group service as the core's typed request, and the
service's answer comes back in that version's encoding. The service is a fake with chosen answers: what is tested
is the translation (the rules are the core's, tests/groups/test_consumer_transcripts.py)."""

from __future__ import annotations

import struct
import uuid
from typing import Any

import pytest

from odradek.broker.groups.consumer_messages import (
    ConsumerGroupDescription,
    ConsumerHeartbeatRequest,
    ConsumerHeartbeatResponse,
    ConsumerMemberDescription,
)
from odradek.broker.groups.requests import (
    ConsumerGroupDescribe,
    ConsumerGroupDescribeAnswer,
    ConsumerGroupHeartbeat,
    DescribedConsumerGroup,
)
from odradek.broker.kafka import consumer_group_apis
from odradek.broker.kafka.apis import ApiRegistry
from odradek.broker.kafka.backend import KafkaBackend
from odradek.broker.kafka.consumer_group_apis import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from odradek.broker.kafka.wire import ConnectionInfo, KafkaContext, RequestHeader
from odradek.client.common.request_context import KAFKA, RequestContext
from odradek.client.errors import ErrorCode

CTX = KafkaContext(ConnectionInfo(1, "KAFKA", "10.0.0.5", 5555), "app-7")
T = uuid.UUID(int=7)
U = uuid.UUID(int=9)


class FakeGroups:
    def __init__(self, heartbeat: ConsumerHeartbeatResponse | None = None) -> None:
        self.heartbeat_answer = heartbeat or ConsumerHeartbeatResponse(ErrorCode.NONE)
        self.heartbeats: list[tuple[str, ConsumerHeartbeatRequest]] = []
        self.contexts: list[RequestContext] = []

    async def consumer_group_heartbeat(
        self, request: ConsumerGroupHeartbeat, context: RequestContext
    ) -> ConsumerHeartbeatResponse:
        self.heartbeats.append((request.group_id, request.heartbeat))
        self.contexts.append(context)
        return self.heartbeat_answer

    async def consumer_group_describe(
        self, request: ConsumerGroupDescribe, context: RequestContext
    ) -> ConsumerGroupDescribeAnswer:
        self.contexts.append(context)
        return ConsumerGroupDescribeAnswer(tuple(self._describe(g) for g in request.group_ids))

    def _describe(self, group_id: str) -> DescribedConsumerGroup:
        if group_id != "g":
            return DescribedConsumerGroup(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.", None, {})
        member = ConsumerMemberDescription(
            member_id="m-1",
            instance_id="i-1",
            rack_id=None,
            member_epoch=3,
            client_id="c",
            client_host="10.0.0.5",
            subscribed_topic_names=("t", "u"),
            subscribed_topic_regex=None,
            assignment=frozenset({(T.bytes, 1), (T.bytes, 0)}),
            target_assignment=frozenset({(T.bytes, 0), (U.bytes, 2)}),
        )
        group = ConsumerGroupDescription("g", "Reconciling", 4, 4, "uniform", (member,))
        return DescribedConsumerGroup(ErrorCode.NONE, None, group, {T.bytes: "t", U.bytes: "u"})


def registry_with(groups: FakeGroups) -> ApiRegistry:
    backend = KafkaBackend(
        broker_id=1,
        cluster_id="c",
        listener="KAFKA",
        image=lambda: None,  # type: ignore[arg-type,return-value]
        controller_id=lambda: 1,
        endpoint=lambda node: None,
        data=None,  # type: ignore[arg-type]
        groups=groups,  # type: ignore[arg-type]
        transactions=None,  # type: ignore[arg-type]
        admin=None,  # type: ignore[arg-type]
    )
    registry = ApiRegistry()
    consumer_group_apis.register(registry, backend)
    return registry


async def roundtrip(registry: ApiRegistry, request: Any, response_cls: Any, version: int) -> Any:
    found = registry.get(request.API_KEY)
    assert found is not None
    spec, handler = found
    assert spec.serves(version) and spec.flexible(version)
    body = bytes(request.encode(version=version))
    reply = await handler(CTX, RequestHeader(request.API_KEY, version, 42, CTX.client_id, 0), memoryview(body))
    assert reply is not None
    data = b"".join(bytes(c) for c in reply.encode(0))  # type: ignore[arg-type]
    return response_cls.decode(data, version=version)


def heartbeat(**fields: Any) -> Any:
    values: dict[str, Any] = {
        "group_id": "g",
        "member_id": "m-1",
        "member_epoch": 0,
        "instance_id": None,
        "rack_id": None,
        "rebalance_timeout_ms": 300_000,
        "subscribed_topic_names": ["t"],
        "subscribed_topic_regex": None,
        "server_assignor": None,
        "topic_partitions": [],
        **fields,
    }
    return ConsumerGroupHeartbeatRequest(**values)


def test_served_versions() -> None:
    served = {s.name: (s.min_version, s.max_version, s.flexible_from) for s in registry_with(FakeGroups()).specs()}
    assert served == {"ConsumerGroupHeartbeat": (0, 1, 0), "ConsumerGroupDescribe": (0, 1, 0)}


def test_the_heartbeat_request_layout_is_kafkas() -> None:
    """Version 1 byte by byte: compact strings (length + 1), nullable fields as 0, tagged-field sections."""
    request = heartbeat(
        member_epoch=5, instance_id="i", rebalance_timeout_ms=-1, subscribed_topic_names=None, topic_partitions=None
    )
    expected = (
        b"\x02g" + b"\x04m-1" + struct.pack(">i", 5) + b"\x02i" + b"\x00" + struct.pack(">i", -1)
        + b"\x00" + b"\x00" + b"\x00" + b"\x00" + b"\x00"
    )  # fmt: skip
    assert bytes(request.encode(version=1)) == expected
    assert bytes(request.encode(version=0)) == expected[:-3] + b"\x00\x00"  # v0 has no SubscribedTopicRegex


@pytest.mark.parametrize("version", [0, 1])
async def test_heartbeat(version: int) -> None:
    answer = ConsumerHeartbeatResponse(
        ErrorCode.NONE,
        member_id="m-1",
        member_epoch=4,
        heartbeat_interval_ms=5000,
        assignment=frozenset({(U.bytes, 2), (T.bytes, 1), (T.bytes, 0)}),
    )
    groups = FakeGroups(answer)
    owned = ConsumerGroupHeartbeatRequest.TopicPartitions(topic_id=T, partitions=[0, 3])
    request = heartbeat(
        member_epoch=3, instance_id="i-1", rack_id="r", server_assignor="range", topic_partitions=[owned]
    )
    r = await roundtrip(registry_with(groups), request, ConsumerGroupHeartbeatResponse, version)
    ((group_id, sent),) = groups.heartbeats
    assert group_id == "g"
    assert groups.contexts == [RequestContext("User:ANONYMOUS", "app-7", "ipv4:10.0.0.5:5555", KAFKA)]
    assert sent == ConsumerHeartbeatRequest(
        member_id="m-1",
        member_epoch=3,
        instance_id="i-1",
        rack_id="r",
        rebalance_timeout_ms=300_000,
        subscribed_topic_names=("t",),
        server_assignor="range",
        owned=frozenset({(T.bytes, 0), (T.bytes, 3)}),
        client_id="app-7",
        member_id_required=version >= 1,
    )
    assert (r.error_code, r.error_message, r.member_id, r.member_epoch, r.heartbeat_interval_ms) == (
        0,
        None,
        "m-1",
        4,
        5000,
    )
    assert [(t.topic_id, t.partitions) for t in r.assignment.topic_partitions] == [(T, [0, 1]), (U, [2])]


async def test_a_heartbeat_that_leaves_fields_out_sends_null() -> None:
    groups = FakeGroups(ConsumerHeartbeatResponse(ErrorCode.FENCED_MEMBER_EPOCH, "fenced"))
    request = heartbeat(member_epoch=3, rebalance_timeout_ms=-1, subscribed_topic_names=None, topic_partitions=None)
    r = await roundtrip(registry_with(groups), request, ConsumerGroupHeartbeatResponse, 1)
    ((_, sent),) = groups.heartbeats
    assert (sent.subscribed_topic_names, sent.owned, sent.rebalance_timeout_ms) == (None, None, -1)
    assert (r.error_code, r.error_message, r.member_id, r.assignment) == (
        ErrorCode.FENCED_MEMBER_EPOCH,
        "fenced",
        None,
        None,
    )


async def test_a_regular_expression_subscription_reaches_the_coordinator_from_version_1() -> None:
    groups = FakeGroups()
    request = heartbeat(subscribed_topic_names=None, subscribed_topic_regex="orders-.*")
    await roundtrip(registry_with(groups), request, ConsumerGroupHeartbeatResponse, 1)
    ((_, sent),) = groups.heartbeats
    assert (sent.subscribed_topic_names, sent.subscribed_topic_regex) == (None, "orders-.*")


@pytest.mark.parametrize("version", [0, 1])
async def test_describe(version: int) -> None:
    request = ConsumerGroupDescribeRequest(group_ids=["g", "nope"], include_authorized_operations=False)
    r = await roundtrip(registry_with(FakeGroups()), request, ConsumerGroupDescribeResponse, version)
    g, missing = r.groups
    assert (g.error_code, g.group_id, g.group_state, g.group_epoch, g.assignment_epoch, g.assignor_name) == (
        0,
        "g",
        "Reconciling",
        4,
        4,
        "uniform",
    )
    (m,) = g.members
    assert (m.member_id, m.instance_id, m.rack_id, m.member_epoch, m.client_id, m.subscribed_topic_names) == (
        "m-1",
        "i-1",
        None,
        3,
        "c",
        ["t", "u"],
    )
    assert [(t.topic_id, t.topic_name, t.partitions) for t in m.assignment.topic_partitions] == [(T, "t", [0, 1])]
    assert [(t.topic_name, t.partitions) for t in m.target_assignment.topic_partitions] == [("t", [0]), ("u", [2])]
    if version >= 1:
        assert m.member_type == 1
    assert (missing.error_code, missing.error_message, missing.group_id, missing.members) == (
        ErrorCode.GROUP_ID_NOT_FOUND,
        "Group nope not found.",
        "nope",
        [],
    )

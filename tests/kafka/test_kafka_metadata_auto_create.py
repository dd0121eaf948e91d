"""Automatic topic creation through Kafka's Metadata on the Kafka listener: the broker's real Metadata service over a
real metadata image, with a stand-in for the admin service's create_topics (the controller's side is shown by
tests/integration/test_auto_create_topics.py). What Kafka's brokers answer: LEADER_NOT_AVAILABLE for a topic being
created, UNKNOWN_TOPIC_OR_PARTITION when creation is not allowed, INVALID_TOPIC_EXCEPTION for a bad name,
TOPIC_AUTHORIZATION_FAILED without Create."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest
from kafka.protocol.metadata import MetadataRequest
from kafka_harness import call

from odradek.broker.auto_create import TopicAutoCreation
from odradek.broker.dataplane import BrokerService
from odradek.broker.kafka import metadata_apis
from odradek.broker.kafka.apis import ApiRegistry
from odradek.broker.kafka.backend import KafkaBackend
from odradek.client.common.access import AccessControl, AuthorizerSettings
from odradek.client.common.acls import (
    CLUSTER_RESOURCE_NAME,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from odradek.client.common.admin.topics import CreateTopics, CreateTopicsAnswer, TopicResult
from odradek.client.common.metadata_image import BrokerRegistration, MetadataImage, PartitionRegistration, TopicImage
from odradek.client.errors import ErrorCode

T_ID = bytes(range(16))
NONE, UNKNOWN, LEADER_NOT_AVAILABLE = (
    ErrorCode.NONE,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.LEADER_NOT_AVAILABLE,
)
INVALID_TOPIC, DENIED = ErrorCode.INVALID_TOPIC_EXCEPTION, ErrorCode.TOPIC_AUTHORIZATION_FAILED


def image() -> MetadataImage:
    """One live broker (1) and one topic ``t``; no internal topic yet."""
    broker = BrokerRegistration(1, b"\x01" * 16, 10, "grpc-1", 9001)
    t = TopicImage("t", T_ID, {0: PartitionRegistration(T_ID, 0, (1,), (1,), 1, 0, 0)})
    return MetadataImage(offset=5, brokers={1: broker}, topics={T_ID: t}, topic_ids={"t": T_ID})


class Controller:
    """Stands in for the admin service's create_topics: records each request and answers each topic with
    ``errors[name]`` (NONE by default), after ``gate`` is set when one is given."""

    def __init__(self, **errors: int) -> None:
        self.errors = errors
        self.requests: list[CreateTopics] = []
        self.gate: asyncio.Event | None = None

    async def create_topics(self, request: CreateTopics, context: Any) -> CreateTopicsAnswer:
        self.requests.append(request)
        if self.gate is not None:
            await self.gate.wait()
        return CreateTopicsAnswer(tuple(TopicResult(t.name, self.errors.get(t.name, NONE)) for t in request.topics))

    def asked(self) -> list[str]:
        return [t.name for r in self.requests for t in r.topics]


def registry(controller: Controller | None, access: AccessControl | None = None) -> ApiRegistry:
    """The Metadata API of broker 1, whose node has ``auto.create.topics.enable`` on (off: no ``controller``), with
    num.partitions 3 and default.replication.factor 2."""
    img = image()
    kwargs: dict[str, Any] = {} if access is None else {"access": access}
    auto = None if controller is None else TopicAutoCreation(controller.create_topics, 3, 2, **kwargs)
    replicas: Any = SimpleNamespace(image=img)
    data = BrokerService(1, "cluster-x", replicas, controller_id=lambda: 1, auto_create=auto, **kwargs)
    backend: Any = KafkaBackend(
        broker_id=1,
        cluster_id="cluster-x",
        listener="KAFKA",
        image=lambda: img,
        controller_id=lambda: 1,
        endpoint={1: ("kafka-1", 9192)}.get,
        data=data,
        groups=None,  # type: ignore[arg-type]
        transactions=None,  # type: ignore[arg-type]
        admin=None,  # type: ignore[arg-type]
    )
    r = ApiRegistry()
    metadata_apis.register(r, backend)
    return r


def request(version: int, *names: str, allow: bool = True) -> MetadataRequest:
    topics = [MetadataRequest.MetadataRequestTopic(name=n) for n in names]
    if version < 4:  # no allow_auto_topic_creation field before v4
        return MetadataRequest(version=version, topics=topics)
    return MetadataRequest(version=version, topics=topics, allow_auto_topic_creation=allow)


def errors(response: Any) -> dict[str, int]:
    return {t.name: t.error_code for t in response.topics}


@pytest.mark.parametrize("version", [0, 1, 3, 4, 9, 12, 13])
async def test_a_missing_topic_is_created_with_the_node_defaults_and_answers_leader_not_available(
    version: int,
) -> None:
    """v0-v3 have no allow_auto_topic_creation field: Kafka always allows creation there."""
    controller = Controller()
    r = await call(registry(controller), request(version, "t", "new"), version)
    assert errors(r) == {"t": NONE, "new": LEADER_NOT_AVAILABLE}
    [new] = [t for t in r.topics if t.name == "new"]
    assert new.partitions == []
    [asked] = controller.requests
    assert [(t.name, t.num_partitions, t.replication_factor) for t in asked.topics] == [("new", 3, 2)]


@pytest.mark.parametrize("version", [4, 9, 13])
async def test_a_request_that_does_not_allow_creation_creates_nothing(version: int) -> None:
    controller = Controller()
    r = await call(registry(controller), request(version, "new", allow=False), version)
    assert errors(r) == {"new": UNKNOWN}
    assert controller.requests == []


@pytest.mark.parametrize("version", [1, 12])
async def test_without_auto_create_topics_enable_a_missing_topic_is_unknown(version: int) -> None:
    r = await call(registry(None), request(version, "new", "bad/name"), version)
    assert errors(r) == {"new": UNKNOWN, "bad/name": INVALID_TOPIC}


async def test_a_request_for_every_topic_creates_none() -> None:
    controller = Controller()
    r = await call(registry(controller), MetadataRequest(version=12, topics=None, allow_auto_topic_creation=True), 12)
    assert errors(r) == {"t": NONE}
    assert controller.requests == []


async def test_bad_names_and_internal_topics_are_answered_without_the_controller() -> None:
    controller = Controller()
    long = "x" * 250
    r = await call(registry(controller), request(12, "bad/name", "..", long, "__consumer_offsets", "ok"), 12)
    assert errors(r) == {
        "bad/name": INVALID_TOPIC,
        "..": INVALID_TOPIC,
        long: INVALID_TOPIC,
        "__consumer_offsets": UNKNOWN,  # created by the cluster on first use, never by a Metadata request
        "ok": LEADER_NOT_AVAILABLE,
    }
    assert controller.asked() == ["ok"]


async def test_a_topic_created_concurrently_answers_leader_not_available() -> None:
    """Another broker (or request) created it first: the controller's TOPIC_ALREADY_EXISTS is no error here. And a
    creation this broker already has in flight is not asked for again."""
    controller = Controller(raced=ErrorCode.TOPIC_ALREADY_EXISTS)
    reg = registry(controller)
    assert errors(await call(reg, request(12, "raced"), 12)) == {"raced": LEADER_NOT_AVAILABLE}

    controller.gate = asyncio.Event()
    first = asyncio.ensure_future(call(reg, request(12, "slow"), 12))
    while not controller.requests[1:]:
        await asyncio.sleep(0)
    second = await call(reg, request(9, "slow"), 9)  # answered while the first is still at the controller
    assert errors(second) == {"slow": LEADER_NOT_AVAILABLE}
    controller.gate.set()
    assert errors(await first) == {"slow": LEADER_NOT_AVAILABLE}
    assert controller.asked() == ["raced", "slow"]


@pytest.mark.parametrize(
    ("controller_error", "answered"),
    [
        (ErrorCode.NOT_CONTROLLER, LEADER_NOT_AVAILABLE),  # retriable: the client's next Metadata asks again
        (ErrorCode.REQUEST_TIMED_OUT, LEADER_NOT_AVAILABLE),
        (ErrorCode.INVALID_REPLICATION_FACTOR, ErrorCode.INVALID_REPLICATION_FACTOR),  # fewer brokers than 2
        (ErrorCode.POLICY_VIOLATION, ErrorCode.POLICY_VIOLATION),
    ],
)
async def test_the_controllers_refusal_is_the_topics_error(controller_error: int, answered: int) -> None:
    controller = Controller(new=controller_error)
    r = await call(registry(controller), request(12, "new"), 12)
    assert errors(r) == {"new": answered}


def allow(resource_type: ResourceType, name: str, operation: AclOperation, pattern: PatternType) -> AclBinding:
    return AclBinding(resource_type, name, pattern, "User:alice", "*", operation, AclPermissionType.ALLOW)


async def test_with_an_authorizer_creation_needs_create_on_the_cluster_or_the_topic() -> None:
    """Describe first (a topic the caller may not describe is refused, and not created), then Create: on the
    cluster for any topic, else on each topic."""
    bindings = {
        b"1": allow(ResourceType.TOPIC, "d-", AclOperation.DESCRIBE, PatternType.PREFIXED),
        b"2": allow(ResourceType.TOPIC, "d-ok", AclOperation.CREATE, PatternType.LITERAL),
    }
    current = [bindings]  # the image hands out a new mapping when its ACLs change
    access = AccessControl(AuthorizerSettings(), lambda: current[-1])
    controller = Controller()
    reg = registry(controller, access)
    r = await call(reg, request(12, "d-ok", "d-no", "hidden"), 12, principal="User:alice")
    assert errors(r) == {"d-ok": LEADER_NOT_AVAILABLE, "d-no": DENIED, "hidden": DENIED}
    assert controller.asked() == ["d-ok"]

    cluster_create = allow(ResourceType.CLUSTER, CLUSTER_RESOURCE_NAME, AclOperation.CREATE, PatternType.LITERAL)
    current.append({**bindings, b"3": cluster_create})
    r = await call(reg, request(12, "d-no", "hidden"), 12, principal="User:alice")
    assert errors(r) == {"d-no": LEADER_NOT_AVAILABLE, "hidden": DENIED}  # cluster Create; no Describe
    assert controller.asked() == ["d-ok", "d-no"]

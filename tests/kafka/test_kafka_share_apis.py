"""The KIP-932 share group APIs' codec on the Kafka listener: the four APIs served at version 1 only (and only where
the broker serves share groups), requests laid out as librdkafka 2.16 writes them decoded into the service's typed
calls (two entries of one topic merged, acknowledgements per partition, forgotten partitions), and answers encoded as
librdkafka reads them (AcquisitionLockTimeoutMs, non-null records, CurrentLeader, the leaders' NodeEndpoints)."""

from __future__ import annotations

import uuid
from typing import Any

from odradek.broker.kafka import share_apis
from odradek.broker.kafka.apis import ApiRegistry
from odradek.broker.kafka.backend import KafkaBackend
from odradek.broker.kafka.primitives import Reader, Writer
from odradek.broker.kafka.share_apis import (
    ShareGroupDescribeRequest,
    ShareGroupDescribeResponse,
    ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse,
)
from odradek.broker.kafka.wire import ConnectionInfo, KafkaContext, RequestHeader
from odradek.broker.share.group import (
    ShareGroupDescription,
    ShareHeartbeatRequest,
    ShareHeartbeatResponse,
    ShareMemberDescription,
)
from odradek.broker.share.leader import (
    PartitionAnswer,
    ShareAcknowledgeRequest,
    ShareAnswer,
    ShareFetchRequest,
)
from odradek.broker.share.partition import AcknowledgementBatch, AcquiredRecords
from odradek.broker.share.service import DescribedShareGroup
from odradek.client.common.metadata_image import BrokerRegistration, MetadataImage
from odradek.client.common.request_context import RequestContext
from odradek.client.errors import ErrorCode

CTX = KafkaContext(ConnectionInfo(1, "KAFKA", "10.0.0.5", 5555), "app-7")
T = uuid.UUID(int=7)
U = uuid.UUID(int=9)
RECORDS = b"\x00" * 70  # stands for the batches a read returned: passed through as they are


class FakeShare:
    """Records the typed calls; answers what the test sets."""

    def __init__(self) -> None:
        self.calls: list[Any] = []
        self.answer = ShareAnswer()
        self.heartbeat_answer = ShareHeartbeatResponse(ErrorCode.NONE)

    async def heartbeat(
        self, group_id: str, request: ShareHeartbeatRequest, ctx: RequestContext
    ) -> ShareHeartbeatResponse:
        self.calls.append((group_id, request))
        return self.heartbeat_answer

    def describe(self, group_id: str, ctx: RequestContext) -> DescribedShareGroup:
        if group_id != "g":
            return DescribedShareGroup(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.", None, {})
        member = ShareMemberDescription(
            "m-1", None, 3, "c", "10.0.0.5", ("t",), frozenset({(T.bytes, 1), (T.bytes, 0)})
        )
        group = ShareGroupDescription("g", "Stable", 3, 3, "simple", (member,))
        return DescribedShareGroup(ErrorCode.NONE, None, group, {T.bytes: "t"})

    async def fetch(self, request: ShareFetchRequest, ctx: RequestContext) -> ShareAnswer:
        self.calls.append(request)
        return self.answer

    async def acknowledge(self, request: ShareAcknowledgeRequest, ctx: RequestContext) -> ShareAnswer:
        self.calls.append(request)
        return self.answer


def image() -> MetadataImage:
    broker = BrokerRegistration(3, b"", 1, "h3", 9093, rack="r1", fenced=False)
    return MetadataImage(brokers={3: broker})


def registry_with(share: FakeShare | None) -> ApiRegistry:
    backend = KafkaBackend(
        broker_id=1,
        cluster_id="c",
        listener="KAFKA",
        image=image,
        controller_id=lambda: 1,
        endpoint=lambda node: ("h3", 19093) if node == 3 else None,
        data=None,  # type: ignore[arg-type]
        groups=None,  # type: ignore[arg-type]
        transactions=None,  # type: ignore[arg-type]
        admin=None,  # type: ignore[arg-type]
        share=share,  # type: ignore[arg-type]
    )
    registry = ApiRegistry()
    share_apis.register(registry, backend)
    return registry


async def call(registry: ApiRegistry, key: int, body: bytes, version: int = 1) -> bytes:
    found = registry.get(key)
    assert found is not None
    spec, handler = found
    assert spec.serves(version) and spec.flexible(version)
    reply = await handler(CTX, RequestHeader(key, version, 42, CTX.client_id, 0), memoryview(body))
    return b"".join(bytes(c) for c in reply.encode(0))  # type: ignore[arg-type]


def test_served_versions() -> None:
    served = {
        s.name: (s.key, s.min_version, s.max_version, s.flexible_from) for s in registry_with(FakeShare()).specs()
    }
    assert served == {
        "ShareGroupHeartbeat": (76, 1, 1, 0),
        "ShareGroupDescribe": (77, 1, 1, 0),
        "ShareFetch": (78, 1, 1, 0),
        "ShareAcknowledge": (79, 1, 1, 0),
    }
    assert list(registry_with(None).specs()) == []  # a broker without share groups advertises none


# -- requests as librdkafka writes them (rdkafka_fetcher.c, rdkafka_request.c) --------------------------------------


def ack_batch(w: Writer, first: int, last: int, kind: int) -> None:
    w.int64(first)
    w.int64(last)
    w.compact_array_length(1)
    w.int8(kind)
    w.no_tagged_fields()


def share_fetch_body(epoch: int) -> bytes:
    """GroupId, MemberId, epoch, MaxWaitMs, MinBytes, MaxBytes, MaxRecords, BatchSize; the partitions it adds (T-0, no
    acknowledgements), then in a second entry of T the partition it acknowledges (T-1); forgotten U-2."""
    w = Writer()
    w.compact_string("g")
    w.compact_string("m-1")
    for v in (epoch, 500, 1, 52428800, 500, 500):
        w.int32(v)
    w.compact_array_length(2)
    for partition, acks in ((0, []), (1, [(5, 9, 1), (10, 10, 2)])):
        w.uuid(T.bytes)
        w.compact_array_length(1)
        w.int32(partition)
        w.compact_array_length(len(acks))
        for first, last, kind in acks:
            ack_batch(w, first, last, kind)
        w.no_tagged_fields()
        w.no_tagged_fields()
    w.compact_array_length(1)
    w.uuid(U.bytes)
    w.compact_array_length(1)
    w.int32(2)
    w.no_tagged_fields()
    w.no_tagged_fields()
    return bytes(w.buf)


async def test_a_share_fetch_becomes_the_services_call() -> None:
    share = FakeShare()
    await call(registry_with(share), 78, share_fetch_body(3))
    [request] = share.calls
    assert request == ShareFetchRequest(
        group_id="g",
        member_id="m-1",
        session_epoch=3,
        max_wait_ms=500,
        min_bytes=1,
        max_bytes=52428800,
        max_records=500,
        partitions=((T.bytes, 0), (T.bytes, 1)),
        acknowledgements={(T.bytes, 1): (AcknowledgementBatch(5, 9, (1,)), AcknowledgementBatch(10, 10, (2,)))},
        forgotten=((U.bytes, 2),),
    )


def read_fetch_answer(data: bytes) -> dict[str, Any]:
    """The answer as librdkafka reads it (rd_kafka_share_fetch_reply_handle)."""
    r = Reader(data)
    out: dict[str, Any] = {"throttle": r.int32(), "error": r.int16(), "message": r.compact_nullable_string()}
    out["lock_ms"] = r.int32()
    partitions = []
    for _ in range(r.compact_array_length()):
        topic = r.uuid()
        for _ in range(r.compact_array_length()):
            p: dict[str, Any] = {"topic": topic, "partition": r.int32(), "error": r.int16()}
            p["message"] = r.compact_nullable_string()
            p["ack_error"], p["ack_message"] = r.int16(), r.compact_nullable_string()
            p["leader"] = (r.int32(), r.int32())
            r.skip_tagged_fields()
            size = r.compact_array_length()  # librdkafka fails the answer on a null records field
            assert size >= 0
            p["records"] = bytes(data[r.pos : r.pos + size])
            r.pos += size
            p["acquired"] = []
            for _ in range(r.compact_array_length()):
                p["acquired"].append((r.int64(), r.int64(), r.int16()))
                r.skip_tagged_fields()
            r.skip_tagged_fields()
            partitions.append(p)
        r.skip_tagged_fields()
    out["partitions"] = partitions
    endpoints = []
    for _ in range(r.compact_array_length()):
        endpoints.append((r.int32(), r.compact_string(), r.int32(), r.compact_nullable_string()))
        r.skip_tagged_fields()
    out["endpoints"] = endpoints
    r.skip_tagged_fields()
    assert r.remaining() == 0
    return out


async def test_a_share_fetch_answer_is_laid_out_as_librdkafka_reads_it() -> None:
    share = FakeShare()
    share.answer = ShareAnswer(
        lock_duration_ms=4000,
        partitions={
            (T.bytes, 1): PartitionAnswer(
                records=RECORDS, acquired=(AcquiredRecords(5, 9, 1), AcquiredRecords(10, 10, 2))
            ),
            (T.bytes, 0): PartitionAnswer(ack_error=ErrorCode.INVALID_RECORD_STATE, ack_message="not held"),
            (U.bytes, 2): PartitionAnswer(ErrorCode.NOT_LEADER_OR_FOLLOWER, "moved", leader=(3, 7)),
        },
    )
    answer = read_fetch_answer(await call(registry_with(share), 78, share_fetch_body(0)))
    assert (answer["error"], answer["message"], answer["lock_ms"]) == (0, None, 4000)
    rows = [(p["topic"], p["partition"], p["error"], p["ack_error"], p["leader"]) for p in answer["partitions"]]
    assert rows == [
        (T.bytes, 0, 0, ErrorCode.INVALID_RECORD_STATE, (-1, -1)),
        (T.bytes, 1, 0, 0, (-1, -1)),
        (U.bytes, 2, ErrorCode.NOT_LEADER_OR_FOLLOWER, 0, (3, 7)),
    ]
    assert [(p["records"], p["acquired"]) for p in answer["partitions"]] == [
        (b"", []),
        (RECORDS, [(5, 9, 1), (10, 10, 2)]),
        (b"", []),
    ]
    assert answer["endpoints"] == [(3, "h3", 19093, "r1")]


async def test_a_refused_share_fetch_answers_only_the_top_level_error() -> None:
    share = FakeShare()
    share.answer = ShareAnswer(ErrorCode.INVALID_SHARE_SESSION_EPOCH, "expects 4")
    answer = read_fetch_answer(await call(registry_with(share), 78, share_fetch_body(3)))
    assert (answer["error"], answer["message"], answer["partitions"], answer["endpoints"]) == (
        ErrorCode.INVALID_SHARE_SESSION_EPOCH,
        "expects 4",
        [],
        [],
    )


async def test_share_acknowledge_both_ways() -> None:
    """ShareAcknowledge as rd_kafka_ShareAcknowledgeRequest writes it (epoch -1 closes), and its answer as
    rd_kafka_share_acknowledge_reply_handle reads it."""
    w = Writer()
    w.compact_string("g")
    w.compact_string("m-1")
    w.int32(-1)
    w.compact_array_length(1)
    w.uuid(T.bytes)
    w.compact_array_length(1)
    w.int32(0)
    w.compact_array_length(1)
    ack_batch(w, 3, 4, 3)
    w.no_tagged_fields()
    w.no_tagged_fields()
    w.no_tagged_fields()
    share = FakeShare()
    share.answer = ShareAnswer(
        partitions={(T.bytes, 0): PartitionAnswer(ack_error=ErrorCode.NOT_LEADER_OR_FOLLOWER, leader=(3, 2))}
    )
    data = await call(registry_with(share), 79, bytes(w.buf))
    assert share.calls == [ShareAcknowledgeRequest("g", "m-1", -1, {(T.bytes, 0): (AcknowledgementBatch(3, 4, (3,)),)})]
    r = Reader(data)
    assert (r.int32(), r.int16(), r.compact_nullable_string()) == (0, 0, None)
    assert r.compact_array_length() == 1 and r.uuid() == T.bytes and r.compact_array_length() == 1
    assert (r.int32(), r.int16(), r.compact_nullable_string(), r.int32(), r.int32()) == (
        0,
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        None,
        3,
        2,
    )
    r.skip_tagged_fields()  # CurrentLeader
    r.skip_tagged_fields()  # partition
    r.skip_tagged_fields()  # topic
    assert r.compact_array_length() == 1 and (r.int32(), r.compact_string(), r.int32()) == (3, "h3", 19093)


async def test_heartbeat_join_and_unchanged_assignment() -> None:
    share = FakeShare()
    registry = registry_with(share)
    share.heartbeat_answer = ShareHeartbeatResponse(
        ErrorCode.NONE,
        member_id="m-1",
        member_epoch=2,
        heartbeat_interval_ms=5000,
        assignment=frozenset({(T.bytes, 1), (T.bytes, 0)}),
    )
    request = ShareGroupHeartbeatRequest(
        group_id="g", member_id="m-1", member_epoch=0, rack_id=None, subscribed_topic_names=["t"]
    )
    data = await call(registry, 76, bytes(request.encode(version=1)))
    r = ShareGroupHeartbeatResponse.decode(data, version=1)
    assert (r.error_code, r.member_id, r.member_epoch, r.heartbeat_interval_ms) == (0, "m-1", 2, 5000)
    assert [(t.topic_id, t.partitions) for t in r.assignment.topic_partitions] == [(T, [0, 1])]
    assert share.calls == [("g", ShareHeartbeatRequest("m-1", 0, None, ("t",), client_id="app-7"))]
    share.heartbeat_answer = ShareHeartbeatResponse(
        ErrorCode.NONE, member_id="m-1", member_epoch=2, heartbeat_interval_ms=5000
    )
    request = ShareGroupHeartbeatRequest(
        group_id="g", member_id="m-1", member_epoch=2, rack_id=None, subscribed_topic_names=None
    )
    data = await call(registry, 76, bytes(request.encode(version=1)))
    assert ShareGroupHeartbeatResponse.decode(data, version=1).assignment is None
    assert share.calls[-1] == ("g", ShareHeartbeatRequest("m-1", 2, None, None, client_id="app-7"))


async def test_describe() -> None:
    request = ShareGroupDescribeRequest(group_ids=["g", "nope"], include_authorized_operations=False)
    data = await call(registry_with(FakeShare()), 77, bytes(request.encode(version=1)))
    g, nope = ShareGroupDescribeResponse.decode(data, version=1).groups
    assert (g.error_code, g.group_state, g.group_epoch, g.assignor_name) == (0, "Stable", 3, "simple")
    [m] = g.members
    assert (m.member_id, m.member_epoch, m.client_host, m.subscribed_topic_names) == ("m-1", 3, "10.0.0.5", ["t"])
    assert [(t.topic_id, t.topic_name, t.partitions) for t in m.assignment.topic_partitions] == [(T, "t", [0, 1])]
    assert (nope.error_code, nope.group_state, nope.members) == (ErrorCode.GROUP_ID_NOT_FOUND, "", [])

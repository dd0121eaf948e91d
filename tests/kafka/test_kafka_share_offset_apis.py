"""The KIP-932 share group offset admin APIs' codec on the Kafka listener: the three APIs served at version 0 only (as
Kafka 4.1) and only where the broker serves share groups; requests laid out as Kafka's admin client writes them
decoded into the service's calls (null topics: every share-partition; one topic named twice merged), and the
answers' errors where Kafka puts them (per group, top level, per topic or per partition)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

from test_kafka_share_apis import CTX, FakeShare, call

from odradek.broker.kafka import share_offset_apis
from odradek.broker.kafka.apis import ApiRegistry
from odradek.broker.kafka.primitives import Reader, Writer
from odradek.broker.share.group_offsets import OffsetsAnswer, PartitionOffset, TopicOffsets
from odradek.client.common.request_context import RequestContext
from odradek.client.errors import ErrorCode

T = uuid.UUID(int=7)


class FakeOffsets(FakeShare):
    """Records the offset calls; answers per group."""

    async def describe_offsets(
        self, group_id: str, topics: Sequence[tuple[str, Sequence[int]]] | None, ctx: RequestContext
    ) -> OffsetsAnswer:
        self.calls.append(("describe", group_id, topics))
        if group_id != "g":
            return OffsetsAnswer(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
        return OffsetsAnswer(
            topics=(
                TopicOffsets("t", T.bytes, (PartitionOffset(0, 42, 3), PartitionOffset(1, -1, -1))),
                TopicOffsets("x", bytes(16), (PartitionOffset(0, error=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),)),
            )
        )

    async def alter_offsets(self, group_id: str, topics: Any, ctx: RequestContext) -> OffsetsAnswer:
        self.calls.append(("alter", group_id, topics))
        if group_id == "busy":
            return OffsetsAnswer(ErrorCode.NON_EMPTY_GROUP, "The group is not empty.")
        return OffsetsAnswer(topics=(TopicOffsets("t", T.bytes, (PartitionOffset(0, 5),)),))

    async def delete_offsets(self, group_id: str, topics: Sequence[str], ctx: RequestContext) -> OffsetsAnswer:
        self.calls.append(("delete", group_id, list(topics)))
        return OffsetsAnswer(
            topics=(
                TopicOffsets("t", T.bytes),
                TopicOffsets("x", bytes(16), error=ErrorCode.TOPIC_AUTHORIZATION_FAILED),
            )
        )


def registry(share: FakeShare | None) -> ApiRegistry:
    """The registry of a broker whose share service is ``share`` (None: no share groups)."""
    out = ApiRegistry()
    share_offset_apis.register(out, SimpleNamespace(share=share))  # type: ignore[arg-type]
    return out


def test_served_versions() -> None:
    served = {s.name: (s.key, s.min_version, s.max_version, s.flexible_from) for s in registry(FakeOffsets()).specs()}
    assert served == {
        "DescribeShareGroupOffsets": (90, 0, 0, 0),
        "AlterShareGroupOffsets": (91, 0, 0, 0),
        "DeleteShareGroupOffsets": (92, 0, 0, 0),
    }
    assert list(registry(None).specs()) == []
    assert CTX.client_id == "app-7"


def describe_body() -> bytes:
    """Groups: g with topics null (every share-partition), h with t [0] and t [1] (one topic twice)."""
    w = Writer()
    w.compact_array_length(2)
    w.compact_string("g")
    w.compact_array_length(-1)
    w.no_tagged_fields()
    w.compact_string("h")
    w.compact_array_length(2)
    for p in (0, 1):
        w.compact_string("t")
        w.compact_array_length(1)
        w.int32(p)
        w.no_tagged_fields()
    w.no_tagged_fields()
    w.no_tagged_fields()
    return bytes(w.buf)


async def test_describe_share_group_offsets() -> None:
    share = FakeOffsets()
    data = await call(registry(share), 90, describe_body(), version=0)
    assert share.calls == [("describe", "g", None), ("describe", "h", [("t", [0]), ("t", [1])])]
    r = Reader(data)
    assert r.int32() == 0  # throttle
    groups = []
    for _ in range(r.compact_array_length()):
        group: dict[str, Any] = {"id": r.compact_string(), "topics": []}
        for _ in range(r.compact_array_length()):
            name, topic_id = r.compact_string(), r.uuid()
            for _ in range(r.compact_array_length()):
                p = (r.int32(), r.int64(), r.int32(), r.int16(), r.compact_nullable_string())
                r.skip_tagged_fields()
                group["topics"].append((name, topic_id, p))
            r.skip_tagged_fields()
        group["error"], group["message"] = r.int16(), r.compact_nullable_string()
        r.skip_tagged_fields()
        groups.append(group)
    assert groups[0] == {
        "id": "g",
        "topics": [
            ("t", T.bytes, (0, 42, 3, 0, None)),
            ("t", T.bytes, (1, -1, -1, 0, None)),
            ("x", bytes(16), (0, -1, -1, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None)),
        ],
        "error": 0,
        "message": None,
    }
    assert groups[1] == {
        "id": "h",
        "topics": [],
        "error": ErrorCode.GROUP_ID_NOT_FOUND,
        "message": "Group h not found.",
    }


def alter_body(group: str) -> bytes:
    w = Writer()
    w.compact_string(group)
    w.compact_array_length(1)
    w.compact_string("t")
    w.compact_array_length(2)
    for p, offset in ((0, 5), (0, 7)):  # one partition twice: the last wins
        w.int32(p)
        w.int64(offset)
        w.no_tagged_fields()
    w.no_tagged_fields()
    w.no_tagged_fields()
    return bytes(w.buf)


def read_alter(data: bytes) -> tuple[int, str | None, list[tuple[str, bytes, list[tuple[int, int]]]]]:
    r = Reader(data)
    r.int32()
    error, message = r.int16(), r.compact_nullable_string()
    topics = []
    for _ in range(r.compact_array_length()):
        name, topic_id, partitions = r.compact_string(), r.uuid(), []
        for _ in range(r.compact_array_length()):
            partitions.append((r.int32(), r.int16()))
            r.compact_nullable_string()
            r.skip_tagged_fields()
        r.skip_tagged_fields()
        topics.append((name, topic_id, partitions))
    return error, message, topics


async def test_alter_share_group_offsets() -> None:
    share = FakeOffsets()
    data = await call(registry(share), 91, alter_body("g"), version=0)
    assert share.calls == [("alter", "g", [("t", [(0, 7)])])]
    assert read_alter(data) == (0, None, [("t", T.bytes, [(0, 0)])])
    data = await call(registry(share), 91, alter_body("busy"), version=0)
    assert read_alter(data) == (ErrorCode.NON_EMPTY_GROUP, "The group is not empty.", [])


async def test_delete_share_group_offsets() -> None:
    share = FakeOffsets()
    w = Writer()
    w.compact_string("g")
    w.compact_array_length(2)
    for name in ("t", "x"):
        w.compact_string(name)
        w.no_tagged_fields()
    w.no_tagged_fields()
    data = await call(registry(share), 92, bytes(w.buf), version=0)
    assert share.calls == [("delete", "g", ["t", "x"])]
    r = Reader(data)
    r.int32()
    assert (r.int16(), r.compact_nullable_string()) == (0, None)
    topics = []
    for _ in range(r.compact_array_length()):
        topics.append((r.compact_string(), r.uuid(), r.int16(), r.compact_nullable_string()))
        r.skip_tagged_fields()
    assert topics == [("t", T.bytes, 0, None), ("x", bytes(16), ErrorCode.TOPIC_AUTHORIZATION_FAILED, None)]

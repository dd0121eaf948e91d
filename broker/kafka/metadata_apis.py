"""Kafka's Metadata API on the Kafka listener, answered by the broker's own ``Metadata`` service (the one the gRPC
listener serves) and translated: every address is the broker's endpoint on the Kafka listener, never its gRPC one.

Served at v0-v13, every version Kafka defines in kafka-python 3.0.12's schemas: nothing in them needs more than the
service answers (topic ids by lookup in the image for v10+, leader epochs, offline replicas, v13's top-level error).

Topics the request names that do not exist are created by the service when the node has auto.create.topics.enable
and the request allows it: v4+ say so in allow_auto_topic_creation, and Kafka lets v0-v3 always create (see
broker/auto_create.py for the answers).
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Iterable
from typing import Any

from kafka.protocol.metadata import MetadataRequest, MetadataResponse

from odradek.broker.api import metadata as api
from odradek.broker.api.metadata import BrokerNode, TopicMetadata
from odradek.broker.kafka.apis import ApiRegistry, schema_api
from odradek.broker.kafka.backend import KafkaBackend
from odradek.broker.kafka.wire import KafkaContext
from odradek.client.errors import ErrorCode

METADATA_VERSIONS = (0, 13)

# Kafka's code for a topic id no topic has; odradek's ErrorCode has no such value (gRPC names topics).
UNKNOWN_TOPIC_ID = 100
ZERO_UUID = uuid.UUID(int=0)


def topic_uuid(topic_id: bytes) -> uuid.UUID:
    """A topic's 16-byte id from the metadata image as Kafka's UUID (the zero UUID for none)."""
    return uuid.UUID(bytes=topic_id) if len(topic_id) == 16 else ZERO_UUID


def client_controller_id(backend: KafkaBackend, controller_id: int, brokers: Collection[int]) -> int:
    """The controller id to give a Kafka client, which sends its controller-bound admin requests there.

    odradek's controllers need not be brokers and have no Kafka listener, while any broker forwards admin writes
    to the active controller: so the active controller only when it is a broker with a Kafka address (in
    ``brokers``), else this broker, else any such broker (KRaft Kafka answers a random live broker too)."""
    if controller_id in brokers:
        return controller_id
    if backend.broker_id in brokers:
        return backend.broker_id
    return min(brokers, default=-1)


def kafka_brokers(backend: KafkaBackend, nodes: Iterable[BrokerNode]) -> dict[int, tuple[str, int, str | None]]:
    """node id -> (host, port, rack) on the Kafka listener, for the service's brokers that have an address there."""
    out = {}
    for n in nodes:
        endpoint = backend.endpoint(n.broker_id)
        if endpoint is not None:
            out[n.broker_id] = (endpoint[0], endpoint[1], n.rack or None)
    return out


def register(registry: ApiRegistry, backend: KafkaBackend) -> None:
    registry.add(*schema_api(MetadataRequest, *METADATA_VERSIONS, _metadata_handler(backend)))


def _metadata_handler(backend: KafkaBackend):
    async def metadata(ctx: KafkaContext, version: int, request: Any) -> Any:
        image = backend.image()
        # v0: an empty list asks for every topic; v1+: null does, and an empty list asks for none.
        every = request.topics is None or (version == 0 and not request.topics)
        names: list[str] = []
        unknown_ids: list[uuid.UUID] = []
        for t in request.topics or ():
            name = t.name
            topic_id = getattr(t, "topic_id", None) if version >= 10 else None
            if name is None and topic_id is not None and topic_id != ZERO_UUID:
                # v10+ may name a topic by id only: the image resolves it, the service answers by name.
                found = image.topics.get(topic_id.bytes)
                if found is None:
                    unknown_ids.append(topic_id)
                    continue
                name = found.name
            if name is not None and name not in names:
                names.append(name)
        allow = version < 4 or bool(request.allow_auto_topic_creation)
        asked = api.MetadataRequest(None if every else names, allow)
        answer = await backend.data.metadata.metadata(asked, ctx.request_context)
        brokers = kafka_brokers(backend, answer.brokers)
        topics = [_topic(t, brokers) for t in answer.topics]
        topics += [
            MetadataResponse.MetadataResponseTopic(
                error_code=UNKNOWN_TOPIC_ID,
                name=None if version >= 12 else "",
                topic_id=i,
                is_internal=False,
                partitions=[],
                authorized_operations=None,
            )
            for i in unknown_ids
        ]
        return MetadataResponse(
            version=version,
            throttle_time_ms=0,
            brokers=[
                MetadataResponse.MetadataResponseBroker(node_id=node, host=host, port=port, rack=rack)
                for node, (host, port, rack) in sorted(brokers.items())
            ],
            cluster_id=answer.cluster_id or None,
            controller_id=client_controller_id(backend, answer.controller_id, brokers),
            topics=topics,
            authorized_operations=None,  # -2147483648: not computed
            error_code=ErrorCode.NONE,
        )

    return metadata


def _topic(t: TopicMetadata, brokers: Collection[int]) -> Any:
    partitions = []
    for p in t.partitions:
        error, leader = p.error, p.leader
        if error == ErrorCode.NONE and leader not in brokers:
            # Live, but without an address on this listener: the client cannot reach it here (retriable).
            error, leader = ErrorCode.LEADER_NOT_AVAILABLE, -1
        partitions.append(
            MetadataResponse.MetadataResponseTopic.MetadataResponsePartition(
                error_code=error,
                partition_index=p.partition,
                leader_id=leader,
                leader_epoch=p.leader_epoch,
                replica_nodes=list(p.replicas),
                isr_nodes=list(p.isr),
                offline_replicas=list(p.offline_replicas),
            )
        )
    return MetadataResponse.MetadataResponseTopic(
        error_code=t.error,
        name=t.name,
        topic_id=topic_uuid(t.topic_id),
        is_internal=t.is_internal,
        partitions=partitions,
        authorized_operations=None,  # -2147483648: not computed
    )

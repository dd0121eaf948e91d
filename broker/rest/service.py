"""The HTTP API's service: each typed request (requests.py) served by the broker's own services, called in this
process as the Kafka listener's handlers and the gRPC servicers call them (a sibling adapter): the typed data
service (``broker/api/``: produce, fetch, ListOffsets, log dirs), the group service and the admin service behind
``AdminApi``, each with the caller's ``RequestContext`` (``Call.request_context``: the principal the HTTP API
established, the client's address, the HTTP API's client id), so that every ACL check, forwarding of admin writes
to the active controller and answer is the one the other listeners give. The typed answers are translated by
resources.py.

A request that belongs to one broker is forwarded to that broker's HTTP listener (``Call.forward``): a record
produced to, or read from, a partition this broker does not lead goes to its leader; a consumer group's requests
go to its coordinator; a broker's configs to that broker. The group listing asks every broker for the groups it
coordinates (``Call.fan_out``). Before forwarding, this broker checks the caller's ACL for the operation with the
caller's own address (the broker forwarded to sees this broker's): a host-specific DENY is applied here, and the
broker forwarded to applies the caller's principal's ACLs again.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple
from urllib.parse import urlencode

from odradek.broker.api.data import (
    DataService,
    FetchAnswer,
    FetchRequest,
    FetchTopic,
    ListedOffset,
    ListOffsetsRequest,
    OffsetQuery,
    ProduceResult,
)
from odradek.broker.api.replicas import ReplicaService
from odradek.broker.config import NodeConfig
from odradek.broker.fetch_session import PartitionRead
from odradek.broker.groups.group_service import GroupService
from odradek.broker.groups.lag import EndOffsetPoller
from odradek.broker.groups.records import OFFSETS_TOPIC
from odradek.broker.groups.requests import (
    GROUP_KEY,
    DescribedGroup,
    DescribeGroups,
    FindCoordinator,
    ListGroups,
    OffsetFetch,
)
from odradek.broker.http_types import HttpReply, HttpRequest
from odradek.broker.kafka.admin_apis import STATIC_BROKER_CONFIGS
from odradek.broker.quotas.manager import QuotaKind
from odradek.broker.rest import errors, records, resources
from odradek.broker.rest import requests as rq
from odradek.broker.rest.quotas import HttpQuotas, too_many_requests
from odradek.broker.rest.resources import Lag, Links, collection
from odradek.client.admin_groups import member_assignment as assigned_partitions
from odradek.client.common.access import AccessControl
from odradek.client.common.acls import AclOperation, ResourceType
from odradek.client.common.admin.acls import CreateAcls, DeleteAcls, DescribeAcls
from odradek.client.common.admin.api import AdminApi
from odradek.client.common.admin.cluster import DescribeCluster, DescribeClusterAnswer
from odradek.client.common.admin.configs import (
    AlterableConfig,
    AlterOp,
    AlterTopicConfigs,
    ConfigEntry,
    ConfigSource,
    DescribeConfigs,
    DescribedConfig,
    IncrementalAlterConfigs,
)
from odradek.client.common.admin.topics import (
    CreatableTopic,
    CreateTopics,
    DeleteTopics,
    DescribeTopics,
    PartitionDescription,
    TopicDescription,
)
from odradek.client.common.caller import Caller
from odradek.client.common.metadata_image import MetadataImage
from odradek.client.common.request_context import RequestContext
from odradek.client.errors import ErrorCode
from odradek.client.structs import TopicPartition

PRODUCE_TIMEOUT_MS = 30_000  # acks=all: how long a record may wait for the in-sync replicas
ADMIN_TIMEOUT_MS = 30_000
PARTITION_HEADER = "x-odradek-partition"  # on a produce forwarded to the leader: the partition chosen
EARLIEST_TIMESTAMP, LATEST_TIMESTAMP = -2, -1  # ListOffsets' special timestamps
READ_UNCOMMITTED = 0  # a fetch's and a ListOffsets' isolation level


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    body: object | None = None  # None: no body (204)


Reply = Answer | HttpReply  # an HttpReply is another broker's answer, relayed as it is


@dataclass(frozen=True)
class Services:
    """The broker's services the API calls (the typed services the other listeners' adapters call), and what it
    reads besides."""

    node_id: int
    cluster_id: str
    config: NodeConfig
    image: Callable[[], MetadataImage]
    admin: AdminApi  # topics, configs, ACLs, the cluster, SCRAM credentials, client quotas
    data: DataService  # produce, fetch, ListOffsets (and the broker's metrics)
    replicas: ReplicaService  # this broker's log dirs
    groups: GroupService
    access: AccessControl
    wall_ms: Callable[[], int]


@dataclass(frozen=True)
class Call:
    """One request being served: who asks (``request_context``, as the services take it), its URLs, and how to
    hand it to another broker."""

    http: HttpRequest
    links: Links
    request_context: RequestContext  # the caller's principal, the client's address, the HTTP API's client id
    forwarded: bool  # it came from another broker: it is served here or refused, never forwarded again
    local_only: bool  # the group listing of this broker alone (another broker's fan-out)
    forward: Callable[[int, tuple[tuple[str, str], ...]], Awaitable[HttpReply]]
    fan_out: Callable[[], Awaitable[list[tuple[int, HttpReply]]]]

    @property
    def caller(self) -> Caller:
        """Whom to authorize the request as: the principal, from the client's address."""
        return self.request_context.caller


class Fetched(NamedTuple):
    """One partition's read as the HTTP API uses it, from this broker's data service or another broker's gRPC
    answer: an error's high watermark and log start are -1, as the gRPC answer has them."""

    error: int
    high_watermark: int
    log_start_offset: int
    records: bytes


class Appended(NamedTuple):
    """One partition's produce result as the HTTP API uses it (an error's offset and time are -1)."""

    error: int
    error_message: str
    base_offset: int
    log_append_time_ms: int


def consumer_fetch(
    topic: str, partition: int, offset: int, max_bytes: int, max_wait_ms: int, min_bytes: int
) -> FetchRequest:
    """A consumer's read_uncommitted fetch of one partition from ``offset``, as the data service takes it."""
    wanted = PartitionRead(partition, offset, max_bytes, -1, -1, -1, -1)
    return FetchRequest(-1, -1, max_wait_ms, min_bytes, max_bytes, READ_UNCOMMITTED, [FetchTopic(topic, [wanted])])


def fetched_of(answer: FetchAnswer) -> Fetched:
    """The one partition a ``consumer_fetch`` asked for, from the data service's answer (the request's own error
    checked first)."""
    _check(answer.error)
    if not answer.outcomes:  # held back by the caller's fetch quota, before reading anything
        raise too_many_requests(QuotaKind.FETCH, answer.throttle_ms)
    outcome = answer.outcomes[0][1][0]
    read, error = outcome.read, outcome.error
    if read is None:
        assert error is not None
        return Fetched(error.code, -1, -1, b"")
    assert read.data is not None  # a consumer's read never diverges
    return Fetched(ErrorCode.NONE, read.high_watermark, read.log_start_offset, bytes(read.data.records))


def list_offsets_request(topics: Sequence[tuple[str, Sequence[int]]], timestamp: int) -> ListOffsetsRequest:
    """ListOffsets of each topic's partitions for ``timestamp`` (a time, or EARLIEST or LATEST), read_uncommitted."""
    return ListOffsetsRequest(READ_UNCOMMITTED, [(t, [OffsetQuery(p, timestamp, -1) for p in ps]) for t, ps in topics])


def listed_offset(o: ListedOffset) -> tuple[int, int]:
    """(error code, offset) of one partition the data service listed (-1 with an error)."""
    return (ErrorCode.NONE, o.offset) if o.error is None else (o.error.code, -1)


def appended(r: ProduceResult) -> Appended:
    """One partition's result from the data service's produce answer."""
    if r.error is None:
        return Appended(ErrorCode.NONE, "", r.base_offset, r.log_append_time_ms)
    return Appended(r.error.code, str(r.error), -1, -1)


def _check(code: int, message: str = "", topic: str | None = None) -> None:
    if code == ErrorCode.NONE:
        return
    if code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and topic is not None:
        raise errors.unknown_topic(topic)
    raise errors.for_kafka_code(code, message)


def _found(items: Sequence[Any], what: str) -> Any:
    if not items:
        raise errors.resource_not_found(what)
    return items[0]


@dataclass
class RestService:
    s: Services
    pick: Callable[[int], int] = random.randrange  # a partition for a record without key or partition
    _handlers: dict[type, Callable[[Any, Call], Awaitable[Reply]]] = field(init=False)
    _wanted: set[TopicPartition] = field(init=False, default_factory=set)
    _ends_lock: asyncio.Lock = field(init=False, default_factory=asyncio.Lock)
    quotas: HttpQuotas = field(init=False)

    def __post_init__(self) -> None:
        self.quotas = HttpQuotas(self.s.data.quotas)
        self._poller = EndOffsetPoller(lambda: self._wanted, self.s.image)
        self._handlers = {
            rq.ListClusters: self._clusters,
            rq.GetCluster: self._cluster,
            rq.ListClusterConfigs: self._cluster_configs,
            rq.GetClusterConfig: self._cluster_configs,
            rq.ListBrokers: self._brokers,
            rq.GetBroker: self._brokers,
            rq.ListBrokerConfigs: self._broker_configs,
            rq.GetBrokerConfig: self._broker_configs,
            rq.ListBrokerReplicas: self._broker_replicas,
            rq.ListTopics: self._topics,
            rq.CreateTopic: self._create_topic,
            rq.GetTopic: self._topic,
            rq.DeleteTopic: self._delete_topic,
            rq.ListPartitions: self._partitions,
            rq.GetPartition: self._partitions,
            rq.ListReplicas: self._replicas,
            rq.GetReplica: self._replicas,
            rq.ListReassignments: self._reassignments,
            rq.GetReassignment: self._reassignments,
            rq.ListTopicConfigs: self._topic_configs,
            rq.GetTopicConfig: self._topic_configs,
            rq.AlterTopicConfigs: self._alter_configs,
            rq.ProduceRecord: self._produce,
            rq.ReadRecords: self._read,
            rq.ListGroups: self._groups,
            rq.GetGroup: self._group,
            rq.ListConsumers: self._consumers,
            rq.GetConsumer: self._consumers,
            rq.ListAssignments: self._assignments,
            rq.GetAssignment: self._assignments,
            rq.ListLags: self._lags,
            rq.GetLag: self._lags,
            rq.GetLagSummary: self._lags,
            rq.SearchAcls: self._search_acls,
            rq.CreateAcl: self._create_acl,
            rq.DeleteAcls: self._delete_acls,
        }

    async def close(self) -> None:
        await self._poller.close()

    async def serve(self, request: rq.Request, call: Call) -> Reply:
        if isinstance(request, rq.GROUP_REQUESTS):
            coordinator = await self._coordinator(request.group, call)
            if coordinator != self.s.node_id:
                return await self._elsewhere(
                    call, coordinator, AclOperation.DESCRIBE, ResourceType.GROUP, request.group
                )
        return await self._handlers[type(request)](request, call)

    async def _elsewhere(
        self,
        call: Call,
        broker: int,
        operation: AclOperation,
        kind: ResourceType,
        name: str,
        headers: tuple[tuple[str, str], ...] = (),
    ) -> HttpReply:
        """Forward to ``broker`` once the caller may perform ``operation`` here (see the module doc)."""
        self._allowed(call, operation, kind, name)
        if call.forwarded:
            raise errors.retriable(f"broker {self.s.node_id} no longer serves this request (broker {broker} does)")
        return await call.forward(broker, headers)

    def _allowed(self, call: Call, operation: AclOperation, kind: ResourceType, name: str) -> None:
        access = self.s.access
        if access.enabled and not access.allows(call.caller, operation, kind, name, api="HTTP"):
            what = "the cluster" if kind is ResourceType.CLUSTER else f"{kind.display_name} {name!r}"
            message = f"{call.caller.principal} is not authorized to {operation.display_name} {what}"
            raise errors.RestError(403, errors.KAFKA_AUTHORIZATION, message)

    # ---- cluster and brokers ----

    async def _describe_cluster(self, call: Call) -> DescribeClusterAnswer:
        answer = await self.s.admin.describe_cluster(DescribeCluster(), call.request_context)
        _check(answer.error)
        return answer

    async def _clusters(self, r: rq.ListClusters, call: Call) -> Reply:
        d = await self._describe_cluster(call)
        data = resources.cluster(call.links, d.controller_id, [b.node_id for b in d.brokers])
        return Answer(200, collection("Cluster", call.links.base + "/v3/clusters", [data]))

    async def _cluster(self, r: rq.GetCluster, call: Call) -> Reply:
        d = await self._describe_cluster(call)
        return Answer(200, resources.cluster(call.links, d.controller_id, [b.node_id for b in d.brokers]))

    async def _brokers(self, r: rq.ListBrokers | rq.GetBroker, call: Call) -> Reply:
        found = [resources.broker(call.links, b) for b in (await self._describe_cluster(call)).brokers]
        if isinstance(r, rq.GetBroker):
            return Answer(200, _found([b for b in found if b["broker_id"] == r.broker_id], f"Broker {r.broker_id}"))
        return Answer(200, collection("Broker", call.links.url("brokers"), found))

    async def _defaults(self, call: Call) -> list[DescribedConfig]:
        """The dynamic broker configs with their values on this broker (DescribeConfigs: cluster DescribeConfigs)."""
        answer = await self.s.admin.describe_configs(DescribeConfigs(cluster_defaults=True), call.request_context)
        _check(answer.cluster_defaults_error or answer.error)
        return list(answer.cluster_defaults)

    async def _cluster_configs(self, r: rq.ListClusterConfigs | rq.GetClusterConfig, call: Call) -> Reply:
        found = [c for c in await self._defaults(call) if c.source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG]
        data = [resources.cluster_config(call.links, c) for c in found]
        if isinstance(r, rq.GetClusterConfig):
            return Answer(200, _found([c for c in data if c["name"] == r.name], f"Cluster config {r.name}"))
        return Answer(200, collection("ClusterConfig", call.links.url("broker-configs"), data))

    async def _broker_configs(self, r: rq.ListBrokerConfigs | rq.GetBrokerConfig, call: Call) -> Reply:
        """A broker's configs as Kafka's DescribeConfigs of its broker resource answers them, by that broker: the
        dynamic broker configs with their values there, and the static configs it runs with."""
        if r.broker_id != self.s.node_id:
            if r.broker_id not in self.s.image().brokers:
                raise errors.resource_not_found(f"Broker {r.broker_id}")
            return await self._elsewhere(call, r.broker_id, AclOperation.DESCRIBE_CONFIGS, ResourceType.CLUSTER, "")
        config = self.s.config
        static = [
            DescribedConfig(
                name=name,
                value=s.text(config[s.key]) or "",
                source=ConfigSource.STATIC_BROKER_CONFIG if config.is_set(s.key) else ConfigSource.DEFAULT_CONFIG,
                read_only=s.read_only,
            )
            for name, s in sorted(STATIC_BROKER_CONFIGS.items())
        ]
        found = [*await self._defaults(call), *static]
        data = [resources.broker_config(call.links, r.broker_id, c) for c in found]
        if isinstance(r, rq.GetBrokerConfig):
            return Answer(200, _found([c for c in data if c["name"] == r.name], f"Broker config {r.name}"))
        return Answer(200, collection("BrokerConfig", call.links.url("brokers", r.broker_id, "configs"), data))

    async def _broker_replicas(self, r: rq.ListBrokerReplicas, call: Call) -> Reply:
        if r.broker_id not in self.s.image().brokers:
            raise errors.resource_not_found(f"Broker {r.broker_id}")
        data = [
            resources.replica(call.links, t.name, p, r.broker_id)
            for t in await self._describe_all(call)
            for p in t.partitions
            if r.broker_id in p.replicas
        ]
        return Answer(200, collection("Replica", call.links.url("brokers", r.broker_id, "partition-replicas"), data))

    # ---- topics and partitions ----

    async def _describe_all(self, call: Call) -> list[TopicDescription]:
        """Every topic the caller may describe, internal ones too, by name."""
        answer = await self.s.admin.describe_topics(DescribeTopics(include_internal=True), call.request_context)
        return sorted((t for t in answer.topics if t.error == ErrorCode.NONE), key=lambda t: t.name)

    async def _describe(self, name: str, call: Call) -> TopicDescription:
        request = DescribeTopics(names=(name,), include_internal=True)
        answer = await self.s.admin.describe_topics(request, call.request_context)
        t = _found([t for t in answer.topics if t.name == name], f"Topic {name}")
        _check(t.error, t.error_message, topic=name)
        return t

    @staticmethod
    def _partition(t: TopicDescription, index: int) -> PartitionDescription:
        found = [p for p in t.partitions if p.partition == index]
        if not found:
            raise errors.partition_not_found(t.name, index)
        return found[0]

    async def _topics(self, r: rq.ListTopics, call: Call) -> Reply:
        data = [resources.described_topic(call.links, t) for t in await self._describe_all(call)]
        return Answer(200, collection("Topic", call.links.url("topics"), data))

    async def _topic(self, r: rq.GetTopic, call: Call) -> Reply:
        return Answer(200, resources.described_topic(call.links, await self._describe(r.topic, call)))

    async def _create_topic(self, r: rq.CreateTopic, call: Call) -> Reply:
        creatable = CreatableTopic(
            name=r.topic,
            num_partitions=r.partitions,
            replication_factor=r.replication_factor,
            configs=tuple(ConfigEntry(n, v) for n, v in r.configs),
            assignments=r.assignments,
        )
        request = CreateTopics((creatable,), timeout_ms=ADMIN_TIMEOUT_MS, validate_only=r.validate_only)
        answer = await self.s.admin.create_topics(request, call.request_context)
        result = _found(list(answer.topics), f"Topic {r.topic}")
        _check(result.error, result.error_message)
        if result.num_partitions > 0:
            data = resources.topic(call.links, r.topic, False, result.num_partitions, result.replication_factor)
        else:
            data = resources.described_topic(call.links, await self._describe(r.topic, call))
        return Answer(201, data)

    async def _delete_topic(self, r: rq.DeleteTopic, call: Call) -> Reply:
        request = DeleteTopics((r.topic,), timeout_ms=ADMIN_TIMEOUT_MS)
        answer = await self.s.admin.delete_topics(request, call.request_context)
        result = _found(list(answer.topics), f"Topic {r.topic}")
        _check(result.error, result.error_message, topic=r.topic)
        return Answer(204)

    async def _partitions(self, r: rq.ListPartitions | rq.GetPartition, call: Call) -> Reply:
        t = await self._describe(r.topic, call)
        if isinstance(r, rq.GetPartition):
            return Answer(200, resources.partition(call.links, t.name, self._partition(t, r.partition)))
        data = [resources.partition(call.links, t.name, p) for p in sorted(t.partitions, key=lambda p: p.partition)]
        return Answer(200, collection("Partition", call.links.url("topics", t.name, "partitions"), data))

    async def _replicas(self, r: rq.ListReplicas | rq.GetReplica, call: Call) -> Reply:
        p = self._partition(await self._describe(r.topic, call), r.partition)
        data = [resources.replica(call.links, r.topic, p, b) for b in p.replicas]
        if isinstance(r, rq.GetReplica):
            return Answer(200, _found([d for d in data if d["broker_id"] == r.broker_id], f"Replica {r.broker_id}"))
        return Answer(200, collection("Replica", call.links.url("topics", r.topic, "partitions", r.partition), data))

    async def _reassignments(self, r: rq.ListReassignments | rq.GetReassignment, call: Call) -> Reply:
        if isinstance(r, rq.GetReassignment):
            p = self._partition(await self._describe(r.topic, call), r.partition)
            return Answer(200, resources.reassignment(call.links, r.topic, p))
        topics = await self._describe_all(call) if r.topic is None else [await self._describe(r.topic, call)]
        data = [
            resources.reassignment(call.links, t.name, p)
            for t in topics
            for p in t.partitions
            if p.adding_replicas or p.removing_replicas
        ]
        parts = ("topics", "-" if r.topic is None else r.topic, "partitions", "-", "reassignment")
        return Answer(200, collection("Reassignment", call.links.url(*parts), data))

    # ---- topic configs ----

    async def _topic_configs(self, r: rq.ListTopicConfigs | rq.GetTopicConfig, call: Call) -> Reply:
        names = (r.name,) if isinstance(r, rq.GetTopicConfig) else ()
        request = DescribeConfigs(topics=(r.topic,), config_names=names)
        answer = await self.s.admin.describe_configs(request, call.request_context)
        _check(answer.error)
        t = _found(list(answer.topics), f"Topic {r.topic}")
        _check(t.error, t.error_message, topic=r.topic)
        data = [resources.topic_config(call.links, r.topic, c) for c in t.configs]
        if isinstance(r, rq.GetTopicConfig):
            return Answer(200, _found([c for c in data if c["name"] == r.name], f"Config {r.name}"))
        return Answer(200, collection("TopicConfig", call.links.url("topics", r.topic, "configs"), data))

    async def _alter_configs(self, r: rq.AlterTopicConfigs, call: Call) -> Reply:
        configs = tuple(AlterableConfig(c.name, AlterOp[c.operation], c.value) for c in r.changes)
        request = IncrementalAlterConfigs((AlterTopicConfigs(r.topic, configs),), validate_only=r.validate_only)
        answer = await self.s.admin.incremental_alter_configs(request, call.request_context)
        _check(answer.error)
        result = _found(list(answer.results), f"Topic {r.topic}")
        _check(result.error, result.error_message, topic=r.topic)
        return Answer(204)

    # ---- records ----

    def _leader(self, topic: str, partition: int) -> tuple[int, int]:
        """(partition, its leader) of a record or read; 404 for an unknown topic or partition."""
        found = self.s.image().topic(topic)
        if found is None:
            raise errors.unknown_topic(topic)
        if partition not in found.partitions:
            raise errors.partition_not_found(topic, partition)
        leader = found.partitions[partition].leader
        if leader < 0:
            raise errors.unavailable(f"partition {partition} of topic {topic} has no leader at the moment")
        return partition, leader

    async def _produce(self, r: rq.ProduceRecord, call: Call) -> Reply:
        """One record, appended by the partition's leader with acks=all: answered once the in-sync replicas have
        it. A record the broker refuses (too large, not authorized) is written nowhere."""
        self._allowed(call, AclOperation.WRITE, ResourceType.TOPIC, r.topic)
        topic = self.s.image().topic(r.topic)
        if topic is None:
            raise errors.unknown_topic(r.topic)
        chosen = call.http.header(PARTITION_HEADER.encode()) if call.forwarded else None
        index = (
            int(chosen)
            if chosen is not None and chosen.isdigit()
            else records.partition_of(r, len(topic.partitions), self.pick)
        )
        partition, leader = self._leader(r.topic, index)
        if leader != self.s.node_id:
            extra = ((PARTITION_HEADER, str(partition)),)
            return await self._elsewhere(call, leader, AclOperation.WRITE, ResourceType.TOPIC, r.topic, extra)
        self.quotas.admit(call.request_context, QuotaKind.PRODUCE)  # refused before the append: nothing written
        timestamp = r.timestamp_ms if r.timestamp_ms is not None else self.s.wall_ms()
        batch = records.encode(r, timestamp)
        topics = [(r.topic, [(partition, batch)])]
        answers, _ = await self.s.data.produce(-1, PRODUCE_TIMEOUT_MS, None, topics, call.request_context)
        result = appended(answers[0][1][0])
        _check(result.error, result.error_message, topic=r.topic)
        written = result.log_append_time_ms if result.log_append_time_ms >= 0 else timestamp
        key = None if r.key is None else (r.key.type, len(r.key.data or b""))
        value = None if r.value is None else (r.value.type, len(r.value.data or b""))
        return Answer(200, resources.produced(call.links, r.topic, partition, result.base_offset, written, key, value))

    async def _offset_at(self, r: rq.ReadRecords, call: Call, timestamp: int) -> int:
        request = list_offsets_request([(r.topic, [r.partition])], timestamp)
        answer = await self.s.data.list_offsets(request, call.request_context)
        error, offset = listed_offset(answer[0][1][0])
        _check(error, "", topic=r.topic)
        return offset

    async def _start(self, r: rq.ReadRecords, call: Call) -> int:
        if r.timestamp_ms is not None:
            found = await self._offset_at(r, call, r.timestamp_ms)
            # No record at or after the time yet: wait for the next one from the end.
            return found if found >= 0 else await self._offset_at(r, call, LATEST_TIMESTAMP)
        if isinstance(r.offset, int):
            return r.offset
        return await self._offset_at(r, call, EARLIEST_TIMESTAMP if r.offset == rq.EARLIEST else LATEST_TIMESTAMP)

    async def _read(self, r: rq.ReadRecords, call: Call) -> Reply:
        """odradek's bounded read: the partition leader's fetch (read_uncommitted), as a consumer's."""
        self._allowed(call, AclOperation.READ, ResourceType.TOPIC, r.topic)
        partition, leader = self._leader(r.topic, r.partition)
        if leader != self.s.node_id:
            return await self._elsewhere(call, leader, AclOperation.READ, ResourceType.TOPIC, r.topic)
        self.quotas.admit(call.request_context, QuotaKind.FETCH)
        start = await self._start(r, call)
        request = consumer_fetch(r.topic, partition, start, r.max_bytes, r.timeout_ms, min_bytes=1)
        fetched = fetched_of(await self.s.data.fetch(request, call.request_context))
        if fetched.error == ErrorCode.OFFSET_OUT_OF_RANGE:
            bounds_now = f"log start {fetched.log_start_offset}, high watermark {fetched.high_watermark}"
            raise errors.for_kafka_code(fetched.error, f"offset {start} is out of range ({bounds_now})")
        _check(fetched.error, "", topic=r.topic)
        read = records.select(fetched.records, start, r.max_records, r.max_bytes)
        url = call.links.url("topics", r.topic, "partitions", partition, "records")
        bounds = {"max_records": r.max_records, "max_bytes": r.max_bytes, "timeout_ms": r.timeout_ms}
        return Answer(
            200,
            {
                "kind": "KafkaRecordList",
                "metadata": {
                    "self": f"{url}?{urlencode({'offset': start, **bounds})}",
                    "next": f"{url}?{urlencode({'offset': read.next_offset, **bounds})}",
                },
                "cluster_id": call.links.cluster_id,
                "topic_name": r.topic,
                "partition_id": partition,
                "next_offset": read.next_offset,
                "high_watermark": fetched.high_watermark,
                "log_start_offset": fetched.log_start_offset,
                "data": [resources.record(call.links, r.topic, partition, x) for x in read.records],
            },
        )

    # ---- consumer groups ----

    async def _coordinator(self, group: str, call: Call) -> int:
        if self.s.image().topic(OFFSETS_TOPIC) is None:  # no group has ever committed or joined
            raise errors.resource_not_found(f"Consumer group {group}")
        answer = await self.s.groups.find_coordinator(FindCoordinator(GROUP_KEY, (group,)), call.request_context)
        found = answer.coordinators[0]
        _check(found.error, found.error_message or "")
        return found.node_id

    async def _groups(self, r: rq.ListGroups, call: Call) -> Reply:
        """Every broker's groups: this broker's own, and (unless asked for those alone) what every other broker
        answers for its own."""
        answer = await self.s.groups.list_groups(ListGroups(), call.request_context)
        _check(answer.error)
        data = [resources.listed_group(call.links, g, self.s.node_id) for g in answer.groups]
        if not call.local_only:
            for broker, reply in await call.fan_out():
                if reply.status != 200:
                    detail = reply.body.decode(errors="replace")
                    raise errors.retriable(f"broker {broker} did not list its consumer groups: {detail}")
                data += [g for g in json.loads(reply.body)["data"] if self._visible(call, g["consumer_group_id"])]
        data.sort(key=lambda g: str(g["consumer_group_id"]))
        return Answer(200, collection("ConsumerGroup", call.links.url("consumer-groups"), data))

    def _visible(self, call: Call, group: str) -> bool:
        """May the caller see another broker's group from its own address (as ListGroups decides)?"""
        access = self.s.access
        return (
            not access.enabled
            or access.allows_cluster(call.caller, AclOperation.DESCRIBE, audit_denial=False)
            or access.allows(call.caller, AclOperation.DESCRIBE, ResourceType.GROUP, group, audit_denial=False)
        )

    async def _described(self, group: str, call: Call) -> DescribedGroup:
        answer = await self.s.groups.describe_groups(DescribeGroups((group,)), call.request_context)
        g = answer.groups[0]
        _check(g.error)
        if g.group_state == "Dead":  # Kafka describes a group it does not know as Dead
            raise errors.resource_not_found(f"Consumer group {group}")
        return g

    async def _group(self, r: rq.GetGroup, call: Call) -> Reply:
        return Answer(200, resources.group(call.links, await self._described(r.group, call), self.s.node_id))

    async def _consumers(self, r: rq.ListConsumers | rq.GetConsumer, call: Call) -> Reply:
        members = sorted((await self._described(r.group, call)).members, key=lambda m: m.member_id)
        data = [resources.consumer(call.links, r.group, m) for m in members]
        if isinstance(r, rq.GetConsumer):
            return Answer(200, _found([c for c in data if c["consumer_id"] == r.consumer], f"Consumer {r.consumer}"))
        return Answer(200, collection("Consumer", call.links.url("consumer-groups", r.group, "consumers"), data))

    async def _assignments(self, r: rq.ListAssignments | rq.GetAssignment, call: Call) -> Reply:
        g = await self._described(r.group, call)
        member = _found([m for m in g.members if m.member_id == r.consumer], f"Consumer {r.consumer}")
        partitions = sorted(assigned_partitions(g.protocol_type, member.member_assignment))
        data = [resources.assignment(call.links, r.group, r.consumer, tp) for tp in partitions]
        if isinstance(r, rq.GetAssignment):
            wanted = [d for d, tp in zip(data, partitions) if tp == TopicPartition(r.topic, r.partition)]
            return Answer(200, _found(wanted, f"Assignment {r.topic}-{r.partition}"))
        url = call.links.url("consumer-groups", r.group, "consumers", r.consumer, "assignments")
        return Answer(200, collection("ConsumerAssignment", url, data))

    async def _lags(self, r: rq.ListLags | rq.GetLag | rq.GetLagSummary, call: Call) -> Reply:
        """The group's committed offsets (OffsetFetch, as the caller), each partition's end now (ListOffsets of its
        leader) and the member it is assigned to."""
        g = await self._described(r.group, call)
        answer = await self.s.groups.offset_fetch(OffsetFetch(r.group, None), call.request_context)
        _check(answer.error)
        committed = {
            TopicPartition(t.name, p.partition): p.committed_offset
            for t in answer.topics
            for p in t.partitions
            if p.error == ErrorCode.NONE and p.committed_offset >= 0
        }
        ends = await self._ends(set(committed))
        owners = {tp: m for m in g.members for tp in assigned_partitions(g.protocol_type, m.member_assignment)}
        lags = [Lag(tp, offset, ends[tp], owners.get(tp)) for tp, offset in sorted(committed.items()) if tp in ends]
        if isinstance(r, rq.GetLagSummary):
            return Answer(200, resources.lag_summary(call.links, r.group, lags))
        data = [resources.lag(call.links, r.group, x) for x in lags]
        if isinstance(r, rq.GetLag):
            wanted = [d for d, x in zip(data, lags) if x.tp == TopicPartition(r.topic, r.partition)]
            return Answer(200, _found(wanted, f"Lag of {r.topic}-{r.partition}"))
        return Answer(200, collection("ConsumerLag", call.links.url("consumer-groups", r.group, "lags"), data))

    async def _ends(self, partitions: set[TopicPartition]) -> dict[TopicPartition, int]:
        """The partitions' high watermarks now, asked of their leaders (one request at a time through the poller the
        coordinator's lag metrics use); a partition whose leader does not answer is left out."""
        async with self._ends_lock:
            self._wanted = partitions
            await self._poller.poll_once()
            return {tp: end for tp, end in self._poller.ends.items() if tp in partitions}

    # ---- ACLs ----

    async def _search_acls(self, r: rq.SearchAcls, call: Call) -> Reply:
        answer = await self.s.admin.describe_acls(DescribeAcls(r.filter), call.request_context)
        _check(answer.error, answer.error_message)
        data = [resources.acl(call.links, b) for b in answer.bindings]
        return Answer(200, collection("Acl", call.links.url("acls"), data))

    async def _create_acl(self, r: rq.CreateAcl, call: Call) -> Reply:
        answer = await self.s.admin.create_acls(CreateAcls((r.binding,)), call.request_context)
        _check(answer.error)
        result = _found(list(answer.results), "ACL")
        _check(result.error, result.error_message)
        return Answer(201, resources.acl(call.links, r.binding))

    async def _delete_acls(self, r: rq.DeleteAcls, call: Call) -> Reply:
        answer = await self.s.admin.delete_acls(DeleteAcls((r.filter,)), call.request_context)
        _check(answer.error)
        result = _found(list(answer.results), "ACL")
        _check(result.error, result.error_message)
        data = [resources.acl(call.links, b) for b in result.deleted]
        return Answer(200, collection("Acl", call.links.url("acls"), data))

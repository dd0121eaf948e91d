"""The admin client: cluster, quorum, brokers, topics, leadership, reassignments, client quotas, ACLs and SCRAM
credentials (``AsyncAdmin``, and ``Admin`` for synchronous code).

Requests go to any reachable node from ``bootstrap.servers``; nodes forward metadata writes to the active
controller, so the client needs no controller address. A whole-request failure surfaces as a typed
``OdradekError``; per-partition outcomes of batch requests (elections, reassignments) come back as results.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, TypeVar

import grpc

from odradek.client.admin_groups import GroupAdmin
from odradek.client.admin_quotas import QuotaAdmin
from odradek.client.admin_security import SecurityAdmin
from odradek.client.admin_share_groups import ShareGroupAdmin
from odradek.client.admin_transactions import TransactionAdmin
from odradek.client.authentication import sasl_credentials
from odradek.client.background import BackgroundLoop
from odradek.client.config import AdminConfig, admin_client_id
from odradek.client.connection import ChannelPool, tls_hint
from odradek.client.errors import ErrorCode, NetworkError, OdradekError, error_for_code, error_name
from odradek.client.health import ClusterHealth, compute_health
from odradek.proto import admin_pb2 as pb
from odradek.proto import admin_pb2_grpc, broker_pb2_grpc
from odradek.proto import broker_pb2 as bpb

T = TypeVar("T")

EARLIEST, LATEST = -2, -1
_RETRY_ON_NODE = {ErrorCode.NOT_CONTROLLER, ErrorCode.COORDINATOR_NOT_AVAILABLE}
ELECTION_TYPES = {"preferred": pb.PREFERRED, "unclean": pb.UNCLEAN}
_OFFSET_RETRY_BACKOFF_S = 0.1  # ListOffsets answered OFFSET_NOT_AVAILABLE: ask again after this
# DeleteRecords answers that mean the leader moved or is not known yet: ask the metadata again and retry.
_LEADER_MOVED = frozenset(
    {
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.OFFSET_NOT_AVAILABLE,  # a new leader's high watermark is catching up
    }
)


@dataclass(frozen=True)
class ListenerDescription:
    """One advertised listener of a broker besides its gRPC address, e.g. its Kafka listener (name KAFKA)."""

    name: str
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass(frozen=True)
class BrokerDescription:
    node_id: int
    host: str  # host and port: the gRPC listener (odradek's clients)
    port: int
    rack: str
    fenced: bool
    epoch: int
    # The broker's other advertised listeners: today at most one, its Kafka listener (for Kafka clients).
    listeners: list[ListenerDescription] = field(default_factory=list)

    @property
    def kafka_address(self) -> str:
        """host:port of the broker's Kafka listener; "" without one."""
        return str(self.listeners[0]) if self.listeners else ""


@dataclass(frozen=True)
class ClusterDescription:
    cluster_id: str
    controller_leader: int
    bootstrap_servers: str
    brokers: list[BrokerDescription]
    # Kafka clients' bootstrap.servers: the unfenced brokers' Kafka listeners; "" when no broker has one.
    kafka_bootstrap_servers: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class ReplicaDescription:
    node_id: int
    log_end_offset: int
    lag: int
    last_fetch_ms: int


@dataclass(frozen=True)
class QuorumDescription:
    leader_id: int
    leader_epoch: int
    high_watermark: int
    voters: list[ReplicaDescription]
    observers: list[ReplicaDescription]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class PartitionInfo:
    partition: int
    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]
    log_start_offset: int
    high_watermark: int
    under_replicated: bool
    adding_replicas: list[int] = field(default_factory=list)  # non-empty while a reassignment is in progress
    removing_replicas: list[int] = field(default_factory=list)
    offline: bool = False  # no leader, or its leader is fenced
    elr: list[int] = field(default_factory=list)  # eligible leader replicas: out of the ISR, still hold all committed
    last_known_elr: list[int] = field(default_factory=list)  # offline with neither ISR nor ELR: who last held it all
    last_known_leader: int = -1  # while leaderless: the last leader
    # Brokers whose replica the log cleaner gave up on (a corrupt batch...): compaction no longer bounds its size.
    uncleanable_replicas: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class TopicInfo:
    name: str
    configs: dict[str, str]
    partitions: list[PartitionInfo] = field(default_factory=list)
    topic_id: str = ""

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("topic_id")
        return d


@dataclass(frozen=True)
class ElectionResult:
    """One partition's outcome of ``elect_leaders``: ``error`` is the ErrorCode name, None on success
    (ELECTION_NOT_NEEDED means the preferred leader already leads: not a failure)."""

    topic: str
    partition: int
    leader: int
    error: str | None
    message: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"topic": self.topic, "partition": self.partition, "leader": self.leader, "error": self.error}


@dataclass(frozen=True)
class ReassignmentResult:
    """One partition's outcome of ``alter_partition_reassignments``: ``error`` is the ErrorCode name or None."""

    topic: str
    partition: int
    error: str | None
    message: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"topic": self.topic, "partition": self.partition, "error": self.error}


CONFIG_SOURCES = {
    pb.DEFAULT_CONFIG: "default",
    pb.STATIC_BROKER_CONFIG: "broker",
    pb.TOPIC_CONFIG: "topic",
    pb.DYNAMIC_DEFAULT_BROKER_CONFIG: "cluster",
}


@dataclass(frozen=True)
class ConfigDescription:
    """One config's effective value and where it comes from: ``topic`` (set on the topic), ``cluster`` (the
    cluster-wide dynamic default), ``broker`` (the answering node's config file) or ``default`` (odradek's
    built-in). ``read_only``: no request can change it."""

    name: str
    value: str
    source: str
    read_only: bool = False
    sensitive: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class LogDirReplicaInfo:
    topic: str
    partition: int
    size_bytes: int
    offset_lag: int  # offsets behind the partition's leader: 0 on the leader, -1 when not known
    log_end_offset: int
    is_leader: bool
    log_start_offset: int = -1  # this replica's own (DeleteRecords and retention move it); -1 when not known
    uncleanable: str = ""  # why the log cleaner gave up on this replica; "" when it did not
    is_future: bool = False  # the copy of a replica moving into this dir; offset_lag: behind the replica it replaces


@dataclass(frozen=True)
class LogDirInfo:
    path: str
    online: bool
    total_bytes: int  # -1 when offline
    free_bytes: int
    used_bytes: int  # bytes of every replica in the dir
    replicas: list[LogDirReplicaInfo] = field(default_factory=list)
    error: str | None = None  # KAFKA_STORAGE_ERROR when offline


@dataclass(frozen=True)
class BrokerLogDirs:
    """One broker's log dirs; ``error`` (and no dirs) when the broker did not answer in time."""

    broker_id: int
    address: str
    log_dirs: list[LogDirInfo] = field(default_factory=list)
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class ReplicaLogDirMove:
    """One replica asked to move to another log dir of its broker: ``error`` None when the move started (or the
    replica is there already), else the broker's error code name (LOG_DIR_NOT_FOUND, KAFKA_STORAGE_ERROR...)."""

    broker_id: int
    topic: str
    partition: int
    path: str
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _log_dir_info(d: bpb.LogDirDescription) -> LogDirInfo:
    return LogDirInfo(
        path=d.path,
        online=d.error == ErrorCode.NONE,
        total_bytes=d.total_bytes,
        free_bytes=d.free_bytes,
        used_bytes=d.used_bytes,
        replicas=[
            LogDirReplicaInfo(
                r.topic,
                r.partition,
                r.size_bytes,
                r.offset_lag,
                r.log_end_offset,
                r.is_leader,
                r.log_start_offset,
                r.uncleanable,
                r.is_future,
            )
            for r in sorted(d.replicas, key=lambda r: (r.topic, r.partition, r.is_future))
        ],
        error=_code_name(d.error),
    )


def _offset_or_unknown(answer: bpb.ListOffsetsPartitionResponse) -> int:
    return answer.offset if answer.error == ErrorCode.NONE else -1


def _code_name(code: int) -> str | None:
    return None if code == ErrorCode.NONE else error_name(code)


def _request_error(response: Any) -> int:
    """The error that concerns the node rather than the request: the response's own code, or NOT_CONTROLLER when
    every per-item result carries it (a forwarding node that found no active controller answers that way)."""
    error = getattr(response, "error", ErrorCode.NONE)
    if error != ErrorCode.NONE:
        return error
    for name in ("topics", "results"):
        items = getattr(response, name, None)
        if items and all(getattr(i, "error", ErrorCode.NONE) == ErrorCode.NOT_CONTROLLER for i in items):
            return ErrorCode.NOT_CONTROLLER
    return ErrorCode.NONE


def _partition_info(
    p: pb.PartitionDescription,
    available: set[int],
    offsets: Mapping[int, tuple[int, int]],
    uncleanable: Mapping[int, list[int]],
) -> PartitionInfo:
    log_start, high_watermark = offsets.get(p.partition, (-1, -1))
    return PartitionInfo(
        partition=p.partition,
        leader=p.leader,
        leader_epoch=p.leader_epoch,
        replicas=list(p.replicas),
        isr=list(p.isr),
        log_start_offset=log_start,
        high_watermark=high_watermark,
        under_replicated=p.under_replicated,
        adding_replicas=list(p.adding_replicas),
        removing_replicas=list(p.removing_replicas),
        offline=p.leader not in available,
        elr=list(p.eligible_leader_replicas),
        last_known_elr=list(p.last_known_elr),
        last_known_leader=p.last_known_leader if p.leader < 0 else -1,
        uncleanable_replicas=list(uncleanable.get(p.partition, ())),
    )


def _topic_info(
    t: pb.TopicDescription,
    available: set[int],
    offsets: Mapping[int, tuple[int, int]] | None = None,
    uncleanable: Mapping[int, list[int]] | None = None,
) -> TopicInfo:
    return TopicInfo(
        name=t.name,
        topic_id=t.topic_id.hex(),
        configs={c.name: c.value for c in t.configs},
        partitions=[
            _partition_info(p, available, offsets or {}, uncleanable or {})
            for p in sorted(t.partitions, key=lambda p: p.partition)
        ],
    )


def uncleanable_replicas(topic: str, brokers: Iterable[BrokerLogDirs]) -> dict[int, list[int]]:
    """Partition of ``topic`` -> the brokers (ascending) whose replica the log cleaner gave up on, from their
    DescribeLogDirs answers; a broker that did not answer counts as not reporting any."""
    out: dict[int, set[int]] = {}
    for b in brokers:
        for d in b.log_dirs:
            for r in d.replicas:
                if r.topic == topic and r.uncleanable:
                    out.setdefault(r.partition, set()).add(b.broker_id)
    return {p: sorted(ids) for p, ids in sorted(out.items())}


def _replica(r: pb.ReplicaState, high_watermark: int) -> ReplicaDescription:
    return ReplicaDescription(
        node_id=r.node_id,
        log_end_offset=r.log_end_offset,
        lag=max(0, high_watermark - r.log_end_offset),
        last_fetch_ms=r.last_fetch_timestamp_ms,
    )


class AsyncAdmin(ShareGroupAdmin, GroupAdmin, TransactionAdmin, QuotaAdmin, SecurityAdmin):
    def __init__(self, config: Mapping[str, Any]) -> None:
        cfg = AdminConfig.from_mapping(config)
        self._servers = list(cfg.bootstrap_servers)
        self._timeout = cfg.request_timeout_ms / 1000
        self._backoff = cfg.retry_backoff_ms / 1000
        self._pool = ChannelPool(
            client_id=admin_client_id(config, cfg), security=cfg.tls_files(), sasl=sasl_credentials(cfg)
        )
        self._order = list(self._servers)
        random.shuffle(self._order)
        self._first = 0  # index in _order of the node that answered last: try it first next time

    async def close(self) -> None:
        await self._pool.close()

    async def __aenter__(self) -> AsyncAdmin:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _call(self, invoke: Callable[[admin_pb2_grpc.AdminAsyncStub], Awaitable[T]]) -> T:
        """Try nodes in turn until one answers (and is not redirecting us); raise the last failure.

        Starts from the node that answered last, so one unresponsive (e.g. paused) node costs one RPC timeout
        per admin client rather than per call. UNIMPLEMENTED fails at once: every node runs the same code."""
        deadline = asyncio.get_running_loop().time() + self._timeout
        last: Exception | None = None
        attempt = 0
        while asyncio.get_running_loop().time() < deadline:
            index = (self._first + attempt) % len(self._order)
            address = self._order[index]
            attempt += 1
            try:
                response = await invoke(admin_pb2_grpc.AdminStub(self._pool.get(address)))
            except grpc.aio.AioRpcError as e:
                if e.code() == grpc.StatusCode.UNIMPLEMENTED:
                    raise OdradekError(
                        f"{address} does not implement this request ({e.details() or 'UNIMPLEMENTED'})",
                        code=ErrorCode.UNSUPPORTED_VERSION,
                    ) from None
                details = tls_hint(e.details() or e.code().name, self._pool.security_for(address))
                last = NetworkError(f"{address}: {details}")
            else:
                error = _request_error(response)
                if error not in _RETRY_ON_NODE:
                    self._first = index
                    return response
                last = error_for_code(error, f"{address} could not serve the request")
            if attempt % len(self._order) == 0:
                await asyncio.sleep(self._backoff)
        raise last or OdradekError("request timed out", code=ErrorCode.REQUEST_TIMED_OUT)

    def _rpc_timeout(self) -> float:
        return max(1.0, self._timeout / 3)

    @staticmethod
    def _check(error: int, message: str = "") -> None:
        if error != ErrorCode.NONE:
            raise error_for_code(error, message or error_name(error))

    async def describe_cluster(self) -> ClusterDescription:
        r = await self._call(lambda s: s.DescribeCluster(pb.DescribeClusterRequest(), timeout=self._rpc_timeout()))
        self._check(r.error)
        brokers = [
            BrokerDescription(
                b.node_id,
                b.host,
                b.port,
                b.rack,
                b.fenced,
                b.epoch,
                [ListenerDescription(li.name, li.host, li.port) for li in b.listeners],
            )
            for b in sorted(r.brokers, key=lambda b: b.node_id)
        ]
        return ClusterDescription(
            cluster_id=r.cluster_id,
            controller_leader=r.controller_id,
            bootstrap_servers=",".join(f"{b.host}:{b.port}" for b in brokers if not b.fenced),
            brokers=brokers,
            kafka_bootstrap_servers=",".join(b.kafka_address for b in brokers if not b.fenced and b.kafka_address),
        )

    async def describe_quorum(self) -> QuorumDescription:
        r = await self._call(lambda s: s.DescribeQuorum(pb.DescribeQuorumRequest(), timeout=self._rpc_timeout()))
        self._check(r.error)
        hw = r.high_watermark
        return QuorumDescription(
            leader_id=r.leader_id,
            leader_epoch=r.leader_epoch,
            high_watermark=hw,
            voters=[_replica(v, hw) for v in sorted(r.voters, key=lambda v: v.node_id)],
            observers=[_replica(o, hw) for o in sorted(r.observers, key=lambda o: o.node_id)],
        )

    async def create_topic(
        self,
        name: str,
        partitions: int = -1,
        replication_factor: int = -1,
        configs: Mapping[str, str] | None = None,
        validate_only: bool = False,
    ) -> str:
        """Create a topic; return its id (hex). Raises the typed error for a rejected creation."""
        topic = pb.CreatableTopic(
            name=name,
            num_partitions=partitions,
            replication_factor=replication_factor,
            configs=[pb.ConfigEntry(name=k, value=str(v)) for k, v in (configs or {}).items()],
        )
        request = pb.CreateTopicsRequest(
            topics=[topic], timeout_ms=int(self._timeout * 1000), validate_only=validate_only
        )
        r = await self._call(lambda s: s.CreateTopics(request, timeout=self._timeout))
        result = r.topics[0]
        self._check(result.error, result.error_message)
        return result.topic_id.hex()

    async def create_partitions(self, topic: str, total_count: int, validate_only: bool = False) -> None:
        """Grow ``topic`` to ``total_count`` partitions (Kafka's createPartitions with increaseTo): the new ones
        get the topic's replication factor; existing partitions and their records stay as they are. Keys then map
        to ``murmur2(key) % total_count``, so a key's new records may go to another partition than its old ones.
        A count not above the current one raises INVALID_PARTITIONS, an unknown topic UNKNOWN_TOPIC_OR_PARTITION."""
        request = pb.CreatePartitionsRequest(
            topics=[pb.CreatePartitionsTopic(name=topic, count=total_count)],
            timeout_ms=int(self._timeout * 1000),
            validate_only=validate_only,
        )
        r = await self._call(lambda s: s.CreatePartitions(request, timeout=self._timeout))
        self._check(r.topics[0].error, r.topics[0].error_message)

    async def delete_topic(self, name: str) -> None:
        request = pb.DeleteTopicsRequest(names=[name], timeout_ms=int(self._timeout * 1000))
        r = await self._call(lambda s: s.DeleteTopics(request, timeout=self._timeout))
        self._check(r.topics[0].error, r.topics[0].error_message)

    async def list_topics(self, include_internal: bool = False) -> list[str]:
        request = pb.DescribeTopicsRequest(include_internal=include_internal)
        r = await self._call(lambda s: s.DescribeTopics(request, timeout=self._rpc_timeout()))
        return sorted(t.name for t in r.topics if t.error == ErrorCode.NONE)

    async def describe_topic(self, name: str) -> TopicInfo:
        """One topic with each partition's log start offset and high watermark (asked of its leader) and the
        replicas the log cleaner gave up on (asked of the live brokers hosting them, at the same time; a broker
        that does not answer in time is left out rather than failing the call)."""
        cluster, topics = await self._describe_topics([name], include_internal=True)
        brokers = {b.node_id: f"{b.host}:{b.port}" for b in cluster.brokers if not b.fenced}
        t = topics[0]
        hosts = sorted({r for p in t.partitions for r in p.replicas} & set(brokers))
        offsets, dirs = await asyncio.gather(
            self._partition_offsets(t.name, {p.partition: p.leader for p in t.partitions}, brokers),
            self._log_dirs({b: brokers[b] for b in hosts}, [t.name]),
        )
        return _topic_info(t, set(brokers), offsets, uncleanable_replicas(t.name, dirs))

    async def describe_topics(
        self, names: Sequence[str] | None = None, include_internal: bool = True
    ) -> list[TopicInfo]:
        """Topics from metadata alone (``log_start_offset``/``high_watermark`` are -1): all of them when ``names``
        is None, skipping any deleted meanwhile; a named topic that does not exist raises its typed error."""
        if names is not None and not names:
            return []
        cluster, topics = await self._describe_topics(names, include_internal)
        available = {b.node_id for b in cluster.brokers if not b.fenced}
        return [_topic_info(t, available) for t in topics]

    async def _describe_topics(
        self, names: Sequence[str] | None, include_internal: bool
    ) -> tuple[ClusterDescription, list[pb.TopicDescription]]:
        """The cluster (to tell fenced leaders) and the topics' descriptions, asked concurrently."""
        request = pb.DescribeTopicsRequest(names=list(names or ()), include_internal=include_internal)
        cluster, r = await asyncio.gather(
            self.describe_cluster(),
            self._call(lambda s: s.DescribeTopics(request, timeout=self._rpc_timeout())),
        )
        topics = []
        for t in r.topics:
            if t.error != ErrorCode.NONE:
                if names:
                    self._check(t.error, t.error_message)
                continue
            topics.append(t)
        return cluster, sorted(topics, key=lambda t: t.name)

    async def cluster_health(self) -> ClusterHealth:
        """Fenced brokers, controllers not following the leader, and offline, leaderless, under-replicated and
        under-min-ISR partitions."""
        cluster, topics = await self._describe_topics(None, include_internal=True)
        quorum = await self.describe_quorum()
        available = {b.node_id for b in cluster.brokers if not b.fenced}
        return compute_health(cluster, [_topic_info(t, available) for t in topics], quorum, int(time.time() * 1000))

    async def elect_leaders(
        self, election_type: str = "preferred", partitions: Iterable[tuple[str, int]] | None = None
    ) -> list[ElectionResult]:
        """Move leadership to each partition's preferred (first) replica, or with ``"unclean"`` elect the live
        replica with the most complete log for leaderless partitions (may lose committed records). ``partitions``
        None means all of them.

        Per-partition failures (including ELECTION_NOT_NEEDED) are results; a whole-request failure raises."""
        if election_type not in ELECTION_TYPES:
            raise ValueError(f"election_type must be one of {', '.join(ELECTION_TYPES)}, not {election_type!r}")
        refs = None if partitions is None else [pb.PartitionRef(topic=t, partition=p) for t, p in partitions]
        if refs is not None and not refs:
            return []  # an empty list on the wire would mean every partition
        request = pb.ElectLeadersRequest(election_type=ELECTION_TYPES[election_type], partitions=refs or [])
        r = await self._call(lambda s: s.ElectLeaders(request, timeout=self._timeout))
        self._check(r.error)
        results = [
            ElectionResult(x.topic, x.partition, x.leader, _code_name(x.error), x.error_message) for x in r.results
        ]
        return sorted(results, key=lambda x: (x.topic, x.partition))

    async def alter_partition_reassignments(
        self, reassignments: Mapping[tuple[str, int], Sequence[int] | None]
    ) -> list[ReassignmentResult]:
        """Start moving each partition to the given replicas (the first becomes the preferred leader), or cancel
        its pending reassignment with None or []. Completion is asynchronous: ``describe_topics`` shows
        ``adding_replicas``/``removing_replicas`` until the new replicas have caught up and joined the ISR."""
        if not reassignments:
            return []
        request = pb.AlterPartitionReassignmentsRequest(
            reassignments=[
                pb.Reassignment(topic=t, partition=p, replicas=list(replicas or ()))
                for (t, p), replicas in reassignments.items()
            ]
        )
        r = await self._call(lambda s: s.AlterPartitionReassignments(request, timeout=self._timeout))
        self._check(r.error)
        results = [ReassignmentResult(x.topic, x.partition, _code_name(x.error), x.error_message) for x in r.results]
        return sorted(results, key=lambda x: (x.topic, x.partition))

    async def delete_records(self, offsets: Mapping[tuple[str, int], int]) -> dict[tuple[str, int], int]:
        """Delete the records before ``offset`` of each ``(topic, partition)``: advance its log start offset there
        on every replica (Kafka's deleteRecords; ``-1`` means the high watermark). Returns each partition's new low
        watermark, the lowest log start offset of its in-sync replicas, once all have reached the offset. Consumers
        that then fetch below it get OFFSET_OUT_OF_RANGE (their ``auto.offset.reset`` applies).

        Sent to each partition's leader (retried where leadership moves). An offset beyond the high watermark
        raises OFFSET_OUT_OF_RANGE; a topic whose cleanup.policy lacks ``delete`` (the internal offsets topic)
        POLICY_VIOLATION; an unknown topic or partition UNKNOWN_TOPIC_OR_PARTITION; the first failure is raised,
        naming its partition, after the other partitions were answered."""
        pending = dict(offsets)
        done: dict[tuple[str, int], int] = {}
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._timeout
        while pending:
            cluster, topics = await self._describe_topics(sorted({t for t, _ in pending}), include_internal=True)
            brokers = {b.node_id: f"{b.host}:{b.port}" for b in cluster.brokers if not b.fenced}
            leaders = {(t.name, p.partition): p.leader for t in topics for p in t.partitions}
            unknown = sorted(tp for tp in pending if tp not in leaders)
            if unknown:
                raise error_for_code(
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"unknown partition {unknown[0][0]}-{unknown[0][1]}"
                )
            by_leader: dict[int, dict[tuple[str, int], int]] = {}
            for tp, offset in pending.items():
                by_leader.setdefault(leaders[tp], {})[tp] = offset
            remaining = max(0.1, deadline - loop.time())
            answers = await asyncio.gather(
                *(self._delete_records_at(brokers.get(leader), batch, remaining) for leader, batch in by_leader.items())
            )
            failure: OdradekError | None = None
            for answer in answers:
                for tp, (code, low, message) in sorted(answer.items()):
                    if code == ErrorCode.NONE:
                        done[tp] = low
                        del pending[tp]
                    elif code not in _LEADER_MOVED or loop.time() >= deadline:
                        failure = failure or error_for_code(code, f"{tp[0]}-{tp[1]}: {message or error_name(code)}")
                        del pending[tp]
            if failure is not None:
                raise failure
            if pending:
                await asyncio.sleep(self._backoff)
        return done

    async def _delete_records_at(
        self, address: str | None, offsets: Mapping[tuple[str, int], int], timeout: float
    ) -> dict[tuple[str, int], tuple[int, int, str]]:
        """One DeleteRecords request to a leader: (error code, low watermark, message) per partition."""
        if address is None:
            return {tp: (ErrorCode.LEADER_NOT_AVAILABLE, -1, "no live leader") for tp in offsets}
        by_topic: dict[str, list[bpb.DeleteRecordsPartition]] = {}
        for (topic, partition), offset in sorted(offsets.items()):
            by_topic.setdefault(topic, []).append(bpb.DeleteRecordsPartition(partition=partition, offset=offset))
        request = bpb.DeleteRecordsRequest(
            topics=[bpb.DeleteRecordsTopic(name=t, partitions=parts) for t, parts in by_topic.items()],
            timeout_ms=int(timeout * 1000),
        )
        try:
            r = await broker_pb2_grpc.BrokerStub(self._pool.get(address)).DeleteRecords(request, timeout=timeout + 1)
        except grpc.aio.AioRpcError as e:
            if e.code() == grpc.StatusCode.UNIMPLEMENTED:
                message = f"{address} does not implement DeleteRecords"
                raise OdradekError(message, code=ErrorCode.UNSUPPORTED_VERSION) from None
            return {tp: (ErrorCode.NETWORK_EXCEPTION, -1, f"{address}: {e.code().name}") for tp in offsets}
        out = {
            (t.name, p.partition): (p.error, p.low_watermark, p.error_message) for t in r.topics for p in t.partitions
        }
        missing = (ErrorCode.UNKNOWN_SERVER_ERROR, -1, "no answer for the partition")
        return {tp: out.get(tp, missing) for tp in offsets}

    async def describe_configs(self, topic: str) -> list[ConfigDescription]:
        """Every config of ``topic`` with its effective value and source (``kafka-configs --describe --all``),
        sorted by name. An unknown topic raises its typed error."""
        request = pb.DescribeConfigsRequest(topics=[topic])
        r = await self._call(lambda s: s.DescribeConfigs(request, timeout=self._rpc_timeout()))
        self._check(r.error)
        [t] = r.topics
        self._check(t.error, t.error_message)
        return [
            ConfigDescription(c.name, c.value, CONFIG_SOURCES.get(c.source, "unknown"), c.read_only, c.sensitive)
            for c in sorted(t.configs, key=lambda c: c.name)
        ]

    async def alter_topic_configs(
        self,
        topic: str,
        set_configs: Mapping[str, str] | None = None,
        delete_configs: Iterable[str] = (),
        append_configs: Mapping[str, str] | None = None,
        subtract_configs: Mapping[str, str] | None = None,
        validate_only: bool = False,
    ) -> dict[str, str]:
        """Change ``topic``'s configs live (Kafka's IncrementalAlterConfigs): set values, delete the topic's own
        values (the default applies again), append or subtract items of a list config (cleanup.policy).
        The changes apply together or not at all; a bad one raises its typed error (INVALID_CONFIG names the
        config) and nothing changes. ``validate_only`` checks without changing. Returns the topic's own configs after
        the change (as they would be, with ``validate_only``): the controller's, so a node answering a describe a
        moment later may not show them yet."""
        ops = _alter_ops(set_configs, delete_configs, append_configs, subtract_configs)
        request = pb.IncrementalAlterConfigsRequest(
            topics=[pb.AlterTopicConfigs(topic=topic, configs=ops)], validate_only=validate_only
        )
        r = await self._call(lambda s: s.IncrementalAlterConfigs(request, timeout=self._timeout))
        self._check(r.error)
        [result] = r.results
        self._check(result.error, result.error_message)
        return {c.name: c.value for c in result.configs}

    async def alter_cluster_configs(
        self,
        set_configs: Mapping[str, str] | None = None,
        delete_configs: Iterable[str] = (),
        append_configs: Mapping[str, str] | None = None,
        subtract_configs: Mapping[str, str] | None = None,
        validate_only: bool = False,
    ) -> dict[str, str]:
        """Change the cluster-wide dynamic broker defaults live (Kafka's ``kafka-configs --entity-type brokers
        --entity-default``): node properties that default a topic config, such as ``log.retention.ms`` or
        ``min.insync.replicas``, which every node then applies over its config file. Returns the dynamic defaults
        after the change; a bad change raises its typed error and nothing changes."""
        ops = _alter_ops(set_configs, delete_configs, append_configs, subtract_configs)
        request = pb.IncrementalAlterConfigsRequest(cluster_defaults=ops, validate_only=validate_only)
        r = await self._call(lambda s: s.IncrementalAlterConfigs(request, timeout=self._timeout))
        self._check(r.error)
        result = r.cluster_defaults_result
        self._check(result.error, result.error_message)
        return {c.name: c.value for c in result.configs}

    async def describe_cluster_configs(self) -> list[ConfigDescription]:
        """Each dynamic broker config with its value and source: ``cluster`` (the dynamic default), ``broker`` (the
        answering node's config file) or ``default`` (built in)."""
        request = pb.DescribeConfigsRequest(cluster_defaults=True)
        r = await self._call(lambda s: s.DescribeConfigs(request, timeout=self._rpc_timeout()))
        self._check(r.error)
        return [
            ConfigDescription(c.name, c.value, CONFIG_SOURCES.get(c.source, "unknown"), c.read_only, c.sensitive)
            for c in r.cluster_defaults
        ]

    async def describe_log_dirs(
        self, brokers: Iterable[int] | None = None, topics: Iterable[str] | None = None
    ) -> list[BrokerLogDirs]:
        """Each registered broker's log dirs (or those of ``brokers``), asked in parallel, with the replicas of
        ``topics`` (all when None) in each. A broker that does not answer within the request timeout is reported
        with ``error`` set instead of failing the call (each broker gets a third of ``request.timeout.ms``, at least
        a second); an unknown broker id raises INVALID_REQUEST."""
        cluster = await self.describe_cluster()
        registered = {b.node_id: f"{b.host}:{b.port}" for b in cluster.brokers}
        wanted = sorted(registered) if brokers is None else sorted(set(brokers))
        unknown = [b for b in wanted if b not in registered]
        if unknown:
            known = ", ".join(map(str, sorted(registered))) or "none"
            raise error_for_code(ErrorCode.INVALID_REQUEST, f"no broker {unknown[0]} (registered: {known})")
        return await self._log_dirs({b: registered[b] for b in wanted}, topics)

    async def _log_dirs(self, brokers: Mapping[int, str], topics: Iterable[str] | None) -> list[BrokerLogDirs]:
        """DescribeLogDirs of each broker id -> address, in parallel, all within a third of the request timeout."""
        request = bpb.DescribeLogDirsRequest(topics=sorted(set(topics or ())))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._rpc_timeout()  # one stuck broker costs a third of the timeout

        async def ask(broker_id: int, address: str) -> BrokerLogDirs:
            stub = broker_pb2_grpc.BrokerStub(self._pool.get(address))
            try:
                r = await stub.DescribeLogDirs(request, timeout=max(0.1, deadline - loop.time()))
            except grpc.aio.AioRpcError as e:
                code = "UNSUPPORTED_VERSION" if e.code() == grpc.StatusCode.UNIMPLEMENTED else "NETWORK_EXCEPTION"
                return BrokerLogDirs(broker_id, address, error=f"{code}: {e.details() or e.code().name}")
            if r.error != ErrorCode.NONE:
                return BrokerLogDirs(broker_id, address, error=_code_name(r.error))
            return BrokerLogDirs(broker_id, address, [_log_dir_info(d) for d in sorted(r.dirs, key=lambda d: d.path)])

        return list(await asyncio.gather(*(ask(b, address) for b, address in sorted(brokers.items()))))

    async def alter_replica_log_dirs(self, moves: Mapping[tuple[int, str, int], str]) -> list[ReplicaLogDirMove]:
        """Move replicas between their brokers' log dirs (Kafka's alterReplicaLogDirs): (broker id, topic,
        partition) -> the absolute path of the destination dir, as ``describe_log_dirs`` shows it. Each broker is
        asked once, in parallel; the copy runs in the background, and ``describe_log_dirs`` shows its progress (a
        future replica in the destination dir) until the replica has moved. An unknown broker id raises
        INVALID_REQUEST, a broker that does not answer gives its replicas a NETWORK_EXCEPTION error."""
        cluster = await self.describe_cluster()
        registered = {b.node_id: f"{b.host}:{b.port}" for b in cluster.brokers}
        unknown = sorted({b for b, _, _ in moves} - set(registered))
        if unknown:
            known = ", ".join(map(str, sorted(registered))) or "none"
            raise error_for_code(ErrorCode.INVALID_REQUEST, f"no broker {unknown[0]} (registered: {known})")
        by_broker: dict[int, dict[tuple[str, int], str]] = {}
        for (broker, topic, partition), path in moves.items():
            by_broker.setdefault(broker, {})[(topic, partition)] = path

        async def ask(broker_id: int, wanted: dict[tuple[str, int], str]) -> list[ReplicaLogDirMove]:
            by_dir: dict[str, dict[str, list[int]]] = {}
            for (topic, partition), path in wanted.items():
                by_dir.setdefault(path, {}).setdefault(topic, []).append(partition)
            request = bpb.AlterReplicaLogDirsRequest(
                dirs=[
                    bpb.AlterReplicaLogDir(
                        path=path,
                        topics=[bpb.AlterReplicaLogDirsTopic(name=t, partitions=ps) for t, ps in topics.items()],
                    )
                    for path, topics in by_dir.items()
                ]
            )
            stub = broker_pb2_grpc.BrokerStub(self._pool.get(registered[broker_id]))
            codes: dict[tuple[str, int], int] = {}
            try:
                r = await stub.AlterReplicaLogDirs(request, timeout=self._rpc_timeout())
                codes = {(t.name, a.partition): a.error for t in r.topics for a in t.partitions}
            except grpc.aio.AioRpcError:
                codes = dict.fromkeys(wanted, ErrorCode.NETWORK_EXCEPTION)
            return [
                ReplicaLogDirMove(broker_id, t, p, path, _code_name(codes.get((t, p), ErrorCode.UNKNOWN_SERVER_ERROR)))
                for (t, p), path in wanted.items()
            ]

        answers = await asyncio.gather(*(ask(b, wanted) for b, wanted in sorted(by_broker.items())))
        return [move for moves_of in answers for move in moves_of]

    async def offsets_for_time(self, topic: str, timestamp_ms: int) -> dict[int, int | None]:
        """Each partition's first offset whose record timestamp is at or after ``timestamp_ms`` (Kafka's
        listOffsets with a time), asked of each leader; None where no record is that recent or the leader did not
        answer in time."""
        if timestamp_ms < 0:
            raise error_for_code(ErrorCode.INVALID_REQUEST, f"timestamp {timestamp_ms} is negative")
        cluster, topics = await self._describe_topics([topic], include_internal=True)
        brokers = {b.node_id: f"{b.host}:{b.port}" for b in cluster.brokers if not b.fenced}
        by_leader: dict[int, list[int]] = {}
        for p in topics[0].partitions:
            by_leader.setdefault(p.leader, []).append(p.partition)
        found: dict[int, int | None] = {p.partition: None for p in topics[0].partitions}

        async def ask(leader: int, partitions: list[int]) -> None:
            if leader not in brokers:
                return
            request = bpb.ListOffsetsRequest(
                topics=[
                    bpb.ListOffsetsTopic(
                        name=topic,
                        partitions=[
                            bpb.ListOffsetsPartition(partition=p, timestamp=timestamp_ms, current_leader_epoch=-1)
                            for p in partitions
                        ],
                    )
                ]
            )
            try:
                r = await broker_pb2_grpc.BrokerStub(self._pool.get(brokers[leader])).ListOffsets(
                    request, timeout=self._rpc_timeout()
                )
            except grpc.aio.AioRpcError:
                return
            for t in r.topics:
                for a in t.partitions:
                    if a.error == ErrorCode.NONE and a.offset >= 0:
                        found[a.partition] = a.offset

        await asyncio.gather(*(ask(leader, parts) for leader, parts in by_leader.items()))
        return found

    async def _partition_offsets(
        self, topic: str, leaders: dict[int, int], brokers: Mapping[int, str]
    ) -> dict[int, tuple[int, int]]:
        """(log start offset, high watermark) per partition, asked of each partition's leader (-1 if unknown). A
        partition whose new leader answers OFFSET_NOT_AVAILABLE is asked again until the RPC timeout."""
        by_leader: dict[int, list[int]] = {}
        for partition, leader in leaders.items():
            if leader in brokers:
                by_leader.setdefault(leader, []).append(partition)

        async def ask(leader: int, partitions: list[int]) -> dict[int, tuple[int, int]]:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + self._rpc_timeout()
            offsets: dict[int, tuple[int, int]] = {}
            while True:
                request = bpb.ListOffsetsRequest(
                    topics=[
                        bpb.ListOffsetsTopic(
                            name=topic,
                            partitions=[
                                bpb.ListOffsetsPartition(partition=p, timestamp=ts, current_leader_epoch=-1)
                                for p in partitions
                                for ts in (EARLIEST, LATEST)
                            ],
                        )
                    ]
                )
                try:
                    r = await broker_pb2_grpc.BrokerStub(self._pool.get(brokers[leader])).ListOffsets(
                        request, timeout=max(0.1, deadline - loop.time())
                    )
                except grpc.aio.AioRpcError:
                    return offsets
                found: dict[int, list[bpb.ListOffsetsPartitionResponse]] = {}
                for answer in r.topics[0].partitions:
                    found.setdefault(answer.partition, []).append(answer)
                # OFFSET_NOT_AVAILABLE: a new leader's high watermark is catching up; it answers within moments.
                waiting = [p for p, v in found.items() if any(a.error == ErrorCode.OFFSET_NOT_AVAILABLE for a in v)]
                give_up = not waiting or loop.time() + _OFFSET_RETRY_BACKOFF_S >= deadline
                for p, v in found.items():
                    if len(v) == 2 and (give_up or p not in waiting):
                        offsets[p] = (_offset_or_unknown(v[0]), _offset_or_unknown(v[1]))
                if give_up:
                    return offsets
                partitions = waiting
                await asyncio.sleep(_OFFSET_RETRY_BACKOFF_S)

        results = await asyncio.gather(*(ask(leader, parts) for leader, parts in by_leader.items()))
        return {p: v for result in results for p, v in result.items()}


def _alter_ops(
    set_configs: Mapping[str, str] | None,
    delete_configs: Iterable[str],
    append_configs: Mapping[str, str] | None,
    subtract_configs: Mapping[str, str] | None,
) -> list[pb.AlterableConfig]:
    ops = [pb.AlterableConfig(name=k, op=pb.SET, value=str(v)) for k, v in (set_configs or {}).items()]
    ops += [pb.AlterableConfig(name=k, op=pb.DELETE) for k in delete_configs]
    ops += [pb.AlterableConfig(name=k, op=pb.APPEND, value=str(v)) for k, v in (append_configs or {}).items()]
    ops += [pb.AlterableConfig(name=k, op=pb.SUBTRACT, value=str(v)) for k, v in (subtract_configs or {}).items()]
    return ops


class Admin:
    """Synchronous facade over ``AsyncAdmin``: the same methods, blocking."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        AdminConfig.from_mapping(config)  # a bad config fails here, before a loop thread is started
        self._loop = BackgroundLoop("odradek-admin")
        self._admin = self._loop.run(self._make(config))

    @staticmethod
    async def _make(config: Mapping[str, Any]) -> AsyncAdmin:
        return AsyncAdmin(config)

    def __getattr__(self, name: str) -> Any:
        """``AsyncAdmin``'s attribute of that name, its coroutine methods made blocking."""
        method = getattr(self._admin, name)
        if not asyncio.iscoroutinefunction(method):
            return method
        return lambda *args, **kwargs: self._loop.run(method(*args, **kwargs))

    def close(self) -> None:
        self._loop.run(self._admin.close())
        self._loop.stop()

    def __enter__(self) -> Admin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

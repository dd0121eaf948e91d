"""The admin client: cluster, quorum, brokers and topics (``AsyncAdmin``, and ``Admin`` for synchronous code).

Requests go to any reachable node from ``bootstrap.servers``; nodes forward metadata writes to the active
controller, so the client needs no controller address. Failures surface as typed ``OdradekError``s.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, TypeVar

import grpc

from odradek.client.background import BackgroundLoop
from odradek.client.connection import ChannelPool, parse_servers
from odradek.client.errors import ErrorCode, OdradekError, error_for_code
from odradek.proto import admin_pb2 as pb
from odradek.proto import admin_pb2_grpc, broker_pb2_grpc
from odradek.proto import broker_pb2 as bpb

T = TypeVar("T")

EARLIEST, LATEST = -2, -1
_RETRY_ON_NODE = {ErrorCode.NOT_CONTROLLER, ErrorCode.COORDINATOR_NOT_AVAILABLE}


@dataclass(frozen=True)
class BrokerDescription:
    node_id: int
    host: str
    port: int
    rack: str
    fenced: bool
    epoch: int


@dataclass(frozen=True)
class ClusterDescription:
    cluster_id: str
    controller_leader: int
    bootstrap_servers: str
    brokers: list[BrokerDescription]

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


def _replica(r: pb.ReplicaState, high_watermark: int) -> ReplicaDescription:
    return ReplicaDescription(
        node_id=r.node_id,
        log_end_offset=r.log_end_offset,
        lag=max(0, high_watermark - r.log_end_offset),
        last_fetch_ms=r.last_fetch_timestamp_ms,
    )


class AsyncAdmin:
    def __init__(self, config: Mapping[str, Any]) -> None:
        self._servers = parse_servers(config["bootstrap.servers"])
        self._timeout = int(config.get("request.timeout.ms", 30_000)) / 1000
        self._pool = ChannelPool()
        self._order = list(self._servers)
        random.shuffle(self._order)

    async def close(self) -> None:
        await self._pool.close()

    async def __aenter__(self) -> AsyncAdmin:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _call(self, invoke: Callable[[admin_pb2_grpc.AdminStub], Awaitable[T]]) -> T:
        """Try nodes in turn until one answers (and is not redirecting us); raise the last failure."""
        deadline = asyncio.get_running_loop().time() + self._timeout
        last: Exception | None = None
        attempt = 0
        while asyncio.get_running_loop().time() < deadline:
            address = self._order[attempt % len(self._order)]
            attempt += 1
            try:
                response = await invoke(admin_pb2_grpc.AdminStub(self._pool.get(address)))
            except grpc.aio.AioRpcError as e:
                last = OdradekError(f"{address}: {e.details() or e.code().name}", code=ErrorCode.NETWORK_EXCEPTION)
            else:
                error = getattr(response, "error", ErrorCode.NONE)
                if error not in _RETRY_ON_NODE:
                    return response
                last = error_for_code(error, f"{address} could not serve the request")
            if attempt % len(self._order) == 0:
                await asyncio.sleep(0.2)
        raise last or OdradekError("request timed out", code=ErrorCode.REQUEST_TIMED_OUT)

    def _rpc_timeout(self) -> float:
        return max(1.0, self._timeout / 3)

    @staticmethod
    def _check(error: int, message: str = "") -> None:
        if error != ErrorCode.NONE:
            raise error_for_code(error, message or ErrorCode.Name(error))

    async def describe_cluster(self) -> ClusterDescription:
        r = await self._call(lambda s: s.DescribeCluster(pb.DescribeClusterRequest(), timeout=self._rpc_timeout()))
        self._check(r.error)
        brokers = [
            BrokerDescription(b.node_id, b.host, b.port, b.rack, b.fenced, b.epoch)
            for b in sorted(r.brokers, key=lambda b: b.node_id)
        ]
        return ClusterDescription(
            cluster_id=r.cluster_id,
            controller_leader=r.controller_id,
            bootstrap_servers=",".join(f"{b.host}:{b.port}" for b in brokers if not b.fenced),
            brokers=brokers,
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

    async def delete_topic(self, name: str) -> None:
        request = pb.DeleteTopicsRequest(names=[name], timeout_ms=int(self._timeout * 1000))
        r = await self._call(lambda s: s.DeleteTopics(request, timeout=self._timeout))
        self._check(r.topics[0].error, r.topics[0].error_message)

    async def list_topics(self, include_internal: bool = False) -> list[str]:
        request = pb.DescribeTopicsRequest(include_internal=include_internal)
        r = await self._call(lambda s: s.DescribeTopics(request, timeout=self._rpc_timeout()))
        return sorted(t.name for t in r.topics if t.error == ErrorCode.NONE)

    async def describe_topic(self, name: str) -> TopicInfo:
        request = pb.DescribeTopicsRequest(names=[name], include_internal=True, include_offsets=True)
        r = await self._call(lambda s: s.DescribeTopics(request, timeout=self._rpc_timeout()))
        t = r.topics[0]
        self._check(t.error, t.error_message)
        offsets = await self._partition_offsets(t.name, {p.partition: p.leader for p in t.partitions})
        return TopicInfo(
            name=t.name,
            topic_id=t.topic_id.hex(),
            configs={c.name: c.value for c in t.configs},
            partitions=[
                PartitionInfo(
                    partition=p.partition,
                    leader=p.leader,
                    leader_epoch=p.leader_epoch,
                    replicas=list(p.replicas),
                    isr=list(p.isr),
                    log_start_offset=offsets.get(p.partition, (-1, -1))[0],
                    high_watermark=offsets.get(p.partition, (-1, -1))[1],
                    under_replicated=p.under_replicated,
                )
                for p in sorted(t.partitions, key=lambda p: p.partition)
            ],
        )

    async def _partition_offsets(self, topic: str, leaders: dict[int, int]) -> dict[int, tuple[int, int]]:
        """(log start offset, high watermark) per partition, asked of each partition's leader (-1 if unknown)."""
        brokers = {b.node_id: f"{b.host}:{b.port}" for b in (await self.describe_cluster()).brokers if not b.fenced}
        by_leader: dict[int, list[int]] = {}
        for partition, leader in leaders.items():
            if leader in brokers:
                by_leader.setdefault(leader, []).append(partition)

        async def ask(leader: int, partitions: list[int]) -> dict[int, tuple[int, int]]:
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
                    request, timeout=self._rpc_timeout()
                )
            except grpc.aio.AioRpcError:
                return {}
            found: dict[int, list[int]] = {}
            for answer in r.topics[0].partitions:
                found.setdefault(answer.partition, []).append(answer.offset if answer.error == ErrorCode.NONE else -1)
            return {p: (v[0], v[1]) for p, v in found.items() if len(v) == 2}

        results = await asyncio.gather(*(ask(leader, parts) for leader, parts in by_leader.items()))
        return {p: v for result in results for p, v in result.items()}


class Admin:
    """Synchronous facade over ``AsyncAdmin``: the same methods, blocking."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self._loop = BackgroundLoop("odradek-admin")
        self._admin = self._loop.run(self._make(config))

    @staticmethod
    async def _make(config: Mapping[str, Any]) -> AsyncAdmin:
        return AsyncAdmin(config)

    def __getattr__(self, name: str) -> Callable[..., Any]:
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

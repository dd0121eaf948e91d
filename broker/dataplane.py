"""The ``Broker`` gRPC service: an adapter that translates each call to the broker's protocol-neutral services and
their answers back (broker/api/): Metadata (``MetadataService``), Produce, Fetch and ListOffsets (``DataService``),
DeleteRecords, DescribeLogDirs, AlterReplicaLogDirs and the controller's GetReplicaLogInfo (``ReplicaService``),
InitProducerId (``ProducerIdService``). The Kafka listener's handlers call the same services; the caller's identity
reaches them as a ``RequestContext`` built from the call (``grpc_request_context``).

Responses are built in place (``add``) where they carry many partitions: upb deep-copies every message passed to a
constructor, once per nesting level.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import grpc

from odradek.broker.api.data import (
    DEFAULT_FETCH_MAX_BYTES,
    DataService,
    FetchAnswer,
    FetchRequest,
    FetchTopic,
    LeaderHint,
    ListOffsetsRequest,
    OffsetQuery,
)
from odradek.broker.api.metadata import MetadataRequest, MetadataService
from odradek.broker.api.producer_ids import InitProducerIdRequest, ProducerIdService
from odradek.broker.api.replicas import DeleteRecordsRequest, ReplicaService
from odradek.broker.auto_create import TopicAutoCreation
from odradek.broker.fetch_session import PartitionRead
from odradek.broker.log_dir_moves import LogDirMoves
from odradek.broker.metrics import NodeMetrics
from odradek.broker.producer_ids import ProducerIdManager
from odradek.broker.replica_manager import ReplicaManager
from odradek.broker.security.grpc_auth import grpc_request_context
from odradek.broker.throttling import BrokerQuotas
from odradek.broker.transactions.coordinator import TransactionCoordinator
from odradek.broker.txn_verifier import TxnVerifier
from odradek.client.common.access import OPEN, AccessControl
from odradek.client.errors import (
    ErrorCode,
)
from odradek.proto import broker_pb2 as pb
from odradek.proto import broker_pb2_grpc, common_pb2


class BrokerService(broker_pb2_grpc.BrokerServicer):
    def __init__(
        self,
        broker_id: int,
        cluster_id: str,
        replicas: ReplicaManager,
        metrics: NodeMetrics | None = None,
        *,
        controller_id: Callable[[], int] = lambda: -1,
        session_valid: Callable[[], bool] = lambda: True,
        producer_ids: ProducerIdManager | None = None,
        fetch_max_bytes: int = DEFAULT_FETCH_MAX_BYTES,
        uncleanable: Callable[[], Mapping[tuple[str, int], str]] = dict,
        verifier: TxnVerifier | None = None,
        transactions: TransactionCoordinator | None = None,
        quotas: BrokerQuotas | None = None,
        access: AccessControl = OPEN,
        auto_create: TopicAutoCreation | None = None,
        log_dir_moves: LogDirMoves | None = None,
    ) -> None:
        self.metrics = metrics or NodeMetrics(broker_id)
        self.broker_id = broker_id
        self.replicas = replicas
        # The services behind this servicer's methods, which the Kafka listener's handlers call too.
        self.producer_id_service = ProducerIdService(lambda: self.replicas.image, producer_ids, transactions, access)
        self.metadata = MetadataService(cluster_id, lambda: self.replicas.image, controller_id, access, auto_create)
        self.service = DataService(
            broker_id,
            replicas,
            self.metrics,
            lambda: self.replicas.image,
            session_valid=session_valid,
            fetch_max_bytes=fetch_max_bytes,
            verifier=verifier,
            quotas=quotas,
            access=access,
        )
        # DeleteRecords, log dirs, replica log info.
        self.replica_service = ReplicaService(
            broker_id,
            replicas,
            lambda: self.replicas.image,
            self.service.leader_hint_of,
            access,
            uncleanable,
            log_dir_moves,
        )

    # ---- Metadata ----

    async def Metadata(
        self, request: pb.MetadataRequest, context: grpc.aio.ServicerContext[pb.MetadataRequest, pb.MetadataResponse]
    ) -> pb.MetadataResponse:
        every = request.all_topics or not request.topics
        asked = MetadataRequest(None if every else list(request.topics), request.allow_auto_topic_creation)
        answer = await self.metadata.metadata(asked, grpc_request_context(context))
        return pb.MetadataResponse(
            brokers=[
                common_pb2.Node(node_id=b.broker_id, host=b.host, port=b.port, rack=b.rack) for b in answer.brokers
            ],
            cluster_id=answer.cluster_id,
            controller_id=answer.controller_id,
            topics=[
                pb.TopicMetadata(
                    name=t.name,
                    error=ErrorCode.ValueType(t.error),
                    topic_id=t.topic_id,
                    is_internal=t.is_internal,
                    partitions=[
                        pb.PartitionMetadata(
                            partition=p.partition,
                            error=ErrorCode.ValueType(p.error),
                            leader=p.leader,
                            leader_epoch=p.leader_epoch,
                            replicas=p.replicas,
                            isr=p.isr,
                            offline_replicas=p.offline_replicas,
                        )
                        for p in t.partitions
                    ],
                )
                for t in answer.topics
            ],
            metadata_offset=answer.metadata_offset,
        )

    # ---- Produce ----

    async def Produce(
        self, request: pb.ProduceRequest, context: grpc.aio.ServicerContext[pb.ProduceRequest, pb.ProduceResponse]
    ) -> pb.ProduceResponse:
        topics = [(t.name, [(p.partition, p.records) for p in t.partitions]) for t in request.topics]
        answers, throttle = await self.service.produce(
            request.acks, request.timeout_ms, request.transactional_id, topics, grpc_request_context(context)
        )
        response = pb.ProduceResponse(throttle_time_ms=throttle)
        for name, results in answers:
            add = response.topics.add(name=name).partitions.add
            for r in results:
                e = r.error
                if e is None:
                    add(
                        partition=r.partition,
                        base_offset=r.base_offset,
                        log_append_time_ms=r.log_append_time_ms,
                        log_start_offset=r.log_start_offset,
                    )
                    continue
                out = add(
                    partition=r.partition,
                    error=ErrorCode.ValueType(e.code),
                    base_offset=-1,
                    log_append_time_ms=-1,
                    error_message=str(e),
                )
                hint = self.service.leader_hint(name, r.partition, e)
                if hint is not None:
                    out.current_leader.leader_id, out.current_leader.leader_epoch = hint
        return response

    # ---- Fetch ----

    def _fetch_response(self, request: pb.FetchRequest, answer: FetchAnswer) -> pb.FetchResponse:
        """The gRPC answer, built in place (see above): copying through constructors copied every record payload
        once per nesting level."""
        response = pb.FetchResponse(throttle_time_ms=answer.throttle_ms)
        if answer.stale_epoch:
            response.error = ErrorCode.STALE_BROKER_EPOCH
            return response
        if answer.error:
            response.error = ErrorCode.ValueType(answer.error)
            return response
        follower = request.replica_id >= 0
        for name, outcomes in answer.outcomes:
            add = response.topics.add(name=name).partitions.add
            for o in outcomes:
                read, e = o.read, o.error
                if read is None:
                    assert e is not None
                    r = add(partition=o.partition, error=e.code, high_watermark=-1, last_stable_offset=-1)
                    if follower:
                        r.log_start_offset, r.log_end_offset = self.service.replica_error_bounds(name, o.partition, e)
                    else:
                        r.log_start_offset = -1
                        hint = self.service.fetch_leader_hint(name, o.partition, e)
                        if hint is not None:
                            r.current_leader.leader_id, r.current_leader.leader_epoch = hint
                    continue
                r = add(
                    partition=o.partition,
                    high_watermark=read.high_watermark,
                    last_stable_offset=read.high_watermark if read.last_stable_offset < 0 else read.last_stable_offset,
                    log_start_offset=read.log_start_offset,
                    log_end_offset=read.log_end_offset,
                    all_replicas_offset=read.all_replicas_offset,
                )
                if read.aborted:
                    add_aborted = r.aborted_transactions.add
                    for txn in read.aborted:
                        add_aborted(producer_id=txn.producer_id, first_offset=txn.first_offset)
                if read.diverging is not None:
                    r.diverging_epoch.epoch = read.diverging.epoch
                    r.diverging_epoch.end_offset = read.diverging.end_offset
                    continue
                assert read.data is not None
                records = read.data.records
                if len(records):
                    # upb takes only bytes; bytes() of a bytes object is that object, so only a view is copied.
                    r.records = bytes(records)
        return response

    async def Fetch(
        self, request: pb.FetchRequest, context: grpc.aio.ServicerContext[pb.FetchRequest, pb.FetchResponse]
    ) -> pb.FetchResponse:
        answer = await self.service.fetch(fetch_request(request), grpc_request_context(context))
        return self._fetch_response(request, answer)

    # ---- ListOffsets ----

    async def ListOffsets(
        self,
        request: pb.ListOffsetsRequest,
        context: grpc.aio.ServicerContext[pb.ListOffsetsRequest, pb.ListOffsetsResponse],
    ) -> pb.ListOffsetsResponse:
        asked = ListOffsetsRequest(
            request.isolation_level,
            [
                (t.name, [OffsetQuery(p.partition, p.timestamp, p.current_leader_epoch) for p in t.partitions])
                for t in request.topics
            ],
        )
        response = pb.ListOffsetsResponse()
        for name, listed in await self.service.list_offsets(asked, grpc_request_context(context)):
            add = response.topics.add(name=name).partitions.add
            for o in listed:
                if o.error is None:
                    add(partition=o.partition, offset=o.offset, timestamp=o.timestamp, leader_epoch=o.leader_epoch)
                    continue
                r = add(partition=o.partition, error=ErrorCode.ValueType(o.error.code), offset=-1, timestamp=-1)
                if o.leader is not None:
                    r.current_leader.leader_id, r.current_leader.leader_epoch = o.leader
        return response

    # ---- DeleteRecords ----

    async def DeleteRecords(
        self,
        request: pb.DeleteRecordsRequest,
        context: grpc.aio.ServicerContext[pb.DeleteRecordsRequest, pb.DeleteRecordsResponse],
    ) -> pb.DeleteRecordsResponse:
        asked = DeleteRecordsRequest(
            [(t.name, [(p.partition, p.offset) for p in t.partitions]) for t in request.topics], request.timeout_ms
        )
        response = pb.DeleteRecordsResponse()
        for name, deleted in await self.replica_service.delete_records(asked, grpc_request_context(context)):
            add = response.topics.add(name=name).partitions.add
            for d in deleted:
                r = add(
                    partition=d.partition,
                    low_watermark=d.low_watermark,
                    error=ErrorCode.ValueType(d.error),
                    error_message=d.error_message,
                )
                if d.leader is not None:
                    r.current_leader.leader_id, r.current_leader.leader_epoch = d.leader
        return response

    # ---- Unclean recovery ----

    async def GetReplicaLogInfo(
        self,
        request: pb.ReplicaLogInfoRequest,
        context: grpc.aio.ServicerContext[pb.ReplicaLogInfoRequest, pb.ReplicaLogInfoResponse],
    ) -> pb.ReplicaLogInfoResponse:
        topics = [(t.name, t.topic_id, list(t.partitions)) for t in request.topics]
        answer = self.replica_service.replica_log_info(request.broker_id, topics, grpc_request_context(context))
        return pb.ReplicaLogInfoResponse(
            error=ErrorCode.ValueType(answer.error),
            broker_epoch=answer.broker_epoch if answer.error == ErrorCode.NONE else 0,
            topics=[
                pb.ReplicaLogInfoTopicResponse(
                    name=name,
                    partitions=[
                        pb.ReplicaLogInfoPartition(
                            partition=i.partition,
                            error=ErrorCode.ValueType(i.error),
                            last_leader_epoch=i.last_leader_epoch if i.error == ErrorCode.NONE else 0,
                            log_end_offset=i.log_end_offset if i.error == ErrorCode.NONE else 0,
                        )
                        for i in infos
                    ],
                )
                for name, infos in answer.topics
            ],
        )

    # ---- Log dirs ----

    async def DescribeLogDirs(
        self,
        request: pb.DescribeLogDirsRequest,
        context: grpc.aio.ServicerContext[pb.DescribeLogDirsRequest, pb.DescribeLogDirsResponse],
    ) -> pb.DescribeLogDirsResponse:
        """Each log dir's state and disk figures and the replicas it holds (``odradek broker log-dirs``)."""
        answer = await self.replica_service.describe_log_dirs(list(request.topics), grpc_request_context(context))
        return pb.DescribeLogDirsResponse(
            error=ErrorCode.ValueType(answer.error),
            broker_id=answer.broker_id,
            dirs=[
                pb.LogDirDescription(
                    path=d.path,
                    error=ErrorCode.ValueType(d.error),
                    total_bytes=d.total_bytes,
                    free_bytes=d.free_bytes,
                    used_bytes=d.used_bytes,
                    replicas=[
                        pb.LogDirReplica(
                            topic=r.topic,
                            partition=r.partition,
                            size_bytes=r.size_bytes,
                            offset_lag=r.offset_lag,
                            log_end_offset=r.log_end_offset,
                            is_leader=r.is_leader,
                            log_start_offset=r.log_start_offset,
                            uncleanable=r.uncleanable,
                            is_future=r.is_future,
                        )
                        for r in d.replicas
                    ],
                )
                for d in answer.dirs
            ],
        )

    async def AlterReplicaLogDirs(
        self,
        request: pb.AlterReplicaLogDirsRequest,
        context: grpc.aio.ServicerContext[pb.AlterReplicaLogDirsRequest, pb.AlterReplicaLogDirsResponse],
    ) -> pb.AlterReplicaLogDirsResponse:
        destinations = {(t.name, index): d.path for d in request.dirs for t in d.topics for index in t.partitions}
        error, codes = self.replica_service.alter_replica_log_dirs(destinations, grpc_request_context(context))
        by_topic: dict[str, list[pb.AlterReplicaLogDirsPartitionResult]] = {}
        for (topic, index), code in codes.items():
            result = pb.AlterReplicaLogDirsPartitionResult(partition=index, error=ErrorCode.ValueType(code))
            by_topic.setdefault(topic, []).append(result)
        topics = [pb.AlterReplicaLogDirsTopicResult(name=name, partitions=parts) for name, parts in by_topic.items()]
        return pb.AlterReplicaLogDirsResponse(error=ErrorCode.ValueType(error), topics=topics)

    # ---- Producer ids ----

    async def InitProducerId(
        self,
        request: pb.InitProducerIdRequest,
        context: grpc.aio.ServicerContext[pb.InitProducerIdRequest, pb.InitProducerIdResponse],
    ) -> pb.InitProducerIdResponse:
        asked = InitProducerIdRequest(
            request.transactional_id, request.transaction_timeout_ms, request.producer_id, request.producer_epoch
        )
        answer = await self.producer_id_service.init_producer_id(asked, grpc_request_context(context))
        return pb.InitProducerIdResponse(
            error=ErrorCode.ValueType(answer.error),
            producer_id=answer.producer_id,
            producer_epoch=answer.producer_epoch,
        )


def fetch_request(request: pb.FetchRequest) -> FetchRequest:
    """A gRPC FetchRequest as the data service takes it."""
    return FetchRequest(
        request.replica_id,
        request.replica_epoch,
        request.max_wait_ms,
        request.min_bytes,
        request.max_bytes,
        request.isolation_level,
        [
            FetchTopic(
                t.name,
                [
                    PartitionRead(
                        p.partition,
                        p.fetch_offset,
                        p.partition_max_bytes,
                        p.current_leader_epoch,
                        p.last_fetched_epoch,
                        p.log_start_offset,
                        p.durable_offset,
                    )
                    for p in t.partitions
                ],
            )
            for t in request.topics
        ],
    )


def _grpc_hint(hint: LeaderHint | None) -> common_pb2.LeaderHint | None:
    return None if hint is None else common_pb2.LeaderHint(leader_id=hint.leader_id, leader_epoch=hint.leader_epoch)

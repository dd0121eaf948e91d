"""The gRPC ``Controller`` service (on controllers): the brokers' registration and heartbeats, AlterPartition,
producer id blocks and internal topics, each decided on the active controller.

The ``Admin`` service is the typed admin service of ``controller/admin/`` (``NodeAdmin``) behind its gRPC adapter
(``controller/admin/grpc_adapter.py``), named here ``AdminService`` for the node's wiring (``broker/node.py``), which
serves it on both roles' listeners.
"""

from __future__ import annotations

import grpc

from odradek.client.common.metadata_image import MetadataImage
from odradek.client.common.topic_rules import INTERNAL_TOPICS
from odradek.client.errors import ErrorCode, OdradekError
from odradek.controller.active import ActiveController, now_ms
from odradek.controller.admin.grpc_adapter import AdminGrpcService as AdminService
from odradek.controller.isr import alter_partition, isr_items
from odradek.controller.producer_ids import allocate_producer_ids
from odradek.controller.topics import create_topic, internal_topic_request
from odradek.proto import controller_pb2 as cpb
from odradek.proto import controller_pb2_grpc

__all__ = ["AdminService", "ControllerService"]


class ControllerService(controller_pb2_grpc.ControllerServicer):
    def __init__(self, controller: ActiveController) -> None:
        self.controller = controller

    def _leader(self) -> int:
        leader = self.controller.driver.leader.leader_id
        return -1 if leader is None else leader

    async def RegisterBroker(
        self,
        request: cpb.BrokerRegistrationRequest,
        context: grpc.aio.ServicerContext[cpb.BrokerRegistrationRequest, cpb.BrokerRegistrationResponse],
    ) -> cpb.BrokerRegistrationResponse:
        def decide(image: MetadataImage, next_offset: int):
            d = self.controller.lifecycle.register(
                image,
                broker_id=request.broker_id,
                cluster_id=request.cluster_id,
                incarnation_id=request.incarnation_id,
                host=request.listener.host,
                port=request.listener.port,
                rack=request.rack,
                log_dirs=list(request.log_dirs),
                next_offset=next_offset,
                now_ms=now_ms(),
                previous_broker_epoch=request.previous_broker_epoch,
                listeners=[(li.name, li.host, li.port) for li in request.listeners],
            )
            return (d.records if d.error == ErrorCode.NONE else []), d

        try:
            d = await self.controller.write(decide)
        except OdradekError as e:
            return cpb.BrokerRegistrationResponse(
                error=ErrorCode.ValueType(e.code), leader_id=self._leader(), error_message=str(e)
            )
        return cpb.BrokerRegistrationResponse(
            error=d.error, broker_epoch=d.broker_epoch, leader_id=self._leader(), error_message=d.message
        )

    async def BrokerHeartbeat(
        self,
        request: cpb.BrokerHeartbeatRequest,
        context: grpc.aio.ServicerContext[cpb.BrokerHeartbeatRequest, cpb.BrokerHeartbeatResponse],
    ) -> cpb.BrokerHeartbeatResponse:
        def decide(image: MetadataImage, next_offset: int):
            d = self.controller.lifecycle.heartbeat(
                image,
                next_offset=next_offset,
                broker_id=request.broker_id,
                broker_epoch=request.broker_epoch,
                metadata_offset=request.current_metadata_offset,
                want_fence=request.want_fence,
                want_shutdown=request.want_shutdown_now,
                now_ms=now_ms(),
                offline_replicas=[(r.topic_id, i) for r in request.offline_replicas for i in r.partitions],
            )
            return (d.records if d.error == ErrorCode.NONE else []), d

        try:
            d = await self.controller.write(decide)
        except OdradekError as e:
            return cpb.BrokerHeartbeatResponse(error=ErrorCode.ValueType(e.code), leader_id=self._leader())
        if d.records:  # the answer reflects the committed change
            d.is_fenced = self.controller.image.brokers[request.broker_id].fenced
        return cpb.BrokerHeartbeatResponse(
            error=d.error,
            is_caught_up=d.is_caught_up,
            is_fenced=d.is_fenced,
            should_shut_down=d.should_shut_down,
            leader_id=self._leader(),
        )

    async def AlterPartition(
        self,
        request: cpb.AlterPartitionRequest,
        context: grpc.aio.ServicerContext[cpb.AlterPartitionRequest, cpb.AlterPartitionResponse],
    ) -> cpb.AlterPartitionResponse:
        items = isr_items(request)

        def decide(image: MetadataImage, _next_offset: int):
            return alter_partition(
                image, request.broker_id, request.broker_epoch, items, self.controller.lifecycle.min_isr
            )

        try:
            out = await self.controller.write(decide)
        except OdradekError as e:
            return cpb.AlterPartitionResponse(error=ErrorCode.ValueType(e.code))
        return out.response()

    async def AllocateProducerIds(
        self,
        request: cpb.AllocateProducerIdsRequest,
        context: grpc.aio.ServicerContext[cpb.AllocateProducerIdsRequest, cpb.AllocateProducerIdsResponse],
    ) -> cpb.AllocateProducerIdsResponse:
        def decide(image: MetadataImage, _next_offset: int):
            return allocate_producer_ids(image, request.broker_id, request.broker_epoch)

        try:
            block = await self.controller.write(decide)
        except OdradekError as e:
            return cpb.AllocateProducerIdsResponse(error=ErrorCode.ValueType(e.code), producer_id_start=-1)
        return cpb.AllocateProducerIdsResponse(
            error=block.error, producer_id_start=block.start, producer_id_len=block.length
        )

    async def CreateInternalTopic(self, request, context):
        """A broker's first use of an internal topic (the offsets or transaction state topic): created with the
        internal configs."""
        if request.name not in INTERNAL_TOPICS:
            return cpb.CreateInternalTopicResponse(
                error=ErrorCode.INVALID_TOPIC_EXCEPTION, error_message=f"'{request.name}' is not an internal topic"
            )

        def decide(image: MetadataImage, _next_offset: int):
            if image.topic(request.name) is not None:
                return [], None
            topic_request = internal_topic_request(
                image,
                request.name,
                request.num_partitions,
                request.replication_factor,
                request.segment_bytes,
                request.min_insync_replicas,
            )
            out = create_topic(image, topic_request, internal=True)
            return out.records, out

        try:
            out = await self.controller.write(decide)
        except OdradekError as e:
            return cpb.CreateInternalTopicResponse(error=ErrorCode.ValueType(e.code), error_message=str(e))
        if out is None:
            return cpb.CreateInternalTopicResponse()
        return cpb.CreateInternalTopicResponse(error=out.error, error_message=out.message)

"""The controller's shell for unclean recovery: asks brokers about their replicas' logs (GetReplicaLogInfo).

One request per broker, all at once, each bounded by a deadline; a broker that does not answer, or answers with
an error, is simply missing from the answers (the decision then waits for another round).
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Iterable

import grpc

from odradek.client.common.metadata_image import MetadataImage
from odradek.client.connection import ChannelPool
from odradek.controller.unclean_recovery import Inspection, ReplicaLog
from odradek.proto import broker_pb2 as pb
from odradek.proto import broker_pb2_grpc

logger = logging.getLogger(__name__)

Answers = dict[tuple[bytes, int], dict[int, ReplicaLog]]


class ReplicaLogInspector:
    def __init__(self, timeout_s: float = 2.0) -> None:
        self.timeout_s = timeout_s
        self._pool = ChannelPool()

    async def close(self) -> None:
        await self._pool.close()

    async def inspect(self, image: MetadataImage, inspections: Iterable[Inspection]) -> Answers:
        asked: dict[int, dict[str, tuple[bytes, list[int]]]] = defaultdict(dict)
        for i in inspections:
            for broker in i.replicas:
                asked[broker].setdefault(i.topic, (i.topic_id, []))[1].append(i.partition)
        answers: Answers = defaultdict(dict)
        calls = [self._ask(image, broker, topics, answers) for broker, topics in asked.items()]
        await asyncio.gather(*calls)
        return answers

    async def _ask(
        self, image: MetadataImage, broker: int, topics: dict[str, tuple[bytes, list[int]]], answers: Answers
    ) -> None:
        registration = image.brokers.get(broker)
        if registration is None:
            return
        request = pb.ReplicaLogInfoRequest(
            broker_id=broker,
            topics=[
                pb.ReplicaLogInfoTopic(name=name, topic_id=topic_id, partitions=partitions)
                for name, (topic_id, partitions) in topics.items()
            ],
        )
        address = f"{registration.host}:{registration.port}"
        try:
            stub = broker_pb2_grpc.BrokerStub(self._pool.get(address))
            response = await stub.GetReplicaLogInfo(request, timeout=self.timeout_s)
        except grpc.aio.AioRpcError as e:
            logger.info("unclean recovery: broker %d (%s) did not answer: %s", broker, address, e.code().name)
            await self._pool.drop(address)
            return
        if response.error:
            logger.info("unclean recovery: broker %d answered error %d", broker, response.error)
            return
        for t in response.topics:
            if t.name not in topics:
                continue
            topic_id = topics[t.name][0]
            for p in t.partitions:
                if p.error:
                    logger.info("unclean recovery: broker %d: %s-%d error %d", broker, t.name, p.partition, p.error)
                    continue
                answers[(topic_id, p.partition)][broker] = ReplicaLog(
                    broker, response.broker_epoch, p.last_leader_epoch, p.log_end_offset
                )

"""The fake cluster (fake_broker.py) with a transaction and group coordinator on broker 0.

Enough of Kafka's protocol to drive the producer: FindCoordinator, InitProducerId with a transactional id (an epoch
bump that fences the previous holder), AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit (generation checked),
EndTxn answering the bumped epoch, and Produce refusing a transactional batch whose partition was not added or
whose epoch is stale. Tests inject error codes per rpc and read what was committed or aborted.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import grpc
from fake_broker import FakeBroker, FakeCluster

from odradek.client.connection import channel_options
from odradek.client.errors import ErrorCode
from odradek.client.record.header import iter_batches
from odradek.proto import broker_pb2 as pb
from odradek.proto import broker_pb2_grpc, group_pb2_grpc, transaction_pb2_grpc
from odradek.proto import group_pb2 as gpb
from odradek.proto import transaction_pb2 as tpb

COORDINATOR = 0


@dataclass
class Txn:
    producer_id: int
    epoch: int
    ongoing: bool = False
    partitions: set[tuple[str, int]] = field(default_factory=set)
    groups: set[str] = field(default_factory=set)
    offsets: dict[tuple[str, str, int], int] = field(default_factory=dict)  # (group, topic, partition) -> offset


class TxnCluster(FakeCluster):
    def __init__(self, brokers: int = 3) -> None:
        self.txns: dict[str, Txn] = {}
        self.ended: list[tuple[str, int, int, bool, frozenset[tuple[str, int]]]] = []  # (id, pid, epoch, commit, tps)
        self.committed_offsets: dict[tuple[str, str, int], int] = {}
        self.generation = 7
        self.errors: dict[str, deque[int]] = {}  # rpc -> codes to answer, one per request
        self.transactional_batches: list[tuple[str, int, int, int, bool]] = []  # (topic, p, pid, epoch, txn flag)
        super().__init__(brokers)

    def inject(self, rpc: str, *codes: int) -> None:
        with self.lock:
            self.errors.setdefault(rpc, deque()).extend(codes)

    def _injected(self, rpc: str) -> int:
        queue = self.errors.get(rpc)
        return queue.popleft() if queue else ErrorCode.NONE

    async def _start(self, brokers: int) -> None:
        import asyncio

        self._data = asyncio.Event()
        for node in range(brokers):
            server = grpc.aio.server(options=channel_options())
            broker_pb2_grpc.add_BrokerServicer_to_server(TxnBroker(self, node), server)
            group_pb2_grpc.add_GroupCoordinatorServicer_to_server(FakeGroups(self, node), server)
            transaction_pb2_grpc.add_TransactionsServicer_to_server(FakeTransactions(self, node), server)
            self.ports[node] = server.add_insecure_port("127.0.0.1:0")
            await server.start()
            self._servers.append(server)


class TxnBroker(FakeBroker):
    cluster: TxnCluster

    async def InitProducerId(self, request, context):
        cluster = self.cluster
        if not request.transactional_id:
            return await super().InitProducerId(request, context)
        cluster.requests[self.node, "InitProducerId"] += 1
        cluster.last_request["InitProducerId"] = request
        with cluster.lock:
            if self.node != COORDINATOR:
                return pb.InitProducerIdResponse(error=ErrorCode.NOT_COORDINATOR)
            code = cluster._injected("InitProducerId")
            if code != ErrorCode.NONE:
                return pb.InitProducerIdResponse(error=code)
            txn = cluster.txns.get(request.transactional_id)
            if txn is None:
                cluster.next_producer_id += 1
                txn = cluster.txns[request.transactional_id] = Txn(cluster.next_producer_id, 0)
            else:
                txn.epoch += 1  # fences the previous producer; what it left open is aborted
                if txn.ongoing:
                    cluster.ended.append(
                        (request.transactional_id, txn.producer_id, txn.epoch, False, frozenset(txn.partitions))
                    )
                txn.ongoing, txn.partitions, txn.groups, txn.offsets = False, set(), set(), {}
            return pb.InitProducerIdResponse(producer_id=txn.producer_id, producer_epoch=txn.epoch)

    def _produce(self, request):
        """Refuse transactional batches that the coordinator has not seen added (KIP-890), or stale ones."""
        cluster = self.cluster
        if request.transactional_id:
            refused: dict[tuple[str, int], int] = {}
            with cluster.lock:
                txn = cluster.txns.get(request.transactional_id)
                for t in request.topics:
                    for pp in t.partitions:
                        data = pp.records
                        for h in iter_batches(data):
                            cluster.transactional_batches.append(
                                (t.name, pp.partition, h.producer_id, h.producer_epoch, h.is_transactional)
                            )
                            if txn is None or h.producer_epoch < txn.epoch:
                                refused[t.name, pp.partition] = ErrorCode.INVALID_PRODUCER_EPOCH
                            elif (t.name, pp.partition) not in txn.partitions:
                                refused[t.name, pp.partition] = ErrorCode.TRANSACTION_ABORTABLE
                for (topic, partition), code in refused.items():
                    cluster.produce_errors.setdefault((topic, partition), deque()).appendleft(code)
        return super()._produce(request)


class FakeTransactions(transaction_pb2_grpc.TransactionsServicer):
    def __init__(self, cluster: TxnCluster, node: int) -> None:
        self.cluster = cluster
        self.node = node

    def _check(self, rpc: str, transactional_id: str, producer_id: int, epoch: int) -> tuple[int, Txn | None]:
        cluster = self.cluster
        cluster.requests[self.node, rpc] += 1
        cluster.last_request[rpc] = None
        if self.node != COORDINATOR:
            return ErrorCode.NOT_COORDINATOR, None
        code = cluster._injected(rpc)
        if code != ErrorCode.NONE:
            return code, None
        txn = cluster.txns.get(transactional_id)
        if txn is None or txn.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING, None
        if epoch != txn.epoch:
            return ErrorCode.PRODUCER_FENCED, None
        return ErrorCode.NONE, txn

    async def AddPartitionsToTxn(self, request, context):
        with self.cluster.lock:
            self.cluster.last_request["AddPartitionsToTxn"] = request
            code, txn = self._check("AddPartitionsToTxn", request.transactional_id, request.producer_id,
                                    request.producer_epoch)  # fmt: skip
            if txn is None:
                return tpb.AddPartitionsToTxnResponse(error=code)
            txn.ongoing = True
            txn.partitions.update((t.name, p) for t in request.topics for p in t.partitions)
            return tpb.AddPartitionsToTxnResponse(
                results=[
                    tpb.TxnTopicResult(
                        name=t.name, partitions=[tpb.TxnPartitionResult(partition=p) for p in t.partitions]
                    )
                    for t in request.topics
                ]
            )

    async def AddOffsetsToTxn(self, request, context):
        with self.cluster.lock:
            code, txn = self._check("AddOffsetsToTxn", request.transactional_id, request.producer_id,
                                    request.producer_epoch)  # fmt: skip
            if txn is None:
                return tpb.AddOffsetsToTxnResponse(error=code)
            txn.ongoing = True
            txn.groups.add(request.group_id)
            return tpb.AddOffsetsToTxnResponse()

    async def EndTxn(self, request, context):
        cluster = self.cluster
        with cluster.lock:
            code, txn = self._check("EndTxn", request.transactional_id, request.producer_id, request.producer_epoch)
            if txn is None:
                return tpb.EndTxnResponse(error=code)
            if not txn.ongoing:
                return tpb.EndTxnResponse(error=ErrorCode.INVALID_TXN_STATE)
            txn.epoch += 1  # KIP-890: every end bumps the epoch
            cluster.ended.append(
                (request.transactional_id, txn.producer_id, txn.epoch, request.committed, frozenset(txn.partitions))
            )
            if request.committed:
                cluster.committed_offsets.update(txn.offsets)
            txn.ongoing, txn.partitions, txn.groups, txn.offsets = False, set(), set(), {}
            return tpb.EndTxnResponse(producer_id=txn.producer_id, producer_epoch=txn.epoch)


class FakeGroups(group_pb2_grpc.GroupCoordinatorServicer):
    def __init__(self, cluster: TxnCluster, node: int) -> None:
        self.cluster = cluster
        self.node = node

    async def FindCoordinator(self, request, context):
        cluster = self.cluster
        cluster.requests[self.node, f"FindCoordinator/{gpb.CoordinatorType.Name(request.key_type)}"] += 1
        return gpb.FindCoordinatorResponse(
            coordinators=[
                gpb.Coordinator(key=k, node_id=COORDINATOR, host="127.0.0.1", port=cluster.ports[COORDINATOR])
                for k in request.keys
            ]
        )

    async def TxnOffsetCommit(self, request, context):
        cluster = self.cluster
        cluster.requests[self.node, "TxnOffsetCommit"] += 1
        with cluster.lock:
            cluster.last_request["TxnOffsetCommit"] = request
            code = cluster._injected("TxnOffsetCommit")
            txn = cluster.txns.get(request.transactional_id)
            if code == ErrorCode.NONE and request.generation_id != cluster.generation:
                code = ErrorCode.ILLEGAL_GENERATION
            if code == ErrorCode.NONE and (txn is None or request.group_id not in txn.groups):
                code = ErrorCode.INVALID_TXN_STATE
            if code == ErrorCode.NONE and txn is not None:
                for t in request.topics:
                    for p in t.partitions:
                        txn.offsets[request.group_id, t.name, p.partition] = p.committed_offset
            return gpb.TxnOffsetCommitResponse(
                topics=[
                    gpb.OffsetCommitTopicResponse(
                        name=t.name,
                        partitions=[
                            gpb.OffsetCommitPartitionResponse(partition=p.partition, error=code) for p in t.partitions
                        ],
                    )
                    for t in request.topics
                ]
            )

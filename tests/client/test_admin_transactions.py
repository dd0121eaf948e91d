"""The admin client's transaction pieces: find-hanging's decision (pure), the state filter, the CLI's argument
checks and output, and the requests' plumbing against an in-process fake node (coordinator lookup with key type
TRANSACTION, retries while the coordinator moves or completes a transaction, the markers written by an abort)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import grpc
import pytest

from odradek.client.admin import AsyncAdmin
from odradek.client.admin_transactions import (
    OpenTransaction,
    PartitionProducers,
    ProducerState,
    TransactionDescription,
    canonical_states,
    hanging_candidates,
    hanging_transactions,
    open_transactions,
)
from odradek.client.cli import main as cli_main
from odradek.client.cli.transactions import describe_human
from odradek.client.errors import ErrorCode, InvalidRequestError, OdradekError, TransactionalIdNotFoundError
from odradek.client.structs import TopicPartition
from odradek.proto import admin_pb2 as apb
from odradek.proto import admin_pb2_grpc, broker_pb2_grpc, group_pb2_grpc, transaction_pb2_grpc
from odradek.proto import broker_pb2 as bpb
from odradek.proto import group_pb2 as gpb
from odradek.proto import transaction_pb2 as tpb

NOW = 10_000_000
MAX = 900_000
TP = TopicPartition("t", 0)


def producer(pid: int, start: int = 5, last_ts: int = NOW - MAX - 1, epoch: int = 3, coord: int = 2) -> ProducerState:
    return ProducerState(pid, epoch, 7, last_ts, coord, start)


def owner(pid: int, state: str = "Ongoing", partitions: tuple[TopicPartition, ...] = (TP,)) -> TransactionDescription:
    return TransactionDescription("app", state, pid, 3, 60_000, NOW - 1000, NOW, 1, list(partitions))


# -- find-hanging's decision ---------------------------------------------------------------------------------------


def test_only_producers_with_an_open_transaction_are_open_transactions() -> None:
    pp = PartitionProducers("t", 0, 1, [producer(1, start=-1), producer(2, start=40)])
    assert [t.producer.producer_id for t in open_transactions([pp])] == [2]


def test_candidates_are_open_longer_than_the_max_timeout() -> None:
    old = OpenTransaction("t", 0, producer(1, last_ts=NOW - MAX - 1))
    edge = OpenTransaction("t", 0, producer(2, last_ts=NOW - MAX))
    unknown = OpenTransaction("t", 0, producer(3, last_ts=-1))
    assert hanging_candidates([old, edge, unknown], NOW, MAX) == [old, unknown]


@pytest.mark.parametrize(
    ("owned", "hanging"),
    [
        (None, True),  # no transactional id has this producer id
        (owner(1), False),  # its id's transaction is Ongoing with the partition: the coordinator will end it
        (owner(1, state="CompleteAbort"), True),  # the coordinator ended it, the partition never got the marker
        (owner(1, state="Empty"), True),
        (owner(1, partitions=(TopicPartition("t", 1),)), True),  # a batch outside the transaction
        (owner(99), True),  # the id has moved on to another producer id
    ],
)
def test_hanging_unless_the_coordinator_lists_it_ongoing_with_the_partition(
    owned: TransactionDescription | None, hanging: bool
) -> None:
    txn = OpenTransaction("t", 0, producer(1))
    assert hanging_transactions([txn], {1: owned}) == ([txn] if hanging else [])


def test_hanging_transactions_are_sorted_by_partition_and_offset() -> None:
    txns = [
        OpenTransaction("t", 1, producer(1, 9)),
        OpenTransaction("t", 0, producer(2, 30)),
        OpenTransaction("t", 0, producer(3, 4)),
    ]
    found = hanging_transactions(txns, {})
    assert [(t.partition, t.producer.current_txn_start_offset) for t in found] == [(0, 4), (0, 30), (1, 9)]


def test_open_transaction_json_shape() -> None:
    assert OpenTransaction("t", 0, producer(1, start=5, last_ts=NOW - 60_000)).to_dict(NOW) == {
        "topic": "t",
        "partition": 0,
        "producer_id": 1,
        "producer_epoch": 3,
        "coordinator_epoch": 2,
        "start_offset": 5,
        "last_timestamp": NOW - 60_000,
        "duration_ms": 60_000,
    }


def test_state_filters_take_kafka_names_in_any_case_and_refuse_others() -> None:
    assert canonical_states(["ongoing", "PREPARECOMMIT", "Empty"]) == ["Ongoing", "PrepareCommit", "Empty"]
    with pytest.raises(InvalidRequestError, match="unknown transaction state 'running'"):
        canonical_states(["running"])


def test_description_json_and_human_forms() -> None:
    d = TransactionDescription("app", "Ongoing", 7, 2, 60_000, NOW - 5000, NOW - 1000, 3, [TP])
    assert d.to_dict() == {
        "transactional_id": "app",
        "state": "Ongoing",
        "producer_id": 7,
        "producer_epoch": 2,
        "transaction_timeout_ms": 60_000,
        "transaction_start_time_ms": NOW - 5000,
        "last_update_time_ms": NOW - 1000,
        "coordinator": 3,
        "partitions": [{"topic": "t", "partition": 0}],
    }
    human = describe_human(d, NOW)
    assert "state:             Ongoing" in human and "(open 5 s)" in human and "producer epoch:    2" in human
    idle = TransactionDescription("app", "Empty", 7, 2, 60_000, -1, NOW, 3, [])
    assert "start time:        -\n" in describe_human(idle, NOW) and "(no partitions)" in describe_human(idle, NOW)
    done = TransactionDescription("app", "CompleteCommit", 7, 2, 60_000, NOW - 5000, NOW, 3, [])
    assert "(open" not in describe_human(done, NOW)  # its start time is kept, but it is no longer open


# -- the CLI refuses bad input with one error line, before any request ---------------------------------------------


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["abort"], "give --transactional-id, or all of --topic, --partition and --start-offset"),
        (["abort", "--topic", "t", "--partition", "0"], "all of --topic, --partition and --start-offset"),
        (["abort", "--transactional-id", "x", "--topic", "t"], "not both"),
        (["abort", "--topic", "t", "--partition", "0", "--start-offset", "-3"], "--start-offset must be >= 0"),
        (["find-hanging", "--partition", "1"], "--partition needs --topic"),
        (["find-hanging", "--max-transaction-timeout-ms", "-1"], "--max-transaction-timeout-ms must be >= 0"),
        (["list", "--duration-ms", "-5"], "--duration-ms must be >= 0"),
        (["describe-producers", "--topic", "t", "--partition", "-1"], "--partition must be >= 0"),
    ],
)
def test_cli_bad_input_is_one_error_line(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main.main(["transaction", *argv, "-X", "127.0.0.1:1"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and message in err[0], err


# -- the requests against a fake node --------------------------------------------------------------------------------


@dataclass
class FakeNode:
    """One broker (node 1) that is the coordinator of every id and the leader of topic ``t`` (2 partitions)."""

    port: int = 0
    txns: dict[str, tpb.TransactionDescription] = field(default_factory=dict)
    producers: dict[int, list[tpb.ProducerDescription]] = field(default_factory=dict)  # partition of "t" -> ...
    find_errors: list[int] = field(default_factory=list)  # FindCoordinator answers these first
    init_errors: list[int] = field(default_factory=list)  # InitProducerId answers these first
    requests: list[tuple[str, Any]] = field(default_factory=list)

    def node(self) -> apb.BrokerInfo:
        return apb.BrokerInfo(node_id=1, host="127.0.0.1", port=self.port)


class _Admin(admin_pb2_grpc.AdminServicer):
    def __init__(self, node: FakeNode) -> None:
        self.node = node

    async def DescribeCluster(self, request: Any, context: Any) -> apb.DescribeClusterResponse:
        return apb.DescribeClusterResponse(cluster_id="c", controller_id=1, brokers=[self.node.node()])

    async def DescribeTopics(self, request: Any, context: Any) -> apb.DescribeTopicsResponse:
        parts = [apb.PartitionDescription(partition=p, leader=1, replicas=[1], isr=[1]) for p in range(2)]
        topics = [apb.TopicDescription(name="t", partitions=parts)]
        if request.names and "t" not in request.names:
            topics = [apb.TopicDescription(name=n, error=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION) for n in request.names]
        return apb.DescribeTopicsResponse(topics=topics)


class _Groups(group_pb2_grpc.GroupCoordinatorServicer):
    def __init__(self, node: FakeNode) -> None:
        self.node = node

    async def FindCoordinator(self, request: Any, context: Any) -> gpb.FindCoordinatorResponse:
        self.node.requests.append(("FindCoordinator", request))
        error = self.node.find_errors.pop(0) if self.node.find_errors else ErrorCode.NONE
        [key] = request.keys
        return gpb.FindCoordinatorResponse(
            coordinators=[gpb.Coordinator(key=key, error=error, node_id=1, host="127.0.0.1", port=self.node.port)]
        )


class _Broker(broker_pb2_grpc.BrokerServicer):
    def __init__(self, node: FakeNode) -> None:
        self.node = node

    async def InitProducerId(self, request: Any, context: Any) -> bpb.InitProducerIdResponse:
        self.node.requests.append(("InitProducerId", request))
        if self.node.init_errors:
            return bpb.InitProducerIdResponse(error=self.node.init_errors.pop(0))
        d = self.node.txns[request.transactional_id]
        return bpb.InitProducerIdResponse(producer_id=d.producer_id, producer_epoch=d.producer_epoch + 2)


class _Txns(transaction_pb2_grpc.TransactionsServicer):
    def __init__(self, node: FakeNode) -> None:
        self.node = node

    async def ListTransactions(self, request: Any, context: Any) -> tpb.ListTransactionsResponse:
        self.node.requests.append(("ListTransactions", request))
        listed = [
            tpb.ListedTransaction(transactional_id=d.transactional_id, producer_id=d.producer_id, state=d.state)
            for d in self.node.txns.values()
            if (not request.state_filters or d.state in request.state_filters)
            and (not request.producer_id_filters or d.producer_id in request.producer_id_filters)
        ]
        return tpb.ListTransactionsResponse(transactions=listed)

    async def DescribeTransactions(self, request: Any, context: Any) -> tpb.DescribeTransactionsResponse:
        [i] = request.transactional_ids
        found = self.node.txns.get(i)
        if found is None:
            found = tpb.TransactionDescription(transactional_id=i, error=ErrorCode.TRANSACTIONAL_ID_NOT_FOUND)
        return tpb.DescribeTransactionsResponse(transactions=[found])

    async def DescribeProducers(self, request: Any, context: Any) -> tpb.DescribeProducersResponse:
        return tpb.DescribeProducersResponse(
            topics=[
                tpb.DescribeProducersTopic(
                    name=t.name,
                    partitions=[
                        tpb.DescribeProducersPartition(partition=p, active_producers=self.node.producers.get(p, []))
                        for p in t.partitions
                    ],
                )
                for t in request.topics
            ]
        )

    async def WriteTxnMarkers(self, request: Any, context: Any) -> tpb.WriteTxnMarkersResponse:
        self.node.requests.append(("WriteTxnMarkers", request))
        return tpb.WriteTxnMarkersResponse(
            markers=[
                tpb.TxnMarkerResult(
                    producer_id=m.producer_id,
                    topics=[
                        tpb.TxnTopicResult(
                            name=t.name, partitions=[tpb.TxnPartitionResult(partition=p) for p in t.partitions]
                        )
                        for t in m.topics
                    ],
                )
                for m in request.markers
            ]
        )


@pytest.fixture
async def fake() -> AsyncIterator[tuple[FakeNode, AsyncAdmin]]:
    node = FakeNode()
    server = grpc.aio.server()
    admin_pb2_grpc.add_AdminServicer_to_server(_Admin(node), server)
    group_pb2_grpc.add_GroupCoordinatorServicer_to_server(_Groups(node), server)
    broker_pb2_grpc.add_BrokerServicer_to_server(_Broker(node), server)
    transaction_pb2_grpc.add_TransactionsServicer_to_server(_Txns(node), server)
    node.port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    admin = AsyncAdmin(
        {"bootstrap.servers": f"127.0.0.1:{node.port}", "request.timeout.ms": 3000, "retry.backoff.ms": 10}
    )
    try:
        yield node, admin
    finally:
        await admin.close()
        await server.stop(None)


def ongoing(txn_id: str, pid: int, partitions: list[int]) -> tpb.TransactionDescription:
    return tpb.TransactionDescription(
        transactional_id=txn_id,
        state="Ongoing",
        producer_id=pid,
        producer_epoch=4,
        transaction_timeout_ms=45_000,
        transaction_start_time_ms=NOW,
        last_update_time_ms=NOW,
        topics=[tpb.TxnTopic(name="t", partitions=partitions)],
        coordinator_id=1,
    )


async def test_describe_finds_the_transaction_coordinator_again_while_it_moves(
    fake: tuple[FakeNode, AsyncAdmin],
) -> None:
    node, admin = fake
    node.txns["app"] = ongoing("app", 7, [1, 0])
    node.find_errors = [ErrorCode.COORDINATOR_LOAD_IN_PROGRESS]
    [d] = await admin.describe_transactions(["app"])
    assert (d.state, d.producer_id, d.producer_epoch, d.coordinator) == ("Ongoing", 7, 4, 1)
    assert d.partitions == [TopicPartition("t", 0), TopicPartition("t", 1)]
    finds = [r for name, r in node.requests if name == "FindCoordinator"]
    assert len(finds) == 2 and all(r.key_type == gpb.TRANSACTION and list(r.keys) == ["app"] for r in finds)
    with pytest.raises(TransactionalIdNotFoundError, match="nope"):
        await admin.describe_transactions(["nope"])


async def test_list_sends_the_filters(fake: tuple[FakeNode, AsyncAdmin]) -> None:
    node, admin = fake
    node.txns = {"b": ongoing("b", 2, [0]), "a": ongoing("a", 1, [0])}
    listed = await admin.list_transactions(["ongoing"], [2, 1], 500)
    assert [(t.transactional_id, t.producer_id, t.state, t.coordinator) for t in listed] == [
        ("a", 1, "Ongoing", 1),
        ("b", 2, "Ongoing", 1),
    ]
    [(_, request)] = [r for r in node.requests if r[0] == "ListTransactions"]
    assert (list(request.state_filters), list(request.producer_id_filters), request.duration_filter_ms) == (
        ["Ongoing"],
        [1, 2],
        500,
    )
    await admin.list_transactions()
    last = [r for name, r in node.requests if name == "ListTransactions"][-1]
    assert last.duration_filter_ms == -1  # no duration: no filter (0 would leave out those started this ms)


async def test_abort_writes_an_abort_marker_for_the_producer_open_at_the_offset(
    fake: tuple[FakeNode, AsyncAdmin],
) -> None:
    node, admin = fake
    node.producers[1] = [
        tpb.ProducerDescription(producer_id=5, producer_epoch=2, coordinator_epoch=-1, current_txn_start_offset=3),
        tpb.ProducerDescription(producer_id=6, producer_epoch=9, coordinator_epoch=4, current_txn_start_offset=11),
    ]
    aborted = await admin.abort_transaction("t", 1, 11)
    assert (aborted.producer_id, aborted.producer_epoch, aborted.coordinator_epoch) == (6, 9, 4)
    [(_, request)] = [r for r in node.requests if r[0] == "WriteTxnMarkers"]
    [marker] = request.markers
    assert (marker.producer_id, marker.producer_epoch, marker.committed, marker.coordinator_epoch) == (6, 9, False, 4)
    assert [(t.name, list(t.partitions)) for t in marker.topics] == [("t", [1])]
    await admin.abort_transaction("t", 1, 3)  # no marker seen yet: coordinator epoch 0, as Kafka's tool
    assert [r for n, r in node.requests if n == "WriteTxnMarkers"][-1].markers[0].coordinator_epoch == 0
    with pytest.raises(
        OdradekError, match=r"no open transaction of t:1 starts at offset 4 \(open transactions start at 3, 11\)"
    ):
        await admin.abort_transaction("t", 1, 4)
    with pytest.raises(OdradekError, match="unknown partition t:5") as e:
        await admin.abort_transaction("t", 5, 0)
    assert e.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


async def test_fence_retries_while_the_coordinator_completes_the_abort(fake: tuple[FakeNode, AsyncAdmin]) -> None:
    node, admin = fake
    node.txns["app"] = ongoing("app", 7, [0])
    node.init_errors = [ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.NOT_COORDINATOR]
    fenced = await admin.fence_transactional_id("app")
    assert (fenced.producer_id, fenced.producer_epoch, fenced.previous_state) == (7, 6, "Ongoing")
    inits = [r for n, r in node.requests if n == "InitProducerId"]
    assert len(inits) == 3
    assert all((r.transactional_id, r.transaction_timeout_ms, r.producer_id) == ("app", 45_000, -1) for r in inits)
    with pytest.raises(TransactionalIdNotFoundError):
        await admin.fence_transactional_id("nope")
    assert len([n for n, _ in node.requests if n == "InitProducerId"]) == 3  # an unknown id is not created


async def test_find_hanging_asks_the_coordinators_about_old_open_transactions(
    fake: tuple[FakeNode, AsyncAdmin],
) -> None:
    node, admin = fake
    old = NOW - MAX - 1
    node.producers[0] = [
        tpb.ProducerDescription(producer_id=7, producer_epoch=4, last_timestamp=old, current_txn_start_offset=2),
        tpb.ProducerDescription(producer_id=8, producer_epoch=1, last_timestamp=old, current_txn_start_offset=9),
        tpb.ProducerDescription(producer_id=9, producer_epoch=1, last_timestamp=NOW, current_txn_start_offset=12),
    ]
    node.producers[1] = [
        tpb.ProducerDescription(producer_id=7, producer_epoch=4, last_timestamp=old, current_txn_start_offset=0)
    ]
    node.txns["app"] = ongoing("app", 7, [0])  # ongoing on t:0 only: its open transaction on t:1 hangs
    found = await admin.find_hanging_transactions(now_ms=NOW, max_transaction_timeout_ms=MAX)
    assert [(t.partition, t.producer.producer_id, t.producer.current_txn_start_offset) for t in found] == [
        (0, 8, 9),
        (1, 7, 0),
    ]
    assert await admin.find_hanging_transactions(broker=1, topics=["t"], partition=0, now_ms=NOW) == found[:1]


async def test_an_unimplemented_service_is_unsupported_version() -> None:
    server = grpc.aio.server()
    port = server.add_insecure_port("127.0.0.1:0")
    node = FakeNode(port=port)
    admin_pb2_grpc.add_AdminServicer_to_server(_Admin(node), server)
    await server.start()
    admin = AsyncAdmin({"bootstrap.servers": f"127.0.0.1:{port}", "request.timeout.ms": 2000})
    try:
        with pytest.raises(OdradekError) as e:
            await admin.list_transactions()
        assert e.value.code == ErrorCode.UNSUPPORTED_VERSION
    finally:
        await admin.close()
        await server.stop(None)


def test_cli_json_of_describe_producers(capsys: pytest.CaptureFixture[str]) -> None:
    """The command end to end against the fake node (run on its own loop in a thread)."""
    import threading

    ready = threading.Event()
    stop: asyncio.Event | None = None
    state: dict[str, Any] = {}

    async def serve() -> None:
        nonlocal stop
        stop = asyncio.Event()
        node = FakeNode()
        node.producers[0] = [
            tpb.ProducerDescription(producer_id=5, producer_epoch=2, last_sequence=3, current_txn_start_offset=4)
        ]
        server = grpc.aio.server()
        admin_pb2_grpc.add_AdminServicer_to_server(_Admin(node), server)
        transaction_pb2_grpc.add_TransactionsServicer_to_server(_Txns(node), server)
        node.port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        state["port"], state["loop"] = node.port, asyncio.get_running_loop()
        ready.set()
        await stop.wait()
        await server.stop(None)

    thread = threading.Thread(target=lambda: asyncio.run(serve()), daemon=True)
    thread.start()
    assert ready.wait(10)
    try:
        argv = ["transaction", "describe-producers", "--topic", "t", "--partition", "0", "--format", "json"]
        assert cli_main.main([*argv, "-X", f"127.0.0.1:{state['port']}"]) == 0
    finally:
        state["loop"].call_soon_threadsafe(stop.set)  # type: ignore[union-attr]
        thread.join(10)
    assert json.loads(capsys.readouterr().out) == {
        "topic": "t",
        "partition": 0,
        "leader": 1,
        "producers": [
            {
                "producer_id": 5,
                "producer_epoch": 2,
                "last_sequence": 3,
                "last_timestamp": 0,
                "coordinator_epoch": 0,
                "current_txn_start_offset": 4,
            }
        ],
    }

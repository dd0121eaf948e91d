"""The transaction coordinator's shell over a real ``__transaction_state`` partition (one replica on a real log), a
fake marker transport and a simulated clock: a transaction from InitProducerId to its Complete* record, markers
carrying the coordinator epoch, the routing errors, a failover (the next coordinator loads the log and writes the
markers of a transaction the first one left in Prepare*), and the admin reads: DescribeTransactions and
ListTransactions as Kafka answers them."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from controller_images import brokers, partition, topic

from odradek.broker.config import NodeConfig
from odradek.broker.groups.partitioner import offsets_partition_for
from odradek.broker.log.log import Log
from odradek.broker.partition import Partition
from odradek.broker.transactions.coordinator import TransactionCoordinator, TxnCoordinatorConfig
from odradek.broker.transactions.markers import MarkerChannel
from odradek.broker.transactions.metadata import TxnMetadata, TxnState
from odradek.broker.transactions.records import TRANSACTION_STATE_TOPIC, encode_batch, read_records
from odradek.broker.transactions.requests import DescribeTransactions
from odradek.broker.transactions.txn_service import TxnService
from odradek.client.common.access import AccessControl, AuthorizerSettings
from odradek.client.common.acls import AclBinding, AclOperation, AclPermissionType, PatternType, ResourceType
from odradek.client.common.metadata_image import MetadataImage, PartitionRegistration, image_from_records
from odradek.client.common.request_context import RequestContext
from odradek.client.errors import ErrorCode
from odradek.client.structs import TopicPartition
from odradek.proto import transaction_pb2 as tpb

STATE_ID = b"\x07" * 16
DATA_ID = b"\x08" * 16
OTHER_ID = b"\x09" * 16
TP = TopicPartition("t", 0)
UP = TopicPartition("u", 0)
MAX = 1 << 20


class Cluster:
    """``__transaction_state-0`` led by broker 1 alone; topics ``t`` and ``u`` with one partition led by broker 2."""

    def __init__(self, root: Path) -> None:
        self.state = Partition(TRANSACTION_STATE_TOPIC, 0, Log.open(root / f"{TRANSACTION_STATE_TOPIC}-0"), 1)
        self.lead(1)
        self.image: MetadataImage = image_from_records(
            [
                *brokers(1, 2),
                topic(TRANSACTION_STATE_TOPIC, STATE_ID),
                partition(0, [1], topic_id=STATE_ID, leader_epoch=1),
                topic("t", DATA_ID),
                partition(0, [2], topic_id=DATA_ID),
                topic("u", OTHER_ID),
                partition(0, [2], topic_id=OTHER_ID),
            ]
        )
        self.requests: list[tuple[int, tpb.WriteTxnMarkersRequest]] = []
        self.offsets_asked = 0  # the group coordinator's answer for AddOffsetsToTxn: 7 partitions
        self.acknowledge = True
        self.sent = asyncio.Event()

    def offsets_partitions(self) -> int:
        self.offsets_asked += 1
        return 7

    def lead(self, epoch: int) -> None:
        self.state.update(PartitionRegistration(STATE_ID, 0, (1,), (1,), 1, epoch, epoch), 1, 0)

    async def send(self, broker: int, request: tpb.WriteTxnMarkersRequest) -> tpb.WriteTxnMarkersResponse:
        self.requests.append((broker, request))
        self.sent.set()
        code = ErrorCode.NONE if self.acknowledge else ErrorCode.NOT_LEADER_OR_FOLLOWER
        return tpb.WriteTxnMarkersResponse(
            markers=[
                tpb.TxnMarkerResult(
                    producer_id=m.producer_id,
                    topics=[
                        tpb.TxnTopicResult(
                            name=t.name,
                            partitions=[tpb.TxnPartitionResult(partition=p, error=code) for p in t.partitions],
                        )
                        for t in m.topics
                    ],
                )
                for m in request.markers
            ]
        )

    def records(self) -> list[TxnState | None]:
        data = self.state.log.read(0, MAX)
        return [md.state if md else None for _, md in read_records(data.records)]


class ProducerIds:
    def __init__(self) -> None:
        self.next = 100

    async def next_id(self) -> int:
        self.next += 1
        return self.next


class ManualClock:
    def __init__(self) -> None:
        self.now = 1_700_000_000_000

    def __call__(self) -> int:
        return self.now


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    c = Cluster(tmp_path)
    yield c
    c.state.log.close()


def coordinator(cluster: Cluster, clock: Callable[[], int] | None = None) -> TransactionCoordinator:
    async def create(partitions: int, replication_factor: int) -> None:
        raise AssertionError("the topic exists")

    markers = MarkerChannel(lambda: cluster.image, cluster.send, backoff_ms=10)
    c = TransactionCoordinator(
        1,
        lambda: cluster.image,
        TxnCoordinatorConfig(),
        create,
        ProducerIds(),
        markers,
        cluster.offsets_partitions,
        clock or ManualClock(),
    )
    c.on_leadership({(TRANSACTION_STATE_TOPIC, 0): cluster.state})
    return c


async def until(condition: Callable[[], bool], what: str, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.01)


def state(c: TransactionCoordinator, txn_id: str = "tx") -> TxnState | None:
    _, md = c.describe(txn_id)
    return md.state if md else None


async def test_a_transaction_runs_to_its_complete_record_with_markers_at_the_coordinator_epoch(cluster) -> None:
    c = coordinator(cluster)
    await until(lambda: c.partitions[0].loaded, "the partition loads")
    error, pid, epoch = await c.init_producer_id("tx", 60_000)
    assert (error, pid, epoch) == (ErrorCode.NONE, 101, 0)
    assert await c.add_partitions("tx", pid, epoch, [TP]) == (ErrorCode.NONE, {TP: ErrorCode.NONE})
    assert c.verify("tx", pid, epoch, [TP]) == (ErrorCode.NONE, {TP: ErrorCode.NONE})
    assert await c.end_txn("tx", pid, epoch, True) == (ErrorCode.NONE, pid, 1)
    await until(lambda: state(c) is TxnState.COMPLETE_COMMIT, "the Complete record")
    [(broker, request)] = cluster.requests
    [marker] = request.markers
    assert broker == 2 and (marker.producer_id, marker.producer_epoch, marker.committed) == (pid, 1, True)
    assert marker.coordinator_epoch == 1  # the leader epoch the coordinator loaded at
    assert cluster.records() == [TxnState.EMPTY, TxnState.ONGOING, TxnState.PREPARE_COMMIT, TxnState.COMPLETE_COMMIT]
    assert c.committed == 1 and c.aborted == 0
    await c.close()


async def test_an_end_keeping_the_epoch_writes_markers_at_it_and_the_next_transaction_uses_it(cluster) -> None:
    c = coordinator(cluster)
    await until(lambda: c.partitions[0].loaded, "the partition loads")
    _, pid, epoch = await c.init_producer_id("tx", 60_000)
    for n in (1, 2):
        assert await c.add_partitions("tx", pid, epoch, [TP]) == (ErrorCode.NONE, {TP: ErrorCode.NONE})
        assert await c.end_txn("tx", pid, epoch, True, bump_epoch=False) == (ErrorCode.NONE, pid, epoch)
        await until(lambda n=n: state(c) is TxnState.COMPLETE_COMMIT and c.committed == n, "the Complete record")
        marker = cluster.requests[-1][1].markers[0]
        assert (marker.producer_id, marker.producer_epoch) == (pid, epoch)
    assert await c.end_txn("tx", pid, epoch, True, bump_epoch=False) == (ErrorCode.NONE, pid, epoch)  # a retry
    await c.close()


async def test_offsets_join_a_transaction_before_the_offsets_topic_exists(cluster) -> None:
    """AddOffsetsToTxn may come before any consumer of the group found its coordinator: the group coordinator's
    count (the configured one, the topic's creation started) maps the group, instead of a retriable error that
    nothing would ever clear."""
    c = coordinator(cluster)
    await until(lambda: c.partitions[0].loaded, "the partition loads")
    _, pid, epoch = await c.init_producer_id("tx", 60_000)
    assert await c.add_offsets("tx", pid, epoch, "g") == ErrorCode.NONE
    assert cluster.offsets_asked == 1
    _, md = c.describe("tx")
    assert md is not None and md.partitions == {TopicPartition("__consumer_offsets", offsets_partition_for("g", 7))}
    await c.close()


async def test_unknown_partitions_and_routing_errors(cluster) -> None:
    c = coordinator(cluster)
    assert (await c.init_producer_id("tx", 60_000))[0] == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    await until(lambda: c.partitions[0].loaded, "the partition loads")
    _, pid, epoch = await c.init_producer_id("tx", 60_000)
    gone = TopicPartition("nope", 0)
    assert await c.add_partitions("tx", pid, epoch, [TP, gone]) == (
        ErrorCode.NONE,
        {TP: ErrorCode.INVALID_REQUEST, gone: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION},
    )
    assert state(c) is TxnState.EMPTY
    cluster.lead(2)  # a new leader epoch: what was loaded at epoch 1 may not be acted on
    assert (await c.end_txn("tx", pid, epoch, True))[0] == ErrorCode.NOT_COORDINATOR
    c.on_leadership({(TRANSACTION_STATE_TOPIC, 0): cluster.state})
    await until(lambda: c.partitions[0].loaded, "the partition reloads")
    assert state(c) is TxnState.EMPTY
    assert c.find_coordinator("tx") == (ErrorCode.NONE, 1, "127.0.0.1", 9001)
    assert c.find_coordinator("")[0] == ErrorCode.INVALID_REQUEST
    await c.close()


async def test_the_next_coordinator_writes_the_markers_the_first_left_unwritten(cluster) -> None:
    first = coordinator(cluster)
    await until(lambda: first.partitions[0].loaded, "the partition loads")
    _, pid, epoch = await first.init_producer_id("tx", 60_000)
    await first.add_partitions("tx", pid, epoch, [TP])
    cluster.acknowledge = False  # the partition's leader never acknowledges: markers stay unwritten
    assert await first.end_txn("tx", pid, epoch, False) == (ErrorCode.NONE, pid, 1)
    await cluster.sent.wait()
    await first.close()  # the coordinator dies with the abort prepared
    assert cluster.records()[-1] is TxnState.PREPARE_ABORT
    cluster.requests.clear()
    cluster.acknowledge = True
    cluster.lead(2)
    second = coordinator(cluster)
    await until(lambda: state(second) is TxnState.COMPLETE_ABORT, "the abort completes after the failover")
    marker = cluster.requests[-1][1].markers[0]
    assert (marker.producer_id, marker.producer_epoch, marker.committed, marker.coordinator_epoch) == (pid, 1, False, 2)
    assert second.aborted == 1
    await second.close()


async def test_adding_a_partition_while_the_last_transaction_completes_waits_for_it(cluster) -> None:
    """AddPartitionsToTxn arriving while the previous transaction's markers are still being written is held until
    the transaction completes (not answered CONCURRENT_TRANSACTIONS for the producer to retry after a backoff), and
    is answered CONCURRENT_TRANSACTIONS only if that takes longer than the hold."""
    c = coordinator(cluster)
    await until(lambda: c.partitions[0].loaded, "the partition loads")
    _, pid, epoch = await c.init_producer_id("tx", 60_000)
    await c.add_partitions("tx", pid, epoch, [TP])
    cluster.acknowledge = False  # markers are refused until the test lets them through
    _, pid, epoch = await c.end_txn("tx", pid, epoch, True)
    add = asyncio.ensure_future(c.add_partitions("tx", pid, epoch, [TP]))
    await cluster.sent.wait()
    await asyncio.sleep(0.05)
    assert not add.done() and state(c) is TxnState.PREPARE_COMMIT
    cluster.acknowledge = True
    assert await asyncio.wait_for(add, 5) == (ErrorCode.NONE, {TP: ErrorCode.NONE})
    assert state(c) is TxnState.ONGOING
    await c.close()


def test_the_node_keys_become_the_coordinator_config() -> None:
    base = {"process.roles": "broker", "node.id": 4, "controller.quorum.voters": "1@127.0.0.1:7001"}
    config = NodeConfig(
        {
            **base,
            "transaction.state.log.num.partitions": 7,
            "transaction.state.log.replication.factor": 2,
            "transaction.state.log.min.isr": 1,
            "transaction.state.log.segment.bytes": 1000,
            "transaction.max.timeout.ms": 5000,
            "transactional.id.expiration.ms": 6000,
            "transaction.abort.timed.out.transaction.cleanup.interval.ms": 70,
            "transaction.remove.expired.transaction.cleanup.interval.ms": 80,
        }
    )
    assert TxnCoordinatorConfig.from_node(config) == TxnCoordinatorConfig(7, 2, 1, 1000, 5000, 6000, 70, 80)
    assert TxnCoordinatorConfig.from_node(NodeConfig(base)) == TxnCoordinatorConfig()  # Kafka's defaults


async def test_describe_and_list_never_create_the_topic(tmp_path: Path) -> None:
    """Only FindCoordinator creates ``__transaction_state``, as in Kafka: without it DescribeTransactions answers
    NOT_COORDINATOR (TransactionStateManager.getTransactionState: the id's partition is not this broker's) and
    ListTransactions lists nothing."""
    created: list[tuple[int, int]] = []

    async def create(partitions: int, replication_factor: int) -> None:
        created.append((partitions, replication_factor))

    image = image_from_records(brokers(1))
    c = TransactionCoordinator(
        1,
        lambda: image,
        TxnCoordinatorConfig(),
        create,
        ProducerIds(),
        None,  # type: ignore[arg-type]  # no markers: no transaction ends here
        lambda: 50,
        ManualClock(),
    )
    assert c.describe("tx") == (ErrorCode.NOT_COORDINATOR, None)
    assert c.describe("") == (ErrorCode.INVALID_REQUEST, None)
    assert c.list_transactions() == (ErrorCode.NONE, [], [])
    await asyncio.sleep(0)
    assert created == []
    assert c.find_coordinator("tx")[0] == ErrorCode.COORDINATOR_NOT_AVAILABLE
    await asyncio.sleep(0)
    assert created == [(50, 3)]
    await c.close()


async def test_list_transactions_filters_on_duration_as_kafka(cluster) -> None:
    """TransactionStateManager.listTransactionStates: a filter >= 0 keeps an id whose start time is more than that
    ago, so one without a transaction (start time -1) always passes and a completed one counts from its start;
    a negative filter keeps all. A Dead id is never listed (nor described)."""
    clock = ManualClock()
    dead = TxnMetadata("dead", 9, -1, 0, -1, 60_000, TxnState.DEAD, frozenset(), -1, clock.now)
    cluster.state.append_as_leader(encode_batch([("dead", dead)], clock.now), acks=1)
    c = coordinator(cluster, clock)
    await until(lambda: c.partitions[0].loaded, "the partition loads")
    await c.init_producer_id("idle", 60_000)
    _, pid, epoch = await c.init_producer_id("done", 60_000)
    await c.add_partitions("done", pid, epoch, [TP])
    await c.end_txn("done", pid, epoch, True)
    await until(lambda: state(c, "done") is TxnState.COMPLETE_COMMIT, "the Complete record")
    clock.now += 1_000
    _, pid, epoch = await c.init_producer_id("open", 60_000)
    await c.add_partitions("open", pid, epoch, [TP])
    clock.now += 500

    def listed(duration: int) -> list[str]:
        error, unknown, txns = c.list_transactions(min_duration_ms=duration)
        assert (error, unknown) == (ErrorCode.NONE, [])
        return [md.transactional_id for md in txns]

    assert listed(-1) == ["done", "idle", "open"]
    assert listed(0) == ["done", "idle", "open"]
    assert listed(499) == ["done", "idle", "open"]
    assert listed(500) == ["done", "idle"]  # open for 500 ms exactly: not longer than the filter
    assert listed(1_499) == ["done", "idle"]
    assert listed(1_500) == ["idle"]
    assert listed(10**12) == ["idle"]
    assert c.describe("dead") == (ErrorCode.TRANSACTIONAL_ID_NOT_FOUND, None)
    await c.close()


CALLER = RequestContext(peer="ipv4:10.0.0.5:5555")  # User:ANONYMOUS


async def test_describe_leaves_out_the_topics_the_caller_may_not_describe(cluster) -> None:
    """As Kafka's KafkaApis.handleDescribeTransactionsRequest, on both listeners: the description keeps the
    partitions of the topics the caller may describe, and the last transaction's start time once it completed."""
    clock = ManualClock()
    c = coordinator(cluster, clock)
    await until(lambda: c.partitions[0].loaded, "the partition loads")
    _, pid, epoch = await c.init_producer_id("tx", 60_000)
    await c.add_partitions("tx", pid, epoch, [TP, UP])
    started = clock.now

    def allow(kind: ResourceType, name: str) -> AclBinding:
        return AclBinding(
            kind, name, PatternType.LITERAL, "User:ANONYMOUS", "*", AclOperation.DESCRIBE, AclPermissionType.ALLOW
        )

    bindings = {b"1": allow(ResourceType.TRANSACTIONAL_ID, "tx"), b"2": allow(ResourceType.TOPIC, "t")}
    service = TxnService(c, None, AccessControl(AuthorizerSettings(), lambda: bindings))  # type: ignore[arg-type]
    request = DescribeTransactions(("tx",))
    [d] = (await service.describe_transactions(request, CALLER)).transactions
    assert (d.error, d.state, [(t.name, list(t.partitions)) for t in d.topics]) == (
        ErrorCode.NONE,
        "Ongoing",
        [("t", [0])],
    )
    assert d.transaction_start_time_ms == started
    clock.now += 1_000
    await c.end_txn("tx", pid, epoch, False)
    await until(lambda: state(c) is TxnState.COMPLETE_ABORT, "the Complete record")
    [d] = (await service.describe_transactions(request, CALLER)).transactions
    assert (d.state, d.transaction_start_time_ms, d.last_update_time_ms, list(d.topics)) == (
        "CompleteAbort",
        started,
        clock.now,
        [],
    )
    await c.close()

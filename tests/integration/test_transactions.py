"""Transactions on a real cluster: commit and abort across partitions and topics, read_committed reads and the last
stable offset, offsets committed in a transaction, fencing, the coordinator's timeout, and bad input, each a typed
error with nothing visible."""

from __future__ import annotations

import time
from collections.abc import Iterator

import grpc
import pytest

from odradek.client import Admin, Consumer, Producer, TopicPartition
from odradek.client.connection import channel_options
from odradek.client.errors import (
    ErrorCode,
    InvalidTransactionTimeoutError,
    InvalidTxnStateError,
    ProducerFencedError,
)
from odradek.client.record.builder import BatchBuilder
from odradek.proto import broker_pb2 as pb
from odradek.proto import broker_pb2_grpc, transaction_pb2_grpc
from odradek.proto import transaction_pb2 as tpb

from .conftest import FAST, wait_for

NODE = {
    **FAST,
    "transaction.state.log.num.partitions": 3,
    "offsets.topic.num.partitions": 3,
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": 200,
    "transaction.max.timeout.ms": 60000,
}
pytestmark = [
    pytest.mark.integration,
    pytest.mark.odradek_cluster(controllers=1, brokers=3, config=NODE, topics={"in": 2, "out": 2, "other": 1}),
]


def producer(cluster, txn_id: str, **config) -> Producer:
    return Producer({"bootstrap.servers": cluster.bootstrap_servers, "transactional.id": txn_id, **config})


def read(cluster, topics: dict[str, int], isolation: str, timeout: float = 5.0) -> list[tuple[str, int, bytes]]:
    """Everything readable with ``isolation`` now: (topic, partition, value), polling until ``timeout`` passes with
    nothing new."""
    out: list[tuple[str, int, bytes]] = []
    with Consumer(
        {"bootstrap.servers": cluster.bootstrap_servers, "isolation.level": isolation, "auto.offset.reset": "earliest"}
    ) as consumer:
        consumer.assign([TopicPartition(t, p) for t, n in topics.items() for p in range(n)])
        quiet_until = time.monotonic() + timeout
        while time.monotonic() < quiet_until:
            records = consumer.poll(timeout_ms=200)
            if records:
                out += [(r.topic, r.partition, r.value) for r in records]
                quiet_until = time.monotonic() + 1.0
    return out


def values(rows: list[tuple[str, int, bytes]], prefix: bytes) -> list[bytes]:
    return sorted(v for _, _, v in rows if v.startswith(prefix))


def test_commit_is_seen_by_read_committed_and_abort_only_by_read_uncommitted(odradek_cluster) -> None:
    with producer(odradek_cluster, "t-commit-abort") as p:
        p.init_transactions()
        p.begin_transaction()
        for i in range(10):
            p.send("in", b"c%d" % i, partition=i % 2)
            p.send("other", b"c-other%d" % i, partition=0)
        p.commit_transaction()
        p.begin_transaction()
        for i in range(10):
            p.send("in", b"a%d" % i, partition=i % 2)
        p.abort_transaction()
    committed = read(odradek_cluster, {"in": 2, "other": 1}, "read_committed")
    uncommitted = read(odradek_cluster, {"in": 2, "other": 1}, "read_uncommitted")
    assert values(committed, b"c") == sorted([b"c%d" % i for i in range(10)] + [b"c-other%d" % i for i in range(10)])
    assert values(committed, b"a") == []
    assert values(uncommitted, b"a") == sorted(b"a%d" % i for i in range(10))


def test_an_open_transaction_holds_read_committed_at_the_last_stable_offset(odradek_cluster) -> None:
    admin = Admin({"bootstrap.servers": odradek_cluster.bootstrap_servers})
    try:
        with (
            producer(odradek_cluster, "t-lso") as p,
            Producer({"bootstrap.servers": odradek_cluster.bootstrap_servers}) as plain,
        ):
            p.init_transactions()
            p.begin_transaction()
            p.send("out", b"open-1", partition=0).get(10)
            plain.send("out", b"plain-after", partition=0).get(10)  # after the open transaction's first record
            tp = TopicPartition("out", 0)
            hw = admin.list_offsets({tp: -1})[tp]
            lso = admin.list_offsets({tp: -1}, isolation_level="read_committed")[tp]
            assert lso < hw
            assert values(read(odradek_cluster, {"out": 2}, "read_committed", 2.0), b"plain-after") == []
            p.commit_transaction()
        rows = read(odradek_cluster, {"out": 2}, "read_committed")
        assert values(rows, b"open-1") == [b"open-1"] and values(rows, b"plain-after") == [b"plain-after"]
    finally:
        admin.close()


def test_a_second_init_fences_the_first_producer(odradek_cluster) -> None:
    first = producer(odradek_cluster, "t-fence")
    try:
        first.init_transactions()
        first.begin_transaction()
        first.send("in", b"zombie", partition=0).get(10)
        with producer(odradek_cluster, "t-fence") as second:
            second.init_transactions()  # fences the first, aborting its open transaction
            second.begin_transaction()
            second.send("in", b"successor", partition=0)
            second.commit_transaction()
        with pytest.raises(ProducerFencedError):
            first.commit_transaction()
    finally:
        first.close()
    rows = read(odradek_cluster, {"in": 2}, "read_committed")
    assert values(rows, b"zombie") == [] and values(rows, b"successor") == [b"successor"]


def test_an_open_transaction_is_aborted_at_its_timeout_and_a_late_commit_is_fenced(odradek_cluster) -> None:
    with producer(odradek_cluster, "t-timeout", **{"transaction.timeout.ms": 1500}) as p:
        p.init_transactions()
        p.begin_transaction()
        p.send("other", b"timed-out", partition=0).get(10)
        tp = TopicPartition("other", 0)
        with Admin({"bootstrap.servers": odradek_cluster.bootstrap_servers}) as admin:
            wait_for(
                lambda: (
                    admin.list_offsets({tp: -1}, isolation_level="read_committed")[tp]
                    == admin.list_offsets({tp: -1})[tp]
                ),
                15,
                what="the last stable offset to pass the timed-out transaction",
            )
        with pytest.raises(ProducerFencedError):
            p.commit_transaction()
    assert values(read(odradek_cluster, {"other": 1}, "read_committed"), b"timed-out") == []


def test_a_timeout_above_the_maximum_is_refused(odradek_cluster) -> None:
    with (
        producer(odradek_cluster, "t-too-long", **{"transaction.timeout.ms": 120000}) as p,
        pytest.raises(InvalidTransactionTimeoutError),
    ):
        p.init_transactions()


def test_send_outside_a_transaction_is_refused(odradek_cluster) -> None:
    with producer(odradek_cluster, "t-outside") as p:
        p.init_transactions()
        with pytest.raises(InvalidTxnStateError):
            p.send("in", b"outside", partition=0)


@pytest.fixture
def broker_stubs(
    odradek_cluster,
) -> Iterator[dict[int, tuple[broker_pb2_grpc.BrokerStub, transaction_pb2_grpc.TransactionsStub]]]:
    channels = {
        node: grpc.insecure_channel(f"127.0.0.1:{odradek_cluster.node(node).broker_port}", options=channel_options())
        for node in odradek_cluster.broker_ids
    }
    yield {
        node: (broker_pb2_grpc.BrokerStub(c), transaction_pb2_grpc.TransactionsStub(c)) for node, c in channels.items()
    }
    for c in channels.values():
        c.close()


def test_raw_bad_input_gets_typed_errors_and_nothing_is_visible(odradek_cluster, broker_stubs) -> None:
    admin = Admin({"bootstrap.servers": odradek_cluster.bootstrap_servers})
    try:
        leader = admin.describe_topic("other").partitions[0].leader
    finally:
        admin.close()
    data, _ = broker_stubs[leader]
    init = data.InitProducerId(pb.InitProducerIdRequest(producer_id=-1), timeout=10)

    def batch(value: bytes) -> bytes:
        b = BatchBuilder(
            producer_id=init.producer_id, producer_epoch=init.producer_epoch, base_sequence=0, is_transactional=True
        )
        b.append(int(time.time() * 1000), None, value)
        return b.build()

    def produce(transactional_id: str, value: bytes) -> int:
        request = pb.ProduceRequest(
            acks=-1,
            timeout_ms=5000,
            transactional_id=transactional_id,
            topics=[pb.ProduceTopic(name="other", partitions=[pb.ProducePartition(partition=0, records=batch(value))])],
        )
        return data.Produce(request, timeout=10).topics[0].partitions[0].error

    # A transactional batch without a transactional id, and one for a partition no transaction added.
    assert produce("", b"raw-no-id") == ErrorCode.INVALID_TXN_STATE
    assert produce("t-raw", b"raw-not-added") in (ErrorCode.TRANSACTION_ABORTABLE, ErrorCode.NOT_ENOUGH_REPLICAS)
    # EndTxn without a transaction (the id's coordinator answers; others say NOT_COORDINATOR).
    codes = set()
    for _, stub in broker_stubs.values():
        r = stub.EndTxn(
            tpb.EndTxnRequest(transactional_id="t-raw-end", producer_id=1, producer_epoch=0, committed=True), timeout=10
        )
        codes.add(r.error)
    assert codes - {ErrorCode.NOT_COORDINATOR} <= {ErrorCode.INVALID_PRODUCER_ID_MAPPING, ErrorCode.INVALID_TXN_STATE}
    assert codes - {ErrorCode.NOT_COORDINATOR}
    rows = read(odradek_cluster, {"other": 1}, "read_uncommitted", 2.0)
    assert values(rows, b"raw-") == []

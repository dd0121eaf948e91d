"""Delayed requests of one transaction never land in the next (KIP-890), with real processes.

A transactional producer talks to the brokers through ``HoldingProxy``, which keeps one Produce or EndTxn of
transaction N from its broker (the producer's call fails as on a lost connection) and delivers it once
transaction N+1 has begun and written. Every transaction end bumps the producer's epoch, so the late request
carries N's epoch: the partition refuses the produce (INVALID_PRODUCER_EPOCH) and the coordinator the EndTxn
(PRODUCER_FENCED); neither its record nor its commit or abort touches N+1.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from odradek.client import Admin, Producer, TopicPartition
from odradek.client.errors import ErrorCode, NetworkError, TransactionAbortableError
from odradek.proto import broker_pb2 as pb
from odradek.proto import transaction_pb2 as tpb

from .holding_proxy import HoldingProxy, produce_batches, produce_values
from .test_transactions import NODE, end_offset, read, values

TOPIC = "delayed"
pytestmark = [
    pytest.mark.integration,
    pytest.mark.odradek_cluster(controllers=1, brokers=3, config=NODE, topics={TOPIC: 2}),
]
P0, P1 = TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)


@pytest.fixture
def proxy(odradek_cluster) -> Iterator[HoldingProxy]:
    with HoldingProxy({n.node_id: n.broker_port for n in odradek_cluster.nodes if n.broker_port}) as p:
        yield p


@pytest.fixture
def admin(odradek_cluster) -> Iterator[Admin]:
    """Straight to the brokers (conftest's ``admin`` would start a cluster of its own)."""
    with Admin({"bootstrap.servers": odradek_cluster.bootstrap_servers}) as a:
        yield a


def proxied_producer(proxy: HoldingProxy, txn_id: str, **config) -> Producer:
    return Producer({"bootstrap.servers": proxy.bootstrap_servers, "transactional.id": txn_id, **config})


def both(cluster) -> tuple[list, list]:
    return read(cluster, {TOPIC: 2}, "read_committed"), read(cluster, {TOPIC: 2}, "read_uncommitted")


def holds(value: bytes) -> Callable[[pb.ProduceRequest], bool]:
    """A Produce carrying a record of ``value``."""
    return lambda request: value in produce_values(request)


@pytest.mark.parametrize("retry", ["delivered", "lost"])
def test_a_delayed_produce_is_refused_in_the_next_transaction(odradek_cluster, proxy, admin, retry: str) -> None:
    """``delivered``: the producer's retry of the held batch gets through and N commits with it (odradek's
    producer retries a produce that failed UNAVAILABLE). ``lost``: every retry fails too, the batch expires at
    delivery.timeout.ms, and N can only be aborted. Either way the held copy, released into N+1, is refused."""
    txn_id, held_value = f"delayed-produce-{retry}", f"held-{retry}".encode()
    config = {"delivery.timeout.ms": 3000, "request.timeout.ms": 2500} if retry == "lost" else {}
    with proxied_producer(proxy, txn_id, **config) as p:
        p.init_transactions()
        p.begin_transaction()
        proxy.hold("Produce", holds(held_value), drop_repeats=retry == "lost")
        future = p.send(TOPIC, held_value, partition=0)
        held = proxy.wait_held()
        assert isinstance(held.request, pb.ProduceRequest)
        [batch] = produce_batches(held.request)
        assert batch.header.is_transactional
        epoch_n = batch.header.producer_epoch
        if retry == "delivered":
            future.result(15)
            p.commit_transaction()
        else:
            with pytest.raises(NetworkError):
                future.result(15)
            assert proxy.dropped > 0, "the producer did not retry the held batch"
            with pytest.raises(TransactionAbortableError):
                p.commit_transaction()
            p.abort_transaction()

        p.begin_transaction()  # N+1, at the next epoch
        for i in range(4):
            p.send(TOPIC, f"next-{retry}-{i}".encode(), partition=i % 2)
        p.flush(15)
        [described] = admin.describe_transactions([txn_id])
        assert described.state == "Ongoing" and described.producer_epoch > epoch_n
        assert set(described.partitions) == {P0, P1}

        answer = proxy.release()
        [[refused]] = [list(t.partitions) for t in answer.topics]
        assert ErrorCode.Name(refused.error) == "INVALID_PRODUCER_EPOCH", refused
        p.commit_transaction()

    committed, uncommitted = both(odradek_cluster)
    next_prefix = f"next-{retry}-".encode()
    assert values(committed, next_prefix) == sorted(f"next-{retry}-{i}".encode() for i in range(4))
    # The released copy was appended nowhere: the record is in the log only as N left it (committed once, or not
    # at all when N was aborted without it).
    in_n = [held_value] if retry == "delivered" else []
    assert values(committed, held_value) == in_n
    assert values(uncommitted, held_value) == in_n


@pytest.mark.parametrize("end", ["commit", "abort"])
def test_a_delayed_end_txn_does_not_end_the_next_transaction(odradek_cluster, proxy, admin, end: str) -> None:
    """N's first EndTxn is held; the producer retries it (UNAVAILABLE: it finds the coordinator again) and N ends.
    N+1 begins and writes to both partitions; the held EndTxn, released now, is fenced: N+1 stays Ongoing with its
    partitions and epoch, read_committed sees nothing of it, and only N+1's own end decides its fate."""
    txn_id, committing = f"delayed-end-{end}", end == "commit"
    n_prefix, next_prefix = f"end-{end}-n-".encode(), f"end-{end}-next-".encode()
    with proxied_producer(proxy, txn_id) as p:
        p.init_transactions()
        p.begin_transaction()
        for i in range(4):
            p.send(TOPIC, n_prefix + b"%d" % i, partition=i % 2)
        p.flush(15)
        proxy.hold("EndTxn")
        if committing:
            p.commit_transaction()
        else:
            p.abort_transaction()
        held = proxy.wait_held(0)
        assert isinstance(held.request, tpb.EndTxnRequest) and held.request.committed == committing
        assert proxy.calls["EndTxn"] == 1, "the producer did not retry the EndTxn"
        assert proxy.calls["FindCoordinator"] >= 2  # found again after the failure, through the proxy
        epoch_n = held.request.producer_epoch

        p.begin_transaction()  # N+1
        for i in range(4):
            p.send(TOPIC, next_prefix + b"%d" % i, partition=i % 2)
        p.flush(15)
        [before] = admin.describe_transactions([txn_id])
        assert (before.state, before.producer_epoch) == ("Ongoing", epoch_n + 1)
        assert set(before.partitions) == {P0, P1}

        answer = proxy.release()
        assert ErrorCode.Name(answer.error) == "PRODUCER_FENCED", answer

        [after] = admin.describe_transactions([txn_id])
        assert (after.state, after.producer_id, after.producer_epoch) == ("Ongoing", before.producer_id, epoch_n + 1)
        assert set(after.partitions) == {P0, P1}
        assert after.transaction_start_time_ms == before.transaction_start_time_ms
        committed, _ = both(odradek_cluster)
        assert values(committed, next_prefix) == []
        for tp in (P0, P1):  # the last stable offset stays before N+1's first record
            assert end_offset(odradek_cluster, tp, "read_committed") < end_offset(
                odradek_cluster, tp, "read_uncommitted"
            )

        # N+1 ends as its producer says, the other way from the released request.
        if committing:
            p.abort_transaction()
        else:
            p.commit_transaction()

    committed, uncommitted = both(odradek_cluster)
    n_records = sorted(n_prefix + b"%d" % i for i in range(4))
    next_records = sorted(next_prefix + b"%d" % i for i in range(4))
    assert values(committed, n_prefix) == (n_records if committing else [])
    assert values(committed, next_prefix) == ([] if committing else next_records)
    assert values(uncommitted, n_prefix) == n_records and values(uncommitted, next_prefix) == next_records
    for tp in (P0, P1):
        assert end_offset(odradek_cluster, tp, "read_committed") == end_offset(odradek_cluster, tp, "read_uncommitted")

"""A torn transaction, found by ``odradek chaos run --workload kafka-txn --faults late-requests`` when the proxy
held each request for a fixed time (so that a client's retry, sent after the heal, overtook the original): a
librdkafka producer's EndTxn(commit) of transaction N, delayed in the network past the client's timeout, lands
while the producer's transaction N+1 is open, and commits N+1 before its producer decided anything.

librdkafka 2.16 sends EndTxn v1. Below v5 the coordinator keeps the producer epoch at a transaction's end (KIP-890
part 2 is the client's part too), so N+1 runs at N's epoch, and the late EndTxn of N carries the same transactional
id, producer id and epoch as a commit of N+1: the coordinator cannot tell them apart from the request alone, as
Kafka's cannot. tests/integration/test_txn_delayed.py shows that the same delay is harmless with odradek's own
client, whose EndTxn bumps the epoch.

One broker (coordinator and leader), reached through a ``FaultProxy`` link that holds the producer's requests.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from odradek.chaos.proxy import FaultProxy
from odradek.chaos.runner import patch_config
from odradek.client import Admin
from odradek.deploy.local import DevCluster

from .conftest import FAST, start_created

confluent_kafka = pytest.importorskip("confluent_kafka")
pytestmark = pytest.mark.integration

TOPIC = "torn"
QUIET = logging.getLogger("test_late_end_txn_kafka.librdkafka")  # its connection errors at shutdown, not stderr
QUIET.addHandler(logging.NullHandler())
QUIET.propagate = False
TIMEOUT_MS = 1000  # the producer's request timeout (socket.timeout.ms)
HOLD_MS = 4000  # the original EndTxn lands this long after it was sent: well after the retry and N+1's writes
NODE = {
    **FAST,
    "transaction.state.log.num.partitions": 1,
    "transaction.state.log.replication.factor": 1,
    "transaction.state.log.min.isr": 1,
    "offsets.topic.num.partitions": 1,
    "offsets.topic.replication.factor": 1,
}


@pytest.fixture
def proxied(tmp_path: Path) -> Iterator[tuple[FaultProxy, str]]:
    """A one-broker cluster whose Kafka listener clients reach through a proxy link (it advertises the link)."""
    cluster = DevCluster.create(tmp_path / "c", 1, 1, overrides=NODE)
    broker = next(n for n in cluster.nodes if n.kafka_port)
    with FaultProxy() as proxy:
        host, port = proxy.add_link("client", "broker", (broker.host, broker.kafka_port), kafka=True)
        patch_config(broker.config, {"advertised.listeners": f"KAFKA://{host}:{port}"})
        start_created(cluster)
        try:
            with Admin({"bootstrap.servers": cluster.admin_servers, "request.timeout.ms": 10000}) as admin:
                admin.create_topic(TOPIC, 1, 1)
            yield proxy, f"{host}:{port}"
        finally:
            cluster.stop_all(timeout=10)


def committed_values(servers: str) -> list[bytes]:
    """What a read_committed consumer reads from the topic, to its last stable offset."""
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": servers,
            "group.id": "torn-reader",
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
            "logger": QUIET,
        }
    )
    try:
        consumer.assign([confluent_kafka.TopicPartition(TOPIC, 0, 0)])
        values: list[bytes] = []
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error():
                if message.error().code() == confluent_kafka.KafkaError._PARTITION_EOF:
                    return values
                continue
            values.append(message.value())
        raise AssertionError(f"no end of partition within 20 s; read {values}")
    finally:
        consumer.close()


def test_a_late_end_txn_of_a_librdkafka_producer_does_not_commit_its_next_transaction(proxied) -> None:
    proxy, servers = proxied
    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": servers,
            "transactional.id": "torn",
            "socket.timeout.ms": TIMEOUT_MS,
            "linger.ms": 0,
            "logger": QUIET,
        }
    )
    producer.init_transactions(10)
    producer.begin_transaction()
    producer.produce(TOPIC, b"n")
    producer.flush(10)

    proxy.hold_requests("broker", HOLD_MS)
    committed = threading.Event()
    committer = threading.Thread(target=lambda: (producer.commit_transaction(10), committed.set()), daemon=True)
    committer.start()  # its EndTxn is held; librdkafka times out, reconnects and sends it again
    time.sleep(0.3)
    proxy.heal()  # the retry, on a new connection, is not held: it commits N
    assert committed.wait(10), "the retried EndTxn did not commit N"
    assert proxy.request_counts["landed"] == 0  # the original is still on its way

    producer.begin_transaction()  # N+1, at N's producer epoch
    producer.produce(TOPIC, b"n+1")
    producer.flush(10)
    assert proxy.wait_requests_landed(HOLD_MS / 1000 + 5)
    assert proxy.held_apis["EndTxn v1"] == 1 and proxy.request_counts["landed_after_close"] >= 1

    with contextlib.suppress(confluent_kafka.KafkaException):  # the coordinator may refuse: N+1 ended already
        producer.abort_transaction(10)  # N+1's producer decides: abort
    visible = committed_values(servers)
    if visible == [b"n", b"n+1"]:  # the known failure: everything above held, so it fails for this reason alone
        pytest.xfail("torn transaction: below EndTxn v5 a late EndTxn of one transaction commits the next one")
    assert visible == [b"n"]  # N+1's write is not committed

"""Transactions of unmodified Kafka clients on the Kafka listener of a real 3-broker cluster: aiokafka,
confluent-kafka (librdkafka) and kafka-python each commit one transaction and abort another, with consumed
offsets sent to the transaction, and a ``read_committed`` reader sees exactly the committed records. These clients
end transactions with EndTxn below v5, so the coordinator keeps their epoch from one transaction to the next; a
second producer with the same transactional id fences the first."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from odradek.client.admin import Admin
from odradek.deploy.local import DevCluster

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def bootstrap(cluster: DevCluster) -> str:
    return cluster.kafka_bootstrap_servers


def topic(admin: Admin, partitions: int = 2) -> str:
    name = f"tx-{uuid.uuid4().hex[:8]}"
    admin.create_topic(name, partitions=partitions, replication_factor=3)
    return name


def read_committed(bootstrap: str, name: str, expected: int, timeout: float = 30) -> list[bytes]:
    """Every record of ``name`` a read_committed reader sees: at least ``expected``, then a quiet second more so
    that a record that should not be there has its chance to show up."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"rc-{uuid.uuid4().hex[:6]}",
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([name])
    got: list[bytes] = []
    deadline = time.monotonic() + timeout
    quiet_until = None
    try:
        while time.monotonic() < deadline:
            m = consumer.poll(0.2)
            if m is not None:
                assert m.error() is None, m.error()
                got.append(m.value())
            if len(got) >= expected:
                quiet_until = quiet_until or time.monotonic() + 1.0
                if time.monotonic() >= quiet_until:
                    break
    finally:
        consumer.close()
    return got


def committed_offset(admin: Admin, group: str, name: str) -> dict[int, int]:
    return {o.partition: o.offset for o in admin.list_group_offsets(group) if o.topic == name}


def test_aiokafka_transactions_commit_abort_and_send_offsets(bootstrap: str, admin: Admin) -> None:
    from aiokafka import AIOKafkaProducer
    from aiokafka.errors import ProducerFenced
    from aiokafka.structs import TopicPartition as AioTopicPartition

    name = topic(admin)
    txn_id = f"aio-{uuid.uuid4().hex[:6]}"

    async def run() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=txn_id)
        await producer.start()
        try:
            for round_ in range(3):  # three transactions at one epoch, each committed
                async with producer.transaction():
                    for i in range(10):
                        await producer.send(name, b"c%d-%d" % (round_, i), key=b"%d" % i, partition=i % 2)
                    await producer.send_offsets_to_transaction({AioTopicPartition(name, 0): 10 + round_}, "aio-g")
            await producer.begin_transaction()
            for i in range(10):
                await producer.send(name, b"aborted-%d" % i, partition=i % 2)
            await producer.abort_transaction()
            zombie_proof = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=txn_id)
            await zombie_proof.start()  # bumps the epoch: the first producer is now fenced
            try:
                await producer.begin_transaction()
                with pytest.raises(ProducerFenced):
                    await producer.send_and_wait(name, b"zombie", partition=0)
            finally:
                await zombie_proof.stop()
        finally:
            await producer.stop()

    async def bounded() -> None:
        async with asyncio.timeout(90):
            await run()

    asyncio.run(bounded())
    got = read_committed(bootstrap, name, 30)
    assert sorted(got) == sorted(b"c%d-%d" % (r, i) for r in range(3) for i in range(10))
    assert committed_offset(admin, "aio-g", name) == {0: 12}


def test_librdkafka_transactions_commit_abort_and_send_offsets(bootstrap: str, admin: Admin) -> None:
    name = topic(admin)
    txn_id = f"rd-{uuid.uuid4().hex[:6]}"
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id})
    producer.init_transactions(30)
    group = Consumer({"bootstrap.servers": bootstrap, "group.id": "rd-g"})
    try:
        for round_ in range(3):
            producer.begin_transaction()
            for i in range(10):
                producer.produce(name, b"c%d-%d" % (round_, i), key=b"%d" % i, partition=i % 2)
            producer.send_offsets_to_transaction(
                [TopicPartition(name, 1, 20 + round_)], group.consumer_group_metadata(), 30
            )
            producer.commit_transaction(30)
        producer.begin_transaction()
        for i in range(10):
            producer.produce(name, b"aborted-%d" % i, partition=i % 2)
        producer.flush(30)
        producer.abort_transaction(30)

        fencer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id})
        fencer.init_transactions(30)
        producer.begin_transaction()
        producer.produce(name, b"zombie", partition=0)
        with pytest.raises(KafkaException) as raised:
            producer.commit_transaction(30)
        assert raised.value.args[0].fatal()
    finally:
        group.close()
    got = read_committed(bootstrap, name, 30)
    assert sorted(got) == sorted(b"c%d-%d" % (r, i) for r in range(3) for i in range(10))
    assert committed_offset(admin, "rd-g", name) == {1: 22}


def test_kafka_python_transactions_commit_and_abort(bootstrap: str, admin: Admin) -> None:
    from kafka import KafkaProducer
    from kafka.structs import OffsetAndMetadata
    from kafka.structs import TopicPartition as KpTopicPartition

    name = topic(admin)
    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=f"kp-{uuid.uuid4().hex[:6]}")
    try:
        producer.init_transactions()
        for round_ in range(2):
            producer.begin_transaction()
            for i in range(10):
                producer.send(name, b"c%d-%d" % (round_, i), partition=i % 2)
            producer.send_offsets_to_transaction(
                {KpTopicPartition(name, 0): OffsetAndMetadata(5 + round_, "", -1)}, "kp-g"
            )
            producer.commit_transaction()
        producer.begin_transaction()
        for i in range(10):
            producer.send(name, b"aborted-%d" % i, partition=i % 2)
        producer.abort_transaction()
    finally:
        producer.close(timeout=10)
    got = read_committed(bootstrap, name, 20)
    assert sorted(got) == sorted(b"c%d-%d" % (r, i) for r in range(2) for i in range(10))
    assert committed_offset(admin, "kp-g", name) == {0: 6}

"""Unmodified third-party Kafka clients against the Kafka listener of a real 3-broker cluster: librdkafka
(confluent-kafka, kcat), kafka-python and aiokafka; and the listener's handling of bad frames from a raw socket."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import socket
import struct
import subprocess
import time
import urllib.request
import uuid
from collections.abc import Iterator

import grpc
import pytest
from confluent_kafka import Consumer, Producer
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse

from odradek.client.admin import Admin
from odradek.client.errors import ErrorCode
from odradek.deploy.local import DevCluster, DevNode
from odradek.proto import broker_pb2 as pb
from odradek.proto.broker_pb2_grpc import BrokerStub

from .conftest import wait_for

pytestmark = pytest.mark.integration

COUNT = 300


@pytest.fixture(scope="module")
def bootstrap(cluster: DevCluster) -> str:
    return cluster.kafka_bootstrap_servers


def topic(admin: Admin, partitions: int = 3, cluster: DevCluster | None = None) -> str:
    """A new topic; with ``cluster``, once every broker's metadata has it (a client such as kcat may ask any of
    them, and a broker learns of a topic only after the controller committed it, as in Kafka)."""
    name = f"k-{uuid.uuid4().hex[:8]}"
    admin.create_topic(name, partitions=partitions, replication_factor=3)
    if cluster is not None:
        wait_for(lambda: all(knows(n, name, partitions) for n in cluster.nodes if n.broker_port), 30, what=name)
    return name


def knows(node: DevNode, name: str, partitions: int) -> bool:
    """Whether ``node``'s metadata has every partition of ``name`` with a leader."""
    with grpc.insecure_channel(f"{node.host}:{node.broker_port}") as channel:
        answer = BrokerStub(channel).Metadata(pb.MetadataRequest(topics=[name]), timeout=10)
    [t] = answer.topics
    return t.error == ErrorCode.NONE and len(t.partitions) == partitions and all(p.leader >= 0 for p in t.partitions)


def consume_all(bootstrap: str, name: str, count: int, group: str, timeout: float = 60) -> list:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([name])
    got = []
    deadline = time.monotonic() + timeout
    try:
        while len(got) < count and time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is None:
                continue
            assert m.error() is None, m.error()
            got.append(m)
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return got


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_librdkafka_idempotent_producer_and_group_consumer(bootstrap: str, admin: Admin, codec: str) -> None:
    name = topic(admin)
    producer = Producer(
        {"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all", "compression.type": codec}
    )
    errors: list = []
    for i in range(COUNT):
        producer.produce(
            name,
            key=b"k%d" % i,
            value=b"v%d" % i,
            headers=[("n", str(i).encode())],
            on_delivery=lambda err, _m: errors.append(err) if err else None,
        )
    assert producer.flush(30) == 0
    assert errors == []
    got = consume_all(bootstrap, name, COUNT, f"g-{codec}")
    assert sorted(m.value() for m in got) == sorted(b"v%d" % i for i in range(COUNT))
    for m in got:
        assert m.key() == b"k" + m.value()[1:]
        assert m.headers() == [("n", m.value()[1:])]
    # The group's commits are stored, and odradek's own admin client reads them: each partition's is its end.
    committed = admin.list_group_offsets(f"g-{codec}")
    assert sum(o.offset for o in committed) == COUNT


def test_kafka_python_produce_consume_group_and_admin(bootstrap: str) -> None:
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
    from kafka.admin import NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=20000)
    name = f"kp-{uuid.uuid4().hex[:8]}"
    try:
        admin.create_topics([NewTopic(name, num_partitions=2, replication_factor=3)])
        # The controller has committed the topic; the broker kafka-python asks may learn of it a moment later
        # (metadata reaches brokers asynchronously, as in Kafka, whose admin client documents the same delay).
        deadline = time.monotonic() + 20
        while (described := admin.describe_topics([name]))[0]["error_code"] != 0 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert described[0]["name"] == name and described[0]["error_code"] == 0
        assert [len(p["isr_nodes"]) for p in described[0]["partitions"]] == [3, 3]
        producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
        for i in range(100):
            producer.send(name, key=b"%d" % i, value=b"x%d" % i)
        producer.flush(30)
        producer.close()
        consumer = KafkaConsumer(
            name,
            bootstrap_servers=bootstrap,
            group_id="kp-group",
            auto_offset_reset="earliest",
            consumer_timeout_ms=20000,
        )
        values = []
        for record in consumer:
            values.append(record.value)
            if len(values) == 100:
                break
        consumer.commit()
        consumer.close()
        assert sorted(values) == sorted(b"x%d" % i for i in range(100))
        admin.delete_topics([name])
        # Likewise for the deletion.
        deadline = time.monotonic() + 20
        while name in admin.list_topics() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert name not in admin.list_topics()
    finally:
        admin.close()


INCREMENTAL_FETCHES = re.compile(r'^odradek_incremental_fetch_requests_total\{fetcher="consumer"\} (\S+)$', re.M)


def incremental_fetches(cluster: DevCluster) -> float:
    """Incremental fetch requests of consumers the brokers' Kafka listeners have served."""
    total = 0.0
    for node in cluster.nodes:
        if node.broker_port and node.metrics_port:
            text = urllib.request.urlopen(f"http://127.0.0.1:{node.metrics_port}/metrics", timeout=5).read().decode()
            total += sum(float(v) for v in INCREMENTAL_FETCHES.findall(text))
    return total


def test_a_kafka_python_consumer_reads_every_record_through_fetch_sessions(
    bootstrap: str, admin: Admin, cluster: DevCluster
) -> None:
    """kafka-python (3.x) keeps KIP-227 fetch sessions: after its first full fetch it sends incremental ones, which
    the brokers serve and count, and it still gets every record of every partition."""
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    name = topic(admin, partitions=6, cluster=cluster)
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    expected = set()
    for i in range(COUNT):
        producer.send(name, key=b"%d" % i, value=b"s%d" % i)
        expected.add(b"s%d" % i)
    producer.flush(30)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, fetch_max_wait_ms=100, consumer_timeout_ms=20000)
    try:
        consumer.assign([TopicPartition(name, p) for p in range(6)])
        consumer.seek_to_beginning()
        before = incremental_fetches(cluster)
        values = []
        for i, record in enumerate(consumer):
            values.append(record.value)
            if i == COUNT // 2:  # more records while the consumer's sessions run
                for j in range(COUNT, COUNT + 50):
                    producer.send(name, key=b"%d" % j, value=b"s%d" % j)
                    expected.add(b"s%d" % j)
                producer.flush(30)
            if len(values) == COUNT + 50:
                break
    finally:
        consumer.close()
        producer.close()
    assert sorted(values) == sorted(expected)
    assert incremental_fetches(cluster) > before


def test_aiokafka_produce_and_group_consume(bootstrap: str, admin: Admin) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    name = topic(admin, partitions=2)

    async def run() -> list[bytes]:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
        await producer.start()
        try:
            for i in range(50):
                await producer.send_and_wait(name, b"a%d" % i, key=b"%d" % i)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(
            name, bootstrap_servers=bootstrap, group_id="aio-group", auto_offset_reset="earliest"
        )
        await consumer.start()
        got: list[bytes] = []
        try:
            async with asyncio.timeout(60):
                while len(got) < 50:
                    batch = await consumer.getmany(timeout_ms=1000)
                    for records in batch.values():
                        got.extend(r.value for r in records)
            await consumer.commit()
        finally:
            await consumer.stop()
        return got

    assert sorted(asyncio.run(run())) == sorted(b"a%d" % i for i in range(50))


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed")
def test_kcat_metadata_snappy_produce_and_consume(bootstrap: str, admin: Admin, cluster: DevCluster) -> None:
    name = topic(admin, partitions=1, cluster=cluster)
    listing = subprocess.run(["kcat", "-b", bootstrap, "-L"], capture_output=True, text=True, timeout=30)
    assert listing.returncode == 0, listing.stderr
    assert f'topic "{name}"' in listing.stdout and "3 brokers" in listing.stdout
    lines = "".join(f"line{i}\n" for i in range(20))
    produced = subprocess.run(
        ["kcat", "-b", bootstrap, "-P", "-t", name, "-z", "snappy", "-d", "feature,msg"],
        input=lines,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert produced.returncode == 0, produced.stderr
    assert "does not support" not in produced.stderr
    consumed = subprocess.run(
        ["kcat", "-b", bootstrap, "-C", "-t", name, "-o", "beginning", "-c", "20", "-e"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout.split() == [f"line{i}" for i in range(20)]


KCAT = pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed")


def kcat(bootstrap: str, *args: str, stdin: str | None = None) -> str:
    """kcat's output for ``args``; a non-zero exit fails the test with its stderr."""
    done = subprocess.run(["kcat", "-b", bootstrap, *args], input=stdin, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


@KCAT
def test_kcat_json_metadata_lists_the_brokers_and_the_topic(bootstrap: str, admin: Admin, cluster: DevCluster) -> None:
    name = topic(admin, partitions=3, cluster=cluster)
    listing = json.loads(kcat(bootstrap, "-L", "-J", "-t", name))
    brokers = {n.node_id for n in cluster.nodes if n.kafka_port}
    assert {b["id"] for b in listing["brokers"]} == brokers
    [t] = listing["topics"]
    assert t["topic"] == name and [p["partition"] for p in t["partitions"]] == [0, 1, 2]
    assert all(p["leader"] in brokers and len(p["replicas"]) == 3 for p in t["partitions"])


@KCAT
def test_kcat_produces_keys_and_headers_and_consumes_from_each_kind_of_offset(
    bootstrap: str, admin: Admin, cluster: DevCluster
) -> None:
    name = topic(admin, partitions=1, cluster=cluster)
    lines = "".join(f"k{i}:v{i}\n" for i in range(10))
    kcat(bootstrap, "-P", "-t", name, "-p", "0", "-K", ":", "-H", "h1=x", "-H", "h2=y", stdin=lines)
    fmt = "%o %k=%s %h\n"
    everything = kcat(bootstrap, "-C", "-t", name, "-o", "beginning", "-e", "-f", fmt).splitlines()
    assert everything == [f"{i} k{i}=v{i} h1=x,h2=y" for i in range(10)]
    assert kcat(bootstrap, "-C", "-t", name, "-o", "7", "-e", "-f", "%o\n").split() == ["7", "8", "9"]
    assert kcat(bootstrap, "-C", "-t", name, "-o", "-2", "-e", "-f", "%o\n").split() == ["8", "9"]
    assert kcat(bootstrap, "-C", "-t", name, "-o", "end", "-e", "-f", "%o\n") == ""
    # By timestamp: -o s@T starts at the first record at or after T, and -Q answers the offset for a time.
    stamps = [int(t) for t in kcat(bootstrap, "-C", "-t", name, "-o", "beginning", "-e", "-f", "%T\n").split()]
    later = kcat(bootstrap, "-C", "-t", name, "-o", f"s@{stamps[4]}", "-e", "-f", "%o\n").split()
    assert later[0] == str(stamps.index(stamps[4])) and later[-1] == "9"
    queried = kcat(bootstrap, "-Q", "-t", f"{name}:0:{stamps[4]}")
    assert f"{name} [0] offset {stamps.index(stamps[4])}" in queried
    assert f"{name} [0] offset -1" in kcat(bootstrap, "-Q", "-t", f"{name}:0:{stamps[-1] + 60_000}")


@KCAT
def test_kcat_group_consumer_reads_every_partition_and_commits(
    bootstrap: str, admin: Admin, cluster: DevCluster
) -> None:
    name = topic(admin, partitions=3, cluster=cluster)
    kcat(bootstrap, "-P", "-t", name, "-K", ":", stdin="".join(f"key{i}:v{i}\n" for i in range(30)))
    group = f"kcat-{uuid.uuid4().hex[:6]}"
    read = kcat(bootstrap, "-G", group, "-o", "beginning", "-e", "-f", "%s\n", name).split()
    assert sorted(read) == sorted(f"v{i}" for i in range(30))
    committed = admin.list_group_offsets(group)
    assert sum(o.offset for o in committed if o.topic == name) == 30


# ---- bad frames against a real broker ----


def _address(bootstrap: str) -> tuple[str, int]:
    host, _, port = bootstrap.split(",")[0].rpartition(":")
    return host, int(port)


def _frame(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


def _api_versions(version: int, correlation_id: int = 7) -> bytes:
    header = struct.pack(">hhih", 18, version, correlation_id, 4) + b"test"
    if version >= 3:
        header += b"\x00"  # header v2: no tagged fields
        return _frame(header + b"\x05test\x021\x00")  # client software name/version, no tagged fields
    return _frame(header)


def _answer(sock: socket.socket) -> bytes:
    size = struct.unpack(">i", _recv_exactly(sock, 4))[0]
    return _recv_exactly(sock, size)


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


def _closed(sock: socket.socket) -> bool:
    sock.settimeout(10)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


@pytest.fixture
def connect(bootstrap: str) -> Iterator:
    opened: list[socket.socket] = []

    def open_() -> socket.socket:
        s = socket.create_connection(_address(bootstrap), timeout=10)
        opened.append(s)
        return s

    yield open_
    for s in opened:
        s.close()


def test_api_versions_at_an_unknown_version_gets_unsupported_version_and_the_range(connect) -> None:
    s = connect()
    s.sendall(_api_versions(99))
    answer = _answer(s)
    assert struct.unpack(">i", answer[:4])[0] == 7  # response header v0
    response = ApiVersionsResponse.decode(answer[4:], version=0)
    assert response.error_code == 35
    assert [(k.api_key, k.min_version, k.max_version) for k in response.api_keys] == [(18, 0, 3)]
    s.sendall(_api_versions(3, 8))  # the client retries at a version both know, on the same connection
    answer = _answer(s)
    response = ApiVersionsResponse.decode(answer[4:], version=3)
    assert response.error_code == 0
    served = {k.api_key for k in response.api_keys}
    assert {0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14, 18, 19, 20, 22} <= served
    assert ApiVersionsRequest  # the oracle's request type is the one encoded by hand above


@pytest.mark.parametrize(
    "bad",
    [
        struct.pack(">i", 1 << 30),  # a size prefix over socket.request.max.bytes
        struct.pack(">i", 100) + b"\x00" * 10,  # a frame cut short (then EOF)
        _frame(struct.pack(">hhih", 9999, 0, 1, -1)),  # an unknown API key
        _frame(b"\xff" * 3),  # garbage
    ],
    ids=["oversized", "cut-short", "unknown-api-key", "garbage"],
)
def test_a_bad_frame_closes_only_its_connection(connect, bad: bytes) -> None:
    bystander = connect()
    victim = connect()
    victim.sendall(bad)
    if bad.startswith(struct.pack(">i", 100)):
        victim.shutdown(socket.SHUT_WR)
    assert _closed(victim)
    bystander.sendall(_api_versions(3))
    assert struct.unpack(">i", _answer(bystander)[:4])[0] == 7


def test_the_demo_produces_and_consumes_through_the_kafka_listener(bootstrap: str, admin: Admin) -> None:
    """``make run``'s demo: kafka-python sends five records to the demo topic and reads them back."""
    from odradek.client.cli import demo

    if "demo" not in admin.list_topics():
        admin.create_topic("demo", partitions=6, replication_factor=3)
    sample = demo._kafka_sample(bootstrap)
    [partition] = {m["partition"] for m in sample["sent"]}
    offsets = [m["offset"] for m in sample["sent"]]
    assert offsets == list(range(offsets[0], offsets[0] + 5))
    assert sample["received"] == [
        {"partition": partition, "offset": o, "key": "kafka-user", "value": f"kafka event {i}"}
        for i, o in enumerate(offsets)
    ]

"""Producer and consumer against real brokers: codecs, ordering, metadata, and following leadership changes.

The clusters come from odradek's own pytest plugin (``odradek_cluster``, docs/testing.md), as an application's
tests would get them: one shared cluster for the module, and one of its own for the test that kills a broker.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator

import pytest

from odradek.client import Admin, Consumer, Producer, TopicPartition
from odradek.client.errors import ErrorCode, OdradekError, RecordTooLargeError, UnknownTopicOrPartitionError
from odradek.client.structs import LOG_APPEND_TIME

from .conftest import FAST, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.odradek_cluster(controllers=1, brokers=3, config=FAST)]


@pytest.fixture
def admin(odradek_cluster) -> Iterator[Admin]:
    with Admin({"bootstrap.servers": odradek_cluster.admin_servers, "request.timeout.ms": 10000}) as a:
        yield a


def consume_all(servers: str, tp: TopicPartition, count: int, timeout: float = 20.0) -> list:
    out = []
    with Consumer({"bootstrap.servers": servers, "auto.offset.reset": "earliest"}) as consumer:
        consumer.assign([tp])
        deadline = time.monotonic() + timeout
        while len(out) < count and time.monotonic() < deadline:
            out.extend(consumer.poll(timeout_ms=200))
    return out


def test_every_codec_round_trips_in_order_with_keys_headers_timestamps(odradek_cluster, admin: Admin) -> None:
    servers = odradek_cluster.bootstrap_servers
    for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
        topic = f"codec-{codec}"
        admin.create_topic(topic, 1, 3)
        sent = [
            (f"k{i}".encode() if i % 3 else None, f"value-{codec}-{i}".encode() * (i % 5 + 1), 1_700_000_000_000 + i)
            for i in range(300)
        ]
        with Producer({"bootstrap.servers": servers, "compression.type": codec, "linger.ms": 2}) as producer:
            futures = [
                producer.send(topic, value, key=key, headers=[("n", str(i).encode()), ("empty", None)], timestamp=ts)
                for i, (key, value, ts) in enumerate(sent)
            ]
            producer.flush()
            offsets = [f.result(10).offset for f in futures]
        assert offsets == list(range(300))
        got = consume_all(servers, TopicPartition(topic, 0), 300)
        assert [(r.key, r.value, r.timestamp) for r in got] == sent
        assert [r.offset for r in got] == list(range(300))
        assert all(r.headers == (("n", str(i).encode()), ("empty", None)) for i, r in enumerate(got))


def test_log_append_time_and_topic_compression_through_real_brokers(odradek_cluster, admin: Admin) -> None:
    """A record sent with timestamp 1000 to a LogAppendTime topic reads back with the leader's append time."""
    servers = odradek_cluster.bootstrap_servers
    admin.create_topic("stamped", 1, 3, {"message.timestamp.type": "LogAppendTime", "compression.type": "zstd"})
    before = int(time.time() * 1000)
    with Producer({"bootstrap.servers": servers}) as producer:
        sent = producer.send("stamped", b"v", timestamp=1_000).result(10)
    assert sent.timestamp >= before - 60_000  # the broker's clock, not the producer's 1000
    (got,) = consume_all(servers, TopicPartition("stamped", 0), 1)
    assert (got.value, got.timestamp, got.timestamp_type) == (b"v", sent.timestamp, LOG_APPEND_TIME)


def test_client_errors_are_typed_before_sending(odradek_cluster, admin: Admin) -> None:
    admin.create_topic("small", 2, 1)
    config = {"bootstrap.servers": odradek_cluster.bootstrap_servers, "max.request.size": 10_000, "max.block.ms": 2000}
    with Producer(config) as producer:
        with pytest.raises(RecordTooLargeError):
            producer.send("small", b"x" * 20_000)
        with pytest.raises(UnknownTopicOrPartitionError):
            producer.send("small", b"x", partition=7)
        with pytest.raises(OdradekError) as invalid:  # a missing topic would be created: a name none may have
            producer.send("no such topic", b"x").result(5)
        assert invalid.value.code == ErrorCode.INVALID_TOPIC_EXCEPTION and "no such topic" in str(invalid.value)


@pytest.mark.odradek_cluster(
    controllers=1, brokers=2, config=FAST, topics={"moving": {"partitions": 1, "replication_factor": 2}}, shared=False
)
def test_clients_follow_a_leader_change_without_manual_steps(odradek_cluster) -> None:
    cluster = odradek_cluster
    servers = cluster.bootstrap_servers
    with Admin({"bootstrap.servers": cluster.admin_servers}) as admin:
        old_leader = admin.describe_topic("moving").partitions[0].leader
    config = {"bootstrap.servers": servers, "linger.ms": 1, "retry.backoff.ms": 100, "delivery.timeout.ms": 60000}
    with Producer(config) as producer:
        producer.send("moving", b"before").result(10)
        cluster.signal(old_leader, signal.SIGKILL)
        # Sent while the leader is dead: the producer retries until the controller has moved leadership.
        after = [producer.send("moving", f"after-{i}".encode()) for i in range(50)]
        producer.flush(30)
        assert all(f.exception(1) is None for f in after)
    with Admin({"bootstrap.servers": cluster.admin_servers}) as admin:
        new_leader = wait_for(
            lambda: (p := admin.describe_topic("moving").partitions[0]).leader not in (-1, old_leader) and p, 10
        ).leader
    assert new_leader != old_leader
    got = consume_all(servers, TopicPartition("moving", 0), 50)
    assert [r.value for r in got][-50:] == [f"after-{i}".encode() for i in range(50)]

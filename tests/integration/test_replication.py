"""Replication with real processes: RF=3, min ISR 2, acks=all under leader SIGKILL and SIGSTOP, and writes refused
when two of three replicas are gone. Every acknowledged record must survive; replicas must end byte-identical.
The SIGKILL failover also runs on a TLS cluster (mTLS between nodes, every client with a certificate)."""

from __future__ import annotations

import signal
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from odradek.broker.log.log import Log
from odradek.client import Admin, Consumer, Producer, TopicPartition
from odradek.client.errors import NotEnoughReplicasError, OdradekError
from odradek.client.record.batch import read_batches
from odradek.deploy.local import DevCluster
from odradek.proto import broker_pb2 as pb
from odradek.proto import broker_pb2_grpc

from .conftest import start_cluster, wait_for

pytestmark = pytest.mark.integration

SETTINGS = {"replica.lag.time.max.ms": 3000, "replica.fetch.backoff.ms": 200, "replica.fetch.wait.max.ms": 200}
TOPIC_CONFIG = {"min.insync.replicas": "2"}


@pytest.fixture
def rcluster(request: pytest.FixtureRequest, tmp_path: Path):
    """A 3+3 cluster; an indirect parameter ``{"tls": True}`` makes it a TLS cluster."""
    tls = bool(getattr(request, "param", {}).get("tls", False))
    c = start_cluster(tmp_path, tls=tls, **SETTINGS)
    yield c
    c.stop_all(timeout=10)


def describe(admin: Admin, topic: str):
    return admin.describe_topic(topic).partitions[0]


class ContinuousProducer:
    """Sends numbered records (acks=all) from a thread until stopped; remembers which were acknowledged."""

    def __init__(self, servers: str, topic: str, **config) -> None:
        self.topic = topic
        self.producer = Producer(
            {"bootstrap.servers": servers, "acks": "all", "linger.ms": 2, "retry.backoff.ms": 50, **config}
        )
        self.futures: list = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        i = 0
        deadline = time.monotonic() + 60  # bounded whatever the test does
        while not self._stop.is_set() and time.monotonic() < deadline and i < 200_000:
            for _ in range(20):
                self.futures.append(self.producer.send(self.topic, b"%08d" % i))
                i += 1
            time.sleep(0.01)

    def __enter__(self) -> ContinuousProducer:
        self._thread.start()
        return self

    def __exit__(self, exc_type, *exc) -> None:
        self._stop.set()
        self._thread.join(10)
        try:
            self.producer.flush(60)
        except Exception:
            if exc_type is None:  # else the test's own failure is the one to report
                raise
        finally:
            self.producer.close()

    def acked(self) -> list[int]:
        out = []
        for i, f in enumerate(self.futures):
            try:
                f.result(0)
                out.append(i)
            except Exception:
                pass
        return out


class ContinuousConsumer:
    """Polls the topic from a thread, from the start, until stopped; keeps the values read."""

    def __init__(self, servers: str, topic: str, **config) -> None:
        self.consumer = Consumer({"bootstrap.servers": servers, "auto.offset.reset": "earliest", **config})
        self.consumer.assign([TopicPartition(topic, 0)])
        self.values: list[bytes] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        deadline = time.monotonic() + 90
        while not self._stop.is_set() and time.monotonic() < deadline:
            self.values.extend(r.value for r in self.consumer.poll(timeout_ms=100))

    def __enter__(self) -> ContinuousConsumer:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(10)
        self.consumer.close()


def wait_acked_progress(p: ContinuousProducer, timeout: float) -> float:
    """Seconds until a record sent from now on is acknowledged."""
    start = time.monotonic()
    future = p.producer.send(p.topic, b"probe")
    future.result(timeout)
    return time.monotonic() - start


def read_all(servers: str, topic: str, end: int, timeout: float = 30, **config) -> list[bytes]:
    out = []
    with Consumer({"bootstrap.servers": servers, "auto.offset.reset": "earliest", **config}) as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            out.extend(r.value for r in consumer.poll(timeout_ms=200))
            if out and consumer.position(TopicPartition(topic, 0)) >= end:
                break
    return out


def check_acked(values: list[bytes], acked: list[int]) -> dict[str, int]:
    """Every acknowledged record is present, first occurrences in send order; returns counts for the report."""
    seen: set[int] = set()
    order: list[int] = []
    duplicates = 0
    for v in values:
        if not v.isdigit():  # the probe, or an acks=1 record
            continue
        n = int(v)
        if n in seen:
            duplicates += 1
            continue
        seen.add(n)
        order.append(n)
    missing = [n for n in acked if n not in seen]
    assert not missing, f"{len(missing)} acknowledged records lost, first {missing[:5]}"
    assert order == sorted(order), "records are not in order of first write"
    return {"acked": len(acked), "read": len(values), "duplicates": duplicates}


def replica_logs_identical(cluster: DevCluster, topic: str, brokers: list[int], upto: int) -> None:
    """With the cluster stopped, every replica's log holds the same batches below ``upto``."""
    contents = {}
    for b in brokers:
        log = Log.open(cluster.node(b).directory / "data" / f"{topic}-0", high_watermark=upto)
        try:
            data = bytes(log.read(0, 1 << 30, max_offset=upto).records)
        finally:
            log.close()
        contents[b] = [(h.base_offset, h.last_offset, h.crc) for h in (batch.header for batch in read_batches(data))]
    first = contents[brokers[0]]
    assert first and first[-1][1] >= upto - 1
    for b in brokers[1:]:
        assert contents[b] == first, f"broker {b}'s log differs from broker {brokers[0]}'s"


def scrape(cluster: DevCluster, node_id: int) -> dict[str, float]:
    """The node's unlabelled Prometheus samples."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{cluster.node(node_id).metrics_port}/metrics", timeout=5).read()
    samples = {}
    for line in text.decode().splitlines():
        name, _, value = line.partition(" ")
        if line and not line.startswith("#") and "{" not in name:
            samples[name] = float(value)
    return samples


def _failover(rcluster: DevCluster, sig: signal.Signals, tmp_path: Path) -> None:
    security = rcluster.security_config()  # a TLS cluster's CA and client certificate, else nothing
    admin = Admin({"bootstrap.servers": rcluster.admin_servers, "request.timeout.ms": 10000, **security})
    topic = "chaos"
    admin.create_topic(topic, 1, 3, TOPIC_CONFIG)
    wait_for(lambda: describe(admin, topic).leader > 0, 10, what="a leader")
    with (
        ContinuousProducer(rcluster.bootstrap_servers, topic, **security) as producer,
        ContinuousConsumer(rcluster.bootstrap_servers, topic, **security) as consumer,
    ):
        wait_for(lambda: len(producer.acked()) > 500, 20, what="records acknowledged before the fault")
        old = describe(admin, topic)
        followers = [r for r in old.replicas if r != old.leader]
        if sig is signal.SIGKILL:
            # Give the leader a tail its followers never fetch (well within replica.lag.time.max.ms, so the ISR
            # stays whole): after the kill the new leader lacks it, and the old leader must truncate it away.
            # (acks=1 writes: acks=all ones would wait for the paused followers, one request at a time).
            for b in followers:
                rcluster.signal(b, signal.SIGSTOP)
            with Producer(rcluster.client_config(**{"acks": "1", "linger.ms": 0})) as tail:
                for i in range(5):
                    tail.send(topic, b"tail-%d" % i).result(5)
                    time.sleep(0.05)
        rcluster.signal(old.leader, sig)
        killed_at = time.monotonic()
        if sig is signal.SIGKILL:
            for b in followers:
                rcluster.signal(b, signal.SIGCONT)
        new_leader = wait_for(
            lambda: (d := describe(admin, topic)).leader not in (-1, old.leader) and d.leader,
            8,
            what="a new leader",
        )
        probe = wait_acked_progress(producer, 10)
        failover = time.monotonic() - killed_at
        assert failover < 5.0, f"new leader served acks=all {failover:.1f}s after the fault"
        # A consumer that was reading from the old leader moves on to the new one promptly too.
        wait_for(lambda: b"probe" in consumer.values, 5, what="the consumer to read from the new leader")
        consumer_failover = time.monotonic() - killed_at
        assert new_leader in old.isr
        if sig is signal.SIGSTOP:
            rcluster.signal(old.leader, signal.SIGCONT)
            stale = stale_leader_write(rcluster, old.leader, topic, old.leader_epoch)
            assert stale != 0, "the resumed stale leader acknowledged a write"
        else:
            rcluster.start(old.leader)
        wait_for(lambda: len(describe(admin, topic).isr) == 3, 30, what="the old leader back in the ISR")
        time.sleep(0.5)  # records keep flowing into the healed ISR
    d = describe(admin, topic)
    values = read_all(rcluster.bootstrap_servers, topic, d.high_watermark, **security)
    report = check_acked(values, producer.acked())
    report["old_leader_truncations"] = rcluster.node(old.leader).log_file.read_text().count("truncated to")
    assert report["duplicates"] == 0, "the idempotent producer's retries were appended twice"
    if sig is signal.SIGKILL:
        assert report["old_leader_truncations"] >= 1, "the restarted leader did not truncate its divergent tail"
    tls = " (TLS)" if rcluster.tls else ""
    print(
        f"\n{sig.name}{tls}: failover {failover:.2f}s (probe {probe:.2f}s, consumer {consumer_failover:.2f}s), {report}"
    )
    assert d.high_watermark == len(values)
    admin.close()
    rcluster.stop_all(timeout=20)
    replica_logs_identical(rcluster, topic, list(d.replicas), d.high_watermark)


def stale_leader_write(cluster: DevCluster, broker: int, topic: str, epoch: int) -> int:
    """Produce straight to the resumed old leader, at the epoch it believes in; return the error code."""
    import grpc

    from odradek.client.record.builder import encode_batch

    node = cluster.node(broker)
    with grpc.insecure_channel(f"127.0.0.1:{node.broker_port}") as channel:
        stub = broker_pb2_grpc.BrokerStub(channel)
        records = encode_batch([b"stale"], timestamps=int(time.time() * 1000))
        for acks in (1, -1):
            request = pb.ProduceRequest(
                acks=acks,
                timeout_ms=3000,
                topics=[pb.ProduceTopic(name=topic, partitions=[pb.ProducePartition(partition=0, records=records)])],
            )
            response = stub.Produce(request, timeout=10)
            error = response.topics[0].partitions[0].error
            if error == 0:
                return 0
    return error


@pytest.mark.parametrize("rcluster", [{}, {"tls": True}], ids=["plaintext", "tls"], indirect=True)
def test_leader_sigkill_loses_no_acknowledged_record(rcluster: DevCluster, tmp_path: Path) -> None:
    _failover(rcluster, signal.SIGKILL, tmp_path)


def test_paused_leader_is_replaced_and_never_acts_as_stale_leader(rcluster: DevCluster, tmp_path: Path) -> None:
    _failover(rcluster, signal.SIGSTOP, tmp_path)


def test_two_of_three_down_refuses_acks_all_and_shows_nothing(rcluster: DevCluster) -> None:
    admin = Admin({"bootstrap.servers": rcluster.admin_servers, "request.timeout.ms": 10000})
    topic = "minisr"
    admin.create_topic(topic, 1, 3, TOPIC_CONFIG)
    wait_for(lambda: describe(admin, topic).leader > 0, 10, what="a leader")
    servers = rcluster.bootstrap_servers
    with Producer({"bootstrap.servers": servers, "acks": "all", "linger.ms": 0}) as producer:
        for i in range(100):
            producer.send(topic, b"ok-%d" % i)
        producer.flush(10)
    d = describe(admin, topic)
    followers = [r for r in d.replicas if r != d.leader]
    for b in followers:
        rcluster.signal(b, signal.SIGKILL)
    wait_for(lambda: describe(admin, topic).isr == [d.leader], 15, what="the ISR down to the leader")
    metrics = wait_for(
        lambda: (m := scrape(rcluster, d.leader))["odradek_under_min_isr_partitions"] >= 1 and m,
        10,
        what="the leader's metrics to show the shrunk ISR",
    )
    assert metrics["odradek_under_replicated_partitions"] >= 1
    assert metrics["odradek_isr_shrinks_total"] >= 1
    refused = []
    config = {"bootstrap.servers": servers, "acks": "all", "retries": 0, "linger.ms": 0, "request.timeout.ms": 5000}
    with Producer(config) as producer:
        for i in range(20):
            future = producer.send(topic, b"refused-%d" % i)
            with pytest.raises(OdradekError) as e:
                future.result(10)
            assert isinstance(e.value, NotEnoughReplicasError), repr(e.value)
            refused.append(b"refused-%d" % i)
    for b in followers:
        rcluster.start(b)
    wait_for(lambda: len(describe(admin, topic).isr) == 3, 40, what="the ISR healed")
    with Producer({"bootstrap.servers": servers, "acks": "all"}) as producer:
        producer.send(topic, b"after").result(10)
    end = describe(admin, topic).high_watermark
    values = read_all(servers, topic, end)
    assert values[:100] == [b"ok-%d" % i for i in range(100)]
    assert values[-1] == b"after"
    assert not set(refused) & set(values)
    admin.close()

"""librdkafka (confluent-kafka) on the Kafka listener across a partition leader's SIGKILL, with real processes: an
idempotent acks=all producer writes numbered values to a 3-partition RF=3 topic (min ISR 2) while a group consumer
reads them and commits synchronously after each batch; mid-way the broker leading partition 0 is SIGKILLed and later
restarted. Every value whose delivery was acknowledged must be read by the group, at the partition and offset its
acknowledgement named, nothing read may be a value never sent, no value may be written twice, the group's committed
offsets must cover what it read, and a fresh member of the group must resume from them."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from odradek.client.admin import Admin
from odradek.deploy.local import DevCluster

from .conftest import FAST, wait_for

NODE = {
    **FAST,
    "offsets.topic.num.partitions": 3,
    "offsets.topic.replication.factor": 3,
    "group.initial.rebalance.delay.ms": 300,
    "replica.lag.time.max.ms": 3000,
    "replica.fetch.wait.max.ms": 200,
}
TOPIC = "kfo"
PARTITIONS = 3
GROUP = "kfo-group"
TOPICS = {TOPIC: {"partitions": PARTITIONS, "replication_factor": 3, "configs": {"min.insync.replicas": "2"}}}
TOTAL = 3000  # values the load sends at most
LOAD_S = 40  # and for at most this long
pytestmark = [
    pytest.mark.integration,
    pytest.mark.odradek_cluster(controllers=1, brokers=3, config=NODE, topics=TOPICS, shared=False),
]

Position = tuple[int, int]  # (partition, offset)


class Load(threading.Thread):
    """Numbered values round-robin over the partitions (an idempotent acks=all producer), paced so the kill falls
    mid-run; keeps every value sent and, for each acknowledged one, where it landed and when."""

    def __init__(self, bootstrap: str) -> None:
        super().__init__(daemon=True, name="kafka-load")
        self.bootstrap = bootstrap
        self.sent: set[bytes] = set()
        self.acked: dict[bytes, tuple[int, int, float]] = {}  # value -> (partition, offset, acknowledged at)
        self.failed: dict[bytes, str] = {}
        self.errors: list[str] = []
        self.unflushed = -1
        self.stop_event = threading.Event()

    def run(self) -> None:
        producer = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "client.id": "kfo-producer",
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 5,
                "message.timeout.ms": 30000,
                "error_cb": lambda e: self.errors.append(str(e)),
            }
        )
        deadline = time.monotonic() + LOAD_S
        for n in range(TOTAL):
            if self.stop_event.is_set() or time.monotonic() > deadline:
                break
            value = b"v%05d" % n
            self.sent.add(value)
            producer.produce(TOPIC, value, partition=n % PARTITIONS, on_delivery=self._delivered)
            producer.poll(0)  # serves delivery callbacks
            time.sleep(0.003)  # ~300 values/s: the kill falls early in the run, the failover well inside it
        self.unflushed = producer.flush(35)

    def _delivered(self, err, msg) -> None:
        if err is None:
            self.acked[msg.value()] = (msg.partition(), msg.offset(), time.monotonic())
        else:
            self.failed[msg.value()] = str(err)


class Member(threading.Thread):
    """A group member that commits, synchronously, what each batch it processed reached; keeps every record read
    and every commit acknowledged. Once stopped, it commits where it got to (retrying) before it leaves."""

    def __init__(self, bootstrap: str) -> None:
        super().__init__(daemon=True, name="kafka-member")
        self.config = {
            "bootstrap.servers": bootstrap,
            "group.id": GROUP,
            "client.id": "kfo-member",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 500,
            "fetch.wait.max.ms": 100,
        }
        self.read: list[tuple[bytes, int, int]] = []  # (value, partition, offset)
        self.commits: list[tuple[float, int, int]] = []  # (acknowledged at, partition, offset)
        self.errors: list[str] = []
        self.final_commit: dict[int, int] = {}
        self.stop_event = threading.Event()

    def run(self) -> None:
        consumer = Consumer(self.config)
        consumer.subscribe([TOPIC])
        deadline = time.monotonic() + 120
        try:
            while not self.stop_event.is_set() and time.monotonic() < deadline:
                ends: dict[int, int] = {}
                for m in consumer.consume(500, 0.2):
                    if m.error():  # mid-failover: reported, the next poll goes on
                        self.errors.append(str(m.error()))
                        continue
                    self.read.append((m.value(), m.partition(), m.offset()))
                    ends[m.partition()] = max(ends.get(m.partition(), 0), m.offset() + 1)
                if ends:
                    self._commit(consumer, [TopicPartition(TOPIC, p, o) for p, o in ends.items()])
            final = [TopicPartition(TOPIC, p, o) for p, o in sorted(reached(self).items())]
            for _ in range(20):  # the last batch's commit may have failed mid-failover: commit what was read
                if self._commit(consumer, final):
                    self.final_commit = {tp.partition: tp.offset for tp in final}
                    break
                time.sleep(0.5)
        finally:
            consumer.close()

    def _commit(self, consumer: Consumer, offsets: list[TopicPartition] | None) -> bool:
        try:
            done = (
                consumer.commit(offsets=offsets, asynchronous=False) if offsets else consumer.commit(asynchronous=False)
            )
        except KafkaException as e:
            self.errors.append(f"commit: {e}")
            return False
        failed = [tp for tp in done if tp.error is not None]
        if failed:
            self.errors.append(f"commit: {failed}")
            return False
        acked_at = time.monotonic()
        self.commits += [(acked_at, tp.partition, tp.offset) for tp in done]
        return True


@pytest.fixture
def admin(odradek_cluster: DevCluster) -> Iterator[Admin]:
    a = Admin({"bootstrap.servers": odradek_cluster.admin_servers, "request.timeout.ms": 5000})
    yield a
    a.close()


def partition0(admin: Admin):
    return admin.describe_topics([TOPIC])[0].partitions[0]


def reached(member: Member) -> dict[int, int]:
    """Per partition, the offset after the last record the member read."""
    out: dict[int, int] = {}
    for _, p, o in list(member.read):
        out[p] = max(out.get(p, 0), o + 1)
    return out


def test_a_group_with_commits_loses_no_acknowledged_record_across_a_leader_sigkill(
    odradek_cluster: DevCluster, admin: Admin
) -> None:
    cluster = odradek_cluster
    bootstrap = cluster.kafka_bootstrap_servers
    load, member = Load(bootstrap), Member(bootstrap)
    member.start()
    load.start()
    try:
        wait_for(lambda: len(load.acked) >= 600 and len(member.read) >= 300, 30, what="the load under way")
        old = partition0(admin)
        assert "broker" in cluster.node(old.leader).roles and cluster.node(old.leader).kafka_port
        acked_before = len(load.acked)
        killed_at = time.monotonic()
        cluster.signal(old.leader, signal.SIGKILL)
        new = wait_for(
            lambda: (p := partition0(admin)).leader not in (-1, old.leader) and p, 20, what="a new leader of p0"
        )
        # The new leader acknowledges partition 0's writes, and the group reads them.
        wait_for(
            lambda: sum(1 for p, _, t in load.acked.values() if p == 0 and t > killed_at) >= 100,
            30,
            what="partition 0 acknowledged by the new leader",
        )
        failover_s = min(t for p, _, t in load.acked.values() if p == 0 and t > killed_at) - killed_at
        cluster.start(old.leader)
        load.join(LOAD_S + 40)
        assert not load.is_alive()
        acked = dict(load.acked)
        wait_for(lambda: {v for v, _, _ in member.read} >= acked.keys(), 45, what="every acknowledged value read")
        ends = {p.partition: p.high_watermark for p in admin.describe_topic(TOPIC).partitions}
        wait_for(lambda: reached(member) == ends, 30, what=f"the member at the ends of the partitions {ends}")
        wait_for(lambda: len(partition0(admin).isr) == 3, 30, what="the restarted broker back in the ISR")
    finally:
        load.stop_event.set()
        member.stop_event.set()
        load.join(40)
        member.join(30)
    print(
        f"\np0 leader {old.leader} (epoch {old.leader_epoch}) -> {new.leader} (epoch {new.leader_epoch}); "
        f"{acked_before} acked before the kill, {len(acked)} in all, {len(load.failed)} failed, "
        f"first p0 ack after the kill {failover_s:.1f}s; {len(member.read)} read, {len(member.commits)} commits "
        f"({sum(t > killed_at for t, _, _ in member.commits)} after the kill); "
        f"member errors {member.errors[:5]}; producer errors {load.errors[:5]}"
    )
    assert load.unflushed == 0
    assert new.leader != old.leader and new.leader_epoch > old.leader_epoch
    assert acked_before < len(acked) and len(acked) >= TOTAL // 2  # the fault fell mid-run, and the run went on
    assert any(t > killed_at + failover_s for t, _, _ in member.commits), "no commit acknowledged after the failover"

    positions: dict[bytes, set[Position]] = {}
    for value, p, o in member.read:
        positions.setdefault(value, set()).add((p, o))
    assert positions.keys() <= load.sent, "read a value that was never sent"
    # Each value is in the log once (idempotence held across the failover), where its acknowledgement said.
    twice = {v: ps for v, ps in positions.items() if len(ps) > 1}
    assert not twice, f"values written more than once: {dict(list(twice.items())[:5])}"
    misplaced = {v: (positions[v], (p, o)) for v, (p, o, _) in acked.items() if positions[v] != {(p, o)}}
    assert not misplaced, f"(read at, acknowledged at): {dict(list(misplaced.items())[:5])}"
    by_position: dict[Position, set[bytes]] = {}
    for value, p, o in member.read:
        by_position.setdefault((p, o), set()).add(value)
    assert all(len(vs) == 1 for vs in by_position.values()), "two values read at one offset"

    # The group's commits, read back with odradek's admin client, cover everything the member read.
    committed = {o.partition: o.offset for o in admin.list_group_offsets(GROUP) if o.topic == TOPIC}
    assert reached(member) == ends
    assert member.final_commit == ends, (member.final_commit, ends, member.errors[-5:])
    assert committed == ends, (committed, ends)

    # A fresh member of the group resumes from the commits: it reads the values written since, nothing it had.
    tail = [b"t%03d" % i for i in range(30)]
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all"})
    for i, value in enumerate(tail):
        producer.produce(TOPIC, value, partition=i % PARTITIONS)
    assert producer.flush(30) == 0
    fresh = Consumer({**member.config, "client.id": "kfo-fresh"})
    fresh.subscribe([TOPIC])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    try:
        while not set(tail) <= set(got) and time.monotonic() < deadline:
            got += [m.value() for m in fresh.consume(100, 0.5) if m.error() is None]
    finally:
        fresh.close()
    # Records come in offset order per partition: anything before the commits would have come before the tail.
    assert sorted(got) == sorted(tail), f"the fresh member read {len(got)}: {sorted(set(got) - set(tail))[:10]}"

"""KIP-932 share groups with unmodified librdkafka share consumers (confluent-kafka's ``ShareConsumer``) on a real
cluster (1 controller, 3 brokers, topics of RF 2): consumers sharing one partition get disjoint records; each
explicit acknowledgement type does what it says; a consumer that stops acknowledging has its records delivered to
another once their locks expire; the delivery count limit archives a record; a group's records survive a leader
move of the partition and a restart of its share coordinator's broker, each record accepted exactly once; the group's
membership survives a restart of its group coordinator's broker (stored in ``__consumer_offsets``); and implicit
acknowledgement accepts what a poll returned at the next poll, but nothing of a consumer that crashed.

A share group without stored state starts at the partition's end (``share.auto.offset.reset=latest``, Kafka's
default), fixed by the first fetch: each test first has its members receive a ``warm`` record, then produces."""

from __future__ import annotations

import signal
import socket
import struct
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import AcknowledgeType, KafkaException, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient

from odradek.broker.groups.partitioner import offsets_partition_for
from odradek.broker.kafka.share_apis import ShareGroupDescribeRequest, ShareGroupDescribeResponse
from odradek.broker.kafka.share_offset_apis import DescribeShareGroupOffsetsRequest, DescribeShareGroupOffsetsResponse
from odradek.broker.share.state_coordinator import coordinator_key
from odradek.broker.share.state_records import SharePartitionKey
from odradek.client.admin import Admin
from odradek.deploy.local import DevCluster

from .conftest import start_cluster, wait_for

pytestmark = pytest.mark.integration

LOCK_MS = 4000
DELIVERY_LIMIT = 3
STATE_PARTITIONS = 3
NODE = {
    "offsets.topic.num.partitions": 3,
    "offsets.topic.replication.factor": 3,
    "share.coordinator.state.topic.num.partitions": STATE_PARTITIONS,
    "group.share.record.lock.duration.ms": LOCK_MS,
    "group.share.delivery.count.limit": DELIVERY_LIMIT,
    "group.share.heartbeat.interval.ms": 1000,
    "group.share.session.timeout.ms": 15000,
    "replica.lag.time.max.ms": 3000,
    "replica.fetch.wait.max.ms": 200,
}
WARM = b"warm"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevCluster]:
    c = start_cluster(tmp_path_factory.mktemp("kip932"), controllers=1, brokers=3, **NODE)
    yield c
    c.stop_all(timeout=10)


@pytest.fixture(scope="module")
def admin(cluster: DevCluster) -> Iterator[Admin]:
    a = Admin({"bootstrap.servers": cluster.admin_servers, "request.timeout.ms": 10000})
    yield a
    a.close()


def new_topic(admin: Admin) -> str:
    name = f"kip932-{uuid.uuid4().hex[:8]}"
    admin.create_topic(name, partitions=1, replication_factor=2)
    return name


def producer(cluster: DevCluster, one_batch: bool = False) -> Producer:
    """One record per batch, so that a fetch's soft record limit stops at each record; or (``one_batch``) the
    records of a flush in one batch, visible together (one fetch gets them all)."""
    batching = {"linger.ms": 200} if one_batch else {"batch.num.messages": 1, "linger.ms": 0}
    return Producer({"bootstrap.servers": cluster.kafka_bootstrap_servers, "acks": "all", **batching})


def produce(cluster: DevCluster, topic: str, values: list[bytes], one_batch: bool = False) -> None:
    p = producer(cluster, one_batch)
    for v in values:
        p.produce(topic, v, partition=0)
    assert p.flush(30) == 0


class Member:
    """A share consumer of the group, keeping what each poll delivered and what each acknowledgement commit
    answered."""

    def __init__(self, cluster: DevCluster, group: str, topic: str, name: str, explicit: bool = False, **conf: Any):
        self.name = name
        self.explicit = explicit
        config = {
            "bootstrap.servers": cluster.kafka_bootstrap_servers,
            "group.id": group,
            "client.id": name,
            "share.acknowledgement.mode": "explicit" if explicit else "implicit",
            **conf,
        }
        self.consumer = ShareConsumer(config)
        self.consumer.set_acknowledgement_commit_callback(self._committed)
        self.consumer.subscribe([topic])
        self.received: list[tuple[int, bytes, int]] = []  # (offset, value, delivery count), warm records left out
        self.last: list[Any] = []  # the last poll's messages
        self.accepted: list[int] = []  # offsets whose acknowledgement the broker confirmed
        self.failed: list[tuple[int, str]] = []
        self.errors: list[str] = []
        self.closed = False

    def _committed(self, offsets: dict[Any, set[int]], error: KafkaException | None) -> None:
        for offs in offsets.values():
            if error is None:
                self.accepted.extend(offs)
            else:
                self.failed.extend((o, str(error)) for o in offs)

    def poll(self, timeout: float = 0.3) -> list[Any]:
        """Poll (explicitly: the last poll's warm records accepted first, the others must have been acknowledged)."""
        self.accept_warm()
        try:
            messages = self.consumer.poll(timeout)
        except KafkaException as e:
            self.errors.append(str(e))
            return []
        self.last = [m for m in messages if m.error() is None]
        self.errors.extend(str(m.error()) for m in messages if m.error() is not None)
        self.received.extend((m.offset(), m.value(), m.delivery_count()) for m in self.last if m.value() != WARM)
        return self.last

    def accept_warm(self) -> None:
        if self.explicit:
            for m in self.last:
                if m.value() == WARM:
                    self.consumer.acknowledge(m, AcknowledgeType.ACCEPT)
        self.last = [m for m in self.last if m.value() != WARM]

    def acknowledge(self, kind: AcknowledgeType = AcknowledgeType.ACCEPT, offsets: set[int] | None = None) -> None:
        """Explicitly, the last poll's records (those at ``offsets``) with ``kind``; implicitly they are accepted by
        the next poll or commit."""
        if not self.explicit:
            return
        for m in self.last:
            if m.value() != WARM and (offsets is None or m.offset() in offsets):
                self.consumer.acknowledge(m, kind)

    def commit(self) -> None:
        try:
            self.consumer.commit_sync(30)
        except KafkaException as e:
            self.errors.append(str(e))

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.consumer.close()


def warm_up(cluster: DevCluster, topic: str, members: list[Member], timeout: float = 40) -> None:
    """Produce ``warm`` records until a member receives one: the share-partition has then started (at the end of
    the partition as it was), so what is produced next is the group's."""
    p = producer(cluster)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        p.produce(topic, WARM, partition=0)
        p.flush(10)
        for m in members:
            got = m.poll(0.5)
            if any(x.value() == WARM for x in got):
                m.accept_warm()
                m.acknowledge()
                m.commit()
                return
    pytest.fail(f"no member of {[m.name for m in members]} received a record in {timeout}s: {members[0].errors}")


def values(n: int, prefix: str) -> list[bytes]:
    return [f"{prefix}{i:04d}".encode() for i in range(n)]


def test_members_sharing_a_partition_get_disjoint_records(cluster: DevCluster, admin: Admin) -> None:
    topic = new_topic(admin)
    group = f"g-{topic}"
    members = [Member(cluster, group, topic, f"m{i}", **{"max.poll.records": 5}) for i in range(3)]
    try:
        warm_up(cluster, topic, members)
        sent = values(150, "d")
        produce(cluster, topic, sent)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and sum(len(m.received) for m in members) < len(sent):
            for m in members:
                m.poll(0.2)
        for m in members:
            m.poll(0.2)  # accepts the last poll's records (implicit acknowledgement)
            m.commit()
        got = [(o, v) for m in members for o, v, _ in m.received]
        assert sorted(v for _, v in got) == sent, "every record once, to one member"
        assert len({o for o, _ in got}) == len(got)
        assert sum(1 for m in members if m.received) >= 2, "the partition's records are shared"
        assert all(count == 1 for m in members for _, _, count in m.received)
        wait_for(
            lambda: [m.poll(0.1) for m in members] and sum(len(m.accepted) for m in members) >= len(sent),
            20,
            what="every record accepted",
        )
    finally:
        for m in members:
            m.close()


def test_each_acknowledgement_type_does_what_it_says(cluster: DevCluster, admin: Admin) -> None:
    topic = new_topic(admin)
    group = f"g-{topic}"
    a = Member(cluster, group, topic, "a", explicit=True)
    b = Member(cluster, group, topic, "b", explicit=True)
    try:
        warm_up(cluster, topic, [a])
        produce(cluster, topic, [b"accept-me", b"release-me", b"reject-me"], one_batch=True)
        wait_for(lambda: (a.poll() and len(a.received) >= 3) or len(a.received) >= 3, 30, what="a's three records")
        by_value = {v: o for o, v, _ in a.received}
        assert [count for _, _, count in a.received] == [1, 1, 1]
        a.acknowledge(AcknowledgeType.ACCEPT, {by_value[b"accept-me"]})
        a.acknowledge(AcknowledgeType.RELEASE, {by_value[b"release-me"]})
        a.acknowledge(AcknowledgeType.REJECT, {by_value[b"reject-me"]})
        a.commit()
        assert set(by_value.values()) <= set(a.accepted), a.failed
        # Only the released record comes back, delivered a second time; the accepted and rejected ones never do.
        wait_for(lambda: (b.poll() and len(b.received) >= 1) or len(b.received) >= 1, 30, what="the released record")
        b.acknowledge()
        b.commit()
        for _ in range(10):
            b.poll(0.3)
            a.poll(0.3)
        assert [(v, count) for _, v, count in b.received] == [(b"release-me", 2)]
        assert [v for _, v, _ in a.received] == [b"accept-me", b"release-me", b"reject-me"]
    finally:
        a.close()
        b.close()
    # The group, empty now, is listed as a share group, and Kafka's DeleteGroups deletes it (librdkafka's listing
    # leaves out groups of other protocol types than consumer, as Kafka's clients do: odradek's admin lists it).
    listed = {g.group_id: (g.protocol_type, g.state, g.group_type) for g in admin.list_groups()}
    assert listed.get(group) == ("share", "Empty", "share"), listed
    client = AdminClient({"bootstrap.servers": cluster.kafka_bootstrap_servers})
    client.delete_consumer_groups([group])[group].result(30)
    assert group not in {g.group_id for g in admin.list_groups()}


def test_records_of_a_member_that_stops_acknowledging_go_to_another_after_the_lock(
    cluster: DevCluster, admin: Admin
) -> None:
    topic = new_topic(admin)
    group = f"g-{topic}"
    stuck = Member(cluster, group, topic, "stuck", explicit=True)
    other = Member(cluster, group, topic, "other", explicit=True)
    try:
        warm_up(cluster, topic, [stuck])
        sent = values(5, "s")
        produce(cluster, topic, sent, one_batch=True)
        wait_for(lambda: (stuck.poll() and len(stuck.received) >= 5) or len(stuck.received) >= 5, 30, what="delivery")
        held_at = time.monotonic()
        # ``stuck`` stays in the group but acknowledges nothing: the locks expire and ``other`` gets the records.
        wait_for(lambda: (other.poll() and len(other.received) >= 5) or len(other.received) >= 5, 30, what="redelivery")
        assert time.monotonic() - held_at >= LOCK_MS / 1000 * 0.8
        assert sorted(v for _, v, _ in other.received) == sent
        assert {count for _, _, count in other.received} == {2}
        # The stuck member's late acknowledgement is refused: another member holds the records now.
        stuck.acknowledge()
        stuck.commit()
        wait_for(lambda: stuck.poll(0.1) is not None and stuck.failed, 10, what="the refusal")
        assert not set(stuck.accepted) & {o for o, _, _ in stuck.received}, stuck.accepted
        assert {o for o, _ in stuck.failed} == {o for o, _, _ in stuck.received}, stuck.failed
        other.acknowledge()
        other.commit()
        assert {o for o, _, _ in other.received} <= set(other.accepted), other.failed
    finally:
        stuck.close()
        other.close()


def test_the_delivery_count_limit_archives_a_record(cluster: DevCluster, admin: Admin) -> None:
    topic = new_topic(admin)
    group = f"g-{topic}"
    a = Member(cluster, group, topic, "a", explicit=True)
    try:
        warm_up(cluster, topic, [a])
        produce(cluster, topic, [b"poison", b"after"])
        counts: list[int] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not any(v == b"after" for _, v, _ in a.received):
            for m in a.poll():
                if m.value() == b"poison":
                    counts.append(m.delivery_count())
                    a.consumer.acknowledge(m, AcknowledgeType.RELEASE)
                else:
                    a.consumer.acknowledge(m, AcknowledgeType.ACCEPT)
            if a.last:
                a.commit()
        for _ in range(8):  # nothing comes back after the limit
            for m in a.poll():
                counts.append(m.delivery_count())
                a.consumer.acknowledge(m, AcknowledgeType.RELEASE)
            if a.last:
                a.commit()
        assert counts == list(range(1, DELIVERY_LIMIT + 1))
    finally:
        a.close()


def leader_of(cluster: DevCluster, topic: str, partition: int) -> int:
    client = AdminClient({"bootstrap.servers": cluster.kafka_bootstrap_servers})
    return int(client.list_topics(topic, timeout=10).topics[topic].partitions[partition].leader)


def share_coordinator(cluster: DevCluster, admin: Admin, group: str, topic: str) -> int:
    """The broker leading the ``__share_group_state`` partition that keeps the group's state of ``topic``-0."""
    topic_id = bytes.fromhex(admin.describe_topics([topic])[0].topic_id)
    key = coordinator_key(SharePartitionKey(group, topic_id, 0))
    return leader_of(cluster, "__share_group_state", offsets_partition_for(key, STATE_PARTITIONS))


def test_records_survive_a_leader_move_and_a_share_coordinator_restart(cluster: DevCluster, admin: Admin) -> None:
    topic = new_topic(admin)
    group = f"g-{topic}"
    members = [Member(cluster, group, topic, f"m{i}", **{"max.poll.records": 20}) for i in range(2)]
    sent = values(600, "f")
    p = producer(cluster)

    def consume(seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            for m in members:
                m.poll(0.2)

    def accepted() -> list[int]:
        return [o for m in members for o in m.accepted]

    try:
        warm_up(cluster, topic, members)
        for v in sent[:200]:
            p.produce(topic, v, partition=0)
        assert p.flush(30) == 0
        consume(3)
        leader = leader_of(cluster, topic, 0)
        cluster.signal(leader, signal.SIGKILL)
        wait_for(lambda: leader_of(cluster, topic, 0) not in (-1, leader), 30, what="a new leader")
        for v in sent[200:400]:
            p.produce(topic, v, partition=0)
        assert p.flush(60) == 0
        consume(5)
        cluster.start(leader)
        wait_for(lambda: len(admin.describe_topics([topic])[0].partitions[0].isr) == 2, 60, what="the ISR whole again")
        coordinator = share_coordinator(cluster, admin, group, topic)
        cluster.signal(coordinator, signal.SIGTERM)
        wait_for(lambda: share_coordinator(cluster, admin, group, topic) not in (-1, coordinator), 30, what="moved")
        for v in sent[400:]:
            p.produce(topic, v, partition=0)
        assert p.flush(60) == 0
        consume(3)
        cluster.start(coordinator)
        offsets = {}

        def all_accepted() -> bool:
            consume(1)
            for m in members:
                m.commit()
            offsets.update({o: v for m in members for o, v, _ in m.received})
            return {v for o, v in offsets.items() if o in set(accepted())} >= set(sent)

        wait_for(all_accepted, 120, interval=0, what="every record accepted")
        done = accepted()
        sent_offsets = {o for o, v in offsets.items() if v in set(sent)}
        assert sorted(o for o in done if o in sent_offsets) == sorted(sent_offsets), "each accepted exactly once"
    finally:
        for m in members:
            m.close()


def kafka_call(cluster: DevCluster, node_id: int, request: Any, response_cls: Any, version: int) -> Any:
    """One request of a flexible version to broker ``node_id``'s Kafka listener, its answer decoded."""
    node = cluster.node(node_id)
    body = request.encode(version=version)
    header = struct.pack(">hhih", request.API_KEY, version, 7, 4) + b"test" + b"\x00"  # request header v2
    with socket.create_connection((node.host, node.kafka_port), timeout=20) as sock:
        sock.sendall(struct.pack(">i", len(header) + len(body)) + header + body)
        with sock.makefile("rb") as f:
            (size,) = struct.unpack(">i", f.read(4))
            frame = f.read(size)
    assert frame[:5] == struct.pack(">i", 7) + b"\x00"  # response header v1
    return response_cls.decode(frame[5:], version=version)


def group_coordinator(cluster: DevCluster, group: str) -> int:
    return leader_of(cluster, "__consumer_offsets", offsets_partition_for(group, NODE["offsets.topic.num.partitions"]))


def describe_group(cluster: DevCluster, group: str) -> tuple[int, int, list[tuple[str, int]]]:
    """ShareGroupDescribe at the group's coordinator: (error, group epoch, [(member id, member epoch)])."""
    answer = kafka_call(
        cluster,
        group_coordinator(cluster, group),
        ShareGroupDescribeRequest(group_ids=[group]),
        ShareGroupDescribeResponse,
        1,
    )
    [g] = answer.groups
    return g.error_code, g.group_epoch, sorted((m.member_id, m.member_epoch) for m in g.members)


def start_offset(cluster: DevCluster, group: str, topic: str) -> int:
    """DescribeShareGroupOffsets of ``topic``-0 at the group's coordinator (-1: none stored, or an error)."""
    R = DescribeShareGroupOffsetsRequest
    Group = R.DescribeShareGroupOffsetsRequestGroup
    request = R(
        groups=[
            Group(
                group_id=group, topics=[Group.DescribeShareGroupOffsetsRequestTopic(topic_name=topic, partitions=[0])]
            )
        ]
    )
    answer = kafka_call(cluster, group_coordinator(cluster, group), request, DescribeShareGroupOffsetsResponse, 0)
    [g] = answer.groups
    found = [p.start_offset for t in g.topics for p in t.partitions if p.error_code == 0]
    return found[0] if g.error_code == 0 and found else -1


def test_share_group_membership_survives_a_restart_of_its_coordinator(cluster: DevCluster, admin: Admin) -> None:
    topic = new_topic(admin)
    group = f"g-{topic}"
    a = Member(cluster, group, topic, "a")
    stopped = -1
    try:
        warm_up(cluster, topic, [a])
        b = Member(cluster, group, topic, "b")  # joins (epoch 2) and leaves (epoch 3)
        wait_for(lambda: b.poll(0.2) is not None and len(describe_group(cluster, group)[2]) == 2, 30, what="b in")
        b.close()
        wait_for(lambda: a.poll(0.2) is not None and len(describe_group(cluster, group)[2]) == 1, 30, what="b out")
        error, epoch, members = describe_group(cluster, group)
        assert error == 0 and epoch >= 3, (error, epoch, members)
        stopped = group_coordinator(cluster, group)
        cluster.signal(stopped, signal.SIGTERM)
        wait_for(lambda: group_coordinator(cluster, group) not in (-1, stopped), 30, what="a new coordinator")
        # Described as it was: a group lost with its coordinator would be made again by a's rejoin, at epoch 1.
        described: list[Any] = []
        wait_for(lambda: described.append(describe_group(cluster, group)) or described[-1][0] == 0, 30, what="loaded")
        assert described[-1] == (0, epoch, members), described
        sent = values(20, "r")
        produce(cluster, topic, sent)
        received = lambda: {v for _, v, _ in a.received}  # noqa: E731
        wait_for(lambda: a.poll(0.3) is not None and received() >= set(sent), 60, what="consumption goes on")
        # Delivered at least once: a record is delivered again only as a redelivery the broker counts (its
        # acknowledgement failed while the share state's coordinator moved with the stopped broker, say).
        redelivered = [r for r in a.received if r[2] > 1]
        assert len(a.received) == len(sent) + len(redelivered), (a.received, a.failed, a.errors)
        error, after, now = describe_group(cluster, group)
        assert (error, after, [m for m, _ in now]) == (0, epoch, [m for m, _ in members])
    finally:
        a.close()
        if stopped != -1:
            cluster.start(stopped)
    wait_for(lambda: len(admin.describe_topics([topic])[0].partitions[0].isr) == 2, 60, what="the ISR whole again")


CRASHING_CONSUMER = """
import os, signal, sys
from confluent_kafka import ShareConsumer

servers, group, topic, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
c = ShareConsumer({"bootstrap.servers": servers, "group.id": group, "share.acknowledgement.mode": "implicit"})
c.subscribe([topic])
got = []
while len(got) < count:
    got += [m.offset() for m in c.poll(0.5) if m.error() is None and m.value() != b"warm"]
print(" ".join(map(str, got)), flush=True)
os.kill(os.getpid(), signal.SIGKILL)  # no next poll, commit or close: nothing is acknowledged
"""


def test_implicit_acknowledgement_accepts_what_a_poll_returned_but_not_after_a_crash(
    cluster: DevCluster, admin: Admin
) -> None:
    topic = new_topic(admin)
    group = f"g-{topic}"
    a = Member(cluster, group, topic, "a")  # implicit, confluent-kafka's default
    b: Member | None = None
    c: Member | None = None
    try:
        warm_up(cluster, topic, [a])
        sent = values(5, "i")
        produce(cluster, topic, sent, one_batch=True)
        wait_for(lambda: a.poll() is not None and len(a.received) >= 5, 30, what="a's records")
        end = max(o for o, _, _ in a.received) + 1
        # The next poll accepts them: the share-partition's start offset moves past them.
        wait_for(lambda: a.poll(0.2) is not None and start_offset(cluster, group, topic) == end, 30, what="accepted")
        a.close()
        b = Member(cluster, group, topic, "b")
        for _ in range(8):
            b.poll(0.3)
        assert b.received == [], "accepted records are not delivered again"
        b.close()  # (a member that stops polling still prefetches, and would hold what comes next)
        # A member that crashes after a poll acknowledges nothing: its records come back once their locks expire.
        crashed = subprocess.Popen(
            [sys.executable, "-c", CRASHING_CONSUMER, cluster.kafka_bootstrap_servers, group, topic, "3"],
            stdout=subprocess.PIPE,
            text=True,
        )
        time.sleep(2)  # it joins and starts fetching
        produce(cluster, topic, values(3, "k"), one_batch=True)
        out, _ = crashed.communicate(timeout=60)
        assert crashed.returncode == -signal.SIGKILL
        held = sorted(int(o) for o in out.split())
        held_at = time.monotonic()
        assert len(held) == 3 and held[0] >= end
        assert start_offset(cluster, group, topic) == end  # not accepted by the crash
        c = Member(cluster, group, topic, "c")
        wait_for(lambda: c.poll(0.3) is not None and len(c.received) >= 3, 60, what="redelivery after the lock")
        assert time.monotonic() - held_at >= LOCK_MS / 1000 * 0.5
        assert sorted(o for o, _, _ in c.received) == held
        assert {count for _, _, count in c.received} == {2}, "delivered a second time"
        wait_for(
            lambda: c.poll(0.2) is not None and start_offset(cluster, group, topic) == held[-1] + 1,
            30,
            what="c's next poll accepts them",
        )
    finally:
        for m in (a, b, c):
            if m is not None:
                m.close()

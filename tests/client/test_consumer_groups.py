"""The consumer's group membership (client/consumer/coordinator.py) against a small in-process GroupCoordinator.

The fake below runs the classic protocol's outline only (MEMBER_ID_REQUIRED, a join window instead of the initial
delay, generations, the leader, SyncGroup, REBALANCE_IN_PROGRESS on heartbeats, LeaveGroup, commits checked
against the generation); the broker's own coordinator has its own tests. These tests check the client's side:
the handshake, the leader's assignment, the listener's timeline, heartbeats, max.poll.interval.ms, committed
positions, and close.
"""

from __future__ import annotations

import asyncio
import itertools
import re
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import grpc
import pytest
from fake_broker import FakeCluster

from odradek.client import AsyncConsumer, Consumer, TopicPartition
from odradek.client.connection import channel_options
from odradek.client.consumer.consumer import ConsumerRebalanceListener
from odradek.client.consumer.protocol import Assignment, Subscription
from odradek.client.errors import CommitFailedError, ErrorCode, FencedInstanceIdError
from odradek.client.record.builder import encode_batch
from odradek.client.structs import OffsetAndMetadata
from odradek.proto import broker_pb2_grpc, group_pb2_grpc
from odradek.proto import group_pb2 as gpb

JOIN_WINDOW_S = 0.3  # the fake's stand-in for group.initial.rebalance.delay.ms


@dataclass
class FakeMember:
    member_id: str
    instance_id: str | None
    protocols: list[tuple[str, bytes]] = field(default_factory=list)
    joined: bool = False


class FakeGroupCoordinator(group_pb2_grpc.GroupCoordinatorServicer):
    """One group on node 0. Every RPC is recorded in ``calls`` (rpc name, request)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.members: dict[str, FakeMember] = {}
        self.generation = 0
        self.leader = ""
        self.protocol = ""
        self.rebalancing = False
        self.assignments: dict[str, bytes] = {}
        self.committed: dict[tuple[str, int], gpb.OffsetCommitPartition] = {}
        self.calls: list[tuple[str, object]] = []
        self.changed = threading.Condition()
        self._ids = itertools.count(1)
        self._join_done: asyncio.Event | None = None
        self._sync_done: asyncio.Event | None = None
        self.heartbeat_errors: list[int] = []
        # Partitions with transactional offsets not yet written to the group (KIP-447): OffsetFetch with
        # require_stable answers them UNSTABLE_OFFSET_COMMIT this many more times, then the pending offset.
        self.pending: dict[tuple[str, int], tuple[int, int]] = {}

    def _record(self, rpc: str, request: object) -> None:
        with self.changed:
            self.calls.append((rpc, request))
            self.changed.notify_all()

    def wait_for(self, predicate: object, timeout: float = 10) -> None:
        with self.changed:
            assert self.changed.wait_for(predicate, timeout), "the fake coordinator never saw the expected call"  # type: ignore[arg-type]

    def rpcs(self, name: str) -> list:
        with self.changed:
            return [r for n, r in self.calls if n == name]

    async def FindCoordinator(self, request, context):
        self._record("FindCoordinator", request)
        return gpb.FindCoordinatorResponse(
            coordinators=[gpb.Coordinator(key=k, node_id=0, host="127.0.0.1", port=self.port) for k in request.keys]
        )

    def _start_rebalance(self) -> None:
        if not self.rebalancing:
            self.rebalancing = True
            self._join_done = asyncio.Event()
            for m in self.members.values():
                m.joined = False
            asyncio.get_running_loop().call_later(JOIN_WINDOW_S, self._complete_join)

    def _complete_join(self) -> None:
        for mid in [m for m, v in self.members.items() if not v.joined]:
            del self.members[mid]  # did not rejoin in time
        self.generation += 1
        self.leader = next(iter(self.members), "")
        names = [n for n, _ in self.members[self.leader].protocols] if self.leader else []
        self.protocol = next((n for n in names if all(n in dict(m.protocols) for m in self.members.values())), "")
        self.assignments = {}
        self._sync_done = asyncio.Event()
        assert self._join_done is not None
        self._join_done.set()

    async def JoinGroup(self, request, context):
        self._record("JoinGroup", request)
        instance = request.group_instance_id if request.HasField("group_instance_id") else None
        member_id = request.member_id
        if not member_id and instance is None:
            return gpb.JoinGroupResponse(error=ErrorCode.MEMBER_ID_REQUIRED, member_id=f"m{next(self._ids)}")
        if instance is not None and not member_id:
            member_id = f"{instance}-{next(self._ids)}"
        member = self.members.setdefault(member_id, FakeMember(member_id, instance))
        member.protocols = [(p.name, p.metadata) for p in request.protocols]
        self._start_rebalance()
        member.joined = True
        done = self._join_done
        assert done is not None
        await done.wait()
        response = gpb.JoinGroupResponse(
            generation_id=self.generation,
            protocol_type="consumer",
            protocol_name=self.protocol,
            leader=self.leader,
            member_id=member_id,
        )
        if member_id == self.leader:
            for m in self.members.values():
                response.members.add(
                    member_id=m.member_id, group_instance_id=m.instance_id, metadata=dict(m.protocols)[self.protocol]
                )
        return response

    async def SyncGroup(self, request, context):
        self._record("SyncGroup", request)
        if request.member_id not in self.members:
            return gpb.SyncGroupResponse(error=ErrorCode.UNKNOWN_MEMBER_ID)
        if request.generation_id != self.generation:
            return gpb.SyncGroupResponse(error=ErrorCode.ILLEGAL_GENERATION)
        done = self._sync_done
        assert done is not None
        if request.member_id == self.leader:
            self.assignments = {a.member_id: a.assignment for a in request.assignments}
            self.rebalancing = False
            done.set()
        await done.wait()
        if self.rebalancing:
            return gpb.SyncGroupResponse(error=ErrorCode.REBALANCE_IN_PROGRESS)
        return gpb.SyncGroupResponse(
            protocol_name=self.protocol, assignment=self.assignments.get(request.member_id, b"")
        )

    def _member_error(self, member_id: str, generation: int) -> int:
        if member_id not in self.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation != self.generation:
            return ErrorCode.ILLEGAL_GENERATION
        if self.rebalancing:
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    async def Heartbeat(self, request, context):
        self._record("Heartbeat", request)
        if self.heartbeat_errors:
            return gpb.HeartbeatResponse(error=self.heartbeat_errors.pop(0))
        return gpb.HeartbeatResponse(error=self._member_error(request.member_id, request.generation_id))

    async def LeaveGroup(self, request, context):
        self._record("LeaveGroup", request)
        for m in request.members:
            self.members.pop(m.member_id, None)
        if self.members:
            self._start_rebalance()
        return gpb.LeaveGroupResponse()

    async def OffsetCommit(self, request, context):
        self._record("OffsetCommit", request)
        error = ErrorCode.NONE
        if request.generation_id != -1 or request.member_id:
            error = self._member_error(request.member_id, request.generation_id)
        response = gpb.OffsetCommitResponse()
        for t in request.topics:
            rt = response.topics.add(name=t.name)
            for p in t.partitions:
                if error == ErrorCode.NONE:
                    self.committed[(t.name, p.partition)] = p
                rt.partitions.add(partition=p.partition, error=error)
        return response

    async def OffsetFetch(self, request, context):
        self._record("OffsetFetch", request)
        response = gpb.OffsetFetchResponse()
        for t in request.topics:
            rt = response.topics.add(name=t.name)
            for number in t.partitions:
                pending = self.pending.get((t.name, number))
                if pending is not None and request.require_stable:
                    answers, offset = pending
                    if answers > 0:
                        self.pending[(t.name, number)] = (answers - 1, offset)
                        rt.partitions.add(partition=number, committed_offset=-1, error=ErrorCode.UNSTABLE_OFFSET_COMMIT)
                        continue
                    self.committed[(t.name, number)] = gpb.OffsetCommitPartition(
                        partition=number, committed_offset=offset
                    )
                    del self.pending[(t.name, number)]
                c = self.committed.get((t.name, number))
                rt.partitions.add(
                    partition=number,
                    committed_offset=c.committed_offset if c else -1,
                    committed_leader_epoch=c.committed_leader_epoch if c else -1,
                    metadata=c.committed_metadata if c else "",
                )
        return response


class GroupCluster(FakeCluster):
    async def _start(self, brokers: int) -> None:
        self._data = asyncio.Event()
        for node in range(brokers):
            server = grpc.aio.server(options=channel_options())
            broker_pb2_grpc.add_BrokerServicer_to_server(_broker(self, node), server)
            port = server.add_insecure_port("127.0.0.1:0")
            if node == 0:
                self.group = FakeGroupCoordinator(port)
            group_pb2_grpc.add_GroupCoordinatorServicer_to_server(self.group, server)
            self.ports[node] = port
            await server.start()
            self._servers.append(server)


def _broker(cluster: FakeCluster, node: int) -> broker_pb2_grpc.BrokerServicer:
    from fake_broker import FakeBroker

    return FakeBroker(cluster, node)


@pytest.fixture
def cluster() -> Iterator[GroupCluster]:
    c = GroupCluster(2)
    c.create_topic("t", 4)
    yield c
    c.stop()


def config(cluster: FakeCluster, **overrides: object) -> dict:
    return {
        "bootstrap.servers": cluster.bootstrap,
        "group.id": "g",
        "auto.offset.reset": "earliest",
        "fetch.max.wait.ms": 50,
        "retry.backoff.ms": 20,
        "heartbeat.interval.ms": 50,
        "session.timeout.ms": 3000,
        **{k.replace("_", "."): v for k, v in overrides.items()},
    }


class Timeline(ConsumerRebalanceListener):
    """Records every callback, shared by several consumers: (consumer, callback, partitions)."""

    def __init__(self, name: str, log: list[tuple[str, str, frozenset[TopicPartition]]]) -> None:
        self.name, self.log = name, log

    def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        self.log.append((self.name, "revoked", frozenset(revoked)))

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        self.log.append((self.name, "assigned", frozenset(assigned)))

    def on_partitions_lost(self, lost: set[TopicPartition]) -> None:
        self.log.append((self.name, "lost", frozenset(lost)))


def never_owned_twice(log: list[tuple[str, str, frozenset[TopicPartition]]]) -> dict[str, set[TopicPartition]]:
    owned: dict[str, set[TopicPartition]] = {}
    for name, callback, partitions in log:
        mine = owned.setdefault(name, set())
        if callback == "assigned":
            others = set().union(*(o for n, o in owned.items() if n != name))
            assert not partitions & others, f"{name} assigned {partitions & others} still owned elsewhere"
            mine |= partitions
        else:
            mine -= partitions
    return owned


def poll_all(consumers: list[Consumer], until: object, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not until():  # type: ignore[operator]
        assert time.monotonic() < deadline, "condition not reached"
        for c in consumers:
            c.poll(20)


ALL = {TopicPartition("t", p) for p in range(4)}


def test_first_join_does_the_member_id_handshake_and_the_leader_assigns(cluster: GroupCluster) -> None:
    log: list = []
    with Consumer(config(cluster)) as c:
        c.subscribe(["t"], Timeline("a", log))
        poll_all([c], lambda: c.assignment() == ALL)
        joins = cluster.group.rpcs("JoinGroup")
        assert [j.member_id for j in joins[:2]] == ["", "m1"]
        assert [p.name for p in joins[1].protocols] == ["range", "cooperative-sticky"]
        sync = cluster.group.rpcs("SyncGroup")[0]
        assert {a.member_id: set(Assignment.decode(a.assignment).partitions) for a in sync.assignments} == {"m1": ALL}
        meta = c.group_metadata()
        assert (meta.group_id, meta.generation_id, meta.member_id, meta.group_instance_id) == ("g", 1, "m1", None)
    assert log[0] == ("a", "assigned", frozenset(ALL))  # a new member has nothing to revoke or lose


def test_a_topic_its_pattern_matched_only_after_joining_gets_the_member_rejoining(cluster: GroupCluster) -> None:
    """The member joins with what its pattern matched then (nothing); the topic appears while the join is under
    way, so the leader's assignment (from fresher metadata) covers none of it. The member must join again with the
    topic, as a Kafka consumer compares the subscription it joined with, and not take the topics its metadata shows
    at the end of the join as joined: it kept an empty assignment for good (seen under load on a real cluster)."""
    new = {TopicPartition("p-new", p) for p in range(2)}
    with Consumer(config(cluster, metadata_max_age_ms=100)) as c:
        c.subscribe(re.compile("p-.*"))
        creator = threading.Thread(
            target=lambda: (
                cluster.group.wait_for(lambda: any(j.member_id for j in cluster.group.rpcs("JoinGroup"))),
                cluster.create_topic("p-new", 2),
            )
        )
        creator.start()
        poll_all([c], lambda: c.assignment() == new)
        creator.join(10)
        joins = cluster.group.rpcs("JoinGroup")
        first = Subscription.decode(joins[1].protocols[0].metadata).topics
        assert list(first) == [] and len(joins) >= 3  # joined without the topic, then again with it


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_a_second_member_splits_the_partitions_and_no_partition_is_owned_twice(
    cluster: GroupCluster, strategy: str
) -> None:
    log: list = []
    a = Consumer(config(cluster, partition_assignment_strategy=strategy))
    b = Consumer(config(cluster, partition_assignment_strategy=strategy))
    try:
        a.subscribe(["t"], Timeline("a", log))
        poll_all([a], lambda: a.assignment() == ALL)
        b.subscribe(["t"], Timeline("b", log))
        # a learns of the rebalance from its heartbeat (REBALANCE_IN_PROGRESS) and rejoins in a later poll
        poll_all([a, b], lambda: len(a.assignment()) == 2 and len(b.assignment()) == 2)
        assert a.assignment() | b.assignment() == ALL
        owned = never_owned_twice(log)
        assert owned == {"a": a.assignment(), "b": b.assignment()}
        assert any(h.member_id for h in cluster.group.rpcs("Heartbeat"))
        revoked_by_a = set().union(*(p for n, cb, p in log if n == "a" and cb == "revoked"))
        if strategy == "cooperative-sticky":
            assert revoked_by_a == ALL - a.assignment()  # only what moved
            assert ("a", "revoked", frozenset()) not in log
        else:
            assert revoked_by_a == ALL  # eager gives everything up
    finally:
        a.close()
        b.close()
    never_owned_twice(log)


def test_committed_offsets_are_where_new_partitions_start(cluster: GroupCluster) -> None:
    for p in range(4):
        cluster.append("t", p, encode_batch([b"v%d" % i for i in range(10)], None, 1))
    with Consumer(config(cluster, enable_auto_commit=False)) as setup:
        setup.assign([TopicPartition("t", 0)])
        setup.commit({TopicPartition("t", 0): OffsetAndMetadata(7, "meta")})  # a simple commit: no generation
        simple = cluster.group.rpcs("OffsetCommit")[-1]
        assert (simple.generation_id, simple.member_id) == (-1, "")
        assert setup.committed([("t", 0), ("t", 1)]) == {
            TopicPartition("t", 0): OffsetAndMetadata(7, "meta", None),
            TopicPartition("t", 1): None,
        }
    first: dict[int, int] = {}
    with Consumer(config(cluster, enable_auto_commit=False)) as c:
        c.subscribe(["t"])
        deadline = time.monotonic() + 10
        while len(first) < 4:
            assert time.monotonic() < deadline
            for r in c.poll(50):
                first.setdefault(r.partition, r.offset)
    assert first == {0: 7, 1: 0, 2: 0, 3: 0}  # t-0 from its committed offset, the rest by auto.offset.reset


def test_assign_with_a_group_id_starts_at_committed_offsets_and_commits_epochs(cluster: GroupCluster) -> None:
    for p in range(3):
        cluster.move_leader("t", p, 0)
        cluster.move_leader("t", p, 0)
        cluster.move_leader("t", p, 0)  # the leader that appends the records is in epoch 3
        cluster.append("t", p, encode_batch([b"v%d" % i for i in range(10)], None, 1))
    cluster.group.committed[("t", 0)] = gpb.OffsetCommitPartition(partition=0, committed_offset=4)
    cluster.group.committed[("t", 2)] = gpb.OffsetCommitPartition(partition=2, committed_offset=6)
    with Consumer(config(cluster, enable_auto_commit=False)) as c:
        c.assign([TopicPartition("t", p) for p in range(3)])
        c.seek(TopicPartition("t", 2), 1)  # an explicit seek wins over the committed offset
        first: dict[int, int] = {}
        deadline = time.monotonic() + 10
        while len(first) < 3 or c.position(TopicPartition("t", 1)) < 10:
            assert time.monotonic() < deadline
            for r in c.poll(50):
                first.setdefault(r.partition, r.offset)
        assert first == {0: 4, 1: 0, 2: 1}  # t-1 has no commit: auto.offset.reset (earliest)
        c.commit()
    sent = {p.partition: (p.committed_offset, p.committed_leader_epoch) for p in cluster.group.committed.values()}
    assert sent[1] == (10, 3)  # the epoch of the batch of the last consumed record
    lookups = len(cluster.group.rpcs("OffsetFetch"))
    with Consumer(config(cluster, enable_auto_commit=False)) as c:  # assign, then seek: nothing to look up
        c.assign([TopicPartition("t", 0)])
        time.sleep(0.2)  # the fetch loop runs meanwhile: it must not look the offset up before a poll asks
        c.seek(TopicPartition("t", 0), 2)
        poll_all([c], lambda: c.position(TopicPartition("t", 0)) == 10)
    assert len(cluster.group.rpcs("OffsetFetch")) == lookups


@pytest.mark.parametrize("isolation", ["read_committed", "read_uncommitted"])
def test_a_read_committed_consumer_waits_for_stable_offsets(cluster: GroupCluster, isolation: str) -> None:
    """KIP-447: a read_committed consumer's OffsetFetch asks for stable offsets, and retries while a committed
    transaction's offsets are not yet written to the group, rather than starting from the offset before them (from
    which it would copy that transaction's input again); a read_uncommitted one does not ask."""
    cluster.append("t", 0, encode_batch([b"v%d" % i for i in range(10)], None, 1))
    cluster.group.committed[("t", 0)] = gpb.OffsetCommitPartition(partition=0, committed_offset=4)
    cluster.group.pending[("t", 0)] = (3, 7)  # a transaction that moved the group to 7 awaits its markers
    with Consumer(config(cluster, enable_auto_commit=False, isolation_level=isolation)) as c:
        c.assign([TopicPartition("t", 0)])
        first: list[int] = []
        deadline = time.monotonic() + 10
        while not first:
            assert time.monotonic() < deadline, "no record"
            first = [r.offset for r in c.poll(50)]
    fetches = cluster.group.rpcs("OffsetFetch")
    if isolation == "read_committed":
        assert first[0] == 7 and all(f.require_stable for f in fetches) and len(fetches) == 4
    else:
        assert first[0] == 4 and not any(f.require_stable for f in fetches)


def test_max_poll_interval_leaves_the_group_commit_fails_and_poll_rejoins(cluster: GroupCluster) -> None:
    with Consumer(config(cluster, max_poll_interval_ms=300)) as c:
        c.subscribe(["t"])
        poll_all([c], lambda: c.assignment() == ALL)
        cluster.group.wait_for(lambda: bool(cluster.group.rpcs("LeaveGroup")))
        with pytest.raises(CommitFailedError):
            c.commit()
        assert c.group_metadata().generation_id == -1
        poll_all([c], lambda: c.group_metadata().generation_id == 2 and c.assignment() == ALL)
        c.commit()


def test_close_commits_and_leaves_but_a_static_member_does_not_leave(cluster: GroupCluster) -> None:
    cluster.append("t", 0, encode_batch([b"x"] * 5, None, 1))
    c = Consumer(config(cluster))
    c.subscribe(["t"])
    poll_all([c], lambda: c.assignment() == ALL and c.position(TopicPartition("t", 0)) == 5)
    c.close()
    assert cluster.group.committed[("t", 0)].committed_offset == 5
    assert [m.member_id for m in cluster.group.rpcs("LeaveGroup")[-1].members] == ["m1"]
    leaves = len(cluster.group.rpcs("LeaveGroup"))
    s = Consumer(config(cluster, group_instance_id="host-1"))
    s.subscribe(["t"])
    poll_all([s], lambda: s.assignment() == ALL)
    s.close()
    assert len(cluster.group.rpcs("LeaveGroup")) == leaves
    assert cluster.group.rpcs("JoinGroup")[-1].group_instance_id == "host-1"


def test_close_leave_group_overrides_the_default_either_way(cluster: GroupCluster) -> None:
    """close(leave_group=True) removes a static member at once, named by its instance id; close(leave_group=False)
    keeps a dynamic member in the group (its session must expire, as after a crash). The listener hears the
    revocation either way."""
    log: list = []
    static = Consumer(config(cluster, group_instance_id="host-2"))
    static.subscribe(["t"], Timeline("s", log))
    poll_all([static], lambda: static.assignment() == ALL)
    member_id = static.group_metadata().member_id
    static.close(leave_group=True)
    [leave] = cluster.group.rpcs("LeaveGroup")
    assert [(m.member_id, m.group_instance_id) for m in leave.members] == [(member_id, "host-2")]
    assert log[-1] == ("s", "revoked", frozenset(ALL))
    dynamic = Consumer(config(cluster, enable_auto_commit=False))
    dynamic.subscribe(["t"], Timeline("d", log))
    poll_all([dynamic], lambda: dynamic.assignment() == ALL)
    dynamic.close(leave_group=False)
    assert len(cluster.group.rpcs("LeaveGroup")) == 1  # no LeaveGroup from the dynamic member
    assert log[-1] == ("d", "revoked", frozenset(ALL))


def test_a_reset_generation_reports_the_partitions_lost_and_rejoins(cluster: GroupCluster) -> None:
    log: list = []
    with Consumer(config(cluster, partition_assignment_strategy="cooperative-sticky")) as c:
        c.subscribe(["t"], Timeline("a", log))
        poll_all([c], lambda: c.assignment() == ALL)
        cluster.group.heartbeat_errors.append(ErrorCode.UNKNOWN_MEMBER_ID)
        poll_all([c], lambda: ("a", "lost", frozenset(ALL)) in log and c.assignment() == ALL)
    assert [cb for _, cb, _ in log][:3] == ["assigned", "lost", "assigned"]


def test_a_fenced_instance_is_raised_from_poll(cluster: GroupCluster) -> None:
    with Consumer(config(cluster, group_instance_id="host-1")) as c:
        c.subscribe(["t"])
        poll_all([c], lambda: c.assignment() == ALL)
        cluster.group.heartbeat_errors.append(ErrorCode.FENCED_INSTANCE_ID)
        with pytest.raises(FencedInstanceIdError):
            poll_all([c], lambda: False)


async def test_async_consumer_joins_and_commits(cluster: GroupCluster) -> None:
    async with AsyncConsumer(config(cluster, enable_auto_commit=False)) as c:
        c.subscribe(["t"])
        deadline = time.monotonic() + 10
        while c.assignment() != ALL:
            assert time.monotonic() < deadline
            await c.poll(50)
        task = await c.commit({TopicPartition("t", 1): 3}, asynchronous=True)
        await task
        assert (await c.committed([("t", 1)]))[TopicPartition("t", 1)] == OffsetAndMetadata(3)


def test_group_configs_reach_the_wire(cluster: GroupCluster) -> None:
    """session.timeout.ms and max.poll.interval.ms (the rebalance timeout) travel in JoinGroup, the strategy list
    becomes the protocols in order, heartbeats follow heartbeat.interval.ms, and auto-commit commits from poll
    every auto.commit.interval.ms only when enabled."""
    overrides = {
        "session_timeout_ms": 2500,
        "max_poll_interval_ms": 4000,
        "partition_assignment_strategy": "roundrobin,range",
        "heartbeat_interval_ms": 30,
        "auto_commit_interval_ms": 0,
    }
    cluster.append("t", 0, encode_batch([b"x"] * 3, None, 1))
    with Consumer(config(cluster, **overrides)) as c:
        c.subscribe(["t"])
        poll_all([c], lambda: c.assignment() == ALL)
        join = cluster.group.rpcs("JoinGroup")[-1]
        assert (join.session_timeout_ms, join.rebalance_timeout_ms) == (2500, 4000)
        assert [p.name for p in join.protocols] == ["roundrobin", "range"]
        started = time.monotonic()
        heartbeats = len(cluster.group.rpcs("Heartbeat"))
        cluster.group.wait_for(lambda: len(cluster.group.rpcs("Heartbeat")) >= heartbeats + 3)
        assert time.monotonic() - started < 2  # at 30 ms, not at the 3 s default
        poll_all(
            [c], lambda: ("t", 0) in cluster.group.committed and cluster.group.committed[("t", 0)].committed_offset == 3
        )
    with Consumer(config(cluster, enable_auto_commit=False, auto_commit_interval_ms=0, group_id="other")) as c:
        c.subscribe(["t"])
        commits = len(cluster.group.rpcs("OffsetCommit"))
        poll_all([c], lambda: c.assignment() == ALL)
        for _ in range(5):
            c.poll(20)
    assert len(cluster.group.rpcs("OffsetCommit")) == commits

"""Consumer groups on a real cluster: the acceptance scenarios of the client side (partition sharing, a killed
member's partitions moving with nothing lost, one generation for consumers started together, static members
across rolling restarts, cooperative-sticky never owning a partition twice, max.poll.interval.ms)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest

from odradek.client import Admin, Consumer, Producer, TopicPartition
from odradek.client.consumer.consumer import ConsumerRebalanceListener
from odradek.client.errors import CommitFailedError

from .conftest import FAST, wait_for

GROUP_NODE = {**FAST, "offsets.topic.num.partitions": 3, "group.initial.rebalance.delay.ms": 300}
SIX = {"g6": {"partitions": 6, "replication_factor": 3}}
ALL6 = {TopicPartition("g6", p) for p in range(6)}
pytestmark = pytest.mark.odradek_cluster(controllers=1, brokers=3, config=GROUP_NODE, topics=SIX, shared=False)


def group_config(cluster, group: str, **extra: object) -> dict:
    return {
        "bootstrap.servers": cluster.bootstrap_servers,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 500,
        "fetch.max.wait.ms": 100,
        **{k.replace("_", "."): v for k, v in extra.items()},
    }


class Timeline(ConsumerRebalanceListener):
    """Callbacks of every member, in the order they happened (a lock keeps threads from interleaving entries)."""

    lock = threading.Lock()

    def __init__(self, name: str, log: list) -> None:
        self.name, self.log = name, log

    def _add(self, kind: str, partitions: set[TopicPartition]) -> None:
        with self.lock:
            self.log.append((time.monotonic(), self.name, kind, frozenset(partitions)))

    def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        self._add("revoked", revoked)

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        self._add("assigned", assigned)

    def on_partitions_lost(self, lost: set[TopicPartition]) -> None:
        self._add("lost", lost)


def check_never_owned_twice(log: list) -> None:
    owned: dict[str, set[TopicPartition]] = {}
    for _, name, kind, partitions in sorted(log):
        mine = owned.setdefault(name, set())
        if kind == "assigned":
            others = set().union(*(o for n, o in owned.items() if n != name))
            assert not partitions & others, f"{name} got {sorted(partitions & others)} while another owned them"
            mine |= partitions
        else:
            mine -= partitions


class Member(threading.Thread):
    """A consumer polling on its own thread until stopped; records what it consumed and its assignment."""

    def __init__(self, config: dict, name: str, log: list, topics: list[str] | re.Pattern[str] | None = None) -> None:
        super().__init__(daemon=True, name=name)
        self.config, self.log, self.topics = config, log, topics or ["g6"]
        self.consumed: list[tuple[int, int]] = []
        self.assignment: set[TopicPartition] = set()
        self.generation = -1
        self.stop_event = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            with Consumer(self.config) as c:
                c.subscribe(self.topics, Timeline(self.name, self.log))
                while not self.stop_event.is_set():
                    self.consumed += [(r.partition, r.offset) for r in c.poll(100)]
                    self.assignment = c.assignment()
                    self.generation = c.group_metadata().generation_id
        except BaseException as e:
            self.error = e

    def stop(self) -> None:
        self.stop_event.set()
        self.join(30)
        assert self.error is None, self.error

    def holds(self, partitions: set[TopicPartition]) -> bool:
        """Whether its assignment is ``partitions``; raises its error if its thread failed (a wait then reports
        the error rather than a bare timeout)."""
        if self.error is not None:
            raise self.error
        return self.assignment == partitions


@pytest.fixture
def members() -> Iterator[list[Member]]:
    started: list[Member] = []
    yield started
    for m in started:
        m.stop_event.set()
    for m in started:
        m.join(30)


def start(members: list[Member], *new: Member) -> None:
    for m in new:
        m.start()
        members.append(m)


def produce(cluster, count: int, prefix: str = "r") -> None:
    with Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "linger.ms": 5}) as p:
        futures = [p.send("g6", f"{prefix}{i}".encode(), key=str(i).encode()) for i in range(count)]
        p.flush(30)
        assert all(f.exception(5) is None for f in futures)


def test_three_members_share_six_partitions_and_a_killed_ones_move(odradek_cluster, members) -> None:
    cluster = odradek_cluster
    produce(cluster, 600)
    log: list = []
    start(members, *(Member(group_config(cluster, "share"), f"c{i}", log) for i in range(2)))
    script = (
        "import sys, json\n"
        "from odradek.client import Consumer\n"
        "c = Consumer(json.loads(sys.argv[1]))\n"
        "c.subscribe(['g6'])\n"
        "while True:\n"
        "    for r in c.poll(100):\n"
        "        print(json.dumps([r.partition, r.offset]), flush=True)\n"
        "    c.commit()\n"
    )
    victim = subprocess.Popen(
        [sys.executable, "-c", script, json.dumps(group_config(cluster, "share", enable_auto_commit=False))],
        stdout=subprocess.PIPE,
        env=os.environ.copy(),
    )
    try:
        wait_for(lambda: all(len(m.assignment) == 2 for m in members), 60, what="two partitions per member")
        assert members[0].assignment | members[1].assignment != ALL6  # the third member holds two more
        killed_at = time.monotonic()
        victim.send_signal(signal.SIGKILL)
        victim.wait(10)
        wait_for(lambda: members[0].assignment | members[1].assignment == ALL6, 60, what="the partitions move")
        moved_after = time.monotonic() - killed_at
        assert moved_after < 6 + 10  # session timeout plus a rebalance
        produce(cluster, 600, "s")
        ends = end_offsets(cluster)
        acknowledged = {(p, o) for p, end in ends.items() for o in range(end)}
        victim_out = victim.stdout.read().decode().splitlines() if victim.stdout else []
        by_victim = {tuple(json.loads(line)) for line in victim_out}
        wait_for(
            lambda: {(p, o) for m in members for p, o in m.consumed} | by_victim >= acknowledged,
            60,
            what="every acknowledged record consumed",
        )
    finally:
        if victim.poll() is None:
            victim.kill()


def end_offsets(cluster) -> dict[int, int]:
    with Consumer({"bootstrap.servers": cluster.bootstrap_servers}) as c:
        return {tp.partition: o for tp, o in c.end_offsets([TopicPartition("g6", p) for p in range(6)]).items()}


# A delay long enough for four member threads to start on a loaded machine: it is the premise, not the subject.
@pytest.mark.odradek_cluster(
    controllers=1,
    brokers=3,
    config={**GROUP_NODE, "group.initial.rebalance.delay.ms": 3000},
    topics=SIX,
    shared=False,
)
def test_members_started_within_the_initial_delay_form_one_generation(odradek_cluster, members) -> None:
    log: list = []
    start(members, *(Member(group_config(odradek_cluster, "together"), f"c{i}", log) for i in range(4)))
    wait_for(lambda: all(m.assignment for m in members), 60, what="every member assigned")
    assert sum(len(m.assignment) for m in members) == 6
    assert {m.generation for m in members} == {1}


@pytest.mark.parametrize("static", [True, False])
def test_rolling_restarts_of_static_members_do_not_rebalance(odradek_cluster, members, static: bool) -> None:
    log: list = []
    group = f"rolling-{static}"

    def member(i: int, incarnation: int = 0) -> Member:
        extra = {"group_instance_id": f"host-{i}"} if static else {}
        return Member(group_config(odradek_cluster, group, **extra), f"c{i}.{incarnation}", log)

    start(members, *(member(i) for i in range(3)))
    wait_for(lambda: all(len(m.assignment) == 2 for m in members), 60, what="a stable group")
    generation = members[0].generation
    stopped: dict[str, float] = {}  # a stopping process revokes its own partitions on close: not a rebalance
    for restart in range(5):
        i = restart % 3
        stopped[members[i].name] = time.monotonic()
        members[i].stop()
        replacement = member(i, restart + 1)
        members[i] = replacement
        replacement.start()
        wait_for(lambda r=replacement: len(r.assignment) == 2, 60, what="the restarted member's partitions")
    others_revoked = [
        e for e in log if e[2] in ("revoked", "lost") and e[3] and not (e[1] in stopped and e[0] >= stopped[e[1]])
    ]
    if static:
        assert {m.generation for m in members} == {generation}
        assert others_revoked == []
    else:
        assert max(m.generation for m in members) > generation
        assert others_revoked


def test_cooperative_sticky_never_owns_a_partition_twice(odradek_cluster, members) -> None:
    log: list = []
    cfg = group_config(odradek_cluster, "coop", partition_assignment_strategy="cooperative-sticky")
    start(members, Member(cfg, "c0", log))
    wait_for(lambda: len(members[0].assignment) == 6, 60, what="one member owns all")
    start(members, Member(cfg, "c1", log), Member(cfg, "c2", log))
    wait_for(lambda: all(len(m.assignment) == 2 for m in members), 60, what="three members own two each")
    members.pop(1).stop()
    wait_for(lambda: all(len(m.assignment) == 3 for m in members), 60, what="two members own three each")
    check_never_owned_twice(log)
    revoked_by_first = set().union(*(p for _, n, kind, p in log if n == "c0" and kind == "revoked"))
    assert len(revoked_by_first) == 4  # only the partitions that moved away from c0


def test_a_member_that_does_not_poll_in_time_leaves_and_its_commit_fails(odradek_cluster, members) -> None:
    log: list = []
    start(members, Member(group_config(odradek_cluster, "slow"), "other", log))
    with Consumer(group_config(odradek_cluster, "slow", max_poll_interval_ms=2000)) as slow:
        slow.subscribe(["g6"], Timeline("slow", log))
        wait_for(lambda: slow.poll(100) is not None and len(slow.assignment()) == 3, 60, what="slow owns three")
        wait_for(lambda: len(members[0].assignment) == 6, 30, what="the other member takes every partition")
        with pytest.raises(CommitFailedError):
            slow.commit()
        wait_for(lambda: slow.poll(100) is not None and len(slow.assignment()) == 3, 60, what="slow rejoined")
    assert any(name == "slow" and kind == "lost" for _, name, kind, _ in log)


def test_commits_carry_the_leader_epoch_of_the_last_consumed_record(odradek_cluster) -> None:
    """A commit of the position carries the epoch of the leader that appended the record before it, also after
    leadership moved; a consumer that assigns itself the partition with the group's id starts at the committed
    offset (auto.offset.reset is earliest, so starting anywhere else would show)."""
    cluster = odradek_cluster
    tp = TopicPartition("g6", 0)

    def leader_and_epoch(admin: Admin) -> tuple[int, int, list[int]]:
        p = admin.describe_topic("g6").partitions[0]
        return p.leader, p.leader_epoch, p.replicas

    def consume_and_commit(expected: int) -> list:
        config = group_config(cluster, "epochs", enable_auto_commit=False)
        with Consumer(config) as c:
            c.assign([tp])
            records: list = []
            deadline = time.monotonic() + 30
            while len(records) < expected and time.monotonic() < deadline:
                records += c.poll(100)
            c.commit()
            return records

    def send(count: int) -> None:
        with Producer({"bootstrap.servers": cluster.bootstrap_servers}) as p:
            futures = [p.send("g6", b"e", partition=0) for _ in range(count)]
            p.flush(30)
            assert all(f.exception(5) is None for f in futures)

    with Admin({"bootstrap.servers": cluster.admin_servers}) as admin:
        _, epoch, replicas = leader_and_epoch(admin)
        send(10)
        assert len(consume_and_commit(10)) == 10
        committed = admin.list_group_offsets("epochs", [tp])
        assert [(o.offset, o.leader_epoch) for o in committed] == [(10, epoch)]

        rotated = replicas[1:] + replicas[:1]  # the next replica becomes the preferred leader
        assert admin.alter_partition_reassignments({("g6", 0): rotated})[0].error is None
        wait_for(lambda: admin.describe_topic("g6").partitions[0].replicas == rotated, 30, what="reassigned")
        admin.elect_leaders("preferred", [("g6", 0)])
        wait_for(lambda: leader_and_epoch(admin)[0] == rotated[0], 30, what="leadership moved")
        new_epoch = leader_and_epoch(admin)[1]
        assert new_epoch > epoch
        send(5)
        second = consume_and_commit(5)  # resumes at the committed offset 10
        assert [r.offset for r in second] == list(range(10, 15))
        committed = admin.list_group_offsets("epochs", [tp])
        assert [(o.offset, o.leader_epoch) for o in committed] == [(15, new_epoch)]


def test_a_pattern_subscription_drops_a_deleted_topic(odradek_cluster, members) -> None:
    cluster = odradek_cluster
    with Admin({"bootstrap.servers": cluster.admin_servers}) as admin:
        for name in ("pat-a", "pat-b"):
            admin.create_topic(name, 2, 2)
        log: list = []
        config = group_config(cluster, "patterns", metadata_max_age_ms=500)
        member = Member(config, "p", log, re.compile(r"pat-.*"))
        start(members, member)
        both = {TopicPartition(t, p) for t in ("pat-a", "pat-b") for p in range(2)}
        wait_for(lambda: member.holds(both), 60, what="both topics assigned")
        admin.delete_topic("pat-b")
        wait_for(lambda: member.holds({TopicPartition("pat-a", p) for p in range(2)}), 60, what="pat-b dropped")
        assert member.error is None
        revoked = set().union(*(ps for _, name, kind, ps in log if kind in ("revoked", "lost")))
        assert {tp for tp in revoked if tp.topic == "pat-b"} == {TopicPartition("pat-b", p) for p in range(2)}

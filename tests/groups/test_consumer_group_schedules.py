"""Seeded random schedules of a KIP-848 consumer group: members join (by topic names or a regular expression),
heartbeat (some answers are lost), leave, crash, restart as static members and see topics grow, on a simulated
clock. Some members use the classic protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup), eagerly (revoking
everything before each join) or cooperatively (reporting what they own in their join); the group never downgrades
(``group.consumer.migration.policy=upgrade``). After every step:

- no partition is owned by two consumers of the group at once (each owns what its last answer gave it, and drops
  everything when fenced; one the coordinator removed for a missed session or rebalance timeout no longer counts:
  its next heartbeat fences it), the protocol's safety property;
- the group's record of who holds what agrees with its members' assignments, and a coordinator that replays the
  records written so far reaches the same state;
- a member's epoch never goes back while it stays in the group.

Each schedule then lets every member heartbeat faithfully until the group is Stable with the target assignment
and every subscribed partition owned. ``CONSUMER_GROUP_SCHEDULES=n`` runs n more; ``CONSUMER_GROUP_SEED=n`` one.
"""

from __future__ import annotations

import os
import random
import re
from dataclasses import dataclass, field

import pytest

from odradek.broker.groups.consumer_group import ConsumerGroup, ConsumerGroupConfig, ConsumerGroupState
from odradek.broker.groups.consumer_messages import ConsumerGroupResult, ConsumerHeartbeatRequest, TopicInfo
from odradek.broker.groups.consumer_records import ConsumerRecordKey, ConsumerRecordValue, Partitions
from odradek.broker.groups.messages import (
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    LeavingMember,
    SyncGroupRequest,
)
from odradek.client.consumer.protocol import Assignment, Subscription
from odradek.client.errors import ErrorCode
from odradek.client.structs import TopicPartition

SCHEDULES = 150 + int(os.environ.get("CONSUMER_GROUP_SCHEDULES", "0"))
STEPS = 120
SESSION_MS = 45_000
CONFIG = ConsumerGroupConfig(migration_policy="upgrade")


@dataclass
class Client:
    member_id: str
    instance_id: str | None
    topics: tuple[str, ...]
    regex: str | None = None
    epoch: int = 0
    owned: Partitions = frozenset()
    joined: bool = False
    classic: str | None = None  # "eager" or "cooperative": a member of the classic protocol


@dataclass
class World:
    rng: random.Random
    group: ConsumerGroup = field(default_factory=lambda: ConsumerGroup("g", CONFIG))
    topics: dict[str, TopicInfo] = field(default_factory=dict)
    clients: dict[str, Client] = field(default_factory=dict)
    stored: dict[ConsumerRecordKey, ConsumerRecordValue] = field(default_factory=dict)
    now: int = 0
    ids: int = 0
    epochs: dict[str, int] = field(default_factory=dict)

    def apply(self, result: ConsumerGroupResult) -> None:
        for key, value in result.records:
            self.stored.pop(key, None)
            if value is not None:
                self.stored[key] = value

    def heartbeat(self, client: Client, lose_answer: bool = False, full: bool = False) -> None:
        if client.classic is not None:
            self.classic_heartbeat(client)
            return
        joining = not client.joined
        request = ConsumerHeartbeatRequest(
            member_id=client.member_id,
            member_epoch=0 if joining else client.epoch,
            instance_id=client.instance_id,
            rebalance_timeout_ms=60_000 if joining or full else -1,
            subscribed_topic_names=client.topics if joining or full else None,
            subscribed_topic_regex=client.regex if joining or full else None,
            owned=frozenset() if joining else client.owned,
            member_id_required=True,
        )
        result = self.group.heartbeat(request, self.now, self.topics)
        self.apply(result)
        r = result.response
        assert r is not None
        if lose_answer and r.error == ErrorCode.NONE and not joining:
            return
        if r.error in (ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID):
            client.joined, client.epoch, client.owned = False, 0, frozenset()  # drop everything, rejoin
        elif r.error == ErrorCode.NONE:
            client.joined, client.epoch = True, r.member_epoch
            if r.assignment is not None:
                client.owned = r.assignment

    def classic_heartbeat(self, client: Client) -> None:
        """A classic consumer's round: a Heartbeat, and when told to rejoin (or not in the group), a JoinGroup and a
        SyncGroup, as librdkafka's and Java's do."""
        if client.joined:
            beat = self.group.classic_heartbeat(HeartbeatRequest(client.member_id, None, client.epoch), self.now)
            self.apply(beat)
            assert beat.response is not None
            error = beat.response.error
            if error == ErrorCode.NONE:
                return
            if error != ErrorCode.REBALANCE_IN_PROGRESS:
                client.joined, client.epoch, client.owned = False, 0, frozenset()
        self.classic_join(client)

    def classic_join(self, client: Client) -> None:
        if client.classic == "eager":
            client.owned = frozenset()  # an eager consumer revokes everything before it joins
        names = {info.topic_id: name for name, info in self.topics.items()}
        owned = tuple(TopicPartition(names[t], p) for t, p in sorted(client.owned))
        metadata = Subscription(client.topics, owned_partitions=owned).encode()
        request = JoinGroupRequest(
            0, client.member_id, None, "c", "h", SESSION_MS, 60_000, "consumer", (("range", metadata),)
        )
        joined = self.group.classic_join(request, self.now, self.topics)
        self.apply(joined)
        assert joined.response is not None and joined.downgrade is None
        if joined.response.error != ErrorCode.NONE:
            client.joined, client.epoch, client.owned = False, 0, frozenset()
            return
        generation = joined.response.generation_id  # type: ignore[union-attr]
        synced = self.group.classic_sync(
            SyncGroupRequest(0, client.member_id, None, generation, "consumer", "range"), self.now, self.topics
        )
        assert synced.response is not None
        error = synced.response.error
        if error == ErrorCode.NONE:
            partitions = Assignment.decode(synced.response.assignment).partitions  # type: ignore[union-attr]
            client.joined, client.epoch = True, generation
            client.owned = frozenset((self.topics[tp.topic].topic_id, tp.partition) for tp in partitions)
        elif error == ErrorCode.REBALANCE_IN_PROGRESS:
            client.joined, client.epoch = True, generation  # its next heartbeat makes it join again
        else:
            client.joined, client.epoch, client.owned = False, 0, frozenset()

    def tick(self, ms: int) -> None:
        self.now += ms
        self.apply(self.group.tick(self.now))

    def new_client(self, static: bool) -> Client:
        self.ids += 1
        if self.rng.random() < 0.2:  # a regular expression subscription, maybe with names too
            regex = self.rng.choice(["[ab]", "c", ".*"])
            return Client(f"m{self.ids}", None, tuple(self.rng.sample(["a"], self.rng.randint(0, 1))), regex)
        topics = tuple(sorted(self.rng.sample(sorted(self.topics), self.rng.randint(1, len(self.topics)))))
        if self.rng.random() < 0.25:
            return Client(f"m{self.ids}", None, topics, classic=self.rng.choice(["eager", "cooperative"]))
        # Instance ids are unique among running processes (a restart reuses the one its predecessor had).
        free = sorted({"i1", "i2", "i3"} - {c.instance_id for c in self.clients.values()})
        instance = self.rng.choice(free) if static and free else None
        return Client(f"m{self.ids}", instance, topics)

    def check(self) -> None:
        owners: dict[tuple[bytes, int], str] = {}
        for client in self.clients.values():
            if client.member_id not in self.group.members:
                continue  # removed (its session or rebalance timeout passed): its next heartbeat fences it
            for tp in client.owned:
                assert tp not in owners, f"{tp} owned by {owners[tp]} and {client.member_id}"
                owners[tp] = client.member_id
        g = self.group
        held = {tp: m.member_id for m in g.members.values() for tp in m.current.assigned | m.current.pending_revocation}
        assert held == g.owners
        replayed = ConsumerGroup.restore("g", self.stored, self.now, CONFIG)
        assert (replayed.group_epoch, replayed.assignment_epoch, replayed.targets, replayed.owners) == (
            g.group_epoch,
            g.assignment_epoch,
            g.targets,
            g.owners,
        )
        assert {m: x.current for m, x in replayed.members.items()} == {m: x.current for m, x in g.members.items()}
        for member_id, m in g.members.items():
            epoch = m.current.member_epoch
            if epoch >= 0:
                assert epoch >= self.epochs.get(member_id, 0), f"{member_id}'s epoch went back"
                self.epochs[member_id] = epoch
        for gone in set(self.epochs) - set(g.members):
            del self.epochs[gone]


def step(w: World) -> None:
    rng = w.rng
    roll = rng.random()
    clients = list(w.clients.values())
    if roll < 0.12 or not clients:
        client = w.new_client(static=rng.random() < 0.3)
        w.clients[client.member_id] = client
        w.heartbeat(client)
    elif roll < 0.7:
        w.heartbeat(rng.choice(clients), lose_answer=rng.random() < 0.1, full=rng.random() < 0.1)
    elif roll < 0.76:
        client = rng.choice(clients)
        static_leave = client.instance_id is not None and rng.random() < 0.5
        if client.joined and client.classic is not None:
            leaving = LeaveGroupRequest((LeavingMember(client.member_id),))
            w.apply(w.group.classic_leave(leaving, w.topics))
        elif client.joined:
            result = w.group.heartbeat(
                ConsumerHeartbeatRequest(client.member_id, -2 if static_leave else -1, client.instance_id),
                w.now,
                w.topics,
            )
            w.apply(result)
        del w.clients[client.member_id]
    elif roll < 0.8:
        del w.clients[rng.choice(clients).member_id]  # a crash: it stops, its session will expire
    elif roll < 0.83:
        name = rng.choice(sorted(w.topics))
        info = w.topics[name]
        w.topics[name] = TopicInfo(info.topic_id, name, info.num_partitions + 1)
    else:
        w.tick(rng.choice([100, 1000, 5000, 20_000, SESSION_MS]))


def settle(w: World) -> None:
    """Every live member heartbeats faithfully (and the dead ones' sessions expire) until nothing moves."""
    w.tick(SESSION_MS + 1)  # a crashed member's partitions are released
    for _ in range(50):
        for client in list(w.clients.values()):
            w.heartbeat(client)
            w.check()
        g = w.group
        if g.state in (ConsumerGroupState.STABLE, ConsumerGroupState.EMPTY) and all(
            c.joined and c.owned == g.targets.get(c.member_id, frozenset()) for c in w.clients.values()
        ):
            break
        w.tick(1000)
    else:
        detail = {c.member_id: (c.joined, c.epoch, sorted(c.owned)) for c in w.clients.values()}
        raise AssertionError(f"the group never settled: {w.group.state} {detail} {w.group.targets}")
    wanted = {
        (w.topics[n].topic_id, p)
        for c in w.clients.values()
        for n in w.topics
        if n in c.topics or (c.regex is not None and re.fullmatch(c.regex, n))
        for p in range(w.topics[n].num_partitions)
    }
    assert set().union(*(c.owned for c in w.clients.values())) == wanted


def run(seed: int) -> None:
    rng = random.Random(seed)
    w = World(rng)
    for i, name in enumerate(["a", "b", "c"]):
        w.topics[name] = TopicInfo(bytes([i + 1]) * 16, name, rng.randint(1, 6))
    for _ in range(STEPS):
        step(w)
        w.check()
    settle(w)


SEEDS = [int(os.environ["CONSUMER_GROUP_SEED"])] if "CONSUMER_GROUP_SEED" in os.environ else range(SCHEDULES)


@pytest.mark.parametrize("seed", SEEDS)
def test_schedule(seed: int) -> None:
    run(seed)

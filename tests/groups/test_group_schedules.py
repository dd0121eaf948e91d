"""Randomized schedules against one classic group: joins, syncs, heartbeats (some late), leaves, crashes, static
restarts and failed appends, with the group's invariants checked after every step.

    pytest tests/groups/test_group_schedules.py                 # the CI sample (SAMPLE seeds from GROUP_SEED_BASE)
    GROUP_SCHEDULES=20000 pytest tests/groups/test_group_schedules.py
    GROUP_SEED=123 pytest tests/groups/test_group_schedules.py -s   # replay one seed, printing its trace
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass, field

import pytest

from odradek.broker.groups.group import ClassicGroup, GroupConfig, GroupState
from odradek.broker.groups.messages import (
    GroupResult,
    HeartbeatRequest,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeavingMember,
    PersistGroup,
    Respond,
    SyncGroupRequest,
    SyncGroupResponse,
)
from odradek.client.errors import ErrorCode

SAMPLE = 300
BASE = int(os.environ.get("GROUP_SEED_BASE", "0"))
SCHEDULES = int(os.environ.get("GROUP_SCHEDULES", "0"))
REPLAY = os.environ.get("GROUP_SEED")
STEPS = 120
CONFIG = GroupConfig(initial_rebalance_delay_ms=300, min_session_timeout_ms=1000, max_size=5)
PROTOCOLS = ((("range", b"t"),), (("range", b"t"), ("roundrobin", b"t")), (("roundrobin", b"u"),))


@dataclass
class Client:
    name: str
    instance: str | None
    member_id: str = ""
    generation: int = -1
    leader: bool = False
    members: tuple[str, ...] = ()
    join_token: int | None = None
    sync_token: int | None = None
    alive: bool = True
    protocols: tuple[tuple[str, bytes], ...] = PROTOCOLS[0]


@dataclass
class Schedule:
    seed: int
    rng: random.Random = field(init=False)
    group: ClassicGroup = field(init=False)
    now: int = 0
    clients: list[Client] = field(default_factory=list)
    tokens: dict[int, tuple[str, Client, str, int]] = field(default_factory=dict)  # token -> (kind, client, id, gen)
    answered: set[int] = field(default_factory=set)
    persists: list[PersistGroup] = field(default_factory=list)
    stored_generations: set[int] = field(default_factory=set)  # generations whose assignment append succeeded
    leader_assignments: dict[int, dict[str, bytes]] = field(default_factory=dict)
    told: dict[tuple[int, str], bytes] = field(default_factory=dict)  # (generation, member) -> assignment given
    join_views: dict[int, tuple[str, str | None]] = field(default_factory=dict)  # generation -> (leader, protocol)
    instance_of: dict[str, str] = field(default_factory=dict)
    last_generation: int = 0
    trace: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.group = ClassicGroup("g", CONFIG)
        for i in range(self.rng.randint(2, 6)):
            static = self.rng.random() < 0.4
            self.clients.append(Client(f"c{i}", f"i{i}" if static else None, protocols=self.rng.choice(PROTOCOLS[:2])))

    # -- plumbing ----------------------------------------------------------------------------------------------

    def token(self, kind: str, client: Client, member_id: str, generation: int) -> int:
        token = len(self.tokens) + 1
        self.tokens[token] = (kind, client, member_id, generation)
        return token

    def take(self, result: GroupResult) -> None:
        self.trace.extend(f"  {e}" for e in result.events)
        for action in result.actions:
            if isinstance(action, PersistGroup):
                self.persists.append(action)
                continue
            assert isinstance(action, Respond) and isinstance(action.token, int)
            assert action.token not in self.answered, f"token {action.token} answered twice"
            self.answered.add(action.token)
            kind, client, member_id, generation = self.tokens[action.token]
            if isinstance(action.response, JoinGroupResponse):
                assert kind == "join"
                self.on_join(client, action.token, action.response)
            else:
                assert kind == "sync" and isinstance(action.response, SyncGroupResponse)
                self.on_sync(client, action.token, member_id, generation, action.response)

    def on_join(self, client: Client, token: int, r: JoinGroupResponse) -> None:
        self.trace.append(
            f"  join answer to {client.name}: {ErrorCode.Name(r.error)} {r.member_id} gen {r.generation_id}"
        )
        if r.error == ErrorCode.NONE:
            assert r.generation_id <= self.group.generation_id
            view = self.join_views.setdefault(r.generation_id, (r.leader, r.protocol_name))
            assert view[1] == r.protocol_name, "two protocols in one generation"
            if r.member_id and client.instance is not None:
                self.instance_of[r.member_id] = client.instance
        if client.join_token != token:
            return  # a superseded call, or one of a process that crashed
        client.join_token = None
        if r.error == ErrorCode.NONE:
            client.member_id, client.generation = r.member_id, r.generation_id
            client.leader = r.leader == r.member_id and not r.skip_assignment
            client.members = tuple(m.member_id for m in r.members)
        elif r.error == ErrorCode.MEMBER_ID_REQUIRED:
            client.member_id = r.member_id
        elif r.error == ErrorCode.FENCED_INSTANCE_ID:
            client.alive = False
        elif r.error in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.GROUP_MAX_SIZE_REACHED):
            client.member_id, client.generation = "", -1

    def on_sync(self, client: Client, token: int, member_id: str, generation: int, r: SyncGroupResponse) -> None:
        self.trace.append(f"  sync answer to {client.name}: {ErrorCode.Name(r.error)} {r.assignment!r}")
        if r.error == ErrorCode.NONE:
            assert generation in self.stored_generations, f"generation {generation} released before it was stored"
            leader_gave = self.leader_assignments[generation]
            if r.assignment:
                origin = r.assignment.decode().split(":", 1)[1]
                assert leader_gave.get(origin) == r.assignment, "an assignment the leader never gave"
                assert origin == member_id or (
                    self.instance_of.get(origin) is not None
                    and self.instance_of.get(origin) == self.instance_of.get(member_id)
                ), f"{member_id} was told {origin}'s assignment"
            first = self.told.setdefault((generation, member_id), r.assignment)
            assert first == r.assignment, "one member told two assignments in one generation"
        if client.sync_token == token:
            client.sync_token = None
            if r.error in (ErrorCode.UNKNOWN_MEMBER_ID,):
                client.member_id, client.generation = "", -1
            elif r.error == ErrorCode.FENCED_INSTANCE_ID:
                client.alive = False
            elif r.error != ErrorCode.NONE:
                client.generation = -1  # rejoin

    # -- client actions ----------------------------------------------------------------------------------------

    def join(self, c: Client) -> None:
        if self.rng.random() < 0.05:
            c.protocols = self.rng.choice(PROTOCOLS)
        token = self.token("join", c, c.member_id, -1)
        c.join_token = token
        request = JoinGroupRequest(token, c.member_id, c.instance, c.name, "h", 1500, 2000, "consumer", c.protocols)
        self.trace.append(f"{self.now}: {c.name} joins as {c.member_id or '?'}")
        self.take(self.group.join(request, self.now))

    def sync(self, c: Client) -> None:
        assignments: tuple[tuple[str, bytes], ...] = ()
        if c.leader:
            assignments = tuple((m, f"g{c.generation}:{m}".encode()) for m in c.members)
            if self.group.generation_id == c.generation and self.group.leader_id == c.member_id:
                self.leader_assignments.setdefault(c.generation, dict(assignments))
        token = self.token("sync", c, c.member_id, c.generation)
        c.sync_token = token
        self.trace.append(f"{self.now}: {c.name} syncs {c.member_id} gen {c.generation}")
        self.take(
            self.group.sync(
                SyncGroupRequest(token, c.member_id, c.instance, c.generation, assignments=assignments), self.now
            )
        )

    def heartbeat(self, c: Client) -> None:
        error = self.group.heartbeat(HeartbeatRequest(c.member_id, c.instance, c.generation), self.now).error
        self.trace.append(f"{self.now}: {c.name} heartbeats: {ErrorCode.Name(error)}")
        if error == ErrorCode.UNKNOWN_MEMBER_ID:
            c.member_id, c.generation = "", -1
        elif error == ErrorCode.FENCED_INSTANCE_ID:
            c.alive = False
        elif error in (ErrorCode.REBALANCE_IN_PROGRESS, ErrorCode.ILLEGAL_GENERATION):
            c.generation = -1

    def step(self) -> None:
        rng = self.rng
        roll = rng.random()
        if roll < 0.25:
            self.now += rng.choice((50, 200, 500, 1200, 2500))
            self.trace.append(f"{self.now}: tick")
            self.take(self.group.tick(self.now))
        elif roll < 0.40 and self.persists:
            persist = self.persists.pop(0)
            ok = rng.random() < 0.8
            self.trace.append(f"{self.now}: persist {persist.persist_id} gen {persist.group.generation_id} ok={ok}")
            if ok and persist.group.members:
                self.stored_generations.add(persist.group.generation_id)
            error = (
                ErrorCode.NONE if ok else rng.choice((ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.NOT_LEADER_OR_FOLLOWER))
            )
            self.take(self.group.on_persisted(persist.persist_id, self.now, error))
        else:
            c = rng.choice(self.clients)
            if not c.alive:
                if c.instance is not None and rng.random() < 0.5:  # a static member's process restarts
                    self.trace.append(f"{self.now}: {c.name} restarts")
                    c.alive, c.member_id, c.generation, c.join_token, c.sync_token = True, "", -1, None, None
                return
            action = rng.random()
            if action < 0.04:
                self.trace.append(f"{self.now}: {c.name} crashes")
                c.alive = False
            elif action < 0.08 and c.member_id and c.instance is None:
                response, result = self.group.leave(LeaveGroupRequest((LeavingMember(c.member_id),)), self.now)
                self.trace.append(f"{self.now}: {c.name} leaves: {[ErrorCode.Name(m.error) for m in response.members]}")
                c.member_id, c.generation, c.join_token, c.sync_token = "", -1, None, None
                self.take(result)
            elif c.join_token is not None or c.sync_token is not None:
                if rng.random() < 0.1 and c.join_token is not None:
                    self.join(c)  # a retry supersedes the parked call
            elif c.generation < 0:
                self.join(c)
            elif rng.random() < 0.3:
                self.sync(c)
            elif rng.random() < 0.9:  # some heartbeats are skipped: late ones
                self.heartbeat(c)

    # -- invariants --------------------------------------------------------------------------------------------

    def check(self) -> None:
        g = self.group
        assert g.generation_id >= self.last_generation, "the generation went backwards"
        self.last_generation = g.generation_id
        assert isinstance(g.state, GroupState) and g.state is not GroupState.DEAD
        if g.state is GroupState.EMPTY:
            assert not g.members
        elif g.state in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE):
            assert g.members, f"{g.state} with no members"
        if g.members:
            assert g.leader_id in g.members
        assert {i: m for i, m in g.static_members.items()} == {
            m.group_instance_id: m.member_id for m in g.members.values() if m.group_instance_id is not None
        }
        assert g.pending_sync <= set(g.members)
        if g.state is GroupState.PREPARING_REBALANCE:
            assert g.next_deadline_ms() is not None, "a rebalance nothing will ever complete"
        if g.state is GroupState.STABLE:
            assert g.generation_id in self.stored_generations, "Stable on a generation never stored"
            gave = self.leader_assignments[g.generation_id]
            for m in g.members.values():
                if m.assignment:
                    origin = m.assignment.decode().split(":", 1)[1]
                    assert gave.get(origin) == m.assignment
                    assert origin == m.member_id or self.instance_of.get(origin) == m.group_instance_id

    def run(self) -> None:
        for _ in range(STEPS):
            self.step()
            self.check()
        result = self.group.unload(self.now)
        self.take(result)
        unanswered = set(self.tokens) - self.answered
        assert not unanswered, f"calls never answered: {sorted(unanswered)}"


def run_seed(seed: int, trace: bool = False) -> Schedule:
    schedule = Schedule(seed)
    try:
        schedule.run()
    except AssertionError as e:
        lines = "\n".join(schedule.trace[-60:])
        raise AssertionError(f"seed {seed}: {e}\nreplay: GROUP_SEED={seed} pytest {__file__} -s\n{lines}") from e
    if trace:
        print("\n".join(schedule.trace))
    return schedule


@pytest.mark.skipif(REPLAY is not None, reason="replaying a single seed")
def test_sample_of_schedules() -> None:
    formed = 0
    for seed in range(BASE, BASE + SAMPLE):
        formed += bool(run_seed(seed).stored_generations)
    assert formed > SAMPLE // 2, "most schedules should store at least one generation, else they test little"


@pytest.mark.slow
@pytest.mark.skipif(not SCHEDULES or REPLAY is not None, reason="set GROUP_SCHEDULES=n to run n schedules")
def test_many_schedules() -> None:
    for seed in range(BASE + SAMPLE, BASE + SAMPLE + SCHEDULES):
        run_seed(seed)


@pytest.mark.skipif(REPLAY is None, reason="set GROUP_SEED=n to replay one schedule with its trace")
def test_replay() -> None:
    run_seed(int(REPLAY or 0), trace=True)

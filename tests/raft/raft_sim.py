"""Deterministic simulation of a Raft quorum: simulated clock, network, disks, crashes and checkers.

One `random.Random(seed)` drives everything (schedule shape, message fate, node randomness), so a seed
replays exactly. The simulated shell follows ready.py to the letter, with one twist that matters: the fsync
of a Ready may take a few ticks, and a crash before it completes loses that Ready (its state, entries and
messages), as an unflushed page cache would.

Checkers run after every step (message, tick, proposal) and every completed fsync: election safety (and
its cause, one vote per voter per epoch, across restarts), log matching, leader completeness, state machine
safety, monotonic high watermark (per incarnation) and epoch (in memory per incarnation, on disk forever),
and liveness once the faults heal.
"""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from dataclasses import dataclass, field, replace

from odradek.controller.raft import (
    EMPTY_SNAPSHOT,
    Entry,
    Faults,
    NotLeaderError,
    PersistentState,
    QuorumState,
    RaftConfig,
    RaftNode,
    Ready,
    Role,
    SnapshotId,
)
from odradek.controller.raft.messages import Fetch, Message, VoteResponse

SIM_CONFIG = RaftConfig(
    election_timeout_ticks=5,
    fetch_timeout_ticks=10,
    request_timeout_ticks=3,
    election_backoff_ticks=1,
    max_fetch_bytes=24,
    snapshot_chunk_bytes=16,
    fetch_max_wait_ms=1,
)
PARK_TICKS = 2  # how long the leader's simulated shell holds a parked fetch
LIVENESS_TICKS = 250  # after healing, a leader must be elected and a proposal commit everywhere within this
OBSERVER_BASE = 100  # observer ids start here; voters are 1..n
# Python 3.11's EnumType.__getattr__ makes each `Role.X` a slow lookup, and the checks run after every step.
_UNATTACHED, _FOLLOWER, _CANDIDATE, _LEADER = Role.UNATTACHED, Role.FOLLOWER, Role.CANDIDATE, Role.LEADER


class Violation(AssertionError):
    """An invariant broke; the message names it and the tick."""


def _h(prev: int, e: Entry) -> int:
    return hash((prev, e.offset, e.epoch, e.data, e.control))


def _encode_snapshot(sid: SnapshotId, state_hash: int) -> bytes:
    # Padded so that a download takes several chunks.
    return f"{sid.end_offset}|{sid.epoch}|{state_hash}|".encode().ljust(48, b".")


def _decode_snapshot(data: bytes) -> tuple[SnapshotId, int]:
    offset, epoch, state_hash, _ = data.split(b"|", 3)
    return SnapshotId(int(offset), int(epoch)), int(state_hash)


@dataclass
class Disk:
    """What survives a crash: exactly what completed fsyncs wrote."""

    state: PersistentState = field(default_factory=PersistentState)
    snapshot_id: SnapshotId = EMPTY_SNAPSHOT
    snapshot_data: bytes = b""
    base_hash: int = 0  # state hash at the snapshot end (the state machine's content)
    entries: list[Entry] = field(default_factory=list)
    hashes: list[int] = field(default_factory=list)  # prefix hash after each entry
    partial: dict[SnapshotId, bytearray] = field(default_factory=dict)

    def end_hash(self) -> int:
        return self.hashes[-1] if self.hashes else self.base_hash


@dataclass
class SimNode:
    node_id: int
    voter: bool
    disk: Disk = field(default_factory=Disk)
    core: RaftNode | None = None
    pending: Ready | None = None
    fsync_at: int = 0
    parked: list[tuple[Fetch, int]] = field(default_factory=list)
    down_until: int = 0
    # State machine: the prefix hash of everything applied.
    sm_offset: int = 0
    sm_hash: int = 0
    sm_epoch: int = 0
    # Per-incarnation monotonicity.
    last_hw: int = 0
    last_epoch: int = 0
    last_role: Role | None = None
    # What check() last saw: the same quorum state object, high watermark and persisted state mean nothing changed.
    last_seen: tuple[QuorumState, int, PersistentState] | None = None


@dataclass(frozen=True)
class Schedule:
    """The shape of one randomized run, drawn from its seed."""

    voters: int
    observers: int
    chaos_ticks: int
    drop: float
    duplicate: float
    max_delay: int
    crash: float
    partition: float
    propose: float
    snapshot: float
    resign: float
    slow_fsync: float

    @staticmethod
    def draw(rng: random.Random) -> Schedule:
        return Schedule(
            voters=rng.choice((3, 3, 3, 5)),
            observers=1,
            chaos_ticks=rng.randrange(40, 100),
            drop=rng.choice((0.0, 0.05, 0.2)),
            duplicate=rng.choice((0.0, 0.05)),
            max_delay=rng.choice((1, 2, 3)),
            crash=rng.choice((0.0, 0.01, 0.03, 0.08)),
            partition=rng.choice((0.0, 0.02, 0.05)),
            propose=rng.choice((0.1, 0.3)),
            snapshot=rng.choice((0.0, 0.03)),
            resign=rng.choice((0.0, 0.01)),
            slow_fsync=rng.choice((0.0, 0.3)),
        )


class Simulation:
    def __init__(self, seed: int, faults: Faults | None = None, *, trace: bool = False) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.sched = Schedule.draw(self.rng)
        self.faults = faults or Faults()
        self.trace_on = trace
        self.log: list[str] = []
        self.now = 0
        self.voter_ids = list(range(1, self.sched.voters + 1))
        ids = self.voter_ids + [OBSERVER_BASE + i for i in range(self.sched.observers)]
        self.nodes = {i: SimNode(i, i in self.voter_ids) for i in ids}
        self.group = dict.fromkeys(ids, 0)  # nodes talk only within their partition group
        # Each directed link gets its own loss rate and latency, so some peers are worse than others.
        s = self.sched
        self.link_drop = {(a, b): self.rng.choice((0.0, s.drop, 2 * s.drop)) for a in ids for b in ids}
        self.link_delay = {(a, b): self.rng.randint(1, s.max_delay) for a in ids for b in ids}
        self.queue: dict[int, list[Message]] = defaultdict(list)
        self.chaos = True
        # Global truth for the checkers.
        self.leaders: dict[int, int] = {}  # epoch -> leader id
        self.votes: dict[tuple[int, int], int] = {}  # (voter, epoch) -> the one candidate it voted for
        self.log_index: dict[tuple[int, int], int] = {}  # (offset, epoch) -> prefix hash
        self.committed: dict[int, tuple[int, bytes]] = {}  # offset -> (epoch, data), from any HW
        self.commit_end = 0
        self.applied: dict[int, int] = {}  # end offset -> state hash after applying up to it
        self.heal_commits: list[int] = []
        self.proposals = 0
        self.stats: Counter[str] = Counter()
        self.candidates: dict[int, set[int]] = defaultdict(set)
        for node in self.nodes.values():
            self._start(node)

    # ------------------------------------------------------------------ driver

    def run(self) -> None:
        for _ in range(self.sched.chaos_ticks):
            self.tick()
        self.heal()
        healed_at = self.now
        while self.now < healed_at + LIVENESS_TICKS:
            self.tick()
            if self.heal_commits and all(
                n.sm_offset > self.heal_commits[0] for n in self.nodes.values() if n.core is not None
            ):
                self.stats["liveness_ticks"] = self.now - healed_at
                return
        raise Violation(f"liveness: nothing proposed after healing at tick {healed_at} committed")

    def heal(self) -> None:
        self.chaos = False
        self.trace("heal")
        self.group = dict.fromkeys(self.nodes, 0)
        for node in self.nodes.values():
            if node.core is None:
                self._start(node)

    def tick(self) -> None:
        self.now = now = self.now + 1
        rng, s, nodes, check = self.rng, self.sched, self.nodes, self.check
        if self.chaos:
            self._chaos_events()
        group = self.group  # after the chaos events, which may partition the nodes anew
        for msg in self.queue.pop(now, ()):
            node = nodes[msg.dst]
            core = node.core
            if core is not None and group[msg.src] == group[msg.dst]:
                core.step(msg)
                check(node)
        for node in nodes.values():
            core = node.core
            if core is None:
                continue
            core.tick()
            check(node)
            if node.parked:
                due = [f for f, at in node.parked if at <= now]
                if due:
                    node.parked = [(f, at) for f, at in node.parked if at > now]
                    for f in due:
                        core.step(replace(f, max_wait_ms=0))
                    check(node)
        if rng.random() < (s.propose if self.chaos else 0.1):
            self._propose()
        if s.snapshot and rng.random() < s.snapshot:
            self._take_snapshot(rng.choice(list(nodes.values())))
        for node in nodes.values():
            if node.core is not None:
                self._io(node)

    def trace(self, what: str) -> None:
        if self.trace_on:
            self.log.append(f"t={self.now} {what}")

    # ------------------------------------------------------------------ faults and clients

    def _chaos_events(self) -> None:
        rng, s = self.rng, self.sched
        for node in self.nodes.values():
            if node.core is None:
                if self.now >= node.down_until:
                    self._start(node)
            elif s.crash and rng.random() < s.crash:
                self._crash(node)
        if s.partition and rng.random() < s.partition:
            kind = rng.random()
            ids = list(self.nodes)
            if kind < 0.4:
                self.group = {i: rng.randrange(2) for i in ids}
            elif kind < 0.7:
                lonely = rng.choice(ids)
                self.group = {i: int(i == lonely) for i in ids}
            else:
                self.group = dict.fromkeys(ids, 0)
            self.trace(f"partition {self.group}")
        if s.resign and rng.random() < s.resign:
            for node in self.nodes.values():
                if node.core is not None and node.core.role is _LEADER:
                    self.trace(f"resign {node.node_id}")
                    node.core.resign()
                    self.check(node)

    def _propose(self) -> None:
        leaders = [n for n in self.nodes.values() if n.core is not None and n.core.role is _LEADER]
        if not leaders:
            return
        node = self.rng.choice(leaders)
        self.proposals += 1
        tag = "chaos" if self.chaos else "heal"
        batch = [f"{tag}:{self.proposals}:{i}".encode() for i in range(self.rng.randrange(1, 3))]
        try:
            offset = node.core.propose(batch)  # type: ignore[union-attr]
        except NotLeaderError:
            return
        self.trace(f"propose {node.node_id} -> {offset}")
        self.check(node)

    def _crash(self, node: SimNode) -> None:
        self.trace(f"crash {node.node_id} (unflushed Ready lost: {node.pending is not None})")
        self.stats["crash"] += 1
        self.stats["lost_ready"] += node.pending is not None
        node.core = None
        node.pending = None
        node.parked = []
        # Quick restarts (within one election) are what expose a forgotten vote; long ones make nodes lag.
        quick = self.rng.random() < 0.5
        node.down_until = self.now + (self.rng.randrange(1, 3) if quick else self.rng.randrange(3, 15))

    def _start(self, node: SimNode) -> None:
        d = node.disk
        node.core = RaftNode(
            node.node_id,
            self.voter_ids,
            rng=random.Random(self.rng.getrandbits(32)),
            config=SIM_CONFIG,
            state=d.state,
            entries=list(d.entries),
            snapshot_id=d.snapshot_id,
            faults=self.faults,
        )
        node.sm_offset, node.sm_hash, node.sm_epoch = d.snapshot_id.end_offset, d.base_hash, d.snapshot_id.epoch
        node.last_hw = d.snapshot_id.end_offset
        node.last_epoch = d.state.epoch
        node.last_role = None
        self.trace(f"start {node.node_id} as {node.core.role.value} epoch {d.state.epoch}")
        self.check(node)

    def _take_snapshot(self, node: SimNode) -> None:
        core, d = node.core, node.disk
        if core is None or node.sm_offset <= d.snapshot_id.end_offset:
            return
        sid = SnapshotId(node.sm_offset, node.sm_epoch)
        d.snapshot_id, d.snapshot_data, d.base_hash = sid, _encode_snapshot(sid, node.sm_hash), node.sm_hash
        cut = sum(1 for e in d.entries if e.offset < sid.end_offset)
        del d.entries[:cut]
        del d.hashes[:cut]
        core.snapshot_taken(sid.end_offset, sid.epoch)
        self.trace(f"snapshot {node.node_id} {sid}")

    # ------------------------------------------------------------------ the shell

    def _io(self, node: SimNode) -> None:
        core = node.core
        assert core is not None
        for _ in range(4):
            if node.pending is not None:
                if node.fsync_at > self.now:
                    return
                self._complete(node)
            if not core.has_ready():
                return
            node.pending = core.ready()
            slow = self.sched.slow_fsync and self.rng.random() < self.sched.slow_fsync
            node.fsync_at = self.now + (self.rng.randrange(1, 3) if slow else 0)

    def _complete(self, node: SimNode) -> None:
        """Persist, fsync, send, apply, serve: ready.py's order."""
        r, d, core = node.pending, node.disk, node.core
        assert r is not None and core is not None
        node.pending = None
        for c in r.snapshot_chunks:
            buf = d.partial.setdefault(c.snapshot_id, bytearray())
            buf[c.position : c.position + len(c.data)] = c.data
        if r.parked_fetches:
            self.stats["parked"] += len(r.parked_fetches)
        if r.truncate_to is not None:
            self.stats["truncate"] += 1
        if r.install_snapshot is not None:
            self.stats["install"] += 1
            data = bytes(d.partial.pop(r.install_snapshot))
            sid, state_hash = _decode_snapshot(data)
            if sid != r.install_snapshot:
                raise Violation(f"node {node.node_id} installed {r.install_snapshot} but holds {sid}")
            known = self.applied.get(sid.end_offset)
            if known is not None and known != state_hash:
                raise Violation(f"state machine safety: snapshot {sid} differs from applied state")
            d.snapshot_id, d.snapshot_data, d.base_hash = sid, data, state_hash
            d.entries, d.hashes, d.partial = [], [], {}
            node.sm_offset, node.sm_hash, node.sm_epoch = sid.end_offset, state_hash, sid.epoch
        if r.truncate_to is not None:
            cut = r.truncate_to - d.snapshot_id.end_offset
            del d.entries[cut:]
            del d.hashes[cut:]
        for e in r.entries:
            expected = d.snapshot_id.end_offset + len(d.entries)
            if e.offset != expected:
                raise Violation(f"node {node.node_id} asked to write {e.offset} at {expected}")
            h = _h(d.end_hash(), e)
            if self.log_index.setdefault((e.offset, e.epoch), h) != h:
                raise Violation(f"log matching: ({e.offset}, {e.epoch}) on node {node.node_id} has another prefix")
            d.entries.append(e)
            d.hashes.append(h)
        if r.persist_state is not None:
            if r.persist_state.epoch < d.state.epoch:
                raise Violation(f"node {node.node_id} persisted epoch {r.persist_state.epoch} < {d.state.epoch}")
            d.state = r.persist_state
        # fsync done: now the messages may leave.
        for m in r.messages:
            vote = type(m) is VoteResponse and m.granted and not m.pre_vote
            if vote and self.votes.setdefault((m.src, m.epoch), m.dst) != m.dst:
                raise Violation(f"vote safety: node {m.src} voted for two candidates in epoch {m.epoch}")
            self._send(m)
        for e in r.committed:
            self._apply(node, e)
        for req in r.snapshot_reads:
            data = d.snapshot_data
            core.answer_fetch_snapshot(req, data[req.position : req.position + req.max_bytes], len(data))
        wake = r.entries or r.high_watermark is not None
        if wake and node.parked:
            parked, node.parked = node.parked, []
            for f, _ in parked:
                core.step(f)
        if r.parked_fetches:
            node.parked.extend((f, self.now + PARK_TICKS) for f in r.parked_fetches)
        core.advance(r)
        self.check(node)

    def _send(self, m: Message) -> None:
        rng, s, link = self.rng, self.sched, (m.src, m.dst)
        if self.group[m.src] != self.group[m.dst]:
            return
        drop = self.link_drop[link]
        if self.chaos and drop and rng.random() < drop:
            return
        # Latency varies per message around the link's own, which reorders messages on a link too.
        self.queue[self.now + rng.randint(1, self.link_delay[link])].append(m)
        if self.chaos and s.duplicate and rng.random() < s.duplicate:
            self.queue[self.now + rng.randint(1, s.max_delay + 2)].append(m)

    def _apply(self, node: SimNode, e: Entry) -> None:
        if e.offset != node.sm_offset:
            raise Violation(f"node {node.node_id} applied {e.offset} but its state machine is at {node.sm_offset}")
        node.sm_hash = _h(node.sm_hash, e)
        node.sm_offset += 1
        node.sm_epoch = e.epoch
        if self.applied.setdefault(node.sm_offset, node.sm_hash) != node.sm_hash:
            raise Violation(f"state machine safety: node {node.node_id} applied a different entry at {e.offset}")
        if e.data.startswith(b"heal:") and (not self.heal_commits or e.offset < self.heal_commits[0]):
            self.heal_commits.insert(0, e.offset)

    # ------------------------------------------------------------------ checkers

    def check(self, node: SimNode) -> None:
        core = node.core
        if core is None:
            return
        q, hw, persisted = core._q, core._hw, node.disk.state
        last = node.last_seen
        if last is not None and last[0] is q and last[1] == hw and last[2] is persisted:
            return  # checked already: quorum states are immutable, replaced on every change
        node.last_seen = (q, hw, persisted)
        nid, epoch, role = node.node_id, core.epoch, core.role
        if epoch < node.last_epoch:
            raise Violation(f"node {nid} epoch went back from {node.last_epoch} to {epoch}")
        if epoch < node.disk.state.epoch:
            raise Violation(f"node {nid} runs epoch {epoch} below its persisted {node.disk.state.epoch}")
        if not node.voter and role not in (_UNATTACHED, _FOLLOWER):
            raise Violation(f"observer {nid} became {role.value}")
        new_leader = role is _LEADER and (node.last_role is not _LEADER or epoch != node.last_epoch)
        if role is _CANDIDATE:
            self.candidates[epoch].add(nid)
        node.last_epoch, node.last_role = epoch, role
        if new_leader:
            self.trace(f"leader {nid} epoch {epoch}")
            self.stats["elected"] += 1
            if self.leaders.setdefault(epoch, nid) != nid:
                raise Violation(f"election safety: nodes {self.leaders[epoch]} and {nid} both led epoch {epoch}")
            self._check_leader_complete(node)
        hw = core.high_watermark
        if hw < node.last_hw:
            raise Violation(f"node {nid} high watermark went back from {node.last_hw} to {hw}")
        if hw > node.last_hw:
            log = core.log
            for offset in range(max(node.last_hw, log.start_offset), hw):
                e = log.entry(offset)
                if self.committed.setdefault(offset, (e.epoch, e.data)) != (e.epoch, e.data):
                    raise Violation(f"state machine safety: node {nid} commits another entry at {offset}")
            node.last_hw = hw
            self.commit_end = max(self.commit_end, hw)

    def _check_leader_complete(self, node: SimNode) -> None:
        log = node.core.log  # type: ignore[union-attr]
        if log.end_offset < self.commit_end:
            raise Violation(
                f"leader completeness: leader {node.node_id} ends at {log.end_offset}, committed to {self.commit_end}"
            )
        for offset in range(log.start_offset, self.commit_end):
            e = log.entry(offset)
            if (e.epoch, e.data) != self.committed[offset]:
                raise Violation(f"leader completeness: leader {node.node_id} lacks committed entry {offset}")


def run_seed(seed: int, faults: Faults | None = None, *, trace: bool = False) -> Simulation:
    """Run one schedule; raises Violation (or a core error) with the seed in the message."""
    sim = Simulation(seed, faults, trace=trace)
    try:
        sim.run()
    except Exception as exc:
        tail = "\n".join(sim.log[-60:])
        on = ",".join(f for f in Faults.__dataclass_fields__ if getattr(sim.faults, f))
        env = f"RAFT_FAULTS={on} " if on else ""
        raise Violation(
            f"seed {seed} {sim.sched}: {type(exc).__name__}: {exc}\n"
            f"replay: {env}RAFT_SEED={seed} pytest tests/raft/test_simulation.py -k replay -s\n{tail}"
        ) from exc
    return sim

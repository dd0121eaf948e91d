"""A small deterministic cluster for focused unit tests, in the spirit of etcd-raft's test `network`.

Readies are handled at once and in ready.py's order, messages go through a FIFO that `deliver()` drains, and
links can be cut one way or both. Leaders park fetches (followers long-poll), so a caught-up cluster goes
quiet and `deliver()` terminates; each `tick()` releases the parked fetches, as their wait running out would.
"""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass, field, replace

from odradek.controller.raft import (
    EMPTY_SNAPSHOT,
    Entry,
    Faults,
    PersistentState,
    RaftConfig,
    RaftNode,
    Ready,
    Role,
    SnapshotId,
)
from odradek.controller.raft.messages import Fetch, Message

UNIT_CONFIG = RaftConfig(
    election_timeout_ticks=5,
    fetch_timeout_ticks=10,
    request_timeout_ticks=3,
    election_backoff_ticks=2,
    max_fetch_bytes=64,
    snapshot_chunk_bytes=8,
    fetch_max_wait_ms=100,
)


@dataclass
class Store:
    """One node's disk: persisted quorum state, log and latest snapshot, plus what its applier saw."""

    state: PersistentState = field(default_factory=PersistentState)
    entries: list[Entry] = field(default_factory=list)
    snapshot_id: SnapshotId = EMPTY_SNAPSHOT
    snapshot_data: bytes = b""
    partial: bytearray = field(default_factory=bytearray)
    applied: list[bytes] = field(default_factory=list)  # data of applied non-control entries, in order
    readies: list[Ready] = field(default_factory=list)  # every Ready handled, for assertions


def log_of(epochs: list[int], start: int = 0) -> list[Entry]:
    """Entries with the given epochs from offset `start`; data names offset and epoch."""
    return [Entry(start + i, ep, f"{start + i}@{ep}".encode()) for i, ep in enumerate(epochs)]


class Cluster:
    def __init__(
        self,
        voters: tuple[int, ...] = (1, 2, 3),
        observers: tuple[int, ...] = (),
        *,
        seed: int = 0,
        config: RaftConfig = UNIT_CONFIG,
        faults: Faults | None = None,
        stores: dict[int, Store] | None = None,
    ) -> None:
        self.voters = voters
        self.config = config
        self.faults = faults
        self.rng = random.Random(seed)
        self.stores = {i: Store() for i in (*voters, *observers)}
        self.stores.update(stores or {})
        self.nodes: dict[int, RaftNode] = {}
        self.queue: deque[Message] = deque()
        self.cut: set[tuple[int, int]] = set()
        self.parked: dict[int, list[Fetch]] = {i: [] for i in self.stores}
        self.sent: list[Message] = []
        for i in self.stores:
            self.start(i)

    # ------------------------------------------------------------------ topology

    def start(self, node_id: int) -> RaftNode:
        s = self.stores[node_id]
        node = RaftNode(
            node_id,
            self.voters,
            rng=random.Random(self.rng.getrandbits(32)),
            config=self.config,
            state=s.state,
            entries=list(s.entries),
            snapshot_id=s.snapshot_id,
            faults=self.faults,
        )
        self.nodes[node_id] = node
        s.applied = []
        return node

    def crash(self, node_id: int) -> None:
        """Stop a node; a Ready it had not handed over yet is lost, as unflushed writes are."""
        del self.nodes[node_id]
        self.parked[node_id] = []

    def isolate(self, node_id: int) -> None:
        for other in self.stores:
            if other != node_id:
                self.cut |= {(node_id, other), (other, node_id)}

    def heal(self) -> None:
        self.cut.clear()

    def leader(self) -> RaftNode | None:
        leaders = [n for n in self.nodes.values() if n.role is Role.LEADER]
        return leaders[0] if len(leaders) == 1 else None

    # ------------------------------------------------------------------ driving

    def deliver(self, limit: int = 10_000) -> None:
        """Flush every node and deliver messages until the cluster is quiet."""
        for _ in range(limit):
            while any([self.flush(node_id) for node_id in list(self.nodes)]):
                pass
            if not self.queue:
                return
            m = self.queue.popleft()
            node = self.nodes.get(m.dst)
            if node is not None and (m.src, m.dst) not in self.cut:
                node.step(m)
        raise AssertionError("the cluster never went quiet")

    def tick(self, n: int = 1, only: tuple[int, ...] | None = None) -> None:
        for _ in range(n):
            for node_id, node in list(self.nodes.items()):
                if only is None or node_id in only:
                    node.tick()
                    parked, self.parked[node_id] = self.parked[node_id], []
                    for f in parked:
                        node.step(replace(f, max_wait_ms=0))
            self.deliver()

    def campaign(self, node_id: int) -> None:
        """Let only `node_id`'s clock run until it leaves its current role for an election."""
        node = self.nodes[node_id]
        for _ in range(10 * self.config.fetch_timeout_ticks):
            node.tick()
            if node.role in (Role.PROSPECTIVE, Role.CANDIDATE, Role.LEADER):
                self.deliver()
                return
        raise AssertionError(f"node {node_id} never campaigned")

    def propose(self, *data: bytes) -> int:
        leader = self.leader()
        assert leader is not None
        offset = leader.propose(list(data))
        self.deliver()
        return offset

    def take_snapshot(self, node_id: int) -> SnapshotId:
        """The applier snapshots everything it applied: the snapshot's bytes are that state."""
        node, s = self.nodes[node_id], self.stores[node_id]
        offset = node.high_watermark
        sid = SnapshotId(offset, node.log.epoch_at(offset - 1))
        s.snapshot_id, s.snapshot_data = sid, b"\n".join(s.applied)
        s.entries = [e for e in s.entries if e.offset >= offset]
        node.snapshot_taken(sid.end_offset, sid.epoch)
        return sid

    def flush(self, node_id: int) -> Ready | None:
        """Handle one node's Ready as a shell must (ready.py): persist, send, apply, serve."""
        node, s = self.nodes[node_id], self.stores[node_id]
        if not node.has_ready():
            return None
        r = node.ready()
        s.readies.append(r)
        for c in r.snapshot_chunks:
            s.partial[c.position : c.position + len(c.data)] = c.data
        if r.install_snapshot is not None:
            s.snapshot_id, s.snapshot_data, s.partial = r.install_snapshot, bytes(s.partial), bytearray()
            s.entries = []
            s.applied = s.snapshot_data.split(b"\n") if s.snapshot_data else []
        if r.truncate_to is not None:
            s.entries = [e for e in s.entries if e.offset < r.truncate_to]
        s.entries.extend(r.entries)
        if r.persist_state is not None:
            s.state = r.persist_state
        for m in r.messages:
            self.sent.append(m)
            self.queue.append(m)
        s.applied.extend(e.data for e in r.committed if not e.control)
        for req in r.snapshot_reads:
            data = s.snapshot_data
            node.answer_fetch_snapshot(req, data[req.position : req.position + req.max_bytes], len(data))
        if (r.entries or r.high_watermark is not None) and self.parked[node_id]:
            parked, self.parked[node_id] = self.parked[node_id], []
            for f in parked:
                node.step(f)
        self.parked[node_id].extend(r.parked_fetches)
        node.advance(r)
        return r

"""Data-driven scenarios for the Raft core: a file of commands, each followed by the output it must produce (the
file format, shared with the group and transaction coordinators' transcripts, is transcript.py's).

A scenario file (testdata/*.txt) reads top to bottom::

    # Prose lines start with '#'; they and blank lines are kept as they are when expectations are rewritten.
    > cluster voters=1,2,3 seed=1
    1: unattached epoch=0 leader=- voted=- hw=0 log=[0,0) snapshot=0@0
    ...

    > tick 1 until=prospective
    1 ready @t7:
      event: asking for pre-votes for epoch 1: election timeout
      ...

A line starting with '> ' is a command; the lines right after it, up to the first blank line, are its expected
output. The runner replays the commands against a cluster of real `RaftNode`s whose messages wait in a network
queue until a command delivers or drops them, and compares what each command printed: every Ready a node handed
over (in ready.py's order, events first), with `offset@epoch` for entries and snapshots. `REWRITE=1` writes the
actual output back into the file instead of comparing.

Commands (node lists are comma-separated ids or `all`):

- ``cluster voters=1,2,3 [observers=4] [seed=0] [election=5] [fetch=10] [request=3] [backoff=2] [chunk=8]
  [max-bytes=64] [wait=100]``: a fresh cluster and the first Ready of each node (timeouts in ticks, snapshot
  chunk and fetch sizes in bytes, `wait` the followers' long-poll in ms: a leader parks a fetch that would
  bring nothing new until its log or high watermark moves or a tick of the leader ends the wait, so a
  caught-up cluster goes quiet; 0 never parks);
- ``tick NODES [n=1] [until=ROLE]``: advance the nodes' clocks n times, or until the (single) node has ROLE;
- ``deliver [from=NODES] [to=NODES] [type=Name,...]``: step every queued message that matches into its
  destination (messages queued meanwhile wait for the next command);
- ``drop [from=..] [to=..] [type=..]``: lose the matching queued messages;
- ``stabilize``: deliver everything until no message is left;
- ``propose NODE DATA...``, ``resign NODE``, ``snapshot NODE`` (snapshot what NODE applied),
  ``crash NODE``, ``restart NODE``, ``status [NODES]``, ``network`` (the queued messages).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import transcript
from raft_cluster import UNIT_CONFIG, Cluster

from odradek.controller.raft import Entry, RaftNode, Ready, Role, SnapshotId
from odradek.controller.raft.messages import DivergingEpoch, Message
from odradek.proto import common_pb2

MAX_STEPS = 10_000


# ---------------------------------------------------------------------------------------------------- formatting


def fmt(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, Entry):
        data = "ctl" if value.control else repr(value.data.decode(errors="replace"))
        return f"{value.offset}@{value.epoch} {data}"
    if isinstance(value, SnapshotId):
        return f"{value.end_offset}@{value.epoch}"
    if isinstance(value, DivergingEpoch):
        return f"{value.end_offset}@{value.epoch}"
    if isinstance(value, bytes):
        return f"{len(value)}B"
    if isinstance(value, tuple | list):
        return "[" + ", ".join(fmt(v) for v in value) + "]"
    return str(value)


def fmt_message(m: Message) -> str:
    """`src->dst Type field=value ...`, leaving out correlation ids (random) and fields at their default."""
    fields = []
    for f in dataclasses.fields(m):
        value = getattr(m, f.name)
        if f.name in ("src", "dst", "correlation_id") or value == f.default:
            continue
        if f.name == "error":
            value = common_pb2.ErrorCode.Name(value)
        fields.append(f"{f.name}={fmt(value)}")
    return " ".join([f"{m.src}->{m.dst}", type(m).__name__, *fields])


def fmt_ready(node: RaftNode, r: Ready) -> list[str]:
    out = [f"{node.node_id} ready @t{node.now}:"]
    out += [f"  event: {e.describe()}" for e in r.events]
    if r.leader_change is not None:
        lc = r.leader_change
        out.append(f"  role: {lc.role.value} epoch={lc.epoch} leader={fmt(lc.leader_id)}")
    out += [f"  chunk: {fmt(c.snapshot_id)} position={c.position} {fmt(c.data)}" for c in r.snapshot_chunks]
    if r.install_snapshot is not None:
        out.append(f"  install: {fmt(r.install_snapshot)}")
    if r.truncate_to is not None:
        out.append(f"  truncate: {r.truncate_to}")
    if r.entries:
        out.append(f"  append: {fmt(r.entries)}")
    if r.persist_state is not None:
        s = r.persist_state
        out.append(f"  persist: epoch={s.epoch} voted={fmt(s.voted_for)} leader={fmt(s.leader_id)}")
    out += [f"  send: {fmt_message(m)}" for m in r.messages]
    if r.high_watermark is not None:
        out.append(f"  hw: {r.high_watermark}")
    if r.committed:
        out.append(f"  commit: {fmt(r.committed)}")
    out += [f"  serve: {fmt_message(m)}" for m in r.snapshot_reads]
    out += [f"  park: {fmt_message(m)}" for m in r.parked_fetches]
    return out


def fmt_status(node_id: int, node: RaftNode | None) -> str:
    if node is None:
        return f"{node_id}: down"
    q, log = node.quorum_state, node.log
    return (
        f"{node_id}: {q.role.value} epoch={q.epoch} leader={fmt(q.leader_id)} voted={fmt(q.voted_for)}"
        f" hw={node.high_watermark} log=[{log.start_offset},{log.end_offset}) snapshot={fmt(log.snapshot_id)}"
    )


# ---------------------------------------------------------------------------------------------------- commands


def ints(text: str, everyone: list[int]) -> list[int]:
    return list(everyone) if text == "all" else [int(x) for x in text.split(",")]


class Runner(transcript.Commands):
    """Holds the cluster between the commands of one file."""

    def __init__(self) -> None:
        self.c: Cluster | None = None

    @property
    def cluster(self) -> Cluster:
        if self.c is None:
            raise ValueError("no cluster yet: start with `cluster voters=...`")
        return self.c

    # -- helpers

    def nodes(self) -> list[int]:
        return sorted(self.cluster.stores)

    def flush(self, node_id: int) -> list[str]:
        c, out = self.cluster, []
        for _ in range(MAX_STEPS):
            node = c.nodes.get(node_id)
            r = c.flush(node_id) if node is not None else None
            if r is None:
                return out
            out += fmt_ready(node, r)
        raise AssertionError(f"node {node_id} never stopped handing over Readys")

    def select(self, kw: dict[str, str]) -> Callable[[Message], bool]:
        src = set(ints(kw["from"], self.nodes())) if "from" in kw else None
        dst = set(ints(kw["to"], self.nodes())) if "to" in kw else None
        types = set(kw["type"].split(",")) if "type" in kw else None
        unknown = set(kw) - {"from", "to", "type"}
        if unknown:
            raise ValueError(f"unknown filters {sorted(unknown)}")
        return lambda m: (
            (src is None or m.src in src)
            and (dst is None or m.dst in dst)
            and (types is None or type(m).__name__ in types)
        )

    def take(self, kw: dict[str, str]) -> list[Message]:
        c, match = self.cluster, self.select(kw)
        taken = [m for m in c.queue if match(m)]
        kept = [m for m in c.queue if not match(m)]
        c.queue.clear()
        c.queue.extend(kept)
        return taken

    def deliver(self, messages: list[Message]) -> list[str]:
        c, out = self.cluster, []
        for m in messages:
            node = c.nodes.get(m.dst)
            if node is None:
                out.append(f"lost: {fmt_message(m)} ({m.dst} is down)")
                continue
            node.step(m)
            out += self.flush(m.dst)
        return out

    # -- commands

    def cmd_cluster(self, voters: str, observers: str = "", seed: str = "0", **kw: str) -> list[str]:
        names = {
            "election": "election_timeout_ticks",
            "fetch": "fetch_timeout_ticks",
            "request": "request_timeout_ticks",
            "backoff": "election_backoff_ticks",
            "chunk": "snapshot_chunk_bytes",
            "max_bytes": "max_fetch_bytes",
            "wait": "fetch_max_wait_ms",
        }
        settings: dict[str, int] = {}
        for k, v in kw.items():
            if k not in names:
                raise ValueError(f"unknown setting {k!r}")
            settings[names[k]] = int(v)
        voter_ids = tuple(int(v) for v in voters.split(","))
        observer_ids = tuple(int(v) for v in observers.split(",")) if observers else ()
        self.c = Cluster(voter_ids, observer_ids, seed=int(seed), config=replace(UNIT_CONFIG, **settings))
        return [*self.cmd_status(), *(line for i in self.nodes() for line in self.flush(i))]

    def cmd_status(self, which: str = "all") -> list[str]:
        c = self.cluster
        return [fmt_status(i, c.nodes.get(i)) for i in ints(which, self.nodes())]

    def cmd_network(self) -> list[str]:
        return [fmt_message(m) for m in self.cluster.queue]

    def cmd_tick(self, which: str, n: str = "1", until: str | None = None) -> list[str]:
        c, out = self.cluster, []
        ids = ints(which, self.nodes())
        target = Role(until) if until is not None else None
        if target is not None and len(ids) != 1:
            raise ValueError("until= needs exactly one node")
        for step in range(MAX_STEPS if target is not None else int(n)):
            if target is not None and c.nodes[ids[0]].role is target:
                return [*out, f"{ids[0]} is {target.value} after {step} ticks"]
            for i in ids:
                node = c.nodes.get(i)
                if node is None:
                    continue
                node.tick()
                parked, c.parked[i] = c.parked[i], []
                for f in parked:  # their wait ran out
                    node.step(replace(f, max_wait_ms=0))
                out += self.flush(i)
        if target is not None:
            raise AssertionError(f"node {ids[0]} never became {target.value}")
        return out

    def cmd_deliver(self, **kw: str) -> list[str]:
        return self.deliver(self.take(kw))

    def cmd_drop(self, **kw: str) -> list[str]:
        return [f"dropped: {fmt_message(m)}" for m in self.take(kw)]

    def cmd_stabilize(self) -> list[str]:
        out = []
        for _ in range(MAX_STEPS):
            if not self.cluster.queue:
                return out
            out += self.deliver(self.take({}))
        raise AssertionError("messages kept flowing")

    def cmd_propose(self, node_id: str, *data: str) -> list[str]:
        i = int(node_id)
        offset = self.cluster.nodes[i].propose([d.encode() for d in data])
        return [f"proposed up to offset {offset}", *self.flush(i)]

    def cmd_resign(self, node_id: str) -> list[str]:
        i = int(node_id)
        self.cluster.nodes[i].resign()
        return self.flush(i)

    def cmd_snapshot(self, node_id: str) -> list[str]:
        i = int(node_id)
        sid = self.cluster.take_snapshot(i)
        return [f"{i} took snapshot {fmt(sid)}", fmt_status(i, self.cluster.nodes[i])]

    def cmd_crash(self, node_id: str) -> list[str]:
        i = int(node_id)
        self.cluster.crash(i)
        return [fmt_status(i, None)]

    def cmd_restart(self, node_id: str) -> list[str]:
        i = int(node_id)
        self.cluster.start(i)
        return [fmt_status(i, self.cluster.nodes[i]), *self.flush(i)]


def run_file(path: Path, *, rewrite: bool = False) -> list[str]:
    """Replay a Raft transcript (see transcript.run_file)."""
    return transcript.run_file(path, Runner(), rewrite=rewrite)

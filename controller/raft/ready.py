"""`Ready`: everything the core asks its shell to do, batched, in the order the shell must do it.

The shell handles one Ready at a time:

1. write `snapshot_chunks`, then if `install_snapshot` is set make that snapshot the latest and replace the
   persisted log with an empty one starting at its end offset;
2. drop persisted entries at `truncate_to` and above, append `entries`, store `persist_state`;
3. fsync all of it;
4. send `messages` (only now: a vote or an acknowledged offset must never outlive a crash that lost it);
5. load the installed snapshot into the state machine if any, then apply `committed` in order;
6. serve `snapshot_reads` (read the chunk, call `RaftNode.answer_fetch_snapshot`) and park
   `parked_fetches` (step each again when a later Ready moves `high_watermark` or has `entries`, or with
   `max_wait_ms=0` once its wait is over);
7. call `RaftNode.advance(ready)`.

`events` only describe what happened (for the node log); logging them is the shell's whole duty towards them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from odradek.controller.raft.events import RaftEvent
from odradek.controller.raft.log import Entry
from odradek.controller.raft.messages import Fetch, FetchSnapshot, Message
from odradek.controller.raft.snapshot import SnapshotChunk, SnapshotId
from odradek.controller.raft.state import PersistentState, Role


@dataclass(frozen=True, slots=True)
class LeaderAndEpoch:
    """Who leads which epoch as this node sees it, and its own role: what the controller layer reacts to."""

    leader_id: int | None
    epoch: int
    role: Role


@dataclass(slots=True)
class Ready:
    persist_state: PersistentState | None = None
    install_snapshot: SnapshotId | None = None
    truncate_to: int | None = None
    entries: list[Entry] = field(default_factory=list)
    messages: list[Message] = field(default_factory=list)
    committed: list[Entry] = field(default_factory=list)
    #: The new high watermark, when it moved since the previous Ready.
    high_watermark: int | None = None
    #: Set when the leader, epoch or this node's role changed since the previous Ready.
    leader_change: LeaderAndEpoch | None = None
    snapshot_chunks: list[SnapshotChunk] = field(default_factory=list)
    snapshot_reads: list[FetchSnapshot] = field(default_factory=list)
    parked_fetches: list[Fetch] = field(default_factory=list)
    #: The log end offset this Ready makes durable; `advance` uses it to count the leader's own copy.
    end_offset: int = 0
    #: What changed in the core since the previous Ready (role changes, snapshot installs, truncations), in
    #: order, for the shell to log; carrying them out needs nothing beyond the fields above.
    events: list[RaftEvent] = field(default_factory=list)

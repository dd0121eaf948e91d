"""`RaftNode`: the sans-I/O Raft state machine of one controller (voter) or broker (observer).

The shell feeds it messages (`step`), clock ticks (`tick`), proposals and snapshot events, then drains a
`Ready` (see ready.py for what to do with it, in order) and calls `advance`. Nothing here does I/O, sleeps
or reads a clock, so the same code runs under the gRPC shell and under the deterministic simulation.

Replication is pull-based as in KRaft (KIP-595): followers and observers send Fetch with their log end
offset and last fetched epoch, the leader answers with entries, a diverging epoch to truncate to, or a
snapshot to download, plus its high watermark. The leader commits once a majority of voters have fetched
past an offset and that offset covers an entry of the leader's own epoch.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace

from odradek.controller.raft.config import Faults, RaftConfig
from odradek.controller.raft.events import (
    BecameCandidate,
    BecameFollower,
    BecameLeader,
    BecameProspective,
    BecameUnattached,
    LogTruncated,
    RaftEvent,
    SnapshotInstalled,
    SteppedDown,
    Voted,
    ids,
)
from odradek.controller.raft.log import Entry, RaftLog
from odradek.controller.raft.messages import (
    FENCED_LEADER_EPOCH,
    INCONSISTENT_VOTER_SET,
    NONE,
    NOT_LEADER_OR_FOLLOWER,
    SNAPSHOT_NOT_FOUND,
    UNKNOWN_LEADER_EPOCH,
    BeginQuorumEpoch,
    BeginQuorumEpochResponse,
    DivergingEpoch,
    EndQuorumEpoch,
    EndQuorumEpochResponse,
    Fetch,
    FetchResponse,
    FetchSnapshot,
    FetchSnapshotResponse,
    Message,
    Vote,
    VoteResponse,
)
from odradek.controller.raft.ready import LeaderAndEpoch, Ready
from odradek.controller.raft.snapshot import EMPTY_SNAPSHOT, SnapshotChunk, SnapshotDownload, SnapshotId
from odradek.controller.raft.state import PersistentState, QuorumState, Role, check_transition
from odradek.proto.common_pb2 import ErrorCode

_NEVER = -(1 << 62)
# Python 3.11's EnumType.__getattr__ puts every `Role.X` through a slow lookup (~0.13 us), and the core compares
# roles on every tick and message (millions of times in the simulations), so it compares with these.
_UNATTACHED, _FOLLOWER, _PROSPECTIVE = Role.UNATTACHED, Role.FOLLOWER, Role.PROSPECTIVE
_CANDIDATE, _LEADER, _RESIGNED = Role.CANDIDATE, Role.LEADER, Role.RESIGNED


class NotLeaderError(Exception):
    """A proposal reached a node that is not the leader; `leader_id` is where to retry, if known."""

    def __init__(self, leader_id: int | None, epoch: int) -> None:
        super().__init__(f"not the leader (leader {leader_id}, epoch {epoch})")
        self.leader_id = leader_id
        self.epoch = epoch


class RaftSafetyError(RuntimeError):
    """Something only a broken peer or a broken core can cause: two leaders in an epoch, committed data lost."""


@dataclass(slots=True)
class PeerProgress:
    """The leader's view of one fetcher: how much of the log it provably holds, when it last fetched and when it
    last held the leader's whole log (Kafka's LeaderState.ReplicaState). Both times are None until it fetches from
    this leader: a new leader knows nothing of the fetches its predecessor served."""

    node_id: int
    voter: bool
    end_offset: int = -1
    last_fetch_tick: int | None = None  # its last fetch that matched the leader's log
    acknowledged: bool = False
    last_caught_up_tick: int | None = None
    leader_end_at_last_fetch: int = -1  # the leader's log end offset at its last fetch
    # Its last Fetch or FetchSnapshot of this epoch, matching or not: what check-quorum counts.
    last_seen_tick: int = _NEVER


class RaftNode:
    """One node of the metadata quorum. Voters are `voters`; any other `node_id` is an observer."""

    def __init__(
        self,
        node_id: int,
        voters: Iterable[int],
        *,
        rng: random.Random,
        config: RaftConfig | None = None,
        state: PersistentState | None = None,
        entries: Iterable[Entry] = (),
        snapshot_id: SnapshotId | None = None,
        faults: Faults | None = None,
    ) -> None:
        self._id = node_id
        self._voters = frozenset(voters)
        if not self._voters:
            raise ValueError("the voter set is empty")
        self._majority = len(self._voters) // 2 + 1
        self._is_voter = node_id in self._voters
        self._cfg = config or RaftConfig()
        self._rng = rng
        self._faults = faults or Faults()
        self._log = RaftLog(snapshot_id or EMPTY_SNAPSHOT, entries)
        self._now = 0

        st = state or PersistentState()
        if st.leader_id == node_id and self._is_voter:
            role = _RESIGNED  # led before the restart; its in-memory leader state is gone
        elif st.leader_id is not None and st.leader_id != node_id:
            role = _FOLLOWER
        else:
            role = _UNATTACHED
        self._q = QuorumState(role, st.epoch, st.leader_id, st.voted_for)

        # Commit and apply progress; the applier restarts from the snapshot.
        self._hw = self._log.start_offset
        self._hw_changed = False
        self._applied = self._log.start_offset  # next offset to hand over in Ready.committed
        # What the shell holds: entries below _written_end were handed over, those from _unstable_from on
        # must be (re)written, and below _durable_end they are fsynced (counts as the leader's own ack).
        self._written_end = self._unstable_from = self._durable_end = self._log.end_offset
        self._handed_state = st
        self._handed_leader: LeaderAndEpoch | None = None
        # The quorum state both views above were last compared with: the state is immutable and replaced on every
        # transition, so while it is the same object neither view can have changed (has_ready runs every tick).
        self._handed_q: QuorumState | None = None
        self._outstanding = False

        # Pending parts of the next Ready.
        self._msgs: list[Message] = []
        self._install: SnapshotId | None = None
        self._chunks: list[SnapshotChunk] = []
        self._reads: list[FetchSnapshot] = []
        self._parked: list[Fetch] = []
        self._events: list[RaftEvent] = []

        # Role-specific volatile state, reset on every transition.
        self._deadline = 0  # election timeout, or fetch timeout for a follower
        self._retry_at = 0  # when to resend unanswered requests
        self._votes: set[int] = set()
        self._replicas: dict[int, PeerProgress] = {}
        self._acked: set[int] = set()
        self._successors: tuple[int, ...] = ()
        self._epoch_start = 0  # offset of the leader's leader-change entry
        self._last_contact = _NEVER  # last answer from the leader (follower)
        self._fetch_inflight: int | None = None
        self._fetch_sent_at = 0
        self._fetch_backoff_until = 0
        self._download: SnapshotDownload | None = None
        self._correlation = rng.getrandbits(30)
        self._reset_timers()
        if self._voters == {node_id} and role is not _FOLLOWER:
            self._deadline = self._now  # the only voter has no one to wait for: it campaigns at its first tick

        self._handlers: dict[type, Callable[..., None]] = {
            Vote: self._on_vote,
            VoteResponse: self._on_vote_response,
            BeginQuorumEpoch: self._on_begin_quorum_epoch,
            BeginQuorumEpochResponse: self._on_quorum_epoch_ack,
            EndQuorumEpoch: self._on_end_quorum_epoch,
            EndQuorumEpochResponse: self._on_quorum_epoch_ack,
            Fetch: self._on_fetch,
            FetchResponse: self._on_fetch_response,
            FetchSnapshot: self._on_fetch_snapshot,
            FetchSnapshotResponse: self._on_fetch_snapshot_response,
        }

    # ------------------------------------------------------------------ read-only view

    @property
    def node_id(self) -> int:
        return self._id

    @property
    def voters(self) -> frozenset[int]:
        return self._voters

    @property
    def is_voter(self) -> bool:
        return self._is_voter

    @property
    def role(self) -> Role:
        return self._q.role

    @property
    def epoch(self) -> int:
        return self._q.epoch

    @property
    def leader_id(self) -> int | None:
        """The leader this node believes is alive: itself when leading, the one it fetches from otherwise."""
        return self._q.leader_id if self._q.role in (_LEADER, _FOLLOWER) else None

    @property
    def voted_for(self) -> int | None:
        return self._q.voted_for

    @property
    def quorum_state(self) -> QuorumState:
        return self._q

    @property
    def high_watermark(self) -> int:
        return self._hw

    @property
    def log(self) -> RaftLog:
        """The in-memory log. Read it, never mutate it: the core tracks what the shell has persisted."""
        return self._log

    @property
    def now(self) -> int:
        """Ticks since this node was constructed."""
        return self._now

    def peer_progress(self) -> list[PeerProgress]:
        """The leader's view of every fetcher (for `cluster quorum`); empty unless leading."""
        return [replace(r) for r in self._replicas.values()] if self._q.role is _LEADER else []

    # ------------------------------------------------------------------ inputs

    def tick(self) -> None:
        """Advance the logical clock by one tick and fire whatever timeout is due."""
        self._now += 1
        now, role = self._now, self._q.role
        if role is _LEADER:
            self._check_quorum()
            if self._q.role is _LEADER and now >= self._retry_at:
                for v in self._replicas.values():
                    if v.voter and not v.acknowledged:
                        self._send(BeginQuorumEpoch(self._id, v.node_id, self._q.epoch))
                self._retry_at = now + self._cfg.request_timeout_ticks
        elif role is _FOLLOWER:
            if now >= self._deadline:
                silent = self._silence()
                if self._is_voter:
                    self._become_prospective(silent)
                else:
                    self._become_unattached(self._q.epoch, reason=silent)
            elif self._fetch_inflight is not None and now - self._fetch_sent_at >= self._cfg.request_timeout_ticks:
                self._fetch_inflight = None  # lost: ask again
        elif role is _UNATTACHED:
            if self._is_voter:
                if now >= self._deadline:
                    self._become_prospective("election timeout")
            elif now >= self._retry_at:
                self._discover_leader()
        elif role in (_PROSPECTIVE, _CANDIDATE):
            if now >= self._deadline:
                self._become_prospective(f"election timeout as {role.value} (votes from {ids(self._votes)})")
            elif now >= self._retry_at:
                self._request_votes()
        elif role is _RESIGNED:
            if now >= self._deadline:
                self._become_prospective("election timeout after resigning")
            elif now >= self._retry_at:
                self._send_end_quorum_epoch()
        self._pump_fetch()

    def step(self, message: Message) -> None:
        """Handle one message addressed to this node."""
        if message.dst != self._id:
            raise ValueError(f"message for node {message.dst} delivered to node {self._id}")
        if message.src == self._id:
            return
        self._handlers[type(message)](message)
        self._pump_fetch()

    def propose(self, data: Sequence[bytes]) -> int:
        """Append entries on the leader; returns the offset of the last one (committed once HW passes it)."""
        q = self._q
        if q.role is not _LEADER:
            raise NotLeaderError(self.leader_id, q.epoch)
        if not data:
            raise ValueError("nothing to propose")
        start = self._log.end_offset
        self._log.append(Entry(start + i, q.epoch, bytes(d)) for i, d in enumerate(data))
        return self._log.end_offset - 1

    def resign(self) -> None:
        """Graceful shutdown of a leader: stop accepting writes and ask the voters to elect a successor now."""
        if self._q.role is _LEADER:
            self._become_resigned("asked to resign")

    def snapshot_taken(self, offset: int, epoch: int) -> None:
        """The applier saved a snapshot of everything below `offset` (`epoch` = epoch of offset - 1)."""
        if offset > self._applied:
            raise ValueError(f"snapshot at {offset} covers entries not yet handed to the applier ({self._applied})")
        if offset > self._log.start_offset:
            self._log.trim_prefix(SnapshotId(offset, epoch))

    def answer_fetch_snapshot(self, request: FetchSnapshot, data: bytes, size: int) -> None:
        """The shell read `data` at `request.position` of the snapshot (total `size` bytes) for a Ready read."""
        q = self._q
        if q.role is not _LEADER or request.epoch != q.epoch:
            self._snapshot_error(request, NOT_LEADER_OR_FOLLOWER)
        elif request.snapshot_id != self._log.snapshot_id or request.position > size:
            self._snapshot_error(request, SNAPSHOT_NOT_FOUND)
        else:
            self._send(
                FetchSnapshotResponse(
                    self._id,
                    request.src,
                    q.epoch,
                    self._id,
                    request.snapshot_id,
                    request.position,
                    data,
                    size,
                    correlation_id=request.correlation_id,
                )
            )

    # ------------------------------------------------------------------ Ready

    def has_ready(self) -> bool:
        return bool(
            self._msgs
            or self._unstable_from < self._log.end_offset
            or self._unstable_from < self._written_end
            or self._applied < self._hw
            or self._hw_changed
            or self._events
            or self._install is not None
            or self._chunks
            or self._reads
            or self._parked
            or self._views_changed()
        )

    def _views_changed(self) -> bool:
        q = self._q
        if q is self._handed_q:
            return False
        if self._persist_view() != self._handed_state or self._leader_view() != self._handed_leader:
            return True
        self._handed_q = q  # an equal state: nothing to hand over until the next transition
        return False

    def ready(self) -> Ready:
        """Hand over everything pending; the shell must `advance` it before asking for the next one."""
        if self._outstanding:
            raise RuntimeError("advance() the previous Ready first")
        log, end = self._log, self._log.end_offset
        if self._q is self._handed_q:  # both views are those last handed over (see _views_changed)
            persist_state = leader_change = None
        else:
            state, leader = self._persist_view(), self._leader_view()
            persist_state = state if state != self._handed_state else None
            leader_change = leader if leader != self._handed_leader else None
            self._handed_state, self._handed_leader, self._handed_q = state, leader, self._q
        ready = Ready(
            persist_state=persist_state,
            install_snapshot=self._install,
            truncate_to=self._unstable_from if self._unstable_from < self._written_end else None,
            entries=log.entries(self._unstable_from) if self._unstable_from < end else [],
            messages=self._msgs,
            committed=log.entries(self._applied, self._hw) if self._applied < self._hw else [],
            high_watermark=self._hw if self._hw_changed else None,
            leader_change=leader_change,
            snapshot_chunks=self._chunks,
            snapshot_reads=self._reads,
            parked_fetches=self._parked,
            end_offset=end,
            events=self._events,
        )
        self._msgs, self._chunks, self._reads, self._parked, self._events = [], [], [], [], []
        self._install = None
        self._hw_changed = False
        self._written_end = self._unstable_from = end
        self._applied = self._hw
        self._outstanding = True
        return ready

    def advance(self, ready: Ready) -> None:
        """The shell persisted `ready` (and sent its messages): the leader may now count its own copy."""
        if not self._outstanding:
            raise RuntimeError("no Ready outstanding")
        self._outstanding = False
        self._durable_end = min(ready.end_offset, self._unstable_from)
        self._maybe_advance_hw()

    # ------------------------------------------------------------------ transitions

    def _transition(self, role: Role, epoch: int, leader_id: int | None, voted_for: int | None) -> None:
        new = QuorumState(role, epoch, leader_id, voted_for)
        check_transition(self._q, new, self._id, voter=self._is_voter)
        self._q = new
        self._votes = set()
        self._replicas = {}
        self._acked = set()
        self._successors = ()
        self._fetch_inflight = None
        self._fetch_backoff_until = 0
        self._download = None
        self._retry_at = self._now + self._cfg.request_timeout_ticks

    def _become_unattached(
        self, epoch: int, leader_id: int | None = None, delay: int | None = None, *, reason: str
    ) -> None:
        q = self._q
        if epoch == q.epoch:
            self._transition(_UNATTACHED, epoch, leader_id if q.leader_id is None else q.leader_id, q.voted_for)
        else:
            self._transition(_UNATTACHED, epoch, leader_id, None)
        self._events.append(BecameUnattached(epoch, reason))
        self._deadline = self._now + (self._election_timeout() if delay is None else delay)
        if not self._is_voter:
            self._retry_at = self._now  # observers look for the new leader at the next tick

    def _vote_for(self, candidate: int) -> None:
        q = self._q
        self._transition(_UNATTACHED, q.epoch, q.leader_id, candidate)
        self._events.append(Voted(candidate, q.epoch))
        self._deadline = self._now + self._election_timeout()

    def _become_follower(self, epoch: int, leader_id: int, *, heard_from_leader: bool) -> None:
        q = self._q
        self._transition(_FOLLOWER, epoch, leader_id, q.voted_for if epoch == q.epoch else None)
        self._events.append(BecameFollower(leader_id, epoch))
        self._last_contact = self._now if heard_from_leader else _NEVER
        self._deadline = self._now + self._fetch_timeout()

    def _become_prospective(self, reason: str) -> None:
        q = self._q
        self._transition(_PROSPECTIVE, q.epoch, q.leader_id, q.voted_for)
        self._events.append(BecameProspective(q.epoch, reason))
        self._start_election()

    def _become_candidate(self) -> None:
        pre_votes = tuple(sorted(self._votes))
        self._transition(_CANDIDATE, self._q.epoch + 1, None, self._id)
        self._events.append(BecameCandidate(self._q.epoch, pre_votes))
        self._start_election()

    def _start_election(self) -> None:
        self._votes = {self._id}
        self._deadline = self._now + self._election_timeout()
        self._request_votes()
        self._count_votes()

    def _request_votes(self) -> None:
        q, log = self._q, self._log
        pre_vote = q.role is _PROSPECTIVE
        epoch = q.epoch + 1 if pre_vote else q.epoch
        for v in sorted(self._voters - self._votes):
            self._send(Vote(self._id, v, epoch, log.last_epoch, log.end_offset, pre_vote))
        self._retry_at = self._now + self._cfg.request_timeout_ticks

    def _count_votes(self) -> None:
        if len(self._votes) < self._majority:
            return
        if self._q.role is _PROSPECTIVE:
            self._become_candidate()
        elif self._q.role is _CANDIDATE:
            self._become_leader()

    def _become_leader(self) -> None:
        q, now = self._q, self._now
        votes = tuple(sorted(self._votes))
        self._transition(_LEADER, q.epoch, self._id, self._id)
        self._events.append(BecameLeader(q.epoch, votes))
        # Every voter gets a full fetch timeout to show up before check-quorum counts it missing.
        self._replicas = {v: PeerProgress(v, True, last_seen_tick=now) for v in self._voters if v != self._id}
        self._epoch_start = self._log.end_offset
        self._log.append([Entry(self._epoch_start, q.epoch, b"", control=True)])
        for v in sorted(self._replicas):
            self._send(BeginQuorumEpoch(self._id, v, q.epoch))

    def _become_resigned(self, reason: str) -> None:
        q = self._q
        others = [v for v in self._voters if v != self._id]
        ends = {v: r.end_offset for v, r in self._replicas.items()}
        successors = tuple(sorted(others, key=lambda v: (-ends.get(v, -1), v)))
        self._transition(_RESIGNED, q.epoch, self._id, q.voted_for)
        self._events.append(SteppedDown(q.epoch, reason))
        self._successors = successors
        self._deadline = self._now + self._election_timeout()
        self._send_end_quorum_epoch()

    def _send_end_quorum_epoch(self) -> None:
        for v in self._successors:
            if v not in self._acked:
                self._send(EndQuorumEpoch(self._id, v, self._q.epoch, self._successors))
        self._retry_at = self._now + self._cfg.request_timeout_ticks

    def _learn_epoch(self, epoch: int, leader_id: int | None) -> None:
        """A peer reported a higher epoch: join it, following its leader if the peer knows one."""
        if epoch <= self._q.epoch:
            return
        if leader_id is not None and leader_id != self._id:
            self._become_follower(epoch, leader_id, heard_from_leader=False)
        else:
            self._become_unattached(epoch, reason=f"a peer answered with epoch {epoch}")

    def _follow_hint(self, epoch: int, leader_id: int | None) -> None:
        """Use a leader hint from any response: a higher epoch, or the leader of our epoch we lost track of."""
        q = self._q
        if epoch > q.epoch:
            self._learn_epoch(epoch, leader_id)
        elif (
            epoch == q.epoch
            and leader_id is not None
            and leader_id != self._id
            and q.role in (_UNATTACHED, _PROSPECTIVE, _CANDIDATE)
            and q.leader_id in (None, leader_id)
        ):
            self._become_follower(epoch, leader_id, heard_from_leader=False)

    # ------------------------------------------------------------------ elections

    def _on_vote(self, m: Vote) -> None:
        q = self._q
        if not self._is_voter or m.src not in self._voters:
            self._answer_vote(m, False, INCONSISTENT_VOTER_SET)
            return
        if m.candidate_epoch < q.epoch:
            self._answer_vote(m, False, FENCED_LEADER_EPOCH)
            return
        log_ok = (m.last_epoch, m.end_offset) >= (self._log.last_epoch, self._log.end_offset)
        if m.pre_vote:
            # Granting changes nothing here; refusing while the leader is alive keeps a node that was
            # merely cut off from disrupting a working quorum.
            self._answer_vote(m, m.candidate_epoch > q.epoch and log_ok and not self._leader_alive())
            return
        if m.candidate_epoch > q.epoch:
            self._become_unattached(m.candidate_epoch, reason=f"{m.src} asks for votes in epoch {m.candidate_epoch}")
            q = self._q
        if q.voted_for == m.src:
            granted = True  # a retried request
        elif q.voted_for is None and q.leader_id is None and q.role in (_UNATTACHED, _PROSPECTIVE) and log_ok:
            self._vote_for(m.src)
            granted = True
        else:
            granted = False
        self._answer_vote(m, granted)

    def _answer_vote(self, m: Vote, granted: bool, error: ErrorCode.ValueType = NONE) -> None:
        q = self._q
        self._send(VoteResponse(self._id, m.src, q.epoch, self.leader_id, granted, m.pre_vote, error))

    def _leader_alive(self) -> bool:
        role = self._q.role
        if role is _LEADER:
            return True
        return role is _FOLLOWER and self._now - self._last_contact < self._cfg.fetch_timeout_ticks

    def _on_vote_response(self, m: VoteResponse) -> None:
        q = self._q
        if m.epoch > q.epoch:
            self._learn_epoch(m.epoch, m.leader_id)
            return
        collecting = (q.role is _PROSPECTIVE and m.pre_vote) or (
            q.role is _CANDIDATE and not m.pre_vote and m.epoch == q.epoch
        )
        if not collecting or m.src not in self._voters:
            return
        if m.granted:
            self._votes.add(m.src)
            self._count_votes()
        else:
            self._follow_hint(m.epoch, m.leader_id)

    # ------------------------------------------------------------------ leader announcements

    def _on_begin_quorum_epoch(self, m: BeginQuorumEpoch) -> None:
        q = self._q
        if m.epoch < q.epoch:
            self._send(BeginQuorumEpochResponse(self._id, m.src, q.epoch, self.leader_id, FENCED_LEADER_EPOCH))
            return
        if m.epoch == q.epoch and q.leader_id not in (None, m.src):
            raise RaftSafetyError(f"node {m.src} claims epoch {m.epoch}, led by {q.leader_id}")
        if q.role is _FOLLOWER and m.epoch == q.epoch:
            self._heard_from_leader()
        else:
            self._become_follower(m.epoch, m.src, heard_from_leader=True)
        self._send(BeginQuorumEpochResponse(self._id, m.src, m.epoch, m.src))

    def _on_end_quorum_epoch(self, m: EndQuorumEpoch) -> None:
        q = self._q
        if m.epoch < q.epoch:
            self._send(EndQuorumEpochResponse(self._id, m.src, q.epoch, self.leader_id, FENCED_LEADER_EPOCH))
            return
        if m.epoch == q.epoch and q.leader_id not in (None, m.src):
            raise RaftSafetyError(f"node {m.src} resigns epoch {m.epoch}, led by {q.leader_id}")
        if self._is_voter and (m.epoch > q.epoch or q.role in (_FOLLOWER, _UNATTACHED)):
            successors = m.preferred_successors
            # The best-placed successor campaigns at once, the others back off by their rank.
            delay = successors.index(self._id) * self._cfg.election_backoff_ticks if self._id in successors else None
            self._become_unattached(m.epoch, leader_id=m.src, delay=delay, reason=f"leader {m.src} resigned")
        self._send(EndQuorumEpochResponse(self._id, m.src, self._q.epoch, self.leader_id))

    def _on_quorum_epoch_ack(self, m: BeginQuorumEpochResponse | EndQuorumEpochResponse) -> None:
        q = self._q
        if m.epoch > q.epoch:
            self._learn_epoch(m.epoch, m.leader_id)
        elif m.epoch == q.epoch and m.error == NONE:
            self._acked.add(m.src)
            replica = self._replicas.get(m.src)
            if replica is not None:
                replica.acknowledged = True

    def _check_quorum(self) -> None:
        """A leader cut off from a majority resigns, so a partitioned leader does not linger as one."""
        horizon = self._now - self._cfg.fetch_timeout_ticks
        alive = 1 + sum(1 for r in self._replicas.values() if r.voter and r.last_seen_tick >= horizon)
        if alive < self._majority:
            self._become_resigned(
                f"check-quorum lost ({alive} of {len(self._voters)} voters fetched"
                f" in the last {self._cfg.fetch_timeout_ticks} ticks)"
            )

    # ------------------------------------------------------------------ fetch: leader side

    def _on_fetch(self, m: Fetch) -> None:
        q, log = self._q, self._log
        if q.role is not _LEADER or m.epoch != q.epoch:
            if m.epoch < q.epoch:
                error = FENCED_LEADER_EPOCH
            elif q.role is not _LEADER:
                error = NOT_LEADER_OR_FOLLOWER
            else:
                error = UNKNOWN_LEADER_EPOCH
            self._answer_fetch(m, error=error)
            return
        replica = self._replica(m.src)
        replica.last_seen_tick = self._now
        replica.acknowledged = True
        if m.fetch_offset < log.start_offset:
            self._answer_fetch(m, snapshot_id=log.snapshot_id)
            return
        epoch, end = log.end_offset_for_epoch(m.last_fetched_epoch)
        if epoch != m.last_fetched_epoch or m.fetch_offset > end:
            if end < log.start_offset:
                self._answer_fetch(m, snapshot_id=log.snapshot_id)  # diverged inside our snapshot
            else:
                self._answer_fetch(m, diverging=DivergingEpoch(epoch, end))
            return
        # The fetch proves the replica holds our log below fetch_offset: that is its acknowledgement.
        self._record_fetch(replica, m.fetch_offset)
        if replica.voter:
            self._maybe_advance_hw()
        entries = log.read(m.fetch_offset, self._cfg.max_fetch_bytes)
        if not entries and m.max_wait_ms > 0 and self._hw <= m.high_watermark:
            self._parked.append(m)
            return
        self._answer_fetch(m, entries=entries)

    def _record_fetch(self, replica: PeerProgress, fetch_offset: int) -> None:
        """A fetch that matched our log, as Kafka's ReplicaState.updateFollowerState records it: the replica caught
        up now if it holds our whole log, else at its previous fetch if it now holds what our log held then."""
        end, now = self._log.end_offset, self._now
        if fetch_offset >= end:
            replica.last_caught_up_tick = now
        elif replica.leader_end_at_last_fetch > 0 and fetch_offset >= replica.leader_end_at_last_fetch:
            replica.last_caught_up_tick = replica.last_fetch_tick
        replica.leader_end_at_last_fetch = end
        replica.last_fetch_tick = now
        replica.end_offset = fetch_offset

    def _replica(self, node_id: int) -> PeerProgress:
        replica = self._replicas.get(node_id)
        if replica is None:
            replica = self._replicas[node_id] = PeerProgress(node_id, node_id in self._voters)
        return replica

    def _answer_fetch(
        self,
        m: Fetch,
        *,
        error: ErrorCode.ValueType = NONE,
        entries: tuple[Entry, ...] = (),
        diverging: DivergingEpoch | None = None,
        snapshot_id: SnapshotId | None = None,
    ) -> None:
        q = self._q
        self._send(
            FetchResponse(
                self._id,
                m.src,
                q.epoch,
                self.leader_id,
                m.fetch_offset,
                m.last_fetched_epoch,
                self._hw,
                entries,
                diverging,
                snapshot_id,
                error,
                m.correlation_id,
            )
        )

    def _maybe_advance_hw(self) -> None:
        if self._q.role is not _LEADER:
            return
        if self._faults.commit_without_majority:
            candidate = self._log.end_offset
        else:
            ends = sorted([self._durable_end] + [r.end_offset for r in self._replicas.values() if r.voter])
            candidate = ends[-self._majority]
        # Only an entry of our own epoch may be committed by counting (Raft's figure 8); the older entries
        # below it are committed with it.
        if candidate > self._epoch_start or self._faults.commit_previous_epoch_by_count:
            self._set_hw(candidate)

    def _set_hw(self, hw: int) -> None:
        if hw > self._hw:
            self._hw = hw
            self._hw_changed = True

    def _on_fetch_snapshot(self, m: FetchSnapshot) -> None:
        q = self._q
        if q.role is not _LEADER or m.epoch != q.epoch:
            self._snapshot_error(m, FENCED_LEADER_EPOCH if m.epoch < q.epoch else NOT_LEADER_OR_FOLLOWER)
            return
        self._replica(m.src).last_seen_tick = self._now
        if m.snapshot_id != self._log.snapshot_id:
            self._snapshot_error(m, SNAPSHOT_NOT_FOUND)
        else:
            self._reads.append(m)

    def _snapshot_error(self, m: FetchSnapshot, error: ErrorCode.ValueType) -> None:
        q = self._q
        self._send(
            FetchSnapshotResponse(
                self._id,
                m.src,
                q.epoch,
                self.leader_id,
                m.snapshot_id,
                m.position,
                error=error,
                correlation_id=m.correlation_id,
            )
        )

    # ------------------------------------------------------------------ fetch: follower side

    def _pump_fetch(self) -> None:
        """Keep exactly one fetch (or snapshot fetch) outstanding to the leader while following."""
        q = self._q
        if q.role is not _FOLLOWER or self._fetch_inflight is not None or self._now < self._fetch_backoff_until:
            return
        assert q.leader_id is not None
        self._correlation += 1
        if self._download is not None:
            d = self._download
            self._send(
                FetchSnapshot(
                    self._id,
                    q.leader_id,
                    q.epoch,
                    d.snapshot_id,
                    d.position,
                    self._cfg.snapshot_chunk_bytes,
                    self._correlation,
                )
            )
        else:
            self._send(self._fetch_request(q.leader_id))
        self._fetch_inflight = self._correlation
        self._fetch_sent_at = self._now

    def _fetch_request(self, dst: int) -> Fetch:
        log = self._log
        return Fetch(
            self._id,
            dst,
            self._q.epoch,
            log.end_offset,
            log.last_epoch,
            self._hw,
            self._cfg.fetch_max_wait_ms,
            self._correlation,
        )

    def _discover_leader(self) -> None:
        """An observer without a leader asks a random voter, whose answer names the leader."""
        self._correlation += 1
        voter = self._rng.choice(sorted(self._voters))
        self._send(replace(self._fetch_request(voter), max_wait_ms=0))
        self._retry_at = self._now + self._cfg.request_timeout_ticks

    def _settle_inflight(self, correlation_id: int, error: ErrorCode.ValueType) -> None:
        if correlation_id == self._fetch_inflight:
            self._fetch_inflight = None
            if error != NONE:
                self._fetch_backoff_until = self._now + self._cfg.request_timeout_ticks

    def _heard_from_leader(self) -> None:
        self._last_contact = self._now
        self._deadline = self._now + self._fetch_timeout()

    def _on_fetch_response(self, m: FetchResponse) -> None:
        self._settle_inflight(m.correlation_id, m.error)
        if m.error != NONE:
            self._follow_hint(m.epoch, m.leader_id)
            return
        if not self._accept_from_leader(m.src, m.epoch):
            return
        log = self._log
        if (m.fetch_offset, m.last_fetched_epoch) != (log.end_offset, log.last_epoch):
            return  # answers a log we no longer have (duplicate or late)
        self._heard_from_leader()
        if m.snapshot_id is not None:
            if self._download is None or self._download.snapshot_id != m.snapshot_id:
                self._download = SnapshotDownload(m.snapshot_id)
                self._fetch_inflight = None
        elif self._download is not None:
            return  # an older answer; the snapshot download decides what comes next
        elif m.diverging_epoch is not None:
            self._truncate_diverging(m.diverging_epoch)
        else:
            if m.entries:
                log.append(m.entries)
            self._set_hw(min(m.high_watermark, log.end_offset))

    def _accept_from_leader(self, src: int, epoch: int) -> bool:
        """A successful answer comes from the leader of its epoch: follow it if we were not already."""
        q = self._q
        if q.role is _FOLLOWER and epoch == q.epoch and src == q.leader_id:
            return True
        if epoch > q.epoch or (
            epoch == q.epoch and q.leader_id in (None, src) and q.role in (_UNATTACHED, _PROSPECTIVE)
        ):
            self._become_follower(epoch, src, heard_from_leader=True)
            return True
        return False

    def _truncate_diverging(self, diverging: DivergingEpoch) -> None:
        _, own_end = self._log.end_offset_for_epoch(diverging.epoch)
        target = min(diverging.end_offset, own_end)
        if target < self._hw:
            raise RaftSafetyError(f"node {self._id}: divergence at {target} is below the high watermark {self._hw}")
        self._log.truncate(target)
        self._events.append(LogTruncated(target, diverging.epoch))
        self._unstable_from = min(self._unstable_from, target)
        self._durable_end = min(self._durable_end, target)

    def _on_fetch_snapshot_response(self, m: FetchSnapshotResponse) -> None:
        self._settle_inflight(m.correlation_id, m.error)
        download = self._download
        if m.error != NONE:
            if m.error == SNAPSHOT_NOT_FOUND and download is not None and download.snapshot_id == m.snapshot_id:
                self._download = None  # the leader moved on to a newer snapshot: fetch to learn which
            self._follow_hint(m.epoch, m.leader_id)
            return
        q = self._q
        if not (q.role is _FOLLOWER and m.epoch == q.epoch and m.src == q.leader_id):
            return
        if download is None or m.snapshot_id != download.snapshot_id or m.position != download.position:
            return
        self._heard_from_leader()
        if m.data:
            self._chunks.append(SnapshotChunk(m.snapshot_id, m.position, m.data))
            download.position += len(m.data)
        if download.position >= m.size:
            self._install_snapshot(download.snapshot_id)

    def _install_snapshot(self, snapshot_id: SnapshotId) -> None:
        if snapshot_id.end_offset < self._hw:
            raise RaftSafetyError(f"node {self._id}: snapshot {snapshot_id} is behind the high watermark")
        self._download = None
        self._log.reset(snapshot_id)
        self._events.append(SnapshotInstalled(snapshot_id, self._q.leader_id))
        self._install = snapshot_id
        self._written_end = self._unstable_from = snapshot_id.end_offset
        self._durable_end = min(self._durable_end, snapshot_id.end_offset)
        self._applied = snapshot_id.end_offset
        self._set_hw(snapshot_id.end_offset)

    # ------------------------------------------------------------------ helpers

    def _send(self, message: Message) -> None:
        self._msgs.append(message)

    def _persist_view(self) -> PersistentState:
        state = self._q.persistent()
        if self._faults.forget_votes:
            state = replace(state, voted_for=None)
        return state

    def _leader_view(self) -> LeaderAndEpoch:
        return LeaderAndEpoch(self.leader_id, self._q.epoch, self._q.role)

    def _silence(self) -> str:
        leader = self._q.leader_id
        if self._last_contact == _NEVER:
            return f"fetch timeout: leader {leader} never answered"
        return f"fetch timeout: leader {leader} silent for {self._now - self._last_contact} ticks"

    def _election_timeout(self) -> int:
        t = self._cfg.election_timeout_ticks
        return t + self._rng.randrange(t)

    def _fetch_timeout(self) -> int:
        # Jittered so the followers of a dead leader do not all campaign in the same tick.
        return self._cfg.fetch_timeout_ticks + self._rng.randrange(self._cfg.election_timeout_ticks)

    def _reset_timers(self) -> None:
        role = self._q.role
        if role is _FOLLOWER:
            self._deadline = self._now + self._fetch_timeout()
        else:
            self._deadline = self._now + self._election_timeout()
        self._retry_at = self._now

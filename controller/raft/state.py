"""Quorum roles, the table of legal transitions between them, and the state that must survive a restart.

Every role change of the core goes through `check_transition`, so a bug that would, say, let a node forget
its vote within an epoch or change leader within an epoch fails loudly at the transition instead of
surfacing later as two leaders.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Role(enum.Enum):
    UNATTACHED = "unattached"  # no leader known in this epoch (may have voted)
    FOLLOWER = "follower"  # fetching from the epoch's leader (voters and observers alike)
    PROSPECTIVE = "prospective"  # asking for pre-votes; the epoch is not bumped yet (KIP-996)
    CANDIDATE = "candidate"  # bumped the epoch, voted for itself, asking for votes
    LEADER = "leader"
    RESIGNED = "resigned"  # was leader of this epoch, accepts no writes, waits for a successor


_R = Role
LEGAL_TRANSITIONS: dict[Role, frozenset[Role]] = {
    _R.UNATTACHED: frozenset({_R.UNATTACHED, _R.FOLLOWER, _R.PROSPECTIVE}),
    _R.FOLLOWER: frozenset({_R.UNATTACHED, _R.FOLLOWER, _R.PROSPECTIVE}),
    _R.PROSPECTIVE: frozenset({_R.UNATTACHED, _R.FOLLOWER, _R.PROSPECTIVE, _R.CANDIDATE}),
    _R.CANDIDATE: frozenset({_R.UNATTACHED, _R.FOLLOWER, _R.PROSPECTIVE, _R.LEADER}),
    _R.LEADER: frozenset({_R.UNATTACHED, _R.FOLLOWER, _R.RESIGNED}),
    _R.RESIGNED: frozenset({_R.UNATTACHED, _R.FOLLOWER, _R.PROSPECTIVE}),
}
#: Observers (non-voters) only ever look for the leader and follow it.
OBSERVER_ROLES = frozenset({_R.UNATTACHED, _R.FOLLOWER})
#: Roles that may be entered with a higher epoch; every other change keeps the epoch.
EPOCH_CHANGING = frozenset({_R.UNATTACHED, _R.FOLLOWER, _R.CANDIDATE})
# Python 3.11's EnumType.__getattr__ makes each `Role.X` a slow lookup; check_transition runs on every role change.
_FOLLOWER, _CANDIDATE, _PROSPECTIVE = _R.FOLLOWER, _R.CANDIDATE, _R.PROSPECTIVE
_LEADER, _RESIGNED = _R.LEADER, _R.RESIGNED


class IllegalTransition(RuntimeError):
    """The core attempted a role change Raft forbids: a bug in the core, never a peer's fault."""


@dataclass(frozen=True, slots=True)
class PersistentState:
    """What the shell must fsync before sending the messages of the same Ready (KRaft's quorum-state file)."""

    epoch: int = 0
    voted_for: int | None = None
    leader_id: int | None = None


@dataclass(frozen=True, slots=True)
class QuorumState:
    """Role plus the per-epoch facts: once set within an epoch, `voted_for` and `leader_id` never change."""

    role: Role
    epoch: int
    leader_id: int | None = None
    voted_for: int | None = None

    def persistent(self) -> PersistentState:
        return PersistentState(self.epoch, self.voted_for, self.leader_id)


def check_transition(old: QuorumState, new: QuorumState, node_id: int, *, voter: bool) -> None:
    """Raise IllegalTransition unless `old -> new` is a move Raft allows for this node."""

    def fail(why: str) -> None:
        raise IllegalTransition(f"node {node_id}: {old} -> {new}: {why}")

    if not voter and new.role not in OBSERVER_ROLES:
        fail("an observer may only be unattached or follow")
    if new.role not in LEGAL_TRANSITIONS[old.role]:
        fail("role change not in the transition table")
    if new.epoch < old.epoch:
        fail("epoch went backwards")
    if new.epoch > old.epoch:
        if new.role not in EPOCH_CHANGING:
            fail("only unattached, follower or candidate start a new epoch")
        if new.role is _CANDIDATE and (old.role is not _PROSPECTIVE or new.epoch != old.epoch + 1):
            fail("a candidate comes from a won pre-vote and bumps the epoch by one")
    else:
        if new.role is _CANDIDATE:
            fail("a candidate must bump the epoch")
        if old.voted_for is not None and new.voted_for != old.voted_for:
            fail("a vote cannot change within an epoch")
        if old.leader_id is not None and new.leader_id != old.leader_id:
            fail("the leader cannot change within an epoch")
    if new.role is _FOLLOWER and new.leader_id in (None, node_id):
        fail("a follower follows another node")
    if new.role in (_LEADER, _RESIGNED) and new.leader_id != node_id:
        fail("a leader leads itself")
    if new.role is _LEADER and (old.role is not _CANDIDATE or new.voted_for != node_id):
        fail("only a candidate that voted for itself becomes leader")
    if new.role is _CANDIDATE and new.voted_for != node_id:
        fail("a candidate votes for itself")

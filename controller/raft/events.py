"""Transition events: what changed in the core and why, handed to the shell in `Ready.events` for its log.

The core stays free of logging (and of clocks): it records each role change, snapshot install and truncation as
a frozen value, and the shell writes `describe()` to the node log, so an operator reads elections in the same
words the data-driven tests assert.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from odradek.controller.raft.snapshot import SnapshotId


def ids(nodes: Iterable[int]) -> str:
    """Node ids as the log shows them: ascending, comma-separated ("1,3")."""
    return ",".join(str(n) for n in sorted(nodes)) or "none"


@dataclass(frozen=True, slots=True)
class BecameLeader:
    epoch: int
    votes: tuple[int, ...]

    def describe(self) -> str:
        return f"became leader of epoch {self.epoch} (votes from {ids(self.votes)})"


@dataclass(frozen=True, slots=True)
class BecameFollower:
    leader_id: int
    epoch: int

    def describe(self) -> str:
        return f"became follower of {self.leader_id} in epoch {self.epoch}"


@dataclass(frozen=True, slots=True)
class BecameProspective:
    """Asking for pre-votes (KIP-996): the epoch is not bumped until a majority would vote."""

    epoch: int
    reason: str

    def describe(self) -> str:
        return f"asking for pre-votes for epoch {self.epoch + 1}: {self.reason}"


@dataclass(frozen=True, slots=True)
class BecameCandidate:
    epoch: int
    pre_votes: tuple[int, ...]

    def describe(self) -> str:
        return f"became candidate in epoch {self.epoch} (pre-votes from {ids(self.pre_votes)})"


@dataclass(frozen=True, slots=True)
class BecameUnattached:
    epoch: int
    reason: str

    def describe(self) -> str:
        return f"no leader in epoch {self.epoch}: {self.reason}"


@dataclass(frozen=True, slots=True)
class Voted:
    candidate: int
    epoch: int

    def describe(self) -> str:
        return f"voted for {self.candidate} in epoch {self.epoch}"


@dataclass(frozen=True, slots=True)
class SteppedDown:
    """The leader resigned: check-quorum lost, or asked to (shutdown)."""

    epoch: int
    reason: str

    def describe(self) -> str:
        return f"stepped down as leader of epoch {self.epoch}: {self.reason}"


@dataclass(frozen=True, slots=True)
class SnapshotInstalled:
    snapshot_id: SnapshotId
    leader_id: int | None

    def describe(self) -> str:
        sid = self.snapshot_id
        return f"installed snapshot up to offset {sid.end_offset} (epoch {sid.epoch}) from {self.leader_id}"


@dataclass(frozen=True, slots=True)
class LogTruncated:
    """The log diverged from the leader's: entries at `offset` and above were dropped."""

    offset: int
    diverging_epoch: int

    def describe(self) -> str:
        return f"truncated the log to offset {self.offset} (diverged from the leader at epoch {self.diverging_epoch})"


RaftEvent = (
    BecameLeader
    | BecameFollower
    | BecameProspective
    | BecameCandidate
    | BecameUnattached
    | Voted
    | SteppedDown
    | SnapshotInstalled
    | LogTruncated
)

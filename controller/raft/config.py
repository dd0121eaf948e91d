"""Timing and size settings of the core, and the fault switches the simulation uses to prove its checkers bite.

Time is in ticks: the shell calls `RaftNode.tick()` at a fixed period and converts KRaft's `quorum.*.ms`
settings by dividing by it, which keeps the core deterministic under a simulated clock.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RaftConfig:
    #: Base election timeout; each wait is drawn from [t, 2t) so candidates rarely collide.
    election_timeout_ticks: int = 10
    #: A follower campaigns, and a leader resigns (check-quorum), after this long without fetch traffic.
    fetch_timeout_ticks: int = 20
    #: Resend an unanswered request (fetch, vote, begin/end quorum epoch) after this long. Must exceed
    #: `fetch_max_wait_ms` plus a round trip, or long-polled fetches are resent while parked.
    request_timeout_ticks: int = 4
    #: After a leader's EndQuorumEpoch, the n-th preferred successor waits n times this before campaigning.
    election_backoff_ticks: int = 2
    #: Upper bound on record data in one FetchResponse (at least one entry is always sent).
    max_fetch_bytes: int = 1 << 20
    #: Chunk size a follower asks for in FetchSnapshot.
    snapshot_chunk_bytes: int = 1 << 20
    #: Long-poll budget a follower puts in its Fetch; the leader's shell may park the fetch that long.
    fetch_max_wait_ms: int = 500

    def __post_init__(self) -> None:
        if min(self.election_timeout_ticks, self.request_timeout_ticks, self.fetch_timeout_ticks) < 1:
            raise ValueError("timeouts must be at least one tick")
        if self.max_fetch_bytes < 1 or self.snapshot_chunk_bytes < 1:
            raise ValueError("fetch sizes must be positive")


@dataclass(frozen=True, slots=True)
class Faults:
    """Deliberate safety bugs. Never set outside tests: each one breaks a Raft invariant on purpose."""

    #: The leader commits everything it has appended, without waiting for a majority.
    commit_without_majority: bool = False
    #: The leader commits an older epoch's entries by counting replicas (Raft paper, figure 8).
    commit_previous_epoch_by_count: bool = False
    #: Votes are granted but left out of the persisted state, so a restarted voter votes twice.
    forget_votes: bool = False

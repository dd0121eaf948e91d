"""What the transaction coordinator knows about one transactional id: its state and the producer it belongs to.

A ``TxnMetadata`` is immutable: every change is a new value, persisted to ``__transaction_state`` before the
coordinator acts on it, so the last record of an id in that partition is always the state a new coordinator
resumes from.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from odradek.client.structs import TopicPartition

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
MAX_PRODUCER_EPOCH = 32767  # int16: the epoch markers may be written with, never handed to a producer


class TxnState(enum.Enum):
    """Kafka's transaction states; the value is the name tools print."""

    EMPTY = "Empty"
    ONGOING = "Ongoing"
    PREPARE_COMMIT = "PrepareCommit"
    PREPARE_ABORT = "PrepareAbort"
    COMPLETE_COMMIT = "CompleteCommit"
    COMPLETE_ABORT = "CompleteAbort"
    PREPARE_EPOCH_FENCE = "PrepareEpochFence"
    DEAD = "Dead"

    @property
    def preparing(self) -> bool:
        """Markers are being written: the id accepts nothing new until they are."""
        return self in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)

    @property
    def complete(self) -> bool:
        return self in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)

    @property
    def idle(self) -> bool:
        """No transaction open or finishing: a new one may begin, the id may expire."""
        return self in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)


# The states each state may be entered from (Kafka's TransactionState.validPreviousStates). PrepareEpochFence is
# Kafka's in-memory step of a fence; odradek's fence goes from Ongoing to PrepareAbort in one write, so it only
# appears here for completeness and in records written by other implementations.
VALID_PREVIOUS: dict[TxnState, frozenset[TxnState]] = {
    TxnState.EMPTY: frozenset({TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT}),
    TxnState.ONGOING: frozenset({TxnState.ONGOING, TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT}),
    TxnState.PREPARE_COMMIT: frozenset({TxnState.ONGOING}),
    TxnState.PREPARE_ABORT: frozenset({TxnState.ONGOING, TxnState.PREPARE_EPOCH_FENCE}),
    TxnState.COMPLETE_COMMIT: frozenset({TxnState.PREPARE_COMMIT}),
    TxnState.COMPLETE_ABORT: frozenset({TxnState.PREPARE_ABORT}),
    TxnState.PREPARE_EPOCH_FENCE: frozenset({TxnState.ONGOING}),
    TxnState.DEAD: frozenset({TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT}),
}


def can_transition(old: TxnState, new: TxnState) -> bool:
    return old in VALID_PREVIOUS[new]


@dataclass(frozen=True, slots=True)
class TxnMetadata:
    """One transactional id. ``producer_id``/``producer_epoch`` are what the producer must present now;
    ``last_producer_epoch`` is the epoch before the last retryable bump (-1 after a fence or a timeout, which no
    retry may claim), ``last_producer_id`` the producer id before an epoch overflow moved it to a new one.
    ``txn_start_ms`` is when the open or last completed transaction began (its first partition was added), -1
    before the id's first transaction and after each InitProducerId, as Kafka keeps it."""

    transactional_id: str
    producer_id: int
    last_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[TopicPartition]
    txn_start_ms: int
    last_update_ms: int

    @property
    def overflowed(self) -> bool:
        """In Prepare*/Complete* right after an epoch overflow: the transaction's data and markers belong to
        ``last_producer_id`` while the producer already holds the new id at epoch 0. Every other bump leaves the
        epoch at 1 or more, and an end that kept the epoch (before KIP-890) clears ``last_producer_epoch``, so epoch
        0 with a last epoch there can only mean this."""
        return (
            (self.state.preparing or self.state.complete)
            and self.producer_epoch == 0
            and self.last_producer_id >= 0
            and self.last_producer_epoch >= 0
        )

    @property
    def marker_producer(self) -> tuple[int, int]:
        """(producer id, epoch) the markers of a Prepare* transaction are written with: the bumped epoch of the
        id that wrote the data."""
        if self.overflowed:
            return self.last_producer_id, MAX_PRODUCER_EPOCH
        return self.producer_id, self.producer_epoch

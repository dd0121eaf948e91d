"""The core of the ISR change sender: it queues partition leaders' ISR changes, builds one AlterPartition request
for everything queued, and tells what each answer means. Sans-I/O: ``isr_changes.IsrChangeSender`` sends, waits,
backs off and logs what the answers say.

A change stays *pending* in the leader (and keeps counting in its maximal ISR, so the high watermark waits for a
member being added) until committed metadata at a higher partition epoch settles it
(``replication.LeaderState.on_metadata``). The leader gives a change up only on an answer that proves the
controller applied nothing: the controller checks the leader and partition epochs before anything else, so
INVALID_REQUEST or INELIGIBLE_REPLICA at the current epochs means this change was never committed. Any other
refusal may be the answer to a retry of a change the controller already committed (its first answer lost to a
deadline or a controller failover): INVALID_UPDATE_VERSION then only says the epoch moved on, and forgetting the
change would let the high watermark advance without a replica the committed ISR contains.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

from odradek.broker.replication import IsrChange
from odradek.client.errors import ErrorCode
from odradek.proto import controller_pb2 as cpb


class _Leadership(Protocol):
    @property
    def pending(self) -> IsrChange | None: ...


class LeaderPartition(Protocol):
    """What the core reads of a partition it queues a change for (``partition.Partition``): its name and the change
    its leader state still waits for, if it still leads."""

    @property
    def topic(self) -> str: ...

    @property
    def partition(self) -> int: ...

    @property
    def leader_state(self) -> _Leadership | None: ...


# Nothing was decided (no controller, or it could not finish): send the same change again.
RETRY_CODES = frozenset(
    {ErrorCode.NOT_CONTROLLER, ErrorCode.REQUEST_TIMED_OUT, ErrorCode.STALE_BROKER_EPOCH, ErrorCode.NETWORK_EXCEPTION}
)
# Decided against at the current epochs: the change was not applied, the leader may ask anew.
NOT_APPLIED_CODES = frozenset({ErrorCode.INVALID_REQUEST, ErrorCode.INELIGIBLE_REPLICA})

P = TypeVar("P", bound=LeaderPartition)
# A queued change and the partition (of the shell's own type) it is for.
Item = tuple[P, IsrChange]


@dataclass(slots=True)
class Outcome(Generic[P]):
    """What one answer means: ``retry`` goes out again after the backoff; ``not_applied`` is given up (after the
    backoff, so a follower that keeps qualifying does not flood the controller); anything else waits for the
    metadata that settles it."""

    retry: list[Item[P]] = field(default_factory=list)
    not_applied: list[Item[P]] = field(default_factory=list)
    refused_whole: int | None = None  # the request's own error, when it was refused as a whole
    # Each item refused with an error that was not a retry, and that error (for the shell to log).
    refusals: list[tuple[Item[P], int]] = field(default_factory=list)


class IsrChangeBatcher(Generic[P]):
    def __init__(self, broker_id: int) -> None:
        self.broker_id = broker_id
        self._queue: dict[tuple[str, int], Item[P]] = {}

    def submit(self, p: P, change: IsrChange) -> None:
        self._queue[(p.topic, p.partition)] = (p, change)

    def requeue(self, items: list[Item[P]]) -> None:
        for p, c in items:
            self._queue.setdefault((p.topic, p.partition), (p, c))

    def take(self) -> list[Item[P]]:
        """Everything queued that its partition still waits for (settled or superseded changes are dropped)."""
        batch, self._queue = self._queue, {}
        return [(p, c) for p, c in batch.values() if p.leader_state is not None and p.leader_state.pending == c]

    def request(self, items: list[Item[P]], broker_epoch: int) -> cpb.AlterPartitionRequest:
        topics: dict[str, list[cpb.AlterPartitionItem]] = {}
        for p, c in items:
            topics.setdefault(p.topic, []).append(
                cpb.AlterPartitionItem(
                    partition=p.partition,
                    leader_epoch=c.leader_epoch,
                    partition_epoch=c.partition_epoch,
                    new_isr=c.new_isr,
                )
            )
        return cpb.AlterPartitionRequest(
            broker_id=self.broker_id,
            broker_epoch=broker_epoch,
            topics=[cpb.AlterPartitionTopic(name=n, partitions=ps) for n, ps in topics.items()],
        )

    def on_response(self, items: list[Item[P]], response: cpb.AlterPartitionResponse | None) -> Outcome[P]:
        """Classify the answer to a request for ``items`` (None: no answer, e.g. a deadline or a lost connection)."""
        if response is None or response.error in RETRY_CODES:
            return Outcome(retry=list(items))
        if response.error != ErrorCode.NONE:
            # Refused as a whole before any partition was looked at: nothing of this request was applied, but an
            # earlier attempt may have been, so ask again rather than forget.
            return Outcome(retry=list(items), refused_whole=response.error)
        by_key = {(p.topic, p.partition): (p, c) for p, c in items}
        outcome: Outcome[P] = Outcome()
        for t in response.topics:
            for r in t.partitions:
                item = by_key.get((t.name, r.partition))
                if item is None or r.error == ErrorCode.NONE:
                    continue
                if r.error in RETRY_CODES:
                    outcome.retry.append(item)
                else:
                    if r.error in NOT_APPLIED_CODES:
                        outcome.not_applied.append(item)
                    outcome.refusals.append((item, r.error))
        return outcome

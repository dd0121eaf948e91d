"""What a member does with its partitions around a rebalance, as pure decisions for the coordinator shell.

The shell calls these at three points and invokes the listener callbacks in the order given by ``callbacks()``,
updating its owned set to ``owned`` only after them (so a listener can still commit for what it gives up):

- ``prepare_join`` before sending JoinGroup. Eager: revoke everything. Cooperative: revoke only partitions of
  topics no longer subscribed. Either way, if the member's generation or member id was reset (fenced, expired,
  ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID), everything is *lost* instead: someone else may already own it, so the
  listener must not commit for it.
- ``complete_join`` with the Assignment from SyncGroup. Eager: everything assigned is new. Cooperative: partitions
  owned but no longer assigned are revoked and the member must rejoin at once, so that the partitions it gave up
  reach their new owner in the next rebalance; newly assigned ones are added. An assignment naming a topic outside
  the subscription (the subscription changed while the rebalance ran) is not applied: rejoin with the current one.
- ``prepare_leave`` before LeaveGroup or close: revoke everything, or lose it if the generation is gone or a
  rebalance is in progress (the partitions may already be promised elsewhere).

As in Kafka, ``on_partitions_assigned`` follows every completed rebalance even when nothing is new, eager
``on_partitions_revoked`` precedes every join, and otherwise revoked and lost are only called with something in
them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from odradek.client.consumer.assignors.base import Assignor, RebalanceProtocol
from odradek.client.consumer.protocol import Assignment
from odradek.client.errors import ConfigError
from odradek.client.structs import TopicPartition

Callback = Literal["on_partitions_revoked", "on_partitions_lost", "on_partitions_assigned"]
_PROTOCOL_ORDER: tuple[RebalanceProtocol, ...] = ("eager", "cooperative")  # least to most advanced, as Kafka's ids


@dataclass(frozen=True)
class RebalanceStep:
    """One step's outcome: partitions to pass to each callback (sorted), the owned set afterwards, and whether the
    member must (re)join the group now."""

    revoked: tuple[TopicPartition, ...] = ()
    lost: tuple[TopicPartition, ...] = ()
    assigned: tuple[TopicPartition, ...] = ()
    owned: frozenset[TopicPartition] = frozenset()
    needs_rejoin: bool = False
    call_revoked: bool = False  # eager joins call on_partitions_revoked even with nothing to revoke
    call_assigned: bool = False  # every completed rebalance calls on_partitions_assigned

    def callbacks(self) -> list[tuple[Callback, tuple[TopicPartition, ...]]]:
        """The listener calls to make, in order."""
        out: list[tuple[Callback, tuple[TopicPartition, ...]]] = []
        if self.lost:
            out.append(("on_partitions_lost", self.lost))
        if self.revoked or self.call_revoked:
            out.append(("on_partitions_revoked", self.revoked))
        if self.assigned or self.call_assigned:
            out.append(("on_partitions_assigned", self.assigned))
        return out


def choose_protocol(assignors: Sequence[Assignor]) -> RebalanceProtocol:
    """The most advanced protocol every configured assignor supports (Kafka's rule): "range" with
    "cooperative-sticky" runs eager, "cooperative-sticky" alone cooperative."""
    if not assignors:
        raise ConfigError("partition.assignment.strategy: at least one assignor is required")
    common = set(_PROTOCOL_ORDER)
    for assignor in assignors:
        common &= set(assignor.supported_protocols)
    if not common:
        names = ", ".join(a.name for a in assignors)
        raise ConfigError(f"partition.assignment.strategy: assignors {names} share no rebalance protocol")
    return max(common, key=_PROTOCOL_ORDER.index)


def prepare_join(
    protocol: RebalanceProtocol,
    owned: Iterable[TopicPartition],
    subscribed_topics: Iterable[str],
    generation_valid: bool = True,
) -> RebalanceStep:
    owned_set = frozenset(owned)
    if not generation_valid:
        return RebalanceStep(lost=_sorted(owned_set))
    if protocol == "eager":
        return RebalanceStep(revoked=_sorted(owned_set), call_revoked=True)
    topics = set(subscribed_topics)
    revoked = {tp for tp in owned_set if tp.topic not in topics}
    return RebalanceStep(revoked=_sorted(revoked), owned=owned_set - revoked)


def complete_join(
    protocol: RebalanceProtocol,
    owned: Iterable[TopicPartition],
    assignment: Assignment,
    subscribed_topics: Iterable[str],
) -> RebalanceStep:
    owned_set = frozenset(owned)
    assigned_set = frozenset(assignment.partitions)
    topics = set(subscribed_topics)
    if any(tp.topic not in topics for tp in assigned_set):
        return RebalanceStep(owned=owned_set, needs_rejoin=True)
    revoked = owned_set - assigned_set
    # Under eager, prepare_join already gave everything up, so ``owned`` is empty and nothing is revoked here; a
    # shell that skipped it still never keeps a partition it was not assigned.
    return RebalanceStep(
        revoked=_sorted(revoked),
        assigned=_sorted(assigned_set - owned_set),
        owned=assigned_set,
        needs_rejoin=protocol == "cooperative" and bool(revoked),
        call_assigned=True,
    )


def prepare_leave(
    owned: Iterable[TopicPartition], generation_valid: bool = True, rebalance_in_progress: bool = False
) -> RebalanceStep:
    owned_set = frozenset(owned)
    if not generation_valid or rebalance_in_progress:
        return RebalanceStep(lost=_sorted(owned_set))
    return RebalanceStep(revoked=_sorted(owned_set))


def lose_all(owned: Iterable[TopicPartition]) -> RebalanceStep:
    """The member learned it is no longer in the group (fenced, session expired, max.poll.interval.ms exceeded)
    before it could rejoin: everything it owned is lost and it must join again."""
    return RebalanceStep(lost=_sorted(frozenset(owned)), needs_rejoin=True)


def _sorted(partitions: Iterable[TopicPartition]) -> tuple[TopicPartition, ...]:
    return tuple(sorted(partitions))

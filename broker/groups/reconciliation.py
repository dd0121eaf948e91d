"""How one member of a KIP-848 consumer group moves from its current assignment to its target, one heartbeat at a
time (Kafka's CurrentAssignmentBuilder rules).

The invariant it keeps: a partition is owned by at most one member at any time. So a member never gets a partition
another member still holds (assigned or pending revocation), and a member that must give partitions up stays at
its epoch, keeping only what it may keep, until it acknowledges the revocation by heartbeating an owned set without
them. Only then does it move to the target epoch and receive its new partitions, each as soon as its previous
owner released it.

States (``MemberState``): STABLE (it holds its whole target at the target epoch), UNREVOKED_PARTITIONS (it must
revoke first; its epoch stays), UNRELEASED_PARTITIONS (at the target epoch, still waiting for partitions others
hold).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from odradek.broker.groups.consumer_records import NO_PARTITIONS, MemberState, Partitions, TopicId


@dataclass(frozen=True, slots=True)
class CurrentAssignment:
    """A member's reconciliation state, as its current assignment record stores it."""

    member_epoch: int
    previous_member_epoch: int
    state: MemberState
    assigned: Partitions = NO_PARTITIONS
    pending_revocation: Partitions = NO_PARTITIONS

    def advanced(
        self, epoch: int, state: MemberState, assigned: Partitions, pending: Partitions = NO_PARTITIONS
    ) -> CurrentAssignment:
        """The next state; the epoch it leaves becomes the previous one (a member whose answer with the new epoch was
        lost may still heartbeat with it)."""
        return CurrentAssignment(epoch, self.member_epoch, state, assigned, pending)


class FencedByUnknownState(Exception):
    """A member in a state a newer coordinator wrote, that still owns partitions: it must drop them and rejoin."""


def reconcile(
    current: CurrentAssignment,
    target_epoch: int,
    target: Partitions,
    subscribed: frozenset[TopicId],
    owned: Partitions | None,
    held_by_other: Callable[[tuple[TopicId, int]], bool],
) -> CurrentAssignment:
    """The member's next state. ``owned`` is what its heartbeat reports (None: not reported), ``held_by_other``
    whether another member still assigned, or still revoking, a partition."""
    state = current.state
    if state is MemberState.STABLE:
        if current.member_epoch == target_epoch:
            return _drop_unsubscribed(current, subscribed, owned)
        return _next(current, current.member_epoch, target_epoch, target, subscribed, owned, held_by_other)
    if state is MemberState.UNREVOKED_PARTITIONS:
        if _owns_any(owned, current.pending_revocation):
            return _drop_unsubscribed(current, subscribed, owned)
        return _next(current, current.member_epoch, target_epoch, target, subscribed, owned, held_by_other)
    if state is MemberState.UNRELEASED_PARTITIONS:
        return _next(current, current.member_epoch, target_epoch, target, subscribed, owned, held_by_other)
    if owned is None or owned:
        raise FencedByUnknownState()
    return _next(current, target_epoch, target_epoch, target, subscribed, owned, held_by_other)


def _owns_any(owned: Partitions | None, partitions: Partitions) -> bool:
    """Whether the member may still own some of ``partitions``: not reported counts as still owned."""
    return owned is None or not owned.isdisjoint(partitions)


def _drop_unsubscribed(
    current: CurrentAssignment, subscribed: frozenset[TopicId], owned: Partitions | None
) -> CurrentAssignment:
    """At its epoch, a member that unsubscribed from a topic must revoke that topic's partitions at once."""
    gone = frozenset(tp for tp in current.assigned if tp[0] not in subscribed)
    if not gone:
        return current
    pending = current.pending_revocation | gone
    if _owns_any(owned, pending):
        return current.advanced(
            current.member_epoch, MemberState.UNREVOKED_PARTITIONS, current.assigned - gone, pending
        )
    return current.advanced(current.member_epoch, current.state, current.assigned - gone, current.pending_revocation)


def _next(
    current: CurrentAssignment,
    epoch: int,
    target_epoch: int,
    target: Partitions,
    subscribed: frozenset[TopicId],
    owned: Partitions | None,
    held_by_other: Callable[[tuple[TopicId, int]], bool],
) -> CurrentAssignment:
    target = frozenset(tp for tp in target if tp[0] in subscribed)
    kept = current.assigned & target
    revoke = current.assigned - kept
    wanted = target - kept
    # A partition this member is itself still revoking is not held by another.
    unreleased = frozenset(tp for tp in wanted if tp not in current.pending_revocation and held_by_other(tp))
    if revoke and _owns_any(owned, revoke):
        return current.advanced(epoch, MemberState.UNREVOKED_PARTITIONS, kept, revoke)
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    return current.advanced(target_epoch, state, kept | (wanted - unreleased))

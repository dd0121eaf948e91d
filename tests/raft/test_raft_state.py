"""The role transition table: which moves are legal, and the per-epoch facts that must never change."""

from __future__ import annotations

import pytest

from odradek.controller.raft import IllegalTransition, QuorumState, Role
from odradek.controller.raft.state import check_transition

U, F, P, C, L, R = Role.UNATTACHED, Role.FOLLOWER, Role.PROSPECTIVE, Role.CANDIDATE, Role.LEADER, Role.RESIGNED
ME = 1


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (QuorumState(U, 1), QuorumState(U, 1, voted_for=2)),  # vote
        (QuorumState(U, 1), QuorumState(F, 3, leader_id=2)),  # learn a newer leader
        (QuorumState(F, 1, 2), QuorumState(P, 1, 2)),  # fetch timeout: pre-vote, epoch unchanged
        (QuorumState(P, 1, 2), QuorumState(C, 2, None, ME)),
        (QuorumState(C, 2, None, ME), QuorumState(L, 2, ME, ME)),
        (QuorumState(C, 2, None, ME), QuorumState(F, 2, 3, ME)),  # another won this epoch
        (QuorumState(L, 2, ME, ME), QuorumState(R, 2, ME, ME)),
        (QuorumState(R, 2, ME, ME), QuorumState(U, 3, None, 3)),
        (QuorumState(F, 2, 3), QuorumState(U, 2, 3)),  # the leader resigned
    ],
)
def test_legal(old: QuorumState, new: QuorumState) -> None:
    check_transition(old, new, ME, voter=True)


@pytest.mark.parametrize(
    ("old", "new", "voter"),
    [
        (QuorumState(U, 1), QuorumState(C, 2, None, ME), True),  # no election without a pre-vote
        (QuorumState(P, 1), QuorumState(C, 3, None, ME), True),  # candidates bump by exactly one
        (QuorumState(U, 1), QuorumState(L, 1, ME, ME), True),
        (QuorumState(U, 2, None, 3), QuorumState(U, 2, None, 4), True),  # second vote in an epoch
        (QuorumState(F, 2, 3), QuorumState(F, 2, 4), True),  # second leader in an epoch
        (QuorumState(F, 2, 3), QuorumState(F, 1, 3), True),  # epoch going back
        (QuorumState(L, 2, ME, ME), QuorumState(P, 2, ME, ME), True),
        (QuorumState(U, 2), QuorumState(F, 2, ME), True),  # following oneself
        (QuorumState(U, 2), QuorumState(P, 2), False),  # observers never campaign
    ],
)
def test_illegal(old: QuorumState, new: QuorumState, voter: bool) -> None:
    with pytest.raises(IllegalTransition):
        check_transition(old, new, ME, voter=voter)

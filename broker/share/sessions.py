"""Share sessions (KIP-932): the partitions a share group member fetches from one broker, so that its ShareFetch
requests name only what changed (Kafka's ShareSessionCache).

A session is keyed by (group, member) on a broker and carries an epoch the member's next request must name:

- ShareFetch with epoch 0 opens a session (replacing any the member had) with the request's partitions; it may
  not carry acknowledgements (INVALID_REQUEST). Epoch N > 0 must be the session's (else INVALID_SHARE_SESSION_EPOCH;
  no session: SHARE_SESSION_NOT_FOUND); the request's partitions are added, its forgotten ones removed, and the
  session expects N + 1 next (after 2^31 - 1 comes 1).
- Epoch -1 closes the session: the request's acknowledgements are applied, nothing is fetched, and the member's
  records still acquired on the session's partitions are released; a ShareFetch closing it may not forget
  partitions (INVALID_REQUEST).
- ShareAcknowledge never opens one (epoch 0: INVALID_SHARE_SESSION_EPOCH); it checks and moves the epoch like a
  ShareFetch, or closes the session with -1.
- A session unused for ``idle_ms`` is dropped, as a member that stopped fetching from this broker would be, its
  records released.

Sans-I/O: each call returns a ``SessionStep`` saying what the shell does; the shell releases records.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from odradek.client.errors import ErrorCode

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
MAX_EPOCH = 2**31 - 1

TopicIdPartition = tuple[bytes, int]  # (topic id, partition)


def next_epoch(epoch: int) -> int:
    return 1 if epoch >= MAX_EPOCH else epoch + 1


@dataclass(slots=True)
class ShareSession:
    group_id: str
    member_id: str
    epoch: int  # what the next request must carry
    partitions: dict[TopicIdPartition, None] = field(default_factory=dict)  # an ordered set
    last_used_ms: int = 0
    rotation: int = 0  # where the next fetch starts among the partitions, so each gets its turn first

    def fetch_order(self) -> list[TopicIdPartition]:
        """The partitions, starting at the rotation point (moved one on for the next fetch)."""
        order = list(self.partitions)
        if not order:
            return order
        start = self.rotation % len(order)
        self.rotation = start + 1
        return order[start:] + order[:start]


@dataclass(frozen=True, slots=True)
class SessionStep:
    """A request's session: refused (``error``), or the session it continues; ``closing``: epoch -1, the shell
    applies the acknowledgements then releases ``released`` (the session's partitions); ``released`` also lists
    the partitions a request forgot."""

    error: ErrorCode.ValueType = ErrorCode.NONE
    message: str = ""
    session: ShareSession | None = None
    closing: bool = False
    released: tuple[TopicIdPartition, ...] = ()


class ShareSessions:
    def __init__(self, idle_ms: int) -> None:
        self.idle_ms = idle_ms
        self._sessions: dict[tuple[str, str], ShareSession] = {}

    def __len__(self) -> int:
        return len(self._sessions)

    def has_group(self, group_id: str) -> bool:
        """Whether a member of the group has a share session here."""
        return any(g == group_id for g, _ in self._sessions)

    def get(self, group_id: str, member_id: str) -> ShareSession | None:
        return self._sessions.get((group_id, member_id))

    def fetch(
        self,
        group_id: str,
        member_id: str,
        epoch: int,
        partitions: Iterable[TopicIdPartition],
        forgotten: Iterable[TopicIdPartition],
        acknowledging: bool,
        now_ms: int,
    ) -> SessionStep:
        """A ShareFetch's session (see the module docstring)."""
        key = (group_id, member_id)
        forgotten = tuple(forgotten)
        if epoch == INITIAL_EPOCH:
            if acknowledging:
                return SessionStep(ErrorCode.INVALID_REQUEST, "A request opening a share session acknowledges nothing.")
            opened = ShareSession(group_id, member_id, next_epoch(epoch), dict.fromkeys(partitions), now_ms)
            self._sessions[key] = opened
            return SessionStep(session=opened)
        session = self._sessions.get(key)
        if session is None:
            return SessionStep(ErrorCode.SHARE_SESSION_NOT_FOUND, f"No share session of member {member_id}.")
        if epoch == FINAL_EPOCH:
            if forgotten:
                return SessionStep(ErrorCode.INVALID_REQUEST, "A request closing a share session forgets nothing.")
            del self._sessions[key]
            return SessionStep(session=session, closing=True, released=tuple(session.partitions))
        if epoch != session.epoch:
            return SessionStep(
                ErrorCode.INVALID_SHARE_SESSION_EPOCH, f"The share session expects epoch {session.epoch}, not {epoch}."
            )
        for tp in partitions:
            session.partitions[tp] = None
        for tp in forgotten:
            session.partitions.pop(tp, None)
        session.epoch = next_epoch(epoch)
        session.last_used_ms = now_ms
        return SessionStep(session=session, released=forgotten)

    def acknowledge(self, group_id: str, member_id: str, epoch: int, now_ms: int) -> SessionStep:
        """A ShareAcknowledge's session (see the module docstring)."""
        if epoch == INITIAL_EPOCH:
            return SessionStep(ErrorCode.INVALID_SHARE_SESSION_EPOCH, "ShareAcknowledge cannot open a share session.")
        key = (group_id, member_id)
        session = self._sessions.get(key)
        if session is None:
            return SessionStep(ErrorCode.SHARE_SESSION_NOT_FOUND, f"No share session of member {member_id}.")
        if epoch == FINAL_EPOCH:
            del self._sessions[key]
            return SessionStep(session=session, closing=True, released=tuple(session.partitions))
        if epoch != session.epoch:
            return SessionStep(
                ErrorCode.INVALID_SHARE_SESSION_EPOCH, f"The share session expects epoch {session.epoch}, not {epoch}."
            )
        session.epoch = next_epoch(epoch)
        session.last_used_ms = now_ms
        return SessionStep(session=session)

    def drop(self, group_id: str, member_id: str) -> ShareSession | None:
        """The member left its group: its session goes (the shell releases its records)."""
        return self._sessions.pop((group_id, member_id), None)

    def expire(self, now_ms: int) -> list[ShareSession]:
        """Drop the sessions unused for ``idle_ms``; the shell releases their members' records."""
        gone = [s for s in self._sessions.values() if s.last_used_ms + self.idle_ms <= now_ms]
        for s in gone:
            del self._sessions[(s.group_id, s.member_id)]
        return gone

    def next_deadline_ms(self) -> int | None:
        return min((s.last_used_ms + self.idle_ms for s in self._sessions.values()), default=None)

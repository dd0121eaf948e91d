"""One member of a classic group as the coordinator tracks it, and how new member ids are made.

A member is *awaiting join* while its JoinGroup call is parked (it holds that call's token) and *awaiting sync*
while its SyncGroup call is. A member waiting on either needs no heartbeat: its session deadline is enforced again
once the coordinator answers it. A member that has never completed a join (``is_new``) gets no such pass, so a
client that gave up on a long rebalance does not stay in the group forever.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from .messages import Protocol, Token

# Makes a member id from a prefix (the group instance id for a static member, else the client id). The shell
# injects one drawing on a random UUID; the default counter keeps tests deterministic.
MemberIdFactory = Callable[[str], str]


class SequentialMemberIds:
    """``prefix-1``, ``prefix-2``, ...: deterministic ids for tests and simulations."""

    def __init__(self) -> None:
        self._next = 0

    def __call__(self, prefix: str) -> str:
        self._next += 1
        return f"{prefix}-{self._next}"


@dataclass(slots=True)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: tuple[Protocol, ...]
    assignment: bytes = b""
    join_token: Token | None = None
    sync_token: Token | None = None
    session_deadline_ms: int | None = None
    is_new: bool = False

    @property
    def awaiting_join(self) -> bool:
        return self.join_token is not None

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_token is not None

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata(self, protocol_name: str | None) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol_name:
                return metadata
        return b""

    def has_satisfied_heartbeat(self) -> bool:
        """Whether a passed session deadline is forgiven: the member is parked in a join or sync."""
        return not self.is_new and (self.awaiting_join or self.awaiting_sync)

    def matches(self, protocols: tuple[Protocol, ...]) -> bool:
        return self.protocols == protocols

    def vote(self, candidates: Iterable[str]) -> str:
        """The member's most preferred protocol among those every member supports."""
        allowed = set(candidates)
        for name, _ in self.protocols:
            if name in allowed:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(allowed)}")

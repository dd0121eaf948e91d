"""A test shell around one ClassicGroup: a simulated clock, numbered tokens, and the answers each token got."""

from __future__ import annotations

from dataclasses import dataclass, field

from odradek.broker.groups.group import ClassicGroup, GroupConfig
from odradek.broker.groups.messages import (
    GroupResult,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    LeavingMember,
    PersistGroup,
    Protocol,
    Respond,
    SyncGroupRequest,
    SyncGroupResponse,
)
from odradek.client.errors import ErrorCode

RANGE: tuple[Protocol, ...] = (("range", b"topics=t"),)
SESSION = 10_000
REBALANCE = 30_000
CONFIG = GroupConfig(initial_rebalance_delay_ms=3000)


@dataclass
class Harness:
    group: ClassicGroup = field(default_factory=lambda: ClassicGroup("g", CONFIG))
    now: int = 0
    next_token: int = 0
    answers: dict[int, JoinGroupResponse | SyncGroupResponse] = field(default_factory=dict)
    persists: list[PersistGroup] = field(default_factory=list)
    events: list[str] = field(default_factory=list)

    def take(self, result: GroupResult) -> GroupResult:
        for action in result.actions:
            if isinstance(action, Respond):
                assert isinstance(action.token, int)
                assert action.token not in self.answers, f"token {action.token} answered twice"
                self.answers[action.token] = action.response
            else:
                self.persists.append(action)
        self.events.extend(result.events)
        return result

    def token(self) -> int:
        self.next_token += 1
        return self.next_token

    def join(
        self,
        member_id: str = "",
        instance: str | None = None,
        client: str = "c",
        protocols: tuple[Protocol, ...] = RANGE,
        session: int = SESSION,
        rebalance: int = REBALANCE,
        protocol_type: str = "consumer",
    ) -> int:
        token = self.token()
        request = JoinGroupRequest(
            token, member_id, instance, client, "/10.0.0.1", session, rebalance, protocol_type, protocols
        )
        self.take(self.group.join(request, self.now))
        return token

    def join_answer(self, token: int) -> JoinGroupResponse:
        answer = self.answers[token]
        assert isinstance(answer, JoinGroupResponse)
        return answer

    def sync_answer(self, token: int) -> SyncGroupResponse:
        answer = self.answers[token]
        assert isinstance(answer, SyncGroupResponse)
        return answer

    def new_member(self, client: str = "c", **kwargs: object) -> tuple[str, int]:
        """The MEMBER_ID_REQUIRED handshake, then the real join: (member id, parked join token)."""
        first = self.join(client=client, **kwargs)  # type: ignore[arg-type]
        answer = self.join_answer(first)
        assert answer.error == ErrorCode.MEMBER_ID_REQUIRED
        return answer.member_id, self.join(answer.member_id, client=client, **kwargs)  # type: ignore[arg-type]

    def sync(
        self,
        member_id: str,
        generation: int,
        assignments: tuple[tuple[str, bytes], ...] = (),
        instance: str | None = None,
        protocol_type: str = "consumer",
    ) -> int:
        token = self.token()
        request = SyncGroupRequest(token, member_id, instance, generation, protocol_type, None, assignments)
        self.take(self.group.sync(request, self.now))
        return token

    def heartbeat(self, member_id: str, generation: int, instance: str | None = None) -> ErrorCode:
        response: HeartbeatResponse = self.group.heartbeat(HeartbeatRequest(member_id, instance, generation), self.now)
        return response.error

    def leave(self, *members: LeavingMember) -> LeaveGroupResponse:
        response, result = self.group.leave(LeaveGroupRequest(members), self.now)
        self.take(result)
        return response

    def advance(self, ms: int) -> None:
        self.now += ms
        self.take(self.group.tick(self.now))

    def until_answered(self, token: int, step: int = CONFIG.initial_rebalance_delay_ms) -> None:
        """Let time pass (in initial-delay steps) until ``token`` is answered; bounded."""
        for _ in range(100):
            if token in self.answers:
                return
            self.advance(step)
        raise AssertionError(f"token {token} never answered")

    def persisted(self, ok: bool = True, error: ErrorCode = ErrorCode.NOT_ENOUGH_REPLICAS) -> PersistGroup:
        """Complete the oldest outstanding append."""
        persist = self.persists.pop(0)
        self.take(self.group.on_persisted(persist.persist_id, self.now, ErrorCode.NONE if ok else error))
        return persist

    def stable_group(
        self,
        n: int,
        instances: tuple[str | None, ...] = (),
        protocols: tuple[Protocol, ...] = RANGE,
        protocol_type: str = "consumer",
    ) -> list[str]:
        """n members (static where ``instances`` says) joined, synced and stored: the member ids, leader first."""
        ids: list[str] = []
        tokens: list[int] = []
        for i in range(n):
            instance = instances[i] if i < len(instances) else None
            if instance is None:
                member_id, token = self.new_member(client=f"c{i}", protocols=protocols, protocol_type=protocol_type)
            else:
                token = self.join(instance=instance, client=f"c{i}", protocols=protocols, protocol_type=protocol_type)
                member_id = ""
            ids.append(member_id)
            tokens.append(token)
        self.until_answered(tokens[0])
        answers = [self.join_answer(t) for t in tokens]
        ids = [a.member_id for a in answers]
        leader = answers[0].leader
        generation = answers[0].generation_id
        assignment = tuple((m, f"g{generation}:{m}".encode()) for m in ids)
        syncs = [self.sync(m, generation, assignment if m == leader else (), protocol_type=protocol_type) for m in ids]
        self.persisted()
        assert all(self.sync_answer(t).error == ErrorCode.NONE for t in syncs)
        assert self.group.state.value == "Stable"
        return [leader, *[m for m in ids if m != leader]]

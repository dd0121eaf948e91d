"""Transcripts of the group coordinator's cores: one offsets partition's ``ClassicGroup``s and ``OffsetStore`` on a
simulated clock (file format: tests/raft/transcript.py).

The runner plays the coordinator shell's part as broker/groups/coordinator.py does: it routes requests to the
group (made on first use), checks offset commits against the group before the store stages them, appends what
the cores ask for to a simulated log (one batch per append, in Kafka's record layout) and reports the outcome
back, and fires each group's timers at their deadlines. So a transcript shows what a client would see, in order:
the events, the answers (``reply join#3: ...``, parked calls answered later under their token) and the appends
(``persist #N: ...``). Appends complete at once unless ``auto-persist off``; then ``persisted`` completes them.
The partitions of a commit all exist (the shell's metadata check is not the cores').

Commands (``group=G`` on any request picks the group, default ``g``; ``member=-`` is the empty member id):

- ``coordinator [initial-delay=3000] [min-session=6000] [max-session=1800000] [max-size=N]
  [new-member-timeout=300000] [metadata-max=4096]``: a fresh partition with these settings (Kafka's defaults;
  ``metadata-max`` is offset.metadata.max.bytes);
- ``auto-persist on|off``;
- ``join [member=ID] [instance=I] [client=c] [protocols=range,...] [topics=t,...] [session=10000]
  [rebalance=30000] [type=consumer]``: JoinGroup (each protocol's metadata is a consumer subscription to topics);
- ``sync member=ID gen=N [instance=I] [assign=ID:TEXT,...] [protocol=NAME]``: SyncGroup (the leader sends the
  assignment);
- ``heartbeat member=ID gen=N [instance=I]``, ``leave member=ID [instance=I] [reason=..]``;
- ``commit offsets=t-0:10,... [member=ID] [gen=N] [instance=I] [metadata=TEXT]``: OffsetCommit;
- ``txn-commit producer=P epoch=E offsets=... [member=ID] [gen=N] [instance=I]``: TxnOffsetCommit;
- ``marker producer=P commit|abort``: the producer's control batch reached the partition;
- ``fetch [partitions=t-0,...] [stable=yes]``: OffsetFetch (``stable``: require_stable);
- ``persisted [error=CODE]``: the oldest append in flight completes;
- ``tick ms=N``: time passes, each due timer fires at its own deadline;
- ``load``: the partition moves to a new coordinator, which replays the log (appends in flight are lost);
- ``state [group=G]``: the group, its members and offsets.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass

import transcript
from transcript import fields

from odradek.broker.groups.coordinator import commit_append_error
from odradek.broker.groups.group import ClassicGroup, GroupConfig
from odradek.broker.groups.loader import encode_records, group_record, replay_batches, snapshot_of
from odradek.broker.groups.members import SequentialMemberIds
from odradek.broker.groups.messages import (
    GroupResult,
    GroupSnapshot,
    HeartbeatRequest,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeavingMember,
    PersistGroup,
    Respond,
    SyncGroupRequest,
)
from odradek.broker.groups.offsets import NO_OFFSET, Append, OffsetAndMetadata, OffsetStore
from odradek.broker.groups.records import GroupMetadataValue
from odradek.client.consumer.protocol import Subscription
from odradek.client.errors import ErrorCode
from odradek.client.record.control import ControlType, build_control_batch
from odradek.client.structs import TopicPartition

MAX_FIRINGS = 10_000


def name(code: int) -> str:
    return ErrorCode.Name(ErrorCode.ValueType(code))


def partition(text: str) -> TopicPartition:
    topic, _, index = text.rpartition("-")
    return TopicPartition(topic, int(index))


def tp_text(tp: TopicPartition) -> str:
    return f"{tp.topic}-{tp.partition}"


def member_id(text: str) -> str:
    return "" if text == "-" else text


def fmt_snapshot(number: int, s: GroupSnapshot) -> list[str]:
    head = fields(gen=s.generation_id, type=s.protocol_type, protocol=s.protocol_name, leader=s.leader)
    out = [f"persist #{number}: group {s.group_id} {head}"]
    for m in s.members:
        detail = fields(
            instance=m.group_instance_id,
            session=m.session_timeout_ms,
            rebalance=m.rebalance_timeout_ms,
            assignment=m.assignment.decode(),
        )
        out.append(f"  member {m.member_id} {detail}")
    return out


def fmt_append(number: int, append: Append) -> str:
    records = " ".join(
        f"{key.topic}-{key.partition}={'tombstone' if value is None else value.offset}" for key, value in append.records
    )
    group = append.records[0][0].group
    txn = ""
    if append.producer_id >= 0:
        txn = f" (transactional: producer {append.producer_id} epoch {append.producer_epoch})"
    return f"persist #{number}: offsets of {group} {records}{txn}"


@dataclass
class Write:
    """An append in flight: what to print, the batch it puts in the log, and what its outcome does."""

    number: int
    batch: bytes
    done: Callable[[int], list[str]]


class Runner(transcript.Commands):
    """One offsets partition's groups and offsets, its log, and the calls parked in it."""

    def __init__(self) -> None:
        self.config = GroupConfig()
        self.metadata_max = 4096
        self.auto = True
        self.now = 0
        self.reset()

    def reset(self) -> None:
        self.groups: dict[str, ClassicGroup] = {}
        self.store = OffsetStore(self.metadata_max)
        self.member_ids = SequentialMemberIds()
        self.log: list[bytes] = []
        self.writes: list[Write] = []
        self.labels: dict[int, str] = {}
        self.numbers = itertools.count(1)
        self.tokens = itertools.count(1)

    # -- helpers

    def token(self, kind: str) -> int:
        token = next(self.tokens)
        self.labels[token] = f"{kind}#{token}"
        return token

    def group(self, group_id: str) -> ClassicGroup:
        group = self.groups.get(group_id)
        if group is None:
            group = self.groups[group_id] = ClassicGroup(group_id, self.config, self.member_ids, self.now)
        return group

    def reply(self, action: Respond) -> str:
        r = action.response
        label = self.labels.pop(int(action.token))  # type: ignore[call-overload]
        if isinstance(r, JoinGroupResponse):
            members = ",".join(
                m.member_id + (f"({m.group_instance_id})" if m.group_instance_id else "") for m in r.members
            )
            gen = r.generation_id if r.generation_id >= 0 else None
            skip = " skip-assignment" if r.skip_assignment else ""
            detail = fields(member=r.member_id, gen=gen, protocol=r.protocol_name, leader=r.leader, members=members)
            detail += skip
        else:
            detail = fields(protocol=r.protocol_name, assignment=r.assignment.decode())
        return f"reply {label}: {name(r.error)} {detail}".rstrip()

    def apply(self, group: ClassicGroup, result: GroupResult) -> list[str]:
        """Events first, then each action in order; the group's appends join the log's queue."""
        out = [f"event: {e}" for e in result.events]
        for action in result.actions:
            if isinstance(action, Respond):
                out.append(self.reply(action))
            else:
                out += self.persist_group(group, action)
        return out

    def persist_group(self, group: ClassicGroup, action: PersistGroup) -> list[str]:
        number = next(self.numbers)

        def done(error: int) -> list[str]:
            if self.groups.get(group.group_id) is not group:
                return []  # the partition moved meanwhile
            return self.apply(group, group.on_persisted(action.persist_id, self.now, ErrorCode.ValueType(error)))

        batch = encode_records([group_record(action.group)], self.now)
        self.writes.append(Write(number, batch, done))
        return fmt_snapshot(number, action.group)

    def append_offsets(self, token: int, errors: dict[TopicPartition, int], append: Append | None) -> list[str]:
        """Stage a commit's append; its answer comes when the append completes."""

        def answer(code: int) -> list[str]:
            final = {tp: commit_append_error(code) if c == ErrorCode.NONE else c for tp, c in errors.items()}
            label = self.labels.pop(token)
            return [f"reply {label}: " + " ".join(f"{tp_text(tp)}={name(c)}" for tp, c in final.items())]

        if append is None:
            return answer(ErrorCode.NONE)
        number = next(self.numbers)
        store = self.store

        def done(error: int) -> list[str]:
            if store is not self.store:
                return []  # the partition moved meanwhile: the new coordinator's store never saw it
            (store.on_appended if error == ErrorCode.NONE else store.on_append_failed)(append.append_id)
            return answer(error)

        batch = encode_records(append.records, self.now, append.producer_id, append.producer_epoch)
        self.writes.append(Write(number, batch, done))
        return [fmt_append(number, append)]

    def complete(self, error: int = ErrorCode.NONE) -> list[str]:
        write = self.writes.pop(0)
        if error == ErrorCode.NONE:
            self.log.append(write.batch)
            head = f"persisted #{write.number}"
        else:
            head = f"persist #{write.number} failed: {name(error)}"
        return [head, *write.done(error)]

    def settle(self, out: list[str]) -> list[str]:
        """With auto-persist, every append completes (and those it causes)."""
        while self.auto and self.writes:
            out += self.complete()
        return out

    # -- commands

    def cmd_coordinator(
        self,
        initial_delay: str = "3000",
        min_session: str = "6000",
        max_session: str = "1800000",
        max_size: str = str(2**31 - 1),
        new_member_timeout: str = "300000",
        metadata_max: str = "4096",
    ) -> list[str]:
        self.config = GroupConfig(
            int(initial_delay), int(min_session), int(max_session), int(max_size), int(new_member_timeout)
        )
        self.metadata_max = int(metadata_max)
        self.auto = True
        self.now = 0
        self.reset()
        return [f"t={self.now}"]

    def cmd_auto_persist(self, mode: str) -> list[str]:
        self.auto = mode == "on"
        return self.settle([])

    def cmd_join(
        self,
        member: str = "-",
        instance: str | None = None,
        client: str = "c",
        protocols: str = "range",
        topics: str = "t",
        session: str = "10000",
        rebalance: str = "30000",
        type: str = "consumer",
        group: str = "g",
    ) -> list[str]:
        token = self.token("join")
        if group not in self.groups and member_id(member):
            return [f"reply {self.labels.pop(token)}: UNKNOWN_MEMBER_ID member={member}"]  # as the shell answers
        metadata = Subscription(tuple(topics.split(","))).encode()
        request = JoinGroupRequest(
            token, member_id(member), instance, client, "/127.0.0.1", int(session), int(rebalance), type,
            tuple((p, metadata) for p in protocols.split(",")),
        )  # fmt: skip
        g = self.group(group)
        out = self.apply(g, g.join(request, self.now))
        return self.settle(out) + ([f"{self.labels[token]} waits"] if token in self.labels else [])

    def cmd_sync(
        self,
        member: str,
        gen: str,
        instance: str | None = None,
        assign: str = "",
        protocol: str | None = None,
        group: str = "g",
    ) -> list[str]:
        token = self.token("sync")
        if group not in self.groups:
            return [f"reply {self.labels.pop(token)}: UNKNOWN_MEMBER_ID"]
        pairs = [a.split(":", 1) for a in assign.split(",")] if assign else []
        assignments = tuple((m, text.encode()) for m, text in pairs)
        g = self.groups[group]
        request = SyncGroupRequest(token, member_id(member), instance, int(gen), "consumer", protocol, assignments)
        out = self.settle(self.apply(g, g.sync(request, self.now)))
        return out + ([f"{self.labels[token]} waits"] if token in self.labels else [])

    def cmd_heartbeat(self, member: str, gen: str, instance: str | None = None, group: str = "g") -> list[str]:
        g = self.groups.get(group)
        if g is None:
            return ["heartbeat: UNKNOWN_MEMBER_ID"]
        response = g.heartbeat(HeartbeatRequest(member_id(member), instance, int(gen)), self.now)
        return [f"heartbeat: {name(response.error)}"]

    def cmd_leave(self, member: str, instance: str | None = None, reason: str = "", group: str = "g") -> list[str]:
        g = self.groups.get(group)
        if g is None:
            return [f"leave: NONE {member}=UNKNOWN_MEMBER_ID"]
        response, result = g.leave(LeaveGroupRequest((LeavingMember(member_id(member), instance, reason),)), self.now)
        left = " ".join(f"{m.member_id or '-'}={name(m.error)}" for m in response.members)
        return self.settle([f"leave: {name(response.error)} {left}", *self.apply(g, result)])

    def refuse(self, token: int, wanted: dict[TopicPartition, OffsetAndMetadata], error: int) -> list[str]:
        """A commit refused as a whole: every partition gets the error."""
        return [f"reply {self.labels.pop(token)}: " + " ".join(f"{tp_text(tp)}={name(error)}" for tp in wanted)]

    @staticmethod
    def offsets(text: str, metadata: str) -> dict[TopicPartition, OffsetAndMetadata]:
        pairs = [item.split(":") for item in text.split(",")]
        return {partition(tp): OffsetAndMetadata(int(offset), metadata=metadata) for tp, offset in pairs}

    def cmd_commit(
        self,
        offsets: str,
        member: str = "-",
        gen: str = "-1",
        instance: str | None = None,
        metadata: str = "",
        group: str = "g",
    ) -> list[str]:
        token = self.token("commit")
        wanted = self.offsets(offsets, metadata)
        if group not in self.groups and (int(gen) >= 0 or member_id(member)):
            return self.refuse(token, wanted, ErrorCode.ILLEGAL_GENERATION)  # as the shell answers
        error = self.group(group).validate_offset_commit(member_id(member), instance, int(gen))
        if error != ErrorCode.NONE:
            return self.refuse(token, wanted, error)
        result = self.store.prepare_commit(group, wanted, self.now)
        return self.settle(self.append_offsets(token, result.errors, result.append))

    def cmd_txn_commit(
        self,
        producer: str,
        epoch: str,
        offsets: str,
        member: str = "-",
        gen: str = "-1",
        instance: str | None = None,
        group: str = "g",
    ) -> list[str]:
        token = self.token("txn-commit")
        wanted = self.offsets(offsets, "")
        error = self.group(group).validate_txn_offset_commit(member_id(member), instance, int(gen))
        if error != ErrorCode.NONE:
            return self.refuse(token, wanted, error)
        result = self.store.prepare_txn_commit(group, int(producer), int(epoch), wanted, self.now)
        return self.settle(self.append_offsets(token, result.errors, result.append))

    def cmd_marker(self, outcome: str, producer: str) -> list[str]:
        committed = {"commit": True, "abort": False}[outcome]
        marker = ControlType.COMMIT if committed else ControlType.ABORT
        self.log.append(build_control_batch(marker, int(producer), 0, 0, self.now))
        applied = self.store.on_txn_marker(int(producer), committed)
        return [f"{outcome} marker of producer {producer}: " + (
            " ".join(f"{k.group}/{k.topic}-{k.partition}" for k in applied) or "no offsets take effect"
        )]  # fmt: skip

    def cmd_fetch(self, partitions: str = "", stable: str = "no", group: str = "g") -> list[str]:
        g = self.groups.get(group)
        error = g.validate_offset_fetch() if g is not None else ErrorCode.NONE
        if error != ErrorCode.NONE:
            return [f"fetch: {name(error)}"]
        wanted = [partition(p) for p in partitions.split(",")] if partitions else None
        values = self.store.fetch(group, wanted)
        unstable = self.store.pending_txn_partitions(group) if stable == "yes" else set()
        if wanted is not None:
            unstable &= set(wanted)
        out = [f"fetch: {name(ErrorCode.NONE)}"]
        for tp, v in sorted({**dict.fromkeys(unstable, NO_OFFSET), **values}.items()):
            if tp in unstable:
                out.append(f"  {tp_text(tp)}: UNSTABLE_OFFSET_COMMIT")
            else:
                out.append(f"  {tp_text(tp)}: offset={v.offset} " + fields(metadata=v.metadata).rstrip())
        return [line.rstrip() for line in out]

    def cmd_persisted(self, error: str = "NONE") -> list[str]:
        return self.settle(self.complete(ErrorCode.Value(error)))

    def cmd_tick(self, ms: str) -> list[str]:
        target, out, last = self.now + int(ms), [], None
        for _ in range(MAX_FIRINGS):
            due = [d for g in self.groups.values() if (d := g.next_deadline_ms()) is not None and d <= target]
            if not due:
                break
            self.now = max(self.now, min(due))
            fired: list[str] = []
            for g in list(self.groups.values()):
                deadline = g.next_deadline_ms()
                if deadline is not None and deadline <= self.now:
                    fired += self.apply(g, g.tick(self.now))
            if fired:  # a timer that only re-arms itself (the initial delay extended) prints nothing
                out += [f"t={self.now}:", *self.settle(fired)]
                last = self.now
        else:
            raise AssertionError("timers kept firing")
        self.now = target
        return out if last == target else [*out, f"t={target}"]

    def cmd_load(self) -> list[str]:
        """The old coordinator unloads (parked calls learn NOT_COORDINATOR, appends in flight are lost); a new one
        replays the partition's log."""
        out = []
        for g in self.groups.values():
            out += self.apply(g, g.unload(self.now))
        out += [f"lost #{w.number}" for w in self.writes]
        log = self.log
        self.reset()
        self.log = log
        metadata: dict[str, GroupMetadataValue] = {}
        replay_batches(b"".join(log), self.store, metadata)
        for group_id, value in metadata.items():
            self.groups[group_id] = ClassicGroup.restore(
                snapshot_of(group_id, value), self.now, self.config, self.member_ids
            )
        out.append(f"loaded {len(log)} batches: groups {','.join(sorted(metadata)) or '-'}")
        for group_id in sorted(self.groups):
            out += self.cmd_state(group_id)
        return out

    def cmd_state(self, group: str = "g") -> list[str]:
        g = self.groups.get(group)
        if g is None:
            return [f"group {group}: none"]
        head = fields(
            gen=g.generation_id, type=g.protocol_type, protocol=g.protocol_name, leader=g.leader_id,
            next_deadline=g.next_deadline_ms(),
        )  # fmt: skip
        out = [f"group {group}: {g.state.value} {head}"]
        for m in g.members.values():
            waits = "join" if m.awaiting_join else "sync" if m.awaiting_sync else None
            detail = fields(
                instance=m.group_instance_id,
                session=m.session_timeout_ms,
                rebalance=m.rebalance_timeout_ms,
                deadline=m.session_deadline_ms,
                assignment=m.assignment.decode(),
                waits=waits,
            )
            out.append(f"  member {m.member_id} {detail}".rstrip())
        out += [f"  pending member {m} until={t}" for m, t in g.pending_members.items()]
        for tp, v in sorted(self.store.fetch(group).items()):
            out.append(f"  offset {tp_text(tp)}={v.offset} committed-at={v.commit_timestamp}")
        out += [f"  txn offset pending {tp_text(tp)}" for tp in sorted(self.store.pending_txn_partitions(group))]
        return out

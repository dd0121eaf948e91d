"""Transcripts of the KIP-848 consumer group core: one ``ConsumerGroup`` on a simulated clock, its cluster's topics,
and the log of its ``__consumer_offsets`` records (file format: tests/raft/transcript.py).

Every record the group asks to store is encoded in Kafka's layout, appended to the simulated log and printed
(``+ ...``; a tombstone is ``- ...``); ``load`` makes a new coordinator decode the log and replay it, and prints the
state it reaches, which must be the state that wrote it. Topic ids are derived from topic names, and partition sets
print as ``topic-partition`` lists (``-`` for empty).

Commands:

- ``coordinator [session=45000] [interval=5000] [max-size=N] [assignors=uniform,range]``: a fresh group;
- ``topic NAME partitions=N``: a topic of the cluster is created or grows; ``delete-topic NAME``;
- ``heartbeat member=ID epoch=N [instance=I] [rack=R] [rebalance=300000] [topics=a,b] [regex=R] [assignor=A]
  [owned=t-0,t-1]``: ConsumerGroupHeartbeat (``member=-`` is the empty member id; ``owned=-`` is the empty set;
  ``topics=`` an empty list, ``regex=`` an empty regular expression (it clears the member's);
  without ``owned`` the field is null, except at epoch 0 where it is empty; ``rebalance`` defaults to 300000 at
  epoch 0, else unset);
- ``tick ms=N``: time passes, each due timer fires at its own deadline;
- ``commit member=ID epoch=N [txn=yes]``, ``fetch member=ID epoch=N``: the offset calls' checks (``txn``:
  TxnOffsetCommit's);
- ``load``: a new coordinator replays the log; ``state``: the group and its members.
"""

from __future__ import annotations

import hashlib

import transcript
from transcript import fields

from odradek.broker.groups.consumer_group import ConsumerGroup, ConsumerGroupConfig
from odradek.broker.groups.consumer_messages import ConsumerGroupResult, ConsumerHeartbeatRequest, TopicInfo
from odradek.broker.groups.consumer_records import (
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataValue,
    ConsumerRecordKey,
    ConsumerRecordValue,
    Partitions,
)
from odradek.broker.groups.loader import ReplayStats, encode_records, replay_batches
from odradek.broker.groups.members import SequentialMemberIds
from odradek.broker.groups.offsets import OffsetStore
from odradek.broker.groups.server_assignors import RangeAssignor, ServerAssignor, UniformAssignor
from odradek.client.errors import ErrorCode

MAX_FIRINGS = 1000
ASSIGNORS: dict[str, type[UniformAssignor] | type[RangeAssignor]] = {"uniform": UniformAssignor, "range": RangeAssignor}


def topic_id(name: str) -> bytes:
    return hashlib.md5(name.encode()).digest()


class Runner(transcript.Commands):
    def __init__(self) -> None:
        self.cmd_coordinator()

    def cmd_coordinator(
        self, session: str = "45000", interval: str = "5000", max_size: str = str(2**31 - 1), assignors: str = ""
    ) -> list[str]:
        self.config = ConsumerGroupConfig(int(session), int(interval), int(max_size))
        names = assignors.split(",") if assignors else list(ASSIGNORS)
        self.assignors: dict[str, ServerAssignor] = {n: ASSIGNORS[n]() for n in names}
        self.topics: dict[str, TopicInfo] = {}
        self.names: dict[bytes, str] = {}
        self.log: list[bytes] = []
        self.now = 0
        self.group = self.new_group()
        return [f"t={self.now}"]

    def new_group(self) -> ConsumerGroup:
        return ConsumerGroup("g", self.config, SequentialMemberIds(), self.assignors)

    # -- printing

    def parts(self, partitions: Partitions | None) -> str:
        if partitions is None:
            return "null"
        return (
            ",".join(f"{self.names.get(t, t.hex()[:6])}-{p}" for t, p in sorted(partitions, key=self.sort_key)) or "-"
        )

    def sort_key(self, tp: tuple[bytes, int]) -> tuple[str, int]:
        return self.names.get(tp[0], tp[0].hex()), tp[1]

    def record(self, key: ConsumerRecordKey, value: ConsumerRecordValue | None) -> str:
        kind = type(key).__name__.removeprefix("ConsumerGroup").removesuffix("Key")
        who = f" {key.member_id}" if hasattr(key, "member_id") else ""
        if value is None:
            return f"- {kind}{who}"
        if isinstance(value, ConsumerGroupMetadataValue):
            detail = f"epoch={value.epoch}"
        elif isinstance(value, ConsumerGroupPartitionMetadataValue):
            detail = " ".join(f"{t.name}:{t.num_partitions}" for t in value.topics) or "-"
        elif isinstance(value, ConsumerGroupMemberMetadataValue):
            detail = fields(
                topics=",".join(value.subscribed_topic_names) or "-",
                regex=value.subscribed_topic_regex,
                instance=value.instance_id,
                rack=value.rack_id,
                assignor=value.server_assignor,
                rebalance=value.rebalance_timeout_ms,
            )
        elif isinstance(value, ConsumerGroupTargetAssignmentMetadataValue):
            detail = f"epoch={value.assignment_epoch}"
        elif isinstance(value, ConsumerGroupTargetAssignmentMemberValue):
            detail = self.parts(value.partitions)
        else:
            assert isinstance(value, ConsumerGroupCurrentMemberAssignmentValue)
            detail = f"epoch={value.member_epoch} prev={value.previous_member_epoch} {value.state.name.lower()} "
            detail += f"assigned={self.parts(value.assigned)}"
            if value.pending_revocation:
                detail += f" revoking={self.parts(value.pending_revocation)}"
        return f"+ {kind}{who} {detail}"

    def apply(self, result: ConsumerGroupResult) -> list[str]:
        out = [f"event: {e}" for e in result.events]
        if result.records:
            self.log.append(encode_records(result.records, self.now))
        out += [self.record(key, value) for key, value in result.records]
        r = result.response
        if r is not None:
            if r.error != ErrorCode.NONE:
                out.append(f"heartbeat: {ErrorCode.Name(r.error)} {r.error_message}")
            else:
                detail = fields(member=r.member_id, epoch=r.member_epoch, interval=r.heartbeat_interval_ms or None)
                if r.assignment is not None:
                    detail += f" assignment={self.parts(r.assignment)}"
                out.append(f"heartbeat: NONE {detail}")
        return out

    def owned(self, text: str) -> Partitions:
        if text == "-":
            return frozenset()
        out = set()
        for item in text.split(","):
            name, _, partition = item.rpartition("-")
            out.add((topic_id(name), int(partition)))
        return frozenset(out)

    # -- commands

    def cmd_topic(self, name: str, partitions: str) -> list[str]:
        self.topics[name] = TopicInfo(topic_id(name), name, int(partitions))
        self.names[topic_id(name)] = name
        return [f"topic {name}: {partitions} partitions"]

    def cmd_delete_topic(self, name: str) -> list[str]:
        del self.topics[name]
        return [f"topic {name} deleted"]

    def cmd_heartbeat(
        self,
        member: str,
        epoch: str,
        instance: str | None = None,
        rack: str | None = None,
        rebalance: str | None = None,
        topics: str | None = None,
        regex: str | None = None,
        assignor: str | None = None,
        owned: str | None = None,
    ) -> list[str]:
        joining = int(epoch) == 0
        request = ConsumerHeartbeatRequest(
            member_id="" if member == "-" else member,
            member_epoch=int(epoch),
            instance_id=instance,
            rack_id=rack,
            rebalance_timeout_ms=int(rebalance) if rebalance else (300_000 if joining else -1),
            subscribed_topic_names=tuple(t for t in topics.split(",") if t) if topics is not None else None,
            subscribed_topic_regex=regex,
            server_assignor=assignor,
            owned=self.owned(owned) if owned is not None else (frozenset() if joining else None),
            client_id="c",
            client_host="/127.0.0.1",
        )
        return self.apply(self.group.heartbeat(request, self.now, self.topics))

    def cmd_tick(self, ms: str) -> list[str]:
        target, out = self.now + int(ms), []
        for _ in range(MAX_FIRINGS):
            deadline = self.group.next_deadline_ms()
            if deadline is None or deadline > target:
                break
            self.now = max(self.now, deadline)
            out += [f"t={self.now}:", *self.apply(self.group.tick(self.now))]
        else:
            raise AssertionError("timers kept firing")
        self.now = target
        return [*out, f"t={target}"]

    def cmd_commit(self, member: str, epoch: str, txn: str = "no") -> list[str]:
        member_id = "" if member == "-" else member
        error = self.group.validate_offset_commit(member_id, int(epoch), transactional=txn == "yes")
        return [f"commit: {ErrorCode.Name(error)}"]

    def cmd_fetch(self, member: str, epoch: str) -> list[str]:
        member_id = None if member == "-" else member
        return [f"fetch: {ErrorCode.Name(self.group.validate_offset_fetch(member_id, int(epoch)))}"]

    def cmd_load(self) -> list[str]:
        """A new coordinator replays the log as the loader does (one batch per heartbeat's records)."""
        before = self.cmd_state()
        live: dict[str, dict[ConsumerRecordKey, ConsumerRecordValue]] = {}
        stats = ReplayStats()
        replay_batches(b"".join(self.log), OffsetStore(4096), {}, stats, live)
        self.group = ConsumerGroup.restore(
            "g", live.get("g", {}), self.now, self.config, SequentialMemberIds(), self.assignors
        )
        after = self.cmd_state()
        verdict = "same state" if _without_timers(after) == _without_timers(before) else "DIFFERENT STATE"
        return [f"loaded {len(live.get('g', {}))} keys ({stats.records} records): {verdict}", *after]

    def cmd_state(self) -> list[str]:
        g = self.group
        head = fields(
            epoch=g.group_epoch,
            assignment_epoch=g.assignment_epoch,
            assignor=g.preferred_assignor(),
            topics=" ".join(f"{t.name}:{t.num_partitions}" for t in g.subscribed_topics) or None,
        )
        out = [f"group g: {g.state.value} {head}"]
        for m in sorted(g.members.values(), key=lambda m: m.member_id):
            c = m.current
            detail = f"epoch={c.member_epoch} prev={c.previous_member_epoch} {c.state.name.lower()} "
            detail += f"assigned={self.parts(c.assigned)}"
            if c.pending_revocation:
                detail += f" revoking={self.parts(c.pending_revocation)}"
            detail += f" target={self.parts(g.targets.get(m.member_id, frozenset()))}"
            timers = fields(
                instance=m.metadata.instance_id, session=m.session_deadline_ms, rebalance=m.rebalance_deadline_ms
            )
            out.append(f"  member {m.member_id} {detail} {timers}".rstrip())
        return out


def _without_timers(lines: list[str]) -> list[str]:
    return [line.split(" session=")[0] for line in lines]

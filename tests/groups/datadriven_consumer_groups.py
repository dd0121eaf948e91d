"""Transcripts of the KIP-848 consumer group core: one ``ConsumerGroup`` on a simulated clock, its cluster's topics,
and the log of its ``__consumer_offsets`` records (file format: tests/raft/transcript.py).

Every record the group asks to store is encoded in Kafka's layout, appended to the simulated log and printed
(``+ ...``; a tombstone is ``- ...``); ``load`` makes a new coordinator decode the log and replay it, and prints the
state it reaches, which must be the state that wrote it. Topic ids are derived from topic names, and partition sets
print as ``topic-partition`` lists (``-`` for empty).

Commands:

- ``coordinator [session=45000] [interval=5000] [max-size=N] [assignors=uniform,range] [migration=bidirectional]
  [classic-max-size=N]``: a fresh group;
- ``topic NAME partitions=N [racks=r1/r2,r2,...]``: a topic of the cluster is created or grows (``racks``: the racks
  of each partition's replicas, partitions separated by commas, racks by slashes); ``delete-topic NAME``;
- ``heartbeat member=ID epoch=N [instance=I] [rack=R] [rebalance=300000] [topics=a,b] [regex=R] [assignor=A]
  [owned=t-0,t-1]``: ConsumerGroupHeartbeat (``member=-`` is the empty member id; ``owned=-`` is the empty set;
  ``topics=`` an empty list, ``regex=`` an empty regular expression (it clears the member's);
  without ``owned`` the field is null, except at epoch 0 where it is empty; ``rebalance`` defaults to 300000 at
  epoch 0, else unset);
- ``tick ms=N``: time passes, each due timer fires at its own deadline;
- ``commit member=ID epoch=N [txn=yes]``, ``fetch member=ID epoch=N``: the offset calls' checks (``txn``:
  TxnOffsetCommit's);
- ``load``: a new coordinator replays the log; ``state``: the group and its members;
- ``authorizer``: from here heartbeats are authorized: ``acl principal=P topics=a,b`` sets the topics principal P
  may describe (none by default), and a heartbeat's ``principal=P`` (default ``User:ANONYMOUS``) is its caller: its
  regular expression resolves to the topics P may describe. Every change of topics or ACLs is a new metadata
  version (a resolution is done again at the next heartbeat of a member with the expression after one);
- ``group-config [session=N] [interval=N]``: the group's own consumer.session.timeout.ms and
  consumer.heartbeat.interval.ms (KIP-848 group configs, as the shell reads them from the metadata image; none
  given: the broker's apply again). They are not records of the group: ``load`` keeps them.

Classic protocol members and the online migration (Kafka's ``group.consumer.migration.policy``):

- ``classic-group generation=N protocol=P [type=consumer]``, then ``classic-member member=ID topics=a,b
  [assigned=t-0,t-1] [instance=I] [protocols=range,roundrobin] [session=45000] [rebalance=300000]``: the group is
  a Stable classic
  group of these members (its metadata record is stored); a ``heartbeat`` then upgrades it as the shell does
  (a tombstone of the classic record, the consumer group's records, the heartbeat's);
- ``join member=ID|- topics=a,b [owned=t-0] [instance=I] [protocols=range,roundrobin] [session=45000]
  [rebalance=300000] [rack=R]``: JoinGroup of a classic member to the consumer group; ``sync member=ID
  generation=N [instance=I] [protocol=P]``, ``beat member=ID generation=N [instance=I]``, ``leave member=ID[,ID]
  [instance=I]``: its SyncGroup, Heartbeat and LeaveGroup;
- a downgrade prints the classic group the shell restores (``classic group g: ...``), which then rebalances;
  ``load`` replays the log into it.
"""

from __future__ import annotations

import hashlib

import transcript
from transcript import fields

from odradek.broker.groups.consumer_group import ConsumerGroup, ConsumerGroupConfig, GroupOverrides, MigrationRefused
from odradek.broker.groups.consumer_messages import ConsumerGroupResult, ConsumerHeartbeatRequest, TopicInfo
from odradek.broker.groups.consumer_records import (
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupRegularExpressionValue,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataValue,
    ConsumerRecordKey,
    ConsumerRecordValue,
    Partitions,
    TopicMetadata,
)
from odradek.broker.groups.group import ClassicGroup, GroupConfig
from odradek.broker.groups.loader import ReplayStats, encode_records, group_record, replay_batches, snapshot_of
from odradek.broker.groups.members import SequentialMemberIds
from odradek.broker.groups.messages import (
    GroupSnapshot,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    LeavingMember,
    MemberSnapshot,
    SyncGroupRequest,
    SyncGroupResponse,
)
from odradek.broker.groups.offsets import OffsetStore
from odradek.broker.groups.records import GroupMetadataValue, group_tombstone
from odradek.broker.groups.server_assignors import RangeAssignor, ServerAssignor, UniformAssignor
from odradek.client.consumer.protocol import Assignment, Subscription
from odradek.client.errors import ErrorCode
from odradek.client.structs import TopicPartition

MAX_FIRINGS = 1000
ASSIGNORS: dict[str, type[UniformAssignor] | type[RangeAssignor]] = {"uniform": UniformAssignor, "range": RangeAssignor}


def topic_id(name: str) -> bytes:
    return hashlib.md5(name.encode()).digest()


class Runner(transcript.Commands):
    def __init__(self) -> None:
        self.cmd_coordinator()

    def cmd_coordinator(
        self,
        session: str = "45000",
        interval: str = "5000",
        max_size: str = str(2**31 - 1),
        assignors: str = "",
        migration: str = "bidirectional",
        classic_max_size: str = str(2**31 - 1),
    ) -> list[str]:
        self.config = ConsumerGroupConfig(
            int(session),
            int(interval),
            int(max_size),
            migration_policy=migration,
            classic_max_size=int(classic_max_size),
        )
        names = assignors.split(",") if assignors else list(ASSIGNORS)
        self.assignors: dict[str, ServerAssignor] = {n: ASSIGNORS[n]() for n in names}
        self.topics: dict[str, TopicInfo] = {}
        self.names: dict[bytes, str] = {}
        self.log: list[bytes] = []
        self.now = 0
        self.overrides = GroupOverrides()
        self.version = 0  # the metadata version: topics and ACLs
        self.acls: dict[str, set[str]] | None = None  # principal -> the topics it may describe; None: no authorizer
        self.group: ConsumerGroup | None = self.new_group()
        self.classic: ClassicGroup | None = None
        self.classic_snapshot: GroupSnapshot | None = None
        return [f"t={self.now}"]

    @property
    def cg(self) -> ConsumerGroup:
        assert self.group is not None, "the group is a classic group"
        return self.group

    def new_group(self) -> ConsumerGroup:
        group = ConsumerGroup("g", self.config, SequentialMemberIds(), self.assignors)
        group.overrides = self.overrides
        return group

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
        who = f" {key.member_id}" if hasattr(key, "member_id") else f" {key.regex}" if hasattr(key, "regex") else ""
        if value is None:
            return f"- {kind}{who}"
        if isinstance(value, ConsumerGroupMetadataValue):
            detail = f"epoch={value.epoch}"
        elif isinstance(value, ConsumerGroupPartitionMetadataValue):
            detail = " ".join(self.topic_text(t) for t in value.topics) or "-"
        elif isinstance(value, ConsumerGroupMemberMetadataValue):
            detail = fields(
                topics=",".join(value.subscribed_topic_names) or "-",
                regex=value.subscribed_topic_regex,
                instance=value.instance_id,
                rack=value.rack_id,
                assignor=value.server_assignor,
                rebalance=value.rebalance_timeout_ms,
                classic=None
                if value.classic is None
                else f"session:{value.classic.session_timeout_ms}/"
                + "+".join(name for name, _ in value.classic.supported_protocols),
            )
        elif isinstance(value, ConsumerGroupTargetAssignmentMetadataValue):
            detail = f"epoch={value.assignment_epoch}"
        elif isinstance(value, ConsumerGroupTargetAssignmentMemberValue):
            detail = self.parts(value.partitions)
        elif isinstance(value, ConsumerGroupRegularExpressionValue):
            detail = f"topics={','.join(value.topics) or '-'} version={value.version}"
        else:
            assert isinstance(value, ConsumerGroupCurrentMemberAssignmentValue)
            detail = f"epoch={value.member_epoch} prev={value.previous_member_epoch} {value.state.name.lower()} "
            detail += f"assigned={self.parts(value.assigned)}"
            if value.pending_revocation:
                detail += f" revoking={self.parts(value.pending_revocation)}"
        return f"+ {kind}{who} {detail}"

    @staticmethod
    def topic_text(t: TopicMetadata) -> str:
        racks = f"[{','.join('/'.join(sorted(r)) or '-' for r in t.racks)}]" if t.racks else ""
        return f"{t.name}:{t.num_partitions}{racks}"

    def apply(self, result: ConsumerGroupResult, before: tuple = ()) -> list[str]:
        """Print a step and store its records as one batch (``before``: records the shell puts first); a downgrade
        stores the classic group's metadata record in the same batch and switches to the classic group."""
        out = [f"event: {e}" for e in result.events]
        records: list = [*before, *result.records]
        if result.downgrade is not None:
            records.append(group_record(result.downgrade.snapshot))
        if records:
            self.log.append(encode_records(records, self.now))
        out += ["- GroupMetadata" for _ in before]
        out += [self.record(key, value) for key, value in result.records]
        if result.downgrade is not None:
            out.append(f"+ GroupMetadata {self.classic_record(result.downgrade.snapshot)}")
        r = result.response
        if isinstance(r, JoinGroupResponse):
            detail = fields(member=r.member_id or None, generation=r.generation_id, protocol=r.protocol_name)
            out.append(f"join: {ErrorCode.Name(r.error)} {detail}".rstrip())
        elif isinstance(r, SyncGroupResponse):
            assigned = (
                ",".join(f"{tp.topic}-{tp.partition}" for tp in Assignment.decode(r.assignment).partitions) or "-"
                if r.error == ErrorCode.NONE
                else None
            )
            out.append(f"sync: {ErrorCode.Name(r.error)} {fields(assignment=assigned)}".rstrip())
        elif isinstance(r, HeartbeatResponse):
            out.append(f"beat: {ErrorCode.Name(r.error)}")
        elif isinstance(r, LeaveGroupResponse):
            out.append("leave: " + " ".join(f"{m.member_id}:{ErrorCode.Name(m.error)}" for m in r.members))
        elif r is not None:
            if r.error != ErrorCode.NONE:
                out.append(f"heartbeat: {ErrorCode.Name(r.error)} {r.error_message}")
            else:
                detail = fields(member=r.member_id, epoch=r.member_epoch, interval=r.heartbeat_interval_ms or None)
                if r.assignment is not None:
                    detail += f" assignment={self.parts(r.assignment)}"
                out.append(f"heartbeat: NONE {detail}")
        if result.downgrade is not None:
            snapshot = result.downgrade.snapshot
            self.group = None
            self.classic = ClassicGroup.restore(snapshot, self.now, GroupConfig(), SequentialMemberIds())
            if result.downgrade.rebalance:
                rebalance = self.classic.rebalance(self.now, "downgraded from the consumer protocol")
                out += [f"event: {e}" for e in rebalance.events]
            out += self.classic_state()
        return out

    def classic_record(self, snapshot: GroupSnapshot) -> str:
        members = " ".join(
            f"{m.member_id}:{self.assignment_text(m.assignment)}"
            for m in sorted(snapshot.members, key=lambda m: m.member_id)
        )
        return f"generation={snapshot.generation_id} protocol={snapshot.protocol_name} {members}".rstrip()

    @staticmethod
    def assignment_text(assignment: bytes) -> str:
        if not assignment:
            return "-"
        partitions = Assignment.decode(assignment).partitions
        version = int.from_bytes(assignment[:2], "big")
        return (",".join(f"{tp.topic}-{tp.partition}" for tp in partitions) or "-") + f"(v{version})"

    def classic_state(self) -> list[str]:
        g = self.classic
        assert g is not None
        head = fields(generation=g.generation_id, protocol=g.protocol_name, leader=g.leader_id)
        out = [f"classic group g: {g.state.value} {head}"]
        for m in sorted(g.members.values(), key=lambda m: m.member_id):
            detail = fields(instance=m.group_instance_id, assigned=self.assignment_text(m.assignment))
            out.append(f"  member {m.member_id} {detail}".rstrip())
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

    def cmd_topic(self, name: str, partitions: str, racks: str | None = None) -> list[str]:
        self.version += 1
        per_partition = tuple(frozenset(r for r in p.split("/") if r) for p in racks.split(",")) if racks else ()
        assert not per_partition or len(per_partition) == int(partitions), "one rack list per partition"
        self.topics[name] = TopicInfo(topic_id(name), name, int(partitions), per_partition)
        self.names[topic_id(name)] = name
        shown = f" racks={racks}" if racks else ""
        return [f"topic {name}: {partitions} partitions{shown}"]

    def cmd_authorizer(self) -> list[str]:
        self.acls = {}
        self.version += 1
        return ["authorizer on: every topic denied"]

    def cmd_acl(self, principal: str, topics: str = "") -> list[str]:
        assert self.acls is not None, "no authorizer"
        self.acls[principal] = {t for t in topics.split(",") if t}
        self.version += 1
        return [f"{principal} may describe {', '.join(sorted(self.acls[principal])) or 'no topic'}"]

    def cmd_delete_topic(self, name: str) -> list[str]:
        self.version += 1
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
        principal: str = "User:ANONYMOUS",
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
        if self.group is None:
            return self.upgrade_then(request)
        acls = self.acls

        def authorized(names: object) -> set[str]:
            assert acls is not None
            return acls.get(principal, set())

        return self.apply(
            self.group.heartbeat(request, self.now, self.topics, authorized if acls is not None else None, self.version)
        )

    def upgrade_then(self, request: ConsumerHeartbeatRequest) -> list[str]:
        """A heartbeat to a classic group: the shell's upgrade, then the heartbeat, stored as one batch."""
        assert self.classic is not None
        if self.classic.members:
            try:
                group, records = ConsumerGroup.from_classic(
                    self.classic, self.topics, self.now, self.config, SequentialMemberIds(), self.assignors
                )
            except MigrationRefused as e:
                return [f"heartbeat: GROUP_ID_NOT_FOUND {e}"]
        else:
            group, records = self.new_group(), ()
        group.overrides = self.overrides
        result = group.heartbeat(request, self.now, self.topics)
        assert result.response is not None
        if result.response.error != ErrorCode.NONE:
            return self.apply(result)
        self.group, self.classic = group, None
        out = ["event: group upgraded to the consumer protocol"]
        return out + self.apply(
            ConsumerGroupResult(result.response, (*records, *result.records), result.events, result.downgrade),
            before=(group_tombstone("g"),),
        )

    def cmd_classic_group(self, generation: str, protocol: str, type: str = "consumer") -> list[str]:
        self.group = None
        self.classic_snapshot = GroupSnapshot("g", type, int(generation), protocol, None, self.now, ())
        self.classic_protocols: dict[str, tuple[tuple[str, bytes], ...]] = {}
        return self.store_classic()

    def cmd_classic_member(
        self,
        member: str,
        topics: str,
        assigned: str = "-",
        instance: str | None = None,
        protocols: str | None = None,
        session: str = "45000",
        rebalance: str = "300000",
    ) -> list[str]:
        assert self.classic_snapshot is not None
        names = protocols.split(",") if protocols else [self.classic_snapshot.protocol_name]
        subscription = Subscription(tuple(topics.split(","))).encode()
        partitions = self.owned(assigned)
        snapshot = MemberSnapshot(
            member,
            instance,
            "c",
            "/127.0.0.1",
            int(rebalance),
            int(session),
            subscription,
            Assignment(tuple(TopicPartition(self.names[t], p) for t, p in partitions)).encode(),
        )
        s = self.classic_snapshot
        self.classic_snapshot = GroupSnapshot(
            s.group_id,
            s.protocol_type,
            s.generation_id,
            s.protocol_name,
            s.leader,
            s.current_state_timestamp_ms,
            (*s.members, snapshot),
        )
        self.classic_protocols[member] = tuple((n, subscription) for n in names)
        return self.store_classic()

    def store_classic(self) -> list[str]:
        """Store the classic group's metadata record; the group in memory also knows every protocol each member
        supports (the record keeps the selected one's metadata only)."""
        snapshot = self.classic_snapshot
        assert snapshot is not None
        self.log.append(encode_records([group_record(snapshot)], self.now))
        self.classic = ClassicGroup.restore(snapshot, self.now, GroupConfig(), SequentialMemberIds())
        for member_id, protocols in self.classic_protocols.items():
            self.classic.members[member_id].protocols = protocols
        return self.classic_state()

    def cmd_join(
        self,
        member: str,
        topics: str,
        owned: str = "-",
        instance: str | None = None,
        protocols: str = "range",
        session: str = "45000",
        rebalance: str = "300000",
        rack: str | None = None,
    ) -> list[str]:
        partitions = self.owned(owned)
        subscription = Subscription(
            tuple(topics.split(",")),
            owned_partitions=tuple(TopicPartition(self.names[t], p) for t, p in partitions),
            rack_id=rack,
        ).encode()
        request = JoinGroupRequest(
            token=0,
            member_id="" if member == "-" else member,
            group_instance_id=instance,
            client_id="c",
            client_host="/127.0.0.1",
            session_timeout_ms=int(session),
            rebalance_timeout_ms=int(rebalance),
            protocol_type="consumer",
            protocols=tuple((name, subscription) for name in protocols.split(",")),
        )
        return self.apply(self.cg.classic_join(request, self.now, self.topics))

    def cmd_sync(
        self, member: str, generation: str, instance: str | None = None, protocol: str | None = None
    ) -> list[str]:
        request = SyncGroupRequest(0, member, instance, int(generation), "consumer", protocol)
        return self.apply(self.cg.classic_sync(request, self.now, self.topics))

    def cmd_beat(self, member: str, generation: str, instance: str | None = None) -> list[str]:
        return self.apply(self.cg.classic_heartbeat(HeartbeatRequest(member, instance, int(generation)), self.now))

    def cmd_leave(self, member: str, instance: str | None = None) -> list[str]:
        leaving = tuple(LeavingMember("" if m == "-" else m, instance) for m in member.split(","))
        return self.apply(self.cg.classic_leave(LeaveGroupRequest(leaving), self.topics))

    def cmd_group_config(self, session: str | None = None, interval: str | None = None) -> list[str]:
        self.overrides = GroupOverrides(int(session) if session else None, int(interval) if interval else None)
        self.cg.overrides = self.overrides
        return [f"group configs: {fields(session=session, interval=interval) or 'none'}"]

    def cmd_tick(self, ms: str) -> list[str]:
        target, out = self.now + int(ms), []
        for _ in range(MAX_FIRINGS):
            deadline = self.group.next_deadline_ms() if self.group is not None else None
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
        error = self.cg.validate_offset_commit(member_id, int(epoch), transactional=txn == "yes")
        return [f"commit: {ErrorCode.Name(error)}"]

    def cmd_fetch(self, member: str, epoch: str) -> list[str]:
        member_id = None if member == "-" else member
        return [f"fetch: {ErrorCode.Name(self.cg.validate_offset_fetch(member_id, int(epoch)))}"]

    def cmd_load(self) -> list[str]:
        """A new coordinator replays the log as the loader does (one batch per step's records): the consumer group,
        or the classic group the last metadata record describes."""
        before = self.cmd_state()
        live: dict[str, dict[ConsumerRecordKey, ConsumerRecordValue]] = {}
        classic: dict[str, GroupMetadataValue] = {}
        stats = ReplayStats()
        replay_batches(b"".join(self.log), OffsetStore(4096), classic, stats, live)
        if "g" in live or "g" not in classic:
            self.group = ConsumerGroup.restore(
                "g", live.get("g", {}), self.now, self.config, SequentialMemberIds(), self.assignors
            )
            self.group.overrides = self.overrides
            self.group.start_sessions(self.now)
            self.classic = None
            loaded = f"loaded {len(live.get('g', {}))} keys ({stats.records} records)"
        else:
            self.group = None
            self.classic = ClassicGroup.restore(
                snapshot_of("g", classic["g"]), self.now, GroupConfig(), SequentialMemberIds()
            )
            loaded = f"loaded the classic group ({stats.records} records)"
        after = self.cmd_state()
        if self.group is None:  # a loaded classic group is Stable: a rebalance in progress is not stored
            return [loaded, *after]
        verdict = "same state" if _without_timers(after) == _without_timers(before) else "DIFFERENT STATE"
        return [f"{loaded}: {verdict}", *after]

    def cmd_state(self) -> list[str]:
        if self.group is None:
            return self.classic_state()
        g = self.group
        head = fields(
            epoch=g.group_epoch,
            assignment_epoch=g.assignment_epoch,
            assignor=g.preferred_assignor(),
            topics=" ".join(self.topic_text(t) for t in g.subscribed_topics) or None,
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
                rack=m.metadata.rack_id,
                classic="yes" if m.classic else None,
                instance=m.metadata.instance_id,
                session=m.session_deadline_ms,
                rebalance=m.rebalance_deadline_ms,
                join=m.join_deadline_ms,
                sync=m.sync_deadline_ms,
            )
            out.append(f"  member {m.member_id} {detail} {timers}".rstrip())
        return out


def _without_timers(lines: list[str]) -> list[str]:
    return [line.split(" session=")[0] for line in lines]

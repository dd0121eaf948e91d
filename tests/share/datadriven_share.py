"""Transcripts of the share group cores (file format: tests/raft/transcript.py): a share-partition over a simulated
log, the share coordinator's store of its durable state, and a share group, on a simulated clock.

The log holds real record batches (the record codec's encoding), which a fetch parses back to their headers, as
the shell will; an aborted transaction is listed as the log lists it (``AbortedTxn``). Every state the
share-partition asks to persist goes through the store (``ShareStateStore.write``); the record it makes is encoded,
appended to a simulated ``__share_group_state`` log and printed (``+ snapshot ...`` or ``+ update ...``; batches as
``first-last:state(delivery count)``). ``move`` makes a new coordinator decode and replay that log and a new leader
resume from what it reads. In-flight records print as runs, ``first-last:state(delivery count)``, an acquired run
with ``/member@lock deadline``; acquired records as ``first-last(delivery count)``.

Commands of the share-partition:

- ``partition [lock=30000] [limit=5] [max-locks=2000] [reset=latest] [isolation=read_uncommitted]
  [snapshot-every=500]``: a fresh share-partition over the log as it is (its leader at epoch 0, nothing stored);
- ``produce n=N [producer=P]``: a batch of N records (with ``producer``: transactional, in P's transaction, which
  the first such batch opens); ``commit producer=P``, ``abort producer=P``: the transaction's marker (a control
  batch); ``gap n=N``: N offsets without records (as compaction leaves them); ``delete-records offset=N``: the log
  start offset moves to N;
- ``fetch member=M [max=500]``: ShareFetch: the batches from the next fetch offset to the log end (with
  read_committed, to the last stable offset), with the aborted transactions overlapping them;
- ``ack member=M RANGE:TYPES ...``: ShareAcknowledge; RANGE is ``first-last`` or one offset, TYPES one of
  ``accept``, ``release``, ``reject``, ``gap`` (or a number) for the range, or one per offset, comma-separated;
- ``release member=M``: the member's share session closes: its records are released;
- ``tick ms=N``: time passes; each due timer (locks, sessions) fires at its own deadline;
- ``state``; ``move``: the leader and the share coordinator move (next leader epoch); ``stale-write``: the
  previous leader writes after the move.

Commands of the share group (topic ids are derived from the names; assignments print as ``topic-partition``):

- ``group [session=45000] [interval=5000] [max-size=200] [records=hide]``: a fresh group (``records=show``: each
  step prints the ``__consumer_offsets`` records it makes, ``+ kind [member] ...``, a tombstone ``- kind [member]``;
  every step's records are encoded and kept in a simulated log either way); ``topic NAME partitions=N``: a topic
  of the cluster is created or grows;
- ``heartbeat member=M epoch=N [topics=a,b] [rack=R]``: ShareGroupHeartbeat (the topics are required at epoch 0);
  a member the group removes has its records released on the share-partition, as the shell will;
- ``describe``: ShareGroupDescribe; ``delete-group``: DeleteGroups; ``failover``: a new coordinator decodes the
  group's log and restores the group from its live records (each member's session starting now), which must
  store as the same records.
"""

from __future__ import annotations

import hashlib

import transcript
from transcript import fields

from odradek.broker.groups.consumer_messages import TopicInfo
from odradek.broker.groups.loader import encode_records, replay_batches
from odradek.broker.groups.offsets import OffsetStore
from odradek.broker.groups.share_records import (
    ShareGroupCurrentMemberAssignmentValue,
    ShareGroupMemberMetadataValue,
    ShareGroupMetadataValue,
    ShareGroupPartitionMetadataValue,
    ShareGroupTargetAssignmentMemberValue,
    ShareGroupTargetAssignmentMetadataValue,
    ShareRecordKey,
    ShareRecordValue,
)
from odradek.broker.log.log import AbortedTxn
from odradek.broker.share.group import ShareGroup, ShareGroupConfig, ShareGroupResult, ShareHeartbeatRequest
from odradek.broker.share.partition import (
    READ_COMMITTED,
    AcknowledgementBatch,
    AcknowledgeType,
    AcquiredRecords,
    InFlight,
    PartitionResult,
    SharePartition,
    SharePartitionConfig,
)
from odradek.broker.share.state_records import (
    UNCHANGED_START,
    RecordState,
    SharePartitionKey,
    ShareSnapshotValue,
    ShareStateRecord,
    ShareStateStore,
    StateBatch,
    StateWrite,
    decode_record,
    encode_record,
)
from odradek.client.errors import ErrorCode
from odradek.client.record.builder import encode_batch
from odradek.client.record.control import ControlType, build_control_batch
from odradek.client.record.header import BatchHeader, parse_header

MAX_FIRINGS = 1000


def error_name(error: int) -> str:
    return ErrorCode.Name(ErrorCode.ValueType(error))


def topic_id(name: str) -> bytes:
    return hashlib.md5(name.encode()).digest()


def bounds(first: int, last: int) -> str:
    return str(first) if first == last else f"{first}-{last}"


def batch_text(b: StateBatch) -> str:
    return f"{bounds(b.first, b.last)}:{b.state.name.lower()}({b.delivery_count})"


def run_text(r: InFlight) -> str:
    text = batch_text(StateBatch(r.first, r.last, r.state, r.delivery_count))
    return text + (f"/{r.member_id}@{r.deadline_ms}" if r.state is RecordState.ACQUIRED else "")


def acquired_text(records: tuple[AcquiredRecords, ...]) -> str:
    return " ".join(f"{bounds(a.first_offset, a.last_offset)}({a.delivery_count})" for a in records) or "-"


class Runner(transcript.Commands):
    def __init__(self) -> None:
        self.now = 0
        # the log
        self.headers: list[BatchHeader] = []
        self.log_start = 0
        self.log_end = 0
        self.open_txns: dict[int, int] = {}  # producer -> first offset of its open transaction
        self.aborted: list[tuple[int, int, int]] = []  # producer, first offset, marker offset
        # the share-partition and its durable state
        self.partition: SharePartition | None = None
        self.key = SharePartitionKey("g", topic_id("t"), 0)
        self.state_log: list[tuple[bytes, bytes | None]] = []
        self.leader_epoch = 0
        self.state_epoch = 0
        # the group
        self.group: ShareGroup | None = None
        self.topics: dict[str, TopicInfo] = {}
        self.names: dict[bytes, str] = {}
        self.group_config = ShareGroupConfig()
        self.group_log: list[bytes] = []  # the batches of the group's records, as the shell appends them
        self.show_records = False

    @property
    def sp(self) -> SharePartition:
        assert self.partition is not None, "no share-partition: run `partition` first"
        return self.partition

    @property
    def sg(self) -> ShareGroup:
        assert self.group is not None, "no group: run `group` first"
        return self.group

    # -- the log -------------------------------------------------------------------------------------------------

    def _append(self, data: bytes, count: int) -> None:
        self.headers.append(parse_header(data))
        self.log_end += count

    def cmd_produce(self, n: str, producer: str | None = None) -> list[str]:
        first = self.log_end
        if producer is None:
            self._append(encode_batch([b"v"] * int(n), timestamps=0, base_offset=first), int(n))
        else:
            pid = int(producer)
            self.open_txns.setdefault(pid, first)
            data = encode_batch(
                [b"v"] * int(n), timestamps=0, base_offset=first, producer_id=pid, producer_epoch=0,
                base_sequence=0, is_transactional=True,
            )  # fmt: skip
            self._append(data, int(n))
        txn = f" in transaction of producer {producer}" if producer else ""
        return [f"log: {bounds(first, self.log_end - 1)}{txn}"]

    def _marker(self, producer: str, marker: ControlType) -> list[str]:
        pid = int(producer)
        first = self.open_txns.pop(pid)
        offset = self.log_end
        self._append(build_control_batch(marker, pid, 0, 0, 0, base_offset=offset), 1)
        if marker is ControlType.ABORT:
            self.aborted.append((pid, first, offset))
        return [f"log: {offset} {marker.name.lower()} marker of producer {pid} (transaction from {first})"]

    def cmd_commit(self, producer: str) -> list[str]:
        return self._marker(producer, ControlType.COMMIT)

    def cmd_abort(self, producer: str) -> list[str]:
        return self._marker(producer, ControlType.ABORT)

    def cmd_gap(self, n: str) -> list[str]:
        self.log_end += int(n)
        return [f"log: {bounds(self.log_end - int(n), self.log_end - 1)} without records"]

    def cmd_delete_records(self, offset: str) -> list[str]:
        self.log_start = int(offset)
        self.headers = [h for h in self.headers if h.last_offset >= self.log_start]
        out = [f"log start: {self.log_start}"]
        if self.partition is not None:
            out += self.apply(self.sp.log_start_moved(self.log_start, self.now))
        return out

    def last_stable_offset(self) -> int:
        return min(self.open_txns.values(), default=self.log_end)

    # -- the share-partition -------------------------------------------------------------------------------------

    def cmd_partition(
        self,
        lock: str = "30000",
        limit: str = "5",
        max_locks: str = "2000",
        reset: str = "latest",
        isolation: str = "read_uncommitted",
        snapshot_every: str = "500",
    ) -> list[str]:
        self.config = SharePartitionConfig(int(lock), int(limit), int(max_locks), reset, isolation)
        self.store = ShareStateStore(int(snapshot_every))
        self.state_log = []
        self.leader_epoch = self.state_epoch = 0
        self.partition = SharePartition.restore(self.config, None, self.log_start, self.log_end)
        return self.cmd_state()

    def cmd_state(self) -> list[str]:
        p = self.sp
        head = f"spso={p.start_offset} speo={p.end_offset} next-fetch={p.next_fetch_offset()}"
        runs = " ".join(run_text(r) for r in p.in_flight) or "-"
        return [f"{head} in-flight: {runs}"]

    def apply(self, result: PartitionResult, acquired: bool = False) -> list[str]:
        """Print a share-partition's result and store what it asks to persist."""
        out = [f"event: {e}" for e in result.events]
        if acquired:
            out.append(f"acquired: {acquired_text(result.acquired)}")
        if result.error != ErrorCode.NONE:
            out.append(f"error: {error_name(result.error)} {result.error_message}")
        if result.write is not None:
            out += self.persist(result.write)
        return out + self.cmd_state()

    def persist(self, write: StateWrite) -> list[str]:
        answer = self.store.write(self.key, self.state_epoch, self.leader_epoch, write)
        if answer.error != ErrorCode.NONE:
            return [f"write: {error_name(answer.error)}"]
        assert answer.record is not None
        return [self.store_record(answer.record)]

    def store_record(self, record: ShareStateRecord) -> str:
        self.state_log.append(encode_record(record))
        v = record.value
        assert v is not None
        batches = " ".join(batch_text(b) for b in v.batches)
        if isinstance(v, ShareSnapshotValue):
            head = f"+ snapshot epoch={v.snapshot_epoch} state-epoch={v.state_epoch} leader-epoch={v.leader_epoch}"
        else:
            head = f"+ update epoch={v.snapshot_epoch} leader-epoch={v.leader_epoch}"
        start = "-" if v.start_offset == UNCHANGED_START else v.start_offset
        return f"{head} spso={start} {batches}".rstrip()

    def cmd_fetch(self, member: str, max: str = "500") -> list[str]:
        p = self.sp
        if not p.can_acquire():
            return ["no fetch: the in-flight records are at the cap", *self.cmd_state()]
        start = p.next_fetch_offset()
        upper = self.last_stable_offset() if self.config.isolation_level == READ_COMMITTED else self.log_end
        batches = [h for h in self.headers if h.last_offset >= start and h.base_offset < upper]
        aborted = [AbortedTxn(pid, first) for pid, first, marker in self.aborted if marker >= start and first < upper]
        return self.apply(p.acquire(member, batches, int(max), self.now, aborted), acquired=True)

    def cmd_ack(self, *ranges: str, member: str) -> list[str]:
        batches = []
        for item in ranges:
            bounds, _, types = item.partition(":")
            first, _, last = bounds.partition("-")
            kinds = tuple(int(t) if t.isdigit() else AcknowledgeType[t.upper()] for t in types.split(","))
            batches.append(AcknowledgementBatch(int(first), int(last or first), kinds))
        result = self.sp.acknowledge(member, batches, self.now)
        return ([] if result.error != ErrorCode.NONE else ["ack: NONE"]) + self.apply(result)

    def cmd_release(self, member: str) -> list[str]:
        return self.apply(self.sp.release_member(member, self.now))

    def cmd_move(self) -> list[str]:
        """A new share coordinator replays the log of records; a new leader reads the state and resumes."""
        records = [decode_record(k, v) for k, v in self.state_log]
        self.store = ShareStateStore(self.store.snapshot_every)
        for record in records:
            self.store.replay(record)
        snapshots = [i for i, r in enumerate(records) if isinstance(r.value, ShareSnapshotValue)]
        after = len(records) - 1 - snapshots[-1] if snapshots else len(records)
        out = [f"replayed {len(records)} records, of which updates after the last snapshot: {after}"]
        self.leader_epoch += 1
        answer = self.store.read(self.key, self.leader_epoch)
        if answer.record is not None:
            out.append(self.store_record(answer.record))
        state = answer.state
        if state is not None:
            self.state_epoch = state.state_epoch
            batches = " ".join(batch_text(b) for b in state.batches) or "-"
            out.append(f"read: state-epoch={state.state_epoch} spso={state.start_offset} batches: {batches}")
        self.partition = SharePartition.restore(self.config, state, self.log_start, self.log_end)
        return out + self.cmd_state()

    def cmd_stale_write(self) -> list[str]:
        write = StateWrite(self.sp.start_offset, ())
        answer = self.store.write(self.key, self.state_epoch, self.leader_epoch - 1, write)
        return [f"write at leader epoch {self.leader_epoch - 1}: {error_name(answer.error)}"]

    # -- the group -----------------------------------------------------------------------------------------------

    def cmd_group(
        self, session: str = "45000", interval: str = "5000", max_size: str = "200", records: str = "hide"
    ) -> list[str]:
        self.group_config = ShareGroupConfig(int(session), int(interval), int(max_size))
        self.group = ShareGroup("g", self.group_config)
        self.group_log, self.show_records = [], records == "show"
        return self.cmd_describe()

    def record_text(self, key: ShareRecordKey, value: ShareRecordValue | None) -> str:
        kind = type(key).__name__.removeprefix("ShareGroup").removesuffix("Key")
        head = f"{kind} {key.member_id}" if hasattr(key, "member_id") else kind
        if value is None:
            return f"- {head}"
        if isinstance(value, ShareGroupMetadataValue):
            detail = f"epoch={value.epoch}"
        elif isinstance(value, ShareGroupPartitionMetadataValue):
            detail = ",".join(f"{t.name}({t.num_partitions})" for t in value.topics) or "-"
        elif isinstance(value, ShareGroupTargetAssignmentMetadataValue):
            detail = f"epoch={value.assignment_epoch}"
        elif isinstance(value, ShareGroupTargetAssignmentMemberValue):
            detail = self.parts(value.partitions) or "-"
        elif isinstance(value, ShareGroupMemberMetadataValue):
            detail = fields(topics=",".join(value.subscribed_topic_names), rack=value.rack_id)
        elif isinstance(value, ShareGroupCurrentMemberAssignmentValue):
            assigned = self.parts(value.assigned) or "-"
            detail = f"{fields(epoch=value.member_epoch, previous=value.previous_member_epoch)} assigned={assigned}"
        else:
            detail = repr(value)
        return f"+ {head} {detail}"

    def cmd_failover(self) -> list[str]:
        live: dict[str, dict[ShareRecordKey, ShareRecordValue]] = {}
        for batch in self.group_log:
            replay_batches(batch, OffsetStore(4096), {}, share_groups=live)
        records = live.get("g", {})
        restored = ShareGroup.restore("g", records, self.now, self.group_config)
        assert restored.records() == records, "the restored group stores as its records"
        self.group = restored
        return [f"restored from {len(records)} records", *self.cmd_describe()]

    def cmd_topic(self, name: str, partitions: str) -> list[str]:
        self.topics[name] = TopicInfo(topic_id(name), name, int(partitions))
        self.names[topic_id(name)] = name
        return [f"topic {name}: {partitions} partitions"]

    def parts(self, partitions: frozenset[tuple[bytes, int]]) -> str:
        named = sorted((self.names[t], p) for t, p in partitions)
        return ",".join(f"{name}-{p}" for name, p in named)

    def cmd_heartbeat(self, member: str, epoch: str, topics: str | None = None, rack: str | None = None) -> list[str]:
        request = ShareHeartbeatRequest(
            member_id="" if member == "-" else member,
            member_epoch=int(epoch),
            rack_id=rack,
            subscribed_topic_names=tuple(t for t in topics.split(",") if t) if topics is not None else None,
            client_id="c",
            client_host="/127.0.0.1",
        )
        return self.group_result(self.sg.heartbeat(request, self.now, self.topics))

    def group_result(self, result: ShareGroupResult) -> list[str]:
        out = [f"event: {e}" for e in result.events]
        if result.records:
            self.group_log.append(encode_records(result.records, self.now))
            if self.show_records:
                out += [self.record_text(key, value) for key, value in result.records]
        for member_id in result.removed:
            if self.partition is not None:
                out += [f"release {member_id}:"] + ["  " + line for line in self.cmd_release(member_id)]
        r = result.response
        if r is not None and r.error != ErrorCode.NONE:
            out.append(f"heartbeat: {error_name(r.error)} {r.error_message}")
        elif r is not None:
            detail = fields(member=r.member_id, epoch=r.member_epoch, interval=r.heartbeat_interval_ms or None)
            if r.assignment is not None:
                detail += f" assignment={self.parts(r.assignment) or '-'}"
            out.append(f"heartbeat: NONE {detail}")
        return out

    def cmd_describe(self) -> list[str]:
        d = self.sg.describe()
        head = fields(epoch=d.group_epoch, assignment_epoch=d.assignment_epoch, assignor=d.assignor_name)
        out = [f"group {d.group_id}: {d.state} {head}"]
        for m in d.members:
            detail = fields(
                epoch=m.member_epoch,
                topics=",".join(m.subscribed_topic_names),
                rack=m.rack_id,
                assigned=self.parts(m.assignment) or "-",
            )
            out.append(f"  member {m.member_id} {detail}")
        return out

    def cmd_delete_group(self) -> list[str]:
        return [f"delete: {error_name(self.sg.delete())}", *self.cmd_describe()]

    # -- time ----------------------------------------------------------------------------------------------------

    def cmd_tick(self, ms: str) -> list[str]:
        target, out = self.now + int(ms), []
        for _ in range(MAX_FIRINGS):
            partition = self.partition.next_deadline_ms() if self.partition is not None else None
            group = self.group.next_deadline_ms() if self.group is not None else None
            deadline = min((d for d in (partition, group) if d is not None), default=None)
            if deadline is None or deadline > target:
                break
            self.now = deadline
            out.append(f"t={deadline}:")
            if group == deadline:
                out += self.group_result(self.sg.tick(deadline))
            if partition == deadline:
                out += self.apply(self.sp.tick(deadline))
        else:
            raise AssertionError("timers kept firing")
        self.now = target
        return [*out, f"t={target}"]

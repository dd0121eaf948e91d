"""The shells that serve share groups, on real partitions and a simulated clock:

- the share sessions' rules (epochs, acknowledgements only in a session, closing, expiry);
- the partition leader (``ShareLeader``) over a real log: a fetch acquires real batches and answers the batches that
  hold them, acknowledgements are stored before the answer, an expired lock (fired at the simulated time) makes the
  records available again with their delivery count stored, a failed state write drops the core and the next
  request starts from the stored state, a closing session releases the member's records, and a leader that moves
  drops its share-partitions;
- the share coordinator (``ShareStateCoordinator``) on a real ``__share_group_state`` partition: writes are stored
  before they are answered, a new coordinator loads the same states, a newer leader fences the older one;
- the share group coordinator beside the group coordinator on a real offsets partition: one group id is one kind of
  group, ListGroups and DeleteGroups cover share groups, and the session timer removes a silent member."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from controller_images import brokers, build, partition, topic
from test_coordinator_appends import DATA_ID, ManualClock, OffsetsReplicas, coordinator, loaded, serving, until

from odradek.broker.config import ConfigError, NodeConfig
from odradek.broker.coordinator.runtime import CoordinatorPartition
from odradek.broker.groups.consumer_messages import ConsumerHeartbeatRequest
from odradek.broker.groups.messages import JoinGroupRequest
from odradek.broker.log.log import Log
from odradek.broker.partition import Partition
from odradek.broker.share.broker import group_config
from odradek.broker.share.group import ShareGroupConfig, ShareHeartbeatRequest
from odradek.broker.share.group_coordinator import ShareGroupCoordinator
from odradek.broker.share.leader import (
    ShareAcknowledgeRequest,
    ShareFetchRequest,
    ShareLeader,
    ShareLeaderConfig,
)
from odradek.broker.share.partition import AcknowledgementBatch
from odradek.broker.share.sessions import ShareSessions
from odradek.broker.share.state_coordinator import ShareStateConfig, ShareStateCoordinator, StateAnswer
from odradek.broker.share.state_records import (
    RecordState,
    SharePartitionKey,
    ShareStateStore,
    StateBatch,
    StateWrite,
)
from odradek.client.common.metadata_image import PartitionRegistration
from odradek.client.common.topic_rules import SHARE_STATE_TOPIC
from odradek.client.errors import ErrorCode, NotLeaderOrFollowerError
from odradek.client.record.builder import encode_batch

TP = (DATA_ID, 0)
ACCEPT, RELEASE = 1, 2
LOCK_MS = 1000

# -- sessions ------------------------------------------------------------------------------------------------------


def test_share_session_rules() -> None:
    s = ShareSessions(idle_ms=100)
    assert s.fetch("g", "m", 3, [TP], [], False, 0).error == ErrorCode.SHARE_SESSION_NOT_FOUND
    assert s.fetch("g", "m", 0, [TP], [], True, 0).error == ErrorCode.INVALID_REQUEST  # no acks when opening
    opened = s.fetch("g", "m", 0, [TP], [], False, 0).session
    assert opened is not None and opened.epoch == 1
    assert s.fetch("g", "m", 2, [], [], False, 0).error == ErrorCode.INVALID_SHARE_SESSION_EPOCH
    step = s.fetch("g", "m", 1, [(DATA_ID, 1)], [TP], True, 10)
    assert step.error == ErrorCode.NONE and step.released == (TP,)
    assert step.session is not None and list(step.session.partitions) == [(DATA_ID, 1)] and step.session.epoch == 2
    assert s.acknowledge("g", "m", 0, 10).error == ErrorCode.INVALID_SHARE_SESSION_EPOCH  # never opens one
    assert s.acknowledge("g", "m", 2, 20).error == ErrorCode.NONE
    assert s.fetch("g", "m", -1, [], [TP], False, 20).error == ErrorCode.INVALID_REQUEST  # closing forgets nothing
    closing = s.acknowledge("g", "m", -1, 20)
    assert closing.closing and closing.released == ((DATA_ID, 1),) and s.get("g", "m") is None
    s.fetch("g", "m", 0, [TP], [], False, 50)
    assert s.next_deadline_ms() == 150
    assert s.expire(149) == [] and [x.member_id for x in s.expire(150)] == ["m"] and len(s) == 0


# -- the partition leader ------------------------------------------------------------------------------------------


class FakePersister:
    """A share coordinator in memory (the real store), whose writes can be made to fail."""

    def __init__(self) -> None:
        self.store = ShareStateStore()
        self.fail_writes = False
        self.writes = 0

    async def read(self, key: SharePartitionKey, leader_epoch: int) -> StateAnswer:
        answer = self.store.read(key, leader_epoch)
        return StateAnswer(answer.error, state=answer.state)

    async def write(
        self, key: SharePartitionKey, state_epoch: int, leader_epoch: int, write: StateWrite
    ) -> StateAnswer:
        if self.fail_writes:
            return StateAnswer(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        self.writes += 1
        return StateAnswer(self.store.write(key, state_epoch, leader_epoch, write).error)


class Replicas:
    """``t``-0 led here, at epoch 0, on a real log with ``records`` one-record batches."""

    def __init__(self, root: Path, records: int) -> None:
        self.partition = Partition("t", 0, Log.open(root / "t-0"), 1)
        self.partition.update(PartitionRegistration(DATA_ID, 0, (1,), (1,), 1, 0, 0), 1, 0)
        for i in range(records):
            self.partition.append_as_leader(encode_batch([b"v%d" % i]))
        self.image = build(brokers(1), topic("t", DATA_ID), partition(0, [1], topic_id=DATA_ID))

    def get(self, name: str, index: int) -> Partition:
        return self.partition


@pytest.fixture
def data(tmp_path: Path) -> Iterator[Replicas]:
    r = Replicas(tmp_path, 10)
    yield r
    r.partition.log.close()


@contextlib.asynccontextmanager
async def leading(data: Replicas, clock: ManualClock, persister: FakePersister) -> AsyncIterator[ShareLeader]:
    config = ShareLeaderConfig(record_lock_duration_ms=LOCK_MS, delivery_count_limit=3, session_idle_ms=60_000)
    leader = ShareLeader(data, lambda: data.image, persister, config, clock)  # type: ignore[arg-type]
    try:
        yield leader
    finally:
        await leader.close()


def fetch(member: str, epoch: int, acks: dict[Any, tuple[AcknowledgementBatch, ...]] | None = None, **kw: Any):
    return ShareFetchRequest(
        "g", member, epoch, partitions=(TP,) if epoch == 0 else (), acknowledgements=acks or {}, **kw
    )


def acquired(answer: Any) -> list[tuple[int, int, int]]:
    p = answer.partitions.get(TP)
    return [] if p is None else [(a.first_offset, a.last_offset, a.delivery_count) for a in p.acquired]


async def test_a_fetch_acquires_real_batches_and_acknowledgements_are_stored(data: Replicas) -> None:
    persister, clock = FakePersister(), ManualClock()
    async with leading(data, clock, persister) as leader:
        # Nothing stored: the share-partition starts at the end (latest); new records are acquired.
        first = await leader.share_fetch(fetch("a", 0))
        assert first.error == ErrorCode.NONE and acquired(first) == [] and first.lock_duration_ms == LOCK_MS
        for i in range(3):
            data.partition.append_as_leader(encode_batch([b"n%d" % i]))
        got = await leader.share_fetch(fetch("a", 1, max_records=2))
        assert acquired(got) == [(10, 11, 1)]  # one record per batch: the soft limit stops at 2
        records = got.partitions[TP].records
        assert records and records[:8] == (10).to_bytes(8, "big")  # the batches holding them, from offset 10
        done = await leader.share_fetch(fetch("a", 2, {TP: (AcknowledgementBatch(10, 11, (ACCEPT,)),)}, max_records=0))
        assert done.partitions[TP].ack_error == ErrorCode.NONE
        key = SharePartitionKey("g", DATA_ID, 0)
        state = persister.store.state(key)
        assert state is not None and state.start_offset == 12  # stored before the answer
        # Acknowledging what it does not hold is refused, and changes nothing.
        assert (await leader.share_fetch(ShareFetchRequest("", "a", 0))).error == ErrorCode.INVALID_GROUP_ID
        assert (await leader.share_fetch(ShareFetchRequest("g", "", 0))).error == ErrorCode.INVALID_REQUEST
        refused = await leader.share_acknowledge(
            ShareAcknowledgeRequest("g", "a", 3, {TP: (AcknowledgementBatch(12, 12, (ACCEPT,)),)})
        )
        assert refused.partitions[TP].ack_error == ErrorCode.INVALID_REQUEST  # past what was fetched


async def test_an_expired_lock_releases_the_records_at_the_simulated_time(data: Replicas) -> None:
    persister, clock = FakePersister(), ManualClock()
    async with leading(data, clock, persister) as leader:
        await leader.share_fetch(fetch("a", 0))
        data.partition.append_as_leader(encode_batch([b"x"]))
        assert acquired(await leader.share_fetch(fetch("a", 1))) == [(10, 10, 1)]
        await leader.share_fetch(fetch("b", 0))
        assert acquired(await leader.share_fetch(fetch("b", 1))) == []  # locked for a
        [held] = leader._held.values()
        clock.now += LOCK_MS - 1
        await leader.fire(held)
        assert acquired(await leader.share_fetch(fetch("b", 2))) == []
        clock.now += 1
        await leader.fire(held)  # what the timer task does at the deadline
        state = persister.store.state(SharePartitionKey("g", DATA_ID, 0))
        assert state is not None and state.batches == (StateBatch(10, 10, RecordState.AVAILABLE, 1),)
        assert acquired(await leader.share_fetch(fetch("b", 3))) == [(10, 10, 2)]
        late = await leader.share_acknowledge(
            ShareAcknowledgeRequest("g", "a", 2, {TP: (AcknowledgementBatch(10, 10, (ACCEPT,)),)})
        )
        assert late.partitions[TP].ack_error == ErrorCode.INVALID_RECORD_STATE


async def test_the_timer_task_fires_on_the_deadline(data: Replicas) -> None:
    clock = ManualClock()
    async with leading(data, clock, FakePersister()) as leader:
        await leader.share_fetch(fetch("a", 0))
        data.partition.append_as_leader(encode_batch([b"x"]))
        assert acquired(await leader.share_fetch(fetch("a", 1))) == [(10, 10, 1)]
        [held] = leader._held.values()
        assert held.core is not None and held.core.next_deadline_ms() == clock.now + LOCK_MS
        clock.now += LOCK_MS  # the task slept for the lock's duration (real time here: 1 s)
        await until(lambda: held.core is not None and held.core.next_deadline_ms() is None, "the lock fired", 3)


async def test_a_failed_write_drops_the_core_and_the_next_request_starts_from_the_stored_state(data: Replicas) -> None:
    persister, clock = FakePersister(), ManualClock()
    async with leading(data, clock, persister) as leader:
        await leader.share_fetch(fetch("a", 0))
        for i in range(2):
            data.partition.append_as_leader(encode_batch([b"x%d" % i]))
        assert acquired(await leader.share_fetch(fetch("a", 1))) == [(10, 11, 1)]
        persister.fail_writes = True
        failed = await leader.share_acknowledge(
            ShareAcknowledgeRequest("g", "a", 2, {TP: (AcknowledgementBatch(10, 10, (ACCEPT,)),)})
        )
        assert failed.partitions[TP].ack_error == ErrorCode.COORDINATOR_NOT_AVAILABLE
        persister.fail_writes = False
        # The stored state knows nothing of that acknowledgement nor of the locks: both records are delivered again.
        assert acquired(await leader.share_fetch(fetch("a", 3))) == [(10, 11, 1)]


async def test_a_closing_session_releases_the_members_records(data: Replicas) -> None:
    persister, clock = FakePersister(), ManualClock()
    async with leading(data, clock, persister) as leader:
        await leader.share_fetch(fetch("a", 0))
        data.partition.append_as_leader(encode_batch([b"x"]))
        assert acquired(await leader.share_fetch(fetch("a", 1))) == [(10, 10, 1)]
        closed = await leader.share_acknowledge(ShareAcknowledgeRequest("g", "a", -1))
        assert closed.error == ErrorCode.NONE and leader.sessions.get("g", "a") is None
        assert acquired(await leader.share_fetch(fetch("b", 0))) == [(10, 10, 2)]


async def test_a_member_removed_from_its_group_has_its_records_released_here(data: Replicas) -> None:
    persister, clock = FakePersister(), ManualClock()
    async with leading(data, clock, persister) as leader:
        await leader.share_fetch(fetch("a", 0))
        data.partition.append_as_leader(encode_batch([b"x"]))
        assert acquired(await leader.share_fetch(fetch("a", 1))) == [(10, 10, 1)]
        leader.members_removed("g", ("a",))  # what the group coordinator on this broker reports
        assert leader.sessions.get("g", "a") is None
        await until(lambda: persister.writes >= 2, "the release stored")
        assert not leader.share_partitions()  # no session of the group left here: the state is read again
        assert acquired(await leader.share_fetch(fetch("b", 0))) == [(10, 10, 2)]


async def test_a_fetch_waits_for_records_then_a_leader_move_drops_the_share_partition(data: Replicas) -> None:
    clock = ManualClock()
    async with leading(data, clock, FakePersister()) as leader:
        await leader.share_fetch(fetch("a", 0))
        waiting = asyncio.ensure_future(leader.share_fetch(fetch("a", 1, max_wait_ms=5000)))
        await asyncio.sleep(0.05)
        assert not waiting.done()
        data.partition.append_as_leader(encode_batch([b"x"]))  # the high watermark moves: it wakes
        assert acquired(await asyncio.wait_for(waiting, 2)) == [(10, 10, 1)]
        data.partition.update(PartitionRegistration(DATA_ID, 0, (1, 2), (2,), 2, 1, 1), 1, 0)
        leader.on_leadership({("t", 0): data.partition})
        assert leader._held == {}
        with pytest.raises(NotLeaderOrFollowerError):
            data.partition.check_leader()
        moved = await leader.share_fetch(fetch("a", 2))
        assert moved.partitions[TP].error == ErrorCode.NOT_LEADER_OR_FOLLOWER


# -- the share coordinator -----------------------------------------------------------------------------------------

STATE_ID = b"\x08" * 16


class StateReplicas:
    """``__share_group_state``-0 led here at ``epoch`` (one replica: appends commit at once)."""

    def __init__(self, root: Path) -> None:
        self.log = Log.open(root / f"{SHARE_STATE_TOPIC}-0")
        self.image = build(brokers(1), topic(SHARE_STATE_TOPIC, STATE_ID), partition(0, [1], topic_id=STATE_ID))

    def leading(self, epoch: int) -> dict[tuple[str, int], Partition]:
        p = Partition(SHARE_STATE_TOPIC, 0, self.log, 1)
        p.update(PartitionRegistration(STATE_ID, 0, (1,), (1,), 1, epoch, epoch), 1, 0)
        return {(SHARE_STATE_TOPIC, 0): p}


@contextlib.asynccontextmanager
async def coordinating(state: StateReplicas, epoch: int) -> AsyncIterator[ShareStateCoordinator]:
    async def create(partitions: int, replication_factor: int) -> None:
        raise AssertionError("the topic exists")

    c = ShareStateCoordinator(lambda: state.image, ShareStateConfig(num_partitions=1, snapshot_every=2), create)
    c.on_leadership(state.leading(epoch))
    await until(lambda: all(cp.loaded for cp in c.runtime.partitions.values()), "loaded")
    try:
        yield c
    finally:
        await c.close()


async def test_the_share_coordinator_stores_states_and_a_new_one_loads_them(tmp_path: Path) -> None:
    state = StateReplicas(tmp_path)
    key = SharePartitionKey("g", DATA_ID, 0)
    try:
        async with coordinating(state, 0) as c:
            assert (await c.read(key, 1)).state is None
            for start in (3, 5, 7):  # a snapshot, then updates, then a snapshot again (every 2 updates)
                answer = await c.write(
                    key, 0, 1, StateWrite(start, (StateBatch(start, start + 1, RecordState.ARCHIVED, 1),))
                )
                assert answer.error == ErrorCode.NONE
            assert state.log.high_watermark == state.log.log_end_offset == 3
            assert (await c.write(key, 0, 0, StateWrite(9, ()))).error == ErrorCode.FENCED_LEADER_EPOCH
        async with coordinating(state, 1) as again:
            read = await again.read(key, 2)  # a newer leader: recorded, so leader epoch 1 is fenced from now on
            assert read.state is not None and read.state.start_offset == 7
            assert read.state.batches == (StateBatch(7, 8, RecordState.ARCHIVED, 1),)
            assert (await again.write(key, 0, 1, StateWrite(9, ()))).error == ErrorCode.FENCED_LEADER_EPOCH
            reset = await again.initialize(key, -1)
            assert (reset.error, reset.state_epoch) == (ErrorCode.NONE, 1)
            assert (await again.write(key, 0, 2, StateWrite(9, ()))).error == ErrorCode.FENCED_STATE_EPOCH
            other = SharePartitionKey("h", DATA_ID, 0)
            assert (await again.read(other, 0)).error == ErrorCode.NONE
        assert (await ShareStateCoordinator(lambda: state.image, ShareStateConfig(), _no_topic).read(key, 3)).error == (
            ErrorCode.NOT_COORDINATOR
        )
    finally:
        state.log.close()


async def _no_topic(partitions: int, replication_factor: int) -> None:
    raise AssertionError("the topic exists")


# -- the share group coordinator beside the group coordinator -------------------------------------------------------


@pytest.fixture
async def replicas(tmp_path: Path) -> AsyncIterator[OffsetsReplicas]:
    r = OffsetsReplicas(tmp_path)
    yield r
    r.close()


class RecordingPersister:
    def __init__(self) -> None:
        self.initialized: list[tuple[SharePartitionKey, int]] = []

    async def initialize(self, key: SharePartitionKey, start_offset: int) -> StateAnswer:
        self.initialized.append((key, start_offset))
        return StateAnswer(ErrorCode.NONE, state_epoch=1)


def share_join(member: str) -> ShareHeartbeatRequest:
    return ShareHeartbeatRequest(member, 0, subscribed_topic_names=("t",))


async def test_share_groups_beside_the_group_coordinator(replicas: OffsetsReplicas) -> None:
    clock = ManualClock()
    persister = RecordingPersister()
    async with serving(replicas, clock) as groups:
        removed: list[tuple[str, tuple[str, ...]]] = []
        share = ShareGroupCoordinator(
            groups,
            lambda: replicas.image,
            ShareGroupConfig(session_timeout_ms=10_000, heartbeat_interval_ms=1000),
            persister,  # type: ignore[arg-type]
            clock,
            on_removed=lambda group, members: removed.append((group, members)),
        )
        r = await share.heartbeat("s", share_join("m1"))
        assert (r.error, r.member_epoch, r.heartbeat_interval_ms, r.assignment) == (
            ErrorCode.NONE,
            1,
            1000,
            frozenset({(DATA_ID, 0)}),
        )
        listed = groups.list_groups(types=["share"])[1]
        assert [(g.group_id, g.protocol_type, g.state, g.group_type) for g in listed] == [
            ("s", "share", "Stable", "share")
        ]
        # One group id, one kind of group.
        classic = JoinGroupRequest(0, "", None, "c", "h", 10_000, 10_000, "consumer", (("range", b""),))
        assert (await groups.join("s", classic)).error == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        consumer = ConsumerHeartbeatRequest(
            "c1", 0, rebalance_timeout_ms=1000, subscribed_topic_names=("t",), owned=frozenset()
        )
        assert (await groups.consumer_heartbeat("s", consumer)).error == ErrorCode.GROUP_ID_NOT_FOUND
        assert (await groups.consumer_heartbeat("c", consumer)).error == ErrorCode.NONE
        assert (await share.heartbeat("c", share_join("m2"))).error == ErrorCode.GROUP_ID_NOT_FOUND
        assert share.describe("c")[0] == ErrorCode.GROUP_ID_NOT_FOUND
        assert groups.describe("s").state == "Dead"  # DescribeGroups knows classic and consumer groups only
        assert await groups.delete_group("s") == ErrorCode.NON_EMPTY_GROUP
        # The session timer removes the silent member (fired at the simulated time).
        cp: CoordinatorPartition[Any, Any] = next(iter(groups.partitions.values()))
        shard = share._shards[cp]
        clock.now += 9_999
        assert (await share.fire(cp, shard)) == clock.now + 1
        clock.now += 1
        assert (await share.fire(cp, shard)) is None
        assert removed == [("s", ("m1",))]  # the leader here releases its records
        error, _, description = share.describe("s")
        assert error == ErrorCode.NONE and description is not None and description.state == "Empty"
        assert await groups.delete_group("s") == ErrorCode.NONE
        assert persister.initialized == [(SharePartitionKey("s", DATA_ID, 0), -1)]  # its state is reset
        assert share.describe("s")[0] == ErrorCode.GROUP_ID_NOT_FOUND
        assert [g.group_id for g in groups.list_groups()[1]] == ["c"]


def test_the_node_keys_become_the_share_configs() -> None:
    props: dict[str, object] = {
        "process.roles": "broker",
        "node.id": 4,
        "controller.quorum.voters": "1@127.0.0.1:7001",
        "listeners": "PLAINTEXT://127.0.0.1:9092",
        "group.share.record.lock.duration.ms": 1500,
        "group.share.delivery.count.limit": 7,
        "group.share.partition.max.record.locks": 300,
        "group.share.session.timeout.ms": 9000,
        "group.share.heartbeat.interval.ms": 900,
        "group.share.max.size": 11,
        "share.coordinator.state.topic.num.partitions": 5,
        "share.coordinator.state.topic.replication.factor": 2,
        "share.coordinator.state.topic.min.isr": 1,
        "share.coordinator.snapshot.update.records.per.snapshot": 40,
        "share.coordinator.write.timeout.ms": 800,
    }
    config = NodeConfig(props)
    assert ShareLeaderConfig.from_node(config) == ShareLeaderConfig(1500, 7, 300, 9000)
    assert group_config(config) == ShareGroupConfig(9000, 900, 11)
    assert ShareStateConfig.from_node(config) == ShareStateConfig(5, 2, 1, 40, 800)
    with pytest.raises(ConfigError, match=r"group\.share\.heartbeat\.interval\.ms must be less than"):
        NodeConfig({**props, "group.share.heartbeat.interval.ms": 9000})


async def test_a_full_share_group_refuses_a_member(replicas: OffsetsReplicas) -> None:
    async with serving(replicas, ManualClock()) as groups:
        share = ShareGroupCoordinator(groups, lambda: replicas.image, ShareGroupConfig(max_size=1))
        assert (await share.heartbeat("s", share_join("m1"))).error == ErrorCode.NONE
        assert (await share.heartbeat("s", share_join("m2"))).error == ErrorCode.GROUP_MAX_SIZE_REACHED
        assert (await share.heartbeat("t", ShareHeartbeatRequest("m3", 0))).error == ErrorCode.INVALID_REQUEST
        assert [g.group_id for g in groups.list_groups()[1]] == ["s"]  # a refused first heartbeat leaves no group


async def test_share_groups_are_stored_and_a_new_coordinator_restores_them(replicas: OffsetsReplicas) -> None:
    clock = ManualClock()
    persister = RecordingPersister()
    config = ShareGroupConfig(session_timeout_ms=10_000, heartbeat_interval_ms=1000)

    def coordinator(groups: Any, removed: list[tuple[str, tuple[str, ...]]] | None = None) -> ShareGroupCoordinator:
        def on_removed(group: str, members: tuple[str, ...]) -> None:
            if removed is not None:
                removed.append((group, members))

        return ShareGroupCoordinator(groups, lambda: replicas.image, config, persister, clock, on_removed)  # type: ignore[arg-type]

    async with serving(replicas, clock) as groups:
        share = coordinator(groups)
        assert (await share.heartbeat("s", share_join("m1"))).member_epoch == 1
        assert (await share.heartbeat("s", share_join("m2"))).member_epoch == 2
        assert (await share.heartbeat("s", share_join("m3"))).member_epoch == 3
        assert (await share.heartbeat("s", ShareHeartbeatRequest("m3", -1))).error == ErrorCode.NONE  # epoch 4
        await share.heartbeat("d", share_join("x"))
        await share.heartbeat("d", ShareHeartbeatRequest("x", -1))
        before = share.describe("s")[2]
        assert before is not None and before.group_epoch == 4
    # A coordinator that takes the partition over (here: a new one loading it) knows the groups before any
    # heartbeat: their epochs, members and assignments.
    async with serving(replicas, clock) as groups:
        removed: list[tuple[str, tuple[str, ...]]] = []
        share = coordinator(groups, removed)
        error, _, after = share.describe("s")
        assert error == ErrorCode.NONE and after == before
        assert {(g.group_id, g.state) for g in groups.list_groups(types=["share"])[1]} == {
            ("s", "Stable"),
            ("d", "Empty"),
        }
        classic = JoinGroupRequest(0, "", None, "c", "h", 10_000, 10_000, "consumer", (("range", b""),))
        assert (await groups.join("s", classic)).error == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        # A member goes on with its epoch (m1 is still at epoch 1, and moves to the assignment epoch; its
        # partition, shared, is unchanged).
        clock.now += 5_000
        r = await share.heartbeat("s", ShareHeartbeatRequest("m1", 1))
        assert (r.error, r.member_epoch, r.assignment) == (ErrorCode.NONE, 4, None)
        # The topics with state are stored too: deleting the empty group resets them, then tombstones it.
        assert await groups.delete_group("d") == ErrorCode.NONE
        assert persister.initialized == [(SharePartitionKey("d", DATA_ID, 0), -1)]
        # m2, silent since the load, times out by its session.
        cp: CoordinatorPartition[Any, Any] = next(iter(groups.partitions.values()))
        clock.now += 5_000
        await share.fire(cp, share._shards[cp])
        assert removed == [("s", ("m2",))]
    async with serving(replicas, clock) as groups:
        share = coordinator(groups)
        error, _, again = share.describe("s")
        assert error == ErrorCode.NONE and again is not None
        assert (again.group_epoch, [(m.member_id, m.member_epoch) for m in again.members]) == (5, [("m1", 4)])
        assert share.describe("d")[0] == ErrorCode.GROUP_ID_NOT_FOUND


async def test_a_share_heartbeat_whose_records_are_not_stored_never_happened(replicas: OffsetsReplicas) -> None:
    clock = ManualClock()
    groups = coordinator(replicas, clock, commit_timeout_ms=200)  # the follower does not replicate yet
    share = ShareGroupCoordinator(groups, lambda: replicas.image, ShareGroupConfig(), None, clock)
    groups.on_leadership(replicas.leading)
    pump: asyncio.Task[None] | None = None
    try:
        await until(lambda: loaded(groups), "loaded")
        r = await share.heartbeat("s", share_join("m1"))
        assert r.error == ErrorCode.COORDINATOR_NOT_AVAILABLE  # its append timed out: no group
        assert share.describe("s")[0] == ErrorCode.GROUP_ID_NOT_FOUND
        pump = asyncio.create_task(replicas.keep_replicating())
        assert (await share.heartbeat("s", share_join("m1"))).member_epoch == 1
    finally:
        if pump is not None:
            pump.cancel()
        await groups.close()

"""The coordinator runtime over a fake partition, with a small coordinator of string values plugged into it as the
group and transaction coordinators are: loading and replay, serving only once the high watermark reached the
loaded end, routing answers, appends answered once committed (or failed, or timed out), outcomes reported to the
core, timers, and what an unload cancels and answers."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass

import pytest
from controller_images import brokers, partition, topic

from odradek.broker.coordinator.decisions import earliest, sleep_s
from odradek.broker.coordinator.runtime import CoordinatorPartition, CoordinatorRuntime
from odradek.broker.groups.partitioner import offsets_partition_for
from odradek.broker.log.log import AppendOrigin
from odradek.client.common.metadata_image import MetadataImage, image_from_records
from odradek.client.errors import ErrorCode, OdradekError

TOPIC = "__values"
TOPIC_ID = b"\x0c" * 16
KEY = next(k for k in "abcdefgh" if offsets_partition_for(k, 2) == 0)  # of partition 0, the one led here
ELSEWHERE = next(k for k in "abcdefgh" if offsets_partition_for(k, 2) == 1)


def values_image(with_topic: bool = True) -> MetadataImage:
    records = [*brokers(1)]
    if with_topic:
        records += [topic(TOPIC, TOPIC_ID), partition(0, [1], topic_id=TOPIC_ID), partition(1, [1], topic_id=TOPIC_ID)]
    return image_from_records(records)


@dataclass
class Read:
    records: tuple[bytes, ...]
    next_offset: int


class FakeLog:
    """One record a batch; reads return at most two, so a load takes several."""

    def __init__(self, records: Iterable[bytes]) -> None:
        self.records = list(records)
        self.log_start_offset = 0
        self.high_watermark = 0

    @property
    def log_end_offset(self) -> int:
        return len(self.records)

    def read(self, offset: int, max_bytes: int, max_offset: int) -> Read:
        chunk = tuple(self.records[offset : min(offset + 2, max_offset)])
        return Read(chunk, offset + len(chunk))


@dataclass
class Appended:
    last_offset: int


class FakePartition:
    """The leader's side of a partition: appends, the high watermark moving when the test replicates, and the
    waiters on it (a loading coordinator's, an acks=all append's)."""

    def __init__(self, records: Iterable[bytes] = ()) -> None:
        self.log = FakeLog(records)
        self.is_leader = True
        self.leader_epoch = 1
        self.refuse: int | None = None  # the error code appends fail with
        self._waiters: list[asyncio.Future[None]] = []
        self._acks: list[tuple[int, asyncio.Future[int]]] = []

    def add_waiter(self, future: asyncio.Future[None]) -> None:
        self._waiters.append(future)

    def remove_waiter(self, future: asyncio.Future[None]) -> None:
        if future in self._waiters:
            self._waiters.remove(future)

    def append_as_leader(self, batch: bytes, acks: int, origin: AppendOrigin) -> Appended:
        assert acks == -1 and origin is AppendOrigin.COORDINATOR
        if self.refuse is not None:
            raise OdradekError("refused", code=self.refuse)
        self.log.records.append(batch)
        return Appended(self.log.log_end_offset - 1)

    def wait_for_commit(self, offset: int) -> asyncio.Future[int]:
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        if self.log.high_watermark >= offset:
            future.set_result(ErrorCode.NONE)
        else:
            self._acks.append((offset, future))
        return future

    def replicate(self, up_to: int | None = None) -> None:
        """The followers caught up with the log (or up to ``up_to``): the high watermark moves."""
        hw = self.log.high_watermark = self.log.log_end_offset if up_to is None else up_to
        for future in self._waiters:
            if not future.done():
                future.set_result(None)
        waiting = []
        for offset, future in self._acks:
            if offset <= hw and not future.done():
                future.set_result(ErrorCode.NONE)
            elif not future.done():
                waiting.append((offset, future))
        self._acks = waiting


class Values:
    """The shard of the values coordinator: the values replayed or written, and its timers."""

    def __init__(self) -> None:
        self.values: list[str] = []
        self.deadlines: list[int] = []
        self.fired: list[int] = []
        self.outcomes: list[int] = []  # the append outcomes reported to it


ValuesPartition = CoordinatorPartition[Values, int]


def now_ms() -> int:
    return time.monotonic_ns() // 1_000_000


class ValuesCoordinator:
    """Keys mapped to the two partitions of ``__values``; each write appends its value. What the runtime calls is
    recorded in ``events``."""

    def __init__(self, image: Callable[[], MetadataImage], append_timeout_ms: int = 5000) -> None:
        self.events: list[tuple[str, int]] = []
        self.created: list[tuple[int, int]] = []
        self.timer_runs = 0
        self.runtime: CoordinatorRuntime[Values, int] = CoordinatorRuntime(
            self, TOPIC, image, 2, 3, self._create, append_timeout_ms
        )

    async def _create(self, partitions: int, replication_factor: int) -> None:
        self.created.append((partitions, replication_factor))

    def new_shard(self, index: int) -> Values:
        return Values()

    def replay(self, cp: ValuesPartition, records: tuple[bytes, ...]) -> None:
        cp.shard.values.extend(r.decode() for r in records)

    def on_replayed(self, cp: ValuesPartition) -> None:
        self.events.append(("replayed", cp.epoch))

    def on_loaded(self, cp: ValuesPartition) -> None:
        self.events.append(("loaded", cp.epoch))

    def on_unloaded(self, cp: ValuesPartition) -> None:
        self.events.append(("unloaded", cp.epoch))

    def fire_timers(self, cp: ValuesPartition) -> float | None:
        self.timer_runs += 1
        now = now_ms()
        cp.shard.fired += [d for d in cp.shard.deadlines if d <= now]
        cp.shard.deadlines = [d for d in cp.shard.deadlines if d > now]
        return sleep_s(earliest(cp.shard.deadlines), now_ms())

    def summary(self, shard: Values) -> str:
        return f"{len(shard.values)} values"

    # -- requests --------------------------------------------------------------------------------------------------

    async def write(self, key: str, value: str) -> int:
        """Append the value; it counts once committed."""
        error, cp = self.runtime.owner(key)
        if cp is None:
            return error
        code = cp.acknowledged(await self.runtime.append(cp, value.encode()))
        if code == ErrorCode.NONE:
            cp.shard.values.append(value)
        return code

    async def persist(self, key: str, value: str) -> int | None:
        """The core asks to persist the value and answers the parked request once told the outcome."""
        error, cp = self.runtime.owner(key)
        if cp is None:
            return error

        def start(token: int) -> None:
            def report(code: int) -> None:
                cp.shard.outcomes.append(code)
                cp.answer(token, code)

            self.runtime.persist(cp, value.encode(), report, f"persist-{token}")

        return await self.runtime.park(cp, start)

    def schedule(self, key: str, deadline_ms: int) -> None:
        _, cp = self.runtime.owner(key)
        assert cp is not None
        cp.shard.deadlines.append(deadline_ms)
        cp.wake.set()  # the deadline may be earlier than the one the timer sleeps until


async def until(condition: Callable[[], bool], what: str, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.005)


@pytest.fixture
def leader() -> FakePartition:
    return FakePartition([b"a", b"b", b"c"])


@pytest.fixture
async def coordinator() -> AsyncIterator[ValuesCoordinator]:
    c = ValuesCoordinator(values_image)
    yield c
    await c.runtime.close()


def lead(c: ValuesCoordinator, p: FakePartition) -> ValuesPartition:
    c.runtime.on_leadership({(TOPIC, 0): p})  # type: ignore[dict-item]
    return c.runtime.partitions[0]


async def loaded(c: ValuesCoordinator, p: FakePartition) -> ValuesPartition:
    cp = lead(c, p)
    p.replicate()
    await until(lambda: cp.loaded, "loaded")
    return cp


async def test_a_partition_replays_its_log_and_serves_once_the_high_watermark_reaches_its_end(
    coordinator: ValuesCoordinator, leader: FakePartition
) -> None:
    leader.replicate(up_to=1)  # the previous coordinator's last two records may still be truncated away
    cp = lead(coordinator, leader)
    assert coordinator.runtime.owner(KEY) == (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, None)
    await until(lambda: cp.replayed, "the replay")
    assert cp.shard.values == ["a", "b", "c"]  # read in two chunks
    leader.log.records.append(b"d")  # after the end the load started at: not replayed
    leader.replicate(up_to=2)
    await asyncio.sleep(0.02)
    assert not cp.loaded and coordinator.runtime.owner(KEY) == (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, None)
    assert coordinator.runtime.loading() and coordinator.runtime.serving() == []
    leader.replicate(up_to=3)
    await until(lambda: cp.loaded, "served once the high watermark reached the loaded end")
    assert coordinator.runtime.owner(KEY) == (ErrorCode.NONE, cp)
    assert cp.shard.values == ["a", "b", "c"]
    assert coordinator.events == [("replayed", 1), ("loaded", 1)]
    assert not coordinator.runtime.loading() and coordinator.runtime.serving() == [cp]
    assert {t.get_name() for t in cp.tasks} == {f"timers-{TOPIC}-0"}


async def test_not_coordinator_for_a_partition_not_led_here_after_an_unload_and_at_a_new_epoch(
    coordinator: ValuesCoordinator, leader: FakePartition
) -> None:
    first = await loaded(coordinator, leader)
    assert coordinator.runtime.owner(ELSEWHERE) == (ErrorCode.NOT_COORDINATOR, None)
    leader.leader_epoch = 2  # before the leadership call: what was loaded at epoch 1 is not acted on
    assert coordinator.runtime.owner(KEY) == (ErrorCode.NOT_COORDINATOR, None)
    assert await coordinator.write(KEY, "x") == ErrorCode.NOT_COORDINATOR
    second = lead(coordinator, leader)  # reloaded at the new epoch
    assert second is not first and first.unloaded and second.epoch == 2
    await until(lambda: second.loaded, "the reload")
    assert coordinator.runtime.owner(KEY) == (ErrorCode.NONE, second)
    coordinator.runtime.on_leadership({})  # no longer led
    assert coordinator.runtime.partitions == {} and second.unloaded
    assert coordinator.runtime.owner(KEY) == (ErrorCode.NOT_COORDINATOR, None)
    assert coordinator.events == [
        ("replayed", 1),
        ("loaded", 1),
        ("unloaded", 1),
        ("replayed", 2),
        ("loaded", 2),
        ("unloaded", 2),
    ]


async def test_a_load_is_abandoned_when_the_leadership_moves(
    coordinator: ValuesCoordinator, leader: FakePartition
) -> None:
    cp = lead(coordinator, leader)
    await until(lambda: cp.replayed, "the replay")
    leader.is_leader = False  # never reaches the high watermark as this leader
    leader.replicate()
    await until(lambda: not cp.tasks, "the load gives up")
    assert not cp.loaded and coordinator.events == [("replayed", 1)]


async def test_an_append_is_answered_once_the_high_watermark_reaches_it(
    coordinator: ValuesCoordinator, leader: FakePartition
) -> None:
    cp = await loaded(coordinator, leader)
    write = asyncio.ensure_future(coordinator.write(KEY, "d"))
    await asyncio.sleep(0.02)
    assert leader.log.records[-1] == b"d" and not write.done()  # appended at once, answered once committed
    leader.replicate()
    assert await write == ErrorCode.NONE
    assert cp.shard.values == ["a", "b", "c", "d"]


async def test_a_failed_append_and_one_not_committed_in_time_are_reported(leader: FakePartition) -> None:
    c = ValuesCoordinator(values_image, append_timeout_ms=100)
    try:
        cp = await loaded(c, leader)
        leader.refuse = ErrorCode.NOT_ENOUGH_REPLICAS
        assert await c.write(KEY, "d") == ErrorCode.NOT_ENOUGH_REPLICAS
        leader.refuse = None
        started = time.monotonic()
        assert await c.write(KEY, "e") == ErrorCode.REQUEST_TIMED_OUT  # nothing replicates
        assert 0.1 <= time.monotonic() - started < 2
        assert await c.persist(KEY, "f") == ErrorCode.REQUEST_TIMED_OUT
        assert cp.shard.values == ["a", "b", "c"] and cp.shard.outcomes == [ErrorCode.REQUEST_TIMED_OUT]
    finally:
        await c.runtime.close()


async def test_a_persist_reports_its_outcome_to_the_core(coordinator: ValuesCoordinator, leader: FakePartition) -> None:
    cp = await loaded(coordinator, leader)
    persist = asyncio.ensure_future(coordinator.persist(KEY, "d"))
    await asyncio.sleep(0.02)
    assert not persist.done() and cp.waiters
    leader.replicate()
    assert await persist == ErrorCode.NONE and cp.shard.outcomes == [ErrorCode.NONE] and not cp.waiters
    # Committed after the partition moved to another epoch: the next coordinator decides its fate.
    persist = asyncio.ensure_future(coordinator.persist(KEY, "e"))
    await asyncio.sleep(0.02)
    leader.leader_epoch = 2
    leader.replicate()
    assert await persist == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert cp.shard.outcomes == [ErrorCode.NONE, ErrorCode.NOT_LEADER_OR_FOLLOWER]


async def test_an_unload_cancels_the_partitions_tasks_and_answers_its_parked_requests(
    coordinator: ValuesCoordinator, leader: FakePartition
) -> None:
    cp = await loaded(coordinator, leader)
    forever = asyncio.Event()
    cp.spawn(forever.wait(), "forever")
    parked = asyncio.ensure_future(coordinator.persist(KEY, "d"))  # its append is never committed
    await asyncio.sleep(0.02)
    tasks = set(cp.tasks)
    assert {t.get_name() for t in tasks} >= {"forever", f"timers-{TOPIC}-0"} and len(tasks) == 3
    coordinator.runtime.on_leadership({})
    assert await parked is None  # the coordinator answers it: NOT_COORDINATOR, in its own terms
    await asyncio.gather(*tasks, return_exceptions=True)
    assert all(t.cancelled() for t in tasks) and not cp.tasks
    assert cp.shard.outcomes == []  # unloaded: what the shard held is gone, nothing is reported to it
    assert coordinator.events[-1] == ("unloaded", 1)


async def test_the_timers_fire_at_their_deadlines_and_rearm_when_a_request_moves_them(
    coordinator: ValuesCoordinator, leader: FakePartition
) -> None:
    cp = await loaded(coordinator, leader)
    await until(lambda: coordinator.timer_runs == 1, "the first run")
    await asyncio.sleep(0.05)
    assert coordinator.timer_runs == 1  # no deadline: it sleeps until woken
    late, soon = now_ms() + 60_000, now_ms() + 100
    coordinator.schedule(KEY, late)
    await until(lambda: coordinator.timer_runs == 2, "woken by the request")
    coordinator.schedule(KEY, soon)  # earlier than the deadline it sleeps until: re-armed
    await until(lambda: cp.shard.fired == [soon], "the earlier deadline fires", timeout=2)
    assert now_ms() >= soon and cp.shard.deadlines == [late]


async def test_routing_creates_the_topic_on_first_use_and_close_unloads_everything(leader: FakePartition) -> None:
    image = values_image(with_topic=False)
    c = ValuesCoordinator(lambda: image)
    assert c.runtime.partition_count() == 2  # the configured count, which the topic will have
    assert c.runtime.find_coordinator(KEY) == (ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, "", -1)
    assert c.runtime.find_coordinator(KEY)[0] == ErrorCode.COORDINATOR_NOT_AVAILABLE
    await asyncio.sleep(0)
    assert c.created == [(2, 3)]  # asked once while the first request is under way
    image = values_image()
    assert c.runtime.find_coordinator(KEY) == (ErrorCode.NONE, 1, "127.0.0.1", 9001)
    cp = await loaded(c, leader)
    tasks = set(cp.tasks)
    await c.runtime.close()
    assert c.runtime.partitions == {} and cp.unloaded and all(t.done() for t in tasks)

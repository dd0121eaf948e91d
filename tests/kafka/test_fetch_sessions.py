"""Fetch sessions (KIP-227) on the Kafka listener with real partitions: a leader of 20 partitions behind a real
BrokerService, KafkaListener and Fetch handler, and followers over the real KafkaTransport / fetcher.

- An idle session round reads no partition and parks no per-partition waiter; a change is answered alone.
- With ``max.incremental.fetch.session.cache.slots = 0`` every answer is full and carries session id 0.
- A fetcher replicating 20 partitions through a session catches up byte for byte while records keep coming.
- The ISR: a caught-up follower whose idle partitions are left out of its session's rounds stays in the ISR; one
  that stops fetching, or that stays behind, leaves it after ``replica.lag.time.max.ms`` (simulated times).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from odradek.broker.dataplane import BrokerService
from odradek.broker.fetch_response import PartitionFetch, ReplicaFetchRequest
from odradek.broker.fetch_session import FetchSessionCache, PartitionRead, Seen
from odradek.broker.fetch_sessions import FetchSessions
from odradek.broker.fetcher import FetcherConfig, ReplicaFetcherManager
from odradek.broker.kafka.apis import ApiRegistry
from odradek.broker.kafka.data_apis import fetch_api
from odradek.broker.kafka.dispatch import KafkaDispatcher
from odradek.broker.kafka.replica_connection import KafkaTransport
from odradek.broker.kafka.server import KafkaListener
from odradek.broker.log.log import Log
from odradek.broker.partition import Partition
from odradek.broker.replication import IsrChange
from odradek.client.common.access import OPEN
from odradek.client.common.metadata_image import PartitionRegistration
from odradek.client.errors import UnknownTopicOrPartitionError
from odradek.client.record.builder import encode_batch

LEADER, FOLLOWER, EPOCH, BROKER_EPOCH = 1, 2, 3, 10
TOPIC_ID = b"\x07" * 16
MAX_BYTES = 1 << 20
COUNT = 20
NO_ID = bytes(16)


def registration() -> PartitionRegistration:
    return PartitionRegistration(TOPIC_ID, 0, (LEADER, FOLLOWER), (LEADER, FOLLOWER), LEADER, EPOCH, 0)


class Replicas:
    """The slice of ReplicaManager that BrokerService and FetchSessions use."""

    def __init__(self, partitions: dict[tuple[str, int], Partition], image: Any) -> None:
        self.partitions = partitions
        self.image = image

    def get(self, topic: str, partition: int) -> Partition:
        found = self.partitions.get((topic, partition))
        if found is None:
            raise UnknownTopicOrPartitionError(f"{topic}-{partition}")
        return found


class Leader:
    def __init__(self, root: Path, slots: int) -> None:
        self.partitions = {}
        for i in range(COUNT):
            p = Partition("t", i, Log.open(root / "leader" / f"t-{i}"), LEADER)
            p.update(registration(), 1, 0)
            p.append_as_leader(encode_batch([b"x%d" % i] * 3, timestamps=1_000))
            self.partitions[("t", i)] = p
        self.image = SimpleNamespace(
            brokers={
                FOLLOWER: SimpleNamespace(epoch=BROKER_EPOCH),
                LEADER: SimpleNamespace(host="127.0.0.1", port=1, listeners=(), epoch=1),
            },
            topics={TOPIC_ID: SimpleNamespace(name="t")},
            topic_ids={"t": TOPIC_ID},
        )
        replicas = Replicas(self.partitions, self.image)
        self.service = BrokerService(LEADER, "c", replicas, log_dir_moves=object())  # type: ignore[arg-type]
        self.sessions = FetchSessions(FetchSessionCache(slots), replicas, refresh_ms=1000)  # type: ignore[arg-type]
        backend = SimpleNamespace(
            data=self.service, image=lambda: self.image, access=OPEN, fetch_sessions=self.sessions
        )
        registry = ApiRegistry()
        registry.add(*fetch_api(backend))  # type: ignore[arg-type]
        self.listener = KafkaListener(
            "127.0.0.1", 0, "KAFKA", KafkaDispatcher(registry), max_request_bytes=1 << 20, idle_timeout_ms=60_000
        )

    async def start(self) -> None:
        await self.listener.start()
        self.image.brokers[LEADER].listeners = (("KAFKA", "127.0.0.1", self.listener.port),)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.listener.port}"

    async def close(self) -> None:
        await self.listener.stop()
        for p in self.partitions.values():
            p.log.close()


async def leader_with(tmp_path: Path, slots: int) -> Leader:
    leader = Leader(tmp_path, slots)
    await leader.start()
    return leader


@pytest.fixture
async def leader(tmp_path: Path) -> AsyncIterator[Leader]:
    leader = await leader_with(tmp_path, 1000)
    yield leader
    await leader.close()


def caught_up(leader: Leader, max_wait_ms: int = 150) -> ReplicaFetchRequest:
    parts = [
        PartitionFetch(i, EPOCH, p.log.log_end_offset, EPOCH, 0, MAX_BYTES, p.log.log_end_offset)
        for (_, i), p in leader.partitions.items()
    ]
    return ReplicaFetchRequest(FOLLOWER, BROKER_EPOCH, max_wait_ms, 1, 10 * MAX_BYTES, [("t", parts)])


async def test_a_follower_session_round_answers_only_news(leader: Leader) -> None:
    transport = KafkaTransport(leader.address, FOLLOWER, lambda: leader.image)  # type: ignore[arg-type,return-value]
    try:
        first = await transport.send(caught_up(leader), 5)
        assert len(first) == COUNT and transport.session.session_id != 0  # full: every partition, a new session
        (session,) = leader.sessions.cache.sessions.values()
        assert len(session) == COUNT
        assert await transport.send(caught_up(leader), 5) == {}  # idle: nothing is news
        # While a round waits: one wakeup on the session, no waiter on any partition.
        waiting = asyncio.create_task(transport.send(caught_up(leader, 5000), 10))
        await asyncio.sleep(0.1)
        assert session.wakeup is not None
        assert sum(p.waiter_count for p in leader.partitions.values()) == 0
        leader.partitions[("t", 5)].append_as_leader(encode_batch([b"new"], timestamps=1_000))
        answer = await waiting
        assert list(answer) == [("t", 5)] and answer[("t", 5)].records
        assert leader.sessions.cache.incremental_rounds == {"follower": 2, "consumer": 0}
    finally:
        await transport.close()


async def test_a_follower_whose_session_is_gone_starts_a_new_one_at_once(leader: Leader) -> None:
    transport = KafkaTransport(leader.address, FOLLOWER, lambda: leader.image)  # type: ignore[arg-type,return-value]
    try:
        await transport.send(caught_up(leader, 20), 5)
        old = transport.session.session_id
        leader.sessions.close(old)  # evicted, say
        # FETCH_SESSION_ID_NOT_FOUND, then at once a full request in a new session: every partition, no error.
        assert len(await transport.send(caught_up(leader, 20), 5)) == COUNT
        assert transport.session.session_id not in (0, old)
        assert list(leader.sessions.cache.sessions) == [transport.session.session_id]
        # A lost answer (the connection dropped): the next request is full and replaces the session.
        transport.session.failed()
        assert len(await transport.send(caught_up(leader, 20), 5)) == COUNT
        assert len(leader.sessions.cache.sessions) == 1
    finally:
        await transport.close()


async def test_no_slots_means_no_sessions(tmp_path: Path) -> None:
    leader = await leader_with(tmp_path, 0)
    transport = KafkaTransport(leader.address, FOLLOWER, lambda: leader.image)  # type: ignore[arg-type,return-value]
    try:
        for _ in range(2):
            assert len(await transport.send(caught_up(leader, 20), 5)) == COUNT  # full answers, every time
            assert transport.session.session_id == 0 and transport.session.epoch == 0
        assert leader.sessions.cache.sessions == {}
    finally:
        await transport.close()
        await leader.close()


async def test_a_fetcher_replicates_every_partition_through_a_session(leader: Leader, tmp_path: Path) -> None:
    followers = []
    for i in range(COUNT):
        p = Partition("t", i, Log.open(tmp_path / "follower" / f"t-{i}"), FOLLOWER)
        p.update(registration(), 1, 0)
        followers.append(p)
    config = FetcherConfig(max_wait_ms=100, backoff_ms=50, protocol="kafka")
    manager = ReplicaFetcherManager(FOLLOWER, lambda: BROKER_EPOCH, lambda: leader.image, config)  # type: ignore[arg-type,return-value]
    try:
        for p in followers:
            manager.assign(p)
        for round_ in range(5):
            for i in range(round_, COUNT, 4):
                leader.partitions[("t", i)].append_as_leader(encode_batch([b"r%d" % round_] * 2, timestamps=1_000))
            await asyncio.sleep(0.05)
        async with asyncio.timeout(10):
            while any(
                f.log.high_watermark < leader.partitions[("t", f.partition)].log.log_end_offset for f in followers
            ):
                await asyncio.sleep(0.02)
    finally:
        await manager.close()
    for f in followers:
        expected = bytes(leader.partitions[("t", f.partition)].log.read(0, MAX_BYTES).records)
        assert bytes(f.log.read(0, MAX_BYTES).records) == expected
        f.log.close()
    assert leader.sessions.cache.incremental_rounds["follower"] > 0
    assert len(leader.sessions.cache.sessions) == 1  # one session the whole run: never reset


# ---- the ISR, with simulated times ----

LAG_MAX_MS = 30_000
REFRESH_MS = LAG_MAX_MS // 4


class IsrHarness:
    """One leader partition (replicas 1, 2), follower 2 in a session; ISR change requests recorded."""

    def __init__(self, root: Path, name: str) -> None:
        self.changes: list[IsrChange] = []
        self.p = Partition("t", 0, Log.open(root / name), LEADER, lambda _, c: self.changes.append(c))
        self.p.update(registration(), 1, 0)
        self.p.append_as_leader(encode_batch([b"a"] * 5, timestamps=1_000), now_ms=0)
        self.sessions = FetchSessions(FetchSessionCache(10), Replicas({("t", 0): self.p}, None), REFRESH_MS)  # type: ignore[arg-type]

    def follower_fetches(self, offset: int, now_ms: int) -> None:
        """A read in a session round (the request lists the partition, or it was dirty)."""
        self.p.read_for_follower(FOLLOWER, offset, EPOCH, MAX_BYTES, EPOCH, now_ms, 0, offset)

    def open_session(self, offset: int, now_ms: int) -> None:
        read = PartitionRead(0, offset, MAX_BYTES, EPOCH, EPOCH, 0, offset)
        hw = self.p.log.high_watermark
        session_id = self.sessions.create(FOLLOWER, False, [("t", NO_ID, read, Seen(0, hw, hw, 0, False, False))])
        self.session = self.sessions.cache.sessions[session_id]
        self.session.last_refresh_ms = now_ms  # the simulated clock, not the process's

    def idle_rounds(self, start_ms: int, end_ms: int) -> None:
        """The follower's session rounds every 500 ms that read nothing (the partition did not change), and the
        leader's periodic lag check."""
        for now in range(start_ms, end_ms, 500):
            assert not self.session.dirty
            if self.session.refresh_due(now, REFRESH_MS):
                self.sessions.refresh(self.session, now)
            if now % REFRESH_MS == 0:
                self.p.check_lagging(now, LAG_MAX_MS)


def test_an_idle_caught_up_follower_stays_in_the_isr_and_leaves_it_once_it_stops_fetching(tmp_path: Path) -> None:
    h = IsrHarness(tmp_path, "a")
    leo = h.p.log.log_end_offset
    h.follower_fetches(leo, 0)
    assert h.p.log.high_watermark == leo
    h.open_session(leo, 0)
    h.idle_rounds(0, 120_000)  # two minutes of idle rounds: nothing read, nobody lagging
    h.p.append_as_leader(encode_batch([b"b"]), now_ms=120_000)
    assert h.session.dirty == {("t", 0)}  # the next round reads it
    h.p.check_lagging(120_001, LAG_MAX_MS)  # before that round: the follower was caught up a moment ago
    assert h.changes == []
    # The follower stops fetching (no more rounds): it leaves the ISR once the lag time has passed since the last
    # replay of its position (at most REFRESH_MS before its last round).
    h.p.check_lagging(120_000 + LAG_MAX_MS - REFRESH_MS - 1, LAG_MAX_MS)
    assert h.changes == []
    h.p.check_lagging(120_000 + LAG_MAX_MS + 1, LAG_MAX_MS)
    assert [c.new_isr for c in h.changes] == [(LEADER,)]


def test_without_the_replayed_positions_the_same_follower_would_be_dropped(tmp_path: Path) -> None:
    """The control: what the idle rounds' replay (``FetchSessions.refresh``) prevents."""
    h = IsrHarness(tmp_path, "b")
    leo = h.p.log.log_end_offset
    h.follower_fetches(leo, 0)
    h.p.append_as_leader(encode_batch([b"b"]), now_ms=120_000)
    h.p.check_lagging(120_001, LAG_MAX_MS)
    assert [c.new_isr for c in h.changes] == [(LEADER,)]


def test_a_follower_behind_that_keeps_its_session_is_still_lagging(tmp_path: Path) -> None:
    h = IsrHarness(tmp_path, "c")
    leo = h.p.log.log_end_offset
    h.follower_fetches(leo - 2, 0)  # behind, and its rounds never move it
    h.open_session(leo - 2, 0)
    h.session.dirty.clear()
    h.idle_rounds(0, LAG_MAX_MS + 1000)
    h.p.check_lagging(LAG_MAX_MS + 1000, LAG_MAX_MS)
    assert [c.new_isr for c in h.changes] == [(LEADER,)]

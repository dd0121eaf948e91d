"""A follower's fetcher applies an answer only to the position it asked from, and one offline partition log does not
stop the others.

The leader is a real ``Partition``; the RPC is a fake stub the test answers by hand, so it can change the follower
while a fetch is out (as a truncation, a restart or a new leader epoch does).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from odradek.broker import fetcher as fetcher_module
from odradek.broker.fetcher import FetcherConfig, ReplicaFetcherManager
from odradek.broker.log.log import Log
from odradek.broker.partition import Partition
from odradek.client.common.metadata_image import PartitionRegistration
from odradek.client.errors import StorageError
from odradek.client.record.builder import encode_batch
from odradek.proto import broker_pb2 as pb

TOPIC_ID = b"\x07" * 16
MAX_BYTES = 1 << 20
LEADER, FOLLOWER = 2, 1


class FakeLeader:
    """Stands in for BrokerStub: hands each Fetch request to the test and waits for the test's answer."""

    def __init__(self) -> None:
        self.requests: asyncio.Queue[tuple[pb.FetchRequest, asyncio.Future]] = asyncio.Queue()

    def __call__(self, channel: object) -> FakeLeader:
        return self

    async def Fetch(self, request: pb.FetchRequest, timeout: float) -> pb.FetchResponse:
        answer = asyncio.get_running_loop().create_future()
        await self.requests.put((request, answer))
        return await answer

    async def next(self) -> tuple[dict[tuple[str, int], pb.FetchPartition], asyncio.Future]:
        async with asyncio.timeout(5):
            request, answer = await self.requests.get()
        return {(t.name, fp.partition): fp for t in request.topics for fp in t.partitions}, answer


def state(partition: int, leader_epoch: int) -> PartitionRegistration:
    return PartitionRegistration(TOPIC_ID, partition, (LEADER, FOLLOWER), (LEADER, FOLLOWER), LEADER, leader_epoch, 0)


def replicas(root: Path, partition: int) -> tuple[Partition, Partition]:
    """(leader, follower) replicas of t-<partition>, the leader holding offsets 0..101 at epoch 3."""
    leader = Partition("t", partition, Log.open(root / f"b{LEADER}" / f"t-{partition}"), LEADER)
    follower = Partition("t", partition, Log.open(root / f"b{FOLLOWER}" / f"t-{partition}"), FOLLOWER)
    for p in (leader, follower):
        p.update(state(partition, 3), 1, 0)
    leader.append_as_leader(encode_batch([b"x"] * 100, timestamps=1_000))
    leader.append_as_leader(encode_batch([b"tail-0", b"tail-1"], timestamps=1_000))
    return leader, follower


def answer_from(leader: Partition, fp: pb.FetchPartition) -> pb.FetchPartitionResponse:
    """What the real leader answers for one partition of a follower's fetch."""
    read = leader.read_for_follower(
        FOLLOWER, fp.fetch_offset, fp.last_fetched_epoch, MAX_BYTES, fp.current_leader_epoch, 0
    )
    assert read.diverging is None and read.data is not None
    return pb.FetchPartitionResponse(
        partition=fp.partition,
        records=bytes(read.data.records),
        high_watermark=read.high_watermark,
        log_start_offset=read.log_start_offset,
        log_end_offset=read.log_end_offset,
    )


def response(*partitions: pb.FetchPartitionResponse) -> pb.FetchResponse:
    return pb.FetchResponse(topics=[pb.FetchTopicResponse(name="t", partitions=list(partitions))])


@pytest.fixture
async def fake_leader(monkeypatch: pytest.MonkeyPatch) -> FakeLeader:
    fake = FakeLeader()
    monkeypatch.setattr(fetcher_module.broker_pb2_grpc, "BrokerStub", fake)
    return fake


@pytest.fixture
async def manager() -> AsyncIterator[ReplicaFetcherManager]:
    image = SimpleNamespace(brokers={LEADER: SimpleNamespace(host="127.0.0.1", port=1)})
    m = ReplicaFetcherManager(FOLLOWER, lambda: 10, lambda: image, FetcherConfig(backoff_ms=60_000))  # type: ignore[arg-type,return-value]
    yield m
    await m.close()


async def test_an_answer_to_a_position_the_follower_has_left_is_dropped_and_asked_again(
    tmp_path: Path, fake_leader: FakeLeader, manager: ReplicaFetcherManager
) -> None:
    leader, follower = replicas(tmp_path, 0)
    follower.append_as_follower(bytes(leader.log.read(0, MAX_BYTES, max_offset=100).records), 0)
    assert follower.log.log_end_offset == 100
    manager.assign(follower)

    asked, answer = await fake_leader.next()
    assert asked[("t", 0)].fetch_offset == 100
    stale = answer_from(leader, asked[("t", 0)])  # offsets 100..101
    follower.log.truncate_to(0)  # the follower moved while the fetch was out
    answer.set_result(response(stale))

    asked, answer = await fake_leader.next()  # dropped, not parked: asked again from where the follower is now
    assert follower.log.log_end_offset == 0  # no hole [0, 100) under offsets 100..101
    assert asked[("t", 0)].fetch_offset == 0
    answer.set_result(response(answer_from(leader, asked[("t", 0)])))
    await fake_leader.next()
    assert follower.log.log_end_offset == 102
    assert bytes(follower.log.read(0, MAX_BYTES).records) == bytes(leader.log.read(0, MAX_BYTES).records)


async def test_an_answer_from_an_older_leader_epoch_is_dropped(
    tmp_path: Path, fake_leader: FakeLeader, manager: ReplicaFetcherManager
) -> None:
    leader, follower = replicas(tmp_path, 0)
    manager.assign(follower)
    asked, answer = await fake_leader.next()
    assert asked[("t", 0)].current_leader_epoch == 3
    old = answer_from(leader, asked[("t", 0)])
    for p in (leader, follower):  # same leader, new epoch: the partition restarts in the same fetcher
        p.update(state(0, 4), 1, 0)
    manager.assign(follower)
    answer.set_result(response(old))

    asked, _ = await fake_leader.next()
    assert follower.log.log_end_offset == 0
    assert asked[("t", 0)].current_leader_epoch == 4 and asked[("t", 0)].fetch_offset == 0


async def test_an_offline_partition_log_leaves_the_fetcher_and_the_others_keep_replicating(
    tmp_path: Path, fake_leader: FakeLeader, manager: ReplicaFetcherManager
) -> None:
    leader0, follower0 = replicas(tmp_path, 0)
    leader1, follower1 = replicas(tmp_path, 1)
    manager.assign(follower0)
    manager.assign(follower1)
    asked, answer = await fake_leader.next()
    assert set(asked) == {("t", 0), ("t", 1)}
    follower0.log._fail(StorageError("t-0: read failed: EIO"))  # a disk error on one partition
    answer.set_result(response(answer_from(leader0, asked[("t", 0)]), answer_from(leader1, asked[("t", 1)])))

    asked, answer = await fake_leader.next()
    fetcher = manager.fetchers[LEADER]
    assert not fetcher._task.done()
    assert set(asked) == {("t", 1)} and ("t", 0) not in fetcher.partitions
    assert follower1.log.log_end_offset == 102


async def test_a_partition_whose_log_is_already_offline_does_not_stop_the_fetcher(
    tmp_path: Path, fake_leader: FakeLeader, manager: ReplicaFetcherManager
) -> None:
    _, follower0 = replicas(tmp_path, 0)
    leader1, follower1 = replicas(tmp_path, 1)
    follower0.log._fail(StorageError("t-0: read failed: EIO"))
    manager.assign(follower0)
    manager.assign(follower1)
    asked, answer = await fake_leader.next()
    assert set(asked) == {("t", 1)}
    answer.set_result(response(answer_from(leader1, asked[("t", 1)])))
    await fake_leader.next()
    assert not manager.fetchers[LEADER]._task.done()
    assert follower1.log.log_end_offset == 102


async def test_the_fetch_request_carries_the_replica_fetch_settings(tmp_path: Path, fake_leader: FakeLeader) -> None:
    """replica.fetch.wait.max.ms, .min.bytes, .max.bytes (per partition) and .response.max.bytes go to the leader,
    which long-polls and sizes its answer by them (tests/integration/test_dataplane.py)."""
    image = SimpleNamespace(brokers={LEADER: SimpleNamespace(host="127.0.0.1", port=1)})
    config = FetcherConfig(max_wait_ms=444, min_bytes=22, partition_max_bytes=11_111, response_max_bytes=33_333)
    m = ReplicaFetcherManager(FOLLOWER, lambda: 10, lambda: image, config)  # type: ignore[arg-type,return-value]
    try:
        _, follower = replicas(tmp_path, 0)
        m.assign(follower)
        async with asyncio.timeout(5):
            request, _ = await fake_leader.requests.get()
        assert (request.max_wait_ms, request.min_bytes, request.max_bytes) == (444, 22, 33_333)
        assert [p.partition_max_bytes for t in request.topics for p in t.partitions] == [11_111]
    finally:
        await m.close()


async def test_a_log_start_taken_from_the_leader_is_persisted_before_the_next_fetch_reports_it(
    tmp_path: Path, fake_leader: FakeLeader
) -> None:
    """The leader counts the follower as trimmed (DeleteRecords' answer) from the log start its fetch reports: that
    must already be on disk, or a crash of the follower would bring the deleted records back."""
    image = SimpleNamespace(brokers={LEADER: SimpleNamespace(host="127.0.0.1", port=1)})
    leader, follower = replicas(tmp_path, 0)
    persisted: list[int] = []
    m = ReplicaFetcherManager(
        FOLLOWER,
        lambda: 10,
        lambda: image,  # type: ignore[arg-type,return-value]
        FetcherConfig(backoff_ms=60_000),
        persist_log_starts=lambda: persisted.append(follower.log.log_start_offset),
    )
    try:
        m.assign(follower)
        asked, answer = await fake_leader.next()
        answer.set_result(response(answer_from(leader, asked[("t", 0)])))  # 0..101
        asked, answer = await fake_leader.next()
        leader.read_for_follower(FOLLOWER, 102, 3, MAX_BYTES, 3, 0)  # the high watermark reaches 102
        leader.delete_records(40)
        answer.set_result(response(answer_from(leader, asked[("t", 0)])))
        asked, answer = await fake_leader.next()
        assert follower.log.log_start_offset == 40
        assert persisted == [40]  # written before this fetch went out
        assert asked[("t", 0)].log_start_offset == 40
    finally:
        await m.close()


async def test_the_fetch_reports_the_followers_recovery_point_as_its_durable_offset(
    tmp_path: Path, fake_leader: FakeLeader, manager: ReplicaFetcherManager
) -> None:
    """The leader removes a tombstone only below every replica's durable offset (its recovery point): records
    appended but not yet fsynced do not count, since a power loss takes them."""
    leader, follower = replicas(tmp_path, 0)
    follower.append_as_follower(bytes(leader.log.read(0, MAX_BYTES, max_offset=100).records), 0)
    follower.log.flush(up_to=60)
    manager.assign(follower)
    asked, answer = await fake_leader.next()
    assert (asked[("t", 0)].fetch_offset, asked[("t", 0)].durable_offset) == (100, 60)
    answer.set_result(response(answer_from(leader, asked[("t", 0)])))
    asked, _ = await fake_leader.next()
    assert (asked[("t", 0)].fetch_offset, asked[("t", 0)].durable_offset) == (102, 60)


async def test_an_idle_round_changes_nothing_and_a_moved_position_is_the_only_change(
    tmp_path: Path, fake_leader: FakeLeader, manager: ReplicaFetcherManager
) -> None:
    """A follower of thousands of partitions builds nothing while none moved (its fetch session then sends an
    empty incremental request); a moved position (by an answer or a flush) replaces its entry in the same list and
    is the round's only change, so a session sends it alone without comparing the rest; a partition joining or
    leaving makes a new list, which the session compares whole."""
    partitions = [replicas(tmp_path, i) for i in range(3)]
    for _, follower in partitions:
        manager.assign(follower)
    fetcher = manager.fetchers[LEADER]
    first = fetcher._request()
    assert first is not None and first[2] is None  # new partitions: no change list, the session compares
    again = fetcher._request()
    assert again is not None and again[0].topics is first[0].topics and again[1] is first[1] and again[2] == {}
    leader, follower = partitions[1]
    follower.append_as_follower(bytes(leader.log.read(0, MAX_BYTES, max_offset=100).records), 0)
    fetcher._stale.add(("t", 1))  # as an applied answer marks it
    moved = fetcher._request()
    assert moved is not None and moved[0].topics is first[0].topics
    assert moved[2] is not None and {key: fp.fetch_offset for key, fp in moved[2].items()} == {("t", 1): 100}
    assert {fp.partition: fp.fetch_offset for _, parts in moved[0].topics for fp in parts} == {0: 0, 1: 100, 2: 0}
    assert moved[1][("t", 1)].fetch_offset == 100
    fetcher._refresh_at = 0  # the periodic check: nothing moved outside an answer, nothing is read again
    assert (same := fetcher._request()) is not None and same[0].topics is moved[0].topics and same[2] == {}
    follower.log.flush()  # the recovery point, sent as the durable offset, moves without an answer
    fetcher._refresh_at = 0
    flushed = fetcher._request()
    assert flushed is not None and flushed[2] is not None and list(flushed[2]) == [("t", 1)]
    assert {fp.partition: fp.durable_offset for _, parts in flushed[0].topics for fp in parts} == {0: 0, 1: 100, 2: 0}
    manager.remove(("t", 2))
    fewer = fetcher._request()
    assert fewer is not None and fewer[0].topics is not first[0].topics and fewer[2] is None
    assert sorted(fp.partition for _, parts in fewer[0].topics for fp in parts) == [0, 1]

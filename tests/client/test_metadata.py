import asyncio

import pytest
from fake_broker import FakeCluster

from odradek.client.config import ClientConfig
from odradek.client.connection import ChannelPool
from odradek.client.errors import NetworkError, UnknownTopicOrPartitionError
from odradek.client.metadata import Metadata
from odradek.deploy.process import free_port
from odradek.proto import common_pb2


def free_address() -> str:
    """An address nothing listens on. From this test process's own ports when it has a range (pytest-xdist): a port
    of the kernel's ephemeral range could be taken by another worker's node in the meantime."""
    return f"127.0.0.1:{free_port()}"


async def make(servers: str, **overrides: object) -> tuple[Metadata, ChannelPool]:
    config = ClientConfig.from_mapping({"bootstrap.servers": servers, "retry.backoff.ms": 20, **overrides})
    pool = ChannelPool()
    return Metadata(config, pool), pool


async def close(metadata: Metadata, pool: ChannelPool) -> None:
    await metadata.close()
    await pool.close()


async def test_bootstraps_from_any_live_address(cluster: FakeCluster) -> None:
    metadata, pool = await make(f"{free_address()},{free_address()},127.0.0.1:{cluster.ports[1]}")
    try:
        assert await metadata.wait_for_topic("t", 5) == 3
        assert metadata.brokers == {n: f"127.0.0.1:{port}" for n, port in cluster.ports.items()}
        assert [metadata.leader("t", p) for p in range(3)] == [0, 1, 2]
        assert metadata.available_partitions("t") == [0, 1, 2]
        assert metadata.leader("t", 7) == -1 and metadata.leader("other", 0) == -1
    finally:
        await close(metadata, pool)


async def test_concurrent_refreshes_share_one_rpc(cluster: FakeCluster) -> None:
    metadata, pool = await make(cluster.bootstrap)
    try:
        await metadata.refresh()
        before = cluster.rpc_count("Metadata")
        await asyncio.gather(*(metadata.refresh() for _ in range(10)))
        assert cluster.rpc_count("Metadata") == before + 1
    finally:
        await close(metadata, pool)


async def test_refreshes_when_asked_and_when_old(cluster: FakeCluster) -> None:
    metadata, pool = await make(cluster.bootstrap, **{"metadata.max.age.ms": 100})
    updates = []
    metadata.on_update(lambda: updates.append(1))
    try:
        await metadata.wait_for_topic("t", 5)
        cluster.move_leader("t", 0, 2)
        await asyncio.sleep(0.35)
        assert metadata.leader("t", 0) == 2 and len(updates) >= 3  # periodic refreshes
    finally:
        await close(metadata, pool)
    metadata, pool = await make(cluster.bootstrap)
    try:
        await metadata.wait_for_topic("t", 5)
        cluster.move_leader("t", 1, 0)
        metadata.request_refresh()
        for _ in range(50):
            await asyncio.sleep(0.01)
            if metadata.leader("t", 1) == 0:
                break
        assert (metadata.leader("t", 1), metadata.leader_epoch("t", 1)) == (0, 1)
    finally:
        await close(metadata, pool)


async def test_leader_hints_only_move_forward(cluster: FakeCluster) -> None:
    metadata, pool = await make(cluster.bootstrap)
    try:
        await metadata.wait_for_topic("t", 5)
        metadata.apply_leader_hint("t", 0, common_pb2.LeaderHint(leader_id=1, leader_epoch=3))
        assert (metadata.leader("t", 0), metadata.leader_epoch("t", 0)) == (1, 3)
        metadata.apply_leader_hint("t", 0, common_pb2.LeaderHint(leader_id=2, leader_epoch=2))  # older: ignored
        assert metadata.leader("t", 0) == 1
        await metadata.refresh()  # the brokers still say epoch 0: older than the hint, ignored
        assert (metadata.leader("t", 0), metadata.leader_epoch("t", 0)) == (1, 3)
        assert metadata.leader("t", 1) == 1
    finally:
        await close(metadata, pool)


async def test_missing_topics_and_unreachable_clusters(cluster: FakeCluster) -> None:
    metadata, pool = await make(cluster.bootstrap)
    try:
        with pytest.raises(UnknownTopicOrPartitionError, match="topic 'nope' not present in metadata after 100 ms"):
            await metadata.wait_for_topic("nope", 0.1)
    finally:
        await close(metadata, pool)
    address = free_address()
    metadata, pool = await make(address, **{"request.timeout.ms": 200})
    try:
        with pytest.raises(NetworkError, match=f"no node reachable: {address}"):
            await metadata.refresh()
        # The connection failure, not the topic, is what the caller hears.
        with pytest.raises(NetworkError, match=f"no node reachable: {address}"):
            await metadata.wait_for_topic("t", 0.2)
    finally:
        await close(metadata, pool)


async def test_an_all_topics_answer_forgets_deleted_topics(cluster: FakeCluster) -> None:
    """A pattern subscriber asks for every topic; a topic missing from that answer was deleted and must stop
    matching, so the member rejoins without it."""
    cluster.create_topic("gone", 2)
    metadata, pool = await make(cluster.bootstrap)
    try:
        metadata.want_all_topics()
        await metadata.refresh()
        assert {"t", "gone"} <= set(metadata.partition_counts)
        with cluster.lock:
            del cluster.topics["gone"]
        await metadata.refresh()
        assert "gone" not in metadata.partition_counts and "t" in metadata.partition_counts
        assert metadata.leader("gone", 0) == -1
    finally:
        await close(metadata, pool)

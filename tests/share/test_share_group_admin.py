"""Share group administration on the cores and shells, at simulated time: the offset admin APIs' rules
(``group_offsets``: unknown group, non-empty group, unknown topics and partitions, negative offsets, the ACLs of
``service``) against the real share group coordinator and a share coordinator store in memory, and each share
group config taking effect (the session timeout and heartbeat interval at the next heartbeat; the lock duration,
offset reset and isolation level at the leader's next acquisition)."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from test_coordinator_appends import DATA_ID, ManualClock, OffsetsReplicas, serving
from test_share_shells import FakePersister, Replicas, acquired, fetch, leading

from odradek.broker.share.group import ShareGroupConfig, ShareHeartbeatRequest
from odradek.broker.share.group_coordinator import ShareGroupCoordinator
from odradek.broker.share.group_offsets import NO_TOPIC_ID, PartitionOffset, ShareGroupOffsets
from odradek.broker.share.leader import ShareLeader
from odradek.broker.share.service import ShareService
from odradek.broker.share.state_coordinator import StateAnswer
from odradek.broker.share.state_records import SharePartitionKey, ShareStateStore
from odradek.client.common.acls import AclOperation, ResourceType
from odradek.client.common.metadata_image import GROUP_RESOURCE, MetadataImage
from odradek.client.common.request_context import RequestContext
from odradek.client.errors import ErrorCode
from odradek.client.record.builder import encode_batch

E = ErrorCode


def with_group_configs(image: MetadataImage, group: str, configs: Mapping[str, str]) -> MetadataImage:
    return dataclasses.replace(image, configs={**image.configs, (GROUP_RESOURCE, group): dict(configs)})


class StorePersister:
    """A share coordinator in memory: the real store, read by summary, reset by initialize."""

    def __init__(self) -> None:
        self.store = ShareStateStore()

    async def summary(self, key: SharePartitionKey) -> StateAnswer:
        return StateAnswer(E.NONE, state=self.store.state(key), leader_epoch=self.store.leader_epoch(key))

    async def initialize(self, key: SharePartitionKey, start_offset: int) -> StateAnswer:
        stored = self.store.state(key)
        epoch = stored.state_epoch + 1 if stored is not None else 1
        return StateAnswer(self.store.initialize(key, epoch, start_offset).error, state_epoch=epoch)


@pytest.fixture
async def replicas(tmp_path: Path) -> AsyncIterator[OffsetsReplicas]:
    r = OffsetsReplicas(tmp_path)
    yield r
    r.close()


@pytest.fixture
def data(tmp_path: Path) -> Iterator[Replicas]:
    r = Replicas(tmp_path, 10)
    yield r
    r.partition.log.close()


def join(member: str, epoch: int = 0) -> ShareHeartbeatRequest:
    return ShareHeartbeatRequest(member, epoch, subscribed_topic_names=("t",) if epoch == 0 else None)


# -- the offset admin APIs -----------------------------------------------------------------------------------------


async def test_describe_alter_delete_and_their_refusals(replicas: OffsetsReplicas) -> None:
    clock, persister = ManualClock(), StorePersister()
    reset: list[str] = []
    async with serving(replicas, clock) as groups:
        share = ShareGroupCoordinator(groups, lambda: replicas.image, ShareGroupConfig(), persister, clock)  # type: ignore[arg-type]
        offsets = ShareGroupOffsets(share, persister, lambda: replicas.image, reset.append)  # type: ignore[arg-type]
        assert (await offsets.describe("nope", None)).error == E.GROUP_ID_NOT_FOUND
        assert (await offsets.alter("nope", [("t", [(0, 5)])])).error == E.GROUP_ID_NOT_FOUND
        assert (await offsets.delete("nope", ["t"])).error == E.GROUP_ID_NOT_FOUND
        assert (await share.heartbeat("s", join("m1"))).error == E.NONE
        # Every share-partition the group consumed; nothing stored yet: start offset -1.
        described = await offsets.describe("s", None)
        assert described.error == E.NONE
        assert [(t.name, t.topic_id, t.partitions) for t in described.topics] == [
            ("t", DATA_ID, tuple(PartitionOffset(p) for p in range(len(replicas.image.topic("t").partitions))))
        ]
        assert (await offsets.alter("s", [("t", [(0, 5)])])).error == E.NON_EMPTY_GROUP
        assert (await offsets.delete("s", ["t"])).error == E.NON_EMPTY_GROUP
        assert (await share.heartbeat("s", join("m1", -1))).error == E.NONE  # leaves: the group is empty
        negative = await offsets.alter("s", [("t", [(0, -1)])])
        assert negative.topics[0].partitions[0].error == E.INVALID_REQUEST
        altered = await offsets.alter("s", [("t", [(0, 5), (99, 1)]), ("gone", [(0, 1)])])
        assert altered.error == E.NONE and reset == ["s", "s"]
        assert [(p.partition, p.error) for p in altered.topics[0].partitions] == [
            (0, E.NONE),
            (99, E.UNKNOWN_TOPIC_OR_PARTITION),
        ]
        assert (altered.topics[1].topic_id, altered.topics[1].partitions[0].error) == (
            NO_TOPIC_ID,
            E.UNKNOWN_TOPIC_OR_PARTITION,
        )
        one = await offsets.describe("s", [("t", [0, 0]), ("gone", [3])])
        assert one.topics[0].partitions == (PartitionOffset(0, 5, -1),)
        assert one.topics[1].partitions[0].error == E.UNKNOWN_TOPIC_OR_PARTITION
        deleted = await offsets.delete("s", ["t", "gone"])
        assert [(t.name, t.error) for t in deleted.topics] == [("t", E.NONE), ("gone", E.UNKNOWN_TOPIC_OR_PARTITION)]
        assert (await offsets.describe("s", None)).topics == ()  # its state is gone from the group
        assert (await offsets.describe("s", [("t", [0])])).topics[0].partitions == (PartitionOffset(0, -1, -1),)
        assert persister.store.state(SharePartitionKey("s", DATA_ID, 0)).state_epoch == 2  # type: ignore[union-attr]


class Access:
    """An authorizer allowing what ``allowed`` lists: (operation, resource type, name)."""

    enabled = True

    def __init__(self, *allowed: tuple[AclOperation.ValueType, Any, str]) -> None:
        self.allowed = set(allowed)
        self.asked: list[tuple[Any, ...]] = []

    def allows(self, caller: Any, operation: Any, kind: Any, name: str, api: str = "") -> bool:
        self.asked.append((operation, kind, name, api))
        return (operation, kind, name) in self.allowed

    def denied(self, caller: Any, operation: Any, kind: Any, names: Any, api: str = "") -> set[str]:
        return {n for n in names if not self.allows(caller, operation, kind, n, api)}


async def test_the_acls_of_the_offset_admin_apis(replicas: OffsetsReplicas) -> None:
    clock, persister = ManualClock(), StorePersister()
    async with serving(replicas, clock) as groups:
        share = ShareGroupCoordinator(groups, lambda: replicas.image, ShareGroupConfig(), persister, clock)  # type: ignore[arg-type]
        await share.heartbeat("s", join("m1"))
        await share.heartbeat("s", join("m1", -1))
        offsets = ShareGroupOffsets(share, persister, lambda: replicas.image)  # type: ignore[arg-type]
        G, T = ResourceType.GROUP, ResourceType.TOPIC
        ctx = RequestContext()

        def service(*allowed: Any) -> ShareService:
            return ShareService(share, None, Access(*allowed), offsets)  # type: ignore[arg-type]

        refused = service((AclOperation.READ, G, "s"))
        assert (await refused.describe_offsets("s", None, ctx)).error == E.GROUP_AUTHORIZATION_FAILED
        assert (await refused.delete_offsets("s", ["t"], ctx)).error == E.GROUP_AUTHORIZATION_FAILED
        assert (await service().alter_offsets("s", [("t", [(0, 1)])], ctx)).error == E.GROUP_AUTHORIZATION_FAILED
        describe = service((AclOperation.DESCRIBE, G, "s"))
        answer = await describe.describe_offsets("s", [("t", [0])], ctx)
        assert answer.topics[0].partitions[0].error == E.TOPIC_AUTHORIZATION_FAILED
        answer = await service((AclOperation.DESCRIBE, G, "s"), (AclOperation.DESCRIBE, T, "t")).describe_offsets(
            "s", [("t", [0])], ctx
        )
        assert answer.topics[0].partitions[0].error == E.NONE
        alter = service((AclOperation.READ, G, "s"), (AclOperation.DESCRIBE, T, "t"))
        answer = await alter.alter_offsets("s", [("t", [(0, 1)])], ctx)
        assert answer.topics[0].partitions[0].error == E.TOPIC_AUTHORIZATION_FAILED  # Read on the topic
        delete = service((AclOperation.DELETE, G, "s"), (AclOperation.READ, T, "t"))
        assert (await delete.delete_offsets("s", ["t"], ctx)).topics[0].error == E.NONE


# -- share group configs taking effect -----------------------------------------------------------------------------


async def test_session_timeout_and_heartbeat_interval_from_the_group_configs(replicas: OffsetsReplicas) -> None:
    clock = ManualClock()
    async with serving(replicas, clock) as groups:
        config = ShareGroupConfig(session_timeout_ms=45_000, heartbeat_interval_ms=5_000)
        share = ShareGroupCoordinator(groups, lambda: replicas.image, config, None, clock)
        assert (await share.heartbeat("s", join("m1"))).heartbeat_interval_ms == 5_000
        base = replicas.image
        replicas.image = with_group_configs(
            base, "s", {"share.session.timeout.ms": "20000", "share.heartbeat.interval.ms": "7000"}
        )
        r = await share.heartbeat("s", join("m1", 1))
        assert r.heartbeat_interval_ms == 7_000  # at the next heartbeat
        cp = next(iter(groups.partitions.values()))
        shard = share._shards[cp]
        assert (await share.fire(cp, shard)) == clock.now + 20_000  # the session the heartbeat started
        clock.now += 20_000
        await share.fire(cp, shard)
        assert share.describe("s")[2].members == ()  # type: ignore[union-attr]
        replicas.image = base


async def test_lock_duration_and_offset_reset_from_the_group_configs(data: Replicas) -> None:
    persister, clock = FakePersister(), ManualClock()
    base = data.image
    async with leading(data, clock, persister) as leader:
        data.image = with_group_configs(
            base, "g", {"share.record.lock.duration.ms": "20000", "share.auto.offset.reset": "earliest"}
        )
        answer = await leader.share_fetch(fetch("a", 0, max_records=2))
        assert answer.lock_duration_ms == 20_000
        assert acquired(answer) == [(0, 1, 1)]  # earliest: from the log start, not the end (10)
        clock.now += 19_999
        await _fire(leader)
        assert acquired(await leader.share_fetch(fetch("b", 0, max_records=2))) == [(2, 3, 1)]  # still locked
        clock.now += 1
        await _fire(leader)
        again = await leader.share_fetch(fetch("c", 0, max_records=2))
        assert acquired(again) == [(0, 1, 2)]  # the lock expired at the group's duration


async def _fire(leader: ShareLeader) -> None:
    for held in list(leader._held.values()):
        await leader.fire(held)


@pytest.mark.parametrize(("reset", "start"), [("by_duration:P30D", 0), ("by_duration:P1D", 10), ("latest", 10)])
async def test_by_duration_offset_reset(data: Replicas, reset: str, start: int) -> None:
    persister, clock = FakePersister(), ManualClock()
    clock.now = int(time.time() * 1000) + 10 * 86_400_000  # the records are ten days old
    data.image = with_group_configs(data.image, "g", {"share.auto.offset.reset": reset})
    async with leading(data, clock, persister) as leader:
        await leader.share_fetch(fetch("a", 0))
        assert [s for _, s, _ in leader.share_partitions()] == [start]


async def test_read_committed_stops_at_an_open_transaction(data: Replicas) -> None:
    persister, clock = FakePersister(), ManualClock()
    data.partition.append_as_leader(
        encode_batch([b"t"], producer_id=7, producer_epoch=0, base_sequence=0, is_transactional=True)
    )
    data.partition.append_as_leader(encode_batch([b"after"]))
    data.image = with_group_configs(
        data.image, "g", {"share.auto.offset.reset": "earliest", "share.isolation.level": "read_committed"}
    )
    async with leading(data, clock, persister) as leader:
        answer = await leader.share_fetch(fetch("a", 0, max_records=100))
        assert acquired(answer) == [(0, 9, 1)]  # up to the last stable offset: not the open transaction's record
        data.image = with_group_configs(data.image, "g", {"share.auto.offset.reset": "earliest"})
        answer = await leader.share_fetch(fetch("a", 1, max_records=100))
        assert acquired(answer) == [(10, 11, 1)]  # read_uncommitted from the next acquisition on

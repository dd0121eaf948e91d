"""The writer's path in the store, over a stand-in partition (no cluster): a write is decided only once this
broker's copy has applied everything in the log (what keeps ids unique after a failover), answered only once its
records are committed and applied, and refused where this broker does not lead ``_schemas``."""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace
from typing import Any

import pytest

from odradek.broker.schema_registry.core import SchemaInput
from odradek.broker.schema_registry.errors import RegistryError
from odradek.broker.schema_registry.records import SchemaKey, SchemaValue, decode
from odradek.broker.schema_registry.store import RegistryStore, topic_problem
from odradek.client.errors import ErrorCode
from odradek.client.record.batch import read_batches

# As the registry stores it: compact JSON.
SCHEMA = json.dumps({"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]}, separators=(",", ":"))


class StandInPartition:
    """What the store uses of a led partition: its log end, leader appends, and commit futures it resolves when
    the test says."""

    def __init__(self, log_end_offset: int) -> None:
        self.is_leader = True
        self.log = SimpleNamespace(log_end_offset=log_end_offset)
        self.appended: list[bytes] = []
        self.commits: list[asyncio.Future[int]] = []

    def append_as_leader(self, batch: bytes, acks: int) -> Any:
        assert acks == -1
        self.appended.append(batch)
        first = self.log.log_end_offset
        self.log.log_end_offset += sum(b.header.last_offset_delta + 1 for b in read_batches(batch))
        return SimpleNamespace(last_offset=self.log.log_end_offset - 1, first_offset=first)

    def wait_for_commit(self, offset: int) -> asyncio.Future[int]:
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self.commits.append(future)
        return future


def store_with(partition: StandInPartition | None) -> RegistryStore:
    return RegistryStore(4, "127.0.0.1:1", lambda: None, lambda _tp: partition, 3, lambda: 0)  # type: ignore[arg-type,return-value]


async def applied(store: RegistryStore, offset: int, *records: Any) -> None:
    """What the reader does: apply, advance, notify."""
    for key, value in records:
        store.core.apply(key, value)
    store.applied = offset
    async with store._progress:
        store._progress.notify_all()


async def test_a_write_waits_for_the_copy_to_hold_the_whole_log_before_deciding() -> None:
    partition = StandInPartition(log_end_offset=1)
    store = store_with(partition)
    # Offset 0 holds id 7, written by the previous writer; this broker's copy has not applied it yet.
    write = asyncio.create_task(store.write(lambda core: core.register("s", SchemaInput(SCHEMA.replace("R", "S")))))
    await asyncio.sleep(0.05)
    assert not write.done() and partition.appended == []  # nothing decided on a stale copy
    await applied(store, 1, (SchemaKey("old", 1), SchemaValue("old", 1, 7, "AVRO", SCHEMA)))
    while not partition.appended:
        await asyncio.sleep(0.01)
    assert not write.done()  # appended, not committed yet
    partition.commits[0].set_result(ErrorCode.NONE)
    await asyncio.sleep(0.05)
    assert not write.done()  # committed, not applied by the copy yet
    [batch] = list(read_batches(partition.appended[0]))
    [record] = list(batch.records())
    assert json.loads(record.value)["id"] == 8  # above the id the previous writer gave out
    decoded = decode(record.key, record.value)
    assert decoded is not None
    await applied(store, 2, decoded)
    registered = await asyncio.wait_for(write, 5)
    assert (registered.id, registered.version) == (8, 1)


async def test_a_write_that_changes_nothing_appends_nothing() -> None:
    partition = StandInPartition(log_end_offset=1)
    store = store_with(partition)
    await applied(store, 1, (SchemaKey("s", 1), SchemaValue("s", 1, 1, "AVRO", SCHEMA)))
    got = await store.write(lambda core: core.register("s", SchemaInput(SCHEMA)))
    assert got.id == 1 and partition.appended == []


async def test_a_commit_that_fails_is_a_store_error() -> None:
    partition = StandInPartition(log_end_offset=0)
    store = store_with(partition)
    write = asyncio.create_task(store.write(lambda core: core.register("s", SchemaInput(SCHEMA))))
    while not partition.commits:
        await asyncio.sleep(0.01)
    partition.commits[0].set_result(ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND)
    with pytest.raises(RegistryError) as e:
        await write
    assert e.value.code == 50001 and "NOT_ENOUGH_REPLICAS_AFTER_APPEND" in e.value.message


def test_an_existing_topic_must_be_one_compacted_partition() -> None:
    assert topic_problem(1, "compact") is None
    assert "exactly one" in (topic_problem(3, "compact") or "")
    for policy in ("delete", "compact,delete", ""):
        assert "must be compact" in (topic_problem(1, policy) or "")


@pytest.mark.parametrize("leads", [False, None])
async def test_a_broker_that_does_not_lead_the_topic_does_not_write(leads: bool | None) -> None:
    partition = None if leads is None else StandInPartition(0)
    if partition is not None:
        partition.is_leader = leads
    with pytest.raises(RegistryError) as e:
        await store_with(partition).write(lambda core: core.register("s", SchemaInput(SCHEMA)))
    assert e.value.code == 50003

"""An acks=all produce tells its listener when its batches are appended, before it waits for their replication: the
Kafka listener then serves the connection's next request meanwhile (pipelined produce). acks=1 has nothing to wait
for and says nothing."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

from odradek.broker.dataplane import BrokerService
from odradek.broker.log.log import Log
from odradek.broker.partition import Partition
from odradek.client.common.metadata_image import PartitionRegistration
from odradek.client.common.request_context import internal
from odradek.client.record.builder import encode_batch

TOPIC_ID = b"\x01" * 16


class Leaders:
    """t-0 led here (broker 1) with broker 2 in its ISR, so an acks=all batch waits for broker 2's fetch."""

    def __init__(self, root: Path) -> None:
        self.partition = Partition("t", 0, Log.open(root / "t-0"), 1)
        self.partition.update(PartitionRegistration(TOPIC_ID, 0, (1, 2), (1, 2), 1, 0, 0), 1, 0)

    def get(self, topic: str, partition: int) -> Partition:
        assert (topic, partition) == ("t", 0)
        return self.partition


async def test_an_acks_all_produce_says_when_it_is_appended_and_then_waits(tmp_path: Path) -> None:
    leaders = Leaders(tmp_path)
    service = BrokerService(1, "c", leaders).service  # type: ignore[arg-type]
    appended: list[int] = []  # the log end offset when the produce said so
    ctx = replace(internal(), appended=lambda: appended.append(leaders.partition.log.log_end_offset))
    request = [("t", [(0, memoryview(encode_batch([b"a", b"b"])))])]
    produce = asyncio.create_task(service.produce(-1, 30_000, None, request, ctx))
    await asyncio.sleep(0.05)
    assert appended == [2] and not produce.done()  # appended, said so, and waiting for broker 2
    leaders.partition.read_for_follower(2, 2, 0, 1 << 20, client_epoch=0, now_ms=0)  # broker 2 has both records
    answers, _ = await asyncio.wait_for(produce, 5)
    assert answers[0][1][0].error is None and appended == [2]


async def test_an_acks_1_produce_has_nothing_to_release(tmp_path: Path) -> None:
    leaders = Leaders(tmp_path)
    service = BrokerService(1, "c", leaders).service  # type: ignore[arg-type]
    appended: list[int] = []
    ctx = replace(internal(), appended=lambda: appended.append(1))
    request = [("t", [(0, memoryview(encode_batch([b"a"])))])]
    answers, _ = await asyncio.wait_for(service.produce(1, 30_000, None, request, ctx), 5)
    assert answers[0][1][0].error is None and appended == []

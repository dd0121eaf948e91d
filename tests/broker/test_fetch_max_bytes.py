"""The node key fetch.max.bytes caps what one consumer Fetch answer carries, as in Kafka."""

from __future__ import annotations

import asyncio
from pathlib import Path

from replicas import OneReplica

from odradek.broker.dataplane import BrokerService, fetch_request
from odradek.broker.log.log import Log
from odradek.broker.partition import Partition
from odradek.client.common.metadata_image import PartitionRegistration
from odradek.client.common.request_context import internal
from odradek.client.record.batch import read_batches
from odradek.client.record.builder import encode_batch
from odradek.proto import broker_pb2 as pb


def fetched_batches(service: BrokerService) -> int:
    request = pb.FetchRequest(
        replica_id=-1,
        max_bytes=1 << 30,
        topics=[
            pb.FetchTopic(
                name="t",
                partitions=[pb.FetchPartition(partition=0, current_leader_epoch=-1, partition_max_bytes=1 << 30)],
            )
        ],
    )
    answer = asyncio.run(service.service.fetch(fetch_request(request), internal()))
    read = answer.outcomes[0][1][0].read
    assert read is not None and read.data is not None
    return len(list(read_batches(read.data.records)))


def test_fetch_max_bytes_caps_a_consumer_fetch(tmp_path: Path) -> None:
    state = PartitionRegistration(b"\x07" * 16, 0, (1,), (1,), 1, 1, 1)
    partition = Partition("t", 0, Log.open(tmp_path / "t-0"), 1)
    partition.update(state, 1, 0)
    try:
        for i in range(10):
            partition.append_as_leader(encode_batch([bytes([i]) * 400], timestamps=1_000), acks=1)
        service = BrokerService(1, "c", OneReplica(partition, state))  # type: ignore[arg-type]
        assert fetched_batches(service) == 10  # the default (55 MiB) lets everything through
        service.service.fetch_max_bytes = 1024
        assert 1 <= fetched_batches(service) < 10
    finally:
        partition.log.close()

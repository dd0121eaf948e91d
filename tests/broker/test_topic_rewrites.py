"""The leader applies the topic's message.timestamp.type and compression.type to a producer's batches before the
append; the log (and the followers copying it) hold the batches as the topic says."""

from __future__ import annotations

from pathlib import Path

import pytest

from odradek.broker.log.config import LogConfig
from odradek.broker.log.log import Log
from odradek.broker.log.rewrite import rewrite_for_append
from odradek.broker.partition import Partition
from odradek.client.common.metadata_image import PartitionRegistration
from odradek.client.consumer.completed_fetch import CompletedFetch
from odradek.client.errors import CorruptRecordError
from odradek.client.record.batch import read_batches
from odradek.client.record.builder import encode_batch
from odradek.client.record.header import COMPRESSION_CODES
from odradek.client.structs import CREATE_TIME, LOG_APPEND_TIME, TopicPartition

NOW = 1_800_000_000_000
STATE = PartitionRegistration(b"\x07" * 16, 0, (1,), (1,), 1, 1, 1)


def leader(root: Path, **configs: str) -> Partition:
    log = Log.open(root / "t-0", LogConfig.from_properties(configs))
    partition = Partition("t", 0, log, 1)
    partition.update(STATE, 1, 0)
    return partition


def stored(partition: Partition) -> bytes:
    return bytes(partition.log.read(0, 1 << 30).records)


def test_log_append_time_stamps_each_batch_and_consumers_report_it(tmp_path: Path) -> None:
    p = leader(tmp_path, **{"message.timestamp.type": "LogAppendTime"})
    try:
        info = p.append_as_leader(encode_batch([b"a", b"b"], timestamps=1_000), now_ms=NOW)
        assert info.max_timestamp == NOW  # what the Produce answer gives as log_append_time_ms
        p.append_as_leader(encode_batch([b"c"], timestamps=2_000, compression="gzip"), now_ms=NOW + 5)
        data = stored(p)
        headers = [b.header for b in read_batches(data)]  # validates every CRC
        assert [(h.is_log_append_time, h.max_timestamp) for h in headers] == [(True, NOW), (True, NOW + 5)]
        records = CompletedFetch(TopicPartition("t", 0), data, 0, 0, check_crcs=True, read_committed=False).take(9)
        assert [(r.offset, r.value, r.timestamp, r.timestamp_type) for r in records] == [
            (0, b"a", NOW, LOG_APPEND_TIME),
            (1, b"b", NOW, LOG_APPEND_TIME),
            (2, b"c", NOW + 5, LOG_APPEND_TIME),
        ]
    finally:
        p.log.close()


def test_create_time_keeps_the_producers_timestamps_and_bytes(tmp_path: Path) -> None:
    batch = encode_batch([b"a"], timestamps=1_000)
    assert rewrite_for_append(batch, "CreateTime", "producer", NOW) is batch  # the fast path copies nothing
    p = leader(tmp_path)
    try:
        p.append_as_leader(batch, now_ms=NOW)
        records = CompletedFetch(TopicPartition("t", 0), stored(p), 0, 0, check_crcs=True, read_committed=False)
        assert [(r.timestamp, r.timestamp_type) for r in records.take(9)] == [(1_000, CREATE_TIME)]
    finally:
        p.log.close()


def test_followers_copy_the_leaders_stamped_bytes_unchanged(tmp_path: Path) -> None:
    p = leader(tmp_path / "leader", **{"message.timestamp.type": "LogAppendTime"})
    follower = Log.open(
        tmp_path / "follower" / "t-0", LogConfig.from_properties({"message.timestamp.type": "LogAppendTime"})
    )
    try:
        p.append_as_leader(encode_batch([b"a"], timestamps=1_000), now_ms=NOW)
        leader_bytes = stored(p)
        follower.append_as_follower(leader_bytes)
        assert bytes(follower.read(0, 1 << 30).records) == leader_bytes
    finally:
        p.log.close()
        follower.close()


@pytest.mark.parametrize(
    ("topic_codec", "sent", "on_disk"),
    [
        ("zstd", "none", "zstd"),
        ("zstd", "gzip", "zstd"),
        ("uncompressed", "lz4", "none"),
        ("snappy", "zstd", "snappy"),
        ("gzip", "gzip", "gzip"),
        ("producer", "lz4", "lz4"),
        ("producer", "none", "none"),
    ],
)
def test_compression_type_recompresses_when_the_codec_differs(
    tmp_path: Path, topic_codec: str, sent: str, on_disk: str
) -> None:
    p = leader(tmp_path, **{"compression.type": topic_codec})
    try:
        values = [f"value-{i}".encode() * 20 for i in range(50)]
        keys = [f"k{i}".encode() for i in range(50)]
        batch = encode_batch(
            values, keys, timestamps=[1_000 + i for i in range(50)], headers=[[("h", b"x")]] * 50, compression=sent
        )
        p.append_as_leader(encode_batch([b"first"], timestamps=1), now_ms=NOW)
        info = p.append_as_leader(batch, now_ms=NOW)
        assert (info.first_offset, info.last_offset) == (1, 50)
        (_, second) = list(read_batches(stored(p)))
        assert second.header.compression == COMPRESSION_CODES[on_disk]
        assert not second.header.is_log_append_time and second.header.max_timestamp == 1_049
        got = [(r.offset, r.key, r.value, r.timestamp, r.headers) for r in second.records()]
        assert got == [(1 + i, keys[i], values[i], 1_000 + i, (("h", b"x"),)) for i in range(50)]
    finally:
        p.log.close()


def test_recompression_keeps_the_idempotent_producers_sequence(tmp_path: Path) -> None:
    p = leader(tmp_path, **{"compression.type": "zstd"})
    try:
        batch = encode_batch([b"a", b"b"], timestamps=1, producer_id=7, producer_epoch=0, base_sequence=0)
        p.append_as_leader(batch, now_ms=NOW)
        retry = p.append_as_leader(batch, now_ms=NOW)  # recognised as the same batch: nothing appended
        assert (retry.first_offset, retry.batch_count) == (0, 0)
        (only,) = list(read_batches(stored(p)))
        assert (only.header.producer_id, only.header.base_sequence, only.header.compression) == (7, 0, 4)
    finally:
        p.log.close()


@pytest.mark.parametrize("configs", [{"message.timestamp.type": "LogAppendTime"}, {"compression.type": "zstd"}])
def test_a_damaged_batch_is_refused_not_given_a_fresh_crc(tmp_path: Path, configs: dict[str, str]) -> None:
    batch = bytearray(encode_batch([b"payload"], timestamps=1))
    batch[-1] ^= 0xFF
    p = leader(tmp_path, **configs)
    try:
        with pytest.raises(CorruptRecordError):
            p.append_as_leader(bytes(batch), now_ms=NOW)
        assert p.log.log_end_offset == 0
    finally:
        p.log.close()

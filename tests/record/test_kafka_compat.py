"""Byte compatibility with kafka-python, an independent implementation of the v2 format: each side reads what
the other writes, for every codec, and uncompressed batches are byte-identical.

kafka-python needs python-snappy for snappy; without it, its xerial framing code runs on a stand-in that does the
raw snappy blocks with cramjam, so the framing is still checked against an independent implementation.
"""

import warnings

import cramjam
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.client.record.batch import Record, read_batches
from odradek.client.record.builder import BatchBuilder, encode_batch
from odradek.client.record.control import ControlType, build_control_batch
from odradek.client.record.header import COMPRESSION_CODES

with warnings.catch_warnings():  # kafka-python's protocol package uses deprecated importlib.resources calls
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka.codec
    from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
    from kafka.record.memory_records import MemoryRecords, MemoryRecordsBuilder

TS = 1_700_000_000_000
CODECS = list(COMPRESSION_CODES)


class _RawSnappy:
    """The two python-snappy functions kafka.codec uses, on cramjam."""

    @staticmethod
    def compress(data: bytes) -> bytes:
        return bytes(cramjam.snappy.compress_raw(data))

    @staticmethod
    def decompress(data: bytes) -> bytes:
        return bytes(cramjam.snappy.decompress_raw(data))


@pytest.fixture(autouse=True)
def kafka_snappy(monkeypatch: pytest.MonkeyPatch) -> None:
    if not kafka.codec.has_snappy():
        monkeypatch.setattr(kafka.codec, "snappy", _RawSnappy)


def records_for_test() -> list[tuple]:
    return [
        (TS, b"key-1", b"hello " * 40, [("trace", b"abc"), ("null", None)]),
        (TS - 100, None, b"", []),
        (TS + 50_000, b"", None, []),
        *[(TS + i, None, b"value-%d " % i * 10, []) for i in range(200)],
    ]


def kafka_build(records: list[tuple], codec: str, base_offset: int = 0) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=COMPRESSION_CODES[codec],
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=2**30,
    )
    for i, (timestamp, key, value, headers) in enumerate(records):
        builder.append(base_offset + i, timestamp, key, value, headers)
    return bytes(builder.build())


def kafka_read(buf: bytes) -> list[tuple]:
    out = []
    memory = MemoryRecords(buf)
    while (batch := memory.next_batch()) is not None:
        assert batch.validate_crc()
        out.extend((r.offset, r.timestamp, r.key, r.value, tuple(r.headers)) for r in batch)
    return out


def ours_read(buf: bytes) -> list[tuple]:
    return [tuple(r) for batch in read_batches(buf) for r in batch.records()]


def ours_build(records: list[tuple], codec: str) -> bytes:
    builder = BatchBuilder(codec)
    for timestamp, key, value, headers in records:
        builder.append(timestamp, key, value, headers)
    return builder.build()


@pytest.mark.parametrize("codec", CODECS)
def test_we_read_kafka_python_batches(codec: str) -> None:
    records = records_for_test()
    buf = kafka_build(records, codec)
    assert DefaultRecordBatch(buf).compression_type == COMPRESSION_CODES[codec]  # really compressed
    assert ours_read(buf) == kafka_read(buf)
    assert ours_read(buf) == [tuple(Record(i, t, k, v, tuple(h))) for i, (t, k, v, h) in enumerate(records)]


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_reads_our_batches(codec: str) -> None:
    records = records_for_test()
    buf = ours_build(records, codec)
    assert kafka_read(buf) == ours_read(buf)
    values = [r[2] for r in records]
    bulk = encode_batch(values, timestamps=TS, compression=codec, base_offset=5)
    assert [(r[0], r[1], r[3]) for r in kafka_read(bulk)] == [(5 + i, TS, v) for i, v in enumerate(values)]


def test_uncompressed_batches_are_byte_identical() -> None:
    # kafka-python writes partition leader epoch 0 and the offsets as deltas from base offset 0
    records = records_for_test()
    builder = BatchBuilder(partition_leader_epoch=0)
    for timestamp, key, value, headers in records:
        builder.append(timestamp, key, value, headers)
    assert builder.build() == kafka_build(records, "none")
    values = [b"v" * (i % 150) for i in range(1000)]
    assert encode_batch(values, timestamps=TS, partition_leader_epoch=0) == kafka_build(
        [(TS, None, v, []) for v in values], "none"
    )


def test_memory_records_multi_batch_buffers() -> None:
    ours = b"".join(encode_batch([b"a%d" % i] * 3, timestamps=TS, base_offset=3 * i) for i in range(4))
    assert [r[0] for r in kafka_read(ours)] == list(range(12))
    theirs = b""
    for i in range(3):
        builder = MemoryRecordsBuilder(magic=2, compression_type=1, batch_size=2**20, offset=10 * i)
        builder.append(TS, b"k", b"x" * 100)
        builder.append(TS + 1, None, b"y" * 100)
        builder.close()
        theirs += bytes(builder.buffer())
    assert [r[0] for r in ours_read(theirs)] == [0, 1, 10, 11, 20, 21]
    assert ours_read(theirs) == kafka_read(theirs)


def test_kafka_python_reads_our_control_batches() -> None:
    for marker in ControlType:
        buf = build_control_batch(marker, producer_id=5, producer_epoch=1, coordinator_epoch=8, timestamp_ms=TS)
        batch = DefaultRecordBatch(buf)
        assert batch.is_control_batch and batch.is_transactional and batch.validate_crc()
        (record,) = list(batch)
        assert record.type == marker and record.abort == (marker == ControlType.ABORT)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(min_value=0, max_value=2**45),
            st.none() | st.binary(max_size=20),
            st.none() | st.binary(max_size=100),
            st.lists(st.tuples(st.text(max_size=8), st.none() | st.binary(max_size=8)), max_size=3),
        ),
        min_size=1,
        max_size=30,
    ),
    st.sampled_from(CODECS),
)
def test_both_directions_property(records: list[tuple], codec: str) -> None:
    assert ours_read(kafka_build(records, codec)) == kafka_read(ours_build(records, codec))

import pytest

from odradek.client.consumer.completed_fetch import CompletedFetch
from odradek.client.errors import CorruptRecordError, RecordTooLargeError
from odradek.client.record.builder import BatchBuilder, assemble_batch, encode_batch, encode_record
from odradek.client.record.control import ControlType, build_control_batch
from odradek.client.structs import LOG_APPEND_TIME, ConsumerRecord, TopicPartition

TP = TopicPartition("t", 4)
TS = 1_700_000_000_000


def fetch(buf: bytes, position: int = 0, **options: object) -> CompletedFetch:
    return CompletedFetch(
        TP, buf, position, 0, check_crcs=options.pop("check_crcs", True), read_committed=False, **options
    )


def take_all(f: CompletedFetch, step: int = 1000) -> list[ConsumerRecord]:
    out = []
    while records := f.take(step):
        out += records
    return out


def txn_batch(producer_id: int, base_offset: int, count: int) -> bytes:
    values = [b"p%d-%d" % (producer_id, base_offset + i) for i in range(count)]
    return encode_batch(
        values,
        timestamps=TS,
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=0,
        base_sequence=0,
        is_transactional=True,
    )


def test_records_carry_topic_partition_and_headers() -> None:
    builder = BatchBuilder(base_offset=10)
    builder.append(TS, b"k", b"v", [("h", b"1"), ("n", None)])
    builder.append(TS - 5, None, None)
    records = take_all(fetch(builder.build(), 10))
    assert records == [
        ConsumerRecord("t", 4, 10, TS, 0, b"k", b"v", (("h", b"1"), ("n", None))),
        ConsumerRecord("t", 4, 11, TS - 5, 0, None, None, ()),
    ]


def test_log_append_time_replaces_every_timestamp() -> None:
    builder = BatchBuilder(log_append_time=True)
    builder.append(TS, None, b"a")
    builder.append(TS + 9, None, b"b")
    records = take_all(fetch(builder.build()))
    assert [(r.timestamp, r.timestamp_type) for r in records] == [(TS + 9, LOG_APPEND_TIME)] * 2


def test_position_skips_earlier_records_and_advances_past_batches() -> None:
    buf = encode_batch([b"%d" % i for i in range(10)], base_offset=0) + encode_batch([b"x"] * 5, base_offset=10)
    f = fetch(buf, 7)
    assert f.fetch_end == 15
    assert [r.offset for r in f.take(4)] == [7, 8, 9, 10]
    assert f.position == 11 and not f.exhausted
    assert [r.offset for r in f.take(100)] == [11, 12, 13, 14]
    assert f.position == 15 and f.exhausted


def test_a_trailing_partial_batch_is_left_for_the_next_fetch() -> None:
    first, second = encode_batch([b"a"] * 3, base_offset=0), encode_batch([b"b"] * 3, base_offset=3)
    f = fetch(first + second[:-5])
    assert f.fetch_end == 3 and len(take_all(f)) == 3
    with pytest.raises(RecordTooLargeError, match="larger than the fetch size"):
        fetch(second[:-5], 3)


def test_corrupt_batches_raise_when_crcs_are_checked() -> None:
    buf = bytearray(encode_batch([b"value"] * 3))
    buf[-2] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="CRC"):
        fetch(bytes(buf)).take(10)
    assert len(fetch(bytes(buf), check_crcs=False).take(10)) == 3


def test_control_batches_are_never_returned() -> None:
    buf = encode_batch([b"a"], base_offset=0) + build_control_batch(ControlType.COMMIT, 7, 0, 0, TS, base_offset=1)
    buf += encode_batch([b"b"], base_offset=2)
    f = fetch(buf)
    assert [r.value for r in take_all(f)] == [b"a", b"b"] and f.position == 3


def test_read_committed_drops_aborted_transactions() -> None:
    buf = b"".join(
        [
            txn_batch(7, 0, 2),  # aborted below
            encode_batch([b"plain"], base_offset=2),
            txn_batch(8, 3, 2),  # committed below
            build_control_batch(ControlType.ABORT, 7, 0, 0, TS, base_offset=5),
            build_control_batch(ControlType.COMMIT, 8, 0, 0, TS, base_offset=6),
            txn_batch(7, 7, 1),  # a later, committed transaction of producer 7
            build_control_batch(ControlType.COMMIT, 7, 0, 0, TS, base_offset=8),
        ]
    )
    aborted = [(7, 0)]
    committed = CompletedFetch(TP, buf, 0, 0, check_crcs=True, read_committed=True, aborted=aborted)
    assert [r.offset for r in take_all(committed)] == [2, 3, 4, 7]
    assert committed.position == 9
    uncommitted = CompletedFetch(TP, buf, 0, 0, check_crcs=True, read_committed=False, aborted=aborted)
    assert [r.offset for r in take_all(uncommitted)] == [0, 1, 2, 3, 4, 7]


def test_the_position_carries_the_leader_epoch_of_the_last_taken_records_batch() -> None:
    buf = (
        encode_batch([b"a"] * 3, base_offset=0, partition_leader_epoch=4)
        + encode_batch([b"b"] * 3, base_offset=3, partition_leader_epoch=7)
        + encode_batch([b"c"], base_offset=6)  # no epoch (-1): unknown
    )
    f = fetch(buf)
    assert f.position_epoch is None  # nothing taken yet
    assert len(f.take(2)) == 2 and (f.position, f.position_epoch) == (2, 4)
    assert len(f.take(3)) == 3 and (f.position, f.position_epoch) == (5, 7)  # offsets 2 (epoch 4), 3 and 4 (7)
    assert len(f.take(10)) == 2 and (f.position, f.position_epoch) == (7, None)


def test_a_skipped_control_batch_moves_the_position_epoch_too() -> None:
    buf = encode_batch([b"a"], base_offset=0, partition_leader_epoch=2) + build_control_batch(
        ControlType.COMMIT, 9, 0, 0, TS, base_offset=1, partition_leader_epoch=5
    )
    f = fetch(buf)
    assert len(take_all(f)) == 1
    assert (f.position, f.position_epoch) == (2, 5)


def compacted_batch(base_offset: int, kept: list[int], last_offset_delta: int) -> bytes:
    """A batch as the log cleaner rebuilds it: only the ``kept`` offset deltas, its last offset delta unchanged."""
    records = b"".join(encode_record(d, 0, b"k%d" % d, b"v%d" % (base_offset + d)) for d in kept)
    return assemble_batch(records, len(kept), 0, 0, base_offset, 0, last_offset_delta, TS, TS, -1, -1, -1)


def test_compaction_gaps_advance_the_position_past_each_batchs_last_offset() -> None:
    # Offsets 0-9: 3..9 removed (trailing), 10-19: 10..14 removed (leading) and 17 (middle).
    buf = compacted_batch(0, [0, 1, 2], 9) + compacted_batch(10, [5, 6, 8, 9], 9)
    f = fetch(buf, 0)
    assert [r.offset for r in f.take(3)] == [0, 1, 2]
    assert f.position == 10  # not 3: offsets 3-9 are gone, and a fetch from 3 would return this batch again
    assert [r.offset for r in f.take(2)] == [15, 16]
    assert f.position == 17
    assert [r.offset for r in take_all(f)] == [18, 19]
    assert f.position == 20 and f.fetch_end == 20 and f.exhausted


def test_a_position_at_a_removed_offset_reads_from_the_next_record() -> None:
    buf = compacted_batch(0, [0, 1, 2], 9) + compacted_batch(10, [5, 6], 9)
    f = fetch(buf, 5)  # a seek or a committed offset into the trailing gap of the first batch
    assert [r.offset for r in take_all(f)] == [15, 16]
    assert f.position == 20
    f = fetch(buf, 12)
    assert [r.offset for r in take_all(f)] == [15, 16]


def test_a_null_key_in_a_two_byte_varint_is_a_null_key() -> None:
    """Observed: the consumer's decode loop took only a one-byte -1 for a null key and raised "negative key length"
    for the same -1 in two bytes (0x81 0x00), which RecordBatch.records() decoded as a null key."""
    canonical = encode_record(0, 0, None, b"v")
    body = canonical[1:2] + canonical[2:3] + canonical[3:4] + b"\x81\x00" + canonical[5:]
    records = bytes([2 * len(body)]) + body
    buf = assemble_batch(records, 1, 0, 0, 0, 0, 0, TS, TS, -1, -1, -1)
    assert [(r.key, r.value) for r in take_all(fetch(buf))] == [(None, b"v")]

"""Transaction markers: build, read back, reject malformed ones."""

import pytest

from odradek.client.errors import CorruptRecordError
from odradek.client.record.batch import Record, read_batches
from odradek.client.record.control import ControlMarker, ControlType, build_control_batch, parse_control_record
from odradek.client.record.header import check_record_count, validate_batch


@pytest.mark.parametrize("marker", list(ControlType))
def test_control_batch_round_trip(marker: ControlType) -> None:
    buf = build_control_batch(
        marker,
        producer_id=42,
        producer_epoch=7,
        coordinator_epoch=3,
        timestamp_ms=1234,
        base_offset=99,
        partition_leader_epoch=2,
    )
    header = validate_batch(buf)
    check_record_count(buf, header)
    assert header.is_control and header.is_transactional
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (42, 7, -1)
    assert (header.base_offset, header.partition_leader_epoch, header.records_count) == (99, 2, 1)
    (batch,) = read_batches(buf)
    (record,) = batch.records()
    assert record.offset == 99 and record.timestamp == 1234
    assert record.key == b"\x00\x00\x00" + bytes([marker])
    assert parse_control_record(record) == ControlMarker(marker, 3)


def test_newer_versions_are_read_by_their_prefix() -> None:
    record = Record(0, 0, b"\x00\x01\x00\x01", b"\x00\x01\x00\x00\x00\x05extra")
    assert parse_control_record(record) == ControlMarker(ControlType.COMMIT, 5)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        (None, b"\x00\x00\x00\x00\x00\x01"),
        (b"\x00\x00\x00", b"\x00\x00\x00\x00\x00\x01"),
        (b"\x00\x00\x00\x01", b"\x00\x00\x00"),
        (b"\x00\x00\x00\x09", b"\x00\x00\x00\x00\x00\x01"),  # unknown type
        (b"\xff\xff\x00\x01", b"\x00\x00\x00\x00\x00\x01"),  # negative version
    ],
)
def test_malformed_control_records(key: bytes | None, value: bytes) -> None:
    with pytest.raises(CorruptRecordError):
        parse_control_record(Record(0, 0, key, value))

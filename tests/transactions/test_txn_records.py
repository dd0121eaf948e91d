"""The ``__transaction_state`` records: round trips, tombstones, and refusal of what cannot be read."""

from __future__ import annotations

import struct

import pytest

from odradek.broker.transactions.metadata import TxnMetadata, TxnState
from odradek.broker.transactions.records import (
    TxnRecordError,
    decode_key,
    decode_value,
    encode_batch,
    encode_key,
    encode_value,
    read_records,
)
from odradek.client.structs import TopicPartition

MD = TxnMetadata(
    "tx-é",
    42,
    7,
    3,
    2,
    60_000,
    TxnState.PREPARE_COMMIT,
    frozenset({TopicPartition("a", 0), TopicPartition("a", 3), TopicPartition("b", 1)}),
    1_700_000_000_000,
    1_700_000_000_500,
)


@pytest.mark.parametrize("state", list(TxnState))
def test_every_state_round_trips(state: TxnState) -> None:
    md = TxnMetadata("t", 1, -1, 0, -1, 1, state, frozenset(), -1, 0)
    assert decode_value("t", encode_value(md)) == md


def test_key_and_value_round_trip() -> None:
    assert decode_key(encode_key(MD.transactional_id)) == MD.transactional_id
    assert decode_value(MD.transactional_id, encode_value(MD)) == MD
    assert encode_value(None) is None and decode_value("t", None) is None


def test_unreadable_records_are_refused() -> None:
    value = encode_value(MD)
    assert value is not None
    with pytest.raises(TxnRecordError):
        decode_value("t", value[:-1])
    with pytest.raises(TxnRecordError):
        decode_value("t", value + b"\0")
    with pytest.raises(TxnRecordError):
        decode_value("t", struct.pack(">h", 1) + value[2:])  # a newer version
    with pytest.raises(TxnRecordError):
        decode_key(struct.pack(">h", 9) + encode_key("t")[2:])


def test_batches_replay_in_order_and_skip_foreign_records() -> None:
    empty = TxnMetadata("u", 5, -1, 0, -1, 1000, TxnState.EMPTY, frozenset(), -1, 0)
    data = encode_batch([(MD.transactional_id, MD), ("u", empty)], 1) + encode_batch([("u", None)], 2)
    from odradek.client.record.builder import BatchBuilder

    foreign = BatchBuilder()
    foreign.append(3, struct.pack(">h", 7) + b"xx", b"v")
    data += foreign.build()
    assert list(read_records(data)) == [(MD.transactional_id, MD), ("u", empty), ("u", None)]

"""Consumer records as Arrow record batches: every column from its field, and no per-record garbage."""

from __future__ import annotations

import datetime as dt
import gc

from odradek.client.structs import ConsumerRecord
from odradek.spark_connector.record_batches import ARROW_SCHEMA, to_record_batch

TS = 1_700_000_000_123
RECORDS = [
    ConsumerRecord("orders", 3, 40, TS, 0, b"k", b"v0", (("h", b"x"), ("n", None))),
    ConsumerRecord("orders", 3, 41, TS + 1, 0, None, None, ()),
    ConsumerRecord("orders", 3, 45, TS + 2, 1, b"", b"v2", ()),  # offsets 42-44 compacted away; LogAppendTime
]


def test_every_column_comes_from_its_field() -> None:
    batch = to_record_batch(RECORDS, include_headers=True)
    assert batch.schema == ARROW_SCHEMA
    rows = batch.to_pylist()
    assert [(r["key"], r["value"], r["topic"], r["partition"], r["offset"], r["timestampType"]) for r in rows] == [
        (b"k", b"v0", "orders", 3, 40, 0),
        (None, None, "orders", 3, 41, 0),
        (b"", b"v2", "orders", 3, 45, 1),
    ]
    utc = dt.UTC
    assert [r["timestamp"] for r in rows] == [dt.datetime.fromtimestamp((TS + i) / 1000, utc) for i in range(3)]
    assert [r["headers"] for r in rows] == [[{"key": "h", "value": b"x"}, {"key": "n", "value": None}], [], []]


def test_headers_are_null_unless_asked_for() -> None:
    batch = to_record_batch(RECORDS, include_headers=False)
    assert batch.column("headers").null_count == len(RECORDS)
    assert batch.column("value").to_pylist() == [b"v0", None, b"v2"]


def test_an_empty_poll_is_an_empty_batch() -> None:
    batch = to_record_batch([], include_headers=False)
    assert batch.num_rows == 0 and batch.schema == ARROW_SCHEMA


def test_a_batch_sets_off_no_garbage_collection() -> None:
    """Building the columns must not allocate an object the collector tracks per record (transposing with
    ``zip(*records)`` made an iterator per record): in Spark's forked workers the collections those set off cost
    more than the conversion itself."""
    records = [ConsumerRecord("t", 0, i, TS + i, 0, None, b"v%d" % i, ()) for i in range(10_000)]
    collections: list[int] = []

    def count(phase: str, info: dict) -> None:
        if phase == "start":
            collections.append(info["generation"])

    gc.collect()
    gc.callbacks.append(count)
    try:
        batch = to_record_batch(records, include_headers=False)
    finally:
        gc.callbacks.remove(count)
    assert batch.num_rows == 10_000
    assert collections == []

"""Consumer records as Arrow record batches in the source's schema.

Spark's Python data sources move rows to the JVM through Arrow. Given tuples, Spark converts them value by value
with a Python converter per column; given ``pyarrow.RecordBatch``es it passes them through, so building whole
columns here (one C call per column) is what lets executors keep up with the consumer.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from operator import itemgetter

import pyarrow as pa

from odradek.client.structs import ConsumerRecord
from odradek.spark_connector.decoding import Decoding, column_for

HEADER = pa.struct([("key", pa.string()), ("value", pa.binary())])
ARROW_SCHEMA = pa.schema(
    [
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("timestamp", pa.timestamp("us", tz="UTC")),
        ("timestampType", pa.int32()),
        ("headers", pa.list_(HEADER)),
    ]
)
"""What Spark's ``to_arrow_schema`` makes of the source's DDL schema (timestamps as microseconds in UTC)."""

_MS = pa.timestamp("ms", tz="UTC")
_OFFSET, _TIMESTAMP, _TIMESTAMP_TYPE, _KEY, _VALUE, _HEADERS = (
    ConsumerRecord._fields.index(name) for name in ("offset", "timestamp", "timestamp_type", "key", "value", "headers")
)


Decoder = Callable[[Sequence[bytes | None], Sequence[int]], pa.Array]


@dataclass(frozen=True)
class BatchColumns:
    """The batches' schema and the key and value decoders (None: the raw bytes, Spark's binary)."""

    schema: pa.Schema
    key: Decoder | None = None
    value: Decoder | None = None

    @classmethod
    def of(cls, key: Decoding | None, value: Decoding | None) -> BatchColumns:
        schema = ARROW_SCHEMA
        for index, decoding in ((0, key), (1, value)):
            if decoding is not None:
                arrow = column_for(decoding.fmt, decoding.schema, decoding.field).arrow
                schema = schema.set(index, pa.field(schema.field(index).name, arrow))
        return cls(schema, None if key is None else key.decoder(), None if value is None else value.decoder())


BINARY = BatchColumns(ARROW_SCHEMA)


def to_record_batch(
    records: Sequence[ConsumerRecord], include_headers: bool, columns: BatchColumns = BINARY
) -> pa.RecordBatch:
    """One batch of rows from records of one partition (what one poll of ``read_range`` returns); ``headers`` is
    null unless asked for, as in Spark's Kafka source.

    Each column is gathered on its own (``map(itemgetter(i), records)``) rather than by transposing with
    ``zip(*records)``, which makes an iterator per record: GC-tracked objects that set off collections, and in
    Spark's forked Python workers those cost more than the rest of the conversion. The topic and partition
    columns repeat one value."""
    n = len(records)
    schema = columns.schema
    if n == 0:
        return pa.RecordBatch.from_pylist([], schema=schema)

    def column(field: int) -> list:
        return list(map(itemgetter(field), records))

    first = records[0]
    if include_headers:
        headers = [[{"key": k, "value": v} for k, v in h] for h in column(_HEADERS)]
        header_column = pa.array(headers, pa.list_(HEADER))
    else:
        header_column = pa.nulls(n, pa.list_(HEADER))
    offsets = column(_OFFSET)
    key = pa.array(column(_KEY), pa.binary()) if columns.key is None else columns.key(column(_KEY), offsets)
    value = pa.array(column(_VALUE), pa.binary()) if columns.value is None else columns.value(column(_VALUE), offsets)
    return pa.RecordBatch.from_arrays(
        [
            key,
            value,
            pa.repeat(pa.scalar(first.topic, pa.string()), n),
            pa.repeat(pa.scalar(first.partition, pa.int32()), n),
            pa.array(offsets, pa.int64()),
            pa.array(column(_TIMESTAMP), pa.int64()).cast(_MS).cast(ARROW_SCHEMA.field("timestamp").type),
            pa.array(column(_TIMESTAMP_TYPE), pa.int32()),
            header_column,
        ],
        schema=schema,
    )

"""Consumer records as Arrow record batches in the source's schema.

Spark's Python data sources move rows to the JVM through Arrow. Given tuples, Spark converts them value by value
with a Python converter per column; given ``pyarrow.RecordBatch``es it passes them through, so building whole
columns here (one C call per column) is what lets executors keep up with the consumer.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from odradek.client.structs import ConsumerRecord

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


def to_record_batch(records: Sequence[ConsumerRecord], include_headers: bool) -> pa.RecordBatch:
    """One batch of rows; ``headers`` is null unless asked for, as in Spark's Kafka source."""
    n = len(records)
    if n == 0:
        return pa.RecordBatch.from_pylist([], schema=ARROW_SCHEMA)
    topics, partitions, offsets, timestamps, types, keys, values, headers = zip(*records)
    if include_headers:
        header_column = pa.array([[{"key": k, "value": v} for k, v in h] for h in headers], pa.list_(HEADER))
    else:
        header_column = pa.nulls(n, pa.list_(HEADER))
    return pa.RecordBatch.from_arrays(
        [
            pa.array(keys, pa.binary()),
            pa.array(values, pa.binary()),
            pa.array(topics, pa.string()),
            pa.array(partitions, pa.int32()),
            pa.array(offsets, pa.int64()),
            pa.array(timestamps, pa.int64()).cast(_MS).cast(ARROW_SCHEMA.field("timestamp").type),
            pa.array(types, pa.int32()),
            header_column,
        ],
        schema=ARROW_SCHEMA,
    )

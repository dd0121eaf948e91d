"""Records sent with librdkafka (confluent-kafka), for the tests that compare what another reader sees with what
each delivery report said."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# partition, key, value, headers, CreateTime timestamp
Record = tuple[int, bytes | None, bytes | None, list, int]


def produce_records(
    producer: Any, topic: str, count: int, record: Callable[[int], Record], flush_at: int | None = None
) -> list[tuple[int, Any]]:
    """Send ``record(i)`` for every i below ``count`` (flushing before ``flush_at``, so that partitions get more
    than one batch); return each delivery report's (i, message), all of them successful."""
    reports: list[tuple[int, Any, Any]] = []
    for i in range(count):
        if i == flush_at:
            producer.flush(30)
        partition, key, value, headers, ts = record(i)
        producer.produce(
            topic,
            value=value,
            key=key,
            partition=partition,
            headers=headers or None,
            timestamp=ts,
            on_delivery=lambda err, msg, i=i: reports.append((i, err, msg)),
        )
    assert producer.flush(30) == 0
    assert [err for _, err, _ in reports if err is not None] == []
    return [(i, msg) for i, _, msg in reports]

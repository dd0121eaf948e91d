"""``format("odradek")``: a Spark 4 Python Data Source with the options and schema of Spark's Kafka source.

The driver resolves topics and offsets with the clients (options.py, planning.py); each input partition is one
offset range of one topic-partition, read on an executor straight from the partition leader by a consumer.
Streaming offsets are the JSON map topic -> partition -> offset that Spark checkpoints; partitions that appear
between micro-batches start at their earliest offset.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition

from odradek.client import Admin, Consumer, TopicPartition
from odradek.spark_connector.options import (
    SourceOptions,
    parse_offsets_json,
    serialize_offsets_json,
    topics_for,
)
from odradek.spark_connector.planning import OffsetRange, data_loss, plan_ranges

log = logging.getLogger(__name__)

SCHEMA = (
    "key binary, value binary, topic string, partition int, offset long, timestamp timestamp, "
    "timestampType int, headers array<struct<key: string, value: binary>>"
)
READ_TIMEOUT_S = 120.0


class RangePartition(InputPartition):
    def __init__(self, servers: str, r: OffsetRange, include_headers: bool) -> None:
        super().__init__(None)
        self.servers = servers
        self.range = r
        self.include_headers = include_headers


class OdradekDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "odradek"

    def schema(self) -> str:
        return SCHEMA

    def reader(self, schema) -> DataSourceReader:
        return BatchReader(SourceOptions.parse(self.options, batch=True))

    def streamReader(self, schema) -> DataSourceStreamReader:
        return StreamReader(SourceOptions.parse(self.options, batch=False))


class _Offsets:
    """The driver's view of the cluster for one source: partitions and their earliest/latest offsets."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self.servers = ",".join(options.bootstrap_servers)

    def partitions(self) -> list[TopicPartition]:
        if self.options.assign is not None:
            return list(self.options.assign)
        with Admin({"bootstrap.servers": self.servers}) as admin:
            names = topics_for(self.options, admin.list_topics())
            return [TopicPartition(name, p.partition) for name in names for p in admin.describe_topic(name).partitions]

    def bounds(self, partitions: list[TopicPartition]) -> tuple[dict[TopicPartition, int], dict[TopicPartition, int]]:
        with Consumer({"bootstrap.servers": self.servers}) as consumer:
            return consumer.beginning_offsets(partitions), consumer.end_offsets(partitions)

    def resolve(self, spec, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        """An offsets option ("earliest", "latest" or a map with -2/-1) as concrete offsets."""
        earliest, latest = self.bounds(partitions)
        if spec == "earliest":
            return earliest
        if spec == "latest":
            return latest
        chosen = {}
        for tp in partitions:
            offset = spec.get(tp, -1)
            chosen[tp] = earliest[tp] if offset == -2 else latest[tp] if offset == -1 else offset
        return chosen

    def ranges(self, start: Mapping[TopicPartition, int], end: Mapping[TopicPartition, int]) -> list[RangePartition]:
        earliest, _ = self.bounds(list(end))
        losses = data_loss({tp: start.get(tp, earliest[tp]) for tp in end}, earliest)
        if losses:
            message = "; ".join(loss.message for loss in losses)
            if self.options.fail_on_data_loss:
                raise RuntimeError(f"failOnDataLoss: {message}")
            log.warning("skipping lost offsets: %s", message)
        begin = {tp: max(start.get(tp, earliest[tp]), earliest[tp]) for tp in end}
        planned, _ = plan_ranges(begin, dict(end), self.options.min_partitions, None)
        return [RangePartition(self.servers, r, self.options.include_headers) for r in planned]


class BatchReader(DataSourceReader):
    def __init__(self, options: SourceOptions) -> None:
        self.offsets = _Offsets(options)

    def partitions(self) -> list[RangePartition]:
        o = self.offsets
        tps = o.partitions()
        start = o.resolve(o.options.starting_offsets, tps)
        end = o.resolve(o.options.ending_offsets or "latest", tps)
        return o.ranges(start, end)

    def read(self, partition: RangePartition) -> Iterator[tuple]:
        return read_range(partition)


class StreamReader(DataSourceStreamReader):
    def __init__(self, options: SourceOptions) -> None:
        self.offsets = _Offsets(options)

    def initialOffset(self) -> dict:
        o = self.offsets
        return _to_json_map(o.resolve(o.options.starting_offsets, o.partitions()))

    def latestOffset(self) -> dict:
        o = self.offsets
        tps = o.partitions()
        _, latest = o.bounds(tps)
        return _to_json_map(latest)

    def partitions(self, start: dict, end: dict) -> list[RangePartition]:
        o = self.offsets
        return o.ranges(_from_json_map(start), _from_json_map(end))

    def read(self, partition: RangePartition) -> Iterator[tuple]:
        return read_range(partition)

    def commit(self, end: dict) -> None:
        """Offsets live in Spark's checkpoint; nothing to commit to the cluster."""


def _to_json_map(offsets: Mapping[TopicPartition, int]) -> dict:
    return {"offsets": serialize_offsets_json(offsets)}


def _from_json_map(value: dict) -> dict[TopicPartition, int]:
    return parse_offsets_json(value["offsets"])


def read_range(p: RangePartition) -> Iterator[tuple]:
    """The records of one range, as rows of SCHEMA, read from the partition leader."""
    r = p.range
    tp = TopicPartition(r.topic, r.partition)
    deadline = time.monotonic() + READ_TIMEOUT_S
    with Consumer({"bootstrap.servers": p.servers, "auto.offset.reset": "none"}) as consumer:
        consumer.assign([tp])
        consumer.seek(tp, r.start)
        position = r.start
        while position < r.end:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{r.topic}-{r.partition}: offsets {position}..{r.end} not read in time")
            for rec in consumer.poll(timeout_ms=500):
                if rec.offset >= r.end:
                    return
                position = rec.offset + 1
                headers = [(k, v) for k, v in rec.headers] if p.include_headers else None
                yield (
                    rec.key,
                    rec.value,
                    rec.topic,
                    rec.partition,
                    rec.offset,
                    datetime.fromtimestamp(rec.timestamp / 1000, UTC),
                    rec.timestamp_type,
                    headers,
                )
            position = max(position, consumer.position(tp))


def register(spark) -> None:
    """Make ``format("odradek")`` available in this Spark session."""
    spark.dataSource.register(OdradekDataSource)

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
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow

from odradek.client import Admin, Consumer, TopicPartition
from odradek.client.errors import OdradekError, OffsetOutOfRangeError
from odradek.client.schema_registry import SchemaRegistryError
from odradek.spark_connector import protobuf
from odradek.spark_connector.decoding import Decoding, DecodingError, column_for
from odradek.spark_connector.options import (
    DecodeOptions,
    OptionError,
    SourceOptions,
    parse_offsets_json,
    serialize_offsets_json,
    topics_for,
)
from odradek.spark_connector.planning import DataLoss, OffsetRange, cap_offsets, data_loss, plan_ranges
from odradek.spark_connector.record_batches import BatchColumns, to_record_batch
from odradek.spark_connector.writer import batch_writer, stream_writer

logger = logging.getLogger(__name__)

SCHEMA = (
    "key binary, value binary, topic string, partition int, offset long, timestamp timestamp, "
    "timestampType int, headers array<struct<key: string, value: binary>>"
)
READ_TIMEOUT_S = 120.0
READ_BATCH_ROWS = 10_000  # rows per Arrow batch an executor hands to Spark


class RangePartition(InputPartition):
    def __init__(
        self,
        config: dict[str, Any],
        r: OffsetRange,
        include_headers: bool,
        fail_on_data_loss: bool,
        decodings: Decodings = (None, None),
    ) -> None:
        super().__init__(None)
        self.config = config  # the executor's consumer config
        self.range = r
        self.include_headers = include_headers
        self.fail_on_data_loss = fail_on_data_loss
        self.decodings = decodings  # the key's and the value's, None for binary


Decodings = tuple[Decoding | None, Decoding | None]


def resolve_decodings(options: DecodeOptions) -> Decodings:
    """The key's and value's decoding (keyFormat/valueFormat): the schema given, or the latest of the one topic's
    subject, checked to have a Spark column type. Every problem is an OptionError, as Spark shows only the message."""
    found: list[Decoding | None] = []
    registry = options.registry
    client = None if registry is None else registry.client()  # no request yet; the options checked URL and CA file
    for side, fmt, given in (
        ("key", options.key_format, options.key_schema),
        ("value", options.value_format, options.value_schema),
    ):
        if fmt == "binary":
            found.append(None)
            continue
        assert registry is not None and client is not None  # the options require the registry with a format
        option = f"{side}Schema" if given is not None else f"{side}Format"
        text = given
        if fmt == "protobuf":
            if given is not None:
                subject, version = protobuf.subject_version(given)
            else:
                subject, version = f"{options.topic}-{side}", "latest"
            try:
                text = protobuf.reader_schema(client, subject, version)
            except SchemaRegistryError as e:
                raise OptionError(option, f"no schema for subject {subject} version {version}: {e}") from None
            except DecodingError as e:
                raise OptionError(option, str(e)) from None
        elif text is None:
            topic = options.topic
            assert topic is not None  # the options require a schema unless one topic is read
            try:
                latest = client.latest(f"{topic}-{side}")
            except SchemaRegistryError as e:
                raise OptionError(f"{side}Format", f"no schema for subject {topic}-{side}: {e}") from None
            if latest.schema_type != fmt.upper():
                raise OptionError(f"{side}Format", f"the subject {topic}-{side} holds {latest.schema_type}, not {fmt}")
            text = latest.schema
        try:
            column_for(fmt, text, side)
        except DecodingError as e:
            raise OptionError(option, str(e)) from None
        found.append(Decoding(fmt, text, registry, side))
    return found[0], found[1]


def source_schema(decodings: Decodings) -> str:
    """SCHEMA with the decoded key and value columns' types."""
    key, value = (("binary" if d is None else column_for(d.fmt, d.schema, d.field).ddl) for d in decodings)
    return SCHEMA.replace("key binary, value binary", f"key {key}, value {value}", 1)


class OdradekDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "odradek"

    def _decodings(self) -> Decodings:
        """Resolved once per source (the schema and the readers must agree on the columns' types)."""
        if not hasattr(self, "_resolved"):
            self._resolved = resolve_decodings(DecodeOptions.parse(self.options))
        return self._resolved

    def schema(self) -> str:
        return source_schema(self._decodings())

    def reader(self, schema) -> DataSourceReader:
        return BatchReader(SourceOptions.parse(self.options, batch=True), self._decodings())

    def streamReader(self, schema) -> DataSourceStreamReader:
        return StreamReader(SourceOptions.parse(self.options, batch=False), self._decodings())

    def writer(self, schema, overwrite: bool) -> DataSourceArrowWriter:
        return batch_writer(self.options, schema, overwrite)

    def streamWriter(self, schema, overwrite: bool) -> DataSourceStreamArrowWriter:
        return stream_writer(self.options, schema, overwrite)


class _Offsets:
    """The driver's view of the cluster for one source: partitions and their earliest/latest offsets.

    The clients are opened on first use and kept: a streaming query asks for offsets every trigger.
    """

    def __init__(self, options: SourceOptions, decodings: Decodings = (None, None)) -> None:
        self.options = options
        self.decodings = decodings
        self.servers = ",".join(options.bootstrap_servers)
        self._admin: Admin | None = None
        self._consumer: Consumer | None = None
        self._committed: dict[TopicPartition, int] = {}

    def partitions(self) -> list[TopicPartition]:
        if self.options.assign is not None:
            return list(self.options.assign)
        if self._admin is None:
            self._admin = Admin({"bootstrap.servers": self.servers})
        names = topics_for(self.options, self._admin.list_topics())
        return [TopicPartition(n, p.partition) for n in names for p in self._admin.describe_topic(n).partitions]

    def _offsets(self) -> Consumer:
        if self._consumer is None:
            self._consumer = Consumer(self.options.consumer_config("driver"))
        return self._consumer

    def commit(self, end: Mapping[TopicPartition, int]) -> None:
        """Commit a finished micro-batch's end offsets to the group (commitToGroup), so that the group's lag is
        the query's; offsets already committed are not sent again. A failed commit is logged, not raised: the
        checkpoint, not the group, is what the query resumes from, and the next commit catches up."""
        changed = {tp: offset for tp, offset in end.items() if self._committed.get(tp) != offset}
        if not changed:
            return
        try:
            self._offsets().commit(changed)
        except OdradekError as e:
            logger.warning("commitToGroup: committing to group %r failed: %s", self.options.group_id, e)
            return
        self._committed.update(changed)

    def earliest(self, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        return self._offsets().beginning_offsets(partitions)

    def latest(self, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        """The high watermarks: a range never reaches past what is committed."""
        return self._offsets().end_offsets(partitions)

    def close(self) -> None:
        for client in (self._admin, self._consumer):
            if client is not None:
                client.close()
        self._admin = self._consumer = None

    def resolve(self, spec, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        """An offsets option ("earliest", "latest" or a map with -2/-1) as concrete offsets."""
        if spec == "earliest":
            return self.earliest(partitions)
        if spec == "latest":
            return self.latest(partitions)
        earliest, latest = self.earliest(partitions), self.latest(partitions)
        chosen = {}
        for tp in partitions:
            offset = spec.get(tp, -1)
            chosen[tp] = earliest[tp] if offset == -2 else latest[tp] if offset == -1 else offset
        return chosen

    def ranges(self, start: Mapping[TopicPartition, int], end: Mapping[TopicPartition, int]) -> list[RangePartition]:
        """The input partitions from ``start`` to ``end``, after the data-loss check (failOnDataLoss)."""
        earliest = self.earliest(list(end))
        gone = {tp: offset for tp, offset in start.items() if tp not in end}  # deleted since the last batch
        losses = data_loss({**gone, **{tp: start.get(tp, earliest[tp]) for tp in end}}, earliest)
        if losses:
            message = "; ".join(loss.message for loss in losses)
            if self.options.fail_on_data_loss:
                raise RuntimeError(f"failOnDataLoss: {message}")
            logger.warning("skipping lost offsets: %s", message)
        begin = {tp: max(start.get(tp, earliest[tp]), earliest[tp]) for tp in end}
        planned, _ = plan_ranges(begin, dict(end), self.options.min_partitions, None)
        o = self.options
        config = o.consumer_config("executor", **{"auto.offset.reset": "none"})
        config.setdefault("max.poll.records", READ_BATCH_ROWS)
        return [RangePartition(config, r, o.include_headers, o.fail_on_data_loss, self.decodings) for r in planned]


class BatchReader(DataSourceReader):
    def __init__(self, options: SourceOptions, decodings: Decodings = (None, None)) -> None:
        self.offsets = _Offsets(options, decodings)

    def partitions(self) -> list[RangePartition]:
        o = self.offsets
        try:
            tps = o.partitions()
            start = o.resolve(o.options.starting_offsets, tps)
            end = o.resolve(o.options.ending_offsets or "latest", tps)
            return o.ranges(start, end)
        finally:
            o.close()

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_range(_range(partition))


class StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batches from the checkpointed offsets to the high watermarks, capped by maxOffsetsPerTrigger.

    The cap goes through Spark's read-limit API (``getDefaultReadLimit`` / ``latestOffset(start, limit)``), so
    Spark can also lift it, as it does for the last batch of a query stopping. With ``availableNow`` the target is
    fixed when the query starts: later records, and partitions created later, wait for the next run.
    """

    def __init__(self, options: SourceOptions, decodings: Decodings = (None, None)) -> None:
        self.offsets = _Offsets(options, decodings)
        self._target: dict[TopicPartition, int] | None = None
        self._latest: dict[TopicPartition, int] | None = None

    def initialOffset(self) -> dict:
        o = self.offsets
        return _to_json_map(o.resolve(o.options.starting_offsets, o.partitions()))

    def getDefaultReadLimit(self) -> ReadLimit:
        cap = self.offsets.options.max_offsets_per_trigger
        return ReadAllAvailable() if cap is None else ReadMaxRows(cap)

    def prepareForTriggerAvailableNow(self) -> None:
        o = self.offsets
        self._target = o.latest(o.partitions())

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        o = self.offsets
        if o.options.commit_to_group:
            # Spark asks for the next batch only once the previous one is done, and calls commit() for a batch
            # only when it plans the next one with data: committing ``start`` here is what makes the last batch
            # of a run, or of a quiet stretch, show up in the group promptly.
            o.commit(_from_json_map(start))
        tps = o.partitions()
        if self._target is not None:
            tps = [tp for tp in tps if tp in self._target]
        latest = o.latest(tps)
        if self._target is not None:
            latest = {tp: min(offset, self._target[tp]) for tp, offset in latest.items()}
        self._latest = latest
        if not isinstance(limit, ReadMaxRows):
            return _to_json_map(latest)
        previous, earliest = _from_json_map(start), o.earliest(tps)
        begin = {tp: max(previous.get(tp, earliest[tp]), earliest[tp]) for tp in latest}
        # A partition whose log went below the checkpoint keeps its end (partitions() reports the data loss).
        return _to_json_map(cap_offsets(begin, latest, limit.max_rows))

    def reportLatestOffset(self) -> dict | None:
        return None if self._latest is None else _to_json_map(self._latest)

    def partitions(self, start: dict, end: dict) -> list[RangePartition]:
        return self.offsets.ranges(_from_json_map(start), _from_json_map(end))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_range(_range(partition))

    def commit(self, end: dict) -> None:
        """Offsets live in Spark's checkpoint; with commitToGroup they are also committed to the group (Spark
        calls this for a batch when it plans the next one)."""
        if self.offsets.options.commit_to_group:
            self.offsets.commit(_from_json_map(end))

    def stop(self) -> None:
        self.offsets.close()


def _to_json_map(offsets: Mapping[TopicPartition, int]) -> dict:
    return {"offsets": serialize_offsets_json(offsets)}


def _from_json_map(value: dict) -> dict[TopicPartition, int]:
    return parse_offsets_json(value["offsets"])


def _range(partition: InputPartition) -> RangePartition:
    """Spark hands back the partitions this source planned."""
    if not isinstance(partition, RangePartition):
        raise TypeError(f"not a partition planned by the odradek source: {partition!r}")
    return partition


def read_range(p: RangePartition) -> Iterator[pa.RecordBatch]:
    """The records of one range as Arrow batches of SCHEMA, read from the partition leader.

    Offsets deleted by retention between planning and reading fail the task with failOnDataLoss, and are
    skipped with a warning without it, as in Spark's Kafka source.
    """
    r = p.range
    tp = TopicPartition(r.topic, r.partition)
    columns = BatchColumns.of(*p.decodings)
    deadline = time.monotonic() + READ_TIMEOUT_S
    with Consumer(p.config) as consumer:
        consumer.assign([tp])
        consumer.seek(tp, r.start)
        position = r.start
        while position < r.end:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{r.topic}-{r.partition}: offsets {position}..{r.end} not read in time")
            try:
                records = consumer.poll(timeout_ms=500)
            except OffsetOutOfRangeError:
                skip_to = _lost_range(consumer, tp, position, r.end, p.fail_on_data_loss)
                if skip_to >= r.end:
                    return
                consumer.seek(tp, skip_to)
                position = skip_to
                continue
            if records and records[-1].offset >= r.end:
                records = [rec for rec in records if rec.offset < r.end]
            if records:
                position = records[-1].offset + 1
                yield to_record_batch(records, p.include_headers, columns)
            else:  # nothing returned, yet the position may have moved past a gap (compaction, control records)
                position = max(position, consumer.position(tp))


def _lost_range(consumer: Consumer, tp: TopicPartition, position: int, end: int, fail: bool) -> int:
    """Where reading resumes after ``position`` turned out of range (retention deleted it, or the log was
    truncated below it); raises instead with failOnDataLoss."""
    earliest = consumer.beginning_offsets([tp])[tp]
    if position < earliest:
        message = DataLoss(tp.topic, tp.partition, position, earliest).message
        resume = earliest
    else:
        message = f"offsets {position}..{end} of {tp.topic}-{tp.partition} are no longer in the log (truncated)"
        resume = end
    if fail:
        raise RuntimeError(f"failOnDataLoss: {message}")
    logger.warning("skipping lost offsets: %s", message)
    return resume


def register(spark) -> None:
    """Make ``format("odradek")`` available in this Spark session."""
    spark.dataSource.register(OdradekDataSource)

"""``df.write`` / ``df.writeStream`` with ``format("odradek")``: Spark's Kafka sink, on the odradek producer.

Each task opens one producer (acks=all, idempotence on by default), sends its rows, flushes, and succeeds only if
every record was acknowledged; otherwise it raises, so Spark retries the task or fails the job.

Delivery guarantee: **at-least-once**. A task that succeeded has had every row acknowledged by all in-sync
replicas. Rows are not written in a transaction: a record is readable as soon as it is committed, and nothing is
taken back when a task, job or micro-batch fails. A retried task attempt, a speculative duplicate attempt, or a
micro-batch that is run again after a restart (its commit never reached the checkpoint) sends its rows again, so
the log can hold a row more than once. Idempotence removes duplicates only within one producer session, that is
one task attempt (the producer's own retries after a timeout or a leader change); it cannot recognise a row a
previous attempt sent. With idempotence on, rows a task attempt sends to one partition keep the task's order.
Readers that need each row once must de-duplicate, for example on a unique key or header.

With ``transactional.id.prefix`` the guarantee is **exactly once** for ``read_committed`` readers: each task writes
its rows in a transaction that also records which write it was, and an attempt finding its write already committed
writes nothing (``spark_connector/transactional_sink.py``).
"""

from __future__ import annotations

import itertools
import logging
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from odradek.client import Consumer, Producer
from odradek.client.errors import OdradekError
from odradek.client.producer.producer import DeliveryFuture
from odradek.client.structs import OffsetAndMetadata
from odradek.spark_connector.options import OptionError
from odradek.spark_connector.sink_options import Columns, SinkOptions
from odradek.spark_connector.transactional_sink import MARKER_PARTITION, Marker, streaming_marker, write_once

__all__ = ["BatchWriter", "SinkCommitMessage", "SinkWriteError", "StreamWriter", "batch_writer", "stream_writer"]

logger = logging.getLogger(__name__)

CHECK_EVERY = 8192
"""Rows between looks at the delivery futures: often enough that a failure stops a task early and delivered
batches are released, rarely enough that looking costs nothing per row."""


class SinkWriteError(RuntimeError):
    """A task could not write its rows: a row was invalid or a record was not acknowledged."""


@dataclass
class SinkCommitMessage(WriterCommitMessage):
    """What one task wrote: every one of ``records`` was acknowledged by all in-sync replicas (and committed, in
    transactional mode). ``skipped``: transactional mode found this write committed by an earlier attempt."""

    records: int
    seconds: float
    skipped: bool = False


def batch_writer(options: Mapping[str, str], schema: StructType, overwrite: bool) -> BatchWriter:
    """``df.write``: Spark's Python data sources accept only mode append and overwrite; a log is only appended to."""
    if overwrite:
        raise OptionError("mode", "overwrite is not supported: records are appended to a log; use mode('append')")
    sink = SinkOptions.parse(options)
    # A job's id, drawn once on the driver: its task retries and speculative attempts share it, a new job does not.
    return BatchWriter(sink, Columns.of(schema, sink.topic), f"job-{uuid.uuid4()}")


def stream_writer(options: Mapping[str, str], schema: StructType, overwrite: bool) -> StreamWriter:
    """``df.writeStream``: ``overwrite`` (complete output mode) appends the whole result table at every trigger,
    as Spark's Kafka sink does."""
    sink = SinkOptions.parse(options)
    return StreamWriter(sink, Columns.of(schema, sink.topic))


class BatchWriter(DataSourceArrowWriter):
    """Tasks get Arrow record batches: columns become Python lists in one C call each, where Rows would cost
    Spark a conversion per value."""

    def __init__(self, options: SinkOptions, columns: Columns, job: str = "") -> None:
        self.options = options
        self.columns = columns
        self.job = job

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommitMessage:
        return write_task(self.options, self.columns, arrow_rows(iterator, self.columns), lambda: Marker(self.job, 0))

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        logger.info("odradek sink: job wrote %s", _summary(messages))

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        logger.warning("odradek sink: job aborted; %s", _aborted(messages, self.options))


class StreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, options: SinkOptions, columns: Columns) -> None:
        self.options = options
        self.columns = columns

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommitMessage:
        return write_task(self.options, self.columns, arrow_rows(iterator, self.columns), _micro_batch_marker)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        logger.info("odradek sink: micro-batch %d wrote %s", batchId, _summary(messages))

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        logger.warning("odradek sink: micro-batch %d aborted; %s", batchId, _aborted(messages, self.options))


def arrow_rows(batches: Iterable[pa.RecordBatch], columns: Columns) -> Iterator[tuple]:
    """The rows of Arrow record batches as tuples in the input's column order (what send_rows reads by
    position); headers become (key, value) pairs."""
    for batch in batches:
        lists = [batch.column(i).to_pylist() for i in range(batch.num_columns)]
        if columns.headers >= 0:
            lists[columns.headers] = [
                [(h["key"], h["value"]) for h in hs] if hs else None for hs in lists[columns.headers]
            ]
        yield from zip(*lists)


def write_task(
    options: SinkOptions, columns: Columns, rows: Iterable[tuple], marker: Callable[[], Marker]
) -> SinkCommitMessage:
    """One task: send every row with one producer, then wait until each is acknowledged or raise. In
    transactional mode, in one transaction with the ``marker`` of this write, unless it was committed already."""
    start = time.monotonic()
    rows = iter(rows)
    first = next(rows, None)
    if first is None:  # no producer for an empty input partition: after a shuffle, most may be empty
        return SinkCommitMessage(0, 0.0)
    rows = itertools.chain((first,), rows)
    if options.transactional_id_prefix is not None:
        return _transactional_task(options, columns, rows, marker(), start)
    producer = Producer(options.producer_config())
    failed = True
    try:
        records = send_rows(producer, columns, options.topic, rows)
        failed = False
    finally:
        # After a failure, stop at once: whatever is still queued will be sent again by the task's retry.
        producer.close(0 if failed else None)
    return SinkCommitMessage(records, time.monotonic() - start)


def _transactional_task(
    options: SinkOptions, columns: Columns, rows: Iterable[tuple], marker: Marker, start: float
) -> SinkCommitMessage:
    context = TaskContext.get()
    if context is None:
        raise SinkWriteError("the transactional mode runs in Spark tasks only: it needs the task's partition id")
    config = options.producer_config(context.partitionId())
    group = config["transactional.id"]

    def read_marker() -> OffsetAndMetadata | None:
        reader = {"bootstrap.servers": config["bootstrap.servers"], "group.id": group, "enable.auto.commit": "false"}
        with Consumer(reader) as consumer:
            return consumer.committed([MARKER_PARTITION])[MARKER_PARTITION]

    producer = Producer(config)
    failed = True
    try:
        records = write_once(
            producer, group, marker, read_marker, lambda: send_rows(producer, columns, options.topic, rows)
        )
        failed = False
    finally:
        producer.close(0 if failed else None)  # the transaction was aborted (or left to the next attempt to abort)
    if records is None:
        return SinkCommitMessage(0, time.monotonic() - start, skipped=True)
    return SinkCommitMessage(records, time.monotonic() - start)


def _micro_batch_marker() -> Marker:
    context = TaskContext.get()
    if context is None:
        raise SinkWriteError("the transactional mode runs in Spark tasks only: it needs the micro-batch id")
    return streaming_marker(context.getLocalProperty)


def send_rows(producer: Producer, columns: Columns, topic: str | None, rows: Iterable[tuple]) -> int:
    """Send the rows (tuples in the input's column order), flush, and return how many there were; raise
    SinkWriteError for an invalid row or a record that was not acknowledged. A row costs one ``send`` and one
    append to the list of delivery futures."""
    send = producer.send
    vi, ki, ti, pi, hi = columns.value, columns.key, columns.topic, columns.partition, columns.headers
    key = partition = headers = None
    pending: list[DeliveryFuture] = []
    check_at = CHECK_EVERY
    n = 0
    for n, row in enumerate(rows, 1):
        value = row[vi]
        if ki >= 0:
            key = row[ki]
        if ti >= 0:
            topic = row[ti]
        if topic is None:
            raise SinkWriteError(f"{_row(n)}: column 'topic' is null and no topic option is set")
        if pi >= 0:
            partition = row[pi]
        if hi >= 0:
            headers = row[hi]
        try:
            pending.append(send(topic, value, key, partition, headers))
        except (TypeError, ValueError, OdradekError) as e:
            raise SinkWriteError(f"{_row(n)} (topic {topic!r}): {e}") from e
        if n >= check_at:
            pending = _undelivered(pending)
            check_at = n + max(CHECK_EVERY, len(pending))
    producer.flush()
    _undelivered(pending)
    return n


def _undelivered(futures: list[DeliveryFuture]) -> list[DeliveryFuture]:
    """The futures not done yet; raise SinkWriteError for the first that failed. Dropping the done ones lets the
    producer's delivered batches, and the rows they hold, be freed while the task goes on."""
    waiting = []
    for f in futures:
        if f.done():
            error = f.exception()
            if error is not None:
                raise SinkWriteError(f"{_row(None)}: a record was not acknowledged: {error}") from error
        else:
            waiting.append(f)
    return waiting


def _row(n: int | None) -> str:
    """Where in the job a problem is: the input partition of this task and, if known, the row within it."""
    context = TaskContext.get()
    where = f"task for input partition {context.partitionId()}" if context is not None else "task"
    return where if n is None else f"row {n} of {where}"


def _summary(messages: list[WriterCommitMessage | None]) -> str:
    done = [m for m in messages if isinstance(m, SinkCommitMessage)]
    slowest = max((m.seconds for m in done), default=0.0)
    skipped = sum(m.skipped for m in done)
    already = f"; {skipped} tasks found their rows committed by an earlier attempt" if skipped else ""
    return f"{sum(m.records for m in done)} records in {len(done)} tasks (slowest {slowest:.1f} s){already}"


def _aborted(messages: list[WriterCommitMessage | None], options: SinkOptions) -> str:
    failed = sum(m is None for m in messages)
    if options.transactional_id_prefix is not None:
        return (
            f"{failed} of {len(messages)} tasks failed. Tasks that finished committed {_summary(messages)}; failed "
            "tasks committed nothing (a re-run of the micro-batch writes only what was not committed)"
        )
    return (
        f"{failed} of {len(messages)} tasks failed. Tasks that finished wrote {_summary(messages)}, which stay in "
        "the log; failed tasks may have written part of their rows (at-least-once: a rerun sends them again)"
    )

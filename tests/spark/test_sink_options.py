"""The sink's options and input columns (Spark's Kafka sink rules, every error naming its option or column) and a
task's send loop against a stand-in producer: no Spark session, no cluster."""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from concurrent.futures import Future

import pytest

pytest.importorskip("pyspark")

import pyarrow as pa
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
)

from odradek.client.errors import RecordTooLargeError, UnknownTopicOrPartitionError
from odradek.spark_connector.options import OptionError
from odradek.spark_connector.sink_options import ColumnError, Columns, SinkOptions
from odradek.spark_connector.writer import (
    CHECK_EVERY,
    SinkWriteError,
    arrow_rows,
    batch_writer,
    send_rows,
    stream_writer,
)

SERVERS = {"bootstrap.servers": "h1:9092,h2:9092"}
B, S, INT = BinaryType(), StringType(), IntegerType()
HEADERS = ArrayType(StructType([StructField("key", S), StructField("value", B)]))


def schema(*columns: tuple[str, DataType]) -> StructType:
    return StructType([StructField(name, t) for name, t in columns])


# ---- options ----


def test_defaults_send_with_acks_all_and_the_producers_defaults() -> None:
    o = SinkOptions.parse(SERVERS)
    assert (o.bootstrap_servers, o.topic, o.producer) == (("h1:9092", "h2:9092"), None, ())
    assert o.producer_config() == {"bootstrap.servers": "h1:9092,h2:9092", "acks": "all"}


def test_kafka_prefixed_options_become_producer_config_and_others_are_ignored() -> None:
    o = SinkOptions.parse(
        {
            "kafka.bootstrap.servers": "k:1",
            "topic": "t",
            "Kafka.Linger.MS": "20",
            "kafka.compression.type": "zstd",
            "kafka.batch.size": "65536",
            "kafka.acks": "-1",
            "checkpointLocation": "/tmp/c",  # a streaming query passes it to the sink
        }
    )
    assert (o.bootstrap_servers, o.topic) == (("k:1",), "t")
    assert o.producer_config() == {
        "bootstrap.servers": "k:1",
        "batch.size": "65536",
        "compression.type": "zstd",
        "linger.ms": "20",
        "acks": "all",
    }


def test_options_survive_pickling_to_executors() -> None:
    o = SinkOptions.parse({**SERVERS, "topic": "t", "kafka.linger.ms": "1"})
    assert pickle.loads(pickle.dumps(o)) == o


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({}, "bootstrap.servers"),
        ({"bootstrap.servers": "a:1", "kafka.bootstrap.servers": "b:1"}, "bootstrap.servers"),
        ({"bootstrap.servers": "nope:notaport"}, "bootstrap.servers"),
        ({**SERVERS, "topic": " "}, "topic"),
        ({**SERVERS, "kafka.acks": "1"}, "kafka.acks"),
        ({**SERVERS, "kafka.acks": "0"}, "kafka.acks"),
        ({**SERVERS, "kafka.linger.ms": "soon"}, "kafka.linger.ms"),
        ({**SERVERS, "kafka.compression.type": "brotli"}, "kafka.compression.type"),
        ({**SERVERS, "kafka.lingr.ms": "5"}, "kafka.lingr.ms"),
        ({**SERVERS, "kafka.key.serializer": "x"}, "kafka.key.serializer"),
        (
            {**SERVERS, "kafka.delivery.timeout.ms": "1000", "kafka.linger.ms": "5"},
            "kafka.delivery.timeout.ms/kafka.linger.ms",
        ),
        (
            {**SERVERS, "kafka.enable.idempotence": "true", "kafka.retries": "0"},
            "kafka.enable.idempotence/kafka.retries",
        ),
    ],
)
def test_bad_options_name_the_option(options: dict[str, str], named: str) -> None:
    with pytest.raises(OptionError) as e:
        SinkOptions.parse(options)
    assert str(e.value).startswith(named + ":")


def test_acks_other_than_all_says_why() -> None:
    with pytest.raises(OptionError, match="at-least-once"):
        SinkOptions.parse({**SERVERS, "kafka.acks": "1"})


def test_related_producer_options_are_checked_together() -> None:
    o = SinkOptions.parse({**SERVERS, "kafka.delivery.timeout.ms": "10000", "kafka.request.timeout.ms": "5000"})
    assert dict(o.producer) == {"delivery.timeout.ms": "10000", "request.timeout.ms": "5000"}


def test_overwrite_is_refused_for_batch_writes_only() -> None:
    options = {**SERVERS, "topic": "t"}
    with pytest.raises(OptionError, match=r"^mode: overwrite"):
        batch_writer(options, schema(("value", B)), overwrite=True)
    assert stream_writer(options, schema(("value", B)), overwrite=True).columns == Columns(value=0)


# ---- columns ----


def test_all_columns_by_position() -> None:
    s = schema(("headers", HEADERS), ("partition", INT), ("topic", S), ("key", S), ("value", B))
    assert Columns.of(s, None) == Columns(value=4, key=3, topic=2, partition=1, headers=0)


def test_topic_option_overrides_the_topic_column() -> None:
    assert Columns.of(schema(("topic", S), ("value", S)), "t") == Columns(value=1, topic=-1)


def test_header_nullability_does_not_matter() -> None:
    header = StructType([StructField("key", S, False), StructField("value", B, False)])
    s = StructType([StructField("value", B), StructField("headers", ArrayType(header, False), False)])
    assert Columns.of(s, "t").headers == 1


@pytest.mark.parametrize(
    ("columns", "topic", "error", "starts"),
    [
        ([("key", B)], "t", ColumnError, "column 'value': is required"),
        ([("value", B)], None, OptionError, "topic: no topic option and no 'topic' column"),
        ([("value", INT)], "t", ColumnError, "column 'value': must be binary or string, got int"),
        ([("value", B), ("key", ArrayType(INT))], "t", ColumnError, "column 'key': must be binary or string"),
        ([("value", B), ("topic", B)], None, ColumnError, "column 'topic': must be string, got binary"),
        ([("value", B), ("partition", LongType())], "t", ColumnError, "column 'partition': must be int, got bigint"),
        (
            [("value", B), ("headers", ArrayType(StructType([StructField("key", S), StructField("value", S)])))],
            "t",
            ColumnError,
            "column 'headers': must be array<struct<key: string, value: binary>>, got array<struct<key:string,",
        ),
        ([("value", B), ("headers", MapType(S, B))], "t", ColumnError, "column 'headers': must be array<struct"),
        ([("value", B), ("offset", LongType())], "t", ColumnError, "column 'offset': is not a column the sink writes"),
        ([("Value", B)], "t", ColumnError, "column 'Value': is not a column the sink writes (did you mean 'value'?"),
        ([("value", B), ("value", S)], "t", ColumnError, "column 'value': appears more than once"),
    ],
)
def test_bad_columns_name_the_column(
    columns: list[tuple[str, DataType]], topic: str | None, error: type[Exception], starts: str
) -> None:
    with pytest.raises(error) as e:
        Columns.of(schema(*columns), topic)
    assert str(e.value).startswith(starts)


# ---- a task's send loop ----


class FakeProducer:
    """Records sends; each send's future is completed at once, with ``fail`` as the error of the listed sends."""

    def __init__(self, fail: dict[int, Exception] | None = None, raise_on: dict[int, Exception] | None = None):
        self.sent: list[tuple] = []
        self.fail = fail or {}
        self.raise_on = raise_on or {}
        self.flushed = False

    def send(self, topic, value, key=None, partition=None, headers=None) -> Future:
        i = len(self.sent)
        if i in self.raise_on:
            raise self.raise_on[i]
        self.sent.append((topic, value, key, partition, headers))
        f: Future = Future()
        if i in self.fail:
            f.set_exception(self.fail[i])
        else:
            f.set_result(None)
        return f

    def flush(self) -> None:
        self.flushed = True


def rows(n: int) -> Iterator[tuple]:
    return ((b"v%d" % i,) for i in range(n))


def test_arrow_batches_are_sent_by_position() -> None:
    header = pa.struct([("key", pa.string()), ("value", pa.binary())])
    batch = pa.RecordBatch.from_arrays(
        [
            pa.array([[{"key": "h", "value": b"x"}, {"key": "g", "value": None}], None, []], pa.list_(header)),
            pa.array([b"v0", None, b"text"], pa.binary()),
            pa.array([b"k0", None, b"key"], pa.binary()),
            pa.array([2, None, None], pa.int32()),
            pa.array(["a", "b", "a"], pa.string()),
        ],
        names=["headers", "value", "key", "partition", "topic"],
    )
    producer = FakeProducer()
    columns = Columns(value=1, key=2, topic=4, partition=3, headers=0)
    assert send_rows(producer, columns, None, arrow_rows([batch, batch.slice(0, 1)], columns)) == 4
    assert producer.flushed
    assert producer.sent == [
        ("a", b"v0", b"k0", 2, [("h", b"x"), ("g", None)]),
        ("b", None, None, None, None),
        ("a", b"text", b"key", None, None),
        ("a", b"v0", b"k0", 2, [("h", b"x"), ("g", None)]),
    ]


def test_topic_option_is_used_for_every_row() -> None:
    producer = FakeProducer()
    assert send_rows(producer, Columns(value=0), "t", rows(3)) == 3
    assert [s[0] for s in producer.sent] == ["t", "t", "t"]


def test_a_null_topic_names_the_row_and_column() -> None:
    data = [(b"v", "t"), (b"v", None)]
    with pytest.raises(SinkWriteError, match=r"^row 2 of task: column 'topic' is null and no topic option is set"):
        send_rows(FakeProducer(), Columns(value=0, topic=1), None, iter(data))


def test_a_record_the_producer_refuses_names_the_row() -> None:
    producer = FakeProducer(raise_on={4: UnknownTopicOrPartitionError("partition 9 of t: it has 3 partitions")})
    with pytest.raises(SinkWriteError, match=r"^row 5 of task \(topic 't'\): partition 9 of t"):
        send_rows(producer, Columns(value=0), "t", rows(10))


@pytest.mark.parametrize(
    ("failed", "total", "sent"),
    [
        (0, CHECK_EVERY * 3, CHECK_EVERY),  # found at the first periodic check: later rows are not sent
        (CHECK_EVERY + 5, CHECK_EVERY * 3, CHECK_EVERY * 2),  # at the next one
        (CHECK_EVERY + 5, CHECK_EVERY + 10, CHECK_EVERY + 10),  # after the last row, by the check after the flush
    ],
)
def test_an_unacknowledged_record_fails_the_task(failed: int, total: int, sent: int) -> None:
    producer = FakeProducer(fail={failed: RecordTooLargeError("produce to t-0: MESSAGE_TOO_LARGE")})
    with pytest.raises(SinkWriteError, match="a record was not acknowledged: produce to t-0: MESSAGE_TOO_LARGE"):
        send_rows(producer, Columns(value=0), "t", rows(total))
    assert len(producer.sent) == sent


def test_an_empty_task_sends_nothing() -> None:
    assert send_rows(FakeProducer(), Columns(value=0), "t", iter([])) == 0

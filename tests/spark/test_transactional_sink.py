"""The sink's transactional mode without Spark or a cluster: the options that turn it on or conflict with it, the
marker a task commits, and the order of a task attempt's calls against a stand-in producer (fence first, then
read the marker, then skip or write everything in one transaction)."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("pyspark")

from pyspark.sql.types import BinaryType, StructField, StructType

from odradek.client.errors import ProducerFencedError
from odradek.client.structs import GroupMetadata, OffsetAndMetadata, TopicPartition
from odradek.spark_connector.options import OptionError
from odradek.spark_connector.sink_options import SinkOptions
from odradek.spark_connector.transactional_sink import (
    MARKER_PARTITION,
    Marker,
    MarkerError,
    already_written,
    streaming_marker,
    write_once,
)
from odradek.spark_connector.writer import SinkCommitMessage, _summary, batch_writer

SERVERS = {"bootstrap.servers": "h1:9092", "topic": "t"}

# ---- options ----


def test_the_prefix_gives_each_task_its_own_transactional_id() -> None:
    o = SinkOptions.parse({**SERVERS, "transactional.id.prefix": "orders", "kafka.transaction.timeout.ms": "30000"})
    assert o.transactional_id_prefix == "orders"
    assert o.producer_config(3) == {
        "bootstrap.servers": "h1:9092",
        "transaction.timeout.ms": "30000",
        "acks": "all",
        "transactional.id": "orders-3",
    }
    with pytest.raises(ValueError, match="partition id"):
        o.producer_config()


def test_without_the_prefix_no_transactional_id_is_set() -> None:
    o = SinkOptions.parse(SERVERS)
    assert o.transactional_id_prefix is None
    assert "transactional.id" not in o.producer_config(3)


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"transactional.id.prefix": ""}, "transactional.id.prefix: must be a non-empty name"),
        ({"transactional.id.prefix": " p"}, "transactional.id.prefix: must be a non-empty name"),
        ({"kafka.transactional.id": "x"}, "kafka.transactional.id: one transactional id cannot serve every task"),
        (
            {"transactional.id.prefix": "p", "kafka.transactional.id": "x"},
            "kafka.transactional.id: one transactional id",
        ),
        ({"kafka.transaction.timeout.ms": "1000"}, "kafka.transaction.timeout.ms: needs transactional.id.prefix"),
        ({"transactional.id.prefix": "p", "kafka.acks": "1"}, "kafka.acks: must be all"),
        ({"transactional.id.prefix": "p", "kafka.enable.idempotence": "false"}, "kafka.enable.idempotence: must be"),
        ({"transactional.id.prefix": "p", "kafka.transaction.timeout.ms": "0"}, "kafka.transaction.timeout.ms"),
        (
            {"transactional.id.prefix": "p", "kafka.max.in.flight.requests.per.connection": "6"},
            "kafka.max.in.flight.requests.per.connection",
        ),
    ],
)
def test_combinations_that_cannot_work_are_refused_naming_the_option(options: dict[str, str], named: str) -> None:
    with pytest.raises(OptionError, match=named):
        SinkOptions.parse({**SERVERS, **options})


def test_each_batch_job_gets_its_own_run_id() -> None:
    schema = StructType([StructField("value", BinaryType())])
    a, b = (batch_writer({**SERVERS, "transactional.id.prefix": "p"}, schema, False) for _ in range(2))
    assert a.job.startswith("job-") and a.job != b.job


# ---- the marker ----


def test_the_marker_round_trips_through_an_offset() -> None:
    m = Marker("query-1", 7)
    offset = m.to_offset()
    assert offset.offset == 8  # batch + 1: how far the task's writes got, in `odradek group describe`
    assert Marker.from_offset("g", offset) == m
    assert Marker.from_offset("g", None) is None


@pytest.mark.parametrize("metadata", ["", "x", '{"run": "q", "batch": 1}', '{"format": "odradek-spark-sink/1"}'])
def test_offsets_the_sink_did_not_write_are_an_error(metadata: str) -> None:
    with pytest.raises(MarkerError, match="choose another"):
        Marker.from_offset("g", OffsetAndMetadata(3, metadata))


@pytest.mark.parametrize(
    ("last", "written"),
    [
        (None, False),  # nothing committed for this id yet
        (Marker("q", 4), False),  # the previous batch: this one is new
        (Marker("q", 5), True),  # this batch, committed by an earlier attempt or run
        (Marker("q", 6), True),
        (Marker("other-query", 9), False),  # another checkpoint used the prefix: says nothing about this query
    ],
)
def test_a_write_is_skipped_only_if_this_run_committed_this_batch(last: Marker | None, written: bool) -> None:
    assert already_written(last, Marker("q", 5)) is written


def test_a_micro_batch_task_knows_its_query_and_batch_from_the_local_properties() -> None:
    props = {"sql.streaming.queryId": "q-1", "streaming.sql.batchId": "12"}
    assert streaming_marker(props.get) == Marker("q-1", 12)
    with pytest.raises(MarkerError, match="cannot tell a re-run batch"):
        streaming_marker({}.get)


# ---- a task attempt ----


class FakeProducer:
    def __init__(self, fail_commit: Exception | None = None) -> None:
        self.calls: list[Any] = []
        self.fail_commit = fail_commit

    def init_transactions(self, timeout: float | None = None) -> None:
        self.calls.append("init")

    def begin_transaction(self) -> None:
        self.calls.append("begin")

    def send_offsets_to_transaction(
        self, offsets: dict[TopicPartition, OffsetAndMetadata | int], group_metadata: GroupMetadata, timeout=None
    ) -> None:
        self.calls.append(("offsets", offsets, group_metadata))

    def commit_transaction(self, timeout: float | None = None) -> None:
        self.calls.append("commit")
        if self.fail_commit is not None:
            raise self.fail_commit

    def abort_transaction(self, timeout: float | None = None) -> None:
        self.calls.append("abort")


def attempt(producer: FakeProducer, committed: OffsetAndMetadata | None, marker: Marker) -> int | None:
    def read() -> OffsetAndMetadata | None:
        producer.calls.append("read")
        return committed

    def send() -> int:
        producer.calls.append("send")
        return 10

    return write_once(producer, "p-0", marker, read, send)


def test_a_new_write_sends_rows_and_marker_in_one_transaction_after_fencing_and_reading() -> None:
    p = FakeProducer()
    assert attempt(p, Marker("q", 2).to_offset(), Marker("q", 3)) == 10
    assert p.calls == [
        "init",  # fence earlier attempts and complete their transactions before reading their marker
        "read",
        "begin",
        "send",
        ("offsets", {MARKER_PARTITION: Marker("q", 3).to_offset()}, GroupMetadata("p-0", -1, "", None)),
        "commit",
    ]


def test_a_write_an_earlier_attempt_committed_is_not_written_again() -> None:
    p = FakeProducer()
    assert attempt(p, Marker("q", 3).to_offset(), Marker("q", 3)) is None
    assert p.calls == ["init", "read"]


def test_a_fenced_or_failed_commit_aborts_and_fails_the_task() -> None:
    p = FakeProducer(fail_commit=ProducerFencedError("another attempt took the id"))
    with pytest.raises(ProducerFencedError):
        attempt(p, None, Marker("q", 0))
    assert p.calls[-2:] == ["commit", "abort"]


def test_the_driver_log_counts_skipped_tasks() -> None:
    messages = [SinkCommitMessage(5, 1.0), SinkCommitMessage(0, 0.1, skipped=True), None]
    assert _summary(messages) == (
        "5 records in 2 tasks (slowest 1.0 s); 1 tasks found their rows committed by an earlier attempt"
    )

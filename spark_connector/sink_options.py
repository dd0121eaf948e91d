"""Options and input columns of the ``odradek`` Spark sink, validated once on the driver when a query starts.

The rules are those of Spark's Kafka sink, so a writer can switch between ``format("kafka")`` and
``format("odradek")`` by changing the format: ``topic`` overrides a ``topic`` column, and producer settings are
passed with Spark's ``kafka.`` prefix under their Kafka names. Three things are stricter than Spark's sink, where
they pass silently: ``acks`` is always ``all`` (the sink's at-least-once guarantee rests on it), a ``kafka.`` option
the producer does not have is an error (Kafka's client only logs a warning), and so is a column the sink does not
write (Spark drops it). Every error names its option or column, because Spark shows the message and nothing else.

``transactional.id.prefix`` (not in Spark's Kafka sink, which has no transactional mode) makes every task write in a
transaction of its own id ``<prefix>-<partition>`` (``spark_connector/transactional_sink.py``). One
``kafka.transactional.id`` cannot serve every task (each would fence the others), so that option is refused.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass

from pyspark.sql.types import ArrayType, BinaryType, DataType, IntegerType, StringType, StructType

from odradek.client.config import ProducerConfig
from odradek.client.errors import ConfigError
from odradek.spark_connector.options import OptionError, _bootstrap

__all__ = ["COLUMNS", "TXN_PREFIX_OPTION", "ColumnError", "Columns", "SinkOptions", "transactional_id"]

PRODUCER_PREFIX = "kafka."
TXN_PREFIX_OPTION = "transactional.id.prefix"

_ACKS_ALL = ("all", "-1")
_BINARY_OR_STRING = (BinaryType(), StringType())
COLUMNS: dict[str, str] = {
    "value": "binary or string",
    "key": "binary or string",
    "topic": "string",
    "partition": "int",
    "headers": "array<struct<key: string, value: binary>>",
}
"""The columns the sink writes, with the types it accepts (those of Spark's Kafka sink)."""


class ColumnError(ValueError):
    """An input column is missing, duplicated, unknown or of the wrong type; the message starts with its name."""

    def __init__(self, column: str, detail: str) -> None:
        super().__init__(f"column {column!r}: {detail}")
        self.column = column


@dataclass(frozen=True)
class SinkOptions:
    """The validated options; ``producer`` holds the ``kafka.`` options with the prefix removed, checked against
    odradek's producer configuration so a typo fails at query start instead of in every task."""

    bootstrap_servers: tuple[str, ...]
    topic: str | None = None
    producer: tuple[tuple[str, str], ...] = ()
    transactional_id_prefix: str | None = None
    """Set: each task writes its rows in one transaction as ``<prefix>-<partition id>`` (exactly once)."""

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> SinkOptions:
        """Validate Spark's option map; options that are neither the sink's nor ``kafka.`` ones are ignored, as
        Spark's are (a streaming query passes ``checkpointLocation`` here, for one)."""
        opts = {k.lower(): str(v) for k, v in options.items() if v is not None}
        servers = _bootstrap(opts.get("bootstrap.servers"), opts.get("kafka.bootstrap.servers"))

        topic = opts.get("topic")
        if topic is not None and not topic.strip():
            raise OptionError("topic", "is empty; leave it out to take each row's topic from the 'topic' column")

        producer = {
            k.removeprefix(PRODUCER_PREFIX): v
            for k, v in sorted(opts.items())
            if k.startswith(PRODUCER_PREFIX) and k != "kafka.bootstrap.servers"
        }
        acks = producer.pop("acks", None)
        if acks is not None and acks.strip().lower() not in _ACKS_ALL:
            raise OptionError(
                "kafka.acks",
                f"must be all (or -1), got {acks!r}: the sink only reports a row written once every in-sync "
                "replica has it, which its at-least-once guarantee (and a transaction's commit) depends on",
            )
        prefix = _transactional_prefix(opts.get(TXN_PREFIX_OPTION), producer)
        extra = {"transactional.id": transactional_id(prefix, 0)} if prefix is not None else {}
        _check_producer(servers, producer, extra)
        return cls(servers, topic, tuple(producer.items()), prefix)

    def producer_config(self, partition_id: int | None = None) -> dict[str, str]:
        """The config of a task's producer: acks=all always, idempotence on unless ``kafka.`` options say
        otherwise; in transactional mode the transactional id of the task's input partition ``partition_id``."""
        config = {"bootstrap.servers": ",".join(self.bootstrap_servers), **dict(self.producer), "acks": "all"}
        if self.transactional_id_prefix is not None:
            if partition_id is None:
                raise ValueError("a transactional sink's producer needs the task's partition id")
            config["transactional.id"] = transactional_id(self.transactional_id_prefix, partition_id)
        return config


def transactional_id(prefix: str, partition_id: int) -> str:
    """The transactional id of the task writing input partition ``partition_id``: the same for every attempt of
    that task, in every micro-batch and run of the query, so a new attempt fences the earlier ones."""
    return f"{prefix}-{partition_id}"


def _transactional_prefix(value: str | None, producer: dict[str, str]) -> str | None:
    """The validated ``transactional.id.prefix``, and the ``kafka.`` options that conflict with it (or need it)."""
    if "transactional.id" in producer:
        raise OptionError(
            "kafka.transactional.id",
            f"one transactional id cannot serve every task (each would fence the others); set {TXN_PREFIX_OPTION} "
            "instead: each task then uses <prefix>-<input partition>",
        )
    if value is None:
        if "transaction.timeout.ms" in producer:
            raise OptionError("kafka.transaction.timeout.ms", f"needs {TXN_PREFIX_OPTION} (the transactional mode)")
        return None
    if not value.strip() or value != value.strip():
        raise OptionError(TXN_PREFIX_OPTION, f"must be a non-empty name without surrounding spaces, got {value!r}")
    if producer.get("enable.idempotence", "").strip().lower() == "false":
        raise OptionError(
            "kafka.enable.idempotence", f"must be true with {TXN_PREFIX_OPTION}: transactions need idempotence"
        )
    return value


def _check_producer(servers: tuple[str, ...], producer: dict[str, str], extra: Mapping[str, str]) -> None:
    """Parse the producer options as a task will; the error names the options its message mentions (the key of
    a malformed or unknown one, or each of several that conflict)."""
    try:
        ProducerConfig.from_mapping({"bootstrap.servers": ",".join(servers), **producer, **extra, "acks": "all"})
    except ConfigError as e:
        named = [PRODUCER_PREFIX + k for k in producer if k in str(e)] or [PRODUCER_PREFIX + k for k in producer]
        raise OptionError("/".join(named), str(e)) from None


@dataclass(frozen=True)
class Columns:
    """Where each sink column is in the input rows, -1 where it is absent: a task reads rows by position.

    ``topic`` is -1 also when the ``topic`` option is set, since the option overrides the column (as in Spark).
    """

    value: int
    key: int = -1
    topic: int = -1
    partition: int = -1
    headers: int = -1

    @classmethod
    def of(cls, schema: StructType, topic_option: str | None) -> Columns:
        """Check the input schema against the sink's columns; raise ColumnError or OptionError naming the first
        problem."""
        positions: dict[str, int] = {}
        for i, field in enumerate(schema.fields):
            name = field.name
            if name not in COLUMNS:
                close = difflib.get_close_matches(name.lower(), list(COLUMNS), n=1)
                hint = f" (did you mean {close[0]!r}? names are case-sensitive)" if close else ""
                raise ColumnError(
                    name, f"is not a column the sink writes{hint}; select only {', '.join(COLUMNS)} before writing"
                )
            if name in positions:
                raise ColumnError(name, "appears more than once")
            if not _accepts(name, field.dataType):
                raise ColumnError(name, f"must be {COLUMNS[name]}, got {field.dataType.simpleString()}")
            positions[name] = i
        if "value" not in positions:
            given = ", ".join(schema.fieldNames()) or "none"
            raise ColumnError("value", f"is required (binary or string); the input's columns are: {given}")
        if topic_option is None and "topic" not in positions:
            raise OptionError(
                "topic", "no topic option and no 'topic' column: set .option('topic', ...) or add a string column"
            )
        return cls(
            value=positions["value"],
            key=positions.get("key", -1),
            topic=-1 if topic_option is not None else positions["topic"],
            partition=positions.get("partition", -1),
            headers=positions.get("headers", -1),
        )


def _accepts(name: str, t: DataType) -> bool:
    if name in ("value", "key"):
        return t in _BINARY_OR_STRING
    if name == "topic":
        return t == StringType()
    if name == "partition":
        return t == IntegerType()
    # headers: nullability of the array, the struct and its fields does not matter, names and types do.
    if not isinstance(t, ArrayType) or not isinstance(t.elementType, StructType):
        return False
    return [(f.name, f.dataType) for f in t.elementType.fields] == [("key", StringType()), ("value", BinaryType())]

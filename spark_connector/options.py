"""Options of the ``odradek`` Spark data source, parsed and validated once on the driver.

The names, defaults and rules are those of Spark's own Kafka source, so a query can switch between
``format("kafka")`` and ``format("odradek")`` by changing the format and the servers option only. Like Spark's,
option names are case-insensitive, ``kafka.``-prefixed options configure the consumers that read, and options
that are neither the source's nor Spark's are ignored (as Spark ignores them). Two things are stricter than Spark:
an option of Spark's Kafka source that this source does not implement is an error rather than ignored, and so are a
``kafka.`` option the consumer does not have and a ``schema.registry.`` option other than the source's. Every
error is an :class:`OptionError` whose message starts with the offending option's name, because Spark shows the
message and nothing else.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

from odradek.client.config import ConsumerConfig
from odradek.client.connection import parse_servers
from odradek.client.errors import ConfigError
from odradek.client.offsets import EARLIEST, LATEST
from odradek.client.schema_registry import TLS_OPTIONS, RegistryTlsError, registry_urls, tls_context
from odradek.client.structs import TopicPartition
from odradek.spark_connector.decoding import FORMATS, Registry
from odradek.spark_connector.protobuf import subject_version

__all__ = [
    "EARLIEST",
    "INTERNAL_PREFIX",
    "LATEST",
    "OffsetSpec",
    "OptionError",
    "SourceOptions",
    "parse_assign",
    "parse_offsets_json",
    "serialize_offsets_json",
    "topics_for",
]

INTERNAL_PREFIX = "__"  # topics the broker marks internal; pattern subscriptions skip them, as Kafka's do

OffsetSpec = Literal["earliest", "latest"] | Mapping[TopicPartition, int]
"""Where reading starts or ends: a whole-source keyword, or an offset per partition (-2 earliest, -1 latest)."""

_STRATEGIES = ("assign", "subscribe", "subscribePattern")
CONSUMER_PREFIX = "kafka."
DEFAULT_GROUP_ID_PREFIX = "spark-kafka-source"  # Spark's
_UNIMPLEMENTED = (
    "startingTimestamp",
    "startingOffsetsByTimestamp",
    "startingOffsetsByTimestampStrategy",
    "endingTimestamp",
    "endingOffsetsByTimestamp",
    "minOffsetsPerTrigger",
    "maxTriggerDelay",
    "maxRecordsPerPartition",
    "kafkaConsumer.pollTimeoutMs",
    "fetchOffset.numRetries",
    "fetchOffset.retryIntervalMs",
)
"""Options of Spark's Kafka source that this source does not implement: refused, never silently ignored."""
_SOURCE_OWNED = {
    "kafka.auto.offset.reset": "set startingOffsets instead; the source chooses where each range starts",
    "kafka.enable.auto.commit": (
        "the source keeps its offsets in Spark's checkpoint; commitToGroup=true commits each finished micro-batch"
    ),
    "kafka.key.deserializer": "keys are returned as binary; cast them in the query",
    "kafka.value.deserializer": "values are returned as binary; cast them in the query",
    "kafka.interceptor.classes": "the source does not run consumer interceptors",
}
"""``kafka.`` options Spark's Kafka source refuses too, with why."""
_INT = re.compile(r"[+-]?\d+")
REGISTRY_PREFIX = "schema.registry."
REGISTRY_OPTIONS = ("schema.registry.url", "schema.registry.basic.auth.user.info", *TLS_OPTIONS)
"""The source's registry options, named as the odradek client's (and Confluent's) settings."""


class OptionError(ValueError):
    """A source option is missing, malformed, or conflicts with another; the message starts with its name."""

    def __init__(self, option: str, detail: str) -> None:
        super().__init__(f"{option}: {detail}")
        self.option = option


@dataclass(frozen=True)
class DecodeOptions:
    """``keyFormat``/``valueFormat``: ``binary`` as Spark's source, or ``avro``/``json``/``protobuf`` decoded through
    the schema registry into a column of the schema's type (decoding.py); ``keySchema``/``valueSchema`` the reader
    schema (Avro or JSON Schema text; for Protobuf a registered ``subject`` or ``subject:version``; None: the latest
    of ``topic``'s subject); ``schema.registry.*`` how to reach the registry. Parsed on their own too: Spark asks a
    source for its schema before it says whether the query is a batch or a stream, whose other options differ."""

    key_format: str = "binary"
    value_format: str = "binary"
    key_schema: str | None = None
    value_schema: str | None = None
    registry: Registry | None = None
    topic: str | None = None  # the one topic read, if the source reads one

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> DecodeOptions:
        opts = {k.lower(): None if v is None else str(v) for k, v in options.items()}
        formats = {side: _format(f"{side}Format", opts.get(f"{side}format")) for side in ("key", "value")}
        schemas = {side: opts.get(f"{side}schema") for side in ("key", "value")}
        decoded = [side for side, f in formats.items() if f != "binary"]
        for side, text in schemas.items():
            if text is not None and formats[side] == "binary":
                raise OptionError(f"{side}Schema", f"needs {side}Format avro, json or protobuf")
            if text is not None and formats[side] == "protobuf":
                try:
                    subject_version(text)
                except ValueError as e:
                    raise OptionError(
                        f"{side}Schema", f"with {side}Format protobuf names a registered schema: {e}"
                    ) from None
        registry = _registry(opts)
        if decoded and registry is None:
            raise OptionError(f"{decoded[0]}Format", "needs schema.registry.url")
        if registry is not None and not decoded:
            raise OptionError("schema.registry.url", "needs keyFormat or valueFormat avro, json or protobuf")
        if opts.get("subscribe") is not None:
            topics = {t.strip() for t in str(opts["subscribe"]).split(",") if t.strip()}
        elif opts.get("assign") is not None:
            topics = {tp.topic for tp in parse_assign(str(opts["assign"]))}
        else:
            topics = set()  # a pattern: which topics it matches is known only when the query runs
        topic = next(iter(topics)) if len(topics) == 1 else None
        for side in decoded:
            if schemas[side] is None and topic is None:
                raise OptionError(
                    f"{side}Format",
                    f"needs {side}Schema unless the source reads one topic (whose {side} subject's latest schema "
                    "is then the column's)",
                )
        return cls(formats["key"], formats["value"], schemas["key"], schemas["value"], registry, topic)


def _registry(opts: Mapping[str, str | None]) -> Registry | None:
    """The ``schema.registry.*`` options (names as the odradek client's), checked now so that a typo, a missing CA
    or certificate file, a certificate without its key or a password without a user fail when the query starts,
    not in every task; any other ``schema.registry.`` option is refused, as it would not take effect."""
    unknown = sorted(k for k in opts if k.startswith(REGISTRY_PREFIX) and k not in REGISTRY_OPTIONS)
    if unknown:
        raise OptionError(
            unknown[0], f"is not an option of the odradek source (its registry options: {', '.join(REGISTRY_OPTIONS)})"
        )
    url, auth = opts.get("schema.registry.url"), opts.get("schema.registry.basic.auth.user.info")
    if url is None:
        given = [name for name in REGISTRY_OPTIONS[1:] if opts.get(name) is not None]
        if given:
            raise OptionError(given[0], "needs schema.registry.url")
        return None
    try:
        urls = registry_urls(url)
    except ConfigError as e:
        raise OptionError("schema.registry.url", str(e).removeprefix("schema.registry.url ")) from None
    if auth is not None and ":" not in auth:
        raise OptionError("schema.registry.basic.auth.user.info", "must be user:password")
    for name in TLS_OPTIONS:
        value = opts.get(name)
        if value is None:
            continue
        if not value.strip():
            default = " (without it, the system's CAs are used)" if name == TLS_OPTIONS.ca else ""
            raise OptionError(name, f"is empty{default}")
        if not all(u.startswith("https://") for u in urls):
            raise OptionError(name, "needs an https:// schema.registry.url")
    ca, certificate, key, password = (opts.get(name) or "" for name in TLS_OPTIONS)
    if ca or certificate or key or password:
        try:
            tls_context(ca, certificate, key, password)
        except RegistryTlsError as e:
            raise OptionError(e.option, e.detail) from None
    return Registry(url, auth or "", ca, certificate, key, password)


@dataclass(frozen=True)
class SourceOptions:
    """The validated options. Exactly one of ``subscribe``, ``subscribe_pattern`` and ``assign`` is set.

    Offset maps are read-only views; the dataclass is frozen but, holding mappings, not hashable.
    """

    bootstrap_servers: tuple[str, ...]
    subscribe: tuple[str, ...] | None = None
    subscribe_pattern: str | None = None
    assign: tuple[TopicPartition, ...] | None = None
    starting_offsets: OffsetSpec = "latest"
    ending_offsets: OffsetSpec | None = None  # batch only
    max_offsets_per_trigger: int | None = None
    fail_on_data_loss: bool = True
    min_partitions: int | None = None
    include_headers: bool = False
    consumer: tuple[tuple[str, str], ...] = ()
    """The ``kafka.`` options other than the servers, prefix removed, for every consumer the source opens."""
    group_id: str | None = None
    """``kafka.group.id``: the group the consumers use, and the one ``commitToGroup`` commits to."""
    group_id_prefix: str = DEFAULT_GROUP_ID_PREFIX
    """``groupIdPrefix``: without ``kafka.group.id`` each query run uses a fresh group id with this prefix."""
    commit_to_group: bool = False
    """``commitToGroup``: commit each finished micro-batch's end offsets to ``kafka.group.id``."""
    decode: DecodeOptions = field(default_factory=lambda: DecodeOptions())
    """How keys and values are decoded (keyFormat, valueFormat and their schemas)."""

    @classmethod
    def parse(cls, options: Mapping[str, str], *, batch: bool) -> SourceOptions:
        """Validate Spark's option map; ``batch`` selects Spark's batch rules (``read``) over streaming ones."""
        opts = {k.lower(): v for k, v in options.items()}

        def get(name: str) -> str | None:
            value = opts.get(name.lower())
            return None if value is None else str(value)

        servers = _bootstrap(get("bootstrap.servers"), get("kafka.bootstrap.servers"))
        for name in _UNIMPLEMENTED:
            if get(name) is not None:
                raise OptionError(
                    name, "is an option of Spark's Kafka source that the odradek source does not implement"
                )

        given = [name for name in _STRATEGIES if get(name) is not None]
        if not given:
            raise OptionError("subscribe/subscribePattern/assign", "exactly one must be specified, got none")
        if len(given) > 1:
            raise OptionError("/".join(given), "only one of subscribe, subscribePattern and assign may be specified")
        subscribe = pattern = assign = None
        if (value := get("subscribe")) is not None:
            subscribe = tuple(dict.fromkeys(t.strip() for t in value.split(",") if t.strip()))
            if not subscribe:
                raise OptionError("subscribe", f"no topics to subscribe to in {value!r}")
        elif (value := get("subscribePattern")) is not None:
            pattern = value.strip()
            if not pattern:
                raise OptionError("subscribePattern", "pattern to subscribe to is empty")
            try:
                re.compile(pattern)
            except re.error as e:
                raise OptionError("subscribePattern", f"invalid regex {pattern!r}: {e}") from None
        else:
            assign = parse_assign(get("assign") or "")

        starting = _offset_spec("startingOffsets", get("startingOffsets"), "earliest" if batch else "latest")
        ending: OffsetSpec | None = None
        if batch:
            ending = _offset_spec("endingOffsets", get("endingOffsets"), "latest")
            # A batch must have fixed bounds: it cannot start at "latest" nor end at "earliest" (as in Spark).
            _forbid("startingOffsets", starting, "latest", LATEST)
            _forbid("endingOffsets", ending, "earliest", EARLIEST)
        elif get("endingOffsets") is not None:
            raise OptionError("endingOffsets", "is not valid in streaming queries")
        if assign is not None:
            for name, spec in (("startingOffsets", starting), ("endingOffsets", ending)):
                if isinstance(spec, Mapping) and set(spec) != set(assign):
                    raise OptionError(
                        name,
                        f"must give an offset for exactly the assigned partitions {_names(assign)}, "
                        f"got {_names(spec)}; use -2 for earliest, -1 for latest",
                    )

        consumer = _consumer_options(servers, opts)
        group_id = dict(consumer).get("group.id")
        prefix = get("groupIdPrefix")
        if prefix is not None and not prefix.strip():
            raise OptionError("groupIdPrefix", "is empty")
        commit = _bool("commitToGroup", get("commitToGroup"), False)
        if commit and batch:
            raise OptionError("commitToGroup", "is only valid in streaming queries (a batch has no finished offsets)")
        if commit and group_id is None:
            raise OptionError("commitToGroup", "needs kafka.group.id: the group whose committed offsets to set")

        decode = DecodeOptions.parse(options)

        return cls(
            bootstrap_servers=servers,
            subscribe=subscribe,
            subscribe_pattern=pattern,
            assign=assign,
            starting_offsets=starting,
            ending_offsets=ending,
            max_offsets_per_trigger=_positive_int("maxOffsetsPerTrigger", get("maxOffsetsPerTrigger")),
            fail_on_data_loss=_bool("failOnDataLoss", get("failOnDataLoss"), True),
            min_partitions=_positive_int("minPartitions", get("minPartitions")),
            include_headers=_bool("includeHeaders", get("includeHeaders"), False),
            consumer=tuple((k, v) for k, v in consumer if k != "group.id"),
            group_id=group_id,
            group_id_prefix=DEFAULT_GROUP_ID_PREFIX if prefix is None else prefix.strip(),
            commit_to_group=commit,
            decode=decode,
        )

    def consumer_config(self, role: str, **overrides: Any) -> dict[str, Any]:
        """The config of a consumer the source opens (``role`` is ``driver`` or ``executor``): the ``kafka.``
        options, ``kafka.group.id`` or else a fresh id with ``groupIdPrefix`` as Spark makes one, auto-commit off
        (commits, if any, are the source's own), then ``overrides``."""
        group = self.group_id or f"{self.group_id_prefix}-{uuid.uuid4()}-{role}"
        return {
            "bootstrap.servers": ",".join(self.bootstrap_servers),
            **dict(self.consumer),
            "group.id": group,
            "enable.auto.commit": "false",
            **overrides,
        }


def topics_for(options: SourceOptions, all_topics: list[str]) -> list[str]:
    """The topics to read now, given the cluster's topics; re-resolved per batch so new matches are picked up.

    ``subscribe`` keeps its order and skips topics that do not exist yet (a consumer subscription does too);
    ``subscribePattern`` must match the whole name and never selects internal topics; ``assign`` is returned as
    given, so a missing assigned topic fails loudly when its partitions are looked up.
    """
    if options.subscribe is not None:
        existing = set(all_topics)
        return [t for t in options.subscribe if t in existing]
    if options.subscribe_pattern is not None:
        regex = re.compile(options.subscribe_pattern)
        return sorted(t for t in set(all_topics) if not t.startswith(INTERNAL_PREFIX) and regex.fullmatch(t))
    assert options.assign is not None
    return sorted({tp.topic for tp in options.assign})


def parse_offsets_json(text: str, option: str = "startingOffsets") -> dict[TopicPartition, int]:
    """``{"topic": {"0": 23, "1": -2}}`` -> offsets; -2 and -1 stand for earliest and latest, as in Spark."""
    data = _json_object(option, text)
    offsets: dict[TopicPartition, int] = {}
    for topic, partitions in data.items():
        if not topic or not isinstance(partitions, dict):
            raise OptionError(option, f'expected {{"topic": {{"partition": offset}}}}, got {text!r}')
        for key, offset in partitions.items():
            if not (isinstance(key, str) and key.isdigit()) or not _is_int(offset) or offset < EARLIEST:
                raise OptionError(
                    option,
                    f"bad entry {key!r}: {offset!r} for topic {topic!r}: partitions are non-negative "
                    f"integers, offsets are >= 0, or -2 (earliest) / -1 (latest)",
                )
            offsets[TopicPartition(topic, int(key))] = offset
    if not offsets:
        raise OptionError(option, f"no partitions in {text!r}")
    return offsets


def serialize_offsets_json(offsets: Mapping[TopicPartition, int]) -> str:
    """Offsets -> Spark's JSON, topics and partitions in order, so equal maps give equal checkpoint strings."""
    data: dict[str, dict[str, int]] = {}
    for tp in sorted(offsets):
        data.setdefault(tp.topic, {})[str(tp.partition)] = offsets[tp]
    return json.dumps(data, separators=(",", ":"))


def parse_assign(text: str) -> tuple[TopicPartition, ...]:
    """``{"topic": [0, 1]}`` -> sorted, de-duplicated partitions."""
    data = _json_object("assign", text)
    partitions: set[TopicPartition] = set()
    for topic, numbers in data.items():
        if not topic or not isinstance(numbers, list) or not all(_is_int(p) and p >= 0 for p in numbers):
            raise OptionError("assign", f'expected {{"topic": [partition, ...]}}, got {text!r}')
        partitions.update(TopicPartition(topic, p) for p in numbers)
    if not partitions:
        raise OptionError("assign", f"no partitions to assign in {text!r}")
    return tuple(sorted(partitions))


def _bootstrap(plain: str | None, prefixed: str | None) -> tuple[str, ...]:
    if plain is None and prefixed is None:
        raise OptionError("bootstrap.servers", "required (Spark's spelling kafka.bootstrap.servers also works)")
    if plain is not None and prefixed is not None and plain.strip() != prefixed.strip():
        raise OptionError("bootstrap.servers", f"{plain!r} conflicts with kafka.bootstrap.servers {prefixed!r}")
    value = plain if plain is not None else prefixed
    try:
        return tuple(parse_servers(value or ""))
    except ValueError as e:
        raise OptionError("bootstrap.servers", str(e)) from None


def _consumer_options(servers: tuple[str, ...], opts: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """The ``kafka.`` options (without the servers), checked against the consumer's configuration now so that a
    typo fails at query start rather than in every task."""
    consumer: dict[str, str] = {}
    for key, value in sorted(opts.items()):
        if not key.startswith(CONSUMER_PREFIX) or key == "kafka.bootstrap.servers" or value is None:
            continue
        if key in _SOURCE_OWNED:
            raise OptionError(key, f"is not supported: {_SOURCE_OWNED[key]}")
        consumer[key.removeprefix(CONSUMER_PREFIX)] = str(value)
    try:
        ConsumerConfig.from_mapping({"bootstrap.servers": ",".join(servers), **consumer, "enable.auto.commit": "false"})
    except ConfigError as e:
        named = [CONSUMER_PREFIX + k for k in consumer if k in str(e)] or [CONSUMER_PREFIX + k for k in consumer]
        raise OptionError("/".join(named), str(e)) from None
    return tuple(consumer.items())


def _offset_spec(option: str, value: str | None, default: Literal["earliest", "latest"]) -> OffsetSpec:
    if value is None:
        return default
    keyword = value.strip().lower()
    if keyword in ("earliest", "latest"):
        return keyword  # type: ignore[return-value]
    if not value.strip().startswith("{"):
        raise OptionError(option, f"expected earliest, latest or a JSON map of offsets, got {value!r}")
    return MappingProxyType(parse_offsets_json(value, option))


def _forbid(option: str, spec: OffsetSpec, keyword: str, sentinel: int) -> None:
    if spec == keyword:
        raise OptionError(option, f"can't be {keyword} for batch queries")
    if isinstance(spec, Mapping):
        bad = sorted(tp for tp, offset in spec.items() if offset == sentinel)
        if bad:
            raise OptionError(option, f"can't be {keyword} ({sentinel}) for batch queries, for {_names(bad)}")


def _format(option: str, value: str | None) -> str:
    if value is None:
        return "binary"
    if value.lower() not in FORMATS:
        raise OptionError(option, f"must be one of {', '.join(FORMATS)}, got {value!r}")
    return value.lower()


def _positive_int(option: str, value: str | None) -> int | None:
    if value is None:
        return None
    if not _INT.fullmatch(value.strip()) or int(value) <= 0:
        raise OptionError(option, f"must be a positive integer, got {value!r}")
    return int(value)


def _bool(option: str, value: str | None, default: bool) -> bool:
    if value is None:
        return default
    lowered = value.strip().lower()
    if lowered not in ("true", "false"):
        raise OptionError(option, f"must be true or false, got {value!r}")
    return lowered == "true"


def _json_object(option: str, text: str) -> dict[str, Any]:
    try:
        data = json.loads(text)
    except ValueError as e:
        raise OptionError(option, f"malformed JSON {text!r}: {e}") from None
    if not isinstance(data, dict):
        raise OptionError(option, f"expected a JSON object, got {text!r}")
    return data


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _names(partitions: Iterable[TopicPartition]) -> str:
    return "[" + ", ".join(f"{tp.topic}-{tp.partition}" for tp in sorted(partitions)) + "]"

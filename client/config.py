"""Producer and consumer configuration: Kafka's property names and defaults, validated up front.

Each option is a dataclass field whose Kafka name is the field name with dots (``linger_ms`` <- ``linger.ms``), so
the name, default and parser live in one place. Values may be Python values or the strings a properties file or
CLI flag gives (``"5"``, ``"true"``, ``"all"``). Anything unknown, malformed or inconsistent raises
``ConfigError`` naming the key, so a typo fails at construction instead of being silently ignored.
"""

from __future__ import annotations

import difflib
import itertools
from collections.abc import Callable, Mapping
from dataclasses import MISSING, Field, dataclass, field, fields, replace
from typing import Any, ClassVar, Self, TypeVar

from odradek.client.connection import parse_servers
from odradek.client.errors import ConfigError
from odradek.client.record.header import COMPRESSION_CODES
from odradek.client.schema_registry import TLS_OPTIONS, check_identity, registry_urls
from odradek.client.serialization import REGISTRY_FORMATS, SERIALIZER_NAMES
from odradek.client.tls import TlsFileError, TlsFiles

INT32_MAX = 2**31 - 1
Parser = Callable[[str, Any], Any]
T = TypeVar("T")


def _int(minimum: int = 0, maximum: int = INT32_MAX) -> Callable[[str, Any], int]:
    def parse(name: str, value: Any) -> int:
        if isinstance(value, str) and value.strip().lstrip("-").isdigit():
            value = int(value)
        if not isinstance(value, int) or isinstance(value, bool) or not minimum <= value <= maximum:
            raise ConfigError(f"{name} must be an integer in [{minimum}, {maximum}], got {value!r}")
        return value

    return parse


def _bool(name: str, value: Any) -> bool:
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    if not isinstance(value, bool):
        raise ConfigError(f"{name} must be true or false, got {value!r}")
    return value


def _choice(*choices: str) -> Callable[[str, Any], str]:
    def parse(name: str, value: Any) -> str:
        if not isinstance(value, str) or value.lower() not in choices:
            raise ConfigError(f"{name} must be one of {', '.join(choices)}, got {value!r}")
        return value.lower()

    return parse


def _name_choice(*choices: str) -> Callable[[str, Any], str]:
    """One of upper-case names (a security protocol, a SASL mechanism), in any case."""

    def parse(name: str, value: Any) -> str:
        if not isinstance(value, str) or value.upper() not in choices:
            raise ConfigError(f"{name} must be one of {', '.join(choices)}, got {value!r}")
        return value.upper()

    return parse


def _string(name: str, value: Any) -> str:
    if not isinstance(value, str):
        raise ConfigError(f"{name} must be a string, got {value!r}")
    return value


def _unsupported(why: str, allowed: Any = None) -> Parser:
    """A parser for an option whose only honoured value is ``allowed`` (its default): anything else is refused as
    not supported yet rather than accepted and ignored."""

    def parse(name: str, value: Any) -> Any:
        if value != allowed:
            raise ConfigError(f"{name}={value!r} is not supported yet: {why}")
        return value

    return parse


def _servers(name: str, value: Any) -> tuple[str, ...]:
    if not isinstance(value, str | list | tuple):
        raise ConfigError(f"{name} must be 'host:port,...' or a list of them, got {value!r}")
    try:
        return tuple(parse_servers(list(value) if isinstance(value, tuple) else value))
    except ValueError as e:
        raise ConfigError(f"{name}: {e}") from None


def _acks(name: str, value: Any) -> int:
    """0, 1, or all (-1), as an int: the value the Produce request carries."""
    acks = {"all": -1, "-1": -1, "0": 0, "1": 1}.get(value.lower()) if isinstance(value, str) else value
    if acks not in (-1, 0, 1) or isinstance(acks, bool):
        raise ConfigError(f"{name} must be 0, 1 or all (-1), got {value!r}")
    return acks


def _isolation(name: str, value: Any) -> str:
    return _choice("read_uncommitted", "read_committed")(name, value)


def _transactional_id(name: str, value: Any) -> str | None:
    """Unset (None) or a non-empty string: the producer's identity across restarts."""
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{name} must be a non-empty string, got {value!r}")
    return value


def _group_name(name: str, value: Any) -> str | None:
    """group.id / group.instance.id: unset (None) or a non-empty name (Kafka's limits for instance ids: at most 249
    characters of letters, digits, '.', '_' and '-')."""
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{name} must be a non-empty string, got {value!r}")
    if name == "group.instance.id" and (len(value) > 249 or not all(c.isalnum() or c in "._-" for c in value)):
        raise ConfigError(f"{name} must be at most 249 characters of letters, digits, '.', '_', '-', got {value!r}")
    return value


def _strategy(name: str, value: Any) -> tuple[str, ...]:
    """A comma-separated list (or a list) of assignor names, in preference order; they must share a rebalance
    protocol."""
    from odradek.client.consumer.assignors import get_assignors  # here: the consumer package imports this module
    from odradek.client.consumer.rebalance import choose_protocol

    if isinstance(value, str):
        names = tuple(n.strip() for n in value.split(",") if n.strip())
    elif isinstance(value, list | tuple) and all(isinstance(n, str) for n in value):
        names = tuple(n.strip() for n in value)
    else:
        raise ConfigError(f"{name} must be a comma-separated list of assignor names, got {value!r}")
    choose_protocol(get_assignors(names))
    return names


def option(default: T, parse: Parser) -> T:
    return field(default=default, metadata={"parse": parse})


def secret(parse: Parser) -> Any:
    """An option kept out of the config's repr (a password)."""
    return field(default="", repr=False, metadata={"parse": parse})


# Authentication (Kafka's names): with a SASL_* security.protocol the client logs in with SCRAM on each connection.
_SASL_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")


def required(parse: Parser) -> Any:
    return field(metadata={"parse": parse})


class _Options:
    """Parsing shared by every option set: each subclass is a frozen dataclass of ``option``/``required`` fields."""

    KIND: ClassVar[str]
    __dataclass_fields__: ClassVar[dict[str, Field[Any]]]  # set by @dataclass on each subclass

    @classmethod
    def from_mapping(cls, config: Mapping[str, Any]) -> Self:
        """Parse Kafka-named options; raise ConfigError for unknown keys, bad values or missing required ones."""
        known = {f.name.replace("_", "."): f for f in fields(cls)}
        for key in config:
            if key not in known:
                close = difflib.get_close_matches(str(key), list(known), n=1)
                hint = f" (did you mean '{close[0]}'?)" if close else ""
                raise ConfigError(f"unknown {cls.KIND} config '{key}'{hint}")
        values: dict[str, Any] = {}
        for name, f in known.items():
            if name in config:
                values[f.name] = f.metadata["parse"](name, config[name])
            elif f.default is MISSING:
                raise ConfigError(f"{name} is required")
        return cls(**values)


SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
TLS_PROTOCOLS = frozenset({"SSL", "SASL_SSL"})


def _protocol(name: str, value: Any) -> str:
    if not isinstance(value, str) or value.upper() not in SECURITY_PROTOCOLS:
        raise ConfigError(f"{name} must be one of {', '.join(SECURITY_PROTOCOLS)}, got {value!r}")
    return value.upper()


@dataclass(frozen=True, kw_only=True)
class SecurityOptions(_Options):
    """How a client connects (Kafka's names), shared by every client: the protocol; for SSL and SASL_SSL the CA that
    signs the brokers' certificates ("" = the system's CAs) and a client certificate for mTLS; for SASL_PLAINTEXT
    and SASL_SSL the SCRAM mechanism, user and password each connection logs in with."""

    security_protocol: str = option("PLAINTEXT", _protocol)
    ssl_ca_location: str = option("", _string)
    ssl_certificate_location: str = option("", _string)
    ssl_key_location: str = option("", _string)
    sasl_mechanism: str = option("SCRAM-SHA-256", _name_choice(*_SASL_MECHANISMS))
    sasl_username: str = option("", _string)
    sasl_password: str = secret(_string)

    def __post_init__(self) -> None:
        given = [n for n in ("ssl_ca_location", "ssl_certificate_location", "ssl_key_location") if getattr(self, n)]
        if given and self.security_protocol not in TLS_PROTOCOLS:
            name = given[0].replace("_", ".")
            raise ConfigError(f"{name} needs security.protocol SSL or SASL_SSL, not {self.security_protocol}")
        if bool(self.ssl_certificate_location) != bool(self.ssl_key_location):
            raise ConfigError("ssl.certificate.location and ssl.key.location go together: set both or neither")

    def tls_files(self) -> TlsFiles | None:
        """What channels are made with: TLS files under SSL and SASL_SSL, None (plaintext) otherwise."""
        if self.security_protocol not in TLS_PROTOCOLS:
            return None
        try:
            return TlsFiles(self.ssl_ca_location, self.ssl_certificate_location, self.ssl_key_location)
        except TlsFileError as e:
            raise ConfigError(str(e)) from None


@dataclass(frozen=True, kw_only=True)
class ClientConfig(SecurityOptions):
    """Options every client has."""

    KIND = "client"

    bootstrap_servers: tuple[str, ...] = required(_servers)
    client_id: str = option("", _string)
    request_timeout_ms: int = option(30_000, _int(1))
    metadata_max_age_ms: int = option(300_000, _int(0))
    retry_backoff_ms: int = option(100, _int(0))


def _serde(kind: str, method: str) -> Parser:
    """A key or value (de)serializer: one of the names odradek has, or an object with the method."""

    def parse(name: str, value: Any) -> Any:
        if isinstance(value, str) and value.lower() in SERIALIZER_NAMES:
            return value.lower()
        if not isinstance(value, str) and callable(getattr(value, method, None)):
            return value
        raise ConfigError(f"{name} must be one of {', '.join(SERIALIZER_NAMES)} or a {kind} object, got {value!r}")

    return parse


_SCHEMA_KEYS = ("key.schema", "value.schema")


def _registry_url(name: str, value: Any) -> str:
    registry_urls(_string(name, value))
    return str(value)


def _user_info(name: str, value: Any) -> str:
    if not isinstance(value, str) or ":" not in value:
        raise ConfigError(f"{name} must be user:password")
    return value


def _check_serde(config: Mapping[str, Any], parsed: Any, kind: str, registry_keys: tuple[str, ...]) -> None:
    """Every schema registry setting must act on something: a registry format needs the registry's URL, and a
    schema or registry setting given without a registry format is refused (it would be ignored)."""
    formats = {side: getattr(parsed, f"{side}_{kind}") for side in ("key", "value")}
    uses_registry = any(f in REGISTRY_FORMATS for f in formats.values())
    if uses_registry and not parsed.schema_registry_url:
        side = next(s for s, f in formats.items() if f in REGISTRY_FORMATS)
        raise ConfigError(f"{side}.{kind}={formats[side]} needs schema.registry.url")
    for side in ("key", "value"):
        if f"{side}.schema" in config and formats[side] not in REGISTRY_FORMATS:
            raise ConfigError(f"{side}.schema needs {side}.{kind} avro or json, not {formats[side]!r}")
    if not uses_registry:
        for key in registry_keys:
            if key in config:
                raise ConfigError(f"{key} needs key.{kind} or value.{kind} avro or json")
    tls = [k for k in TLS_OPTIONS if k in config]
    if tls and not all(u.startswith("https://") for u in registry_urls(parsed.schema_registry_url)):
        raise ConfigError(f"{tls[0]} needs an https:// schema.registry.url")
    check_identity(
        parsed.schema_registry_ssl_certificate_location,
        parsed.schema_registry_ssl_key_location,
        parsed.schema_registry_ssl_key_password,
    )


@dataclass(frozen=True, kw_only=True)
class ProducerConfig(ClientConfig):
    KIND = "producer"

    acks: int = option(-1, _acks)
    linger_ms: int = option(5, _int(0))
    batch_size: int = option(16_384, _int(0))
    compression_type: str = option("none", _choice(*COMPRESSION_CODES))
    buffer_memory: int = option(32 * 1024 * 1024, _int(1, 2**62))
    max_block_ms: int = option(60_000, _int(0))
    max_in_flight_requests_per_connection: int = option(5, _int(1))
    retries: int = option(INT32_MAX, _int(0))
    delivery_timeout_ms: int = option(120_000, _int(1))
    max_request_size: int = option(1_048_576, _int(1))
    partitioner_ignore_keys: bool = option(False, _bool)
    enable_idempotence: bool = option(True, _bool)
    transactional_id: str | None = option(None, _transactional_id)
    transaction_timeout_ms: int = option(60_000, _int(1))
    # What send() turns keys and values into bytes with (client/serialization.py; Confluent's serializer settings).
    # A name or the application's own object (so typed Any, which the dataclass check cannot see as immutable).
    key_serializer: Any = option("bytes", _serde("serializer", "serialize"))  # noqa: RUF009
    value_serializer: Any = option("bytes", _serde("serializer", "serialize"))  # noqa: RUF009
    key_schema: str | None = option(None, _string)
    value_schema: str | None = option(None, _string)
    schema_registry_url: str = option("", _registry_url)
    schema_registry_basic_auth_user_info: str = secret(_user_info)
    schema_registry_ssl_ca_location: str = option("", _string)
    schema_registry_ssl_certificate_location: str = option("", _string)
    schema_registry_ssl_key_location: str = option("", _string)
    schema_registry_ssl_key_password: str = secret(_string)
    auto_register_schemas: bool = option(True, _bool)
    use_latest_version: bool = option(False, _bool)

    @classmethod
    def from_mapping(cls, config: Mapping[str, Any]) -> Self:
        """As Kafka (3.0+): idempotence is on by default; settings it cannot work with (acks other than all,
        retries 0, more than 5 requests in flight) are an error if it was asked for, and turn it off if it was
        only the default. A transactional.id asks for idempotence."""
        parsed = super().from_mapping(config)
        _check_serde(
            config,
            parsed,
            "serializer",
            (
                "schema.registry.url",
                "schema.registry.basic.auth.user.info",
                *TLS_OPTIONS,
                "auto.register.schemas",
                "use.latest.version",
            ),
        )
        if parsed.use_latest_version:
            if parsed.auto_register_schemas:
                raise ConfigError(
                    "use.latest.version=true needs auto.register.schemas=false (as Confluent's serializers)"
                )
            given = [k for k in _SCHEMA_KEYS if k in config]
            if given:
                raise ConfigError(f"{given[0]} is not used with use.latest.version=true: the subject's latest is")
        else:
            for side in ("key", "value"):
                name = getattr(parsed, f"{side}_serializer")
                if name in REGISTRY_FORMATS and getattr(parsed, f"{side}_schema") is None:
                    raise ConfigError(f"{side}.serializer={name} needs {side}.schema (or use.latest.version=true)")
        transactional = parsed.transactional_id is not None
        if transactional and not parsed.enable_idempotence:
            raise ConfigError("transactional.id needs enable.idempotence=true")
        if not transactional and "transaction.timeout.ms" in config:
            raise ConfigError("transaction.timeout.ms needs a transactional.id")
        if not parsed.enable_idempotence:
            return parsed
        conflicts = [
            text
            for text, bad in (
                ("acks must be all", parsed.acks != -1),
                ("retries must be above 0", parsed.retries == 0),
                (
                    "max.in.flight.requests.per.connection must be at most 5",
                    parsed.max_in_flight_requests_per_connection > 5,
                ),
            )
            if bad
        ]
        if not conflicts:
            return parsed
        if transactional:
            raise ConfigError(f"transactional.id needs: {'; '.join(conflicts)}")
        if "enable.idempotence" in config:
            raise ConfigError(f"enable.idempotence=true needs: {'; '.join(conflicts)}")
        return replace(parsed, enable_idempotence=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        # Kafka's rule: a batch must be able to linger and then wait a full request timeout before it expires.
        if self.delivery_timeout_ms < self.linger_ms + self.request_timeout_ms:
            raise ConfigError(
                f"delivery.timeout.ms ({self.delivery_timeout_ms}) must be at least linger.ms + request.timeout.ms "
                f"({self.linger_ms + self.request_timeout_ms})"
            )


@dataclass(frozen=True, kw_only=True)
class ConsumerConfig(ClientConfig):
    KIND = "consumer"

    group_id: str | None = option(None, _group_name)
    group_instance_id: str | None = option(None, _group_name)
    session_timeout_ms: int = option(45_000, _int(1))
    heartbeat_interval_ms: int = option(3_000, _int(1))
    max_poll_interval_ms: int = option(300_000, _int(1))
    enable_auto_commit: bool = option(True, _bool)
    auto_commit_interval_ms: int = option(5_000, _int(0))
    partition_assignment_strategy: tuple[str, ...] = option(("range", "cooperative-sticky"), _strategy)
    auto_offset_reset: str = option("latest", _choice("latest", "earliest", "none"))
    fetch_min_bytes: int = option(1, _int(0))
    fetch_max_bytes: int = option(52_428_800, _int(0))
    fetch_max_wait_ms: int = option(500, _int(0))
    max_partition_fetch_bytes: int = option(1_048_576, _int(0))
    max_poll_records: int = option(500, _int(1))
    isolation_level: str = option("read_uncommitted", _isolation)
    check_crcs: bool = option(True, _bool)
    # Off by default, as in librdkafka (Kafka's Java consumer defaults to on): a consumer's typo should not create a
    # topic (docs/configuration.md).
    allow_auto_create_topics: bool = option(False, _bool)
    # What poll() turns keys and values into (client/serialization.py); a schema is Avro's reader schema.
    key_deserializer: Any = option("bytes", _serde("deserializer", "deserialize"))  # noqa: RUF009
    value_deserializer: Any = option("bytes", _serde("deserializer", "deserialize"))  # noqa: RUF009
    key_schema: str | None = option(None, _string)
    value_schema: str | None = option(None, _string)
    schema_registry_url: str = option("", _registry_url)
    schema_registry_basic_auth_user_info: str = secret(_user_info)
    schema_registry_ssl_ca_location: str = option("", _string)
    schema_registry_ssl_certificate_location: str = option("", _string)
    schema_registry_ssl_key_location: str = option("", _string)
    schema_registry_ssl_key_password: str = secret(_string)

    @classmethod
    def from_mapping(cls, config: Mapping[str, Any]) -> Self:
        """As Kafka: without group.id there is nothing to commit to, so enable.auto.commit is off (asking for it
        is an error)."""
        parsed = super().from_mapping(config)
        _check_serde(
            config,
            parsed,
            "deserializer",
            ("schema.registry.url", "schema.registry.basic.auth.user.info", *TLS_OPTIONS),
        )
        for side in ("key", "value"):
            if f"{side}.schema" in config and getattr(parsed, f"{side}_deserializer") != "avro":
                raise ConfigError(f"{side}.schema (a reader schema) needs {side}.deserializer=avro")
        if parsed.group_id is None and parsed.enable_auto_commit:
            if "enable.auto.commit" in config:
                raise ConfigError("enable.auto.commit=true needs a group.id")
            return replace(parsed, enable_auto_commit=False)
        return parsed

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.heartbeat_interval_ms >= self.session_timeout_ms:
            raise ConfigError(
                f"heartbeat.interval.ms ({self.heartbeat_interval_ms}) must be lower than session.timeout.ms "
                f"({self.session_timeout_ms})"
            )
        if self.group_instance_id is not None and self.group_id is None:
            raise ConfigError("group.instance.id needs a group.id")


@dataclass(frozen=True, kw_only=True)
class AdminConfig(SecurityOptions):
    """Admin options: only those the admin client acts on (it keeps no metadata cache)."""

    KIND = "admin"

    bootstrap_servers: tuple[str, ...] = required(_servers)
    client_id: str = option("", _string)
    request_timeout_ms: int = option(30_000, _int(1))
    retry_backoff_ms: int = option(100, _int(0))


# Numbers for generated client ids, per process as in Kafka's clients.
_PRODUCER_IDS = itertools.count(1)
_CONSUMER_IDS = itertools.count(1)
_ADMIN_IDS = itertools.count(1)


def admin_client_id(config: Mapping[str, Any], parsed: AdminConfig) -> str:
    """The admin client's client.id: the application's (even empty), else Kafka's generated ``adminclient-N``."""
    return parsed.client_id if "client.id" in config else f"adminclient-{next(_ADMIN_IDS)}"


ClientOptions = TypeVar("ClientOptions", ProducerConfig, ConsumerConfig)


def with_client_id(config: Mapping[str, Any], parsed: ClientOptions) -> ClientOptions:
    """``parsed`` with Kafka's generated client.id when the application set none (an explicit one, even empty,
    is kept): ``producer-<transactional.id>`` or ``producer-N``, ``consumer-<group.id>-N`` or ``consumer-N``. Brokers
    key their quotas on it, so every client has one."""
    if "client.id" in config:
        return parsed
    if isinstance(parsed, ProducerConfig):
        name = f"producer-{parsed.transactional_id or next(_PRODUCER_IDS)}"
    else:
        group = f"{parsed.group_id}-" if parsed.group_id is not None else ""
        name = f"consumer-{group}{next(_CONSUMER_IDS)}"
    return replace(parsed, client_id=name)

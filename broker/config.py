"""Node configuration: one TOML file per node with Kafka's property names.

Keys may be written quoted (``"node.id" = 1``), dotted (``node.id = 1``) or as tables (``[node] id = 1``): all
flatten to Kafka's dotted names. Unknown names and bad values fail at start with a one-line error.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from odradek.broker.security.principal_mapping import PrincipalMapper
from odradek.client.common.access import AUTHORIZER_NAMES, AuthorizerSettings, parse_super_users
from odradek.client.common.acls import validate_principal
from odradek.client.common.scram import Mechanism


class ConfigError(ValueError):
    """A node configuration problem, worded for the operator."""


@dataclass(frozen=True, slots=True)
class Endpoint:
    name: str
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass(frozen=True, slots=True)
class HttpsEndpoint(Endpoint):
    """An HTTP listener given as ``https://host:port``: it serves TLS with the node's certificate."""


@dataclass(frozen=True, slots=True)
class Voter:
    node_id: int
    host: str
    port: int


# Kafka's security protocols. A listener's protocol comes from listener.security.protocol.map; the SASL ones add
# the SASL exchange to plaintext or TLS.
PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
TLS_PROTOCOLS = frozenset({"SSL", "SASL_SSL"})
CLIENT_AUTH = ("none", "requested", "required")
SASL_PROTOCOLS = frozenset({"SASL_PLAINTEXT", "SASL_SSL"})


def _listeners(value: str) -> dict[str, Endpoint]:
    out = {}
    for item in filter(None, (v.strip() for v in value.split(","))):
        name, sep, address = item.partition("://")
        host, colon, port = address.rpartition(":")
        if not sep or not colon or not port.isdigit():
            raise ConfigError(f"listener '{item}' is not NAME://host:port")
        out[name.upper()] = Endpoint(name.upper(), host or "0.0.0.0", int(port))
    return out


def _protocol_map(value: Any) -> dict[str, str]:
    """Kafka's ``NAME:PROTOCOL,...``; names it does not list keep the default (see ``NodeConfig.listener_protocol``)."""
    out: dict[str, str] = {}
    for item in _csv(value):
        name, colon, protocol = item.partition(":")
        if not colon or not name.strip():
            raise ConfigError(f"'{item}' is not NAME:PROTOCOL")
        if protocol.strip().upper() not in PROTOCOLS:
            raise ConfigError(f"'{item}': the protocol must be one of {', '.join(PROTOCOLS)}")
        out[name.strip().upper()] = protocol.strip().upper()
    return out


def _client_auth(value: Any) -> str:
    auth = str(value).lower()
    if auth not in CLIENT_AUTH:
        raise ConfigError(f"ssl.client.auth must be none, requested or required, not {value!r}")
    return auth


# Kafka's listener-prefixed keys, listener.name.<listener name in lower case>.<key>: odradek takes one, so that a
# listener may authenticate its clients otherwise than the others (a Kafka listener that only requests certificates
# beside a gRPC broker listener that requires them).
LISTENER_PREFIX = "listener.name."
PER_LISTENER_KEY = "ssl.client.auth"


def client_auth_key(listener: str) -> str:
    """The per-listener key of listener ``listener``'s ssl.client.auth (Kafka writes the name in lower case)."""
    return f"{LISTENER_PREFIX}{listener.lower()}.{PER_LISTENER_KEY}"


def _listener_client_auth(props: Mapping[str, Any]) -> dict[str, str]:
    """The ``listener.name.<name>.ssl.client.auth`` keys of ``props``, by upper-case listener name; any other
    listener-prefixed key is refused, as unknown keys are."""
    out: dict[str, str] = {}
    for key, value in props.items():
        if not key.startswith(LISTENER_PREFIX):
            continue
        name, _, rest = key.removeprefix(LISTENER_PREFIX).partition(".")
        if not name or rest != PER_LISTENER_KEY:
            raise ConfigError(
                f"unknown config '{key}': only ssl.client.auth may be set per listener "
                f"({LISTENER_PREFIX}<listener>.{PER_LISTENER_KEY})"
            )
        if name != name.lower():
            raise ConfigError(f"unknown config '{key}': write the listener name in lower case, as Kafka does")
        try:
            out[name.upper()] = _client_auth(value)
        except ConfigError as e:
            raise ConfigError(f"invalid value {value!r} for '{key}': {e}") from None
    return out


def _mapping_rules(value: Any) -> PrincipalMapper:
    # ValueError names the rule that cannot be read; NodeConfig words it as a ConfigError.
    return PrincipalMapper.parse(str(value))


def parse_voters(value: str) -> list[Voter]:
    """``1@host:port,2@host:port`` (Kafka's controller.quorum.voters)."""
    voters = []
    for item in filter(None, (v.strip() for v in value.split(","))):
        node, at, address = item.partition("@")
        host, colon, port = address.rpartition(":")
        if not at or not node.isdigit() or not colon or not port.isdigit():
            raise ConfigError(f"voter '{item}' is not id@host:port")
        voters.append(Voter(int(node), host, int(port)))
    if len({v.node_id for v in voters}) != len(voters):
        raise ConfigError("controller.quorum.voters lists a node id twice")
    return voters


def _roles(value: str) -> frozenset[str]:
    roles = frozenset(r.strip() for r in value.split(",") if r.strip())
    if not roles or not roles <= {"broker", "controller"}:
        raise ConfigError(f"process.roles must be broker, controller or both, not '{value}'")
    return roles


def _int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ConfigError(f"expected an integer, got {value!r}")
    return int(value)


def _at_least(lo: int) -> Callable[[Any], int]:
    def parse(value: Any) -> int:
        number = _int(value)
        if number < lo:
            raise ConfigError(f"must be at least {lo}")
        return number

    return parse


def _open_files(value: Any) -> int:
    number = _int(value)
    if number != 0 and number < 3:
        raise ConfigError("must be 0 (derived from the open-file limit) or at least 3 (one segment's descriptors)")
    return number


LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1


def _long(at_least: int) -> Callable[[Any], int]:
    """A Kafka LONG config: a whole number in a signed 64-bit range, written as a number or a string, with Kafka's
    refusals ("Not a number of type LONG", "Value must be at least N")."""

    def parse(value: Any) -> int:
        if isinstance(value, str) and re.fullmatch(r"[+-]?[0-9]+", value.strip()):
            number = int(value)
        elif isinstance(value, int) and not isinstance(value, bool):
            number = value
        else:
            raise ConfigError("Not a number of type LONG")
        if not LONG_MIN <= number <= LONG_MAX:
            raise ConfigError("Not a number of type LONG")
        if number < at_least:
            raise ConfigError(f"Value must be at least {at_least}")
        return number

    return parse


def _bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if str(value).lower() in ("true", "false"):
        return str(value).lower() == "true"
    raise ConfigError(f"expected true or false, got {value!r}")


def _float(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ConfigError(f"expected a number, got {value!r}")
    try:
        return float(value)
    except ValueError:
        raise ConfigError(f"expected a number, got {value!r}") from None


def _ratio(value: Any) -> float:
    number = _float(value)
    if not 0 <= number <= 1:
        raise ConfigError(f"must be between 0 and 1, got {number}")
    return number


def _fraction(value: Any) -> float:
    number = _float(value)
    if not 0 < number < 1:
        raise ConfigError(f"must be above 0 and below 1, got {number}")
    return number


def _positive_float(value: Any) -> float:
    number = _float(value)
    if not number > 0:
        raise ConfigError(f"must be above 0, got {number}")
    return number


def _cleanup_policy(value: Any) -> str:
    """A list of compact and delete; empty (neither: every record kept) as Kafka accepts it."""
    if not str(value).strip():
        return ""
    parts = [p.strip() for p in str(value).split(",")]
    if not all(p in ("compact", "delete") for p in parts):
        raise ConfigError(f"log.cleanup.policy must be delete, compact, compact,delete or empty, not {value!r}")
    return ",".join(parts)


def _recovery_strategy(value: Any) -> str:
    """KIP-966's names; ``proactive`` (electing before the whole last known ELR is back) is not implemented."""
    strategy = str(value).lower()
    if strategy not in ("balanced", "manual"):
        raise ConfigError(f"unclean.recovery.strategy must be balanced or manual, not {value!r}")
    return strategy


def _csv(value: Any) -> list[str]:
    if isinstance(value, list):
        return [str(v) for v in value]
    return [v.strip() for v in value.split(",") if v.strip()]


def _sasl_mechanisms(value: Any) -> tuple[str, ...]:
    names = _csv(value)
    if not names:
        raise ConfigError("at least one mechanism is needed")
    for name in names:
        if name not in {m.value for m in Mechanism}:
            raise ConfigError(
                f"SASL mechanism {name!r} is not supported: odradek offers SCRAM-SHA-256 and SCRAM-SHA-512"
            )
    return tuple(dict.fromkeys(names))


# group.consumer.assignors: the server assignors of KIP-848 groups, by short name or Kafka's class name.
_KAFKA_ASSIGNOR_PACKAGE = "org.apache.kafka.coordinator.group.assignor."
_CONSUMER_GROUP_ASSIGNORS = {"uniform": "UniformAssignor", "range": "RangeAssignor"}


def _consumer_group_assignors(value: Any) -> tuple[str, ...]:
    classes = {_KAFKA_ASSIGNOR_PACKAGE + c: name for name, c in _CONSUMER_GROUP_ASSIGNORS.items()}
    names = []
    for item in _csv(value):
        name = classes.get(item, item)
        if name not in _CONSUMER_GROUP_ASSIGNORS:
            raise ConfigError(f"assignor {item!r} is not available: odradek's are uniform and range")
        names.append(name)
    if not names:
        raise ConfigError("at least one assignor is needed")
    return tuple(dict.fromkeys(names))


# group.consumer.migration.policy: which online conversions between the classic and the consumer protocol run.
MIGRATION_POLICIES = ("bidirectional", "upgrade", "downgrade", "disabled")


def _migration_policy(value: Any) -> str:
    policy = str(value).strip().lower()
    if policy not in MIGRATION_POLICIES:
        raise ConfigError(f"{value!r} is not a migration policy: one of {', '.join(MIGRATION_POLICIES)}")
    return policy


def _authorizer_name(value: Any) -> str:
    name = str(value).strip()
    if name and name not in AUTHORIZER_NAMES:
        raise ConfigError(
            f"authorizer {name!r} is not available: odradek's ACL authorizer is named odradek (or Kafka's "
            "org.apache.kafka.metadata.authorizer.StandardAuthorizer); empty = no authorizer"
        )
    return name


def _super_users(value: Any) -> frozenset[str]:
    principals = parse_super_users(str(value))
    for principal in principals:
        try:
            validate_principal(principal)
        except ValueError as e:
            raise ConfigError(f"{e} (super.users separates principals with ';')") from None
    return principals


def _url_listener(value: Any, name: str, what: str, *, https: bool = False) -> Endpoint | None:
    """Confluent's ``listeners`` syntax, ``http://host:port``; "" = off. One listener (several are refused as not
    supported yet); ``https://host:port`` where ``https`` (an HttpsEndpoint), else refused as not supported yet."""
    items = [v.strip() for v in str(value).split(",") if v.strip()]
    if not items:
        return None
    if len(items) > 1:
        raise ConfigError(f"only one {what} listener is supported yet")
    scheme, sep, address = items[0].partition("://")
    if not sep or scheme.lower() not in ("http", "https"):
        raise ConfigError(f"'{items[0]}' is not http://host:port")
    if scheme.lower() == "https" and not https:
        raise ConfigError(f"https is not supported yet for the {what}: use http://host:port")
    host, colon, port = address.rpartition(":")
    if not colon or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise ConfigError(f"'{items[0]}' is not http://host:port (port 1-65535)")
    kind = HttpsEndpoint if scheme.lower() == "https" else Endpoint
    return kind(name, host.strip("[]") or "0.0.0.0", int(port))


def _registry_listeners(value: Any) -> Endpoint | None:
    """The schema registry's listener, ``http://`` or ``https://host:port``; "" = no registry."""
    return _url_listener(value, "SCHEMA_REGISTRY", "schema registry", https=True)


def _registry_authentication(value: Any) -> str:
    """How the schema registry knows its callers: the HTTP API's choices ("" as the broker's client listeners, none,
    basic), refused in words that name neither key (the error names it)."""
    try:
        return _http_authentication(value)
    except ConfigError:
        raise ConfigError(f"must be none or basic (empty: as the client listeners), not {value!r}") from None


def _registry_client_auth(value: Any) -> str:
    """An https listener's client certificates (the registry's, the HTTP API's): "" (as ssl.client.auth), none,
    requested or required."""
    return "" if not str(value).strip() else _client_auth(str(value).strip())


def _http_listeners(value: Any) -> Endpoint | None:
    """The HTTP API's listener (docs/http-api.md), ``http://`` or ``https://host:port``; "" = none."""
    return _url_listener(value, "HTTP", "HTTP API", https=True)


HTTP_AUTHENTICATION = ("none", "basic")


def _http_authentication(value: Any) -> str:
    """How the HTTP API knows its callers: "" (as the broker's client listeners), none, or basic."""
    mode = str(value).strip().lower()
    if mode not in ("", *HTTP_AUTHENTICATION):
        raise ConfigError(f"http.authentication must be none or basic (empty: as the client listeners), not {value!r}")
    return mode


def _fetch_protocol(value: Any) -> str:
    protocol = str(value).lower()
    if protocol not in ("grpc", "kafka"):
        raise ConfigError(f"replica.fetch.protocol must be grpc or kafka, not {value!r}")
    return protocol


def _bug(value: Any) -> str:
    if value not in ("", "ack-before-replication"):
        raise ConfigError(f"unknown unsafe.testing.bug {value!r}")
    return str(value)


def _file_name(value: Any) -> str:
    name = str(value)
    if name and (name in (".", "..") or "/" in name or "\0" in name):
        raise ConfigError(f"unsafe.testing.log.dir.failure.file must be a plain file name, not {name!r}")
    return name


def _only(allowed: Any, parse: Callable[[Any], Any], why: str) -> Callable[[Any], Any]:
    """A parser for a key whose only honoured value is ``allowed`` (the one odradek implements); others are refused
    as not supported yet instead of being accepted and ignored."""

    def check(value: Any) -> Any:
        parsed = parse(value)
        if parsed != allowed:
            raise ConfigError(f"not supported yet, only {allowed!r} is ({why})")
        return parsed

    return check


# name -> (parser, default). None as default = required where the role needs it.
SCHEMA: dict[str, tuple[Callable[[Any], Any], Any]] = {
    "process.roles": (_roles, None),
    "node.id": (_int, None),
    "controller.quorum.voters": (parse_voters, None),
    "listeners": (_listeners, "PLAINTEXT://127.0.0.1:9092"),
    "advertised.listeners": (_listeners, ""),
    "controller.listener.names": (_csv, "CONTROLLER"),
    # Each listener's security protocol (Kafka's syntax). Unlisted names: PLAINTEXT, SSL, SASL_PLAINTEXT and
    # SASL_SSL map to themselves, any other name (CONTROLLER, KAFKA, ...) to PLAINTEXT.
    "listener.security.protocol.map": (_protocol_map, ""),
    # TLS (SSL and SASL_SSL listeners, and this node's connections to them): PEM files, re-read when they change.
    "ssl.certificate.location": (str, ""),
    "ssl.key.location": (str, ""),
    "ssl.key.password": (str, ""),
    # The CA that signs peers' certificates: clients' (ssl.client.auth) and the other nodes'. "" = system CAs.
    "ssl.ca.location": (str, ""),
    "ssl.client.auth": (_client_auth, "none"),
    # A verified client certificate's subject DN (CN=...,O=...) to its principal's name (Kafka's syntax).
    "ssl.principal.mapping.rules": (_mapping_rules, "DEFAULT"),
    # Listeners of these names speak Kafka's binary protocol (for Kafka clients) instead of gRPC.
    "kafka.listener.names": (_csv, "KAFKA"),
    "log.dirs": (_csv, "/var/lib/odradek/data"),
    "metadata.log.dir": (str, ""),
    "broker.rack": (str, ""),
    "metrics.port": (_int, 0),
    # controller quorum (KIP-595 names)
    "controller.quorum.election.timeout.ms": (_int, 1000),
    "controller.quorum.fetch.timeout.ms": (_int, 2000),
    # Not tunable yet: a candidate backs off a fixed step per rank among the resigning leader's successors.
    "controller.quorum.election.backoff.max.ms": (
        _only(1000, _int, "the election backoff is fixed"),
        1000,
    ),
    "metadata.log.max.snapshot.interval.records": (_int, 20000),
    # broker lifecycle
    "broker.heartbeat.interval.ms": (_int, 2000),
    "broker.session.timeout.ms": (_int, 9000),
    # topic defaults
    "num.partitions": (_at_least(1), 1),
    "default.replication.factor": (_at_least(1), 1),
    # A Metadata request naming missing topics creates them, when it allows it (Kafka's name and default).
    "auto.create.topics.enable": (_bool, True),
    # The most partition replicas topic creation may place on one broker (refused beyond, POLICY_VIOLATION).
    "max.partitions.per.broker": (_at_least(1), 4000),
    "min.insync.replicas": (_int, 1),
    "unclean.leader.election.enable": (_bool, False),
    "unclean.recovery.strategy": (_recovery_strategy, "balanced"),
    "auto.leader.rebalance.enable": (_bool, True),
    "leader.imbalance.check.interval.seconds": (_int, 300),
    "leader.imbalance.per.broker.percentage": (_int, 10),
    # replication
    "replica.lag.time.max.ms": (_int, 30000),
    "replica.fetch.max.bytes": (_int, 1048576),
    "replica.fetch.wait.max.ms": (_int, 500),
    "replica.fetch.min.bytes": (_int, 1),
    "replica.fetch.response.max.bytes": (_int, 10485760),
    "replica.fetch.backoff.ms": (_int, 1000),
    # How followers fetch: "kafka" from the leader's advertised Kafka listener (over gRPC from a leader that
    # advertises none; it costs the leader less CPU per byte, bench/follower_path_bench.py), or "grpc".
    "replica.fetch.protocol": (_fetch_protocol, "kafka"),
    "num.replica.fetchers": (
        _only(1, _int, "a broker runs one fetcher per leader broker it follows"),
        1,
    ),
    # The bytes per second that copying replicas into another log dir of this broker (AlterReplicaLogDirs) may
    # read and write, over all its moves (Kafka's name, type and default: Long.MAX, no limit). Kafka can also set it
    # at runtime; odradek reads it from this file.
    "replica.alter.log.dirs.io.max.bytes.per.second": (_long(0), LONG_MAX),
    # log defaults (topic configs without the "log." prefix override these)
    "message.max.bytes": (_int, 1048588),
    "log.segment.bytes": (_int, 1073741824),
    "log.roll.ms": (_int, 7 * 24 * 3600 * 1000),
    "log.retention.ms": (_int, 7 * 24 * 3600 * 1000),
    "log.retention.bytes": (_int, -1),
    "log.retention.check.interval.ms": (_int, 300000),
    "log.flush.interval.messages": (_int, 2**63 - 1),
    "log.flush.interval.ms": (_int, 2**63 - 1),
    "log.index.size.max.bytes": (_int, 10485760),
    "log.index.interval.bytes": (_int, 4096),
    "log.cleanup.policy": (_cleanup_policy, "delete"),
    # the log cleaner (compaction of cleanup.policy=compact topics), Kafka's names and defaults
    "log.cleaner.enable": (_bool, True),
    "log.cleaner.threads": (_at_least(1), 1),
    "log.cleaner.dedupe.buffer.size": (_at_least(1024 * 1024), 134217728),
    "log.cleaner.io.buffer.load.factor": (_fraction, 0.9),
    "log.cleaner.io.max.bytes.per.second": (_positive_float, float("inf")),
    "log.cleaner.backoff.ms": (_at_least(0), 15000),
    "log.cleaner.min.cleanable.ratio": (_ratio, 0.5),
    "log.cleaner.delete.retention.ms": (_at_least(0), 86_400_000),
    "log.cleaner.min.compaction.lag.ms": (_at_least(0), 0),
    "log.cleaner.max.compaction.lag.ms": (_at_least(1), 2**63 - 1),
    # 0: derived from the open-file limit and vm.max_map_count at start (broker/log/handles.py)
    "log.max.open.files": (_open_files, 0),
    "producer.id.expiration.ms": (_int, 86_400_000),
    # A deliberate bug for proving the chaos checker (chaos/): "ack-before-replication" answers acks=all produces
    # as soon as the leader has appended. Never set it outside such a test.
    "unsafe.testing.bug": (_bug, ""),
    # Log dir failure injection for tests: when a file of this name appears in a log dir, the broker's next log
    # maintenance pass (about once a second) fails that dir as an EIO in one of its logs would. "" = off.
    "unsafe.testing.log.dir.failure.file": (_file_name, ""),
    # Test-only: a file recording the durable size of each fsynced segment/index (broker/log/durability.py), so
    # that a chaos run can emulate a power loss after SIGKILL. "" (default) records nothing.
    "unsafe.testing.fsync.ledger": (str, ""),
    # Test-only: a file holding seconds (either sign) that the node adds to its wall clock (client/common/clock.py),
    # read about once a second; a chaos run's clock-skew fault writes and removes it. "": the plain wall clock.
    "unsafe.testing.clock.offset.file": (str, ""),
    "fetch.max.bytes": (_at_least(1024), 57671680),
    # Fetch sessions (KIP-227) the Kafka listener keeps at most (Kafka's name and default); 0: none, every fetch
    # answer has session id 0 and fetchers send full requests.
    "max.incremental.fetch.session.cache.slots": (_at_least(0), 1000),
    # the group coordinator (Kafka's names and defaults)
    "offsets.topic.num.partitions": (_at_least(1), 50),
    "offsets.topic.replication.factor": (_at_least(1), 3),
    "offsets.topic.segment.bytes": (_at_least(14), 104857600),
    "offsets.retention.minutes": (_at_least(1), 10080),
    "offsets.retention.check.interval.ms": (_at_least(1), 600000),
    "offset.metadata.max.bytes": (_at_least(0), 4096),
    "offsets.commit.timeout.ms": (_at_least(1), 5000),
    "group.initial.rebalance.delay.ms": (_at_least(0), 3000),
    "group.min.session.timeout.ms": (_at_least(1), 6000),
    "group.max.session.timeout.ms": (_at_least(1), 1800000),
    "group.max.size": (_at_least(1), 2**31 - 1),
    # KIP-848 consumer groups (Kafka's names and defaults)
    "group.consumer.session.timeout.ms": (_at_least(1), 45000),
    "group.consumer.heartbeat.interval.ms": (_at_least(1), 5000),
    "group.consumer.max.size": (_at_least(1), 2**31 - 1),
    "group.consumer.assignors": (_consumer_group_assignors, "uniform,range"),
    "group.consumer.min.session.timeout.ms": (_at_least(1), 45000),
    "group.consumer.max.session.timeout.ms": (_at_least(1), 60000),
    "group.consumer.min.heartbeat.interval.ms": (_at_least(1), 5000),
    "group.consumer.max.heartbeat.interval.ms": (_at_least(1), 15000),
    "group.consumer.migration.policy": (_migration_policy, "bidirectional"),
    # KIP-932 share groups (Kafka's names and defaults): the share-partitions' acquisition locks, delivery limit and
    # in-flight cap (read by each partition leader), the members' sessions (read by the group coordinator)
    "group.share.record.lock.duration.ms": (_at_least(1), 30000),
    "group.share.delivery.count.limit": (_at_least(1), 5),
    "group.share.partition.max.record.locks": (_at_least(1), 2000),
    "group.share.session.timeout.ms": (_at_least(1), 45000),
    "group.share.heartbeat.interval.ms": (_at_least(1), 5000),
    "group.share.max.size": (_at_least(1), 200),
    # the bounds of a share group's own share.session.timeout.ms, share.heartbeat.interval.ms and
    # share.record.lock.duration.ms group configs (checked by the active controller)
    "group.share.min.session.timeout.ms": (_at_least(1), 15000),
    "group.share.max.session.timeout.ms": (_at_least(1), 60000),
    "group.share.min.heartbeat.interval.ms": (_at_least(1), 5000),
    "group.share.max.heartbeat.interval.ms": (_at_least(1), 15000),
    "group.share.min.record.lock.duration.ms": (_at_least(1), 15000),
    "group.share.max.record.lock.duration.ms": (_at_least(1), 60000),
    # the share coordinator: share-partitions' durable state in __share_group_state
    "share.coordinator.state.topic.num.partitions": (_at_least(1), 50),
    "share.coordinator.state.topic.replication.factor": (_at_least(1), 3),
    "share.coordinator.state.topic.min.isr": (_at_least(1), 2),
    "share.coordinator.snapshot.update.records.per.snapshot": (_at_least(1), 500),
    "share.coordinator.write.timeout.ms": (_at_least(1), 5000),
    # the transaction coordinator (Kafka's names and defaults)
    "transaction.state.log.num.partitions": (_at_least(1), 50),
    "transaction.state.log.replication.factor": (_at_least(1), 3),
    "transaction.state.log.min.isr": (_at_least(1), 2),
    "transaction.state.log.segment.bytes": (_at_least(14), 104857600),
    "transaction.max.timeout.ms": (_at_least(1), 900000),
    "transactional.id.expiration.ms": (_at_least(1), 604800000),
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": (_at_least(1), 10000),
    "transaction.remove.expired.transaction.cleanup.interval.ms": (_at_least(1), 3600000),
    "socket.request.max.bytes": (_int, 104857600),
    # The Kafka listener closes a connection idle this long (Kafka's name and default).
    "connections.max.idle.ms": (_at_least(1), 600000),
    "connection.failed.authentication.delay.ms": (_at_least(0), 100),
    # The SASL mechanisms a SASL listener (SASL_PLAINTEXT, SASL_SSL) offers its clients, in order of preference.
    "sasl.enabled.mechanisms": (_sasl_mechanisms, "SCRAM-SHA-256,SCRAM-SHA-512"),
    # Authorization: ACLs from the metadata log, enforced on every listener once an authorizer is named.
    "authorizer.class.name": (_authorizer_name, ""),
    "super.users": (_super_users, ""),
    "allow.everyone.if.no.acl.found": (_bool, False),
    # client quotas (KIP-13): rates are measured over quota.window.num windows of quota.window.size.seconds
    "quota.window.num": (_at_least(2), 11),
    "quota.window.size.seconds": (_at_least(1), 1),
    # The built-in schema registry (Confluent's REST API, docs/schema-registry.md): "http://host:port", "" = off.
    "schema.registry.listeners": (_registry_listeners, ""),
    # Its security: "https://host:port" serves TLS with the node's ssl.* files; client certificates as the key below
    # says ("" = as ssl.client.auth); callers authenticate with HTTP Basic (a SCRAM user) or a client certificate
    # ("" = basic where a client listener uses SASL, else none); ACLs on SUBJECT resources with an authorizer.
    "schema.registry.ssl.client.auth": (_registry_client_auth, ""),
    "schema.registry.authentication": (_registry_authentication, ""),
    # The HTTP API (Confluent REST Proxy v3's resources, docs/http-api.md): "http://host:port", "" = off, or
    # "https://host:port" with the node's ssl.* files and client certificates as the next key says ("" = as
    # ssl.client.auth); and how it authenticates its callers (HTTP Basic against the SCRAM credentials, or none; a
    # verified client certificate names its caller either way).
    "http.listeners": (_http_listeners, ""),
    "http.ssl.client.auth": (_registry_client_auth, ""),
    "http.authentication": (_http_authentication, ""),
}


def flatten(table: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in table.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten(value, name + "."))
        else:
            out[name] = value
    return out


class NodeConfig:
    """Parsed, validated node properties; attribute access by Kafka name via ``config[name]``."""

    def __init__(self, properties: Mapping[str, Any]) -> None:
        props = flatten(properties)
        self._listener_client_auth = _listener_client_auth(props)
        unknown = sorted(set(props) - set(SCHEMA) - {k for k in props if k.startswith(LISTENER_PREFIX)})
        if unknown:
            raise ConfigError(f"unknown config '{unknown[0]}'")
        self._values: dict[str, Any] = {}
        self._set = frozenset(props)
        for name, (parse, default) in SCHEMA.items():
            raw = props.get(name, default)
            if raw is None:
                self._values[name] = None
                continue
            try:
                self._values[name] = parse(raw)
            except (TypeError, ValueError) as e:
                raise ConfigError(f"invalid value {raw!r} for '{name}': {e}") from None
        self._check()

    @classmethod
    def load(cls, path: str | Path) -> NodeConfig:
        try:
            data = tomllib.loads(Path(path).read_text())
        except FileNotFoundError:
            raise ConfigError(f"config file {path} not found") from None
        except tomllib.TOMLDecodeError as e:
            raise ConfigError(f"config file {path} is not valid TOML: {e}") from None
        return cls(data)

    def _check(self) -> None:
        for required in ("process.roles", "node.id", "controller.quorum.voters"):
            if self._values[required] is None:
                raise ConfigError(f"'{required}' is required")
        if self.is_controller and self.node_id not in {v.node_id for v in self.voters}:
            raise ConfigError(f"controller node {self.node_id} is not in controller.quorum.voters")
        if self.is_controller and self.controller_listener is None:
            raise ConfigError("a controller needs a CONTROLLER listener in 'listeners'")
        self._check_listeners()
        self._check_listener_client_auth()
        self._check_tls()
        self._check_authorizer()
        self._check_inter_node_authentication()
        if self.is_broker and self.broker_listener is None:
            raise ConfigError("a broker needs a listener in 'listeners' that is neither a controller nor a Kafka one")
        self._check_schema_registry()
        self._check_http_api()
        if self._values["connection.failed.authentication.delay.ms"] >= self._values["connections.max.idle.ms"]:
            raise ConfigError("connection.failed.authentication.delay.ms must be below connections.max.idle.ms")
        if self._values["group.min.session.timeout.ms"] > self._values["group.max.session.timeout.ms"]:
            raise ConfigError("group.min.session.timeout.ms must not exceed group.max.session.timeout.ms")
        if self._values["group.consumer.heartbeat.interval.ms"] >= self._values["group.consumer.session.timeout.ms"]:
            raise ConfigError(
                "group.consumer.heartbeat.interval.ms must be less than group.consumer.session.timeout.ms"
            )
        self._check_consumer_group_bounds()
        if self._values["group.share.heartbeat.interval.ms"] >= self._values["group.share.session.timeout.ms"]:
            raise ConfigError("group.share.heartbeat.interval.ms must be less than group.share.session.timeout.ms")
        # The share bounds bind only the groups' own configs: a node's group.share.* settings may lie outside them.
        for what in ("session.timeout.ms", "heartbeat.interval.ms", "record.lock.duration.ms"):
            if self._values[f"group.share.min.{what}"] > self._values[f"group.share.max.{what}"]:
                raise ConfigError(f"group.share.max.{what} must be greater than or equal to group.share.min.{what}")

    def _check_consumer_group_bounds(self) -> None:
        """Kafka's: each KIP-848 default lies within its bounds (which also bound the groups' own configs)."""
        for what in ("session.timeout.ms", "heartbeat.interval.ms"):
            value = self._values[f"group.consumer.{what}"]
            low, high = self._values[f"group.consumer.min.{what}"], self._values[f"group.consumer.max.{what}"]
            if low > high:
                raise ConfigError(
                    f"group.consumer.max.{what} must be greater than or equal to group.consumer.min.{what}"
                )
            if not low <= value <= high:
                raise ConfigError(
                    f"group.consumer.{what} must be between group.consumer.min.{what} ({low}) and "
                    f"group.consumer.max.{what} ({high})"
                )

    def _check_listeners(self) -> None:
        controller = {n.upper() for n in self._values["controller.listener.names"]}
        kafka = {n.upper() for n in self._values["kafka.listener.names"]}
        both = sorted(controller & kafka)
        if both:
            raise ConfigError(f"listener name {both[0]} is in both controller.listener.names and kafka.listener.names")
        listeners: dict[str, Endpoint] = self._values["listeners"]
        named = [n for n in listeners if n in kafka]
        if named and not self.is_broker:
            raise ConfigError(f"listener {named[0]} speaks Kafka's protocol, which only a broker serves")
        if len(named) > 1:
            raise ConfigError(f"only one Kafka listener is supported, not {', '.join(named)}")
        stray = [n for n in self._values["advertised.listeners"] if n in kafka and n not in listeners]
        if stray:
            raise ConfigError(f"advertised.listeners names {stray[0]}, which is not in 'listeners'")
        owners: dict[int, str] = {}
        for name, endpoint in listeners.items():
            other = owners.setdefault(endpoint.port, name) if endpoint.port else name
            if other != name:
                raise ConfigError(f"listeners {other} and {name} both use port {endpoint.port}")

    def _check_schema_registry(self) -> None:
        """The registry runs on brokers, on a port of its own, and authenticates as the broker's client listeners do,
        never less: plain HTTP is refused next to a TLS client listener (passwords would cross in clear), and no
        authentication next to a SASL one unless the registry requires client certificates."""
        endpoint: Endpoint | None = self._values["schema.registry.listeners"]
        if endpoint is None:
            # A controller-only node takes them (one set of properties serves every node); a broker would ignore them.
            given = [k for k in ("schema.registry.authentication", "schema.registry.ssl.client.auth") if k in self._set]
            if given and self.is_broker:
                raise ConfigError(f"{given[0]} is set but schema.registry.listeners is not: the broker has no registry")
            return
        if not self.is_broker:
            raise ConfigError("schema.registry.listeners is set but only a broker serves the schema registry")
        taken = {e.port: n for n, e in self._values["listeners"].items()}
        if endpoint.port in taken:
            raise ConfigError(
                f"schema.registry.listeners uses port {endpoint.port}, as listener {taken[endpoint.port]} does"
            )
        clients = [e for e in (self.broker_listener, self.kafka_listener) if e is not None]
        if not self.schema_registry_tls:
            if "schema.registry.ssl.client.auth" in self._set:
                raise ConfigError(
                    "schema.registry.ssl.client.auth is set but schema.registry.listeners is plain HTTP: client "
                    "certificates need https://host:port"
                )
            tls = [e.name for e in clients if self.listener_protocol(e.name) in TLS_PROTOCOLS]
            if tls:
                raise ConfigError(
                    f"schema.registry.listeners is plain HTTP, but listener {tls[0]} uses TLS: the registry would take "
                    "passwords (or let callers in) without it; use https://host:port"
                )
        else:
            if not (self._values["ssl.certificate.location"] and self._values["ssl.key.location"]):
                raise ConfigError(
                    "schema.registry.listeners is https: it needs ssl.certificate.location and ssl.key.location (PEM "
                    "files)"
                )
            if self.schema_registry_client_auth != "none" and not self._values["ssl.ca.location"]:
                raise ConfigError(
                    f"the schema registry's client certificates ({self.schema_registry_client_auth}) need "
                    "ssl.ca.location (the CA that signs them)"
                )
        sasl = [e.name for e in clients if self.requires_sasl(e)]
        open_to_all = self._values["schema.registry.authentication"] == "none"
        if open_to_all and sasl and self.schema_registry_client_auth != "required":
            raise ConfigError(
                f"schema.registry.authentication=none, but listener {sasl[0]} authenticates its clients with SASL: "
                "the registry would let anyone in as User:ANONYMOUS; use basic (or leave it empty), or require client "
                "certificates (schema.registry.ssl.client.auth=required)"
            )
        broker = self.broker_listener
        if (
            broker is not None
            and self.listener_protocol(broker.name) in TLS_PROTOCOLS
            and self._values["ssl.key.password"]
        ):
            # Its reader and admin client are odradek's own clients, whose settings take no key password yet.
            raise ConfigError(
                "the schema registry cannot reach a TLS broker listener with an encrypted key (ssl.key.password) yet: "
                "give the node an unencrypted key"
            )

    @property
    def schema_registry_tls(self) -> bool:
        """Whether the registry listener is https (the node's certificate; its client certificates below)."""
        return isinstance(self._values["schema.registry.listeners"], HttpsEndpoint)

    @property
    def schema_registry_client_auth(self) -> str:
        """The registry listener's client certificates: none, requested or required (schema.registry.ssl.client.auth,
        else ssl.client.auth); none on plain HTTP."""
        if not self.schema_registry_tls:
            return "none"
        return self._values["schema.registry.ssl.client.auth"] or self._values["ssl.client.auth"]

    @property
    def schema_registry_authentication(self) -> str:
        """``basic`` (HTTP Basic against the SCRAM credentials, or a verified client certificate) or ``none`` (the
        client certificate's principal if one is given, else User:ANONYMOUS); unset, as the broker's client
        listeners: basic where either uses SASL."""
        mode: str = self._values["schema.registry.authentication"]
        if mode:
            return mode
        sasl = any(self.requires_sasl(e) for e in (self.broker_listener, self.kafka_listener))
        return "basic" if sasl else "none"

    def _check_http_api(self) -> None:
        """The HTTP API runs on brokers, on a port of its own; it authenticates as the broker's client listeners do
        (HTTP Basic checked against the SCRAM credentials where they use SASL), never less, and is https wherever a
        client listener uses TLS."""
        endpoint: Endpoint | None = self._values["http.listeners"]
        mode = self._values["http.authentication"]
        if endpoint is None:
            # A controller-only node takes them (one set of properties serves every node); a broker would ignore them.
            given = [k for k in ("http.authentication", "http.ssl.client.auth") if k in self._set]
            if given and self.is_broker:
                raise ConfigError(f"{given[0]} is set but http.listeners is not: this broker has no HTTP API")
            return
        if not self.is_broker:
            raise ConfigError("http.listeners is set but only a broker serves the HTTP API")
        taken = {e.port: n for n, e in self._values["listeners"].items()}
        registry: Endpoint | None = self._values["schema.registry.listeners"]
        if registry is not None:
            taken[registry.port] = "schema.registry.listeners"
        if endpoint.port in taken:
            raise ConfigError(f"http.listeners uses port {endpoint.port}, as {taken[endpoint.port]} does")
        clients = [e for e in (self.broker_listener, self.kafka_listener) if e is not None]
        if not self.http_tls:
            if "http.ssl.client.auth" in self._set:
                raise ConfigError(
                    "http.ssl.client.auth is set but http.listeners is plain HTTP: client certificates need "
                    "https://host:port"
                )
            tls = [e.name for e in clients if self.listener_protocol(e.name) in TLS_PROTOCOLS]
            if tls:
                raise ConfigError(
                    f"http.listeners is plain HTTP, but listener {tls[0]} uses TLS: the HTTP API would take passwords "
                    "(or let callers in) without it; use https://host:port"
                )
        else:
            if not (self._values["ssl.certificate.location"] and self._values["ssl.key.location"]):
                raise ConfigError(
                    "http.listeners is https: it needs ssl.certificate.location and ssl.key.location (PEM files)"
                )
            if self.http_client_auth != "none" and not self._values["ssl.ca.location"]:
                raise ConfigError(
                    f"the HTTP API's client certificates ({self.http_client_auth}) need ssl.ca.location (the CA that "
                    "signs them)"
                )
        sasl = [e.name for e in clients if self.requires_sasl(e)]
        if mode == "none" and sasl and self.http_client_auth != "required":
            raise ConfigError(
                f"http.authentication=none, but listener {sasl[0]} authenticates its clients with SASL: the HTTP API "
                "would let anyone in as User:ANONYMOUS; use basic (or leave it empty), or require client "
                "certificates (http.ssl.client.auth=required)"
            )

    @property
    def http_tls(self) -> bool:
        """Whether the HTTP API's listener is https (the node's certificate; its client certificates below)."""
        return isinstance(self._values["http.listeners"], HttpsEndpoint)

    @property
    def http_client_auth(self) -> str:
        """The HTTP API's client certificates: none, requested or required (http.ssl.client.auth, else
        ssl.client.auth); none on plain HTTP."""
        if not self.http_tls:
            return "none"
        return self._values["http.ssl.client.auth"] or self._values["ssl.client.auth"]

    @property
    def http_listener(self) -> Endpoint | None:
        """Where the broker serves the HTTP API; None when it does not."""
        return self._values["http.listeners"]

    @property
    def advertised_http_listener(self) -> Endpoint | None:
        """The HTTP API's address other brokers forward requests to (registered with the broker): its host, or where
        that is a wildcard, the host of the advertised broker listener."""
        return self._advertised(self.http_listener)

    @property
    def http_authentication(self) -> str:
        """``basic`` (HTTP Basic, checked against the SCRAM credentials) or ``none`` (every caller is
        User:ANONYMOUS); unset, as the broker's client listeners: basic where either uses SASL."""
        mode: str = self._values["http.authentication"]
        if mode:
            return mode
        sasl = any(self.requires_sasl(e) for e in (self.broker_listener, self.kafka_listener))
        return "basic" if sasl else "none"

    @property
    def schema_registry_listener(self) -> Endpoint | None:
        """Where the broker serves the schema registry's REST API; None when it does not."""
        return self._values["schema.registry.listeners"]

    @property
    def advertised_schema_registry_listener(self) -> Endpoint | None:
        """The registry's address other brokers forward writes to: its host, or where that is a wildcard, the host
        of the advertised broker listener."""
        return self._advertised(self.schema_registry_listener)

    def _advertised(self, endpoint: Endpoint | None) -> Endpoint | None:
        if endpoint is None or endpoint.host not in ("0.0.0.0", "::"):
            return endpoint
        advertised = self.advertised_broker_listener
        host = advertised.host if advertised is not None and advertised.host not in ("0.0.0.0", "::") else "127.0.0.1"
        return Endpoint(endpoint.name, host, endpoint.port)

    def _check_listener_client_auth(self) -> None:
        """A per-listener ssl.client.auth must name a TLS listener of the layout: elsewhere it would do nothing."""
        known = {
            *self.all_listener_names(),
            *self._values["listener.security.protocol.map"],
            *self._names("controller.listener.names"),
            *self._names("kafka.listener.names"),
        }
        for name in self._listener_client_auth:
            if name not in known:
                raise ConfigError(f"{client_auth_key(name)} names no listener of this node's layout")
            if self.listener_protocol(name) not in TLS_PROTOCOLS:
                raise ConfigError(
                    f"{client_auth_key(name)} is set but listener {name} is {self.listener_protocol(name)}: client "
                    "authentication applies to SSL and SASL_SSL listeners"
                )

    def _check_tls(self) -> None:
        secure = [n for n in self.all_listener_names() if self.listener_protocol(n) in TLS_PROTOCOLS]
        if secure and not (self._values["ssl.certificate.location"] and self._values["ssl.key.location"]):
            raise ConfigError(
                f"listener {secure[0]} is {self.listener_protocol(secure[0])}: it needs ssl.certificate.location "
                "and ssl.key.location (PEM files)"
            )
        required = [n for n in secure if self.client_auth(n) == "required"]
        if required and not self._values["ssl.ca.location"]:
            raise ConfigError(
                f"{self._client_auth_source(required[0])}=required needs ssl.ca.location (the CA that signs client "
                "certificates)"
            )
        kafka = self._names("kafka.listener.names")
        grpc = [n for n in secure if n not in kafka and n in self._values["listeners"]]
        requested = [n for n in grpc if self.client_auth(n) == "requested"]
        if requested:
            # grpcio's server credentials offer "do not request" or "require and verify", nothing in between.
            raise ConfigError(
                f"{self._client_auth_source(requested[0])}=requested is not supported on the gRPC listener "
                f"{requested[0]} (gRPC servers can only require a client certificate or not ask for one): use none "
                "or required"
            )

    def client_auth(self, listener: str) -> str:
        """Listener ``listener``'s TLS client authentication (none, requested or required): its
        listener.name.<listener>.ssl.client.auth, else the node-wide ssl.client.auth."""
        return self._listener_client_auth.get(listener.upper(), self._values["ssl.client.auth"])

    def _client_auth_source(self, listener: str) -> str:
        """The key that gives listener ``listener`` its client authentication, for messages."""
        return client_auth_key(listener) if listener.upper() in self._listener_client_auth else "ssl.client.auth"

    def _check_authorizer(self) -> None:
        if self._values["authorizer.class.name"]:
            return
        for key in ("super.users", "allow.everyone.if.no.acl.found"):
            if key in self._set:
                raise ConfigError(f'{key} only applies with an authorizer: set authorizer.class.name = "odradek"')

    @property
    def authorizer_settings(self) -> AuthorizerSettings | None:
        """The ACL authorizer's settings, None when no authorizer is configured (every request allowed)."""
        if not self._values["authorizer.class.name"]:
            return None
        return AuthorizerSettings(self._values["super.users"], self._values["allow.everyone.if.no.acl.found"])

    def _check_inter_node_authentication(self) -> None:
        """Nodes never log in with SASL: brokers call each other's gRPC broker listener (replica fetches,
        transaction markers), so on a SASL one they must be able to authenticate with their certificates. The
        controller listener runs no SASL at all (its callers are nodes, and admin clients with certificates), so a
        SASL protocol there is refused rather than accepted and not applied."""
        controller_protocol = self.controller_protocol
        if controller_protocol in SASL_PROTOCOLS:
            name = self._values["controller.listener.names"][0]
            raise ConfigError(
                f"the controller listener {name} cannot be {controller_protocol}: odradek's controllers do not run "
                "SASL; use SSL with ssl.client.auth=required (nodes and admin clients then authenticate with their "
                "certificates)"
            )
        listener = self.broker_listener if self.is_broker else None
        if listener is None:
            return
        protocol = self.listener_protocol(listener.name)
        if protocol == "SASL_PLAINTEXT":
            raise ConfigError(
                f"the gRPC broker listener {listener.name} cannot be SASL_PLAINTEXT: brokers call each other there "
                "and do not log in with SASL; use SASL_SSL with ssl.client.auth=required (nodes then authenticate "
                "with their certificates), SSL or PLAINTEXT"
            )
        if protocol == "SASL_SSL" and self.client_auth(listener.name) != "required":
            raise ConfigError(
                f"the gRPC broker listener {listener.name} is SASL_SSL: it needs "
                f"{self._client_auth_source(listener.name)}=required, since brokers call each other there and "
                "authenticate with their certificates, not with SASL"
            )

    def kafka_fetch_refusal(self) -> str | None:
        """Why a follower cannot fetch over the leaders' Kafka listener (it has no SASL credentials of its own, so
        a SASL listener must accept its certificate), or None when it can."""
        name, protocol = self._kafka_listener_name(), self.kafka_protocol
        if protocol == "SASL_PLAINTEXT":
            return "the Kafka listener is SASL_PLAINTEXT and nodes do not log in with SASL"
        if name is not None and protocol == "SASL_SSL" and self.client_auth(name) == "none":
            source = self._client_auth_source(name)
            return f"the Kafka listener is SASL_SSL without client certificates ({source}=none)"
        return None

    def all_listener_names(self) -> list[str]:
        names = list(self._values["listeners"]) + list(self._values["advertised.listeners"])
        return list(dict.fromkeys(names))

    def listener_protocol(self, name: str) -> str:
        """The security protocol of listener ``name``: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL."""
        name = name.upper()
        mapped = self._values["listener.security.protocol.map"].get(name)
        if mapped is not None:
            return mapped
        return name if name in PROTOCOLS else "PLAINTEXT"

    @property
    def controller_protocol(self) -> str:
        """The protocol every node uses to reach the controllers: their listener's (controller.listener.names)."""
        return self.listener_protocol(self._values["controller.listener.names"][0])

    @property
    def inter_broker_protocol(self) -> str:
        """The protocol to reach other brokers' gRPC listeners: this node's own broker listener's (all brokers
        share one layout), or on a controller-only node, which has none, the controller listener's."""
        listener = self.broker_listener
        return self.listener_protocol(listener.name) if listener is not None else self.controller_protocol

    @property
    def kafka_protocol(self) -> str | None:
        """The Kafka listener's protocol (followers fetching with replica.fetch.protocol=kafka connect with it)."""
        name = self._kafka_listener_name()
        return None if name is None else self.listener_protocol(name)

    def _kafka_listener_name(self) -> str | None:
        """The Kafka listener's name: this node's own, else the first of kafka.listener.names (the layout's)."""
        names = self._values["kafka.listener.names"]
        own = self.kafka_listener
        return own.name if own is not None else names[0] if names else None

    def __getitem__(self, name: str) -> Any:
        return self._values[name]

    def is_set(self, name: str) -> bool:
        """Whether the config file gives ``name`` (rather than it taking odradek's default)."""
        return name in self._set

    @property
    def node_id(self) -> int:
        return self._values["node.id"]

    @property
    def roles(self) -> frozenset[str]:
        return self._values["process.roles"]

    @property
    def is_broker(self) -> bool:
        return "broker" in self.roles

    @property
    def is_controller(self) -> bool:
        return "controller" in self.roles

    @property
    def voters(self) -> list[Voter]:
        return self._values["controller.quorum.voters"]

    @property
    def log_dirs(self) -> list[str]:
        return self._values["log.dirs"]

    @property
    def metadata_log_dir(self) -> str:
        return self._values["metadata.log.dir"] or self.log_dirs[0]

    @property
    def controller_listener(self) -> Endpoint | None:
        names = self._names("controller.listener.names")
        return next((e for n, e in self._values["listeners"].items() if n in names), None)

    def _names(self, key: str) -> frozenset[str]:
        return frozenset(n.upper() for n in self._values[key])

    def _grpc(self, listeners: Mapping[str, Endpoint]) -> Endpoint | None:
        """The first listener that is neither a controller nor a Kafka one: the broker's gRPC listener."""
        other = self._names("controller.listener.names") | self._names("kafka.listener.names")
        return next((e for n, e in listeners.items() if n not in other), None)

    def _kafka(self, listeners: Mapping[str, Endpoint]) -> Endpoint | None:
        names = self._names("kafka.listener.names")
        return next((e for n, e in listeners.items() if n in names), None)

    @property
    def broker_listener(self) -> Endpoint | None:
        """Where the broker serves gRPC clients and replica fetches."""
        return self._grpc(self._values["listeners"])

    @property
    def advertised_broker_listener(self) -> Endpoint | None:
        return self._grpc(self._values["advertised.listeners"]) or self.broker_listener

    def requires_sasl(self, listener: Endpoint | None) -> bool:
        """Whether clients of ``listener`` must authenticate with SASL (SASL_PLAINTEXT or SASL_SSL)."""
        return listener is not None and self.listener_protocol(listener.name) in SASL_PROTOCOLS

    @property
    def sasl_mechanisms(self) -> tuple[str, ...]:
        return self._values["sasl.enabled.mechanisms"]

    @property
    def kafka_listener(self) -> Endpoint | None:
        """Where the broker serves Kafka's binary protocol; None without a listener named in kafka.listener.names."""
        return self._kafka(self._values["listeners"])

    @property
    def advertised_kafka_listener(self) -> Endpoint | None:
        """The Kafka listener's address registered for clients: its advertised.listeners entry, else the listener."""
        if self.kafka_listener is None:
            return None
        return self._kafka(self._values["advertised.listeners"]) or self.kafka_listener

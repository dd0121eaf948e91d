"""Request bodies and query strings into typed requests (requests.py), refusing what they cannot read: a body that
is not JSON, a field of the wrong type or one the route does not take (an unknown field is refused, not ignored),
a key or value that cannot be turned into bytes. Pure: no I/O, nothing decided but the shape."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qs

from odradek.broker.rest import errors
from odradek.broker.rest.requests import (
    EARLIEST,
    LATEST,
    RESET_TARGETS,
    SEARCH_STARTS,
    AddPartitions,
    AlterClientQuota,
    AlterTopicConfigs,
    ConfigChange,
    CreateTopic,
    DeleteScramUser,
    Payload,
    ProduceRecord,
    ReadRecords,
    RepublishRecords,
    ResetGroupOffsets,
    SearchFilter,
    SearchRecords,
    UpsertScramUser,
)
from odradek.broker.rest.search import canonical, json_path
from odradek.client.common import acls

# The consume endpoint's bounds (docs/http-api.md).
MAX_READ_RECORDS = 1000
MAX_READ_BYTES = 8 * 1024 * 1024
MAX_READ_TIMEOUT_MS = 30_000

PAYLOAD_TYPES = ("BINARY", "JSON", "STRING")
SCHEMA_TYPES = ("AVRO", "JSONSCHEMA", "PROTOBUF")
_SCHEMA_FIELDS = ("subject", "subject_name_strategy", "schema_id", "schema_version", "schema")
CONFIG_OPERATIONS = ("SET", "DELETE", "APPEND", "SUBTRACT")


class Query:
    """A query string's parameters (the last value of a repeated one); unknown ones refused by ``check``."""

    def __init__(self, query: str) -> None:
        self._values = parse_qs(query, keep_blank_values=True)

    def check(self, allowed: tuple[str, ...]) -> None:
        unknown = sorted(set(self._values) - set(allowed))
        if unknown:
            raise errors.bad_request(f"unknown query parameter '{unknown[0]}' (this route takes: {', '.join(allowed)})")

    def get(self, name: str) -> str | None:
        found = self._values.get(name)
        return found[-1] if found else None

    def number(self, name: str, default: int, low: int, high: int) -> int:
        text = self.get(name)
        if text is None:
            return default
        try:
            value = int(text)
        except ValueError:
            raise errors.bad_request(f"query parameter '{name}' must be a whole number, not {text!r}") from None
        if not low <= value <= high:
            raise errors.bad_request(f"query parameter '{name}' must be between {low} and {high}, not {value}")
        return value


def json_object(body: bytes) -> dict[str, Any]:
    """The body as a JSON object (400 when it is not JSON, or not an object)."""
    try:
        obj = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise errors.bad_request(f"the request body is not JSON: {e}") from None
    if not isinstance(obj, dict):
        raise errors.bad_request("the request body must be a JSON object")
    return obj


def _fields(obj: Mapping[str, Any], allowed: tuple[str, ...], what: str) -> None:
    unknown = sorted(set(obj) - set(allowed))
    if unknown:
        raise errors.bad_request(f"unknown field '{unknown[0]}' in {what} (it takes: {', '.join(allowed)})")


def _typed(obj: Mapping[str, Any], name: str, kind: type | tuple[type, ...], what: str, required: bool = False) -> Any:
    value = obj.get(name)
    if value is None:
        if required:
            raise errors.bad_request(f"{what} needs '{name}'")
        return None
    if isinstance(value, bool) and kind is not bool:
        raise errors.bad_request(f"'{name}' in {what} must be {_kind_name(kind)}")
    if not isinstance(value, kind):
        raise errors.bad_request(f"'{name}' in {what} must be {_kind_name(kind)}")
    return value


def _kind_name(kind: type | tuple[type, ...]) -> str:
    names = {str: "a string", int: "a whole number", bool: "true or false", list: "a list", dict: "an object"}
    return " or ".join(names.get(k, k.__name__) for k in (kind if isinstance(kind, tuple) else (kind,)))


# ---- topics and configs ----


def create_topic(body: bytes) -> CreateTopic:
    what = "a topic creation"
    obj = json_object(body)
    _fields(
        obj,
        ("topic_name", "partitions_count", "replication_factor", "configs", "replicas_assignments", "validate_only"),
        what,
    )
    name = _typed(obj, "topic_name", str, what, required=True)
    configs = []
    for entry in _typed(obj, "configs", list, what) or ():
        if not isinstance(entry, dict):
            raise errors.bad_request("each of 'configs' must be an object with a name and a value")
        _fields(entry, ("name", "value"), "a config")
        value = _typed(entry, "value", str, "a config")
        if value is None:
            raise errors.bad_request(f"config '{entry.get('name')}' needs a value")
        configs.append((_typed(entry, "name", str, "a config", required=True), value))
    assignments = _assignments(_typed(obj, "replicas_assignments", dict, what) or {})
    return CreateTopic(
        name,
        _count(obj, "partitions_count", what),
        _count(obj, "replication_factor", what),
        tuple(configs),
        assignments,
        bool(_typed(obj, "validate_only", bool, what)),
    )


INT32_MAX = 2**31 - 1  # counts and broker ids are Kafka INT32s


def _count(obj: Mapping[str, Any], name: str, what: str) -> int:
    value = _typed(obj, name, int, what)
    if value is None:
        return -1
    if not 1 <= value <= INT32_MAX:
        raise errors.bad_request(f"'{name}' must be from 1 to {INT32_MAX}")
    return int(value)


def _assignments(found: Mapping[str, Any]) -> tuple[tuple[int, ...], ...]:
    """``{"0": [1, 2], "1": [2, 3]}``: every partition from 0 up, each a list of broker ids."""
    try:
        by_partition = {int(k): v for k, v in found.items()}
    except ValueError:
        raise errors.bad_request("'replicas_assignments' maps partition ids (0, 1, ...) to broker ids") from None
    if sorted(by_partition) != list(range(len(by_partition))):
        raise errors.bad_request("'replicas_assignments' must name every partition from 0 up")
    out = []
    for index in range(len(by_partition)):
        replicas = by_partition[index]
        if not isinstance(replicas, list) or not all(
            isinstance(r, int) and not isinstance(r, bool) and 0 <= r <= INT32_MAX for r in replicas
        ):
            raise errors.bad_request(f"'replicas_assignments' of partition {index} must be a list of broker ids")
        out.append(tuple(replicas))
    return tuple(out)


def config_value(body: bytes) -> str:
    """PUT .../configs/{name}: ``{"value": "..."}``."""
    obj = json_object(body)
    _fields(obj, ("value",), "a config update")
    value = _typed(obj, "value", str, "a config update")
    if value is None:
        raise errors.bad_request("a config update needs a 'value' (DELETE the config to reset it)")
    return str(value)


def alter_configs(topic: str, body: bytes) -> AlterTopicConfigs:
    """POST .../configs:alter: ``{"data": [{"name", "value", "operation"}], "validate_only"}``; the operation is
    SET unless given (DELETE takes no value)."""
    what = "a config batch"
    obj = json_object(body)
    _fields(obj, ("data", "validate_only"), what)
    changes = []
    for entry in _typed(obj, "data", list, what, required=True):
        if not isinstance(entry, dict):
            raise errors.bad_request("each of 'data' must be an object with a name")
        _fields(entry, ("name", "value", "operation"), "a config change")
        name = _typed(entry, "name", str, "a config change", required=True)
        operation = str(_typed(entry, "operation", str, "a config change") or "SET").upper()
        if operation not in CONFIG_OPERATIONS:
            raise errors.bad_request(f"config operation must be one of {', '.join(CONFIG_OPERATIONS)}, not {operation}")
        value = _typed(entry, "value", str, "a config change")
        if value is None and operation != "DELETE":
            raise errors.bad_request(f"config '{name}' needs a value for {operation}")
        changes.append(ConfigChange(name, operation, value or ""))
    if not changes:
        raise errors.bad_request("a config batch needs at least one change in 'data'")
    return AlterTopicConfigs(topic, tuple(changes), bool(_typed(obj, "validate_only", bool, what)))


# ---- records ----


def produce_record(topic: str, body: bytes) -> ProduceRecord:
    """Confluent v3's produce body: ``partition_id``, ``key`` and ``value`` (``{"type", "data"}``), ``headers``
    (``[{"name", "value"}]``, values base64) and ``timestamp`` (ISO 8601, or milliseconds since the epoch)."""
    what = "a produce request"
    obj = json_object(body)
    _fields(obj, ("partition_id", "key", "value", "headers", "timestamp"), what)
    partition = _typed(obj, "partition_id", int, what)
    if partition is not None and partition < 0:
        raise errors.bad_request("'partition_id' must not be negative")
    headers = []
    for entry in _typed(obj, "headers", list, what) or ():
        if not isinstance(entry, dict):
            raise errors.bad_request("each header must be an object with a name and a value")
        _fields(entry, ("name", "value"), "a header")
        name = _typed(entry, "name", str, "a header", required=True)
        value = _typed(entry, "value", str, "a header")
        headers.append((name, None if value is None else _base64(value, f"header '{name}'")))
    return ProduceRecord(
        topic,
        partition,
        payload(obj.get("key"), "key"),
        payload(obj.get("value"), "value"),
        tuple(headers),
        _timestamp(obj.get("timestamp")),
    )


def payload(obj: object, what: str) -> Payload | None:
    """A key or value: None for none (a null record part); its type JSON unless given."""
    if obj is None:
        return None
    if not isinstance(obj, dict):
        raise errors.bad_request(f"'{what}' must be an object with a type and data")
    schema = [f for f in _SCHEMA_FIELDS if obj.get(f) is not None]
    kind = str(obj.get("type") or "JSON").upper()
    if schema or kind in SCHEMA_TYPES:
        raise errors.invalid_payload(
            f"the {what} is {kind if kind in SCHEMA_TYPES else 'given a schema'}: schemas are not supported yet by "
            "odradek's HTTP API (produce BINARY, JSON or STRING)"
        )
    _fields(obj, ("type", "data"), f"the {what}")
    if kind not in PAYLOAD_TYPES:
        raise errors.invalid_payload(f"the {what}'s type must be one of {', '.join(PAYLOAD_TYPES)}, not {kind}")
    data = obj.get("data")
    if data is None:
        return Payload(None, kind)
    if kind == "JSON":
        return Payload(json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode(), kind)
    if not isinstance(data, str):
        raise errors.invalid_payload(f"the {what}'s data must be a string for type {kind}")
    return Payload(_base64(data, f"the {what}") if kind == "BINARY" else data.encode(), kind)


def _base64(text: str, what: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise errors.invalid_payload(f"{what} is not base64") from None


def _timestamp(value: object) -> int | None:
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 0:
            raise errors.bad_request("'timestamp' must not be negative")
        return value
    if isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            raise errors.bad_request(f"'timestamp' {value!r} is not an ISO 8601 date-time") from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        millis = int(moment.timestamp() * 1000)
        if millis < 0:
            raise errors.bad_request("'timestamp' must not be before 1970")
        return millis
    raise errors.bad_request("'timestamp' must be an ISO 8601 date-time or milliseconds since the epoch")


READ_PARAMETERS = ("offset", "timestamp", "max_records", "max_bytes", "timeout_ms")


def read_records(topic: str, partition: int, query: Query) -> ReadRecords:
    """The consume endpoint's query: ``offset`` (a number, ``earliest`` or ``latest``; earliest by default) or
    ``timestamp`` (milliseconds or ISO 8601), and its bounds."""
    query.check(READ_PARAMETERS)
    offset_text, time_text = query.get("offset"), query.get("timestamp")
    if offset_text is not None and time_text is not None:
        raise errors.bad_request("give 'offset' or 'timestamp', not both")
    offset: int | str = EARLIEST
    if offset_text is not None:
        if offset_text.lower() in (EARLIEST, LATEST):
            offset = offset_text.lower()
        else:
            offset = query.number("offset", 0, 0, 2**63 - 1)
    timestamp = None
    if time_text is not None:
        timestamp = _timestamp(int(time_text) if time_text.isdigit() else time_text)
    return ReadRecords(
        topic,
        partition,
        offset,
        timestamp,
        query.number("max_records", 100, 1, MAX_READ_RECORDS),
        query.number("max_bytes", 1024 * 1024, 1, MAX_READ_BYTES),
        query.number("timeout_ms", 1000, 0, MAX_READ_TIMEOUT_MS),
    )


# ---- ACLs ----

_ACL_FIELDS = ("resource_type", "resource_name", "pattern_type", "principal", "host", "operation", "permission")


def _enum(kind: Any, text: object, name: str) -> Any:
    if not isinstance(text, str):
        raise errors.bad_request(f"'{name}' must be a string")
    try:
        return kind.parse(text)
    except ValueError as e:
        raise errors.bad_request(f"'{name}': {e}") from None


def acl_binding(body: bytes) -> acls.AclBinding:
    """POST .../acls: every field of the binding, Confluent's names and values (TOPIC, LITERAL, READ, ALLOW)."""
    what = "an ACL"
    obj = json_object(body)
    _fields(obj, _ACL_FIELDS, what)
    for name in _ACL_FIELDS:
        _typed(obj, name, str, what, required=True)
    return acls.AclBinding(
        _enum(acls.ResourceType, obj["resource_type"], "resource_type"),
        obj["resource_name"],
        _enum(acls.PatternType, obj["pattern_type"], "pattern_type"),
        obj["principal"],
        obj["host"],
        _enum(acls.AclOperation, obj["operation"], "operation"),
        _enum(acls.AclPermissionType, obj["permission"], "permission"),
    )


def acl_filter(query: Query, *, delete: bool) -> acls.AclBindingFilter:
    """GET and DELETE .../acls: the query's filter; a missing parameter matches anything, but a delete must name
    the resource type, pattern type, operation and permission (ANY for all), as Confluent's does."""
    query.check(_ACL_FIELDS)
    if delete:
        missing = [n for n in ("resource_type", "pattern_type", "operation", "permission") if query.get(n) is None]
        if missing:
            raise errors.bad_request(f"deleting ACLs needs '{missing[0]}' (ANY matches every value)")
    kinds: dict[str, Any] = {
        "resource_type": acls.ResourceType,
        "pattern_type": acls.PatternType,
        "operation": acls.AclOperation,
        "permission": acls.AclPermissionType,
    }
    values: dict[str, Any] = {}
    for name in _ACL_FIELDS:
        text = query.get(name)
        values[name] = None if text is None else _enum(kinds[name], text, name) if name in kinds else text
    return acls.AclBindingFilter(**values)


# ---- odradek's own, for the web console (docs/console.md) ----

# A search's bounds: what one page may return, scan and take.
MAX_SEARCH_MATCHES = 1000
MAX_SEARCH_SCANNED = 10_000_000
MAX_SEARCH_TIMEOUT_MS = 60_000
MAX_SEARCH_TAIL = 100_000
MAX_REPUBLISH_RECORDS = 10_000
QUOTA_ENTITY_TYPES = ("user", "client-id")
SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
MIN_SCRAM_ITERATIONS, MAX_SCRAM_ITERATIONS = 4096, 16384


def _bounded(obj: Mapping[str, Any], name: str, default: int, low: int, high: int, what: str) -> int:
    value = _typed(obj, name, int, what)
    if value is None:
        return default
    if not low <= value <= high:
        raise errors.bad_request(f"'{name}' in {what} must be between {low} and {high}, not {value}")
    return int(value)


def _text(obj: Mapping[str, Any], name: str, what: str) -> bytes | None:
    value = _typed(obj, name, str, what)
    return None if value is None else str(value).encode()


def _numbers(obj: Mapping[str, Any], name: str, what: str) -> tuple[int, ...] | None:
    found = _typed(obj, name, list, what)
    if found is None:
        return None
    if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in found):
        raise errors.bad_request(f"'{name}' in {what} must be a list of whole numbers")
    return tuple(found)


def _positions(entries: list[Any], what: str, limit: int) -> tuple[tuple[int, int], ...]:
    """``[{"partition_id", "offset"}]`` as (partition, offset) pairs, at most ``limit``."""
    if len(entries) > limit:
        raise errors.bad_request(f"{what} names {len(entries)} records: at most {limit} at a time")
    out = []
    for entry in entries:
        if not isinstance(entry, dict):
            raise errors.bad_request(f"each of {what} must be an object with a partition_id and an offset")
        _fields(entry, ("partition_id", "offset"), what)
        partition = _typed(entry, "partition_id", int, what, required=True)
        offset = _typed(entry, "offset", int, what, required=True)
        if partition < 0 or offset < 0:
            raise errors.bad_request(f"partition_id and offset in {what} must not be negative")
        out.append((int(partition), int(offset)))
    return tuple(out)


def add_partitions(topic: str, body: bytes) -> AddPartitions:
    """PATCH .../topics/{topic_name}: ``{"partitions_count": N}``, the new total."""
    what = "a topic update"
    obj = json_object(body)
    _fields(obj, ("partitions_count",), what)
    count = _typed(obj, "partitions_count", int, what, required=True)
    if not 1 <= count <= INT32_MAX:
        raise errors.bad_request(f"'partitions_count' must be from 1 to {INT32_MAX}")
    return AddPartitions(topic, int(count))


def search_filter(obj: object) -> SearchFilter:
    """A search's ``filter``: ``key`` (exact), ``value_contains``, ``json_path`` with ``json_value`` (any JSON
    value; without it the path must exist), ``header`` with ``header_value`` (exact); texts as UTF-8."""
    if obj is None:
        return SearchFilter()
    what = "a search filter"
    if not isinstance(obj, dict):
        raise errors.bad_request("'filter' must be an object")
    _fields(obj, ("key", "value_contains", "json_path", "json_value", "header", "header_value"), what)
    path_text = _typed(obj, "json_path", str, what)
    if "json_value" in obj and path_text is None:
        raise errors.bad_request("'json_value' needs a 'json_path'")
    header = _typed(obj, "header", str, what)
    if obj.get("header_value") is not None and header is None:
        raise errors.bad_request("'header_value' needs a 'header'")
    return SearchFilter(
        key=_text(obj, "key", what),
        value_contains=_text(obj, "value_contains", what) or None,
        json_path=None if path_text is None else json_path(path_text),
        json_value=canonical(obj["json_value"]) if "json_value" in obj else None,
        header=header,
        header_value=_text(obj, "header_value", what),
    )


def search_records(topic: str, body: bytes) -> SearchRecords:
    """POST .../records:search (docs/console.md)."""
    what = "a search"
    obj = json_object(body)
    _fields(
        obj,
        (
            "partitions",
            "start",
            "offset",
            "timestamp",
            "tail",
            "cursor",
            "filter",
            "max_matches",
            "max_scanned",
            "timeout_ms",
            "decode",
        ),
        what,
    )
    start = str(_typed(obj, "start", str, what) or "earliest").lower()
    if start not in SEARCH_STARTS:
        raise errors.bad_request(f"'start' must be one of {', '.join(SEARCH_STARTS)}, not {start!r}")
    offset = _typed(obj, "offset", int, what)
    if start == "offset" and (offset is None or offset < 0):
        raise errors.bad_request("start=offset needs an 'offset' (a whole number, 0 or more)")
    timestamp = _timestamp(obj.get("timestamp"))
    if start == "timestamp" and timestamp is None:
        raise errors.bad_request("start=timestamp needs a 'timestamp' (milliseconds or ISO 8601)")
    cursor = _positions(_typed(obj, "cursor", list, what) or [], "'cursor'", 100_000)
    return SearchRecords(
        topic,
        _numbers(obj, "partitions", what),
        start,
        int(offset or 0),
        timestamp or 0,
        _bounded(obj, "tail", 100, 1, MAX_SEARCH_TAIL, what),
        cursor,
        search_filter(obj.get("filter")),
        _bounded(obj, "max_matches", 100, 1, MAX_SEARCH_MATCHES, what),
        _bounded(obj, "max_scanned", 1_000_000, 1, MAX_SEARCH_SCANNED, what),
        _bounded(obj, "timeout_ms", 10_000, 1, MAX_SEARCH_TIMEOUT_MS, what),
        bool(_typed(obj, "decode", bool, what)),
    )


def republish_records(topic: str, body: bytes) -> RepublishRecords:
    """POST .../records:republish: ``destination``, and ``records`` (``[{"partition_id", "offset"}]``) or a range
    (``partition_id``, ``start_offset``, ``end_offset`` excluded); ``same_partition``, ``keep_timestamps``."""
    what = "a republish request"
    obj = json_object(body)
    _fields(
        obj,
        ("destination", "records", "partition_id", "start_offset", "end_offset", "same_partition", "keep_timestamps"),
        what,
    )
    destination = _typed(obj, "destination", str, what, required=True)
    records = _positions(_typed(obj, "records", list, what) or [], "'records'", MAX_REPUBLISH_RECORDS)
    partition = _typed(obj, "partition_id", int, what)
    if bool(records) == (partition is not None):
        raise errors.bad_request("a republish takes either 'records' or a range ('partition_id', 'start_offset', ...)")
    start = end = 0
    if partition is not None:
        start = _typed(obj, "start_offset", int, what, required=True)
        end = _typed(obj, "end_offset", int, what, required=True)
        if partition < 0 or start < 0 or end <= start:
            raise errors.bad_request("a republish range needs 0 <= start_offset < end_offset and a partition_id >= 0")
        if end - start > MAX_REPUBLISH_RECORDS:
            raise errors.bad_request(f"a republish range covers at most {MAX_REPUBLISH_RECORDS} offsets")
    elif any(k in obj for k in ("start_offset", "end_offset")):
        raise errors.bad_request("'start_offset' and 'end_offset' go with 'partition_id', not with 'records'")
    return RepublishRecords(
        topic,
        destination,
        records,
        partition,
        int(start),
        int(end),
        bool(_typed(obj, "same_partition", bool, what)),
        bool(_typed(obj, "keep_timestamps", bool, what)),
    )


def reset_offsets(group: str, body: bytes) -> ResetGroupOffsets:
    """POST .../consumer-groups/{id}/offsets:reset: ``to`` (earliest, latest, offset, timestamp), ``offset`` or
    ``timestamp`` for those, ``topics``, ``partitions`` (of one topic) and ``dry_run``."""
    what = "an offset reset"
    obj = json_object(body)
    _fields(obj, ("to", "offset", "timestamp", "topics", "partitions", "dry_run"), what)
    to = str(_typed(obj, "to", str, what, required=True)).lower()
    if to not in RESET_TARGETS:
        raise errors.bad_request(f"'to' must be one of {', '.join(RESET_TARGETS)}, not {to!r}")
    offset = _typed(obj, "offset", int, what)
    if (to == "offset") != (offset is not None) or (offset is not None and offset < 0):
        raise errors.bad_request("'offset' (0 or more) goes with to=offset, and only with it")
    timestamp = _timestamp(obj.get("timestamp"))
    if (to == "timestamp") != (timestamp is not None):
        raise errors.bad_request("'timestamp' goes with to=timestamp, and only with it")
    topics = _typed(obj, "topics", list, what) or []
    if not all(isinstance(t, str) and t for t in topics):
        raise errors.bad_request("'topics' must be a list of topic names")
    return ResetGroupOffsets(
        group,
        to,
        int(offset or 0),
        timestamp or 0,
        tuple(topics),
        _numbers(obj, "partitions", what) or (),
        bool(_typed(obj, "dry_run", bool, what)),
    )


def _mechanism(value: object) -> str:
    mechanism = str(value or "SCRAM-SHA-256").upper()
    if mechanism not in SCRAM_MECHANISMS:
        raise errors.bad_request(f"'mechanism' must be one of {', '.join(SCRAM_MECHANISMS)}, not {value!r}")
    return mechanism


def scram_user(body: bytes) -> UpsertScramUser:
    """POST .../user-scram-credentials: ``user``, ``password``, ``mechanism`` (SCRAM-SHA-256 by default) and
    ``iterations`` (4096 by default, up to 16384)."""
    what = "a SCRAM credential"
    obj = json_object(body)
    _fields(obj, ("user", "password", "mechanism", "iterations"), what)
    user = _typed(obj, "user", str, what, required=True)
    password = _typed(obj, "password", str, what, required=True)
    if not user or not password:
        raise errors.bad_request("the user and password of a SCRAM credential must not be empty")
    mechanism = _mechanism(_typed(obj, "mechanism", str, what))
    iterations = _bounded(obj, "iterations", MIN_SCRAM_ITERATIONS, MIN_SCRAM_ITERATIONS, MAX_SCRAM_ITERATIONS, what)
    return UpsertScramUser(user, mechanism, password, iterations)


def scram_deletion(user: str, query: Query) -> DeleteScramUser:
    """DELETE .../user-scram-credentials/{user}?mechanism=..."""
    mechanism = query.get("mechanism")
    if mechanism is None:
        raise errors.bad_request("deleting a SCRAM credential needs 'mechanism' (SCRAM-SHA-256 or SCRAM-SHA-512)")
    return DeleteScramUser(user, _mechanism(mechanism))


def client_quota(body: bytes) -> AlterClientQuota:
    """POST .../client-quotas:alter: ``entity`` (``[{"entity_type": "user" or "client-id", "name"}]``, a null name
    being the type's default), ``set`` (``{"producer_byte_rate": 1048576, ...}``) and ``remove`` (keys)."""
    what = "a client quota change"
    obj = json_object(body)
    _fields(obj, ("entity", "set", "remove"), what)
    entity = []
    for entry in _typed(obj, "entity", list, what, required=True):
        if not isinstance(entry, dict):
            raise errors.bad_request("each of 'entity' must be an object with an entity_type and a name")
        _fields(entry, ("entity_type", "name"), "a quota entity")
        kind = _typed(entry, "entity_type", str, "a quota entity", required=True)
        if kind not in QUOTA_ENTITY_TYPES:
            raise errors.bad_request(f"'entity_type' must be one of {', '.join(QUOTA_ENTITY_TYPES)}, not {kind!r}")
        entity.append((str(kind), _typed(entry, "name", str, "a quota entity")))
    if not entity or len({k for k, _ in entity}) != len(entity):
        raise errors.bad_request("'entity' names a user, a client id or both, each once")
    values = _typed(obj, "set", dict, what) or {}
    for key, value in values.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            raise errors.bad_request(f"quota '{key}' must be a positive number")
    removed = _typed(obj, "remove", list, what) or []
    if not all(isinstance(k, str) for k in removed):
        raise errors.bad_request("'remove' must be a list of quota names")
    if not values and not removed:
        raise errors.bad_request("a client quota change needs 'set' or 'remove'")
    return AlterClientQuota(tuple(entity), tuple((k, float(v)) for k, v in values.items()), tuple(removed))

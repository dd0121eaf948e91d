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
    AlterTopicConfigs,
    ConfigChange,
    CreateTopic,
    Payload,
    ProduceRecord,
    ReadRecords,
)
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


def _count(obj: Mapping[str, Any], name: str, what: str) -> int:
    value = _typed(obj, name, int, what)
    if value is None:
        return -1
    if value < 1:
        raise errors.bad_request(f"'{name}' must be at least 1")
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
        if not isinstance(replicas, list) or not all(isinstance(r, int) and not isinstance(r, bool) for r in replicas):
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

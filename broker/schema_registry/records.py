"""The records of the ``_schemas`` topic: JSON keys and values in the layout Confluent documents for its own
``_schemas`` topic (``{"keytype": "SCHEMA", "subject": ..., "version": ..., "magic": 1}`` and so on), so that the
topic reads the same to anyone who knows Confluent's. The topic is compacted: the last value of a key is the state,
a null value (tombstone) removes it.

Beyond Confluent: ``ID_FLOOR`` holds the next schema id. A hard delete tombstones a version, and once compaction
removes the version that held the highest id, nothing else would keep a rebuilt registry from giving that id out
again; the floor does. Keys of a type this codec does not know are skipped on replay.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

SCHEMAS_TOPIC = "_schemas"


@dataclass(frozen=True, slots=True)
class Reference:
    name: str
    subject: str
    version: int

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "subject": self.subject, "version": self.version}


@dataclass(frozen=True, slots=True)
class SchemaValue:
    """One version of a subject."""

    subject: str
    version: int
    id: int
    schema_type: str
    schema: str
    references: tuple[Reference, ...] = ()
    deleted: bool = False


@dataclass(frozen=True, slots=True)
class SchemaKey:
    subject: str
    version: int


@dataclass(frozen=True, slots=True)
class ConfigKey:
    subject: str | None  # None: the global config


@dataclass(frozen=True, slots=True)
class ModeKey:
    subject: str | None


@dataclass(frozen=True, slots=True)
class IdFloorKey:
    pass


Key = SchemaKey | ConfigKey | ModeKey | IdFloorKey
# SchemaValue for a SchemaKey, the level for a ConfigKey, the mode for a ModeKey, the next id for IdFloorKey.
Value = SchemaValue | str | int
Record = tuple[Key, Value | None]


class RecordError(ValueError):
    """A record this codec cannot read."""


def _dump(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj, separators=(",", ":"), sort_keys=False).encode()


def encode_key(key: Key) -> bytes:
    if isinstance(key, SchemaKey):
        return _dump({"keytype": "SCHEMA", "subject": key.subject, "version": key.version, "magic": 1})
    if isinstance(key, ConfigKey):
        return _dump({"keytype": "CONFIG", "subject": key.subject, "magic": 0})
    if isinstance(key, ModeKey):
        return _dump({"keytype": "MODE", "subject": key.subject, "magic": 0})
    return _dump({"keytype": "ID_FLOOR", "magic": 0})


def encode_value(key: Key, value: Value | None) -> bytes | None:
    if value is None:
        return None
    if isinstance(key, SchemaKey) and isinstance(value, SchemaValue):
        out: dict[str, Any] = {
            "subject": value.subject,
            "version": value.version,
            "id": value.id,
            "schemaType": value.schema_type,
            "schema": value.schema,
            "deleted": value.deleted,
        }
        if value.references:
            out["references"] = [r.to_json() for r in value.references]
        return _dump(out)
    if isinstance(key, ConfigKey) and isinstance(value, str):
        return _dump({"compatibilityLevel": value})
    if isinstance(key, ModeKey) and isinstance(value, str):
        return _dump({"mode": value})
    if isinstance(key, IdFloorKey) and isinstance(value, int):
        return _dump({"next_id": value})
    raise TypeError(f"value {value!r} does not go with key {key!r}")


def _object(data: bytes, what: str) -> dict[str, Any]:
    try:
        obj = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise RecordError(f"{what} is not JSON: {e}") from None
    if not isinstance(obj, dict):
        raise RecordError(f"{what} is not a JSON object")
    return obj


def decode(key_bytes: bytes, value_bytes: bytes | None) -> Record | None:
    """The record, or None for a key type this codec does not know (skipped). Raises RecordError."""
    k = _object(key_bytes, "key")
    keytype = k.get("keytype")
    try:
        key: Key
        if keytype == "SCHEMA":
            key = SchemaKey(str(k["subject"]), int(k["version"]))
        elif keytype == "CONFIG":
            key = ConfigKey(None if k.get("subject") is None else str(k["subject"]))
        elif keytype == "MODE":
            key = ModeKey(None if k.get("subject") is None else str(k["subject"]))
        elif keytype == "ID_FLOOR":
            key = IdFloorKey()
        else:
            return None
        if value_bytes is None:
            return key, None
        v = _object(value_bytes, "value")
        if isinstance(key, SchemaKey):
            refs = tuple(
                Reference(str(r["name"]), str(r["subject"]), int(r["version"])) for r in v.get("references") or ()
            )
            return key, SchemaValue(
                str(v["subject"]),
                int(v["version"]),
                int(v["id"]),
                str(v.get("schemaType") or "AVRO"),
                str(v["schema"]),
                refs,
                bool(v.get("deleted", False)),
            )
        if isinstance(key, ConfigKey):
            return key, str(v["compatibilityLevel"])
        if isinstance(key, ModeKey):
            return key, str(v["mode"])
        return key, int(v["next_id"])
    except (KeyError, TypeError, ValueError) as e:
        raise RecordError(f"{keytype} record: {e!r}") from None

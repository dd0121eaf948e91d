"""The HTTP adapter: Confluent's paths, query parameters and JSON bodies into typed requests (requests.py), and
nothing else; the service decides. A path Confluent serves but odradek does not yet gets a 501 error saying so; any
other path 404, a known path with another method 405, both as Confluent's JSON error bodies."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from odradek.broker.schema_registry import errors
from odradek.broker.schema_registry import requests as rq
from odradek.broker.schema_registry.core import SchemaInput, parse_version
from odradek.broker.schema_registry.errors import RegistryError
from odradek.broker.schema_registry.formats import check_type
from odradek.broker.schema_registry.records import Reference

# Confluent endpoints outside what odradek serves so far (docs/schema-registry.md lists them).
NOT_IMPLEMENTED = {
    "schemas/guids": "schema GUIDs (/schemas/guids)",
    "associations": "associations (/associations)",
    "exporters": "schema linking (/exporters)",
    "dek-registry": "client-side field level encryption (/dek-registry)",
    "v1": "the metadata API (/v1/metadata)",
}


class Query:
    def __init__(self, query: str) -> None:
        self._values = parse_qs(query, keep_blank_values=True)

    def text(self, name: str, default: str = "") -> str:
        return self._values.get(name, [default])[-1]

    def flag(self, name: str) -> bool:
        """Confluent's boolean parameters: "true" (any case) is true, anything else false."""
        return self.text(name).lower() == "true"


def _json(body: bytes) -> Any:
    try:
        return json.loads(body or b"null")
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise RegistryError(400, 400, f"the request body is not JSON: {e}") from None


def schema_input(body: bytes) -> SchemaInput:
    """A schema request body: ``schema``, ``schemaType``, ``references``, and in IMPORT mode ``id`` and ``version``."""
    obj = _json(body)
    if not isinstance(obj, dict):
        raise errors.unprocessable("the request body must be a JSON object")
    if not isinstance(obj.get("schema"), str):
        raise errors.invalid_schema("the body needs a 'schema' string")
    for unsupported in ("metadata", "ruleSet"):
        if obj.get(unsupported) is not None:
            raise errors.invalid_schema(f"'{unsupported}' (data contracts) is not supported yet by odradek")
    schema_type = check_type(str(obj.get("schemaType") or ""))
    refs = obj.get("references") or []
    if not isinstance(refs, list):
        raise errors.invalid_schema("'references' must be a list")
    try:
        references = tuple(Reference(str(r["name"]), str(r["subject"]), int(r["version"])) for r in refs)
    except (KeyError, TypeError, ValueError):
        raise errors.invalid_schema("each reference needs a name, a subject and a version number") from None
    return SchemaInput(obj["schema"], schema_type, references, _optional_int(obj, "id"), _optional_int(obj, "version"))


def _optional_int(obj: Mapping[str, Any], name: str) -> int | None:
    value = obj.get(name)
    if value is None or (name == "id" and value == -1) or (name == "version" and value in (0, -1)):
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise errors.unprocessable(f"'{name}' must be a number")
    return value


def _field(body: bytes, *names: str) -> object:
    """The first of ``names`` in a JSON object body (PUT /config takes "compatibility", Confluent's older clients
    send "compatibilityLevel"). Another field with a value (Confluent's config also has "normalize", "alias",
    default metadata and rules) is refused, not ignored."""
    obj = _json(body)
    if not isinstance(obj, dict):
        raise errors.unprocessable("the request body must be a JSON object")
    others = sorted(k for k, v in obj.items() if k not in names and v is not None)
    if others:
        raise errors.unprocessable(f"'{others[0]}' is not supported yet by odradek's schema registry")
    return next((obj[n] for n in names if n in obj), None)


def _schema_id(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise errors.schema_not_found(f"Schema {text} not found") from None


def route(method: str, target: str, body: bytes) -> rq.Request:
    """The typed request of an HTTP request; RegistryError for one it cannot be."""
    split = urlsplit(target)
    parts = [unquote(p) for p in split.path.strip("/").split("/")] if split.path.strip("/") else []
    q = Query(split.query)
    head = "/".join(split.path.strip("/").split("/")[:2])
    for prefix, what in NOT_IMPLEMENTED.items():
        if head == prefix or head.startswith(prefix + "/") or (parts and parts[0] == prefix):
            raise errors.not_implemented(what)
    found = _match(method, parts, q, body)
    if found is None:
        raise errors.not_found(split.path)
    if isinstance(found, str):
        raise errors.method_not_allowed(method, split.path)
    return found


def _match(method: str, p: list[str], q: Query, body: bytes) -> rq.Request | str | None:
    """The request, "method" for a known path with another method, None for an unknown path."""
    n = len(p)
    get, post, put, delete = method == "GET", method == "POST", method == "PUT", method == "DELETE"
    if n == 0:
        return rq.Root() if get else "method"
    top = p[0]
    if top == "schemas":
        if n == 1:
            return rq.ListSchemas(q.text("subjectPrefix"), q.flag("deleted"), q.flag("latestOnly")) if get else "method"
        if n == 2 and p[1] == "types":
            return rq.SchemaTypes() if get else "method"
        if p[1] == "ids" and n >= 3:
            if not get:
                return "method"
            schema_id = _schema_id(p[2])
            if n == 3:
                return rq.GetSchemaById(schema_id, format=q.text("format"))
            if n == 4 and p[3] == "schema":
                return rq.GetSchemaById(schema_id, raw=True, format=q.text("format"))
            if n == 4 and p[3] == "subjects":
                return rq.SubjectsOfId(schema_id, q.flag("deleted"))
            if n == 4 and p[3] == "versions":
                return rq.VersionsOfId(schema_id, q.flag("deleted"))
        return None
    if top == "contexts" and n == 1:
        return rq.ListContexts() if get else "method"
    if top == "subjects":
        if n == 1:
            return rq.ListSubjects(q.text("subjectPrefix"), q.flag("deleted")) if get else "method"
        subject = p[1]
        if n == 2:
            if post:
                return rq.Lookup(subject, schema_input(body), q.flag("normalize"), q.flag("deleted"))
            if delete:
                return rq.DeleteSubject(subject, q.flag("permanent"))
            return "method"
        if p[2] != "versions":
            return None
        if n == 3:
            if get:
                return rq.ListVersions(subject, q.flag("deleted"))
            if post:
                return rq.Register(subject, schema_input(body), q.flag("normalize"))
            return "method"
        version = parse_version(p[3])
        if n == 4:
            if get:
                return rq.GetVersion(subject, version, q.flag("deleted"), format=q.text("format"))
            if delete:
                return rq.DeleteVersion(subject, version, q.flag("permanent"))
            return "method"
        if n == 5 and p[4] == "schema":
            return rq.GetVersion(subject, version, q.flag("deleted"), True, q.text("format")) if get else "method"
        if n == 5 and p[4] == "referencedby":
            return rq.ReferencedBy(subject, version) if get else "method"
        return None
    if top == "compatibility" and n >= 4 and p[1] == "subjects" and p[3] == "versions" and n <= 5:
        if not post:
            return "method"
        against = parse_version(p[4]) if n == 5 else None
        return rq.CheckCompatibility(p[2], against, schema_input(body), q.flag("normalize"), q.flag("verbose"))
    if top in ("config", "mode") and n <= 2:
        scope = p[1] if n == 2 else None  # None: the global config or mode
        if top == "config":
            if get:
                return rq.GetConfig(scope, q.flag("defaultToGlobal"))
            if put:
                return rq.SetConfig(scope, _field(body, "compatibility", "compatibilityLevel"))
            if delete:
                return rq.DeleteConfig(scope)
            return "method"
        if get:
            return rq.GetMode(scope, q.flag("defaultToGlobal"))
        if put:
            return rq.SetMode(scope, _field(body, "mode"), q.flag("force"))
        if delete and scope is not None:
            return rq.DeleteMode(scope)
        return "method"
    return None

"""A small client of a Confluent-compatible schema registry: what serializers need, cached.

Serializers ask the registry twice per schema at most (register or look up the latest version, then never again),
and deserializers once per schema id; everything after that is answered from the cache, as Confluent's clients do.
Calls are plain blocking HTTP (the standard library's), made only on a cache miss: a producer's first record of a
schema, a consumer's first record of an id.
"""

from __future__ import annotations

import base64
import json
import random
import ssl
import threading
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, NamedTuple

from odradek.client.errors import ConfigError, OdradekError


class SchemaRegistryError(OdradekError):
    """The registry refused a request or could not be reached. ``error_code`` is the registry's own code (Confluent's
    40401 subject not found, 409 incompatible, 42201 invalid schema, ...), ``status`` the HTTP status (0: no answer)."""

    def __init__(self, message: str, status: int = 0, error_code: int = 0) -> None:
        super().__init__(message)
        self.status = status
        self.error_code = error_code


def registry_urls(url: str) -> list[str]:
    """The URLs of a ``schema.registry.url`` value (comma-separated), checked."""
    urls = [u.strip().rstrip("/") for u in url.split(",") if u.strip()]
    if not urls:
        raise ConfigError("schema.registry.url is empty")
    for u in urls:
        parts = urllib.parse.urlsplit(u)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError(f"schema.registry.url must be http(s)://host:port, got {u!r}")
    return urls


class RegisteredSchema(NamedTuple):
    schema_id: int
    schema_type: str  # AVRO, JSON or PROTOBUF
    schema: str
    version: int = -1  # -1 where the answer names none (a lookup by id)


class SchemaRegistryClient:
    """``url``: one registry URL or several, comma-separated (each broker serves one; a failed call tries the
    next). ``basic_auth``: ``user:password`` sent as HTTP Basic credentials ("" sends none). ``ca_location``: the
    PEM CA(s) an https registry's certificate is checked against ("" = the system's)."""

    def __init__(self, url: str, basic_auth: str = "", timeout: float = 10.0, ca_location: str = "") -> None:
        urls = registry_urls(url)
        random.shuffle(urls)
        self._urls = urls
        self._timeout = timeout
        try:
            self._tls = ssl.create_default_context(cafile=ca_location or None)
        except (OSError, ssl.SSLError) as e:
            raise ConfigError(f"schema.registry.ssl.ca.location {ca_location!r}: {e}") from None
        self._headers = {"Content-Type": "application/vnd.schemaregistry.v1+json", "Accept": "application/json"}
        if basic_auth:
            self._headers["Authorization"] = "Basic " + base64.b64encode(basic_auth.encode()).decode()
        self._lock = threading.Lock()
        self._by_id: dict[int, RegisteredSchema] = {}
        self._ids: dict[tuple[str, str, str], int] = {}  # (subject, type, schema) -> id

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        last: SchemaRegistryError | None = None
        for url in self._urls:
            request = urllib.request.Request(url + path, data=data, method=method, headers=self._headers)
            try:
                with urllib.request.urlopen(request, timeout=self._timeout, context=self._tls) as answer:
                    return json.loads(answer.read() or b"null")
            except urllib.error.HTTPError as e:
                try:
                    error = json.loads(e.read())
                    code, message = int(error.get("error_code", e.code)), str(error.get("message", e.reason))
                except (ValueError, AttributeError):
                    code, message = e.code, str(e.reason)
                raise SchemaRegistryError(f"schema registry: {message} ({code})", e.code, code) from None
            except (urllib.error.URLError, OSError, ValueError) as e:
                last = SchemaRegistryError(f"schema registry at {url} did not answer: {e}")
        assert last is not None
        raise last

    def register(self, subject: str, schema: str, schema_type: str = "AVRO", normalize: bool = False) -> int:
        """The id of ``schema`` under ``subject``, registering it if it is not there (a new version)."""
        key = (subject, schema_type, schema)
        with self._lock:
            if key in self._ids:
                return self._ids[key]
        body: dict[str, Any] = {"schema": schema}
        if schema_type != "AVRO":
            body["schemaType"] = schema_type
        query = "?normalize=true" if normalize else ""
        answer = self._call("POST", f"/subjects/{_quote(subject)}/versions{query}", body)
        schema_id = int(answer["id"])
        with self._lock:
            self._ids[key] = schema_id
            self._by_id.setdefault(schema_id, RegisteredSchema(schema_id, schema_type, schema))
        return schema_id

    def lookup(self, subject: str, schema: str, schema_type: str = "AVRO") -> RegisteredSchema:
        """The registered version of ``schema`` under ``subject`` (SchemaRegistryError 40403 if it has none)."""
        body: dict[str, Any] = {"schema": schema}
        if schema_type != "AVRO":
            body["schemaType"] = schema_type
        found = _registered(self._call("POST", f"/subjects/{_quote(subject)}", body))
        with self._lock:
            self._ids[(subject, schema_type, schema)] = found.schema_id
        return found

    def latest(self, subject: str) -> RegisteredSchema:
        """The subject's latest version, asked each time (the caller keeps it as long as it wants it)."""
        found = _registered(self._call("GET", f"/subjects/{_quote(subject)}/versions/latest"))
        with self._lock:
            self._by_id.setdefault(found.schema_id, found)
        return found

    def schema(self, schema_id: int) -> RegisteredSchema:
        """The schema of an id: asked once, then cached (an id's schema never changes)."""
        with self._lock:
            cached = self._by_id.get(schema_id)
        if cached is not None:
            return cached
        answer = self._call("GET", f"/schemas/ids/{int(schema_id)}")
        found = RegisteredSchema(schema_id, answer.get("schemaType", "AVRO"), answer["schema"])
        with self._lock:
            self._by_id[schema_id] = found
        return found


def _registered(answer: Any) -> RegisteredSchema:
    return RegisteredSchema(
        int(answer["id"]), answer.get("schemaType", "AVRO"), answer["schema"], int(answer.get("version", -1))
    )


def _quote(subject: str) -> str:
    return urllib.parse.quote(subject, safe="")

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
from odradek.client.tls import TlsFileError, read_pem


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


class SchemaReference(NamedTuple):
    """A schema another one imports: ``name`` is how the importing schema names it (a Protobuf import path)."""

    name: str
    subject: str
    version: int


class RegisteredSchema(NamedTuple):
    schema_id: int
    schema_type: str  # AVRO, JSON or PROTOBUF
    schema: str
    version: int = -1  # -1 where the answer names none (a lookup by id)
    references: tuple[SchemaReference, ...] = ()


class TlsNames(NamedTuple):
    """What the caller calls the TLS settings, for errors (the client's config keys, the CLI's flags)."""

    ca: str
    certificate: str
    key: str
    password: str  # "" where no key password can be given


TLS_OPTIONS = TlsNames(
    "schema.registry.ssl.ca.location",
    "schema.registry.ssl.certificate.location",
    "schema.registry.ssl.key.location",
    "schema.registry.ssl.key.password",
)
"""The registry client's TLS settings: the ``ssl.*`` of Confluent's SchemaRegistryClient, as its serializers name
them under ``schema.registry.``."""


class RegistryTlsError(ConfigError):
    """A registry TLS setting that cannot be used; ``option`` names it (the Spark source reports by option)."""

    def __init__(self, option: str, detail: str) -> None:
        super().__init__(f"{option} {detail}")
        self.option = option
        self.detail = detail


def check_identity(
    certificate_location: str, key_location: str, key_password: str, names: TlsNames = TLS_OPTIONS
) -> None:
    """A client certificate needs its key and the reverse, and a key password needs the key: either alone would do
    nothing. (Confluent's client also takes a certificate file that holds its key; here that file is given as
    both.)"""
    if bool(certificate_location) != bool(key_location):
        given, missing = (names.certificate, names.key) if certificate_location else (names.key, names.certificate)
        raise RegistryTlsError(
            given, f"needs {missing}: a client certificate goes with its key (a PEM file holding both is given as both)"
        )
    if key_password and not key_location:
        raise RegistryTlsError(names.password, f"needs {names.key} and {names.certificate}")


def tls_context(
    ca_location: str = "",
    certificate_location: str = "",
    key_location: str = "",
    key_password: str = "",
    names: TlsNames = TLS_OPTIONS,
) -> ssl.SSLContext:
    """The context an https registry is called with: its certificate checked against ``ca_location`` ("" = the
    system's CAs) and, with a certificate and key (PEM), that certificate presented to a registry that asks for one
    (mutual TLS, which ``odradek deploy config --tls`` requires). The files are read now, so a bad one fails here,
    naming its setting."""
    check_identity(certificate_location, key_location, key_password, names)
    try:
        context = ssl.create_default_context(cafile=ca_location or None)
    except (OSError, ssl.SSLError) as e:
        raise RegistryTlsError(names.ca, f"{ca_location!r}: {e}") from None
    if not certificate_location:
        return context
    key = b""
    for option, path in ((names.certificate, certificate_location), (names.key, key_location)):
        try:
            key = read_pem(path, option)  # the key's last
        except TlsFileError as e:
            raise RegistryTlsError(option, str(e).removeprefix(f"{option} ")) from None
    try:
        # The password is always passed ("" for none): without one, OpenSSL would prompt on the terminal.
        context.load_cert_chain(certificate_location, key_location, key_password)
    except (OSError, ssl.SSLError) as e:
        mismatch = isinstance(e, ssl.SSLError) and e.reason == "KEY_VALUES_MISMATCH"  # decrypted, not this cert's
        if b"ENCRYPTED" in key and not mismatch:
            if not names.password:
                raise RegistryTlsError(names.key, f"{key_location!r} is encrypted: give an unencrypted key") from None
            why = "does not decrypt it" if key_password else "is not set"
            raise RegistryTlsError(names.key, f"{key_location!r} is encrypted and {names.password} {why}") from None
        raise RegistryTlsError(
            names.certificate, f"{certificate_location!r} with {names.key} {key_location!r}: {e}"
        ) from None
    return context


def tls_hint(error: Exception, url: str, presents_certificate: bool, names: TlsNames = TLS_OPTIONS) -> str:
    """What a failed https call may mean, appended to its error: a registry that requires client certificates
    closes a connection that presents none (with an alert, without one, or with a reset if the request had arrived),
    which the error alone does not say."""
    reason = error.reason if isinstance(error, urllib.error.URLError) else error
    handshake = isinstance(reason, ssl.SSLError) and not isinstance(reason, ssl.SSLCertVerificationError)
    if (
        presents_certificate
        or not url.startswith("https://")
        or not (handshake or isinstance(reason, ConnectionResetError))
    ):
        return ""
    return (
        f" (a registry that requires client certificates refuses connections without one: give {names.certificate} "
        f"and {names.key})"
    )


class SchemaRegistryClient:
    """``url``: one registry URL or several, comma-separated (each broker serves one; a failed call tries the
    next). ``basic_auth``: ``user:password`` sent as HTTP Basic credentials ("" sends none). The rest is TLS, as
    ``tls_context`` takes it: ``ca_location`` the PEM CA(s) an https registry's certificate is checked against (""
    = the system's); ``certificate_location`` and ``key_location`` a client certificate and its key (PEM) for a
    registry that requires one, ``key_password`` the key's if it is encrypted."""

    def __init__(
        self,
        url: str,
        basic_auth: str = "",
        timeout: float = 10.0,
        ca_location: str = "",
        certificate_location: str = "",
        key_location: str = "",
        key_password: str = "",
    ) -> None:
        urls = registry_urls(url)
        random.shuffle(urls)
        self._urls = urls
        self._timeout = timeout
        self._tls = tls_context(ca_location, certificate_location, key_location, key_password)
        self._presents_certificate = bool(certificate_location)
        self._headers = {"Content-Type": "application/vnd.schemaregistry.v1+json", "Accept": "application/json"}
        if basic_auth:
            self._headers["Authorization"] = "Basic " + base64.b64encode(basic_auth.encode()).decode()
        self._lock = threading.Lock()
        self._by_id: dict[tuple[int, str], RegisteredSchema] = {}  # (id, format) -> schema
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
                hint = tls_hint(e, url, self._presents_certificate)
                last = SchemaRegistryError(f"schema registry at {url} did not answer: {e}{hint}")
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
            self._by_id.setdefault((schema_id, ""), RegisteredSchema(schema_id, schema_type, schema))
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
        found = self.version(subject, "latest")
        with self._lock:
            self._by_id.setdefault((found.schema_id, ""), found)
        return found

    def version(self, subject: str, version: int | str, fmt: str = "") -> RegisteredSchema:
        """A version of the subject (a number or ``latest``), asked each time; ``fmt`` is the registry's ``?format=``
        (``serialized``: a Protobuf schema as its base64 descriptor)."""
        query = f"?format={_quote(fmt)}" if fmt else ""
        return _registered(self._call("GET", f"/subjects/{_quote(subject)}/versions/{_quote(str(version))}{query}"))

    def schema(self, schema_id: int, fmt: str = "") -> RegisteredSchema:
        """The schema of an id, in the registry's ``?format=`` ``fmt``: asked once, then cached (an id's schema never
        changes)."""
        with self._lock:
            cached = self._by_id.get((schema_id, fmt))
        if cached is not None:
            return cached
        query = f"?format={_quote(fmt)}" if fmt else ""
        answer = self._call("GET", f"/schemas/ids/{int(schema_id)}{query}")
        found = _registered({**answer, "id": schema_id})
        with self._lock:
            self._by_id[(schema_id, fmt)] = found
        return found


def _registered(answer: Any) -> RegisteredSchema:
    references = tuple(
        SchemaReference(str(r["name"]), str(r["subject"]), int(r["version"])) for r in answer.get("references") or ()
    )
    return RegisteredSchema(
        int(answer["id"]),
        answer.get("schemaType", "AVRO"),
        answer["schema"],
        int(answer.get("version", -1)),
        references,
    )


def _quote(subject: str) -> str:
    return urllib.parse.quote(subject, safe="")

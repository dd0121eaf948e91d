"""``odradek schema register|get|list|delete|check|config``: the built-in schema registry over its REST API
(docs/schema-registry.md), as Confluent's ``curl`` examples or rpk's ``registry`` commands use it. The registry's
URL is ``--registry-url``, else ``$ODRADEK_SCHEMA_REGISTRY_URL``, else the one ``odradek dev up`` saved in the
profile. ``--format json`` prints the registry's own answer; a refusal is an error carrying its ``error_code``.

A secured registry (https, HTTP Basic): ``--basic-auth USER:PASSWORD`` (else ``$ODRADEK_SCHEMA_REGISTRY_BASIC_AUTH``)
and ``--ca-location`` (the CA of its certificate), ``--certificate-location``/``--key-location`` (a client
certificate; its key unencrypted). With the profile's URL, what is not given comes from the profile's client config
(``dev up --security`` saves the super user's: its SCRAM user and password, the cluster's CA and the admin client
certificate)."""

from __future__ import annotations

import argparse
import base64
import json
import os
import ssl
import sys
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from odradek.client.cli.common import CommandError, add_command
from odradek.client.cli.output import emit, table
from odradek.client.cli.profile import load_profile
from odradek.client.schema_registry import RegistryTlsError, TlsNames, tls_context, tls_hint

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
TIMEOUT_S = 30.0
TLS_FLAGS = TlsNames("--ca-location", "--certificate-location", "--key-location", "")


def register(sub: argparse._SubParsersAction) -> None:
    schema = sub.add_parser("schema", help="the built-in schema registry").add_subparsers(
        dest="schema_command", required=True, metavar="COMMAND"
    )
    reg = _command(schema, "register", _register, "register a schema under a subject (prints its id and version)")
    reg.add_argument("subject")
    _schema_options(reg)
    reg.add_argument("--normalize", action="store_true", help="register the normalized form")
    get = _command(schema, "get", _get, "a subject's version (default: latest), or with --id a schema by id")
    get.add_argument("subject", nargs="?")
    get.add_argument("--version", default="latest", help="a version number or latest")
    get.add_argument("--id", type=int, help="the schema of this id instead")
    get.add_argument("--deleted", action="store_true", help="soft-deleted versions too")
    lst = _command(schema, "list", _list, "subjects, or a subject's versions")
    lst.add_argument("subject", nargs="?")
    lst.add_argument("--deleted", action="store_true", help="soft-deleted subjects or versions too")
    lst.add_argument("--prefix", default="", help="only subjects starting with this")
    delete = _command(schema, "delete", _delete, "soft-delete a subject or one version (--permanent: hard)")
    delete.add_argument("subject")
    delete.add_argument("--version", help="one version (a number or latest) instead of the whole subject")
    delete.add_argument("--permanent", action="store_true", help="hard delete (soft-delete first)")
    check = _command(schema, "check", _check, "is a schema compatible with a subject (exit 1 when it is not)")
    check.add_argument("subject")
    _schema_options(check)
    check.add_argument("--version", help="against this version only (default: what registering would check)")
    config = _command(schema, "config", _config, "show or set the compatibility level, global or a subject's")
    config.add_argument("subject", nargs="?")
    config.add_argument("--set", metavar="LEVEL", help="NONE, BACKWARD, FORWARD, FULL, or one of them _TRANSITIVE")
    config.add_argument("--delete", action="store_true", help="remove the subject's level (the global one applies)")


def _command(sub: argparse._SubParsersAction, name: str, handler: Any, text: str) -> argparse.ArgumentParser:
    parser = add_command(sub, name, handler, text)
    parser.add_argument("--registry-url", help="the registry (default $ODRADEK_SCHEMA_REGISTRY_URL, then the profile)")
    parser.add_argument(
        "--basic-auth",
        metavar="USER:PASSWORD",
        help="HTTP Basic credentials (default $ODRADEK_SCHEMA_REGISTRY_BASIC_AUTH)",
    )
    parser.add_argument("--ca-location", metavar="FILE", help="the CA that signs an https registry's certificate")
    parser.add_argument("--certificate-location", metavar="FILE", help="a client certificate (PEM), with its key")
    parser.add_argument("--key-location", metavar="FILE", help="the client certificate's key (PEM)")
    return parser


def _schema_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--file", "-f", required=True, help="the schema's file (- for stdin)")
    parser.add_argument("--type", default="AVRO", help="AVRO (default), JSON or PROTOBUF")
    parser.add_argument(
        "--reference",
        action="append",
        default=[],
        metavar="NAME=SUBJECT:VERSION",
        help="a schema it references (repeatable)",
    )


def _explicit_url(args: argparse.Namespace) -> str | None:
    return args.registry_url or os.environ.get("ODRADEK_SCHEMA_REGISTRY_URL")


def registry_url(args: argparse.Namespace) -> str:
    url = _explicit_url(args) or load_profile().get("schema_registry_url")
    if not url:
        raise CommandError(
            "no schema registry: give --registry-url, set $ODRADEK_SCHEMA_REGISTRY_URL, or start one with "
            "odradek dev up"
        )
    return str(url).split(",")[0].rstrip("/")


def _security(args: argparse.Namespace) -> tuple[str | None, ssl.SSLContext | None, bool]:
    """The Authorization header (None: none), for https the TLS context (see the module doc), and whether that
    presents a client certificate."""
    profile: dict[str, Any] = {} if _explicit_url(args) else dict(load_profile().get("client_config") or {})
    basic = args.basic_auth or os.environ.get("ODRADEK_SCHEMA_REGISTRY_BASIC_AUTH")
    if not basic and profile.get("sasl.username"):
        basic = f"{profile['sasl.username']}:{profile.get('sasl.password', '')}"
    if basic and ":" not in basic:
        raise CommandError("--basic-auth is USER:PASSWORD")
    header = "Basic " + base64.b64encode(basic.encode()).decode() if basic else None
    if not registry_url(args).lower().startswith("https://"):
        given = [
            flag
            for flag, value in zip(
                TLS_FLAGS[:3], (args.ca_location, args.certificate_location, args.key_location), strict=True
            )
            if value
        ]
        if given:
            raise CommandError(f"{', '.join(given)}: only for an https:// registry URL (got {registry_url(args)})")
        return header, None, False
    files = (
        str(args.ca_location or profile.get("ssl.ca.location") or ""),
        str(args.certificate_location or profile.get("ssl.certificate.location") or ""),
        str(args.key_location or profile.get("ssl.key.location") or ""),
    )
    try:
        return header, tls_context(*files, names=TLS_FLAGS), bool(files[1])
    except RegistryTlsError as e:
        raise CommandError(str(e)) from None


def call(args: argparse.Namespace, method: str, path: str, body: Any = None) -> Any:
    """The registry's JSON answer; a refusal raises CommandError with its error code and message."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(registry_url(args) + path, data=data, method=method)
    request.add_header("Content-Type", CONTENT_TYPE)
    request.add_header("Accept", CONTENT_TYPE)
    header, context, presents_certificate = _security(args)
    if header is not None:
        request.add_header("Authorization", header)
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S, context=context) as response:
            return json.loads(response.read() or b"null")
    except urllib.error.HTTPError as e:
        try:
            answer = json.loads(e.read())
            raise CommandError(f"error_code {answer['error_code']}: {answer['message']}") from None
        except (ValueError, KeyError, TypeError):
            raise CommandError(f"HTTP {e.code} from the schema registry") from None
    except OSError as e:  # a URLError, or a TLS error while reading the answer (TLS 1.3 reports a refusal then)
        reason = e.reason if isinstance(e, urllib.error.URLError) else e
        hint = tls_hint(e, registry_url(args), presents_certificate, TLS_FLAGS)
        raise CommandError(f"cannot reach the schema registry at {registry_url(args)}: {reason}{hint}") from None


def _quote(subject: str) -> str:
    return urllib.parse.quote(subject, safe="")


def _schema_body(args: argparse.Namespace) -> dict[str, Any]:
    try:
        text = sys.stdin.read() if args.file == "-" else Path(args.file).read_text()
    except OSError as e:
        raise CommandError(f"cannot read {args.file}: {e.strerror}") from None
    body: dict[str, Any] = {"schema": text, "schemaType": args.type.upper()}
    references = []
    for item in args.reference:
        name, eq, rest = item.partition("=")
        subject, colon, version = rest.rpartition(":")
        if not eq or not colon or not version.isdigit() or not name or not subject:
            raise CommandError(f"--reference {item!r} is not NAME=SUBJECT:VERSION")
        references.append({"name": name, "subject": subject, "version": int(version)})
    if references:
        body["references"] = references
    return body


def _register(args: argparse.Namespace) -> None:
    body = _schema_body(args)
    query = "?normalize=true" if args.normalize else ""
    registered = call(args, "POST", f"/subjects/{_quote(args.subject)}/versions{query}", body)
    found = call(args, "POST", f"/subjects/{_quote(args.subject)}{query}", body)
    data = {"subject": args.subject, "id": registered["id"], "version": found["version"]}
    emit(data, args.format, human=f"{args.subject}: id {data['id']}, version {data['version']}")


def _get(args: argparse.Namespace) -> None:
    if args.id is not None:
        data = call(args, "GET", f"/schemas/ids/{args.id}")
        data = {"id": args.id, **data}
    elif args.subject:
        deleted = "?deleted=true" if args.deleted else ""
        data = call(args, "GET", f"/subjects/{_quote(args.subject)}/versions/{_quote(args.version)}{deleted}")
    else:
        raise CommandError("give a subject, or --id")
    emit(data, args.format, human=json.dumps(data, indent=2))


def _list(args: argparse.Namespace) -> None:
    deleted = "deleted=true" if args.deleted else ""
    if args.subject:
        versions = call(args, "GET", f"/subjects/{_quote(args.subject)}/versions?{deleted}")
        emit(versions, args.format, human="\n".join(str(v) for v in versions))
        return
    query = urllib.parse.urlencode({k: v for k, v in (("subjectPrefix", args.prefix),) if v})
    subjects = call(args, "GET", f"/subjects?{'&'.join(q for q in (query, deleted) if q)}")
    emit(subjects, args.format, human="\n".join(subjects))


def _delete(args: argparse.Namespace) -> None:
    query = "?permanent=true" if args.permanent else ""
    subject = _quote(args.subject)
    if args.version is not None:
        version = call(args, "DELETE", f"/subjects/{subject}/versions/{_quote(args.version)}{query}")
        data = {"subject": args.subject, "deleted": [version], "permanent": args.permanent}
    else:
        versions = call(args, "DELETE", f"/subjects/{subject}{query}")
        data = {"subject": args.subject, "deleted": versions, "permanent": args.permanent}
    kind = "hard" if args.permanent else "soft"
    emit(data, args.format, human=f"{args.subject}: {kind}-deleted versions {', '.join(map(str, data['deleted']))}")


def _check(args: argparse.Namespace) -> int:
    subject = _quote(args.subject)
    path = f"/compatibility/subjects/{subject}/versions"
    if args.version is not None:
        path += f"/{_quote(args.version)}"
    data = call(args, "POST", path + "?verbose=true", _schema_body(args))
    lines = ["compatible" if data["is_compatible"] else "incompatible", *data.get("messages", [])]
    emit(data, args.format, human="\n".join(lines))
    return 0 if data["is_compatible"] else 1


def _config(args: argparse.Namespace) -> None:
    path = "/config" + (f"/{_quote(args.subject)}" if args.subject else "")
    if args.set and args.delete:
        raise CommandError("--set and --delete exclude each other")
    if args.set:
        answer = call(args, "PUT", path, {"compatibility": args.set})
        data = {"subject": args.subject, "compatibility": answer["compatibility"]}
    elif args.delete:
        call(args, "DELETE", path)
        level = call(args, "GET", path + ("?defaultToGlobal=true" if args.subject else ""))["compatibilityLevel"]
        data = {"subject": args.subject, "compatibility": level}
    else:
        query = "?defaultToGlobal=true" if args.subject else ""
        data = {"subject": args.subject, "compatibility": call(args, "GET", path + query)["compatibilityLevel"]}
    emit(data, args.format, human=table([data], ["subject", "compatibility"]))

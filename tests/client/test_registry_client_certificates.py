"""odradek's schema registry client presents a client certificate (``schema.registry.ssl.certificate.location``,
``.key.location``, ``.key.password``: confluent-kafka's names) to an https registry that requires one, as
``odradek deploy config --tls`` generates: over a stand-in registry on loopback whose TLS listener refuses
connections without a certificate of its CA. Without one the call fails saying so; with one it succeeds, for the
client itself, the producer's and consumer's serializers and ``odradek schema``; settings that could not take effect
are refused."""

from __future__ import annotations

import http.server
import json
import ssl
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization

from odradek.client.cli.main import main
from odradek.client.config import ConsumerConfig, ProducerConfig
from odradek.client.errors import ConfigError
from odradek.client.schema_registry import RegistryTlsError, SchemaRegistryClient, SchemaRegistryError, tls_context
from odradek.client.serialization import deserializers, serializers
from odradek.deploy.certs import make_ca, make_leaf

USER = json.dumps({"type": "record", "name": "User", "fields": [{"name": "name", "type": "string"}]})
BASE = {"bootstrap.servers": "127.0.0.1:9092"}
KEY_PASSWORD = "k3y-secret"


class _Registry(http.server.BaseHTTPRequestHandler):
    """Registers schemas and serves them by id, noting each request's path and the client certificate's CN."""

    schemas: list[str] = []
    seen: list[tuple[str, str]] = []

    def _answer(self, body: Any) -> None:
        peer = self.connection.getpeercert()  # an SSLSocket
        common_name = dict(pair for rdn in peer["subject"] for pair in rdn)["commonName"]
        self.seen.append((self.path, common_name))
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path.startswith("/subjects"):
            self._answer(["users-value"])
        else:
            self._answer({"schema": self.schemas[int(self.path.rsplit("/", 1)[1]) - 1]})

    def do_POST(self) -> None:
        schema = json.loads(self.rfile.read(int(self.headers["Content-Length"])))["schema"]
        if schema not in self.schemas:
            self.schemas.append(schema)
        self._answer({"id": self.schemas.index(schema) + 1})

    def log_message(self, *args: Any) -> None:
        pass


@dataclass(frozen=True)
class MtlsRegistry:
    url: str
    ca: str
    cert: str  # a client certificate the registry's CA signed (CN carol)
    key: str
    encrypted_key: str  # carol's key, encrypted with KEY_PASSWORD
    stranger_cert: str  # signed by another CA
    stranger_key: str


@pytest.fixture
def registry(tmp_path: Path) -> Iterator[MtlsRegistry]:
    ca = make_ca("registry test CA")
    ca_file = ca.write(tmp_path, "ca")[0]
    server_cert, server_key = make_leaf(ca, "registry", ["127.0.0.1"]).write(tmp_path, "registry")
    carol = make_leaf(ca, "carol")
    cert, key = carol.write(tmp_path, "carol")
    encrypted = tmp_path / "carol-encrypted.key"
    encrypted.write_bytes(
        carol.key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(KEY_PASSWORD.encode()),
        )
    )
    stranger_cert, stranger_key = make_leaf(make_ca("another CA"), "mallory").write(tmp_path, "mallory")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(server_cert, server_key)
    context.load_verify_locations(ca_file)
    context.verify_mode = ssl.CERT_REQUIRED  # a handshake without a certificate of the CA fails
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Registry)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _Registry.schemas, _Registry.seen = [], []
    yield MtlsRegistry(
        f"https://127.0.0.1:{server.server_address[1]}",
        str(ca_file),
        str(cert),
        str(key),
        str(encrypted),
        str(stranger_cert),
        str(stranger_key),
    )
    server.shutdown()
    server.server_close()


def test_without_a_client_certificate_the_call_fails_saying_one_may_be_required(registry: MtlsRegistry) -> None:
    with pytest.raises(SchemaRegistryError, match="did not answer") as refused:
        SchemaRegistryClient(registry.url, ca_location=registry.ca).register("users-value", USER)
    assert "requires client certificates" in str(refused.value)
    assert "schema.registry.ssl.certificate.location and schema.registry.ssl.key.location" in str(refused.value)
    with pytest.raises(SchemaRegistryError, match="did not answer") as refused:  # presented, but not of its CA
        SchemaRegistryClient(
            registry.url,
            ca_location=registry.ca,
            certificate_location=registry.stranger_cert,
            key_location=registry.stranger_key,
        ).register("users-value", USER)
    assert "requires client certificates" not in str(refused.value)  # one was given: no hint to give one
    assert _Registry.seen == []


def test_with_a_client_certificate_the_calls_succeed(registry: MtlsRegistry) -> None:
    client = SchemaRegistryClient(
        registry.url, ca_location=registry.ca, certificate_location=registry.cert, key_location=registry.key
    )
    assert client.register("users-value", USER) == 1
    encrypted = SchemaRegistryClient(
        registry.url,
        ca_location=registry.ca,
        certificate_location=registry.cert,
        key_location=registry.encrypted_key,
        key_password=KEY_PASSWORD,
    )
    assert encrypted.schema(1).schema == USER
    combined = Path(registry.cert).with_name("carol.pem")  # Confluent's one-file form, given as both here
    combined.write_bytes(Path(registry.cert).read_bytes() + Path(registry.key).read_bytes())
    one_file = SchemaRegistryClient(
        registry.url, ca_location=registry.ca, certificate_location=str(combined), key_location=str(combined)
    )
    assert one_file.schema(1).schema == USER
    assert _Registry.seen == [("/subjects/users-value/versions", "carol"), *[("/schemas/ids/1", "carol")] * 2]


def test_the_serializers_present_the_configured_certificate(registry: MtlsRegistry) -> None:
    """The producer's and consumer's config keys reach the registry client their serializers make."""
    tls = {
        "schema.registry.url": registry.url,
        "schema.registry.ssl.ca.location": registry.ca,
        "schema.registry.ssl.certificate.location": registry.cert,
        "schema.registry.ssl.key.location": registry.encrypted_key,
        "schema.registry.ssl.key.password": KEY_PASSWORD,
    }
    producer = ProducerConfig.from_mapping({**BASE, **tls, "value.serializer": "avro", "value.schema": USER})
    assert KEY_PASSWORD not in repr(producer)
    built = serializers(producer)
    assert built is not None
    data = built[1].serialize("users", {"name": "ada"})
    consumer = ConsumerConfig.from_mapping({**BASE, **tls, "value.deserializer": "avro"})
    assert KEY_PASSWORD not in repr(consumer)
    read = deserializers(consumer)
    assert read is not None and read[1].deserialize("users", data) == {"name": "ada"}
    assert _Registry.seen == [("/subjects/users-value/versions", "carol"), ("/schemas/ids/1", "carol")]


def test_the_schema_cli_presents_the_certificate_through_the_same_code(
    registry: MtlsRegistry, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ODRADEK_SCHEMA_REGISTRY_BASIC_AUTH", raising=False)
    command = ["schema", "list", "--registry-url", registry.url, "--ca-location", registry.ca, "--format", "json"]
    assert main(command) == 1
    assert "requires client certificates" in json.loads(capsys.readouterr().err)["error"]["message"]
    assert main([*command, "--certificate-location", registry.cert, "--key-location", registry.key]) == 0
    assert json.loads(capsys.readouterr().out) == ["users-value"]
    assert main([*command, "--certificate-location", registry.cert]) == 1
    assert "--certificate-location needs --key-location" in json.loads(capsys.readouterr().err)["error"]["message"]
    assert main([*command, "--certificate-location", registry.cert, "--key-location", registry.encrypted_key]) == 1
    assert "is encrypted: give an unencrypted key" in json.loads(capsys.readouterr().err)["error"]["message"]


@pytest.mark.parametrize(
    "config, message",
    [
        (
            {"schema.registry.ssl.certificate.location": "/c.crt"},
            "schema.registry.ssl.certificate.location needs schema.registry.ssl.key.location",
        ),
        (
            {"schema.registry.ssl.key.location": "/c.key"},
            "schema.registry.ssl.key.location needs schema.registry.ssl.certificate.location",
        ),
        (
            {"schema.registry.ssl.key.password": "pw"},
            "schema.registry.ssl.key.password needs schema.registry.ssl.key.location",
        ),
        (
            {
                "schema.registry.url": "http://h:1",
                "schema.registry.ssl.certificate.location": "/c.crt",
                "schema.registry.ssl.key.location": "/c.key",
            },
            "schema.registry.ssl.certificate.location needs an https:// schema.registry.url",
        ),
        (
            {"value.deserializer": None, "schema.registry.url": None, "schema.registry.ssl.key.password": "pw"},
            "schema.registry.ssl.key.password needs key.deserializer or value.deserializer",
        ),
        ({"schema.registry.ssl.keystore.location": "/k.p12"}, "unknown consumer config"),
    ],
)
def test_client_certificate_settings_that_cannot_take_effect_are_refused(
    config: dict[str, str | None], message: str
) -> None:
    given = {**BASE, "value.deserializer": "avro", "schema.registry.url": "https://h:1", **config}
    with pytest.raises(ConfigError, match=message):
        ConsumerConfig.from_mapping({k: v for k, v in given.items() if v is not None})


def test_unusable_certificate_files_are_refused_naming_their_setting(registry: MtlsRegistry, tmp_path: Path) -> None:
    """The files are read when the client is made, each error naming the setting at fault."""
    not_pem = tmp_path / "not.pem"
    not_pem.write_text("hello")
    cases = [
        ((registry.ca, str(tmp_path / "none.crt"), registry.key, ""), "certificate.location", "No such file"),
        ((registry.ca, registry.cert, str(not_pem), ""), "key.location", "is not a PEM file"),
        ((registry.ca, registry.cert, registry.stranger_key, ""), "certificate.location", "KEY_VALUES_MISMATCH"),
        ((registry.ca, registry.cert, registry.encrypted_key, ""), "key.location", "ssl.key.password is not set"),
        ((registry.ca, registry.cert, registry.encrypted_key, "wrong"), "key.location", "password does not decrypt"),
        (
            (registry.ca, registry.stranger_cert, registry.encrypted_key, KEY_PASSWORD),
            "certificate.location",
            "KEY_VALUES_MISMATCH",
        ),
    ]
    for files, option, message in cases:
        with pytest.raises(RegistryTlsError, match=message) as refused:
            tls_context(*files)
        assert refused.value.option == f"schema.registry.ssl.{option}"
        with pytest.raises(ConfigError, match=message):  # what the serializers' first use raises
            SchemaRegistryClient(registry.url, "", 10.0, *files)

"""The Spark source's client certificate for the schema registry (``schema.registry.ssl.certificate.location``,
``.key.location``, ``.key.password``, as odradek's serializers name them): checked when the query starts, each
refusal naming its option, and presented by the executors' decoders to a registry that requires one (the stand-in
registry of tests/client/test_registry_client_certificates.py)."""

from __future__ import annotations

import pytest

from odradek.client.schema_registry import TLS_OPTIONS, SchemaRegistryClient
from odradek.client.serialization import AvroSerializer
from odradek.spark_connector.decoding import DecodingError, Registry
from odradek.spark_connector.options import DecodeOptions, OptionError, SourceOptions
from odradek.spark_connector.source import resolve_decodings

from ..client.test_registry_client_certificates import KEY_PASSWORD, USER, MtlsRegistry, _Registry
from ..client.test_registry_client_certificates import registry as registry  # the fixture, shared

BASE = {"bootstrap.servers": "127.0.0.1:9092", "subscribe": "users", "valueFormat": "avro", "valueSchema": USER}


def options(registry: MtlsRegistry, key: str) -> dict[str, str]:
    return {
        **BASE,
        "schema.registry.url": registry.url,
        "schema.registry.ssl.ca.location": registry.ca,
        "schema.registry.ssl.certificate.location": registry.cert,
        "schema.registry.ssl.key.location": key,
    }


def test_the_executors_decoder_presents_the_certificate(registry: MtlsRegistry) -> None:
    writer = SchemaRegistryClient(
        registry.url, ca_location=registry.ca, certificate_location=registry.cert, key_location=registry.key
    )
    framed = AvroSerializer(writer, USER).serialize("users", {"name": "ada"})
    given = options(registry, registry.encrypted_key)
    with pytest.raises(OptionError, match=r"is encrypted and schema\.registry\.ssl\.key\.password is not set"):
        DecodeOptions.parse(given)
    given["Schema.Registry.SSL.Key.Password"] = KEY_PASSWORD  # option names are case-insensitive, as Spark's
    parsed = DecodeOptions.parse(given)
    assert parsed.registry == Registry(
        registry.url, "", registry.ca, registry.cert, registry.encrypted_key, KEY_PASSWORD
    )
    assert KEY_PASSWORD not in repr(SourceOptions.parse(given, batch=True))
    value = resolve_decodings(parsed)[1]
    assert value is not None and value.decoder()([framed], [0]).to_pylist() == [{"name": "ada"}]
    assert _Registry.seen[-1] == ("/schemas/ids/1", "carol")
    without = {k: v for k, v in given.items() if k.lower() not in TLS_OPTIONS[1:]}  # the CA only
    unverified = resolve_decodings(DecodeOptions.parse(without))[1]
    assert unverified is not None
    with pytest.raises(DecodingError, match="requires client certificates"):
        unverified.decoder()([framed], [0])


@pytest.mark.parametrize(
    "change, option, message",
    [
        ({"schema.registry.ssl.key.location": None}, "certificate.location", "needs schema.registry.ssl.key.location"),
        (
            {"schema.registry.ssl.certificate.location": None},
            "key.location",
            "needs schema.registry.ssl.certificate.location",
        ),
        (
            {
                "schema.registry.ssl.certificate.location": None,
                "schema.registry.ssl.key.location": None,
                "schema.registry.ssl.key.password": "pw",
            },
            "key.password",
            "needs schema.registry.ssl.key.location",
        ),
        ({"schema.registry.ssl.certificate.location": " "}, "certificate.location", "is empty"),
        ({"schema.registry.ssl.certificate.location": "/nonexistent.crt"}, "certificate.location", "No such file"),
        ({"schema.registry.url": "http://127.0.0.1:1"}, "ca.location", "needs an https:// schema.registry.url"),
    ],
)
def test_certificate_options_that_cannot_take_effect_are_refused(
    registry: MtlsRegistry, change: dict[str, str | None], option: str, message: str
) -> None:
    given = {**options(registry, registry.key), **change}
    with pytest.raises(OptionError, match=message) as refused:
        DecodeOptions.parse({k: v for k, v in given.items() if v is not None})
    assert refused.value.option == f"schema.registry.ssl.{option}"

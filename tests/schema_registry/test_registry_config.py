"""``schema.registry.listeners`` and its security keys: what they accept, what they refuse (with a one-line
ConfigError), where the address goes (the listener the node binds, and the address other brokers forward writes
to), and the client certificates and authentication each layout gets."""

from __future__ import annotations

from typing import Any

import pytest

from odradek.broker.config import ConfigError, Endpoint, HttpsEndpoint, NodeConfig

BASE: dict[str, Any] = {
    "process.roles": "broker",
    "node.id": 4,
    "controller.quorum.voters": "1@127.0.0.1:9093",
    "listeners": "PLAINTEXT://10.0.0.4:9092,KAFKA://10.0.0.4:9094",
}


TLS_FILES = {"ssl.certificate.location": "c.pem", "ssl.key.location": "k.pem", "ssl.ca.location": "ca.pem"}
# A secured layout: SCRAM over TLS on both client listeners, brokers calling each other with certificates.
SECURED = {
    **TLS_FILES,
    "listener.security.protocol.map": "PLAINTEXT:SASL_SSL,KAFKA:SASL_SSL",
    "ssl.client.auth": "required",
    "listener.name.kafka.ssl.client.auth": "requested",
    "authorizer.class.name": "odradek",
}
HTTPS = {"schema.registry.listeners": "https://0.0.0.0:8081"}


def node(**extra: Any) -> NodeConfig:
    return NodeConfig({**BASE, **extra})


def test_off_unless_configured() -> None:
    assert node().schema_registry_listener is None
    assert node(**{"schema.registry.listeners": ""}).advertised_schema_registry_listener is None


def test_a_listener_binds_its_address_and_a_wildcard_advertises_the_broker_host() -> None:
    config = node(**{"schema.registry.listeners": "http://0.0.0.0:8081"})
    assert config.schema_registry_listener == Endpoint("SCHEMA_REGISTRY", "0.0.0.0", 8081)
    assert config.advertised_schema_registry_listener == Endpoint("SCHEMA_REGISTRY", "10.0.0.4", 8081)
    named = node(**{"schema.registry.listeners": "HTTP://registry.local:18081"})
    assert named.advertised_schema_registry_listener == Endpoint("SCHEMA_REGISTRY", "registry.local", 18081)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"schema.registry.listeners": "0.0.0.0:8081"}, "is not http://host:port"),
        ({"schema.registry.listeners": "http://0.0.0.0"}, "is not http://host:port"),
        ({"schema.registry.listeners": "http://0.0.0.0:0"}, "port 1-65535"),
        ({"schema.registry.listeners": "ftp://0.0.0.0:8081"}, "is not http://host:port"),
        ({"schema.registry.listeners": "http://a:8081,http://b:8082"}, "only one schema registry listener"),
        ({"schema.registry.listeners": "http://0.0.0.0:9094"}, "as listener KAFKA does"),
        (
            {"schema.registry.listeners": "http://0.0.0.0:8081", **SECURED},
            "plain HTTP, but listener PLAINTEXT uses TLS",
        ),
        (
            {
                "schema.registry.listeners": "http://0.0.0.0:8081",
                "listener.security.protocol.map": "KAFKA:SSL",
                **TLS_FILES,
            },
            "plain HTTP, but listener KAFKA uses TLS",
        ),
        (
            {"schema.registry.listeners": "http://0.0.0.0:8081", "schema.registry.ssl.client.auth": "required"},
            "client certificates need https",
        ),
        (HTTPS, "needs ssl.certificate.location and ssl.key.location"),
        (
            {**HTTPS, "ssl.certificate.location": "c.pem", "ssl.key.location": "k.pem", "ssl.client.auth": "none"}
            | {"schema.registry.ssl.client.auth": "requested"},
            "client certificates \\(requested\\) need ssl.ca.location",
        ),
        (
            {
                **HTTPS,
                **SECURED,
                "schema.registry.authentication": "none",
                "schema.registry.ssl.client.auth": "requested",
            },
            "schema.registry.authentication=none, but listener PLAINTEXT authenticates its clients with SASL",
        ),
        ({**HTTPS, **SECURED, "schema.registry.authentication": "bearer"}, "must be none or basic"),
        ({**HTTPS, **SECURED, "schema.registry.ssl.client.auth": "sometimes"}, "none, requested or required"),
        ({**HTTPS, **SECURED, "ssl.key.password": "pw"}, "encrypted key \\(ssl.key.password\\)"),
        ({"schema.registry.authentication": "basic"}, "schema.registry.listeners is not"),
        ({"schema.registry.ssl.client.auth": "none"}, "schema.registry.listeners is not"),
    ],
)
def test_bad_values_are_refused_in_one_line(extra: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message) as e:
        node(**extra)
    assert "\n" not in str(e.value)


def test_only_a_broker_serves_it() -> None:
    with pytest.raises(ConfigError, match="only a broker serves the schema registry"):
        NodeConfig(
            {
                "process.roles": "controller",
                "node.id": 1,
                "controller.quorum.voters": "1@127.0.0.1:9093",
                "listeners": "CONTROLLER://127.0.0.1:9093",
                "schema.registry.listeners": "http://127.0.0.1:8081",
            }
        )


def test_https_takes_the_node_certificate_and_client_certificates_follow_ssl_client_auth() -> None:
    config = node(**HTTPS, **SECURED)
    assert config.schema_registry_listener == HttpsEndpoint("SCHEMA_REGISTRY", "0.0.0.0", 8081)
    assert config.schema_registry_tls and config.schema_registry_client_auth == "required"
    assert config.schema_registry_authentication == "basic"  # as the SASL client listeners
    requested = node(**HTTPS, **SECURED, **{"schema.registry.ssl.client.auth": "requested"})
    assert requested.schema_registry_client_auth == "requested"
    plain = node(**{"schema.registry.listeners": "http://0.0.0.0:8081"})
    assert not plain.schema_registry_tls and plain.schema_registry_client_auth == "none"
    assert plain.schema_registry_authentication == "none"  # as the PLAINTEXT client listeners
    assert node(**{"schema.registry.listeners": "http://0.0.0.0:8081", "schema.registry.authentication": "basic"})


def test_no_authentication_next_to_sasl_needs_required_client_certificates() -> None:
    config = node(**HTTPS, **SECURED, **{"schema.registry.authentication": "none"})  # ssl.client.auth=required
    assert config.schema_registry_authentication == "none" and config.schema_registry_client_auth == "required"


def test_with_an_authorizer_and_tls_broker_listeners_the_registry_is_accepted() -> None:
    # Refused before the registry had security of its own; its reader now reaches the broker listener with the
    # node's certificate.
    assert node(**HTTPS, **SECURED).authorizer_settings is not None

"""``http.listeners`` and ``http.authentication``: what they accept, what they refuse (with a one-line
ConfigError), where the listener's address goes, and how callers are authenticated by default (as the broker's
client listeners: HTTP Basic where they use SASL)."""

from __future__ import annotations

from typing import Any

import pytest

from odradek.broker.config import ConfigError, Endpoint, NodeConfig

BASE: dict[str, Any] = {
    "process.roles": "broker",
    "node.id": 4,
    "controller.quorum.voters": "1@127.0.0.1:9093",
    "listeners": "PLAINTEXT://10.0.0.4:9092,KAFKA://10.0.0.4:9094",
}
SECURED: dict[str, Any] = {  # SASL without TLS: the HTTP API can match it (Basic over plain HTTP)
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,KAFKA:SASL_PLAINTEXT",
}
TLS: dict[str, Any] = {
    "listeners": "SSL://10.0.0.4:9092,KAFKA://10.0.0.4:9094",
    "listener.security.protocol.map": "SSL:SASL_SSL,CONTROLLER:SSL,KAFKA:SASL_SSL",
    "ssl.certificate.location": "c.pem",
    "ssl.key.location": "k.pem",
    "ssl.ca.location": "ca.pem",
    "ssl.client.auth": "required",
}


def node(**extra: Any) -> NodeConfig:
    return NodeConfig({**BASE, **extra})


def test_off_unless_configured() -> None:
    assert node().http_listener is None and node().advertised_http_listener is None
    assert node(**{"http.listeners": ""}).http_listener is None


def test_a_listener_binds_its_address_and_a_wildcard_advertises_the_broker_host() -> None:
    config = node(**{"http.listeners": "http://0.0.0.0:8082"})
    assert config.http_listener == Endpoint("HTTP", "0.0.0.0", 8082)
    assert config.advertised_http_listener == Endpoint("HTTP", "10.0.0.4", 8082)
    named = node(**{"http.listeners": "HTTP://api.local:18082"})
    assert named.advertised_http_listener == Endpoint("HTTP", "api.local", 18082)


def test_authentication_follows_the_client_listeners_unless_set() -> None:
    assert node(**{"http.listeners": "http://0.0.0.0:8082"}).http_authentication == "none"
    assert node(**{"http.listeners": "http://0.0.0.0:8082", "http.authentication": "basic"}).http_authentication == (
        "basic"
    )
    secured = NodeConfig({**BASE, **SECURED, "http.listeners": "http://0.0.0.0:8082"})
    assert secured.http_authentication == "basic"


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"http.listeners": "0.0.0.0:8082"}, "is not http://host:port"),
        ({"http.listeners": "http://0.0.0.0"}, "is not http://host:port"),
        ({"http.listeners": "http://0.0.0.0:70000"}, "port 1-65535"),
        ({"http.listeners": "https://0.0.0.0:8082"}, "it needs ssl.certificate.location and ssl.key.location"),
        ({"http.listeners": "http://0.0.0.0:8082", "http.ssl.client.auth": "required"}, "client certificates need"),
        ({"http.listeners": "http://0.0.0.0:8082", "http.ssl.client.auth": "maybe"}, "none, requested or required"),
        ({"http.ssl.client.auth": "required"}, "http.listeners is not"),
        ({"http.listeners": "http://a:8082,http://b:8083"}, "only one HTTP API listener"),
        ({"http.listeners": "http://0.0.0.0:9094"}, "as KAFKA does"),
        (
            {"http.listeners": "http://0.0.0.0:8081", "schema.registry.listeners": "http://0.0.0.0:8081"},
            "as schema.registry.listeners does",
        ),
        ({"http.listeners": "http://0.0.0.0:8082", "http.authentication": "digest"}, "must be none or basic"),
        ({"http.authentication": "basic"}, "http.listeners is not"),
    ],
)
def test_bad_values_are_refused_in_one_line(extra: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message) as e:
        node(**extra)
    assert "\n" not in str(e.value)


def test_only_a_broker_serves_it() -> None:
    with pytest.raises(ConfigError, match="only a broker serves the HTTP API"):
        NodeConfig(
            {
                "process.roles": "controller",
                "node.id": 1,
                "controller.quorum.voters": "1@127.0.0.1:9093",
                "listeners": "CONTROLLER://127.0.0.1:9093",
                "http.listeners": "http://127.0.0.1:8082",
            }
        )


def test_no_authentication_is_refused_where_the_client_listeners_use_sasl() -> None:
    with pytest.raises(ConfigError, match="authenticates its clients with SASL"):
        NodeConfig({**BASE, **SECURED, "http.listeners": "http://0.0.0.0:8082", "http.authentication": "none"})


def test_a_plain_http_listener_is_refused_next_to_tls_listeners() -> None:
    """It would take passwords, or let callers in, in the clear where every other client listener encrypts."""
    with pytest.raises(ConfigError, match=r"listener SSL uses TLS: .* use https://host:port"):
        NodeConfig({**BASE, **TLS, "http.listeners": "http://0.0.0.0:8082"})


def test_https_takes_the_nodes_certificate_and_client_authentication() -> None:
    """https serves the node's ssl.* files; client certificates as http.ssl.client.auth says, else ssl.client.auth."""
    config = NodeConfig({**BASE, **TLS, "http.listeners": "https://0.0.0.0:8443"})
    assert config.http_tls and config.http_client_auth == "required"
    assert config.advertised_http_listener == Endpoint("HTTP", "10.0.0.4", 8443)
    requested = NodeConfig(
        {**BASE, **TLS, "http.listeners": "https://0.0.0.0:8443", "http.ssl.client.auth": "requested"}
    )
    assert requested.http_client_auth == "requested" and requested.http_authentication == "basic"
    assert not node(**{"http.listeners": "http://0.0.0.0:8082"}).http_tls
    assert node(**{"http.listeners": "http://0.0.0.0:8082"}).http_client_auth == "none"


def test_client_certificates_need_the_ca() -> None:
    without_ca = {"ssl.certificate.location": "c.pem", "ssl.key.location": "k.pem"}
    with pytest.raises(ConfigError, match=r"client certificates \(requested\) need ssl.ca.location"):
        NodeConfig(
            {**BASE, **without_ca, "http.listeners": "https://0.0.0.0:8443", "http.ssl.client.auth": "requested"}
        )


def test_no_authentication_next_to_sasl_only_with_required_client_certificates() -> None:
    """Every caller then has a certificate's principal: nobody comes in as User:ANONYMOUS."""
    https = {**BASE, **TLS, "http.listeners": "https://0.0.0.0:8443", "http.authentication": "none"}
    assert NodeConfig(https).http_authentication == "none"
    with pytest.raises(ConfigError, match="require client certificates"):
        NodeConfig({**https, "http.ssl.client.auth": "requested"})

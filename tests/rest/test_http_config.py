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
        ({"http.listeners": "https://0.0.0.0:8082"}, "https is not supported yet for the HTTP API"),
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
    """Until the HTTP API has TLS it would take passwords, or let callers in, in the clear where every other client
    listener encrypts."""
    with pytest.raises(ConfigError, match=r"listener SSL uses TLS: .* https is not supported yet"):
        NodeConfig({**BASE, **TLS, "http.listeners": "http://0.0.0.0:8082"})

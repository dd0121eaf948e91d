"""``schema.registry.listeners``: what it accepts, what it refuses (with a one-line ConfigError), and where its
address goes (the listener the node binds, and the address other brokers forward writes to)."""

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
        ({"schema.registry.listeners": "https://0.0.0.0:8081"}, "https is not supported yet"),
        ({"schema.registry.listeners": "http://a:8081,http://b:8082"}, "only one schema registry listener"),
        ({"schema.registry.listeners": "http://0.0.0.0:9094"}, "as listener KAFKA does"),
        (
            {"schema.registry.listeners": "http://0.0.0.0:8081", "authorizer.class.name": "odradek"},
            "not supported yet with an authorizer",
        ),
        (
            {
                "schema.registry.listeners": "http://0.0.0.0:8081",
                "listener.security.protocol.map": "PLAINTEXT:SSL",
                "ssl.certificate.location": "c.pem",
                "ssl.key.location": "k.pem",
            },
            "not supported yet with a SSL broker listener",
        ),
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

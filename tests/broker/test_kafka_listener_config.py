"""The Kafka listener's configuration: which listener speaks Kafka's protocol, its advertised address, and the
layouts refused at start."""

from typing import Any

import pytest

from odradek.broker.config import ConfigError, Endpoint, NodeConfig


def node(**extra: Any) -> NodeConfig:
    props: dict[str, Any] = {
        "process.roles": "broker,controller",
        "node.id": 1,
        "controller.quorum.voters": "1@127.0.0.1:9093",
        "listeners": "KAFKA://:9192,PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
    }
    props.update(extra)
    return NodeConfig(props)


def test_the_kafka_listener_is_apart_from_the_grpc_broker_listener() -> None:
    config = node(**{"advertised.listeners": "PLAINTEXT://b1.example:9092,KAFKA://b1.example:19192"})
    assert config.kafka_listener == Endpoint("KAFKA", "0.0.0.0", 9192)
    assert config.advertised_kafka_listener == Endpoint("KAFKA", "b1.example", 19192)
    # listed first, the Kafka listener is still not the gRPC one
    assert config.broker_listener == Endpoint("PLAINTEXT", "127.0.0.1", 9092)
    assert config.advertised_broker_listener == Endpoint("PLAINTEXT", "b1.example", 9092)
    assert config.controller_listener == Endpoint("CONTROLLER", "127.0.0.1", 9093)


def test_the_advertised_kafka_address_falls_back_to_the_listener_and_names_are_configurable() -> None:
    config = node(**{"advertised.listeners": "PLAINTEXT://b1.example:9092"})
    assert config.advertised_kafka_listener == config.kafka_listener == Endpoint("KAFKA", "0.0.0.0", 9192)
    renamed = node(
        **{
            "listeners": "WIRE://127.0.0.1:7000,KAFKA://127.0.0.1:7001,CONTROLLER://127.0.0.1:9093",
            "kafka.listener.names": "wire",
        }
    )
    assert renamed.kafka_listener == Endpoint("WIRE", "127.0.0.1", 7000)
    assert renamed.broker_listener == Endpoint("KAFKA", "127.0.0.1", 7001)  # not a Kafka name here: gRPC


def test_without_a_kafka_listener_there_is_none() -> None:
    config = node(listeners="PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093")
    assert config.kafka_listener is None and config.advertised_kafka_listener is None


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            {
                "process.roles": "controller",
                "listeners": "KAFKA://127.0.0.1:9192,CONTROLLER://127.0.0.1:9093",
            },
            "listener KAFKA speaks Kafka's protocol, which only a broker serves",
        ),
        (
            {"kafka.listener.names": "KAFKA,CONTROLLER"},
            "CONTROLLER is in both controller.listener.names and kafka.listener.names",
        ),
        (
            {
                "listeners": "KAFKA://:9192,K2://:9193,PLAINTEXT://:9092,CONTROLLER://:9093",
                "kafka.listener.names": "KAFKA,K2",
            },
            "only one Kafka listener is supported, not KAFKA, K2",
        ),
        (
            {"listeners": "KAFKA://:9092,PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093"},
            "listeners KAFKA and PLAINTEXT both use port 9092",
        ),
        (
            {"listeners": "KAFKA://:9192,CONTROLLER://127.0.0.1:9093"},
            "neither a controller nor a Kafka one",
        ),
        (
            {
                "listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
                "advertised.listeners": "KAFKA://b1.example:9192",
            },
            "advertised.listeners names KAFKA, which is not in 'listeners'",
        ),
        ({"connections.max.idle.ms": 0}, "'connections.max.idle.ms': must be at least 1"),
    ],
)
def test_bad_kafka_listener_layouts_are_refused(extra: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message) as e:
        node(**extra)
    assert "\n" not in str(e.value)


def test_connections_max_idle_ms_is_kafkas_ten_minutes_unless_set() -> None:
    assert node()["connections.max.idle.ms"] == 600_000
    assert node(**{"connections.max.idle.ms": 5000})["connections.max.idle.ms"] == 5000

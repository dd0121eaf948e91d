from pathlib import Path

import pytest

from odradek.broker.config import ConfigError, NodeConfig
from odradek.broker.storage import StorageFormatError, format_storage, verify_storage


def node(tmp_path: Path, **extra) -> NodeConfig:
    props = {
        "process.roles": "broker,controller",
        "node.id": 1,
        "controller.quorum.voters": "1@127.0.0.1:19091",
        "listeners": "PLAINTEXT://127.0.0.1:19092,CONTROLLER://127.0.0.1:19091",
        "log.dirs": str(tmp_path / "data"),
    }
    props.update(extra)
    return NodeConfig(props)


def test_toml_forms_flatten_to_kafka_names(tmp_path: Path) -> None:
    path = tmp_path / "node.toml"
    path.write_text(
        'process.roles = "broker"\n"node.id" = 4\ncontroller.quorum.voters = "1@h:1"\n'
        '[broker]\nrack = "r1"\nsession.timeout.ms = 6000\n'
    )
    config = NodeConfig.load(path)
    assert config.roles == {"broker"} and config.node_id == 4
    assert config["broker.rack"] == "r1" and config["broker.session.timeout.ms"] == 6000
    assert str(config.broker_listener) == "127.0.0.1:9092" and config.controller_listener is None


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"no.such.key": 1}, "unknown config 'no.such.key'"),
        ({"node.id": "x"}, "'node.id'"),
        ({"node.id": True}, "'node.id'"),
        ({"process.roles": "leader"}, "process.roles"),
        ({"controller.quorum.voters": "1@nohost"}, "id@host:port"),
        ({"controller.quorum.voters": "2@h:1"}, "not in controller.quorum.voters"),
        ({"listeners": "PLAINTEXT://127.0.0.1:1"}, "CONTROLLER listener"),
        ({"listeners": "SSL://127.0.0.1:1,CONTROLLER://127.0.0.1:2"}, "listener SSL is SSL: it needs ssl.certificate"),
        ({"advertised.listeners": "SASL_SSL://h:1"}, "listener SASL_SSL is SASL_SSL: it needs ssl.certificate"),
        ({"listener.security.protocol.map": "CONTROLLER:TLS"}, "protocol must be one of PLAINTEXT, SSL"),
        ({"listener.security.protocol.map": "CONTROLLER"}, "'CONTROLLER' is not NAME:PROTOCOL"),
        ({"listener.security.protocol.map": "CONTROLLER:SSL"}, "listener CONTROLLER is SSL: it needs"),
        ({"ssl.client.auth": "maybe"}, "ssl.client.auth must be none, requested or required"),
        (
            {
                "listener.security.protocol.map": "CONTROLLER:SSL",
                "ssl.certificate.location": "c",
                "ssl.key.location": "k",
                "ssl.client.auth": "required",
            },
            "ssl.client.auth=required needs ssl.ca.location",
        ),
        (
            {
                "listener.security.protocol.map": "CONTROLLER:SSL",
                "ssl.certificate.location": "c",
                "ssl.key.location": "k",
                "ssl.ca.location": "a",
                "ssl.client.auth": "requested",
            },
            "ssl.client.auth=requested is not supported on the gRPC listener CONTROLLER",
        ),
        (
            {"listener.name.controller.ssl.keystore.location": "k.jks"},
            "unknown config 'listener.name.controller.ssl.keystore.location': only ssl.client.auth may be set per "
            "listener",
        ),
        ({"listener.name.controller": "required"}, "only ssl.client.auth may be set per listener"),
        ({"listener.name.CONTROLLER.ssl.client.auth": "required"}, "listener name in lower case"),
        ({"listener.name.controller.ssl.client.auth": "maybe"}, "'listener.name.controller.ssl.client.auth': ssl.cl"),
        ({"listener.name.nowhere.ssl.client.auth": "none"}, "listener.name.nowhere.ssl.client.auth names no listener"),
        ({"listener.name.controller.ssl.client.auth": "required"}, "listener CONTROLLER is PLAINTEXT: client auth"),
        (
            {
                "listener.security.protocol.map": "CONTROLLER:SSL",
                "ssl.certificate.location": "c",
                "ssl.key.location": "k",
                "listener.name.controller.ssl.client.auth": "required",
            },
            "listener.name.controller.ssl.client.auth=required needs ssl.ca.location",
        ),
        (
            {
                "listener.security.protocol.map": "CONTROLLER:SSL",
                "ssl.certificate.location": "c",
                "ssl.key.location": "k",
                "ssl.ca.location": "a",
                "ssl.client.auth": "required",
                "listener.name.controller.ssl.client.auth": "requested",
            },
            "listener.name.controller.ssl.client.auth=requested is not supported on the gRPC listener CONTROLLER",
        ),
        (
            {
                "listener.security.protocol.map": "PLAINTEXT:SASL_SSL",
                "ssl.certificate.location": "c",
                "ssl.key.location": "k",
                "ssl.ca.location": "a",
                "ssl.client.auth": "required",
                "listener.name.plaintext.ssl.client.auth": "none",
            },
            "PLAINTEXT is SASL_SSL: it needs listener.name.plaintext.ssl.client.auth=required",
        ),
        ({"unclean.leader.election.enable": "maybe"}, "true or false"),
        ({"unsafe.testing.log.dir.failure.file": "../FAIL"}, "plain file name"),
        ({"log.cleanup.policy": "shred"}, "log.cleanup.policy must be delete, compact, compact,delete or empty"),
        ({"log.cleaner.min.cleanable.ratio": 1.5}, "must be between 0 and 1"),
        ({"log.cleaner.io.max.bytes.per.second": 0}, "must be above 0"),
        # Kafka's LONG: its ConfigException's reasons
        ({"replica.alter.log.dirs.io.max.bytes.per.second": "10MB"}, "'10MB' .*: Not a number of type LONG"),
        ({"replica.alter.log.dirs.io.max.bytes.per.second": "9223372036854775808"}, "Not a number of type LONG"),
        ({"replica.alter.log.dirs.io.max.bytes.per.second": 1.5}, "Not a number of type LONG"),
        ({"replica.alter.log.dirs.io.max.bytes.per.second": -1}, "Value must be at least 0"),
        ({"log.cleaner.io.buffer.load.factor": 1}, "must be above 0 and below 1"),
        ({"log.cleaner.dedupe.buffer.size": 1000}, "must be at least 1048576"),
        ({"num.replica.fetchers": 4}, "'num.replica.fetchers': not supported yet, only 1"),
        ({"replica.fetch.protocol": "http"}, "replica.fetch.protocol must be grpc or kafka"),
        ({"controller.quorum.election.backoff.max.ms": 50}, "election.backoff.max.ms': not supported yet"),
        ({"fetch.max.bytes": 100}, "'fetch.max.bytes': must be at least 1024"),
        ({"max.partitions.per.broker": 0}, "'max.partitions.per.broker': must be at least 1"),
        ({"num.partitions": 0}, "'num.partitions': must be at least 1"),
        ({"log.max.open.files": 2}, r"'log.max.open.files': must be 0 \(derived from the open-file limit\) or at"),
        ({"default.replication.factor": -1}, "'default.replication.factor': must be at least 1"),
        ({"group.consumer.assignors": "uniform,sticky"}, "assignor 'sticky' is not available"),
        (
            {"group.consumer.heartbeat.interval.ms": 45000},
            "group.consumer.heartbeat.interval.ms must be less than group.consumer.session.timeout.ms",
        ),
        ({"group.consumer.migration.policy": "sideways"}, "'sideways' is not a migration policy"),
        (
            {"group.consumer.session.timeout.ms": 30000},
            r"group.consumer.session.timeout.ms must be between group.consumer.min.session.timeout.ms \(45000\)",
        ),
        (
            {"group.consumer.heartbeat.interval.ms": 20000},
            r"group.consumer.heartbeat.interval.ms must be between .*max.heartbeat.interval.ms \(15000\)",
        ),
        (
            {"group.consumer.min.session.timeout.ms": 70000},
            "group.consumer.max.session.timeout.ms must be greater than or equal to "
            "group.consumer.min.session.timeout.ms",
        ),
    ],
)
def test_bad_configs_fail_with_one_line(tmp_path: Path, extra: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as e:
        node(tmp_path, **extra)
    assert "\n" not in str(e.value)


def test_listener_protocols_follow_kafkas_default_map_and_the_configured_one(tmp_path: Path) -> None:
    default = node(tmp_path, listeners="PLAINTEXT://127.0.0.1:1,CONTROLLER://127.0.0.1:2,KAFKA://127.0.0.1:3")
    assert [default.listener_protocol(n) for n in ("PLAINTEXT", "CONTROLLER", "KAFKA", "ssl", "SASL_PLAINTEXT")] == [
        "PLAINTEXT",
        "PLAINTEXT",
        "PLAINTEXT",
        "SSL",
        "SASL_PLAINTEXT",
    ]
    tls = {"ssl.certificate.location": "c.pem", "ssl.key.location": "k.pem"}
    mapped = node(
        tmp_path,
        listeners="INTERNAL://127.0.0.1:1,CONTROLLER://127.0.0.1:2,KAFKA://127.0.0.1:3",
        **{"listener.security.protocol.map": "internal:sasl_ssl, CONTROLLER:SSL,KAFKA:SASL_PLAINTEXT"},
        **{"ssl.client.auth": "required", "ssl.ca.location": "ca.pem"},
        **tls,
    )
    assert [mapped.listener_protocol(n) for n in ("INTERNAL", "CONTROLLER", "KAFKA")] == [
        "SASL_SSL",
        "SSL",
        "SASL_PLAINTEXT",
    ]
    assert (mapped.controller_protocol, mapped.inter_broker_protocol, mapped.kafka_protocol) == (
        "SSL",
        "SASL_SSL",
        "SASL_PLAINTEXT",
    )
    named = node(tmp_path, listeners="SSL://127.0.0.1:1,CONTROLLER://127.0.0.1:2", **tls)
    assert named.inter_broker_protocol == "SSL" and named.controller_protocol == "PLAINTEXT"


SECURED = {
    "listeners": "SSL://127.0.0.1:19092,CONTROLLER://127.0.0.1:19091,KAFKA://127.0.0.1:19093",
    "listener.security.protocol.map": "SSL:SASL_SSL,CONTROLLER:SSL,KAFKA:SASL_SSL",
    "ssl.certificate.location": "c.pem",
    "ssl.key.location": "k.pem",
    "ssl.ca.location": "ca.pem",
}


def test_a_listener_prefixed_ssl_client_auth_overrides_the_node_wide_one(tmp_path: Path) -> None:
    config = node(
        tmp_path, **SECURED, **{"ssl.client.auth": "required", "listener.name.kafka.ssl.client.auth": "requested"}
    )
    assert [config.client_auth(n) for n in ("SSL", "CONTROLLER", "KAFKA", "kafka")] == [
        "required",
        "required",
        "requested",
        "requested",
    ]
    assert config.is_set("listener.name.kafka.ssl.client.auth")
    # The other way round: requested node-wide (Kafka listener), the gRPC listeners requiring certificates.
    grpc_required = {f"listener.name.{n}.ssl.client.auth": "required" for n in ("ssl", "controller")}
    inverted = node(tmp_path, **SECURED, **{"ssl.client.auth": "requested"}, **grpc_required)
    assert [inverted.client_auth(n) for n in ("SSL", "CONTROLLER", "KAFKA")] == ["required", "required", "requested"]
    # TOML's table form flattens to the same key; a name only the layout has (a controller-only node's KAFKA) is taken.
    path = tmp_path / "controller.toml"
    path.write_text(
        'process.roles = "controller"\n"node.id" = 1\ncontroller.quorum.voters = "1@127.0.0.1:19091"\n'
        'listeners = "CONTROLLER://127.0.0.1:19091"\n'
        '"listener.security.protocol.map" = "SSL:SASL_SSL,CONTROLLER:SSL,KAFKA:SASL_SSL"\n'
        'ssl = { certificate.location = "c.pem", key.location = "k.pem", ca.location = "ca.pem", client.auth = '
        '"required" }\n[listener.name.kafka.ssl.client]\nauth = "requested"\n'
    )
    controller = NodeConfig.load(path)
    assert (controller.client_auth("CONTROLLER"), controller.client_auth("KAFKA")) == ("required", "requested")


def test_followers_fetch_over_a_sasl_ssl_kafka_listener_that_asks_for_certificates(tmp_path: Path) -> None:
    def refusal(node_wide: str, kafka: str | None = None) -> str | None:
        override = {} if kafka is None else {"listener.name.kafka.ssl.client.auth": kafka}
        grpc = {"listener.name.ssl.ssl.client.auth": "required", "listener.name.controller.ssl.client.auth": "none"}
        return node(tmp_path, **SECURED, **{"ssl.client.auth": node_wide}, **grpc, **override).kafka_fetch_refusal()

    assert refusal("required") is None and refusal("none", "requested") is None and refusal("none", "required") is None
    assert "(ssl.client.auth=none)" in (refusal("none") or "")
    assert "(listener.name.kafka.ssl.client.auth=none)" in (refusal("required", "none") or "")


def test_supported_values_of_partly_supported_keys_are_accepted(tmp_path: Path) -> None:
    config = node(
        tmp_path, **{"log.cleanup.policy": "compact, delete", "num.replica.fetchers": 1, "fetch.max.bytes": 2048}
    )
    assert (config["log.cleanup.policy"], config["num.replica.fetchers"], config["fetch.max.bytes"]) == (
        "compact,delete",
        1,
        2048,
    )


def test_format_then_verify_and_refuse_other_cluster(tmp_path: Path) -> None:
    config = node(tmp_path)
    with pytest.raises(StorageFormatError, match="not formatted"):
        verify_storage(config)
    assert format_storage(config, "alpha") == [tmp_path / "data"]
    assert verify_storage(config) == "alpha"
    with pytest.raises(StorageFormatError, match="already formatted"):
        format_storage(config, "alpha")
    assert format_storage(config, "alpha", ignore_formatted=True) == []
    with pytest.raises(StorageFormatError, match="cluster alpha"):
        format_storage(config, "beta")
    other_node = node(tmp_path, **{"node.id": 2, "controller.quorum.voters": "2@127.0.0.1:19091"})
    with pytest.raises(StorageFormatError, match="belongs to node 1"):
        verify_storage(other_node)
    with pytest.raises(StorageFormatError, match="cluster id"):
        format_storage(node(tmp_path / "x"), "bad id!")

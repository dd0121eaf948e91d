"""The cluster description and the node config generator: validation, rendering, and the configs it writes
loading as real node configs (``odradek deploy config``)."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import pytest

from odradek.broker.config import NodeConfig
from odradek.client.cli.main import main
from odradek.deploy.certs import CA_STEM, node_stem
from odradek.deploy.cluster import (
    ClusterSpec,
    ClusterSpecError,
    NodeSpec,
    cluster_warnings,
    load_cluster,
    parse_cluster,
    render_node_config,
    write_configs,
)

EXAMPLE = Path(__file__).resolve().parents[2] / "deploy" / "config" / "cluster.example.toml"
VOTERS = "1@10.0.0.1:9093,2@10.0.0.2:9093,3@10.0.0.3:9093"


def description(**overrides: Any) -> dict[str, Any]:
    """Three controllers, two brokers (one with a rack), one combined node."""
    data: dict[str, Any] = {
        "cluster_id": "q3vBFp6uRmW5Yx0wRkqkDg",
        "properties": {"log.dirs": "/data/{node_id}", "min.insync.replicas": 2, "default.replication.factor": 3},
        "nodes": [
            {"id": 1, "host": "10.0.0.1", "roles": ["controller"]},
            {"id": 2, "host": "10.0.0.2", "roles": ["controller"]},
            {"id": 3, "host": "10.0.0.3", "roles": "both", "rack": "r3"},
            {"id": 4, "host": "10.0.0.4", "roles": ["broker"], "rack": "r1"},
            {"id": 5, "host": "broker-5.internal", "roles": ["broker"]},
        ],
    }
    data.update(overrides)
    return data


def node_config(spec: ClusterSpec, node_id: int) -> NodeConfig:
    return NodeConfig(tomllib.loads(render_node_config(spec, node_id)))


def test_the_example_describes_three_controllers_and_three_brokers() -> None:
    spec = load_cluster(EXAMPLE)
    assert [n.node_id for n in spec.controllers] == [1, 2, 3]
    assert [n.node_id for n in spec.brokers] == [4, 5, 6]
    assert spec.voters == "1@10.0.0.11:9093,2@10.0.0.12:9093,3@10.0.0.13:9093"
    assert cluster_warnings(spec) == []
    for node in spec.nodes:
        assert node_config(spec, node.node_id).node_id == node.node_id


def test_a_controller_config_has_only_the_controller_listener() -> None:
    spec = parse_cluster(description())
    config = node_config(spec, 1)
    assert config.roles == {"controller"}
    assert [(v.node_id, v.host, v.port) for v in config.voters] == [(i, f"10.0.0.{i}", 9093) for i in (1, 2, 3)]
    assert str(config.controller_listener) == "10.0.0.1:9093"
    assert config.broker_listener is None
    assert config["metrics.port"] == 9100
    assert config.log_dirs == ["/data/1"]
    assert config["min.insync.replicas"] == 2


def test_a_broker_config_advertises_its_host_and_carries_its_rack() -> None:
    spec = parse_cluster(description())
    config = node_config(spec, 4)
    assert config.roles == {"broker"}
    assert str(config.broker_listener) == "10.0.0.4:9092"
    assert str(config.advertised_broker_listener) == "10.0.0.4:9092"
    assert config.controller_listener is None
    assert config["broker.rack"] == "r1"
    assert config.log_dirs == ["/data/4"]
    assert config["default.replication.factor"] == 3
    assert '"broker.rack"' not in render_node_config(spec, 5)


def test_brokers_get_a_kafka_listener_on_kafka_port_and_advertise_it() -> None:
    spec = parse_cluster(description(kafka_port=19192))
    for node_id in (3, 4):  # combined and broker
        config = node_config(spec, node_id)
        host = spec.node(node_id).host
        assert str(config.kafka_listener) == str(config.advertised_kafka_listener) == f"{host}:19192"
        assert str(config.advertised_broker_listener) == f"{host}:9092"
    assert node_config(spec, 1).kafka_listener is None  # a controller serves no clients
    assert parse_cluster(description()).kafka_port == 9192  # on by default
    off = parse_cluster(description(kafka_port=0))
    assert all(node_config(off, n).kafka_listener is None for n in (3, 4))


def test_brokers_serve_the_schema_registry_on_schema_registry_port() -> None:
    assert parse_cluster(description()).schema_registry_port == 0  # off unless configured
    assert all(node_config(parse_cluster(description()), n).schema_registry_listener is None for n in (3, 4, 5))
    spec = parse_cluster(description(schema_registry_port=8081))
    for node_id in (3, 4, 5):  # combined and brokers
        listener = node_config(spec, node_id).schema_registry_listener
        assert listener is not None and (listener.host, listener.port) == (spec.node(node_id).host, 8081)
    assert node_config(spec, 1).schema_registry_listener is None  # a controller serves no registry
    assert all(not node_config(spec, n).schema_registry_tls for n in (3, 4, 5))  # plain HTTP without --tls


def test_with_tls_the_schema_registry_is_https_with_the_nodes_certificate(tmp_path: Path) -> None:
    """--tls makes the registry https with the node's own certificate and key, and asks its callers for a
    certificate of the cluster CA as every other listener does; [properties] may still relax that for the registry
    alone (schema.registry.ssl.client.auth), which the node's config then checks."""
    for name in (node_stem(n) for n in range(1, 6)):
        (tmp_path / f"{name}.crt").touch()
        (tmp_path / f"{name}.key").touch()
    (tmp_path / f"{CA_STEM}.crt").touch()
    spec = parse_cluster(description(schema_registry_port=8081))
    for node_id in (3, 4, 5):  # combined and brokers
        text = render_node_config(spec, node_id, tmp_path)
        assert f'"schema.registry.listeners" = "https://{spec.node(node_id).host}:8081"' in text
        config = NodeConfig(tomllib.loads(text))
        assert config.schema_registry_tls and config.schema_registry_client_auth == "required"
        assert config["ssl.certificate.location"] == str(tmp_path / f"{node_stem(node_id)}.crt")
        assert config.schema_registry_authentication == "none"  # the principal is the certificate's
    assert NodeConfig(tomllib.loads(render_node_config(spec, 1, tmp_path))).schema_registry_listener is None
    data = description(schema_registry_port=8081)
    data["properties"]["schema.registry.ssl.client.auth"] = "requested"
    relaxed = NodeConfig(tomllib.loads(render_node_config(parse_cluster(data), 4, tmp_path)))
    assert relaxed.schema_registry_client_auth == "requested"
    with pytest.raises(
        ClusterSpecError, match=r"schema\.registry\.ssl\.client\.auth is set but schema\.registry\.listeners"
    ):
        render_node_config(parse_cluster(data), 4)  # plain HTTP takes no client certificates


def test_a_combined_node_listens_on_both_ports() -> None:
    spec = parse_cluster(description())
    assert spec.node(3).roles == ("broker", "controller")
    config = node_config(spec, 3)
    assert config.is_broker and config.is_controller
    assert str(config.broker_listener) == "10.0.0.3:9092"
    assert str(config.controller_listener) == "10.0.0.3:9093"


def test_the_rendered_text_keeps_the_template_comments() -> None:
    text = render_node_config(parse_cluster(description()), 4)
    assert text.startswith("# odradek node config: a broker")
    assert f'"controller.quorum.voters" = "{VOTERS}"' in text
    assert "$" not in text


def test_ports_and_list_valued_properties() -> None:
    data = description(broker_port=19092, controller_port=19093, metrics_port=0)
    data["properties"] = {"log": {"dirs": ["/d1/{node_id}", "/d2/{node_id}"]}}  # a table flattens to Kafka names
    spec = parse_cluster(data)
    config = node_config(spec, 4)
    assert config.log_dirs == ["/d1/4", "/d2/4"]
    assert str(config.broker_listener) == "10.0.0.4:19092"
    assert config["metrics.port"] == 0
    assert spec.voters.endswith("3@10.0.0.3:19093")


def test_voters_are_in_node_id_order_whatever_the_description_order() -> None:
    data = description()
    data["nodes"] = list(reversed(data["nodes"]))
    assert parse_cluster(data).voters == VOTERS


def test_specs_can_be_built_directly() -> None:
    spec = ClusterSpec(
        (NodeSpec(1, "a", ("controller", "broker")), NodeSpec(2, "b", ("broker",))),
        properties={"num.partitions": 3},
    )
    assert spec.node(1).roles == ("broker", "controller")
    assert node_config(spec, 2)["num.partitions"] == 3
    with pytest.raises(ClusterSpecError, match="node 7 is not in the cluster description"):
        render_node_config(spec, 7)


def _node(data: dict[str, Any], index: int, **changes: Any) -> dict[str, Any]:
    data["nodes"][index] = {**data["nodes"][index], **changes}
    return data


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (description(nodes=[]), "has no nodes"),
        (_node(description(), 1, id=1), "node 1: id used by more than one node"),
        (_node(description(), 4, host="10.0.0.4"), "node 5: broker_port 10.0.0.4:9092 is also node 4's broker_port"),
        (description(metrics_port=9092), "node 3: metrics_port 10.0.0.3:9092 is also node 3's broker_port"),
        (description(kafka_port=9092), "node 3: kafka_port 10.0.0.3:9092 is also node 3's broker_port"),
        (description(kafka_port=9093), "node 3: controller_port 10.0.0.3:9093 is also node 3's kafka_port"),
        (description(kafka_port=-1), "kafka_port -1 must be a port number"),
        (
            description(schema_registry_port=9192),
            "node 3: schema_registry_port 10.0.0.3:9192 is also node 3's kafka_port",
        ),
        (description(schema_registry_port=70000), "schema_registry_port 70000 must be a port number"),
        (
            description(properties={"schema.registry.listeners": "http://0.0.0.0:8081"}),
            "properties: 'schema.registry.listeners' is set per node",
        ),
        (description(properties={"kafka.listener.names": "K"}), "properties: 'kafka.listener.names' is set per node"),
        (description(nodes=[{"id": 1, "host": "h", "roles": ["broker"]}]), "no node has the controller role"),
        (_node(description(), 3, roles=["brokr"]), "node 4: roles ['brokr'] must be controller, broker or both"),
        (_node(description(), 3, roles=[]), "node 4: roles [] must be"),
        (_node(description(), 3, host="10.0.0.4:9092"), "node 4: host '10.0.0.4:9092' must be a host name"),
        (_node(description(), 3, id=-4), "node id -4 must be a non-negative integer"),
        (_node(description(), 3, rack=1), "node 4: rack must be a string"),
        (_node(description(), 3, zone="a"), "node 4: unknown key 'zone'"),
        (description(nodes=[{"host": "h", "roles": ["controller"]}]), "nodes[0]: 'id' is required"),
        (description(nodes=[{"id": 1, "roles": ["controller"]}]), "node 1: 'host' is required"),
        (description(nodes="x"), "nodes must be an array of tables"),
        (description(properties={"no.such.thing": 1}), "properties: unknown property 'no.such.thing'"),
        (description(properties={"node.id": 1}), "properties: 'node.id' is set per node"),
        (description(properties={"listeners": "PLAINTEXT://:1"}), "properties: 'listeners' is set per node"),
        (description(properties={"min.insync.replicas": "two"}), "invalid value 'two' for 'min.insync.replicas'"),
        (
            description(properties={"listener.name.kafka.ssl.client.auth": "maybe"}),
            "invalid value 'maybe' for 'listener.name.kafka.ssl.client.auth'",
        ),
        (
            description(properties={"listener.name.kafka.ssl.keystore.location": "k"}),
            "unknown property 'listener.name.kafka.ssl.keystore.location'",
        ),
        (description(properties=[1]), "properties must be a table"),
        (description(broker_port=70000), "broker_port 70000 must be a port number"),
        (description(controller_port=True), "controller_port True must be a port number"),
        (description(cluster_id="not an id"), "cluster_id: cluster id 'not an id' is not a UUID"),
        (description(cluster_id="prod"), "cluster_id: cluster id 'prod' is not a UUID"),
        (description(clusterid="x"), "unknown key 'clusterid' in the cluster description"),
    ],
)
def test_invalid_descriptions_fail_with_one_line_naming_the_problem(data: dict[str, Any], message: str) -> None:
    with pytest.raises(ClusterSpecError) as error:
        parse_cluster(data)
    assert message in str(error.value)
    assert "\n" not in str(error.value)


def test_a_listener_may_set_its_own_client_authentication(tmp_path: Path) -> None:
    """Kafka's listener.name.<listener>.ssl.client.auth passes through [properties] to every node's config, which
    checks the listener: with --tls the Kafka listener may only request client certificates while the others
    require them; without TLS the listener is PLAINTEXT, and the key is refused there."""
    for name in (node_stem(n) for n in range(1, 6)):
        (tmp_path / f"{name}.crt").touch()
        (tmp_path / f"{name}.key").touch()
    (tmp_path / f"{CA_STEM}.crt").touch()
    data = description()
    data["properties"]["listener.name.kafka.ssl.client.auth"] = "requested"
    spec = parse_cluster(data)
    for node_id in (1, 3, 4):  # controller, combined, broker
        config = NodeConfig(tomllib.loads(render_node_config(spec, node_id, tmp_path)))
        assert (config.client_auth("KAFKA"), config.client_auth("SSL")) == ("requested", "required")
    with pytest.raises(ClusterSpecError, match=r"node 1: listener\.name\.kafka\.ssl\.client\.auth is set but"):
        render_node_config(spec, 1)


def test_load_cluster_reports_missing_and_malformed_files(tmp_path: Path) -> None:
    with pytest.raises(ClusterSpecError, match="not found"):
        load_cluster(tmp_path / "nope.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("nodes = [")
    with pytest.raises(ClusterSpecError, match="is not valid TOML"):
        load_cluster(bad)


def test_warnings_for_legal_but_unlikely_layouts() -> None:
    data = description(properties={"default.replication.factor": 4, "min.insync.replicas": 5})
    data["nodes"][2]["roles"] = ["broker"]
    warnings = cluster_warnings(parse_cluster(data))
    assert len(warnings) == 3
    assert warnings[0].startswith("2 controllers tolerate no more failures than 1")
    assert "default.replication.factor 4 exceeds the 3 broker(s)" in warnings[1]
    assert "min.insync.replicas 5 exceeds default.replication.factor 4" in warnings[2]


def test_write_configs_writes_one_loadable_file_per_node(tmp_path: Path) -> None:
    spec = parse_cluster(description())
    written = write_configs(spec, tmp_path / "out")
    assert written == {i: tmp_path / "out" / f"node-{i}.toml" for i in range(1, 6)}
    assert {NodeConfig.load(path).node_id for path in written.values()} == set(written)
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [f"node-{i}.toml" for i in range(1, 6)]


def test_cli_writes_every_config_or_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["deploy", "config", "--cluster", str(EXAMPLE), "--out", str(tmp_path), "--format", "json"]) == 0
    configs = json.loads(capsys.readouterr().out)["configs"]
    assert configs == {str(i): str(tmp_path / f"node-{i}.toml") for i in range(1, 7)}

    node_toml = tmp_path / "etc" / "node.toml"
    assert main(["deploy", "config", "--cluster", str(EXAMPLE), "--node-id", "4", "--output", str(node_toml)]) == 0
    assert capsys.readouterr().out == f"node 4: {node_toml}\n"
    assert NodeConfig.load(node_toml)["broker.rack"] == "rack-a"

    assert main(["deploy", "config", "--cluster", str(EXAMPLE), "--node-id", "5", "--out", str(tmp_path / "one")]) == 0
    assert [p.name for p in (tmp_path / "one").iterdir()] == ["node-5.toml"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--node-id", "9", "--out", "x"], "error: node 9 is not in the cluster description\n"),
        (["--output", "x.toml"], "error: --output needs --node-id (it writes one node's config)\n"),
    ],
)
def test_cli_errors_are_one_line(args: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["deploy", "config", "--cluster", str(EXAMPLE), *args]) == 1
    assert capsys.readouterr().err == message


def test_cli_prints_warnings_to_stderr(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cluster = tmp_path / "cluster.toml"
    cluster.write_text('[[nodes]]\nid = 1\nhost = "h1"\nroles = ["controller"]\n')
    assert main(["deploy", "config", "--cluster", str(cluster), "--out", str(tmp_path)]) == 0
    err = capsys.readouterr().err
    assert "warning: default.replication.factor 1 exceeds the 0 broker(s)" in err

"""The cluster description and the per-node config generator.

A cluster is described once, in one TOML file (nodes with their hosts and roles, the ports, the properties every
node shares), and each node's ``node.toml`` is generated from it, so ``controller.quorum.voters`` and the
listeners cannot disagree between nodes. A generated config is a template from ``config/`` filled in, so it
keeps the template's comments for the operator who reads it on the VM.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from string import Template
from types import MappingProxyType
from typing import Any

import tomli_w

from odradek.broker.config import LISTENER_PREFIX, PER_LISTENER_KEY, SCHEMA, ConfigError, NodeConfig, flatten
from odradek.broker.storage import StorageFormatError, check_cluster_id
from odradek.deploy.certs import CA_STEM, node_stem

ROLES = ("broker", "controller")
TEMPLATES = {
    ("controller",): "controller.toml",
    ("broker",): "broker.toml",
    ("broker", "controller"): "combined.toml",
}
# Properties the generator derives per node from the description: setting them in [properties] would contradict it.
GENERATED = frozenset(
    {
        "process.roles",
        "node.id",
        "controller.quorum.voters",
        "listeners",
        "advertised.listeners",
        "controller.listener.names",
        "kafka.listener.names",
        "metrics.port",
        "broker.rack",
        "schema.registry.listeners",
    }
)
# What ``--tls`` sets on every node: in [properties] too they would contradict it.
TLS_PROPERTIES = frozenset(
    {
        "listener.security.protocol.map",
        "ssl.certificate.location",
        "ssl.key.location",
        "ssl.ca.location",
        "ssl.client.auth",
    }
)
NODE_ID = "{node_id}"  # replaced by each node's id in string property values ("/data/{node_id}")
_SETTINGS = ("cluster_id", "broker_port", "controller_port", "metrics_port", "kafka_port", "schema_registry_port")
_TOP_KEYS = {*_SETTINGS, "properties", "nodes"}
_NODE_KEYS = {"id", "host", "roles", "rack"}
_HOST = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+)$")  # a name, IPv4 or [IPv6]: no scheme, no port


class ClusterSpecError(ValueError):
    """A problem in the cluster description, worded for the operator in one line."""


@dataclass(frozen=True, slots=True)
class NodeSpec:
    """One node (one VM). ``roles`` is normalized to a sorted tuple; ``("both",)`` means broker and controller."""

    node_id: int
    host: str
    roles: tuple[str, ...]
    rack: str = ""

    def __post_init__(self) -> None:
        where = f"node {self.node_id}"
        if isinstance(self.node_id, bool) or not isinstance(self.node_id, int) or self.node_id < 0:
            raise ClusterSpecError(f"node id {self.node_id!r} must be a non-negative integer")
        if not isinstance(self.host, str) or not _HOST.match(self.host):
            raise ClusterSpecError(f"{where}: host {self.host!r} must be a host name or an IP address, without port")
        roles = (self.roles,) if isinstance(self.roles, str) else tuple(self.roles)
        if roles == ("both",):
            roles = ROLES
        unknown = [r for r in roles if r not in ROLES]
        if unknown or not roles or len(set(roles)) != len(roles):
            raise ClusterSpecError(f"{where}: roles {list(roles)} must be controller, broker or both")
        object.__setattr__(self, "roles", tuple(sorted(roles)))
        if not isinstance(self.rack, str):
            raise ClusterSpecError(f"{where}: rack must be a string")

    @property
    def is_broker(self) -> bool:
        return "broker" in self.roles

    @property
    def is_controller(self) -> bool:
        return "controller" in self.roles


@dataclass(frozen=True, slots=True)
class ClusterSpec:
    """The whole cluster; validated on construction. ``properties`` are flattened Kafka property names."""

    nodes: tuple[NodeSpec, ...]
    cluster_id: str = ""
    broker_port: int = 9092
    controller_port: int = 9093
    metrics_port: int = 9100
    kafka_port: int = 9192  # each broker's Kafka listener, for Kafka clients; 0: none
    schema_registry_port: int = 0  # each broker's schema registry (docs/schema-registry.md); 0: none
    properties: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "nodes", tuple(self.nodes))
        object.__setattr__(self, "properties", MappingProxyType(flatten(self.properties)))
        if not self.nodes:
            raise ClusterSpecError("the cluster description has no nodes")
        ids = [n.node_id for n in self.nodes]
        duplicate = next((i for i in ids if ids.count(i) > 1), None)
        if duplicate is not None:
            raise ClusterSpecError(f"node {duplicate}: id used by more than one node")
        if not self.controllers:
            raise ClusterSpecError("no node has the controller role: the cluster needs at least one")
        if not isinstance(self.cluster_id, str):
            raise ClusterSpecError(f"cluster_id {self.cluster_id!r} must be a string")
        if self.cluster_id:
            try:
                check_cluster_id(self.cluster_id)  # what `odradek storage format` accepts
            except StorageFormatError as e:
                raise ClusterSpecError(f"cluster_id: {e}") from None
        for name in ("broker_port", "controller_port", "metrics_port", "kafka_port", "schema_registry_port"):
            port = getattr(self, name)
            # 0 turns metrics, the Kafka listener, the schema registry off
            lowest = 0 if name in ("metrics_port", "kafka_port", "schema_registry_port") else 1
            if isinstance(port, bool) or not isinstance(port, int) or not lowest <= port <= 65535:
                raise ClusterSpecError(f"{name} {port!r} must be a port number")
        self._check_addresses()
        self._check_properties()

    def _check_addresses(self) -> None:
        owners: dict[tuple[str, int], str] = {}
        for node in self.nodes:
            ports = [("broker_port", self.broker_port)] if node.is_broker else []
            ports += [("kafka_port", self.kafka_port)] if node.is_broker and self.kafka_port else []
            registry = self.schema_registry_port
            ports += [("schema_registry_port", registry)] if node.is_broker and registry else []
            ports += [("controller_port", self.controller_port)] if node.is_controller else []
            ports += [("metrics_port", self.metrics_port)] if self.metrics_port else []
            for name, port in ports:
                owner = f"node {node.node_id}'s {name}"
                taken = owners.setdefault((node.host, port), owner)
                if taken != owner:
                    raise ClusterSpecError(f"node {node.node_id}: {name} {node.host}:{port} is also {taken}")

    def _check_properties(self) -> None:
        sample = self.nodes[0].node_id
        for name, value in self.properties.items():
            key = _schema_key(name)
            if key not in SCHEMA:
                raise ClusterSpecError(f"properties: unknown property '{name}'")
            if name in GENERATED:
                raise ClusterSpecError(f"properties: '{name}' is set per node from the nodes and ports")
            try:
                SCHEMA[key][0](_substitute(value, sample))
            except (TypeError, ValueError) as e:
                raise ClusterSpecError(f"properties: invalid value {value!r} for '{name}': {e}") from None

    @property
    def controllers(self) -> tuple[NodeSpec, ...]:
        return tuple(n for n in self.nodes if n.is_controller)

    @property
    def brokers(self) -> tuple[NodeSpec, ...]:
        return tuple(n for n in self.nodes if n.is_broker)

    @property
    def voters(self) -> str:
        """``controller.quorum.voters``: the same static list on every node, in node id order."""
        controllers = sorted(self.controllers, key=lambda n: n.node_id)
        return ",".join(f"{n.node_id}@{n.host}:{self.controller_port}" for n in controllers)

    def node(self, node_id: int) -> NodeSpec:
        found = next((n for n in self.nodes if n.node_id == node_id), None)
        if found is None:
            raise ClusterSpecError(f"node {node_id} is not in the cluster description")
        return found


def _schema_key(name: str) -> str:
    """The SCHEMA key whose parser checks property ``name``: ssl.client.auth for Kafka's per-listener form
    (listener.name.<listener>.ssl.client.auth), else the name itself. Whether that listener exists and is TLS only
    the rendered node config can tell: render_node_config checks it."""
    per_listener = name.startswith(LISTENER_PREFIX) and name.endswith(f".{PER_LISTENER_KEY}")
    return PER_LISTENER_KEY if per_listener else name


def _substitute(value: Any, node_id: int) -> Any:
    if isinstance(value, str):
        return value.replace(NODE_ID, str(node_id))
    if isinstance(value, list):
        return [_substitute(v, node_id) for v in value]
    return value


def _where(index: int, raw: Mapping[str, Any]) -> str:
    return f"node {raw['id']}" if isinstance(raw.get("id"), int) else f"nodes[{index}]"


def _parse_node(index: int, raw: Any) -> NodeSpec:
    if not isinstance(raw, Mapping):
        raise ClusterSpecError(f"nodes[{index}] must be a table ([[nodes]])")
    where = _where(index, raw)
    unknown = sorted(set(raw) - _NODE_KEYS)
    if unknown:
        raise ClusterSpecError(f"{where}: unknown key '{unknown[0]}' (expected id, host, roles, rack)")
    missing = [k for k in ("id", "host", "roles") if k not in raw]
    if missing:
        raise ClusterSpecError(f"{where}: '{missing[0]}' is required")
    roles = raw["roles"]
    if not isinstance(roles, (str, list)) or not all(isinstance(r, str) for r in roles):
        raise ClusterSpecError(f"{where}: roles must be a list of strings")
    return NodeSpec(raw["id"], raw["host"], tuple([roles] if isinstance(roles, str) else roles), raw.get("rack", ""))


def parse_cluster(data: Mapping[str, Any]) -> ClusterSpec:
    """A ClusterSpec from a parsed cluster description; raises ClusterSpecError naming the node or key."""
    unknown = sorted(set(data) - _TOP_KEYS)
    if unknown:
        raise ClusterSpecError(f"unknown key '{unknown[0]}' in the cluster description")
    nodes = data.get("nodes", [])
    if not isinstance(nodes, list):
        raise ClusterSpecError("nodes must be an array of tables ([[nodes]])")
    properties = data.get("properties", {})
    if not isinstance(properties, Mapping):
        raise ClusterSpecError("properties must be a table ([properties])")
    settings = {key: data[key] for key in _SETTINGS if key in data}
    return ClusterSpec(tuple(_parse_node(i, raw) for i, raw in enumerate(nodes)), properties=properties, **settings)


def load_cluster(path: str | Path) -> ClusterSpec:
    """Read and validate a cluster description file."""
    try:
        data = tomllib.loads(Path(path).read_text())
    except FileNotFoundError:
        raise ClusterSpecError(f"cluster description {path} not found") from None
    except tomllib.TOMLDecodeError as e:
        raise ClusterSpecError(f"cluster description {path} is not valid TOML: {e}") from None
    return parse_cluster(data)


def _property(spec: ClusterSpec, name: str) -> Any:
    """A cluster-wide property's parsed value, or the node default."""
    parse, default = SCHEMA[name]
    return parse(spec.properties.get(name, default))


def cluster_warnings(spec: ClusterSpec) -> list[str]:
    """Legal but probably unintended layouts, for the operator to confirm."""
    warnings = []
    controllers, brokers = len(spec.controllers), len(spec.brokers)
    if controllers % 2 == 0:
        warnings.append(
            f"{controllers} controllers tolerate no more failures than {controllers - 1}: use an odd number"
        )
    replication = _property(spec, "default.replication.factor")
    if replication > brokers:
        warnings.append(
            f"default.replication.factor {replication} exceeds the {brokers} broker(s): "
            "topic creation with the default fails"
        )
    min_isr = _property(spec, "min.insync.replicas")
    if min_isr > replication:
        warnings.append(
            f"min.insync.replicas {min_isr} exceeds default.replication.factor {replication}: "
            "acks=all writes to such topics fail"
        )
    return warnings


def _toml(value: Any) -> str:
    """One TOML value (string, integer, boolean or array), as it would follow ``key = ``."""
    return tomli_w.dumps({"v": value}).removeprefix("v = ").rstrip("\n")


def template_text(roles: tuple[str, ...]) -> str:
    return resources.files("odradek.deploy.config").joinpath(TEMPLATES[roles]).read_text()


def tls_properties(node_id: int, tls_dir: str | Path) -> dict[str, str]:
    """Every listener SSL, with mutual TLS, from the files ``odradek deploy certs`` wrote into ``tls_dir`` (the
    directory as the node sees it); the node's own files must be there."""
    directory = Path(tls_dir).resolve()
    files = {
        "ssl.certificate.location": directory / f"{node_stem(node_id)}.crt",
        "ssl.key.location": directory / f"{node_stem(node_id)}.key",
        "ssl.ca.location": directory / f"{CA_STEM}.crt",
    }
    for path in files.values():
        if not path.is_file():
            raise ClusterSpecError(f"node {node_id}: {path} not found (odradek deploy certs writes it)")
    return {
        # Every name, used or not on this node: a node reaches the others' listeners with the protocol its own
        # map gives their names (a broker dials CONTROLLER listeners it does not have).
        "listener.security.protocol.map": "SSL:SSL,CONTROLLER:SSL,KAFKA:SSL",
        **{name: str(path) for name, path in files.items()},
        "ssl.client.auth": "required",
    }


def render_node_config(spec: ClusterSpec, node_id: int, tls_dir: str | Path | None = None) -> str:
    """The TOML text of one node's config; it is checked to load as a NodeConfig before it is returned. With
    ``tls_dir``, every listener is SSL with the certificates there (``tls_properties``), and a broker's schema registry
    is https with the same certificate and client certificates."""
    node = spec.node(node_id)
    properties = {name: _substitute(value, node_id) for name, value in spec.properties.items()}
    tls = tls_properties(node_id, tls_dir) if tls_dir is not None else {}
    clash = sorted(TLS_PROPERTIES & set(properties)) if tls else []
    if clash:
        raise ClusterSpecError(f"properties: '{clash[0]}' is set for every node by --tls")
    log_dirs = properties.pop("log.dirs", SCHEMA["log.dirs"][1])
    broker = [f"{'SSL' if tls else 'PLAINTEXT'}://{node.host}:{spec.broker_port}"] if node.is_broker else []
    broker += [f"KAFKA://{node.host}:{spec.kafka_port}"] if node.is_broker and spec.kafka_port else []
    controller = [f"CONTROLLER://{node.host}:{spec.controller_port}"] if node.is_controller else []
    values = {
        "node_id": node_id,
        "voters": spec.voters,
        "listeners": ",".join(broker + controller),
        "advertised_listeners": ",".join(broker),
        "metrics_port": spec.metrics_port,
        "log_dirs": log_dirs,
    }
    fields = {name: _toml(value) for name, value in values.items()}
    fields["broker_rack"] = f'"broker.rack" = {_toml(node.rack)}' if node.rack else "# (no rack in the description)"
    text = Template(template_text(node.roles)).substitute(fields)
    if tls:
        text += (
            "\n# TLS on every listener (odradek deploy config --tls), with the certificates of odradek deploy certs:"
            "\n# clients and the other nodes must present a certificate the cluster CA signed (mutual TLS). The files"
            "\n# are re-read when they change, so renewed certificates need no restart.\n" + tomli_w.dumps(tls)
        )
    if node.is_broker and spec.schema_registry_port:
        scheme = "https" if tls else "http"
        registry = {"schema.registry.listeners": f"{scheme}://{node.host}:{spec.schema_registry_port}"}
        text += "\n# The built-in schema registry (schema_registry_port of the cluster description)."
        if tls:
            text += (
                "\n# Over https with the node's certificate above; its callers present a certificate of the cluster CA,"
                "\n# as ssl.client.auth requires on every listener (schema.registry.ssl.client.auth would override it)."
            )
        text += "\n" + tomli_w.dumps(registry)
    if properties:
        text += "\n# Cluster-wide properties ([properties] of the cluster description).\n" + tomli_w.dumps(properties)
    try:
        NodeConfig(tomllib.loads(text))
    except ConfigError as e:
        raise ClusterSpecError(f"node {node_id}: {e}") from None
    return text


def config_name(node_id: int) -> str:
    return f"node-{node_id}.toml"


def write_config(spec: ClusterSpec, node_id: int, path: str | Path, tls_dir: str | Path | None = None) -> Path:
    """Write one node's config atomically, so a node (re)starting meanwhile never reads half a file."""
    path = Path(path)
    text = render_node_config(spec, node_id, tls_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)
    return path


def write_configs(spec: ClusterSpec, out_dir: str | Path, tls_dir: str | Path | None = None) -> dict[int, Path]:
    """``node-<id>.toml`` in ``out_dir`` for every node; returns node id -> path. Every config is rendered before
    any is written, so an error leaves none half-updated."""
    for n in spec.nodes:
        render_node_config(spec, n.node_id, tls_dir)
    return {
        n.node_id: write_config(spec, n.node_id, Path(out_dir) / config_name(n.node_id), tls_dir) for n in spec.nodes
    }

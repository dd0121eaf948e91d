"""The layering of the package, read from every module's imports (with ast, so nothing is executed).

- The package graph is a declared DAG (``LAYERS``): each module belongs to the layer of its longest matching
  prefix and imports only the layers its own lists. Bottom up: ``proto``; the client library (``client``); the
  models every side shares (``common``: ``odradek.client.common``, as Kafka's ``common`` ships in its clients
  library); then the two roles, ``controller`` and ``broker`` (with its storage engine, ``storage``:
  ``odradek.broker.log``, below the rest of it), which do not import each other; only the node's wiring module
  (``odradek.broker.node``) imports both: it hands the controllers' metadata log store the partition log it keeps
  its entries in. Tools (deploy, chaos, the CLI) sit
  on top. A new back edge fails ``test_the_package_graph_follows_the_declared_layers``: none is tolerated (the last
  ones, the HTTP API's calls into the admin gRPC adapter, went when it called the typed services).
- Every sans-I/O core and every client library module falls under pyproject's strict mypy override, so a new
  one cannot slip in unchecked.
- The sans-I/O cores take events and return decisions: they import no asyncio, grpc, socket or time (a clock is
  passed in), nor logging (they return transition events their shells log). Imports inside functions count too.
"""

from __future__ import annotations

import ast
import tomllib
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

SANS_IO_CORES = [
    "odradek.broker.kafka.apis",
    "odradek.broker.kafka.fetch_codec",
    "odradek.broker.kafka.framing",
    "odradek.broker.kafka.header",
    "odradek.broker.kafka.primitives",
    "odradek.broker.kafka.produce_codec",
    "odradek.broker.kafka.replica_fetch",
    "odradek.broker.kafka.wire",
    "odradek.controller.raft",
    "odradek.controller.raft.config",
    "odradek.controller.raft.events",
    "odradek.controller.raft.log",
    "odradek.controller.raft.messages",
    "odradek.controller.raft.node",
    "odradek.controller.raft.ready",
    "odradek.controller.raft.snapshot",
    "odradek.controller.raft.state",
    "odradek.broker.replication",
    "odradek.broker.fetch_session",
    "odradek.broker.coordinator",
    "odradek.broker.coordinator.decisions",
    "odradek.broker.groups",
    "odradek.broker.groups.group",
    "odradek.broker.groups.members",
    "odradek.broker.groups.messages",
    "odradek.controller.elections",
    "odradek.controller.client_quotas",
    "odradek.controller.acl_changes",
    "odradek.controller.scram_changes",
    "odradek.controller.unclean_recovery",
    "odradek.controller.isr",
    "odradek.controller.placement",
    "odradek.chaos.checker",
    "odradek.chaos.txn_checker",
    "odradek.chaos.share_checker",
    "odradek.broker.groups.records",
    "odradek.broker.groups.offsets",
    "odradek.broker.groups.partitioner",
    "odradek.broker.groups.consumer_group",
    "odradek.broker.groups.consumer_messages",
    "odradek.broker.groups.consumer_records",
    "odradek.broker.groups.reconciliation",
    "odradek.broker.groups.record_codec",
    "odradek.broker.groups.server_assignors",
    "odradek.broker.transactions",
    "odradek.broker.transactions.core",
    "odradek.broker.transactions.metadata",
    "odradek.broker.transactions.records",
    "odradek.broker.quotas",
    "odradek.broker.quotas.manager",
    "odradek.broker.quotas.mutes",
    "odradek.broker.quotas.rate",
    "odradek.broker.security.principal_mapping",
    "odradek.client.common.scram",
    "odradek.broker.security.sasl_session",
    "odradek.broker.security.grpc_sessions",
    "odradek.client.consumer.protocol",
    "odradek.client.consumer.rebalance",
    "odradek.client.producer.transactions",
    "odradek.client.metrics",
    "odradek.client.throttle",
    "odradek.client.consumer.assignors",
    "odradek.client.consumer.assignors.base",
    "odradek.client.consumer.assignors.range",
    "odradek.client.consumer.assignors.roundrobin",
    "odradek.client.consumer.assignors.sticky",
    "odradek.broker.log.cleaner.manager",
    "odradek.broker.log.cleaner.offset_map",
    "odradek.broker.log.cleaner.policy",
    "odradek.broker.log.cleaner.stats",
    "odradek.broker.log.cleaner.throttle",
    "odradek.broker.log.future_dirs",
    "odradek.broker.log.replica_move",
    "odradek.client.common.acls",
    "odradek.client.common.topic_rules",
    "odradek.client.common.group_configs",
    "odradek.client.common.metadata_image",
    "odradek.broker.isr_batcher",
    "odradek.broker.rest.search",
    "odradek.broker.rest.republish",
    "odradek.broker.rest.offsets",
    "odradek.broker.rest.session",
    "odradek.broker.rest.decoding",
    "odradek.broker.rest.throughput",
    "odradek.broker.share",
    "odradek.broker.share.assignor",
    "odradek.broker.share.group",
    "odradek.broker.share.partition",
    "odradek.broker.share.sessions",
    "odradek.broker.share.spans",
    "odradek.broker.share.state_records",
    "odradek.broker.schema_registry",
    "odradek.broker.schema_registry.avro",
    "odradek.broker.schema_registry.compatibility",
    "odradek.broker.schema_registry.core",
    "odradek.broker.schema_registry.errors",
    "odradek.broker.schema_registry.formats",
    "odradek.broker.schema_registry.json_schema",
    "odradek.broker.schema_registry.proto_text",
    "odradek.broker.schema_registry.protobuf",
    "odradek.broker.schema_registry.records",
    "odradek.broker.schema_registry.requests",
    "odradek.broker.schema_registry.routes",
    "odradek.broker.http_types",
    "odradek.broker.schema_registry.authorization",
    "odradek.broker.rest",
    "odradek.broker.rest.auth",
    "odradek.broker.rest.bodies",
    "odradek.broker.rest.errors",
    "odradek.broker.rest.openapi",
    "odradek.broker.rest.records",
    "odradek.broker.rest.requests",
    "odradek.broker.rest.resources",
    "odradek.broker.rest.routes",
]
IO_MODULES = {"asyncio", "grpc", "socket", "time", "logging"}


# Layer -> (its package prefix, the layers it may import). Tools import freely below themselves.
_BELOW_ROLES = {"proto", "client", "common"}
_TOOLS = {"spark", "deploy", "chaos", "netns"}
LAYERS: dict[str, tuple[str, set[str]]] = {
    "proto": ("odradek.proto", set()),
    "client": ("odradek.client", {"proto"}),
    "common": ("odradek.client.common", {"proto", "client"}),
    "storage": ("odradek.broker.log", {"proto", "client", "common"}),
    "controller": ("odradek.controller", _BELOW_ROLES),  # not storage: the wiring hands it the metadata log
    "broker": ("odradek.broker", _BELOW_ROLES | {"storage"}),
    "wiring": ("odradek.broker.node", _BELOW_ROLES | {"storage", "controller", "broker"}),
    "spark": ("odradek.spark_connector", {"proto", "client", "common"}),
    "netns": ("odradek.chaos.netns", set()),
    "deploy": ("odradek.deploy", _BELOW_ROLES | {"storage", "broker", "netns"}),
    "chaos": ("odradek.chaos", _BELOW_ROLES | {"storage", "broker", "deploy", "netns"}),
    "cli": (
        "odradek.client.cli",
        _BELOW_ROLES | {"storage", "controller", "broker", "wiring", "spark", "deploy", "chaos", "netns"},
    ),
}


@cache
def modules() -> dict[str, Path]:
    """Every module of the package by its dotted name, from pyproject's package-dir mapping."""
    package_dir = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    out = {}
    for package, folder in package_dir.items():
        for path in (ROOT / folder).rglob("*.py"):
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join([package, *parts])] = path
    return out


def imported(name: str, path: Path) -> set[str]:
    """The dotted names a module imports anywhere in its body (``from a import b`` yields ``a`` and ``a.b``)."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            out.add(module)
            out.update(f"{module}.{alias.name}" for alias in node.names)
    return out


def within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def test_the_module_list_is_complete() -> None:
    found = modules()
    assert "odradek.deploy.local" in found and "odradek.client.cli.main" in found
    assert [core for core in SANS_IO_CORES if core not in found] == []


def test_the_reader_sees_relative_and_nested_imports(tmp_path: Path) -> None:
    source = tmp_path / "mod.py"
    source.write_text("from . import sibling\nfrom ..cli import main\ndef f():\n    import time\n")
    names = imported("odradek.client.sub.mod", source)
    assert {"odradek.client.sub.sibling", "odradek.client.cli.main", "time"} <= names


def test_no_library_module_imports_the_cli() -> None:
    offenders = {
        name: sorted(i for i in imported(name, path) if within(i, "odradek.client.cli"))
        for name, path in modules().items()
        if not within(name, "odradek.client.cli")
    }
    assert {name: found for name, found in offenders.items() if found} == {}


def layer_of(name: str) -> str | None:
    found = [(len(prefix), layer) for layer, (prefix, _) in LAYERS.items() if within(name, prefix)]
    return max(found)[1] if found else None


def test_the_declared_layers_form_a_dag() -> None:
    order: list[str] = []
    left = dict(LAYERS)
    while left:
        ready = [layer for layer, (_, below) in left.items() if below <= set(order)]
        assert ready, f"the layers {sorted(left)} import each other"
        order.extend(sorted(ready))
        for layer in ready:
            del left[layer]
    assert order.index("controller") < order.index("wiring") and order.index("broker") < order.index("wiring")


def test_every_module_belongs_to_a_layer() -> None:
    assert [name for name in modules() if layer_of(name) is None] == []
    assert layer_of("odradek.client.common.acls") == "common" and layer_of("odradek.broker.log.log") == "storage"


def test_the_package_graph_follows_the_declared_layers() -> None:
    names = modules()
    back_edges = set()
    for name, path in names.items():
        own = layer_of(name)
        assert own is not None
        allowed = LAYERS[own][1] | {own}
        back_edges |= {(name, t) for t in imported(name, path) if t in names and layer_of(t) not in allowed}
    assert sorted(back_edges) == [], "imports against the declared layers"


def test_the_client_library_imports_only_proto_and_itself() -> None:
    offenders = {
        name: sorted(
            i
            for i in imported(name, path)
            if within(i, "odradek") and not (within(i, "odradek.client") or within(i, "odradek.proto"))
        )
        for name, path in modules().items()
        if within(name, "odradek.client") and not within(name, "odradek.client.cli")
    }
    assert {name: found for name, found in offenders.items() if found} == {}


@pytest.mark.parametrize("core", SANS_IO_CORES)
def test_sans_io_cores_import_no_io(core: str) -> None:
    found = {i.split(".")[0] for i in imported(core, modules()[core])} & IO_MODULES
    assert found == set(), f"{core} imports {sorted(found)}: pass a clock, return events, or move the I/O out"


# -- the type checker is strict on the cores and the client library ---------------------------------------------

STRICT_FLAGS = {
    "disallow_untyped_defs",
    "disallow_incomplete_defs",
    "disallow_untyped_calls",
    "disallow_any_generics",
    "warn_return_any",
    "no_implicit_reexport",
}


def strict_patterns() -> list[str]:
    overrides = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]["overrides"]
    out: list[str] = []
    for override in overrides:
        if all(override.get(flag) is True for flag in STRICT_FLAGS):
            out.extend(override["module"])
    return out


def matches(name: str, pattern: str) -> bool:
    """mypy's module patterns: ``a.b.*`` covers ``a.b`` and everything below it."""
    return within(name, pattern[:-2]) if pattern.endswith(".*") else name == pattern


def test_cores_and_the_client_library_are_checked_strictly() -> None:
    patterns = strict_patterns()
    client = [n for n in modules() if within(n, "odradek.client") and not within(n, "odradek.client.cli")]
    loose = [n for n in [*SANS_IO_CORES, *client] if not any(matches(n, p) for p in patterns)]
    assert not loose, f"not under the strict mypy override in pyproject.toml: {loose}"


def test_the_strict_list_names_only_modules_that_exist() -> None:
    names = modules()
    stale = [p for p in strict_patterns() if not any(matches(n, p) for n in names)]
    assert not stale, stale

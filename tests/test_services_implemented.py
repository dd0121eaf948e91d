"""Every rpc that proto/ declares has a server implementation: a declared method that answers UNIMPLEMENTED
would advertise a capability odradek does not have."""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

import odradek.broker
import odradek.controller

PROTO_DIR = Path(__file__).resolve().parents[1] / "proto"


def _servicer_bases() -> list[tuple[str, type, list[str]]]:
    """(service name, generated Servicer base class, rpc names) for every service of every proto/*.proto."""
    out = []
    for proto in sorted(PROTO_DIR.glob("*.proto")):
        pb2 = importlib.import_module(f"odradek.proto.{proto.stem}_pb2")
        grpc_module = importlib.import_module(f"odradek.proto.{proto.stem}_pb2_grpc")
        for name, service in pb2.DESCRIPTOR.services_by_name.items():
            out.append((name, getattr(grpc_module, f"{name}Servicer"), [m.name for m in service.methods]))
    return out


def _import_servers() -> None:
    for package in (odradek.broker, odradek.controller):
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            importlib.import_module(info.name)


def _servers(base: type) -> list[type]:
    """The servicers odradek serves (test doubles elsewhere in the process may implement only a few rpcs)."""
    return [c for c in base.__subclasses__() if c.__module__.startswith(("odradek.broker.", "odradek.controller."))]


def missing(name: str, base: type, methods: list[str], servers: list[type]) -> list[str]:
    """``Service.Method`` for each rpc of ``base`` that one of ``servers`` leaves to the generated base (which
    answers UNIMPLEMENTED), or all of them when there is no server."""
    if not servers:
        return [f"{name}.{m} (no servicer)" for m in methods]
    return [f"{name}.{m}" for server in servers for m in methods if getattr(server, m) is getattr(base, m)]


def test_every_declared_rpc_has_a_server_implementation() -> None:
    _import_servers()
    services = _servicer_bases()
    assert {name for name, _, _ in services} >= {"Admin", "Broker", "Controller", "GroupCoordinator", "Raft"}
    problems = [m for name, base, methods in services for m in missing(name, base, methods, _servers(base))]
    assert problems == []


def test_the_check_sees_a_missing_method() -> None:
    """The check can fail: a servicer that leaves rpcs to the generated base, or no servicer at all, is reported."""
    from odradek.proto import raft_pb2_grpc

    base = raft_pb2_grpc.RaftServicer
    methods = ["Vote", "BeginQuorumEpoch"]
    partial = type(
        "Partial", (), {"Vote": lambda self, request, context: None, "BeginQuorumEpoch": base.BeginQuorumEpoch}
    )
    assert missing("Raft", base, methods, [partial]) == ["Raft.BeginQuorumEpoch"]
    assert missing("Raft", base, methods, []) == ["Raft.Vote (no servicer)", "Raft.BeginQuorumEpoch (no servicer)"]

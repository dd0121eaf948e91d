"""``odradek dev up|down|status|kill|start``: run a local multi-node cluster on 127.0.0.1 (the command-line face
of ``odradek.deploy.local``, which lays out and runs the processes)."""

from __future__ import annotations

import argparse
import asyncio
import shutil
import signal
import tomllib
from pathlib import Path
from typing import Any

from odradek.client.cli.client_settings import security_only
from odradek.client.cli.common import CommandError, add_command
from odradek.client.cli.output import emit, table
from odradek.client.cli.profile import clear_profile, home, load_profile, save_profile
from odradek.client.errors import OdradekError
from odradek.deploy.local import DevCluster, LocalClusterError

SIGNALS = {"KILL": signal.SIGKILL, "STOP": signal.SIGSTOP, "CONT": signal.SIGCONT, "TERM": signal.SIGTERM}


def default_dir() -> Path:
    return home() / "dev"


def _dir(args: argparse.Namespace) -> Path:
    if args.dir:
        return Path(args.dir)
    return Path(load_profile().get("dev_dir") or default_dir())


def _overrides(pairs: list[str]) -> dict:
    out = {}
    for pair in pairs:
        key, eq, value = pair.partition("=")
        if not eq:
            raise CommandError(f"--set {pair!r} is not key=value")
        try:
            out[key] = tomllib.loads(f"v = {value}")["v"]
        except tomllib.TOMLDecodeError:
            out[key] = value
    return out


def register(sub: argparse._SubParsersAction) -> None:
    dev = sub.add_parser("dev", help="a local multi-node cluster").add_subparsers(
        dest="dev_command", required=True, metavar="COMMAND"
    )
    up = add_command(dev, "up", _up, "start a local cluster in the background and wait until it is ready")
    up.add_argument("--controllers", type=int, default=3)
    up.add_argument("--brokers", type=int, default=3)
    up.add_argument("--combined", action="store_true", help="each node is controller and broker (--controllers N)")
    up.add_argument(
        "--first-node-id", type=int, default=1, metavar="N", help="node ids from N: controllers first (default 1)"
    )
    up.add_argument("--dir", help="where node configs, data and logs go (default $ODRADEK_HOME/dev)")
    up.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="config for every node")
    up.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for readiness")
    up.add_argument(
        "--security",
        action="store_true",
        help="TLS on every listener (own CA), SCRAM on the client listeners, the authorizer, and a super user "
        "'admin' whose client config is <dir>/admin-client.json (saved in the profile)",
    )
    up.add_argument(
        "--no-schema-registry",
        action="store_true",
        help="brokers serve no schema registry (by default each serves one; with --security over https, "
        "logging in with HTTP Basic as a SCRAM user or a client certificate)",
    )
    up.add_argument(
        "--no-http",
        action="store_true",
        help="brokers serve no HTTP API nor web console (by default each serves one, docs/http-api.md; with "
        "--security over https, logging in with HTTP Basic as a SCRAM user or a client certificate)",
    )
    for name, handler, text in (
        ("down", _down, "stop every node (SIGTERM, then SIGKILL)"),
        ("status", _status, "show each node's process state"),
    ):
        p = add_command(dev, name, handler, text)
        p.add_argument("--dir")
        if name == "down":
            p.add_argument(
                "--purge", action="store_true", help="also delete the cluster's directory and forget its saved profile"
            )
    kill = add_command(dev, "kill", _kill, "send a signal to one node (default KILL)")
    kill.add_argument("node", type=int)
    kill.add_argument("--signal", choices=sorted(SIGNALS), default="KILL")
    kill.add_argument("--dir")
    start = add_command(dev, "start", _start, "start a stopped node again")
    start.add_argument("node", type=int)
    start.add_argument("--dir")
    start.add_argument("--wait", action="store_true", help="wait until the cluster is ready again")


def _up(args: argparse.Namespace) -> None:
    directory = Path(args.dir) if args.dir else default_dir()
    if not args.dir and directory.exists() and not (directory / "cluster.json").exists():
        shutil.rmtree(directory)
    if not args.dir and (directory / "cluster.json").exists():
        old = DevCluster.load(directory)
        if not any(s["state"] != "stopped" for s in old.status()):
            shutil.rmtree(directory)  # the default dev dir holds a stopped cluster: start afresh
    cluster = DevCluster.create(
        directory,
        args.controllers,
        args.brokers,
        args.combined,
        _overrides(args.set),
        security=args.security,
        first_id=args.first_node_id,
        schema_registry=not args.no_schema_registry,
        http_api=not args.no_http,
    )
    cluster.start_all()
    profile: dict[str, Any] = {
        "bootstrap_servers": cluster.bootstrap_servers,
        "controllers": cluster.controller_servers,
        "dev_dir": str(cluster.directory),
    }
    if cluster.schema_registry_urls:
        profile["schema_registry_url"] = cluster.schema_registry_urls  # `odradek schema` finds it here
    if cluster.http_urls:
        profile["http_url"] = cluster.http_urls
    if cluster.security:
        # Brokers only: the controllers' listener is mTLS without SASL, so a SCRAM login cannot be served there.
        del profile["controllers"]
        profile["client_config"] = security_only(cluster.admin_client_config())
    save_profile(profile)
    try:
        asyncio.run(cluster.wait_ready(args.timeout))
        if cluster.security:
            asyncio.run(cluster.create_admin_user())
    except (LocalClusterError, OdradekError):
        cluster.stop_all(timeout=5)
        raise
    data = {
        "cluster_id": cluster.cluster_id,
        "dir": str(cluster.directory),
        "bootstrap_servers": cluster.bootstrap_servers,
        "kafka_bootstrap_servers": cluster.kafka_bootstrap_servers,
        "controllers": cluster.controller_servers,
        "nodes": cluster.status(),
        "schema_registry_urls": cluster.schema_registry_urls,
        "http_urls": cluster.http_urls,
    }
    if cluster.security:
        data["admin_client_config"] = str(cluster.admin_client_file)
    human = (
        f"cluster {cluster.cluster_id} is up in {cluster.directory}\n"
        f"bootstrap servers: {cluster.bootstrap_servers}\n"
        f"kafka bootstrap servers: {cluster.kafka_bootstrap_servers}\n"
        f"controllers: {cluster.controller_servers}\n"
    )
    if cluster.schema_registry_urls:
        human += f"schema registry: {cluster.schema_registry_urls}\n"
    if cluster.http_urls:
        human += f"http api: {cluster.http_urls}\n"
    if cluster.security:
        human += f"super user admin: {cluster.admin_client_file} (SCRAM over TLS; the CLI's profile uses it)\n"
    emit(data, args.format, human=human)


def _down(args: argparse.Namespace) -> None:
    cluster = DevCluster.load(_dir(args))
    cluster.stop_all()
    profile_cleared = False
    if args.purge:
        shutil.rmtree(cluster.directory)
        profile_cleared = clear_profile(cluster.directory)
    data = {"stopped": [n.node_id for n in cluster.nodes], "purged": args.purge, "profile_cleared": profile_cleared}
    emit(data, args.format, human="cluster stopped" + (" and purged; profile cleared" if profile_cleared else ""))


def _status(args: argparse.Namespace) -> None:
    rows = DevCluster.load(_dir(args)).status()
    columns = ["node_id", "roles", "pid", "state", "broker", "kafka", "http", "controller", "metrics", "log"]
    emit(rows, args.format, human=table(rows, columns))


def _kill(args: argparse.Namespace) -> None:
    node = DevCluster.load(_dir(args)).signal(args.node, SIGNALS[args.signal])
    emit(
        {"node_id": node.node_id, "pid": node.pid, "signal": args.signal},
        args.format,
        human=f"sent SIG{args.signal} to node {node.node_id} (pid {node.pid})",
    )


def _start(args: argparse.Namespace) -> None:
    cluster = DevCluster.load(_dir(args))
    before = asyncio.run(cluster.broker_epochs()) if args.wait else {}
    node = cluster.start(args.node)
    if args.wait:
        asyncio.run(cluster.wait_ready(newer_than={args.node: before[args.node]} if args.node in before else None))
    emit({"node_id": node.node_id, "pid": node.pid}, args.format, human=f"started node {node.node_id} (pid {node.pid})")

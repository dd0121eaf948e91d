"""``odradek cluster info|quorum|health`` and ``odradek broker list|log-dirs``."""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict
from typing import TypeVar

from odradek.client.admin import AsyncAdmin, ClusterDescription
from odradek.client.cli.client_settings import add_connection_options
from odradek.client.cli.common import add_command
from odradek.client.cli.config_changes import add_alter_arguments, changes
from odradek.client.cli.output import emit, table
from odradek.client.cli.profile import admin_config

T = TypeVar("T")


def with_admin(args: argparse.Namespace, action: Callable[[AsyncAdmin], Awaitable[T]]) -> T:
    """Run one admin action against the cluster the arguments (or the profile) point at."""

    async def run() -> T:
        config = admin_config(args, **{"request.timeout.ms": args.timeout_ms})
        async with AsyncAdmin(config) as admin:
            return await action(admin)

    return asyncio.run(run())


def admin_command(sub: argparse._SubParsersAction, name: str, handler, text: str) -> argparse.ArgumentParser:
    parser = add_command(sub, name, handler, text)
    add_connection_options(parser, "host:port,... of any nodes (default: the dev profile)")
    parser.add_argument("--timeout-ms", type=int, default=15000)
    return parser


def register(sub: argparse._SubParsersAction) -> None:
    cluster = sub.add_parser("cluster", help="cluster-wide information").add_subparsers(
        dest="cluster_command", required=True, metavar="COMMAND"
    )
    admin_command(cluster, "info", _info, "cluster id, active controller and brokers")
    admin_command(cluster, "quorum", _quorum, "the controller quorum: leader, epoch, high watermark, replicas")
    admin_command(cluster, "configs", _configs, "the dynamic broker configs: cluster-wide value, or each default")
    alter = admin_command(
        cluster, "alter-config", _alter_config, "change cluster-wide broker defaults live (all or none apply)"
    )
    add_alter_arguments(alter)
    from odradek.client.cli import health  # imported here: health.py builds on this module's helpers

    health.register_cluster_commands(cluster)
    broker = sub.add_parser("broker", help="brokers").add_subparsers(
        dest="broker_command", required=True, metavar="COMMAND"
    )
    admin_command(broker, "list", _brokers, "registered brokers with address, rack, fencing and epoch")
    from odradek.client.cli import log_dirs  # imported here: log_dirs.py builds on this module's helpers

    log_dirs.register_broker_commands(broker)


def _configs(args: argparse.Namespace) -> None:
    configs = [c.to_dict() for c in with_admin(args, lambda a: a.describe_cluster_configs())]
    emit(configs, args.format, human=table(configs, ["name", "value", "source"]))


def _alter_config(args: argparse.Namespace) -> None:
    c = changes(args)
    configs = with_admin(args, lambda a: a.alter_cluster_configs(*c, validate_only=args.dry_run))
    data = {"dry_run": args.dry_run, **c.to_dict(), "configs": configs}
    shown = ", ".join(f"{k}={v}" for k, v in configs.items()) or "(none: every node uses its config file)"
    verb = "valid, nothing changed" if args.dry_run else "altered"
    emit(data, args.format, human=f"{verb}: cluster-wide broker defaults\ndynamic: {shown}")


BROKER_COLUMNS = ["node_id", "host", "port", "kafka", "rack", "fenced", "epoch"]


def _broker_rows(info: ClusterDescription) -> list[dict]:
    """Each broker for people: its gRPC host and port, and its Kafka listener's address ("-" without one)."""
    return [{**asdict(b), "kafka": b.kafka_address or None} for b in info.brokers]


def _info(args: argparse.Namespace) -> None:
    info = with_admin(args, lambda a: a.describe_cluster())
    kafka = f"kafka bootstrap servers: {info.kafka_bootstrap_servers}\n" if info.kafka_bootstrap_servers else ""
    human = (
        f"cluster id: {info.cluster_id}\ncontroller leader: {info.controller_leader}\n"
        f"bootstrap servers: {info.bootstrap_servers}\n{kafka}\n" + table(_broker_rows(info), BROKER_COLUMNS)
    )
    emit(info.to_dict(), args.format, human=human)


def _quorum(args: argparse.Namespace) -> None:
    quorum = with_admin(args, lambda a: a.describe_quorum())
    data = quorum.to_dict()
    now = int(time.time() * 1000)
    for group in ("voters", "observers"):
        for r in data[group]:
            r["last_fetch_ms"] = max(0, now - r["last_fetch_ms"]) if r["last_fetch_ms"] > 0 else -1
    rows = [{"role": "voter", **r} for r in data["voters"]] + [{"role": "observer", **r} for r in data["observers"]]
    human = (
        f"leader: {quorum.leader_id}  epoch: {quorum.leader_epoch}  high watermark: {quorum.high_watermark}\n\n"
        + table(rows, ["node_id", "role", "log_end_offset", "lag", "last_fetch_ms"])
    )
    emit(data, args.format, human=human)


def _brokers(args: argparse.Namespace) -> None:
    info = with_admin(args, lambda a: a.describe_cluster())
    emit(info.to_dict()["brokers"], args.format, human=table(_broker_rows(info), BROKER_COLUMNS))

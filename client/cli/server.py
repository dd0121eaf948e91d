"""``odradek storage format``: prepare a node's log dirs for one cluster."""

from __future__ import annotations

import argparse
import base64
import uuid

from odradek.broker.config import NodeConfig
from odradek.broker.storage import format_storage
from odradek.client.cli.common import add_command
from odradek.client.cli.output import emit


def random_cluster_id() -> str:
    """A URL-safe 22-character id, as Kafka's ``kafka-storage random-uuid``."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def register(sub: argparse._SubParsersAction) -> None:
    storage = sub.add_parser("storage", help="format log directories").add_subparsers(
        dest="storage_command", required=True, metavar="COMMAND"
    )
    fmt = add_command(storage, "format", _format, "write meta.properties for a cluster id into every log dir")
    fmt.add_argument("--cluster-id", required=True)
    fmt.add_argument("--config", required=True, help="the node's TOML config")
    fmt.add_argument("--ignore-formatted", action="store_true", help="skip dirs already formatted for this cluster")
    add_command(storage, "random-uuid", _random, "print a new random cluster id")


def _format(args: argparse.Namespace) -> None:
    config = NodeConfig.load(args.config)
    dirs = format_storage(config, args.cluster_id, ignore_formatted=args.ignore_formatted)
    data = {"cluster_id": args.cluster_id, "node_id": config.node_id, "formatted": [str(d) for d in dirs]}
    emit(data, args.format, human=f"formatted {len(dirs)} log dir(s) for cluster {args.cluster_id}")


def _random(args: argparse.Namespace) -> None:
    cluster_id = random_cluster_id()
    emit({"cluster_id": cluster_id}, args.format, human=cluster_id)

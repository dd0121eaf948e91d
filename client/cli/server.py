"""``odradek server`` (run a node) and ``odradek storage format`` (prepare its log dirs for one cluster)."""

from __future__ import annotations

import argparse
import os
import sys

from odradek.broker.config import NodeConfig
from odradek.broker.storage import check_cluster_id, format_storage
from odradek.client.cli.common import add_command
from odradek.client.cli.output import emit
from odradek.deploy.process import MALLOC_ENV, random_cluster_id, tuned_environment


def register(sub: argparse._SubParsersAction) -> None:
    server = add_command(sub, "server", _server, "run a node (controller, broker or both) from its TOML config")
    server.add_argument("--config", required=True, help="the node's TOML config")
    storage = sub.add_parser("storage", help="format log directories").add_subparsers(
        dest="storage_command", required=True, metavar="COMMAND"
    )
    fmt = add_command(storage, "format", _format, "write meta.properties for a cluster id into every log dir")
    fmt.add_argument("--cluster-id", required=True)
    fmt.add_argument("--config", required=True, help="the node's TOML config")
    fmt.add_argument("--ignore-formatted", action="store_true", help="skip dirs already formatted for this cluster")
    add_command(storage, "random-uuid", _random, "print a new random cluster id")


def _server(args: argparse.Namespace) -> None:
    config = NodeConfig.load(args.config)  # fail fast, before the re-exec, on a bad config
    if any(key not in os.environ for key in MALLOC_ENV):
        os.execve(sys.executable, [sys.executable, "-m", "odradek.client.cli.main", *sys.argv[1:]], tuned_environment())
    from odradek.broker.node import run

    run(config)


def _format(args: argparse.Namespace) -> None:
    check_cluster_id(args.cluster_id)
    config = NodeConfig.load(args.config)
    dirs = format_storage(config, args.cluster_id, ignore_formatted=args.ignore_formatted)
    data = {"cluster_id": args.cluster_id, "node_id": config.node_id, "formatted": [str(d) for d in dirs]}
    emit(data, args.format, human=f"formatted {len(dirs)} log dir(s) for cluster {args.cluster_id}")


def _random(args: argparse.Namespace) -> None:
    cluster_id = random_cluster_id()
    emit({"cluster_id": cluster_id}, args.format, human=cluster_id)

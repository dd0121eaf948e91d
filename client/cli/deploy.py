"""``odradek deploy config`` and ``odradek deploy certs``: node configs and TLS certificates from a cluster
description (``odradek.deploy.cluster``, ``odradek.deploy.certs``, docs/deploy.md).

``config`` writes every node's ``node-<id>.toml`` into a directory, or one node's config (``--node-id``) into the
directory or straight to the file a node runs from (``--output /etc/odradek/node.toml``); with ``--tls DIR`` every
listener is SSL with mutual TLS, from the certificates in DIR. Warnings about a legal but unlikely layout (an even
number of controllers, say) go to stderr and do not fail the command. ``certs`` writes the cluster CA, a
certificate per node and an admin client certificate into a directory, keeping those already there that fit.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from odradek.client.cli.common import CommandError, add_command
from odradek.client.cli.output import emit
from odradek.deploy.certs import DEFAULT_DAYS, CertsError, deployment_certs
from odradek.deploy.cluster import (
    ClusterSpecError,
    cluster_warnings,
    config_name,
    load_cluster,
    write_config,
    write_configs,
)


def register(sub: argparse._SubParsersAction) -> None:
    deploy = sub.add_parser("deploy", help="deployment on VMs, one node per VM").add_subparsers(
        dest="deploy_command", required=True, metavar="COMMAND"
    )
    config = add_command(deploy, "config", _config, "write node configs from a cluster description")
    config.add_argument("--cluster", required=True, help="the cluster description (TOML)")
    target = config.add_mutually_exclusive_group(required=True)
    target.add_argument("--out", help="directory to write node-<id>.toml into")
    target.add_argument("--output", help="file to write the --node-id node's config to")
    config.add_argument("--node-id", type=int, help="write only this node's config")
    config.add_argument(
        "--tls",
        metavar="DIR",
        help="every listener SSL with mutual TLS, from the files of 'deploy certs' in DIR (as the nodes see it)",
    )
    certs = add_command(deploy, "certs", _certs, "write the cluster CA and node and admin certificates")
    certs.add_argument("--cluster", required=True, help="the cluster description (TOML)")
    certs.add_argument("--out", required=True, help="directory for the files (an existing CA there is used)")
    certs.add_argument(
        "--days", type=int, default=DEFAULT_DAYS, help=f"node and admin certificates' validity (default {DEFAULT_DAYS})"
    )
    certs.add_argument(
        "--force", action="store_true", help="replace node and admin certificates and keys already there"
    )


def _config(args: argparse.Namespace) -> None:
    if args.output and args.node_id is None:
        raise CommandError("--output needs --node-id (it writes one node's config)")
    try:
        spec = load_cluster(args.cluster)
        if args.node_id is None:
            written = write_configs(spec, args.out, args.tls)
        else:
            path = Path(args.output) if args.output else Path(args.out) / config_name(args.node_id)
            written = {args.node_id: write_config(spec, args.node_id, path, args.tls)}
    except ClusterSpecError as e:
        raise CommandError(str(e)) from None
    for warning in cluster_warnings(spec):
        print(f"warning: {warning}", file=sys.stderr)
    configs = {str(node_id): str(path.resolve()) for node_id, path in written.items()}
    human = "\n".join(f"node {node_id}: {path}" for node_id, path in configs.items())
    emit({"configs": configs}, args.format, human=human)


def _certs(args: argparse.Namespace) -> None:
    try:
        spec = load_cluster(args.cluster)
        nodes = {node.node_id: [node.host] for node in spec.nodes}
        made = deployment_certs(Path(args.out).resolve(), nodes, days=args.days, force=args.force)
    except (ClusterSpecError, CertsError) as e:
        raise CommandError(str(e)) from None
    except OSError as e:
        raise CommandError(f"{args.out}: {e.strerror or e}") from None
    rows = [("ca", made.ca)] + [(f"node {i}", f) for i, f in sorted(made.nodes.items())] + [("admin", made.admin)]
    human = "\n".join(f"{name}: {files.cert} ({files.status})" for name, files in rows)
    emit(made.as_json(), args.format, human=human)

"""``odradek cluster health``: a report of fenced brokers and offline, leaderless, under-replicated and
under-min-ISR partitions (rpk's ``cluster health``).

The command reports, so it exits 0 even for an unhealthy cluster; ``--exit-code`` makes it exit 1 then, for
scripts that gate on health.
"""

from __future__ import annotations

import argparse
from typing import Any

from odradek.client.cli.cluster import admin_command, with_admin
from odradek.client.cli.output import emit
from odradek.client.health import ClusterHealth

UNHEALTHY_EXIT = 1


def register_cluster_commands(cluster: argparse._SubParsersAction) -> None:
    """Add ``health`` to the ``cluster`` group (which cluster.py owns, so the group stays one subparser)."""
    health = admin_command(cluster, "health", _health, "fenced brokers, offline and under-replicated partitions")
    health.add_argument(
        "--exit-code", action="store_true", help="exit 1 when the cluster is unhealthy (default: always 0)"
    )


def _partitions(refs: list[dict[str, Any]]) -> str:
    return ", ".join(f"{r['topic']}-{r['partition']}" for r in refs) or "-"


def render_health(health: ClusterHealth) -> str:
    """The human report: one line per check, the partitions named."""
    data = health.to_dict()
    controller = data["controller_id"] if data["controller_id"] >= 0 else "none"
    lines = [
        f"healthy: {'yes' if data['healthy'] else 'no'}",
        f"controller: {controller}",
        f"unavailable controllers: {', '.join(str(c) for c in data['unavailable_controllers']) or '-'}",
        f"unavailable brokers: {', '.join(str(b) for b in data['unavailable_brokers']) or '-'}",
        f"leaderless partitions: {data['leaderless_count']}",
        f"offline partitions ({len(data['offline_partitions'])}): {_partitions(data['offline_partitions'])}",
        f"under-replicated partitions ({data['under_replicated_count']}): "
        f"{_partitions(data['under_replicated_partitions'])}",
        f"under-min-ISR partitions ({data['under_min_isr_count']}): {_partitions(data['under_min_isr_partitions'])}",
    ]
    return "\n".join(lines)


def _health(args: argparse.Namespace) -> int:
    health = with_admin(args, lambda a: a.cluster_health())
    emit(health.to_dict(), args.format, human=render_health(health))
    return UNHEALTHY_EXIT if args.exit_code and not health.healthy else 0

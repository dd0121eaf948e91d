"""``odradek partition reassign``: move a partition's replicas (or cancel a move), as Kafka's
``kafka-reassign-partitions.sh``.

The controller first adds the new replicas; once they have caught up and joined the ISR it drops the removed
ones, so a reassignment completes asynchronously. ``--wait`` polls the topic's metadata until the partition has
no adding or removing replicas left (and, for a move, its replicas are the requested ones).
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

from odradek.client.admin import AsyncAdmin, PartitionInfo, ReassignmentResult
from odradek.client.cli.cluster import admin_command, with_admin
from odradek.client.cli.common import CommandError
from odradek.client.cli.output import emit, table

POLL_INTERVAL_S = 0.5


def register(sub: argparse._SubParsersAction) -> None:
    partition = sub.add_parser("partition", help="partition replicas").add_subparsers(
        dest="partition_command", required=True, metavar="COMMAND"
    )
    reassign = admin_command(partition, "reassign", _reassign, "move a partition to other replicas, or cancel")
    reassign.add_argument("--topic", "-t", required=True)
    reassign.add_argument("--partition", "-p", type=int, required=True)
    target = reassign.add_mutually_exclusive_group(required=True)
    target.add_argument("--replicas", type=parse_replicas, help="new replica ids, preferred leader first: 4,5,6")
    target.add_argument("--cancel", action="store_true", help="cancel the partition's pending reassignment")
    reassign.add_argument("--wait", action="store_true", help="wait until the reassignment completes")
    reassign.add_argument("--timeout", type=float, default=60.0, help="seconds --wait waits (default 60)")


def parse_replicas(text: str) -> list[int]:
    """``4,5,6`` -> [4, 5, 6]; argparse reports an ArgumentTypeError as a usage error (exit 2)."""
    try:
        replicas = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"replicas must be comma-separated broker ids, not {text!r}") from None
    if not replicas:
        raise argparse.ArgumentTypeError("replicas must name at least one broker")
    if len(set(replicas)) != len(replicas):
        raise argparse.ArgumentTypeError(f"replicas {text!r} repeat a broker")
    return replicas


def settled(p: PartitionInfo, target: list[int] | None) -> bool:
    """No replica is being added or removed, and a move (``target`` not None) has reached its replica set."""
    if p.adding_replicas or p.removing_replicas:
        return False
    return target is None or set(p.replicas) == set(target)


async def wait_settled(
    admin: AsyncAdmin, topic: str, partition: int, target: list[int] | None, timeout: float
) -> PartitionInfo:
    deadline = time.monotonic() + timeout
    while True:
        (info,) = await admin.describe_topics([topic])
        found = [p for p in info.partitions if p.partition == partition]
        if not found:
            raise CommandError(f"partition {topic}-{partition} does not exist")
        p = found[0]
        if settled(p, target):
            return p
        if time.monotonic() >= deadline:
            raise CommandError(
                f"reassignment of {topic}-{partition} not complete after {timeout:g}s "
                f"(replicas {p.replicas}, isr {p.isr}, adding {p.adding_replicas}, removing {p.removing_replicas})"
            )
        await asyncio.sleep(POLL_INTERVAL_S)


async def reassign(
    admin: AsyncAdmin, topic: str, partition: int, replicas: list[int] | None, wait: bool, timeout: float
) -> tuple[list[ReassignmentResult], PartitionInfo | None]:
    results = await admin.alter_partition_reassignments({(topic, partition): replicas})
    final = None
    if wait and all(r.error is None for r in results):
        final = await wait_settled(admin, topic, partition, replicas, timeout)
    return results, final


def render_reassignments(results: list[ReassignmentResult], final: PartitionInfo | None) -> str:
    rows: list[dict[str, Any]] = [
        {**r.to_dict(), "result": "ok" if r.error is None else r.error, "message": r.message or None} for r in results
    ]
    text = table(rows, ["topic", "partition", "result", "message"])
    if final is not None:
        text += f"\n\ncomplete: replicas {','.join(map(str, final.replicas))}, isr {','.join(map(str, final.isr))}"
        text += f", leader {final.leader}"
    return text


def _reassign(args: argparse.Namespace) -> None:
    replicas = None if args.cancel else args.replicas
    results, final = with_admin(
        args, lambda a: reassign(a, args.topic, args.partition, replicas, args.wait, args.timeout)
    )
    emit([r.to_dict() for r in results], args.format, human=render_reassignments(results, final))
    failed = [r for r in results if r.error is not None]
    if failed:
        first = failed[0]
        detail = f": {first.message}" if first.message else ""
        raise CommandError(f"reassignment of {first.topic}-{first.partition} failed: {first.error}{detail}")

"""``odradek leader elect``: preferred (or unclean) leader election, as Kafka's ``kafka-leader-election.sh``.

Preferred election moves leadership back to each partition's first replica, e.g. after a broker returns from a
failure and leads nothing. A partition whose preferred replica already leads answers ELECTION_NOT_NEEDED: it is
reported but is no failure. Any other per-partition error makes the command exit non-zero after printing all
results.
"""

from __future__ import annotations

import argparse
from typing import Any

from odradek.client.admin import AsyncAdmin, ElectionResult
from odradek.client.cli.cluster import admin_command, with_admin
from odradek.client.cli.common import CommandError
from odradek.client.cli.output import emit, table

NOT_A_FAILURE = (None, "ELECTION_NOT_NEEDED")


def register(sub: argparse._SubParsersAction) -> None:
    leader = sub.add_parser("leader", help="partition leadership").add_subparsers(
        dest="leader_command", required=True, metavar="COMMAND"
    )
    elect = admin_command(leader, "elect", _elect, "elect preferred (or, with --unclean, most complete live) leaders")
    elect.add_argument("--topic", "-t", help="only this topic's partitions (default: every partition)")
    elect.add_argument(
        "--partition", "-p", type=int, action="append", help="only this partition of --topic (repeatable)"
    )
    elect.add_argument(
        "--unclean",
        action="store_true",
        help="elect the live replica with the most complete log for leaderless partitions (may lose records)",
    )


async def elect(admin: AsyncAdmin, topic: str | None, partitions: list[int] | None, unclean: bool):
    """Resolve the partitions the options name, then elect; a named topic that does not exist is an error."""
    targets: list[tuple[str, int]] | None = None
    if topic is not None:
        if partitions:
            targets = [(topic, p) for p in partitions]
        else:
            (info,) = await admin.describe_topics([topic])
            targets = [(topic, p.partition) for p in info.partitions]
    return await admin.elect_leaders("unclean" if unclean else "preferred", targets)


def failures(results: list[ElectionResult]) -> list[ElectionResult]:
    return [r for r in results if r.error not in NOT_A_FAILURE]


def render_elections(results: list[ElectionResult]) -> str:
    rows: list[dict[str, Any]] = [
        {**r.to_dict(), "result": "elected" if r.error is None else r.error, "message": r.message or None}
        for r in results
    ]
    return table(rows, ["topic", "partition", "leader", "result", "message"])


def _elect(args: argparse.Namespace) -> None:
    if args.partition and not args.topic:
        raise CommandError("--partition needs --topic")
    results = with_admin(args, lambda a: elect(a, args.topic, args.partition, args.unclean))
    emit([r.to_dict() for r in results], args.format, human=render_elections(results))
    failed = failures(results)
    if failed:
        first = failed[0]
        detail = f": {first.message}" if first.message else ""
        raise CommandError(
            f"election failed for {len(failed)} partition(s); {first.topic}-{first.partition} {first.error}{detail}"
        )

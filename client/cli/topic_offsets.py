"""``odradek topic offsets T --time ...``: each partition's offset at a time, like Kafka's kafka-get-offsets.

``--time -1`` (or ``latest``) is the end (the high watermark), ``-2`` (``earliest``) the log start, and a time (ms
since the epoch or an ISO date/time) the first record at or after it, with that record's timestamp; a partition with
no record that recent answers no offset."""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from odradek.client.cli.common import CommandError
from odradek.client.cli.kcat_format import parse_time
from odradek.client.cli.output import emit, table
from odradek.client.cli.profile import client_config
from odradek.client.consumer import AsyncConsumer
from odradek.client.structs import TopicPartition

LATEST, EARLIEST = -1, -2
_WORDS = {"latest": LATEST, "end": LATEST, "earliest": EARLIEST, "beginning": EARLIEST}


def parse_offsets_time(text: str) -> int:
    """-1|latest, -2|earliest, ms since the epoch, or an ISO date/time."""
    word = text.strip().lower()
    if word in _WORDS:
        return _WORDS[word]
    if word in ("-1", "-2"):
        return int(word)
    if word.startswith("-"):
        raise CommandError(f"bad time {text!r}: give -1 (latest), -2 (earliest), ms since the epoch or an ISO time")
    return parse_time(text.strip())


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name")
    parser.add_argument(
        "--time",
        default="-1",
        help="-1|latest (default), -2|earliest, ms since the epoch, or an ISO time such as 2026-11-23T10:00:00",
    )
    parser.add_argument("--partition", "-p", type=int, action="append", help="only these partitions (repeatable)")


async def _lookup(args: argparse.Namespace, when: int) -> list[dict[str, Any]]:
    config = client_config(args, **{"request.timeout.ms": args.timeout_ms})
    async with AsyncConsumer(config) as consumer:
        count = len(await consumer.partitions_for(args.name))
        partitions = sorted(set(args.partition)) if args.partition else list(range(count))
        for p in partitions:
            if not 0 <= p < count:
                raise CommandError(f"topic {args.name} has {count} partitions (0-{count - 1}): no partition {p}")
        tps = [TopicPartition(args.name, p) for p in partitions]
        found: dict[TopicPartition, tuple[int | None, int | None]]
        if when == LATEST:
            found = {tp: (o, None) for tp, o in (await consumer.end_offsets(tps)).items()}
        elif when == EARLIEST:
            found = {tp: (o, None) for tp, o in (await consumer.beginning_offsets(tps)).items()}
        else:
            hits = await consumer.offsets_for_times(dict.fromkeys(tps, when))
            found = {tp: (None, None) if h is None else (h.offset, h.timestamp) for tp, h in hits.items()}
    return [
        {"topic": tp.topic, "partition": tp.partition, "offset": found[tp][0], "timestamp": found[tp][1]} for tp in tps
    ]


def run(args: argparse.Namespace) -> None:
    if args.timeout_ms < 1:
        raise CommandError(f"--timeout-ms must be at least 1, not {args.timeout_ms}")
    when = parse_offsets_time(args.time)
    rows = asyncio.run(_lookup(args, when))
    human = table(rows, ["partition", "offset", "timestamp"])
    if when >= 0 and any(r["offset"] is None for r in rows):
        human += f"\n('-': no record at or after {when} ms)"
    emit(rows, args.format, human=human)

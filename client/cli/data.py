"""``odradek produce`` (lines from stdin) and ``odradek consume`` (records to stdout)."""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import sys
import time

from odradek.client.cli.common import CommandError, add_command
from odradek.client.cli.profile import bootstrap_servers
from odradek.client.consumer import AsyncConsumer
from odradek.client.producer import AsyncProducer
from odradek.client.structs import ConsumerRecord, TopicPartition


def data_command(sub: argparse._SubParsersAction, name: str, handler, text: str) -> argparse.ArgumentParser:
    parser = add_command(sub, name, handler, text)
    parser.add_argument("--bootstrap-servers", "-X", help="broker host:port,... (default: the dev profile)")
    return parser


def register(sub: argparse._SubParsersAction) -> None:
    produce = data_command(sub, "produce", _produce, "produce lines from stdin as records")
    produce.add_argument("topic")
    produce.add_argument("--key-separator", help="split each line into key and value at the first SEP")
    produce.add_argument("--partition", type=int, help="send every record to this partition")
    produce.add_argument("--acks", choices=("0", "1", "all", "-1"), default="all")
    produce.add_argument("--compression", choices=("none", "gzip", "snappy", "lz4", "zstd"), default="none")
    consume = data_command(sub, "consume", _consume, "print records (JSON lines with --format json)")
    consume.add_argument("topic")
    consume.add_argument("--partition", type=int, action="append", help="only this partition (repeatable)")
    consume.add_argument("--offset", default="earliest", help="earliest, latest, or an offset number")
    consume.add_argument("--num", "-n", type=int, help="stop after N records")
    consume.add_argument("--idle-timeout-ms", type=int, help="stop when no record arrives for this long")


def _produce(args: argparse.Namespace) -> None:
    asyncio.run(_produce_async(args))


async def _produce_async(args: argparse.Namespace) -> None:
    config = {
        "bootstrap.servers": bootstrap_servers(args.bootstrap_servers),
        "acks": args.acks,
        "compression.type": args.compression,
        "linger.ms": 5,
    }
    sep = args.key_separator
    futures = []
    async with AsyncProducer(config) as producer:
        for line in sys.stdin:
            line = line.rstrip("\n")
            key = None
            if sep:
                key, found, value = line.partition(sep)
                if not found:
                    key, value = None, line
            else:
                value = line
            futures.append(producer.send(args.topic, value.encode(), key=key, partition=args.partition))
            if len(futures) % 1000 == 0:
                await asyncio.sleep(0)
        await producer.flush()
    offsets: dict[int, list[int]] = {}
    for future in futures:
        meta = await future
        span = offsets.setdefault(meta.partition, [meta.offset, meta.offset])
        span[0], span[1] = min(span[0], meta.offset), max(span[1], meta.offset)
    summary = {
        "topic": args.topic,
        "records": len(futures),
        "partitions": {str(p): o for p, o in sorted(offsets.items())},
    }
    if args.format == "json":
        print(json.dumps(summary))
    else:
        spans = ", ".join(f"partition {p}: offsets {a}-{b}" for p, (a, b) in sorted(offsets.items()))
        print(f"produced {len(futures)} records to {args.topic}" + (f" ({spans})" if spans else ""))


def _text(data: bytes | None) -> str | None:
    if data is None:
        return None
    try:
        return data.decode()
    except UnicodeDecodeError:
        return "base64:" + base64.b64encode(data).decode()


def _as_dict(r: ConsumerRecord) -> dict:
    return {
        "topic": r.topic,
        "partition": r.partition,
        "offset": r.offset,
        "timestamp": r.timestamp,
        "key": _text(r.key),
        "value": _text(r.value),
        "headers": [[k, _text(v)] for k, v in r.headers],
    }


def _consume(args: argparse.Namespace) -> None:
    with contextlib.suppress(BrokenPipeError):
        asyncio.run(_consume_async(args))


async def _consume_async(args: argparse.Namespace) -> None:
    config = {"bootstrap.servers": bootstrap_servers(args.bootstrap_servers), "auto.offset.reset": "earliest"}
    async with AsyncConsumer(config) as consumer:
        partitions = args.partition or await consumer.partitions_for(args.topic)
        tps = [TopicPartition(args.topic, p) for p in partitions]
        consumer.assign(tps)
        if args.offset == "earliest":
            consumer.seek_to_beginning(*tps)
        elif args.offset == "latest":
            consumer.seek_to_end(*tps)
        elif args.offset.isdigit():
            for tp in tps:
                consumer.seek(tp, int(args.offset))
        else:
            raise CommandError(f"--offset must be earliest, latest or a number, not {args.offset!r}")
        count = 0
        last = time.monotonic()
        while args.num is None or count < args.num:
            records = await consumer.poll(timeout_ms=200)
            if records:
                last = time.monotonic()
            elif args.idle_timeout_ms is not None and (time.monotonic() - last) * 1000 >= args.idle_timeout_ms:
                break
            for r in records[: None if args.num is None else args.num - count]:
                if args.format == "json":
                    sys.stdout.write(json.dumps(_as_dict(r)) + "\n")
                else:
                    key = _text(r.key)
                    sys.stdout.write(
                        f"partition={r.partition} offset={r.offset} timestamp={r.timestamp} "
                        + (f"key={key} " if key is not None else "")
                        + f"value={_text(r.value)}\n"
                    )
                count += 1
            sys.stdout.flush()

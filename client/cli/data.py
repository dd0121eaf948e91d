"""``odradek produce`` (records from stdin, sent as they arrive) and ``odradek consume`` (records to stdout), with
the options kcat and rpk users reach for. Both learn the topic's partitions first, within ``--timeout-ms``, so a
bad partition, a missing topic or an unreachable cluster is reported at once and by its real cause."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import json
import sys
import time
from typing import Any

from odradek.broker.groups.records import OffsetsRecordError, describe_record
from odradek.client.cli.client_settings import add_connection_options
from odradek.client.cli.common import CommandError, add_command
from odradek.client.cli.kcat_format import (
    Encoding,
    OffsetSpec,
    as_dict,
    as_text,
    compile_format,
    parse_offsets,
    unescape,
)
from odradek.client.cli.profile import client_config
from odradek.client.consumer import AsyncConsumer
from odradek.client.errors import OffsetOutOfRangeError
from odradek.client.producer import AsyncProducer
from odradek.client.structs import ConsumerRecord, TopicPartition

OFFSETS_TOPIC = "__consumer_offsets"
DEFAULT_TIMEOUT_MS = 5000
DEFAULT_DELIVERY_TIMEOUT_MS = 30000
READ_CHUNK = 65536


def data_command(sub: argparse._SubParsersAction, name: str, handler, text: str) -> argparse.ArgumentParser:
    parser = add_command(sub, name, handler, text)
    add_connection_options(parser, "broker host:port,... (default: the dev profile)")
    return parser


def _timeout_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--timeout-ms",
        type=int,
        default=DEFAULT_TIMEOUT_MS,
        help=f"how long to wait for the cluster (metadata, each request) before failing (default {DEFAULT_TIMEOUT_MS})",
    )


def register(sub: argparse._SubParsersAction) -> None:
    produce = data_command(sub, "produce", _produce, "produce records from stdin (one per line by default)")
    produce.add_argument("topic")
    _timeout_option(produce)
    produce.add_argument("--key", "-k", help="the key of every record")
    produce.add_argument("--key-separator", "-K", help="split each record into key and value at the first SEP")
    produce.add_argument("--header", "-H", action="append", default=[], help="header k=v on every record (repeatable)")
    produce.add_argument("--partition", "-p", type=int, help="send every record to this partition")
    produce.add_argument("--delimiter", "-D", default="\\n", help="record delimiter in the input (default \\n)")
    produce.add_argument("--binary", action="store_true", help="the whole of stdin, bytes as they are, is one record")
    produce.add_argument("--tombstone", "-Z", action="store_true", help="send empty values as null (tombstones)")
    produce.add_argument("--acks", choices=("0", "1", "all", "-1"), default="all")
    produce.add_argument(
        "--delivery-timeout-ms",
        type=int,
        default=DEFAULT_DELIVERY_TIMEOUT_MS,
        help="how long a record may take to be acknowledged, retries included "
        f"(default {DEFAULT_DELIVERY_TIMEOUT_MS}; at least --timeout-ms + 5)",
    )
    produce.add_argument("--compression", "-z", choices=("none", "gzip", "snappy", "lz4", "zstd"), default="none")

    consume = data_command(sub, "consume", _consume, "print records (JSON lines with --format json)")
    consume.add_argument("topic")
    _timeout_option(consume)
    consume.add_argument("--partition", "-p", type=int, action="append", help="only this partition (repeatable)")
    consume.add_argument(
        "--offset",
        "-o",
        action="append",
        default=[],
        help="beginning|end|N|-N (N before the end)|@ms|@2026-11-23T10:00:00; P:SPEC for partition P only "
        "(repeatable; default beginning)",
    )
    consume.add_argument(
        "--reset", choices=("earliest", "latest"), help="where to go when an offset is out of range (default: error)"
    )
    end = consume.add_mutually_exclusive_group()
    end.add_argument("--follow", action="store_true", help="keep waiting for new records (the default)")
    end.add_argument("--exit-at-end", "-e", action="store_true", help="stop at the end of every partition")
    consume.add_argument("--num", "-n", type=int, help="stop after N records")
    consume.add_argument("--idle-timeout-ms", type=int, help="stop when no record arrives for this long")
    consume.add_argument("--format-string", "-f", help="kcat format: %%t %%p %%o %%k %%s %%h %%T %%K %%S, \\n escapes")
    consume.add_argument(
        "--binary",
        choices=("base64", "hex"),
        help="how non-UTF-8 bytes are shown (default base64); with -f, encode every key, value and header value",
    )


def offsets_record(r: ConsumerRecord, encoding: Encoding) -> dict[str, Any]:
    """A ``__consumer_offsets`` record for ``--format json``: its key and value decoded (``{version, group, ...}``)
    and its ``type`` (``offset_commit``, ``group_metadata`` or a KIP-848 consumer group record's, e.g.
    ``consumer_group_member_metadata``); a record that does not decode keeps the raw view with ``decode_error``."""
    out = as_dict(r, encoding)
    try:
        view = describe_record(r.key or b"", r.value, binary=encoding)
    except OffsetsRecordError as e:
        out["decode_error"] = str(e)
        return out
    out.pop("key_encoding", None)
    out.pop("value_encoding", None)
    out.update(type=view["type"], key=view["key"], value=view["value"])
    return out


def _check_timeout(args: argparse.Namespace) -> int:
    if args.timeout_ms < 1:
        raise CommandError(f"--timeout-ms must be at least 1, not {args.timeout_ms}")
    return args.timeout_ms


def _check_partition(topic: str, partition: int, count: int) -> None:
    if not 0 <= partition < count:
        raise CommandError(f"topic {topic} has {count} partitions (0-{count - 1}): there is no partition {partition}")


# ---- produce ----


def _produce(args: argparse.Namespace) -> None:
    asyncio.run(_produce_async(args))


def _headers(specs: list[str]) -> list[tuple[str, bytes]] | None:
    headers = []
    for spec in specs:
        name, eq, value = spec.partition("=")
        if not eq or not name:
            raise CommandError(f"header {spec!r} is not k=v")
        headers.append((name, value.encode()))
    return headers or None


class _Summary:
    """Acknowledged offsets per partition, and the first failure, filled in by delivery callbacks."""

    def __init__(self) -> None:
        self.sent = 0
        self.acked = 0
        self.spans: dict[int, list[int]] = {}
        self.error: BaseException | None = None

    def done(self, future: Any) -> None:
        error = future.exception()
        if error is not None:
            self.error = self.error or error
            return
        meta = future.result()
        self.acked += 1
        span = self.spans.setdefault(meta.partition, [meta.offset, meta.offset])
        span[0], span[1] = min(span[0], meta.offset), max(span[1], meta.offset)


async def _produce_async(args: argparse.Namespace) -> None:
    timeout_ms = _check_timeout(args)
    if args.key is not None and args.key_separator:
        raise CommandError("give --key or --key-separator, not both")
    headers = _headers(args.header)
    delimiter = unescape(args.delimiter).encode()
    if not delimiter:
        raise CommandError("--delimiter must not be empty (use --binary for one record of all of stdin)")
    separator = args.key_separator.encode() if args.key_separator else None
    fixed_key = args.key.encode() if args.key is not None else None
    linger_ms = 5
    if args.delivery_timeout_ms < timeout_ms + linger_ms:
        raise CommandError(
            f"--delivery-timeout-ms ({args.delivery_timeout_ms}) must be at least --timeout-ms + {linger_ms} "
            f"({timeout_ms + linger_ms})"
        )
    config = client_config(
        args,
        **{
            "acks": args.acks,
            "compression.type": args.compression,
            "linger.ms": linger_ms,
            "max.block.ms": timeout_ms,
            "request.timeout.ms": timeout_ms,
            "delivery.timeout.ms": args.delivery_timeout_ms,
        },
    )
    summary = _Summary()
    loop = asyncio.get_running_loop()
    stdin = sys.stdin.buffer
    async with AsyncProducer(config) as producer:
        count = len(await producer.partitions_for(args.topic))
        if args.partition is not None:
            _check_partition(args.topic, args.partition, count)

        def send(record: bytes) -> None:
            key = fixed_key
            value: bytes | None = record
            if separator is not None:
                head, found, tail = record.partition(separator)
                if found:
                    key, value = head, tail
            if args.tombstone and not value:
                value = None
            future = producer.send(args.topic, value, key=key, partition=args.partition, headers=headers)
            future.add_done_callback(summary.done)
            summary.sent += 1

        if args.binary:
            send(await loop.run_in_executor(None, stdin.read))
        else:
            if not isinstance(stdin, io.BufferedIOBase):  # what sys.stdin.buffer is, unless replaced
                raise CommandError("stdin is not a buffered byte stream (use --binary to send all of it as one record)")
            pending = b""
            # read1 returns as soon as some input is there: each record goes out as it arrives (within linger.ms).
            while chunk := await loop.run_in_executor(None, stdin.read1, READ_CHUNK):
                *records, pending = (pending + chunk).split(delimiter)
                for record in records:
                    send(record)
                if summary.error is not None:
                    break
            if pending and summary.error is None:
                send(pending)
        await producer.flush()
    if summary.error is not None:
        failed = summary.sent - summary.acked
        raise CommandError(f"{failed} of {summary.sent} records failed: {_describe(summary.error)}")
    _report(args, summary)


def _describe(error: BaseException) -> str:
    code = getattr(error, "code_name", None)
    text = str(error) or type(error).__name__
    return f"{code}: {text}" if code and code not in text else text


def _report(args: argparse.Namespace, summary: _Summary) -> None:
    spans = sorted(summary.spans.items())
    if args.format == "json":
        print(json.dumps({"topic": args.topic, "records": summary.sent, "partitions": {str(p): s for p, s in spans}}))
    else:
        text = ", ".join(f"partition {p}: offsets {a}-{b}" for p, (a, b) in spans)
        print(f"produced {summary.sent} records to {args.topic}" + (f" ({text})" if text else ""))


# ---- consume ----


def _consume(args: argparse.Namespace) -> None:
    with contextlib.suppress(BrokenPipeError):
        asyncio.run(_consume_async(args))


async def _start_positions(
    consumer: AsyncConsumer,
    tps: list[TopicPartition],
    specs: dict[TopicPartition, OffsetSpec],
    reset: str | None,
) -> None:
    """Seek every partition to its spec. A time seeks to the first record at or after it, which the broker finds
    exactly (record, not batch)."""
    need_range = [tp for tp in tps if specs[tp].kind in ("absolute", "from_end")]
    beginning = await consumer.beginning_offsets(need_range) if need_range else {}
    end = await consumer.end_offsets(need_range) if need_range else {}
    by_time = {tp: specs[tp].value for tp in tps if specs[tp].kind == "time"}
    found = await consumer.offsets_for_times(by_time) if by_time else {}
    for tp in tps:
        spec = specs[tp]
        if spec.kind == "beginning":
            consumer.seek_to_beginning(tp)
        elif spec.kind == "end":
            consumer.seek_to_end(tp)
        elif spec.kind == "from_end":
            consumer.seek(tp, max(beginning[tp], end[tp] - spec.value))
        elif spec.kind == "absolute":
            offset = spec.value
            if not beginning[tp] <= offset <= end[tp]:
                if reset is None:
                    raise CommandError(
                        f"offset {offset} is out of range for {tp.topic}-{tp.partition} (offsets {beginning[tp]}-"
                        f"{end[tp]}); --reset earliest|latest starts at an end instead"
                    )
                offset = beginning[tp] if reset == "earliest" else end[tp]
            consumer.seek(tp, offset)
        else:
            hit = found.get(tp)
            if hit is None:
                consumer.seek_to_end(tp)  # no record that recent: wait for new ones, as kcat does
            else:
                consumer.seek(tp, hit.offset)


async def _consume_async(args: argparse.Namespace) -> None:
    timeout_ms = _check_timeout(args)
    default, per_partition = parse_offsets(args.offset)
    render = compile_format(args.format_string, args.binary) if args.format_string else None
    encoding: Encoding = args.binary or "base64"
    for option, value in (("--num", args.num), ("--idle-timeout-ms", args.idle_timeout_ms)):
        if value is not None and value < 0:
            raise CommandError(f"{option} must be >= 0, not {value}")
    for p in [*(args.partition or ()), *per_partition]:
        if p < 0:
            raise CommandError(f"partition must be >= 0, not {p}")
    config = client_config(args, **{"auto.offset.reset": args.reset or "none", "request.timeout.ms": timeout_ms})
    out = sys.stdout.buffer
    async with AsyncConsumer(config) as consumer:
        count = len(await consumer.partitions_for(args.topic))
        partitions = sorted(set(args.partition)) if args.partition else list(range(count))
        for p in [*partitions, *per_partition]:
            _check_partition(args.topic, p, count)
        if per_partition.keys() - set(partitions):
            extra = sorted(per_partition.keys() - set(partitions))
            raise CommandError(f"-o names partitions {extra} that --partition does not select")
        tps = [TopicPartition(args.topic, p) for p in partitions]
        consumer.assign(tps)
        specs = {tp: per_partition.get(tp.partition, default) for tp in tps}
        await _start_positions(consumer, tps, specs, args.reset)
        ends = await consumer.end_offsets(tps) if args.exit_at_end else {}
        remaining = set(tps)
        printed = 0
        last = time.monotonic()
        while args.num is None or printed < args.num:
            if args.exit_at_end:
                for tp in list(remaining):
                    if await consumer.position(tp) >= ends[tp]:
                        remaining.discard(tp)
                        consumer.pause(tp)
                if not remaining:
                    break
            try:
                records = await consumer.poll(timeout_ms=200)
            except OffsetOutOfRangeError as e:
                raise CommandError(f"{e}; --reset earliest|latest starts at an end instead") from None
            if records:
                last = time.monotonic()
            elif args.idle_timeout_ms is not None and (time.monotonic() - last) * 1000 >= args.idle_timeout_ms:
                break
            for r in records:
                if args.num is not None and printed >= args.num:
                    break
                tp = TopicPartition(r.topic, r.partition)
                if args.exit_at_end and r.offset >= ends[tp]:
                    continue
                if render is not None:
                    out.write(render(r))
                elif args.format == "json":
                    shown = offsets_record(r, encoding) if r.topic == OFFSETS_TOPIC else as_dict(r, encoding)
                    out.write((json.dumps(shown) + "\n").encode())
                else:
                    out.write(as_text(r, encoding).encode())
                printed += 1
            out.flush()

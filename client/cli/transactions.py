"""``odradek transaction list|describe|describe-producers|find-hanging|abort``: inspecting transactions and ending
hanging ones, like Kafka's kafka-transactions.sh."""

from __future__ import annotations

import argparse
import time
from datetime import UTC, datetime
from typing import Any

from odradek.client.admin import AsyncAdmin
from odradek.client.admin_transactions import (
    DEFAULT_MAX_TRANSACTION_TIMEOUT_MS,
    OPEN_STATES,
    TransactionDescription,
)
from odradek.client.cli.cluster import admin_command, with_admin
from odradek.client.cli.common import CommandError
from odradek.client.cli.output import emit, table
from odradek.client.errors import ErrorCode, error_for_code
from odradek.client.structs import TopicPartition

ABORT_HELP = (
    "abort a transaction: --topic T --partition P --start-offset O writes an ABORT marker for the open "
    "transaction starting at O (a hanging one no coordinator will end); --transactional-id ID has the id's "
    "coordinator abort its ongoing transaction, which also fences the id's current producer (its next request "
    "fails with PRODUCER_FENCED)"
)


def register(sub: argparse._SubParsersAction) -> None:
    txn = sub.add_parser("transaction", help="transactions").add_subparsers(
        dest="transaction_command", required=True, metavar="COMMAND"
    )
    lst = admin_command(txn, "list", _list, "every transactional id with its producer id, state and coordinator")
    lst.add_argument("--state", action="append", default=[], help="only ids in this state, e.g. Ongoing (repeatable)")
    lst.add_argument(
        "--producer-id", action="append", type=int, default=[], metavar="N", help="only this producer id (repeatable)"
    )
    lst.add_argument("--duration-ms", type=int, default=0, metavar="N", help="only transactions open longer than N ms")
    describe = admin_command(
        txn, "describe", _describe, "a transactional id's state, producer, partitions, start time and timeout"
    )
    describe.add_argument("transactional_id", metavar="ID")
    producers = admin_command(
        txn, "describe-producers", _describe_producers, "a partition's active producers and their open transactions"
    )
    producers.add_argument("--topic", required=True)
    producers.add_argument("--partition", type=int, required=True)
    hanging = admin_command(
        txn,
        "find-hanging",
        _find_hanging,
        "open transactions older than the max timeout that no coordinator lists as ongoing on their partition",
    )
    hanging.add_argument("--broker", type=int, metavar="N", help="only partitions with a replica on broker N")
    hanging.add_argument("--topic", action="append", default=[], help="only this topic (repeatable)")
    hanging.add_argument("--partition", type=int, help="only this partition of the topics (needs --topic)")
    hanging.add_argument(
        "--max-transaction-timeout-ms",
        type=int,
        default=DEFAULT_MAX_TRANSACTION_TIMEOUT_MS,
        metavar="N",
        help="the brokers' transaction.max.timeout.ms (default %(default)s): a transaction open longer is hanging",
    )
    abort = admin_command(txn, "abort", _abort, ABORT_HELP)
    abort.add_argument("--transactional-id", metavar="ID", help="abort this id's ongoing transaction (fences it)")
    abort.add_argument("--topic", help="the partition's topic (with --partition and --start-offset)")
    abort.add_argument("--partition", type=int)
    abort.add_argument("--start-offset", type=int, metavar="O", help="the first offset of the open transaction")


def _iso(ms: int) -> str:
    if ms < 0:
        return "-"
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _non_negative(value: int | None, option: str) -> None:
    if value is not None and value < 0:
        raise CommandError(f"{option} must be >= 0, not {value}")


def _list(args: argparse.Namespace) -> None:
    for pid in args.producer_id:
        _non_negative(pid, "--producer-id")
    _non_negative(args.duration_ms, "--duration-ms")
    listed = with_admin(args, lambda a: a.list_transactions(args.state, args.producer_id, args.duration_ms))
    rows = [t.to_dict() for t in listed]
    emit(rows, args.format, human=table(rows) if rows else "(no transactions)")


def describe_human(d: TransactionDescription, now_ms: int) -> str:
    """The human form of ``describe``: one field per line, then the transaction's partitions."""
    running = ""
    if d.transaction_start_time_ms >= 0 and d.state in OPEN_STATES:
        running = f" (open {max(0, now_ms - d.transaction_start_time_ms) // 1000} s)"
    lines = [
        f"transactional id:  {d.transactional_id}",
        f"state:             {d.state}",
        f"producer id:       {d.producer_id}",
        f"producer epoch:    {d.producer_epoch}",
        f"coordinator:       {d.coordinator}",
        f"timeout ms:        {d.transaction_timeout_ms}",
        f"start time:        {_iso(d.transaction_start_time_ms)}{running}",
        f"last update:       {_iso(d.last_update_time_ms)}",
    ]
    parts = [{"topic": tp.topic, "partition": tp.partition} for tp in d.partitions]
    return "\n".join(lines) + "\n\n" + (table(parts) if parts else "(no partitions)")


def _describe(args: argparse.Namespace) -> None:
    [d] = with_admin(args, lambda a: a.describe_transactions([args.transactional_id]))
    emit(d.to_dict(), args.format, human=describe_human(d, int(time.time() * 1000)))


def _describe_producers(args: argparse.Namespace) -> None:
    _non_negative(args.partition, "--partition")
    [pp] = with_admin(args, lambda a: a.describe_producers([TopicPartition(args.topic, args.partition)]))
    data = pp.to_dict()
    head = f"{pp.topic}:{pp.partition} leader {pp.leader}"
    emit(data, args.format, human=head + "\n\n" + (table(data["producers"]) if pp.producers else "(no producers)"))


def _find_hanging(args: argparse.Namespace) -> None:
    if args.partition is not None and not args.topic:
        raise CommandError("--partition needs --topic")
    _non_negative(args.partition, "--partition")
    _non_negative(args.max_transaction_timeout_ms, "--max-transaction-timeout-ms")
    now = int(time.time() * 1000)
    found = with_admin(
        args,
        lambda a: a.find_hanging_transactions(
            args.broker, args.topic or None, args.partition, args.max_transaction_timeout_ms, now_ms=now
        ),
    )
    rows = [t.to_dict(now) for t in found]
    emit(rows, args.format, human=table(rows) if rows else "(no hanging transactions)")


async def _abort_id(admin: AsyncAdmin, transactional_id: str) -> dict[str, Any]:
    [d] = await admin.describe_transactions([transactional_id])
    if d.state != "Ongoing":
        raise error_for_code(
            ErrorCode.INVALID_TXN_STATE,
            f"INVALID_TXN_STATE: transactional id {transactional_id} has no ongoing transaction (state {d.state})",
        )
    fenced = await admin.fence_transactional_id(transactional_id)
    return {**fenced.to_dict(), "partitions": d.to_dict()["partitions"], "aborted": True}


def _abort(args: argparse.Namespace) -> None:
    partition_form = [args.topic, args.partition, args.start_offset]
    if args.transactional_id is not None:
        if any(v is not None for v in partition_form):
            raise CommandError("give --transactional-id, or --topic, --partition and --start-offset, not both")
        data = with_admin(args, lambda a: _abort_id(a, args.transactional_id))
        human = (
            f"aborted the transaction of {data['transactional_id']} (it was {data['previous_state']}); its producer "
            f"is fenced: producer id {data['producer_id']} is now at epoch {data['producer_epoch']}"
        )
        emit(data, args.format, human=human)
        return
    if any(v is None for v in partition_form):
        raise CommandError("give --transactional-id, or all of --topic, --partition and --start-offset")
    _non_negative(args.partition, "--partition")
    _non_negative(args.start_offset, "--start-offset")
    aborted = with_admin(args, lambda a: a.abort_transaction(args.topic, args.partition, args.start_offset))
    data = {**aborted.to_dict(), "aborted": True}
    human = (
        f"aborted the transaction of producer {aborted.producer_id} (epoch {aborted.producer_epoch}) on "
        f"{aborted.topic}:{aborted.partition} starting at offset {aborted.start_offset}"
    )
    emit(data, args.format, human=human)

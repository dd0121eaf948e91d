"""``odradek broker log-dirs``: each broker's log dirs (online or offline, disk total/free, bytes used) and the
replicas in them with size and offset lag, like ``kafka-log-dirs --describe`` and ``rpk cluster storage``; a
replica moving between dirs shows its future copy too (role ``future``). ``odradek broker move-replica`` starts such
moves (AlterReplicaLogDirs, the log dirs of ``kafka-reassign-partitions``)."""

from __future__ import annotations

import argparse
from typing import Any

from odradek.client.cli.cluster import admin_command, with_admin
from odradek.client.cli.common import CommandError
from odradek.client.cli.output import emit, table

_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


def register_broker_commands(broker: argparse._SubParsersAction) -> None:
    log_dirs = admin_command(
        broker, "log-dirs", _log_dirs, "each broker's log dirs, disk usage, and replica sizes and offset lag"
    )
    log_dirs.add_argument("--broker", "-b", type=int, action="append", help="only this broker (repeatable)")
    log_dirs.add_argument("--topic", "-t", action="append", help="only this topic's replicas (repeatable)")
    move = admin_command(
        broker,
        "move-replica",
        _move_replica,
        "move a broker's replicas to another of its log dirs (copied in the background; see log-dirs)",
    )
    move.add_argument("--broker", "-b", type=int, required=True, help="the broker holding the replicas")
    move.add_argument("--topic", "-t", required=True)
    move.add_argument("--partition", "-p", type=int, action="append", required=True, help="repeatable")
    move.add_argument("--dir", "-d", required=True, help="the destination log dir, as log-dirs shows it")


def human_bytes(n: int) -> str | None:
    """``1.5 GiB``; None (shown as '-') for an unknown (-1) figure."""
    if n < 0:
        return None
    value, unit = float(n), _UNITS[0]
    for unit in _UNITS:
        if value < 1024 or unit == _UNITS[-1]:
            break
        value /= 1024
    return f"{n} B" if unit == "B" else f"{value:.1f} {unit}"


def render(brokers: list[dict[str, Any]]) -> str:
    dirs, replicas = [], []
    for b in brokers:
        if b["error"]:
            dirs.append({"broker": b["broker_id"], "dir": "-", "state": f"NO ANSWER ({b['error']})"})
            continue
        for d in b["log_dirs"]:
            used = d["used_bytes"]
            dirs.append(
                {
                    "broker": b["broker_id"],
                    "dir": d["path"],
                    "state": "online" if d["online"] else f"OFFLINE ({d['error']})",
                    "total": human_bytes(d["total_bytes"]),
                    "free": human_bytes(d["free_bytes"]),
                    "used": human_bytes(used),
                    "replicas": len(d["replicas"]) if d["online"] else None,
                }
            )
            for r in d["replicas"]:
                replicas.append(
                    {
                        "broker": b["broker_id"],
                        "topic": r["topic"],
                        "partition": r["partition"],
                        "role": "future" if r["is_future"] else "leader" if r["is_leader"] else "follower",
                        "size": human_bytes(r["size_bytes"]),
                        "log_end_offset": r["log_end_offset"] if r["log_end_offset"] >= 0 else None,
                        "offset_lag": r["offset_lag"] if r["offset_lag"] >= 0 else None,
                        "dir": d["path"],
                    }
                )
    text = table(dirs, ["broker", "dir", "state", "total", "free", "used", "replicas"])
    return (
        text
        + "\n\n"
        + table(replicas, ["broker", "topic", "partition", "role", "size", "log_end_offset", "offset_lag", "dir"])
    )


def _log_dirs(args: argparse.Namespace) -> None:
    brokers = with_admin(args, lambda a: a.describe_log_dirs(args.broker, args.topic))
    data = [b.to_dict() for b in brokers]
    emit(data, args.format, human=render(data))


def _move_replica(args: argparse.Namespace) -> None:
    moves = {(args.broker, args.topic, p): args.dir for p in args.partition}
    results = [m.to_dict() for m in with_admin(args, lambda a: a.alter_replica_log_dirs(moves))]
    rows = [{**r, "result": r["error"] or "moving"} for r in results]
    emit(results, args.format, human=table(rows, ["broker_id", "topic", "partition", "path", "result"]))
    failed = [r for r in results if r["error"]]
    if failed:
        first = failed[0]
        where = f"{first['topic']}-{first['partition']}"
        raise CommandError(f"{len(failed)} replica(s) not moved; {where} {first['error']}")

"""``odradek topic create|list|describe|alter-config|delete|offsets|add-partitions|trim``; ``describe --all`` adds
every config with its source."""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from odradek.client.admin import AsyncAdmin, ConfigDescription, TopicInfo
from odradek.client.cli import topic_offsets
from odradek.client.cli.cluster import admin_command, with_admin
from odradek.client.cli.common import CommandError
from odradek.client.cli.config_changes import add_alter_arguments, changes, key_values
from odradek.client.cli.output import emit, table


def register(sub: argparse._SubParsersAction) -> None:
    topic = sub.add_parser("topic", help="topics").add_subparsers(
        dest="topic_command", required=True, metavar="COMMAND"
    )
    create = admin_command(topic, "create", _create, "create a topic")
    create.add_argument("name")
    create.add_argument("--partitions", "-p", type=int, default=-1, help="default: the cluster's num.partitions")
    create.add_argument("--replication-factor", "-r", type=int, default=-1, help="default: default.replication.factor")
    create.add_argument("-c", "--config", action="append", default=[], metavar="KEY=VALUE", help="topic config")
    lst = admin_command(topic, "list", _list, "list topics")
    lst.add_argument("--internal", action="store_true", help="include internal topics")
    describe = admin_command(topic, "describe", _describe, "a topic's configs and partitions")
    describe.add_argument("name")
    describe.add_argument(
        "--all",
        "-a",
        action="store_true",
        help="every config with its value and source (topic, broker: the node's config file, default: built in)",
    )
    alter = admin_command(topic, "alter-config", _alter_config, "change a topic's configs live (all or none apply)")
    alter.add_argument("name")
    add_alter_arguments(alter)
    delete = admin_command(topic, "delete", _delete, "delete a topic")
    delete.add_argument("name")
    offsets = admin_command(topic, "offsets", topic_offsets.run, "partition offsets at a time (kafka-get-offsets)")
    topic_offsets.add_arguments(offsets)
    grow = admin_command(topic, "add-partitions", _add_partitions, "grow a topic to a new partition count")
    grow.add_argument("name")
    grow.add_argument(
        "--count", "-n", type=int, required=True, help="the new total number of partitions (more than now)"
    )
    trim = admin_command(
        topic, "trim", _trim, "delete a partition's records before an offset on every replica (kafka-delete-records)"
    )
    trim.add_argument("name")
    trim.add_argument("--partition", "-p", type=int, required=True)
    trim.add_argument(
        "--offset", "-o", type=int, required=True, help="the partition's new start offset; -1: its high watermark"
    )


def _create(args: argparse.Namespace) -> None:
    configs = key_values(args.config)
    topic_id = with_admin(args, lambda a: a.create_topic(args.name, args.partitions, args.replication_factor, configs))
    emit({"name": args.name, "topic_id": topic_id}, args.format, human=f"created topic {args.name}")


def _list(args: argparse.Namespace) -> None:
    names = with_admin(args, lambda a: a.list_topics(include_internal=args.internal))
    emit(names, args.format, human="\n".join(names) if names else "(no topics)")


def partition_status(p: dict[str, Any]) -> str:
    """What needs an operator's eye in one partition, for the human table ('ok' when nothing does)."""
    marks = []
    if p.get("offline"):
        last = p.get("last_known_leader", -1)
        marks.append("OFFLINE" + (f" (last leader {last})" if last >= 0 else ""))
        if not p["isr"] and not p.get("elr") and p.get("last_known_elr"):
            elr = p["last_known_elr"]
            hint = "recovered once all are back (balanced), or leader elect --unclean"
            marks.append(f"NEEDS RECOVERY (last known ELR {elr}: {hint})")
    if p["under_replicated"]:
        marks.append("UNDER-REPLICATED")
    if p.get("adding_replicas") or p.get("removing_replicas"):
        adding = "".join(f" +{r}" for r in p.get("adding_replicas", []))
        removing = "".join(f" -{r}" for r in p.get("removing_replicas", []))
        marks.append(f"REASSIGNING{adding}{removing}")
    if p.get("uncleanable_replicas"):
        # The cleaner gave up on these replicas (broker log and log-dirs say why): they grow without compaction.
        marks.append("UNCLEANABLE on " + ",".join(map(str, p["uncleanable_replicas"])))
    return ", ".join(marks) or "ok"


def render_topic(data: dict[str, Any]) -> str:
    configs = ", ".join(f"{k}={v}" for k, v in data["configs"].items()) or "(defaults)"
    rows = [
        {
            "partition": p["partition"],
            "leader": p["leader"] if p["leader"] >= 0 else None,
            "epoch": p["leader_epoch"],
            "replicas": p["replicas"],
            "isr": p["isr"],
            "elr": p.get("elr", []),
            "log_start": p["log_start_offset"],
            "high_watermark": p["high_watermark"],
            "status": partition_status(p),
        }
        for p in data["partitions"]
    ]
    under = sum(1 for p in data["partitions"] if p["under_replicated"])
    summary = f"\n\n{under} of {len(rows)} partitions under-replicated (ISR smaller than replicas)" if under else ""
    return f"topic: {data['name']}\nconfigs: {configs}\n\n" + table(rows) + summary


def render_configs(configs: list[dict[str, Any]]) -> str:
    return table(configs, ["name", "value", "source"])


def _describe(args: argparse.Namespace) -> None:
    if not args.all:
        info = with_admin(args, lambda a: a.describe_topic(args.name))
        data = info.to_dict()
        emit(data, args.format, human=render_topic(data))
        return

    async def both(admin: AsyncAdmin) -> tuple[TopicInfo, list[ConfigDescription]]:
        return await asyncio.gather(admin.describe_topic(args.name), admin.describe_configs(args.name))

    info, configs = with_admin(args, both)
    data = info.to_dict()
    data["all_configs"] = [c.to_dict() for c in configs]
    emit(data, args.format, human=render_topic(data) + "\n\nconfigs (all):\n" + render_configs(data["all_configs"]))


def _alter_config(args: argparse.Namespace) -> None:
    c = changes(args)

    async def alter(admin: AsyncAdmin) -> dict[str, str]:
        return await admin.alter_topic_configs(args.name, *c, validate_only=args.dry_run)

    configs = with_admin(args, alter)
    data = {"name": args.name, "dry_run": args.dry_run, **c.to_dict(), "configs": configs}
    shown = ", ".join(f"{k}={v}" for k, v in configs.items()) or "(defaults)"
    verb = "valid, nothing changed" if args.dry_run else "altered"
    emit(data, args.format, human=f"{verb}: topic {args.name}\nconfigs: {shown}")


def _delete(args: argparse.Namespace) -> None:
    with_admin(args, lambda a: a.delete_topic(args.name))
    emit({"name": args.name, "deleted": True}, args.format, human=f"deleted topic {args.name}")


def _add_partitions(args: argparse.Namespace) -> None:
    with_admin(args, lambda a: a.create_partitions(args.name, args.count))
    data = {"name": args.name, "partitions": args.count}
    emit(data, args.format, human=f"topic {args.name} now has {args.count} partitions")


def _trim(args: argparse.Namespace) -> None:
    if args.offset < -1:
        raise CommandError(f"--offset must be an offset or -1 (the high watermark), not {args.offset}")
    key = (args.name, args.partition)
    low = with_admin(args, lambda a: a.delete_records({key: args.offset}))[key]
    data = {"topic": args.name, "partition": args.partition, "low_watermark": low}
    emit(data, args.format, human=f"{args.name}-{args.partition} now starts at offset {low}")

"""``odradek group list|describe|reset-offsets|delete|delete-offsets``: operating consumer groups, like Kafka's
kafka-consumer-groups. Offsets are changed only for a group without members (its members own their positions).
``group describe`` of a share group shows what ``share-group describe`` does, in the keys it has for every group."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

from odradek.client.admin import AsyncAdmin
from odradek.client.admin_groups import GroupDescription
from odradek.client.cli.cluster import admin_command, with_admin
from odradek.client.cli.common import CommandError
from odradek.client.cli.group_plan import PartitionOffsets, offset_rows, parse_topic_spec, reset_plan
from odradek.client.cli.kcat_format import parse_time
from odradek.client.cli.output import emit, table
from odradek.client.errors import ErrorCode, error_for_code
from odradek.client.structs import TopicPartition


def register(sub: argparse._SubParsersAction) -> None:
    group = sub.add_parser("group", help="consumer groups").add_subparsers(
        dest="group_command", required=True, metavar="COMMAND"
    )
    lst = admin_command(group, "list", _list, "every consumer group with its state and coordinator")
    lst.add_argument("--state", action="append", default=[], help="only groups in this state (repeatable)")
    describe = admin_command(group, "describe", _describe, "a group's members, assignment, offsets and lag")
    describe.add_argument("group")
    reset = admin_command(group, "reset-offsets", _reset, "move an inactive group's committed offsets")
    to = add_reset_arguments(reset)
    to.add_argument("--shift-by", type=int, metavar="N", help="the committed offset plus N (clamped into the log)")
    delete = admin_command(group, "delete", _delete, "delete an empty group and its committed offsets")
    delete.add_argument("group")
    delete_offsets = admin_command(group, "delete-offsets", _delete_offsets, "delete a group's offsets of topics")
    delete_offsets.add_argument("group")
    delete_offsets.add_argument("--topic", action="append", required=True, help="topic (repeatable)")


def add_reset_arguments(reset: argparse.ArgumentParser) -> argparse._MutuallyExclusiveGroup:
    """The group, topics, targets and --dry-run of a ``reset-offsets`` command (``group`` and ``share-group``);
    the targets' group, for a command to add its own."""
    reset.add_argument("group")
    reset.add_argument(
        "--topic", action="append", required=True, metavar="T[:P[,P]]", help="topic, or some of its partitions"
    )
    to = reset.add_mutually_exclusive_group(required=True)
    to.add_argument("--to-earliest", action="store_true", help="the log start")
    to.add_argument("--to-latest", action="store_true", help="the log end")
    to.add_argument("--to-offset", type=int, metavar="N", help="offset N (clamped into the log)")
    to.add_argument("--to-datetime", metavar="ISO", help="the first record at or after this time (ISO or ms)")
    reset.add_argument("--dry-run", action="store_true", help="print the plan, change nothing")
    return to


def _list(args: argparse.Namespace) -> None:
    groups = with_admin(args, lambda a: a.list_groups(args.state or None))
    rows = [
        {
            "group_id": g.group_id,
            "state": g.state,
            "protocol_type": g.protocol_type,
            "coordinator": g.coordinator,
            "group_type": g.group_type,
        }
        for g in groups
    ]
    emit(rows, args.format, human=table(rows) if rows else "(no groups)")


async def log_ranges(admin: AsyncAdmin, topics: set[str]) -> dict[TopicPartition, tuple[int, int]]:
    """(log start, log end = high watermark) of every partition of ``topics``."""
    out: dict[TopicPartition, tuple[int, int]] = {}
    for topic in sorted(topics):
        info = await admin.describe_topic(topic)
        for p in info.partitions:
            out[TopicPartition(topic, p.partition)] = (p.log_start_offset, p.high_watermark)
    return out


async def _describe_one(admin: AsyncAdmin, group: str) -> dict[str, Any]:
    [desc] = await admin.describe_groups([group])
    committed = {TopicPartition(o.topic, o.partition): o.offset for o in await admin.list_group_offsets(group)}
    if desc.state == "Dead" and not committed:
        from odradek.client.cli.share_groups import as_group_description, share_group_or_none

        share = await share_group_or_none(admin, group)  # DescribeGroups sees a share group as Dead
        if share is None:
            raise error_for_code(ErrorCode.GROUP_ID_NOT_FOUND, f"group {group} does not exist")
        return as_group_description(share)
    owners = {tp: m.member_id for m in desc.members for tp in m.assignment}
    ranges = await log_ranges(admin, {tp.topic for tp in [*committed, *owners]})
    ends = {tp: end for tp, (_, end) in ranges.items()}
    return _describe_json(desc, offset_rows([*ranges, *committed, *owners], committed, ends, owners))


def _describe_json(desc: GroupDescription, rows: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "group_id": desc.group_id,
        "state": desc.state,
        "protocol": desc.protocol,
        "generation": desc.generation,
        "coordinator": desc.coordinator,
        "group_type": desc.group_type,
        "members": [
            {
                "member_id": m.member_id,
                "instance_id": m.instance_id,
                "client_id": m.client_id,
                "host": m.host,
                "assignment": [{"topic": tp.topic, "partition": tp.partition} for tp in m.assignment],
            }
            for m in desc.members
        ],
        "offsets": rows,
    }


def _describe(args: argparse.Namespace) -> None:
    data = with_admin(args, lambda a: _describe_one(a, args.group))
    offset_columns = ["topic", "partition", "committed_offset", "log_end_offset", "lag", "member_id"]
    if data["group_type"] in ("consumer", "share"):  # KIP-848 and KIP-932: a server assignor and a group epoch
        kind = f"{data['group_type']} protocol, assignor {data['protocol'] or '-'}, group epoch {data['generation']}"
        if data["group_type"] == "share":
            offset_columns = ["topic", "partition", "start_offset", "log_end_offset", "lag"]
    else:
        kind = f"classic protocol {data['protocol'] or '-'}, generation {data['generation']}"
    head = f"group {data['group_id']}: {data['state']}, {kind}, coordinator {data['coordinator']}"
    members = [
        {**m, "assignment": [f"{a['topic']}:{a['partition']}" for a in m["assignment"]]} for m in data["members"]
    ]
    human = "\n\n".join(
        [
            head,
            table(members, ["member_id", "instance_id", "client_id", "host", "assignment"]),
            table(data["offsets"], offset_columns),
        ]
    )
    emit(data, args.format, human=human)


def reset_kind(args: argparse.Namespace) -> tuple[str, int | None]:
    if args.to_earliest:
        return "to-earliest", None
    if args.to_latest:
        return "to-latest", None
    if args.to_offset is not None:
        if args.to_offset < 0:
            raise CommandError(f"--to-offset must be >= 0, not {args.to_offset}")
        return "to-offset", args.to_offset
    if args.to_datetime is not None:
        return "to-datetime", parse_time(args.to_datetime.strip())
    return "shift-by", getattr(args, "shift_by", None)


async def _reset_async(admin: AsyncAdmin, args: argparse.Namespace, kind: str, value: int | None) -> dict[str, Any]:
    specs = [parse_topic_spec(s) for s in args.topic]
    [desc] = await admin.describe_groups([args.group])
    if desc.members:
        raise CommandError(f"group {args.group} has active members; stop them first")
    committed = {TopicPartition(o.topic, o.partition): o.offset for o in await admin.list_group_offsets(args.group)}
    plan = reset_plan(kind, value, await plan_inputs(admin, specs, kind, value, committed))
    if not args.dry_run:
        await admin.alter_group_offsets(
            args.group, {TopicPartition(r["topic"], r["partition"]): r["new_offset"] for r in plan}
        )
    return {"group_id": args.group, "dry_run": args.dry_run, "offsets": plan}


async def plan_inputs(
    admin: AsyncAdmin,
    specs: list[tuple[str, list[int] | None]],
    kind: str,
    value: int | None,
    current: Mapping[TopicPartition, int],
) -> dict[TopicPartition, PartitionOffsets]:
    """What ``reset_plan`` needs of each partition the ``--topic`` specs name, given the group's current positions
    (committed offsets, or a share group's start offsets): shared by ``group`` and ``share-group reset-offsets``."""
    ranges = await log_ranges(admin, {t for t, _ in specs})
    at_time: dict[str, dict[int, int | None]] = {}
    if kind == "to-datetime":
        assert value is not None
        for topic in {t for t, _ in specs}:
            at_time[topic] = await admin.offsets_for_time(topic, value)
    wanted: dict[TopicPartition, PartitionOffsets] = {}
    for topic, partitions in specs:
        count = sum(1 for tp in ranges if tp.topic == topic)
        for p in partitions if partitions is not None else range(count):
            if not 0 <= p < count:
                raise CommandError(f"topic {topic} has {count} partitions (0-{count - 1}): no partition {p}")
            tp = TopicPartition(topic, p)
            start, end = ranges[tp]
            if start < 0 or end < 0:
                raise CommandError(f"{topic}:{p}: its leader did not say its offsets; try again")
            wanted[tp] = PartitionOffsets(start, end, current.get(tp), at_time.get(topic, {}).get(p))
    return wanted


def _reset(args: argparse.Namespace) -> None:
    kind, value = reset_kind(args)
    data = with_admin(args, lambda a: _reset_async(a, args, kind, value))
    note = "(dry run: nothing changed)" if args.dry_run else f"reset the offsets of group {args.group}"
    emit(data, args.format, human=table(data["offsets"]) + "\n" + note)


def _delete(args: argparse.Namespace) -> None:
    results = with_admin(args, lambda a: a.delete_groups([args.group]))
    error = results[args.group]
    if error == "NON_EMPTY_GROUP":
        raise error_for_code(ErrorCode.NON_EMPTY_GROUP, f"NON_EMPTY_GROUP: group {args.group} has active members")
    if error is not None:
        raise error_for_code(ErrorCode.Value(error), f"{error}: group {args.group}")
    emit({"group_id": args.group, "deleted": True}, args.format, human=f"deleted group {args.group}")


def _delete_offsets(args: argparse.Namespace) -> None:
    results = with_admin(args, lambda a: a.delete_group_offsets(args.group, args.topic))
    rows = [{"topic": tp.topic, "partition": tp.partition, "error": e} for tp, e in sorted(results.items())]
    failed = [r for r in rows if r["error"] is not None]
    if failed:
        where = ", ".join(f"{r['topic']}:{r['partition']}" for r in failed)
        code = str(failed[0]["error"])
        raise error_for_code(ErrorCode.Value(code), f"{code}: group {args.group} kept its offsets of {where}")
    emit({"group_id": args.group, "partitions": rows}, args.format, human=table(rows) if rows else "(no offsets)")

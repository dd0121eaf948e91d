"""``odradek share-group list|describe|reset-offsets|delete-offsets|delete``: operating KIP-932 share groups, like
Kafka's kafka-share-groups. A share group's position in a partition is its start offset (records before it are
done with); only an empty group's start offsets change (the coordinator answers NON_EMPTY_GROUP otherwise)."""

from __future__ import annotations

import argparse
from typing import Any

from odradek.client.admin import AsyncAdmin
from odradek.client.admin_share_groups import ShareGroupDescription
from odradek.client.cli.cluster import admin_command, with_admin
from odradek.client.cli.common import CommandError
from odradek.client.cli.group_plan import lag, parse_topic_spec, reset_plan
from odradek.client.cli.groups import add_reset_arguments, log_ranges, plan_inputs, reset_kind
from odradek.client.cli.output import emit, table
from odradek.client.errors import ErrorCode, OdradekError, error_for_code
from odradek.client.structs import TopicPartition

SHARE = "share"
MEMBER_COLUMNS = ["member_id", "client_id", "host", "member_epoch", "subscribed_topics", "assignment"]
OFFSET_COLUMNS = ["topic", "partition", "start_offset", "log_end_offset", "lag"]


def register(sub: argparse._SubParsersAction) -> None:
    group = sub.add_parser("share-group", help="share groups (KIP-932)").add_subparsers(
        dest="share_group_command", required=True, metavar="COMMAND"
    )
    lst = admin_command(group, "list", _list, "every share group with its state and coordinator")
    lst.add_argument("--state", action="append", default=[], help="only groups in this state (repeatable)")
    describe = admin_command(group, "describe", _describe, "a share group's members, assignment and start offsets")
    describe.add_argument("group")
    reset = admin_command(group, "reset-offsets", _reset, "move an empty share group's start offsets")
    add_reset_arguments(reset)
    delete_offsets = admin_command(
        group, "delete-offsets", _delete_offsets, "forget an empty share group's state of topics"
    )
    delete_offsets.add_argument("group")
    delete_offsets.add_argument("--topic", action="append", required=True, help="topic (repeatable)")
    delete = admin_command(group, "delete", _delete, "delete an empty share group and its state")
    delete.add_argument("group")


def _list(args: argparse.Namespace) -> None:
    groups = with_admin(args, lambda a: a.list_groups(args.state or None, types=[SHARE]))
    rows = [{"group_id": g.group_id, "state": g.state, "coordinator": g.coordinator} for g in groups]
    emit(rows, args.format, human=table(rows) if rows else "(no share groups)")


# -- describe --------------------------------------------------------------------------------------------------------


async def share_group_or_none(admin: AsyncAdmin, group: str) -> dict[str, Any] | None:
    """``share-group describe``'s data, or None when no share group has that id."""
    try:
        [desc] = await admin.describe_share_groups([group])
    except OdradekError as e:
        if e.code in (ErrorCode.GROUP_ID_NOT_FOUND, ErrorCode.UNSUPPORTED_VERSION):  # none, or brokers without them
            return None
        raise
    return await _describe_data(admin, desc)


async def _describe_data(admin: AsyncAdmin, desc: ShareGroupDescription) -> dict[str, Any]:
    offsets = await admin.list_share_group_offsets(desc.group_id)
    ends = {tp: end for tp, (_, end) in (await log_ranges(admin, {o.topic for o in offsets})).items()}
    rows = []
    for o in offsets:
        end = ends.get(TopicPartition(o.topic, o.partition), -1)
        rows.append(
            {
                "topic": o.topic,
                "partition": o.partition,
                "start_offset": o.start_offset,
                "log_end_offset": end if end >= 0 else None,
                "lag": lag(o.start_offset, end),
            }
        )
    return {
        "group_id": desc.group_id,
        "state": desc.state,
        "group_type": SHARE,
        "group_epoch": desc.group_epoch,
        "assignment_epoch": desc.assignment_epoch,
        "assignor": desc.assignor,
        "coordinator": desc.coordinator,
        "members": [
            {
                "member_id": m.member_id,
                "rack_id": m.rack_id,
                "member_epoch": m.member_epoch,
                "client_id": m.client_id,
                "host": m.host,
                "subscribed_topics": m.subscribed_topics,
                "assignment": [{"topic": tp.topic, "partition": tp.partition} for tp in m.assignment],
            }
            for m in desc.members
        ],
        "offsets": rows,
    }


def as_group_description(data: dict[str, Any]) -> dict[str, Any]:
    """A share group as ``group describe`` shows every group (its JSON keys), with the share group's rows."""
    return {
        "group_id": data["group_id"],
        "state": data["state"],
        "protocol": data["assignor"],
        "generation": data["group_epoch"],
        "coordinator": data["coordinator"],
        "group_type": SHARE,
        "members": [
            {
                "member_id": m["member_id"],
                "instance_id": None,
                "client_id": m["client_id"],
                "host": m["host"],
                "assignment": m["assignment"],
            }
            for m in data["members"]
        ],
        "offsets": data["offsets"],
    }


async def _describe_async(admin: AsyncAdmin, group: str) -> dict[str, Any]:
    [desc] = await admin.describe_share_groups([group])
    return await _describe_data(admin, desc)


def _describe(args: argparse.Namespace) -> None:
    data = with_admin(args, lambda a: _describe_async(a, args.group))
    head = (
        f"share group {data['group_id']}: {data['state']}, group epoch {data['group_epoch']}, assignment epoch "
        f"{data['assignment_epoch']}, assignor {data['assignor'] or '-'}, coordinator {data['coordinator']}"
    )
    members = [
        {**m, "assignment": [f"{a['topic']}:{a['partition']}" for a in m["assignment"]]} for m in data["members"]
    ]
    human = "\n\n".join(
        [
            head,
            table(members, MEMBER_COLUMNS) if members else "(no members)",
            table(data["offsets"], OFFSET_COLUMNS) if data["offsets"] else "(no start offsets)",
        ]
    )
    emit(data, args.format, human=human)


# -- reset-offsets, delete-offsets, delete ---------------------------------------------------------------------------


async def _reset_async(admin: AsyncAdmin, args: argparse.Namespace, kind: str, value: int | None) -> dict[str, Any]:
    specs = [parse_topic_spec(s) for s in args.topic]
    [desc] = await admin.describe_share_groups([args.group])
    if args.dry_run and desc.members:  # a real reset leaves the refusal to the coordinator
        raise error_for_code(ErrorCode.NON_EMPTY_GROUP, f"share group {args.group} has active members; stop them first")
    current = {
        TopicPartition(o.topic, o.partition): o.start_offset
        for o in await admin.list_share_group_offsets(args.group)
        if o.start_offset is not None
    }
    plan = reset_plan(kind, value, await plan_inputs(admin, specs, kind, value, current))
    if not args.dry_run:
        await admin.alter_share_group_offsets(
            args.group, {TopicPartition(r["topic"], r["partition"]): r["new_offset"] for r in plan}
        )
    return {"group_id": args.group, "dry_run": args.dry_run, "offsets": plan}


def _reset(args: argparse.Namespace) -> None:
    kind, value = reset_kind(args)
    data = with_admin(args, lambda a: _reset_async(a, args, kind, value))
    note = "(dry run: nothing changed)" if args.dry_run else f"reset the start offsets of share group {args.group}"
    emit(data, args.format, human=table(data["offsets"]) + "\n" + note)


def _delete_offsets(args: argparse.Namespace) -> None:
    for topic in args.topic:
        if not topic or ":" in topic:
            raise CommandError(f"--topic {topic!r}: give a whole topic (a share group's state is deleted per topic)")
    topics = list(dict.fromkeys(args.topic))
    with_admin(args, lambda a: a.delete_share_group_offsets(args.group, topics))
    human = f"deleted the start offsets of share group {args.group} for {', '.join(topics)}"
    emit({"group_id": args.group, "topics": topics}, args.format, human=human)


async def _delete_async(admin: AsyncAdmin, group: str) -> str | None:
    await admin.describe_share_groups([group])  # GROUP_ID_NOT_FOUND for a group of another type
    return (await admin.delete_groups([group]))[group]


def _delete(args: argparse.Namespace) -> None:
    error = with_admin(args, lambda a: _delete_async(a, args.group))
    if error == "NON_EMPTY_GROUP":
        raise error_for_code(ErrorCode.NON_EMPTY_GROUP, f"share group {args.group} has active members")
    if error is not None:
        raise error_for_code(ErrorCode.Value(error), f"{error}: share group {args.group}")
    emit({"group_id": args.group, "deleted": True}, args.format, human=f"deleted share group {args.group}")

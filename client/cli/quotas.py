"""``odradek quota set|describe|delete``: client quotas stored in the metadata log (Kafka's ``kafka-configs
--entity-type users/clients``), and the effective quota of a client with the entity it comes from."""

from __future__ import annotations

import argparse
from typing import Any

from odradek.client.admin import AsyncAdmin
from odradek.client.cli.cluster import admin_command, with_admin
from odradek.client.cli.common import CommandError
from odradek.client.cli.config_changes import key_values
from odradek.client.cli.output import emit, table
from odradek.client.quotas import (
    ANONYMOUS,
    CONSUMER_BYTE_RATE,
    PRODUCER_BYTE_RATE,
    QUOTA_KEYS,
    REQUEST_PERCENTAGE,
    QuotaEntity,
    entity,
)

KEY_OPTIONS = {
    PRODUCER_BYTE_RATE: "--producer-byte-rate",
    CONSUMER_BYTE_RATE: "--consumer-byte-rate",
    REQUEST_PERCENTAGE: "--request-percentage",
}
ANONYMOUS_NOTE = (
    f"odradek has no authentication yet: every client connects as the user {ANONYMOUS}, so user quotas apply to "
    f"{ANONYMOUS} (or come from the default user)"
)


def register(sub: argparse._SubParsersAction) -> None:
    quota = sub.add_parser("quota", help="client quotas (byte rates, request time)").add_subparsers(
        dest="quota_command", required=True, metavar="COMMAND"
    )
    set_ = admin_command(quota, "set", _set, "set quotas of a user, a client id, both, or their defaults")
    set_.epilog = ANONYMOUS_NOTE
    _entity_arguments(set_)
    set_.add_argument(KEY_OPTIONS[PRODUCER_BYTE_RATE], metavar="BYTES_PER_S", help="produce bytes per second")
    set_.add_argument(KEY_OPTIONS[CONSUMER_BYTE_RATE], metavar="BYTES_PER_S", help="fetch bytes per second")
    set_.add_argument(
        KEY_OPTIONS[REQUEST_PERCENTAGE], metavar="PERCENT", help="request handling time, percent of one core"
    )
    set_.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="any quota key (as stored)")
    set_.add_argument("--dry-run", action="store_true", help="validate, store nothing")
    describe = admin_command(
        quota,
        "describe",
        _describe,
        "the effective quota of a client and the entity it comes from; without --user or --client-id, every stored "
        "quota entity",
    )
    describe.epilog = (
        f"Without --user the user is {ANONYMOUS}, as {ANONYMOUS_NOTE[0].lower()}{ANONYMOUS_NOTE[1:]}. Without "
        "--client-id, the client is one whose client id has no quota of its own."
    )
    describe.add_argument("--user", help=f"the client's user (default: {ANONYMOUS} when --client-id is given)")
    describe.add_argument("--client-id", help="the client's client.id")
    delete = admin_command(
        quota, "delete", _delete, "remove quotas of an entity: the keys given, or all of them when none is"
    )
    _entity_arguments(delete)
    for key, option in KEY_OPTIONS.items():
        delete.add_argument(option, action="append_const", const=key, dest="keys", help=f"remove {key}")


def _entity_arguments(parser: argparse.ArgumentParser) -> None:
    user = parser.add_mutually_exclusive_group()
    user.add_argument("--user", help="a user (every client of it shares the quota)")
    user.add_argument("--user-default", action="store_true", help="each user without a quota of its own")
    client = parser.add_mutually_exclusive_group()
    client.add_argument("--client-id", help="a client id")
    client.add_argument("--client-id-default", action="store_true", help="each client id without a quota of its own")


def _entity(args: argparse.Namespace) -> QuotaEntity:
    """The entity the options name, unchecked: the server refuses an empty one (the same typed error as here)."""
    return QuotaEntity(args.user, args.user_default, args.client_id, args.client_id_default)


def number(value: float) -> int | float:
    """A quota value for output: whole values without a fraction."""
    return int(value) if value.is_integer() else value


def entity_data(e: QuotaEntity) -> dict[str, Any]:
    return {"entity": e.to_dict(), "path": e.path()}


def _set(args: argparse.Namespace) -> None:
    e = _entity(args)
    values: dict[str, str] = {key: getattr(args, key) for key in QUOTA_KEYS if getattr(args, key) is not None}
    for key, value in key_values(args.set).items():
        if key in values:
            raise CommandError(f"quota {key} is given twice")
        values[key] = value
    if not values:
        raise CommandError(f"nothing to set: give {', '.join(KEY_OPTIONS.values())} or --set KEY=VALUE")
    with_admin(args, lambda a: a.alter_client_quotas(e, set=values, validate_only=args.dry_run))
    shown = {k: _shown(v) for k, v in values.items()}
    data = {**entity_data(e), "set": shown, "dry_run": args.dry_run}
    verb = "valid, nothing stored" if args.dry_run else "set"
    emit(data, args.format, human=f"{verb}: {e.path()} " + " ".join(f"{k}={v}" for k, v in shown.items()))


def _shown(value: str) -> int | float | str:
    try:
        return number(float(value))
    except ValueError:
        return value


def _delete(args: argparse.Namespace) -> None:
    e = _entity(args)
    keys = list(dict.fromkeys(args.keys or QUOTA_KEYS))
    with_admin(args, lambda a: a.alter_client_quotas(e, remove=keys))
    emit({**entity_data(e), "removed": keys}, args.format, human=f"removed from {e.path()}: {', '.join(keys)}")


def _describe(args: argparse.Namespace) -> None:
    if args.user is None and args.client_id is None:
        _describe_stored(args)
        return
    user = ANONYMOUS if args.user is None else args.user
    client_id = "" if args.client_id is None else args.client_id
    entity(user, args.client_id)  # the same check as a stored entity's: no empty name

    async def effective(admin: AsyncAdmin) -> dict[str, tuple[float, QuotaEntity]]:
        return await admin.effective_client_quotas(user, client_id)

    found = with_admin(args, effective)
    quotas: dict[str, dict[str, Any] | None] = {}
    for key in QUOTA_KEYS:
        if key in found:
            value, source = found[key]
            quotas[key] = {"value": number(value), **entity_data(source)}
        else:
            quotas[key] = None
    data = {"user": user, "client_id": args.client_id, "quotas": quotas}
    rows = [
        {"key": k, "value": "unlimited" if q is None else q["value"], "from": None if q is None else q["path"]}
        for k, q in quotas.items()
    ]
    who = f"user {user}" + (f", client id {args.client_id}" if args.client_id is not None else "")
    emit(data, args.format, human=f"effective quotas of {who}:\n" + table(rows))


def _describe_stored(args: argparse.Namespace) -> None:
    stored = with_admin(args, lambda a: a.describe_client_quotas())
    data = [{**entity_data(e), "quotas": {k: number(v) for k, v in values.items()}} for e, values in stored]
    rows = [{"entity": d["path"], **d["quotas"]} for d in data]
    emit(data, args.format, human=table(rows, ["entity", *QUOTA_KEYS]) if rows else "(no quotas)")

"""``odradek user create|delete|list``: SCRAM users stored in the metadata log (rpk's ``security user``, Kafka's
``kafka-configs --alter --add-config SCRAM-SHA-256=[...]``). The password is salted by the client and never sent
nor printed; ``create`` of an existing user replaces its credential for that mechanism."""

from __future__ import annotations

import argparse
from typing import Any

from odradek.client.admin import AsyncAdmin
from odradek.client.admin_security import DEFAULT_ITERATIONS, SCRAM_MECHANISMS
from odradek.client.cli.cluster import admin_command, with_admin
from odradek.client.cli.common import CommandError
from odradek.client.cli.output import emit, table


def register(sub: argparse._SubParsersAction) -> None:
    user = sub.add_parser("user", help="SCRAM users (SASL credentials)").add_subparsers(
        dest="user_command", required=True, metavar="COMMAND"
    )
    create = admin_command(user, "create", _create, "create a user, or replace its password for the mechanism")
    create.add_argument("name", metavar="NAME")
    create.add_argument("--password", "-p", required=True, help="the user's password (salted here, never sent)")
    create.add_argument("--mechanism", default="SCRAM-SHA-256", help=f"{' or '.join(SCRAM_MECHANISMS)}")
    create.add_argument(
        "--iterations", type=int, default=DEFAULT_ITERATIONS, help="PBKDF2 iterations, 4096..16384 (default 4096)"
    )
    delete = admin_command(user, "delete", _delete, "delete a user's credential, or all of its credentials")
    delete.add_argument("name", metavar="NAME")
    delete.add_argument("--mechanism", help="only this mechanism's credential (default: every one the user has)")
    admin_command(user, "list", _list, "the users with credentials, their mechanisms and iteration counts")


def _create(args: argparse.Namespace) -> None:
    mechanism = args.mechanism.strip().upper()
    with_admin(args, lambda a: a.upsert_user_scram_credential(args.name, args.password, mechanism, args.iterations))
    data = {"user": args.name, "mechanism": mechanism, "iterations": args.iterations}
    emit(data, args.format, human=f"created user {args.name} ({mechanism}, {args.iterations} iterations)")


def _delete(args: argparse.Namespace) -> None:
    async def delete(admin: AsyncAdmin) -> list[str]:
        if args.mechanism is not None:
            mechanisms = [args.mechanism.strip().upper()]
        else:  # one request per mechanism: a request naming one user twice is refused
            found = await admin.describe_user_scram_credentials([args.name])
            mechanisms = [c.mechanism for c in found.get(args.name, [])]
        for mechanism in mechanisms:
            await admin.delete_user_scram_credential(args.name, mechanism)
        return mechanisms

    if not args.name:
        raise CommandError("the user name must not be empty")
    deleted = with_admin(args, delete)
    emit({"user": args.name, "deleted": deleted}, args.format, human=f"deleted user {args.name} ({', '.join(deleted)})")


def _list(args: argparse.Namespace) -> None:
    found = with_admin(args, lambda a: a.describe_user_scram_credentials())
    data: list[dict[str, Any]] = [
        {"user": user, "credentials": [{"mechanism": c.mechanism, "iterations": c.iterations} for c in creds]}
        for user, creds in sorted(found.items())
    ]
    rows = [
        {"user": d["user"], "mechanisms": [f"{c['mechanism']}({c['iterations']})" for c in d["credentials"]]}
        for d in data
    ]
    emit(data, args.format, human=table(rows) if rows else "(no users)")

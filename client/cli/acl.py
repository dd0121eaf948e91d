"""``odradek acl add|list|remove``: ACLs stored in the metadata log, with rpk's options (``rpk security acl``).

Options combine as a product: every principal x every resource x every operation is one binding (``add``) or one
filter (``list``, ``remove``). A filter option left out matches anything; ``remove`` without any filter option is
refused unless ``--all`` is given, so that a forgotten option cannot wipe every ACL."""

from __future__ import annotations

import argparse
import itertools
from typing import Any

from odradek.client.acls import CLUSTER_NAME, AclBinding, AclBindingFilter, canonical, check_binding
from odradek.client.admin import AsyncAdmin
from odradek.client.cli.cluster import admin_command, with_admin
from odradek.client.cli.common import CommandError
from odradek.client.cli.output import emit, table

COLUMNS = ["principal", "host", "resource_type", "resource_name", "pattern_type", "operation", "permission"]


def register(sub: argparse._SubParsersAction) -> None:
    acl = sub.add_parser("acl", help="access control lists").add_subparsers(
        dest="acl_command", required=True, metavar="COMMAND"
    )
    add = admin_command(acl, "add", _add, "allow or deny principals operations on resources")
    _arguments(add, filtering=False)
    list_ = admin_command(acl, "list", _list, "the ACLs matching the filters given (all without any)")
    _arguments(list_, filtering=True)
    remove = admin_command(acl, "remove", _remove, "remove the ACLs matching the filters given")
    _arguments(remove, filtering=True)
    remove.add_argument("--all", action="store_true", help="remove every ACL (only without filter options)")


def _arguments(parser: argparse.ArgumentParser, filtering: bool) -> None:
    allow, deny = ("ACLs allowing it", "ACLs denying it") if filtering else ("allow it", "deny it")
    parser.add_argument("--allow-principal", action="append", default=[], metavar="User:NAME", help=allow)
    parser.add_argument("--deny-principal", action="append", default=[], metavar="User:NAME", help=deny)
    if filtering:
        parser.add_argument(
            "--principal", action="append", default=[], metavar="User:NAME", help="ACLs of it, allowing or denying"
        )
    parser.add_argument(
        "--operation",
        action="append",
        default=[],
        metavar="OP[,OP]",
        help="read, write, create, delete, alter, "
        "describe, describe-configs, alter-configs, idempotent-write, cluster-action, all",
    )
    parser.add_argument("--topic", action="append", default=[], metavar="NAME", help="a topic (* for every topic)")
    parser.add_argument("--group", action="append", default=[], metavar="NAME", help="a consumer group (* for all)")
    parser.add_argument(
        "--transactional-id", action="append", default=[], metavar="ID", help="a transactional id (* for all)"
    )
    parser.add_argument(
        "--subject", action="append", default=[], metavar="NAME", help="a schema registry subject (* for all)"
    )
    parser.add_argument("--cluster", action="store_true", help="the cluster")
    choices = ["any", "match", "literal", "prefixed"] if filtering else ["literal", "prefixed"]
    parser.add_argument(
        "--resource-pattern-type",
        type=str.lower,
        choices=choices,
        default=None if filtering else "literal",
        help="how resource names match: "
        + (
            "any (literal and prefixed ACLs named exactly so), match (every ACL that applies to the named resource)"
            ", literal, prefixed (default any)"
            if filtering
            else "literal (the name, or * for all), prefixed (names starting with it) (default literal)"
        ),
    )
    parser.add_argument("--host", default=None if filtering else "*", help="an IP address, or * (default *)")


def _resources(args: argparse.Namespace) -> list[tuple[str, str]]:
    out = [("TOPIC", t) for t in args.topic] + [("GROUP", g) for g in args.group]
    out += [("TRANSACTIONAL_ID", x) for x in args.transactional_id] + [("SUBJECT", s) for s in args.subject]
    if args.cluster:
        out.append(("CLUSTER", CLUSTER_NAME))
    return out


def _operations(args: argparse.Namespace) -> list[str]:
    names = [op for value in args.operation for op in value.split(",") if op.strip()]
    if any(not value.strip() for value in args.operation):
        raise CommandError("--operation needs a value")
    return list(dict.fromkeys(canonical("operation", op, allow_any=False) for op in names))


def _principals(args: argparse.Namespace) -> list[tuple[str | None, str]]:
    """(permission or None for either, principal)."""
    out: list[tuple[str | None, str]] = [("ALLOW", p) for p in args.allow_principal]
    out += [("DENY", p) for p in args.deny_principal]
    out += [(None, p) for p in getattr(args, "principal", [])]
    return out


def binding_data(b: AclBinding) -> dict[str, Any]:
    return {c: getattr(b, c) for c in COLUMNS}


def _show(bindings: list[AclBinding], fmt: str, key: str | None, empty: str) -> None:
    """``{key: [binding...]}`` (a bare list without ``key``) as JSON; a table, or ``empty``, for people."""
    data = [binding_data(b) for b in bindings]
    human = (f"{key}:\n" if key else "") + table(data, COLUMNS) if data else empty
    emit({key: data} if key else data, fmt, human=human)


def _add(args: argparse.Namespace) -> None:
    principals, resources, operations = _principals(args), _resources(args), _operations(args)
    if not principals:
        raise CommandError("give --allow-principal User:NAME or --deny-principal User:NAME")
    if not resources:
        raise CommandError("give a resource: --topic, --group, --transactional-id, --subject or --cluster")
    if not operations:
        raise CommandError("give --operation OP[,OP]")
    bindings = [
        AclBinding(
            resource_type=rtype,
            resource_name=name,
            pattern_type=args.resource_pattern_type,
            principal=principal,
            host=args.host,
            operation=op,
            permission=permission or "ALLOW",
        )
        for (permission, principal), (rtype, name), op in itertools.product(principals, resources, operations)
    ]
    for b in bindings:  # before sending: none of them is stored when one is wrong
        check_binding(b)
    with_admin(args, lambda a: a.create_acls(bindings))
    _show(bindings, args.format, "created", "")


def _filters(args: argparse.Namespace) -> list[AclBindingFilter]:
    """One filter per combination of the filter options given (a single match-everything filter for none)."""
    principals: list[tuple[str | None, str | None]] = [*_principals(args)] or [(None, None)]
    resources: list[tuple[str | None, str | None]] = [*_resources(args)] or [(None, None)]
    operations: list[str | None] = [*_operations(args)] or [None]
    return [
        AclBindingFilter(
            resource_type=rtype,
            resource_name=name,
            pattern_type=args.resource_pattern_type,
            principal=principal,
            host=args.host,
            operation=op,
            permission=permission,
        )
        for (permission, principal), (rtype, name), op in itertools.product(principals, resources, operations)
    ]


def _list(args: argparse.Namespace) -> None:
    filters = _filters(args)

    async def describe(admin: AsyncAdmin) -> list[AclBinding]:
        found: dict[AclBinding, None] = {}
        for f in filters:
            found.update(dict.fromkeys(await admin.describe_acls(f)))
        return list(found)

    _show(with_admin(args, describe), args.format, None, "(no ACLs)")


def _remove(args: argparse.Namespace) -> None:
    filters = _filters(args)
    if args.all and not all(f.is_match_all for f in filters):
        raise CommandError("--all removes every ACL: give it without filter options")
    if not args.all and all(f.is_match_all for f in filters):
        raise CommandError("give at least one filter option, or --all to remove every ACL")
    removed = with_admin(args, lambda a: a.delete_acls(filters))
    _show(removed, args.format, "removed", "no ACL matched: nothing removed")

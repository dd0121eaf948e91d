"""The options of ``topic alter-config`` and ``cluster alter-config`` (Kafka's incremental operations) and the
changes they give."""

from __future__ import annotations

import argparse
from typing import NamedTuple

from odradek.client.cli.common import CommandError


class Changes(NamedTuple):
    set: dict[str, str]
    delete: list[str]
    append: dict[str, str]
    subtract: dict[str, str]

    def to_dict(self) -> dict[str, object]:
        return self._asdict()


def add_alter_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="set a config")
    parser.add_argument(
        "--delete", action="append", default=[], metavar="KEY", help="remove the value set: the default applies"
    )
    parser.add_argument(
        "--append", action="append", default=[], metavar="KEY=VALUE", help="add to a list config (cleanup.policy)"
    )
    parser.add_argument("--subtract", action="append", default=[], metavar="KEY=VALUE", help="remove from a list")
    parser.add_argument("--dry-run", action="store_true", help="validate the changes, change nothing")


def key_values(pairs: list[str]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        key, eq, value = pair.partition("=")
        if not eq or not key:
            raise CommandError(f"config {pair!r} is not key=value")
        out[key] = value
    return out


def changes(args: argparse.Namespace) -> Changes:
    out = Changes(
        key_values(args.set), list(dict.fromkeys(args.delete)), key_values(args.append), key_values(args.subtract)
    )
    if not any(out):
        raise CommandError("nothing to alter: give --set, --delete, --append or --subtract")
    return out

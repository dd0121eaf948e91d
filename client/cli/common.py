"""Pieces every command module shares: the common options and the user-facing error type."""

from __future__ import annotations

import argparse
from collections.abc import Callable


class CommandError(Exception):
    """A failure worded for the user; printed as one line."""


def format_options() -> argparse.ArgumentParser:
    """``--format`` accepted after any command (``odradek topic list --format json``)."""
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument("--format", choices=("table", "json"), default="table", help="output format")
    return parent


def add_command(
    sub: argparse._SubParsersAction, name: str, handler: Callable[[argparse.Namespace], int | None], help_text: str
) -> argparse.ArgumentParser:
    parser = sub.add_parser(name, help=help_text, description=help_text, parents=[format_options()])
    parser.set_defaults(handler=handler)
    return parser

"""Pieces every command module shares: the common options and the user-facing error type."""

from __future__ import annotations

import argparse
import platform
from collections.abc import Callable


class CommandError(Exception):
    """A failure worded for the user; printed as one line."""


def format_options() -> argparse.ArgumentParser:
    """``--format`` and ``--debug`` accepted after any command (``odradek topic list --format json``)."""
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument("--format", choices=("table", "json"), default="table", help="output format")
    # SUPPRESS: when absent here, the value ``odradek --debug ...`` set before the command stays.
    parent.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="print tracebacks")
    return parent


def add_command(
    sub: argparse._SubParsersAction, name: str, handler: Callable[[argparse.Namespace], int | None], help_text: str
) -> argparse.ArgumentParser:
    parser = sub.add_parser(name, help=help_text, description=help_text, parents=[format_options()])
    parser.set_defaults(handler=handler)
    return parser


def version_text() -> str:
    """``odradek --version``: the package version, which record codec this process uses, and the Python."""
    from importlib.metadata import PackageNotFoundError, version

    import crc32c

    try:
        odradek_version = version("odradek")
    except PackageNotFoundError:
        odradek_version = "unknown (not installed)"
    from odradek.client.record import codec

    crc = "hardware" if getattr(crc32c, "hardware_based", False) else "software"
    if codec.IMPLEMENTATION == "native":
        record_codec = f"native (crc32c: native, {crc})"
    else:
        record_codec = f"pure Python ({codec.REASON}; crc32c: native, {crc})"
    return (
        f"odradek {odradek_version}\n"
        f"record codec: {record_codec}\n"
        f"python: {platform.python_implementation()} {platform.python_version()}"
    )

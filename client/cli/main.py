"""``odradek``: the command-line interface (rpk-like). Each command group lives in its own module.

Every command prints human output by default and takes ``--format json``. On failure it prints one line to
stderr, ``error: ...`` (or ``{"error": {"code": ..., "message": ...}}`` with ``--format json``), and exits 1;
``--debug`` adds the traceback. An exception nobody anticipated is reported the same way, never as a raw traceback.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import traceback
from collections.abc import Callable, Sequence
from types import ModuleType

from odradek.client.cli.common import CommandError, version_text
from odradek.client.errors import OdradekError

Handler = Callable[[argparse.Namespace], int | None]

# The command module that registers each command, in the order ``odradek --help`` lists them. Running a command
# imports its module alone: the others pull in clients, TLS and deployment code it does not use, and every node
# and CLI call would pay for them at start. Help, and a word that is no command, register every module.
COMMANDS: dict[str, str] = {
    "server": "server",
    "storage": "server",
    "dev": "dev",
    "cluster": "cluster",
    "broker": "cluster",
    "topic": "topic",
    "group": "groups",
    "share-group": "share_groups",
    "transaction": "transactions",
    "quota": "quotas",
    "user": "user",
    "acl": "acl",
    "schema": "schema",
    "leader": "leader",
    "partition": "partition",
    "produce": "data",
    "consume": "data",
    "perf": "perf",
    "chaos": "chaos",
    "deploy": "deploy",
    "demo": "demo",
}


def command_modules(argv: Sequence[str] | None = None) -> list[ModuleType]:
    """The modules whose commands ``argv`` may need: the named command's alone, none for ``--version``, else all."""
    args = sys.argv[1:] if argv is None else argv
    word = _command_word(args)
    if word is None and "--version" in args and not {"-h", "--help"} & set(args):
        return []
    names = [COMMANDS[word]] if word in COMMANDS else list(dict.fromkeys(COMMANDS.values()))
    return [importlib.import_module(f"odradek.client.cli.{name}") for name in names]


def _command_word(argv: Sequence[str]) -> str | None:
    """The command ``argv`` names: its first word, after ``--debug`` (None for --help, --version or no command)."""
    for arg in argv:
        if arg != "--debug":
            return None if arg.startswith("-") else arg
    return None


class _Version(argparse.Action):
    """Like argparse's ``version`` action, but keeps the text's line breaks and builds it only when asked."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS, **kwargs) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        print(version_text())
        parser.exit()


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser for ``argv`` (default: this process's arguments), with the commands ``command_modules`` picks."""
    parser = argparse.ArgumentParser(prog="odradek", description="odradek: a replicated commit log")
    parser.add_argument("--version", action=_Version, help="print the version, record codec and Python, then exit")
    parser.add_argument("--debug", action="store_true", help="print the traceback of a failure")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in command_modules(argv):
        module.register(sub)
    return parser


def error_code(e: BaseException) -> str:
    """The ``code`` of a JSON error: the wire error name for odradek errors, a fixed name per local failure."""
    ConfigError, StorageFormatError, LocalClusterError = _local_errors()
    if isinstance(e, OdradekError):
        return e.code_name
    if isinstance(e, ConfigError):
        return "INVALID_CONFIG"
    if isinstance(e, StorageFormatError):
        return "STORAGE_FORMAT_ERROR"
    if isinstance(e, (CommandError, LocalClusterError)):
        return "INVALID_REQUEST"
    if isinstance(e, OSError):
        return "OS_ERROR"
    return "INTERNAL_ERROR"


def error_message(e: BaseException) -> str:
    """One line: the first line of the message, with the error's name when the message does not say it."""
    ConfigError, StorageFormatError, LocalClusterError = _local_errors()
    expected = isinstance(e, (CommandError, LocalClusterError, ConfigError, StorageFormatError, OdradekError, OSError))
    text = str(e).splitlines()[0] if str(e).strip() else ""
    if isinstance(e, OdradekError) and e.code_name not in text:
        return f"{e.code_name}: {text}" if text else e.code_name
    if not expected or not text:
        return f"{type(e).__name__}: {text}" if text else type(e).__name__
    return text


def _local_errors() -> tuple[type[Exception], type[Exception], type[Exception]]:
    """The error types of local failures (imported on the error path only: their modules are heavy)."""
    from odradek.broker.config import ConfigError
    from odradek.broker.storage import StorageFormatError
    from odradek.deploy.local import LocalClusterError

    return ConfigError, StorageFormatError, LocalClusterError


def report_error(e: BaseException, fmt: str, debug: bool) -> None:
    if debug:
        traceback.print_exception(e, file=sys.stderr)
    if fmt == "json":
        print(json.dumps({"error": {"code": error_code(e), "message": error_message(e)}}), file=sys.stderr)
    else:
        print(f"error: {error_message(e)}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    handler: Handler = args.handler
    try:
        return handler(args) or 0
    except KeyboardInterrupt:
        return 130
    except SystemExit:
        raise
    except Exception as e:
        report_error(e, getattr(args, "format", "table"), getattr(args, "debug", False))
        return 1


if __name__ == "__main__":
    sys.exit(main())

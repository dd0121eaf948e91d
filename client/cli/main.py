"""``odradek``: the command-line interface (rpk-like). Each command group lives in its own module.

Every command prints human output by default and takes ``--format json``; on failure it prints one line,
``error: ...``, to stderr and exits non-zero.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from odradek.broker.config import ConfigError
from odradek.broker.storage import StorageFormatError
from odradek.client.cli.common import CommandError
from odradek.client.errors import OdradekError

Handler = Callable[[argparse.Namespace], int | None]


def _command_modules():
    from odradek.client.cli import chaos, cluster, data, demo, deploy, dev, leader, partition, perf, server, topic

    return [server, dev, cluster, topic, leader, partition, data, perf, chaos, deploy, demo]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="odradek", description="odradek: a replicated commit log")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in _command_modules():
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handler: Handler = args.handler
    try:
        return handler(args) or 0
    except (CommandError, ConfigError, StorageFormatError, OdradekError, OSError) as e:
        message = str(e).splitlines()[0] if str(e) else type(e).__name__
        if isinstance(e, OdradekError) and e.code_name not in message:
            message = f"{e.code_name}: {message}"
        print(f"error: {message}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())

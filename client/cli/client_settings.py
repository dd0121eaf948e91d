"""How the CLI connects to a secured cluster: the client's security settings under Kafka's names.

Settings come, each later source overriding the earlier, from the saved profile's ``client_config``, a JSON client
config file (``--client-config FILE``, e.g. the ``admin-client.json`` that ``odradek dev up --security`` writes) and
``-X key=value`` options. ``-X`` also keeps its older meaning: a value without ``=`` is the cluster's addresses
(``-X host:port,...``), as a host:port never holds ``=``. Keys other than the security ones and
``bootstrap.servers`` are refused, so a typo fails with one ``error:`` line instead of being ignored.
"""

from __future__ import annotations

import argparse
import difflib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from odradek.client.cli.common import CommandError

SECURITY_KEYS = (
    "security.protocol",
    "ssl.ca.location",
    "ssl.certificate.location",
    "ssl.key.location",
    "sasl.mechanism",
    "sasl.username",
    "sasl.password",
)
SERVERS_KEY = "bootstrap.servers"
KNOWN_KEYS = (SERVERS_KEY, *SECURITY_KEYS)


class _ServersOrSetting(argparse.Action):
    """``-X``: ``key=value`` adds a client setting; anything else is ``--bootstrap-servers``."""

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        value = str(values)
        if "=" in value:
            namespace.client_settings = [*(getattr(namespace, "client_settings", None) or []), value]
        else:
            namespace.bootstrap_servers = value


def add_connection_options(parser: argparse.ArgumentParser, servers_help: str) -> None:
    """``--bootstrap-servers``, ``-X`` (addresses or ``key=value``) and ``--client-config FILE``."""
    parser.add_argument("--bootstrap-servers", help=servers_help)
    parser.add_argument(
        "-X",
        action=_ServersOrSetting,
        dest="client_settings",
        default=[],
        metavar="HOST:PORT,... | KEY=VALUE",
        help=f"the cluster's addresses, or a client setting (repeatable): {', '.join(KNOWN_KEYS)}",
    )
    parser.add_argument(
        "--client-config",
        metavar="FILE",
        help="a JSON client config (bootstrap.servers and security keys, e.g. admin-client.json)",
    )


def check_keys(settings: Mapping[str, Any], where: str) -> None:
    """Refuse a key the CLI does not pass on, naming the closest known one."""
    for key in settings:
        if key not in KNOWN_KEYS:
            close = difflib.get_close_matches(str(key), KNOWN_KEYS, n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            raise CommandError(f"unknown client setting '{key}' in {where}{hint}; known: {', '.join(KNOWN_KEYS)}")


def parse_pairs(pairs: Sequence[str]) -> dict[str, str]:
    """``-X key=value`` options as a dict (the last of a repeated key wins)."""
    out: dict[str, str] = {}
    for pair in pairs:
        key, _, value = pair.partition("=")
        out[key.strip()] = value
    check_keys(out, "-X")
    return out


def load_client_config(path: str | Path) -> dict[str, Any]:
    """A ``--client-config`` file: one JSON object of known keys."""
    try:
        data = json.loads(Path(path).read_text())
    except OSError as e:
        raise CommandError(f"--client-config {path}: {e.strerror or e}") from None
    except json.JSONDecodeError as e:
        raise CommandError(f"--client-config {path} is not valid JSON: {e}") from None
    if not isinstance(data, dict):
        raise CommandError(f"--client-config {path} must hold a JSON object of client settings")
    check_keys(data, str(path))
    return data


def merged_settings(
    profile: Mapping[str, Any], file_config: Mapping[str, Any] | None, pairs: Mapping[str, str]
) -> dict[str, Any]:
    """The settings in force: the profile's security keys, then the file's, then ``-X``'s (``bootstrap.servers``
    only from the last two: the profile names its cluster's addresses apart)."""
    saved = dict(profile.get("client_config") or {})
    check_keys(saved, "the saved profile")
    return {**security_only(saved), **(file_config or {}), **pairs}


def settings_from_args(args: argparse.Namespace, profile: Mapping[str, Any]) -> dict[str, Any]:
    """What ``args`` and the profile ask for (see ``merged_settings``)."""
    path = getattr(args, "client_config", None)
    file_config = load_client_config(path) if path else None
    return merged_settings(profile, file_config, parse_pairs(getattr(args, "client_settings", None) or []))


def security_only(settings: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in settings.items() if k in SECURITY_KEYS}

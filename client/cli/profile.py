"""Where the CLI finds a cluster: ``--bootstrap-servers`` (or ``-X host:port,...``), else ``bootstrap.servers`` of
``-X``/``--client-config``, else ``$ODRADEK_BOOTSTRAP_SERVERS``, else the profile saved by ``odradek dev up`` in
``$ODRADEK_HOME/profile.json`` (default ``~/.odradek``). How it connects (TLS, SASL) is ``client_settings``'s."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

from odradek.client.cli.client_settings import security_only, settings_from_args
from odradek.client.cli.common import CommandError


def home() -> Path:
    return Path(os.environ.get("ODRADEK_HOME") or Path.home() / ".odradek")


def profile_path() -> Path:
    return home() / "profile.json"


def save_profile(profile: dict[str, Any]) -> None:
    path = profile_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.touch(mode=0o600)  # it may hold a password (a secured dev cluster's client_config)
    tmp.write_text(json.dumps(profile, indent=2))
    os.replace(tmp, path)


def clear_profile(dev_dir: Path) -> bool:
    """Forget the saved profile if it points at ``dev_dir`` (purged: later commands must not dial its dead
    addresses). Returns whether it was removed."""
    profile = load_profile()
    saved = profile.get("dev_dir")
    if saved is None or Path(saved).resolve() != dev_dir.resolve():
        return False
    profile_path().unlink(missing_ok=True)
    return True


def load_profile() -> dict[str, Any]:
    path = profile_path()
    if not path.exists():
        return {}
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise CommandError(f"profile {path} is not valid JSON: {e}") from None


def admin_servers(explicit: str | None) -> str:
    """Addresses for admin requests: any node will do, so brokers and controllers both."""
    if explicit:
        return explicit
    if os.environ.get("ODRADEK_BOOTSTRAP_SERVERS"):
        return os.environ["ODRADEK_BOOTSTRAP_SERVERS"]
    profile = load_profile()
    servers = [s for s in (profile.get("bootstrap_servers", ""), profile.get("controllers", "")) if s]
    if not servers:
        raise CommandError(
            "no cluster: pass --bootstrap-servers, set ODRADEK_BOOTSTRAP_SERVERS, or run 'odradek dev up'"
        )
    return ",".join(servers)


def bootstrap_servers(explicit: str | None) -> str:
    """Broker addresses for producers and consumers."""
    if explicit:
        return explicit
    if os.environ.get("ODRADEK_BOOTSTRAP_SERVERS"):
        return os.environ["ODRADEK_BOOTSTRAP_SERVERS"]
    servers = load_profile().get("bootstrap_servers")
    if not servers:
        raise CommandError(
            "no cluster: pass --bootstrap-servers, set ODRADEK_BOOTSTRAP_SERVERS, or run 'odradek dev up'"
        )
    return servers


def _settings(args: argparse.Namespace) -> tuple[str | None, dict[str, Any]]:
    """The explicit addresses (command line or client config file) and the security settings in force."""
    settings = settings_from_args(args, load_profile())
    servers = getattr(args, "bootstrap_servers", None) or settings.get("bootstrap.servers")
    if isinstance(servers, list | tuple):
        servers = ",".join(str(s) for s in servers)
    return servers, security_only(settings)


def admin_config(args: argparse.Namespace, **extra: Any) -> dict[str, Any]:
    """An admin client's config: any node's address and the security settings."""
    servers, security = _settings(args)
    return {"bootstrap.servers": admin_servers(servers), **security, **extra}


def client_config(args: argparse.Namespace, **extra: Any) -> dict[str, Any]:
    """A producer's or consumer's config: the brokers' addresses and the security settings."""
    servers, security = _settings(args)
    return {"bootstrap.servers": bootstrap_servers(servers), **security, **extra}

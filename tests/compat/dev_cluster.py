"""The `odradek dev` calls the compat runners make: a cluster in a directory of their own, with an ODRADEK_HOME (its
profile) of their own, so that nothing of the user's is touched."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any


class DevCli:
    def __init__(self, odradek: str, directory: Path, home: Path) -> None:
        self.odradek = odradek
        self.dir = directory
        self.env = {**os.environ, "ODRADEK_HOME": str(home)}

    def cli(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        return subprocess.run(
            [self.odradek, "dev", *args, "--dir", str(self.dir)],
            env=self.env,
            capture_output=True,
            text=True,
            check=check,
        )

    def dev_up(self, *shape: str, config: Mapping[str, str]) -> dict[str, Any]:
        """``dev up`` with ``shape`` (its node options) and ``config`` set on every node; its JSON answer."""
        sets = [arg for key, value in config.items() for arg in ("--set", f"{key}={value}")]
        result = self.cli("up", *shape, "--format", "json", "--timeout", "120", *sets)
        return json.loads(result.stdout)

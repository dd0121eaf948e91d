"""Running the real ``odradek`` command against a test cluster, with its own home (no profile of the machine's)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

from odradek.deploy.local import DevCluster


def odradek(cluster: DevCluster, *args: str, timeout: float = 90) -> subprocess.CompletedProcess:
    """``odradek ARGS -X <the cluster's admin servers>``, its output captured."""
    env = {**os.environ, "ODRADEK_HOME": str(cluster.directory / "home")}
    env.pop("ODRADEK_BOOTSTRAP_SERVERS", None)
    return subprocess.run(
        [sys.executable, "-m", "odradek.client.cli.main", *args, "-X", cluster.admin_servers],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )


def as_json(cluster: DevCluster, *args: str) -> Any:
    """The parsed ``--format json`` output of a command that must succeed."""
    result = odradek(cluster, *args, "--format", "json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)

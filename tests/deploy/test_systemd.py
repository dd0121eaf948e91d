"""The systemd units: what a node needs to run and stop cleanly under systemd, and what ``systemd-analyze verify``
thinks of them where it is installed."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from odradek.deploy.process import MALLOC_ENV
from odradek.deploy.vms import parse_unit

UNITS = Path(__file__).resolve().parents[2] / "deploy" / "systemd"
ROLES = ("controller", "broker", "combined")
EXEC_START = "/opt/odradek/venv/bin/odradek server --config /etc/odradek/node.toml"
CONTROLLED_SHUTDOWN_S = 10  # the broker's controlled shutdown timeout on SIGTERM (broker/node.py Node.stop)


@pytest.mark.parametrize("role", ROLES)
def test_unit_runs_the_node_as_odradek_with_the_malloc_tuning(role: str) -> None:
    unit = parse_unit(UNITS / f"odradek-{role}.service")
    service = unit["Service"]
    assert service["ExecStart"] == [EXEC_START]
    assert service["User"] == ["odradek"] and service["Group"] == ["odradek"]
    # The same values `odradek server` would set by re-executing itself: systemd sets them up front instead.
    assert service["Environment"] == [f"{key}={value}" for key, value in MALLOC_ENV.items()]
    assert service["Restart"] == ["on-failure"]
    assert int(service["RestartSec"][0]) > 0
    assert service["KillSignal"] == ["SIGTERM"]
    assert int(service["TimeoutStopSec"][0]) >= 3 * CONTROLLED_SHUTDOWN_S
    assert int(service["LimitNOFILE"][0]) >= (100000 if role != "controller" else 65536)
    assert service["NoNewPrivileges"] == ["true"]
    assert service["ProtectSystem"] == ["full"]
    assert service["ReadWritePaths"] == ["/var/lib/odradek"]
    assert unit["Unit"]["After"] == ["network-online.target"]
    assert unit["Unit"]["Wants"] == ["network-online.target"]
    assert unit["Install"]["WantedBy"] == ["multi-user.target"]


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed")
@pytest.mark.parametrize("role", ROLES)
def test_systemd_analyze_verify_accepts_the_unit(role: str, tmp_path: Path) -> None:
    # verify insists that ExecStart's program exists: point it at a stand-in, leaving everything else as shipped.
    program = tmp_path / "odradek"
    program.write_text("#!/bin/sh\n")
    program.chmod(0o755)
    name = f"odradek-{role}.service"
    text = (UNITS / name).read_text()
    assert EXEC_START in text
    (tmp_path / name).write_text(text.replace("/opt/odradek/venv/bin/odradek", str(program)))
    result = subprocess.run(
        ["systemd-analyze", "verify", "--man=no", str(tmp_path / name)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "SYSTEMD_LOG_COLOR": "0"},
    )
    assert result.returncode == 0, result.stderr
    assert name not in result.stdout + result.stderr  # warnings (unknown keys, bad values) name the unit

"""deploy/install.sh: valid bash, clean under shellcheck where installed, and it refuses bad arguments before it
touches the machine."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "deploy" / "install.sh"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, timeout=60)


def test_install_script_parses() -> None:
    result = run("bash", "-n", str(SCRIPT))
    assert result.returncode == 0, result.stderr


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="shellcheck is not installed")
def test_install_script_passes_shellcheck() -> None:
    result = run("shellcheck", str(SCRIPT))
    assert result.returncode == 0, result.stdout


def test_install_script_prints_usage() -> None:
    assert run("bash", str(SCRIPT), "--help").stdout.startswith("usage: install.sh ROLE WHEEL")
    result = run("bash", str(SCRIPT))
    assert result.returncode == 2
    assert result.stderr.startswith("usage: install.sh ROLE WHEEL")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("leader", "x.whl"), "error: unknown role 'leader' (controller, broker or combined)\n"),
        (("broker", "/nonexistent/odradek.whl"), "error: wheel /nonexistent/odradek.whl not found\n"),
    ],
)
def test_install_script_rejects_bad_arguments(args: tuple[str, str], message: str) -> None:
    result = run("bash", str(SCRIPT), *args)
    assert result.returncode == 1
    assert result.stderr == message


def test_every_role_has_a_unit() -> None:
    for role in ("controller", "broker", "combined"):
        assert (SCRIPT.parent / "systemd" / f"odradek-{role}.service").is_file()

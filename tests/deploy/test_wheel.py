"""The wheel a VM installs holds everything a node needs: the config templates, the ``odradek`` command and the
generated protobuf modules. Built from a copy of the sources, so setuptools' build/ never lands in the repo."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_wheel_ships_templates_entry_point_and_generated_code(tmp_path: Path) -> None:
    source = tmp_path / "src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for folder in set(setuptools["package-dir"].values()):
        shutil.copytree(ROOT / folder, source / folder, ignore=ignore)
    result = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(tmp_path), "."],
        cwd=source,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    (wheel,) = tmp_path.glob("odradek-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        entry_points = next(archive.read(n).decode() for n in names if n.endswith(".dist-info/entry_points.txt"))
    templates = {"controller.toml", "broker.toml", "combined.toml", "cluster.example.toml"}
    assert {f"odradek/deploy/config/{t}" for t in templates} <= names
    assert "odradek/deploy/cluster.py" in names
    units = {f"odradek/deploy/systemd/odradek-{role}.service" for role in ("controller", "broker", "combined")}
    assert units | {"odradek/deploy/install.sh", "odradek/deploy/vms.py"} <= names
    assert "odradek = odradek.client.cli.main:main" in entry_points
    # pip registers the pytest plugin (the odradek_cluster fixture) for every project that installs odradek.
    assert "[pytest11]\nodradek.deploy.pytest_plugin = odradek.deploy.pytest_plugin" in entry_points
    assert {"odradek/deploy/local.py", "odradek/deploy/process.py", "odradek/deploy/pytest_plugin.py"} <= names
    for proto in ("common", "broker", "admin", "controller", "raft", "metadata"):
        assert {f"odradek/proto/{proto}_pb2.py", f"odradek/proto/{proto}_pb2_grpc.py"} <= names
    assert not any(n.startswith(("deploy/", "tests/")) for n in names)  # nothing outside the odradek namespace

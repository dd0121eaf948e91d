"""Every Python folder ships as a subpackage of ``odradek`` (pyproject's explicit package list); the project installs
and runs where no C compiler is present, and from a plain install without extras."""

import json
import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_every_package_folder_is_listed_in_pyproject() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    package_dir = config["package-dir"]
    found = set()
    for package, folder in package_dir.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            relative = init.parent.relative_to(ROOT / folder)
            found.add(".".join([package, *relative.parts]))
    assert found == listed


def test_nothing_generic_lands_at_the_top_level() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert all(name.startswith("odradek.") for name in config["packages"])


def test_the_pytest_plugin_is_an_entry_point_and_this_project_uses_it() -> None:
    """Installing odradek gives applications the ``odradek_cluster`` fixture; the entry point carries the module's
    name so that this project's ``-p`` and the entry point do not register it twice. ``examples/`` runs too."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    plugin = "odradek.deploy.pytest_plugin"
    assert config["project"]["entry-points"]["pytest11"] == {plugin: plugin}
    assert (ROOT / "deploy" / "pytest_plugin.py").exists()
    pytest_config = config["tool"]["pytest"]["ini_options"]
    assert f"-p {plugin}" in pytest_config["addopts"]
    assert "examples" in pytest_config["testpaths"]


def test_without_a_c_compiler_the_install_succeeds_and_runs_the_reference_codec(tmp_path: Path) -> None:
    """The native record codec is optional: pip builds the wheel where the compiler fails (here every compiler
    name on PATH fails, as on a machine with none), leaves the extension out with a warning, and the installed
    odradek reports the pure-Python codec, with one log line saying why."""
    source = tmp_path / "src"
    source.mkdir()
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy(ROOT / name, source / name)
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    for folder in sorted(set(config["package-dir"].values())):
        shutil.copytree(ROOT / folder, source / folder, ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    no_compiler = tmp_path / "no-compiler"
    no_compiler.mkdir()
    for name in ("gcc", "cc", "c++", "g++", "clang", "x86_64-linux-gnu-gcc"):
        (no_compiler / name).write_text('#!/bin/sh\necho "$0: no C compiler on this machine" >&2\nexit 127\n')
        (no_compiler / name).chmod(0o755)
    env = {**os.environ, "PATH": f"{no_compiler}{os.pathsep}{os.environ['PATH']}"}
    for variable in ("CC", "CXX", "LDSHARED", "CFLAGS"):
        env.pop(variable, None)
    build = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-v",
            "--no-cache-dir",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(tmp_path),
            str(source),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert build.returncode == 0, build.stdout + build.stderr
    assert "no C compiler on this machine" in build.stdout + build.stderr  # the build tried, and went on without
    (wheel,) = tmp_path.glob("odradek-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        assert "odradek/client/record/reference.py" in names
        assert not [n for n in names if "_native" in n and n.endswith(".so")]
        archive.extractall(tmp_path / "site")
    # The unpacked wheel comes first on the import path, ahead of this checkout's editable install.
    run_env = {**env, "PYTHONPATH": str(tmp_path / "site")}
    run_env.pop("ODRADEK_NO_EXTENSIONS", None)
    script = (
        "import logging; logging.basicConfig(level=logging.INFO, format='%(name)s: %(message)s')\n"
        "import odradek.client\n"
        f"assert odradek.client.__file__.startswith({str(tmp_path / 'site')!r}), odradek.client.__file__\n"
        "from odradek.client.cli.common import version_text\n"
        "print(version_text())\n"
    )
    ran = subprocess.run([sys.executable, "-c", script], env=run_env, capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr
    assert "record codec: pure Python (native module not built" in ran.stdout
    notes = [line for line in ran.stderr.splitlines() if "native accelerator is not available" in line]
    assert len(notes) == 1, ran.stderr


def build_wheel(destination: Path) -> Path:
    """The project's wheel, built from a copy of the sources (setuptools' build/ never lands in the checkout)."""
    source = destination / "src"
    source.mkdir()
    for name in ("pyproject.toml", "setup.py", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, source / name)
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    for folder in sorted(set(config["package-dir"].values())):
        shutil.copytree(ROOT / folder, source / folder, ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(destination), "."],
        cwd=source,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert build.returncode == 0, build.stdout + build.stderr
    (wheel,) = destination.glob("odradek-*.whl")
    return wheel


def test_the_wheel_ships_the_license_and_the_type_marker(tmp_path: Path) -> None:
    wheel = build_wheel(tmp_path)
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        metadata = archive.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
        (license_file,) = [n for n in names if n.endswith(".dist-info/licenses/LICENSE")]
        assert archive.read(license_file) == (ROOT / "LICENSE").read_bytes()
    assert "odradek/client/py.typed" in names
    assert "odradek/broker/kafka/schemas/ConsumerGroupHeartbeatRequest.json" in names  # the listener imports it
    assert "License-Expression: Apache-2.0" in metadata
    assert "Apache License" in (ROOT / "LICENSE").read_text() and "Version 2.0" in (ROOT / "LICENSE").read_text()


@pytest.mark.integration
@pytest.mark.timeout(900)
def test_a_plain_install_without_extras_runs_the_cli_and_a_dev_cluster(tmp_path: Path) -> None:
    """As a new user: the wheel into a fresh virtual environment with no extras (its dependencies from the package
    index), then ``odradek --version``, a 1+1 ``dev up``, produce and consume through the CLI, and ``dev down``."""
    wheel = build_wheel(tmp_path)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV", "ODRADEK_"))}
    env |= {"ODRADEK_HOME": str(tmp_path / "home"), "PATH": f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"}
    if "ODRADEK_PORT_RANGE" in os.environ:  # keep to this test worker's ports
        env["ODRADEK_PORT_RANGE"] = os.environ["ODRADEK_PORT_RANGE"]
    install = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check", str(wheel)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert install.returncode == 0, install.stdout + install.stderr
    installed = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "list", "--format=freeze"], env=env, capture_output=True, text=True
    ).stdout.lower()
    assert "odradek==" in installed
    for extra_only in ("pyspark", "pyarrow", "ansible-core", "pytest", "confluent-kafka"):
        assert f"{extra_only}==" not in installed, f"{extra_only} came with a plain install"

    def odradek(*args: str, stdin: str | None = None, timeout: float = 120) -> str:
        ran = subprocess.run(
            [str(venv / "bin" / "odradek"), *args],
            env=env,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        assert ran.returncode == 0, f"odradek {' '.join(args)}: {ran.stdout}{ran.stderr}"
        assert "Traceback" not in ran.stderr, ran.stderr
        return ran.stdout

    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert odradek("--version").splitlines()[0] == f"odradek {version}"
    cluster_dir = tmp_path / "cluster"
    try:
        odradek("dev", "up", "--controllers", "1", "--brokers", "1", "--dir", str(cluster_dir), timeout=180)
        odradek("topic", "create", "plain", "--partitions", "1", "--replication-factor", "1")
        odradek("produce", "plain", "--key-separator", ":", "--acks", "all", stdin="k1:first\nk2:second\n")
        lines = odradek("consume", "plain", "--num", "2", "--format", "json", "--timeout-ms", "30000").splitlines()
        records = [json.loads(line) for line in lines]
        assert [(r["key"], r["value"], r["offset"]) for r in records] == [("k1", "first", 0), ("k2", "second", 1)]
    finally:
        down = subprocess.run(
            [str(venv / "bin" / "odradek"), "dev", "down", "--purge"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert down.returncode == 0, down.stdout + down.stderr
    assert not cluster_dir.exists()

"""Every Python folder ships as a subpackage of ``odradek`` (pyproject's explicit package list)."""

import tomllib
from pathlib import Path

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

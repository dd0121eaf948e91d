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

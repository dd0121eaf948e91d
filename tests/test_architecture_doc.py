"""docs/architecture.md's layout table names every package of the distribution, and nothing that is not one: a new
package, or a removed one, must be described there."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def packages_on_disk() -> dict[str, str]:
    """Each package's dotted name, from the folders ``[tool.setuptools.package-dir]`` maps, to its folder."""
    mapping = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    found: dict[str, str] = {}
    for package, folder in mapping.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            relative = init.parent.relative_to(ROOT / folder)
            dotted = ".".join([package, *relative.parts])
            found[dotted] = (Path(folder) / relative).as_posix().rstrip("/.") + "/"
    return found


def layout_rows() -> dict[str, str]:
    """The layout table's package column, to its folder column."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    table = text.split("## Layout", 1)[1].split("\n\n", 2)[1]
    rows = {}
    for line in table.splitlines():
        m = re.match(r"\| `([^`]+)` \| `(odradek[^`]*)` \|", line)
        if m:
            rows[m.group(2)] = m.group(1)
    return rows


def test_the_layout_table_names_every_package_and_its_folder() -> None:
    on_disk, documented = packages_on_disk(), layout_rows()
    assert len(on_disk) > 20  # the walk found the packages
    assert set(on_disk) - set(documented) == set(), "packages missing from docs/architecture.md's layout table"
    assert set(documented) - set(on_disk) == set(), "docs/architecture.md names packages that do not exist"
    assert {p: documented[p] for p in on_disk} == on_disk

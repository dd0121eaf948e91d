"""The API coverage table of docs/kafka-protocol.md says exactly what the listener serves: each row's odradek
versions are the registry's, "not served" rows are not registered, "(SASL)" rows only on a SASL listener, and every
registered API has a row."""

from __future__ import annotations

import re
from pathlib import Path
from unittest import mock

from odradek.broker.kafka.catalog import kafka_apis

DOC = Path(__file__).resolve().parents[2] / "docs" / "kafka-protocol.md"
ROW = re.compile(r"^\| (\d+) \| ([^|]+) \| [^|]+ \| [^|]+ \| ([^|]+) \|")
SERVED = re.compile(r"^(\d+)(?:-(\d+))?( \(SASL\))?$")


def table() -> dict[int, tuple[str, str]]:
    """Key -> (API name, odradek cell) for each row of the API coverage table."""
    text = DOC.read_text(encoding="utf-8")
    section = text[text.index("## API coverage") :]
    rows = {}
    for line in section.splitlines():
        if m := ROW.match(line):
            rows[int(m.group(1))] = (m.group(2).strip(), m.group(3).strip())
    assert rows, "no API coverage table found"
    return rows


def served(sasl: bool) -> dict[int, tuple[int, int]]:
    return {s.key: (s.min_version, s.max_version) for s in kafka_apis(mock.MagicMock(), sasl=sasl).specs()}


def test_every_row_says_what_the_registry_serves() -> None:
    plain, with_sasl = served(False), served(True)
    wrong = []
    for key, (name, cell) in table().items():
        if cell == "not served":
            if key in with_sasl:
                wrong.append(f"{key} {name}: served {with_sasl[key]}, the table says not served")
            continue
        m = SERVED.match(cell)
        assert m is not None, f"row {key} {name}: odradek cell {cell!r} is neither 'not served' nor 'a-b'"
        low, high = int(m.group(1)), int(m.group(2) or m.group(1))
        sasl_only = m.group(3) is not None
        if with_sasl.get(key) != (low, high):
            wrong.append(f"{key} {name}: the table says {low}-{high}, the registry serves {with_sasl.get(key)}")
        if sasl_only == (key in plain):
            wrong.append(f"{key} {name}: SASL-only is {sasl_only} in the table, not in the registry")
    assert not wrong, "\n".join(wrong)


def test_every_served_api_has_a_row() -> None:
    rows = table()
    missing = sorted(set(served(True)) - set(rows))
    assert not missing, f"served but not in the table: {missing}"

"""Rendering command results: human tables by default, ``--format json`` for scripts (a stable interface)."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from typing import Any, TextIO


def to_json(data: Any) -> str:
    return json.dumps(data, indent=2, sort_keys=False, default=str)


def table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str] | None = None) -> str:
    """A plain aligned table; lists render comma-joined, None as '-'."""
    if not rows:
        return "(none)"
    columns = list(columns or rows[0].keys())

    def cell(v: Any) -> str:
        if v is None:
            return "-"
        if isinstance(v, (list, tuple)):
            return ",".join(str(x) for x in v)
        if isinstance(v, bool):
            return "yes" if v else "no"
        return str(v)

    body = [[cell(r.get(c)) for c in columns] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in body)) for i, c in enumerate(columns)]
    lines = ["  ".join(c.upper().ljust(w) for c, w in zip(columns, widths)).rstrip()]
    lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip() for row in body]
    return "\n".join(lines)


def emit(data: Any, fmt: str, human: str | None = None, out: TextIO | None = None) -> None:
    """Print ``data`` as JSON, or ``human`` (defaulting to a table of ``data``) for people. ``out`` defaults to the
    current ``sys.stdout`` (looked up per call, so redirections such as pytest's capture apply)."""
    out = out or sys.stdout
    if fmt == "json":
        out.write(to_json(data) + "\n")
    elif human is not None:
        out.write(human + ("\n" if not human.endswith("\n") else ""))
    elif isinstance(data, list):
        out.write(table(data) + "\n")
    elif isinstance(data, Mapping):
        out.write("\n".join(f"{k}: {v}" for k, v in data.items()) + "\n")
    else:
        out.write(f"{data}\n")

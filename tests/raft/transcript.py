"""The file format of data-driven transcripts, shared by the runners of the sans-I/O cores (Raft, groups,
transactions): a file of commands, each followed by the output it must produce.

A transcript (``testdata/*.txt`` beside each runner) reads top to bottom::

    # Prose lines start with '#'; they and blank lines are kept as they are when expectations are rewritten.
    > command word key=value ...
    the output the command must print
    ...

A line starting with '> ' is a command; the lines right after it, up to the first blank line, are its expected
output. A runner (a ``Commands`` subclass) holds the core between the commands of one file and answers each
command with the lines it printed. ``check`` compares them with the file and fails with one readable diff per
block that differs; with ``REWRITE=1`` in the environment it writes the actual outputs back instead (review the
change with ``git diff``).
"""

from __future__ import annotations

import difflib
import os
import shlex
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest


@dataclass
class Block:
    """One command, where it stands in its file, and the output the file expects of it."""

    line: int
    command: str
    expected: list[str]


@dataclass
class Scenario:
    """A parsed file: prose lines and blocks in file order, so a rewrite keeps everything but the outputs."""

    path: Path
    parts: list[str | Block] = field(default_factory=list)

    @property
    def blocks(self) -> list[Block]:
        return [p for p in self.parts if isinstance(p, Block)]

    def render(self, outputs: dict[int, list[str]]) -> str:
        lines: list[str] = []
        for part in self.parts:
            if isinstance(part, Block):
                lines.append(f"> {part.command}")
                lines.extend(outputs.get(part.line, part.expected))
            else:
                lines.append(part)
        return "\n".join(lines) + "\n"


def parse(path: Path) -> Scenario:
    scenario = Scenario(path)
    block: Block | None = None
    for number, text in enumerate(path.read_text().splitlines(), 1):
        if text.startswith("> "):
            block = Block(number, text[2:].strip(), [])
            scenario.parts.append(block)
        elif block is not None and text.strip():
            block.expected.append(text)
        else:
            block = None
            scenario.parts.append(text)
    return scenario


class Commands:
    """Runs one command line: ``name word... key=value...`` calls ``cmd_name(*words, **keys)`` (dashes in names and
    keys become underscores); a command that prints nothing shows ``(nothing)``."""

    def run(self, command: str) -> list[str]:
        name, *words = shlex.split(command)
        args = [w for w in words if "=" not in w]
        kw = dict(w.split("=", 1) for w in words if "=" in w)
        handler: Callable[..., list[str]] | None = getattr(self, "cmd_" + name.replace("-", "_"), None)
        if handler is None:
            raise ValueError(f"unknown command {name!r}")
        return handler(*args, **{k.replace("-", "_"): v for k, v in kw.items()}) or ["(nothing)"]


def run_file(path: Path, runner: Commands, *, rewrite: bool = False) -> list[str]:
    """Replay a transcript; returns one readable diff per block whose output differs (after rewriting, none)."""
    scenario = parse(path)
    outputs: dict[int, list[str]] = {}
    failures = []
    for block in scenario.blocks:
        try:
            actual = runner.run(block.command)
        except Exception as e:  # a broken command is reported where it stands, like a mismatch
            actual = [f"error: {type(e).__name__}: {e}"]
        outputs[block.line] = actual
        if actual != block.expected and not rewrite:
            diff = difflib.unified_diff(block.expected, actual, "expected", "actual", lineterm="", n=2)
            failures.append(f"{path.name}:{block.line}: > {block.command}\n" + "\n".join(list(diff)[2:]))
    if rewrite:
        path.write_text(scenario.render(outputs))
    return failures


def rewriting() -> bool:
    return os.environ.get("REWRITE", "") not in ("", "0")


def check(path: Path, runner: Commands) -> None:
    """The test of one transcript: fail with every differing block, or rewrite the file under ``REWRITE=1``."""
    failures = run_file(path, runner, rewrite=rewriting())
    if failures:
        pytest.fail("\n\n".join(failures) + "\n\n(REWRITE=1 regenerates the expected output)", pytrace=False)


def files(directory: Path) -> Iterator[Path]:
    yield from sorted(directory.glob("*.txt"))


def replay_all(directory: Path, runner: Callable[[], Commands]) -> Callable[[Path], None]:
    """A test replaying each transcript of ``directory`` on a fresh runner: one case per file, named by its stem.
    A test module binds it to a ``test_`` name."""

    @pytest.mark.parametrize("path", list(files(directory)), ids=lambda p: p.stem)
    def test_transcript(path: Path) -> None:
        check(path, runner())

    return test_transcript


def fields(**values: object) -> str:
    """``key=value`` for each value that is set (None, '' and () are left out), in the order given."""
    return " ".join(f"{k.replace('_', '-')}={v}" for k, v in values.items() if v not in (None, "", ()))

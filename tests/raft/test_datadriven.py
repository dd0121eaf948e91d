"""Replays the Raft scenario files in testdata/ (format and commands: datadriven.py).

`REWRITE=1 python -m pytest tests/raft/test_datadriven.py` writes the actual outputs into the files; review the
change with `git diff` before committing it.
"""

from __future__ import annotations

from pathlib import Path

from datadriven import Runner, run_file
from transcript import files, replay_all

TESTDATA = Path(__file__).resolve().parent / "testdata"

test_scenario = replay_all(TESTDATA, Runner)


def test_the_required_cases_have_scenarios() -> None:
    assert {"election", "pre_vote", "check_quorum", "snapshot"} <= {p.stem for p in files(TESTDATA)}


SMALL = """\
# A lone voter elects itself.
> cluster voters=1
1: unattached epoch=0 leader=- voted=- hw=0 log=[0,0) snapshot=0@0
1 ready @t0:
  role: unattached epoch=0 leader=-

> tick 1 until=leader
{leader}
"""


def test_a_mismatch_shows_where_and_a_readable_diff(tmp_path: Path) -> None:
    path = tmp_path / "small.txt"
    path.write_text(SMALL.format(leader="1 is leader after 99 ticks"))
    [failure] = run_file(path)
    assert failure.startswith("small.txt:7: > tick 1 until=leader\n")
    assert "\n-1 is leader after 99 ticks" in failure
    assert "\n+  event: became leader of epoch 1 (votes from 1)" in failure


def test_rewrite_fills_in_the_outputs_and_keeps_the_prose(tmp_path: Path) -> None:
    path = tmp_path / "small.txt"
    path.write_text(SMALL.format(leader="stale"))
    assert run_file(path, rewrite=True) == []
    text = path.read_text()
    assert text.startswith("# A lone voter elects itself.\n> cluster voters=1\n")
    assert "stale" not in text and "  event: became leader of epoch 1 (votes from 1)\n" in text
    assert run_file(path) == []


def test_an_unknown_command_is_reported_at_its_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.txt"
    path.write_text("> cluster voters=1\n(nothing)\n\n> campaign 1\n(nothing)\n")
    failures = run_file(path)
    assert len(failures) == 2 and failures[1].startswith("bad.txt:4: > campaign 1")
    assert "+error: ValueError: unknown command 'campaign'" in failures[1]

"""Replays the share group transcripts in testdata/ (format: tests/raft/transcript.py; commands: datadriven_share.py).

`REWRITE=1 python -m pytest tests/share/test_share_transcripts.py` writes the actual outputs into the files; review
the change with `git diff` before committing it.
"""

from __future__ import annotations

from pathlib import Path

from datadriven_share import Runner
from transcript import files, replay_all

TESTDATA = Path(__file__).resolve().parent / "testdata"

test_transcript = replay_all(TESTDATA, Runner)


def test_there_are_transcripts_of_each_core() -> None:
    names = {p.stem for p in files(TESTDATA)}
    assert len(names) >= 10
    assert {"acquire_and_acknowledge", "durable_state", "group_membership"} <= names

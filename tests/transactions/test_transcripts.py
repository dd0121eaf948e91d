"""Replays the transaction coordinator transcripts in testdata/ (format: tests/raft/transcript.py; commands:
datadriven_txn.py).

`REWRITE=1 python -m pytest tests/transactions/test_transcripts.py` writes the actual outputs into the files; review the
change with `git diff` before committing it.
"""

from __future__ import annotations

from pathlib import Path

from datadriven_txn import Runner
from transcript import replay_all

test_transcript = replay_all(Path(__file__).resolve().parent / "testdata", Runner)

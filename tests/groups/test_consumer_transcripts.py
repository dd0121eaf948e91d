"""Replays the KIP-848 consumer group transcripts in testdata_consumer/ (format: tests/raft/transcript.py; commands:
datadriven_consumer_groups.py).

`REWRITE=1 python -m pytest tests/groups/test_consumer_transcripts.py` writes the actual outputs into the files;
review the change with `git diff` before committing it.
"""

from __future__ import annotations

from pathlib import Path

from datadriven_consumer_groups import Runner
from transcript import replay_all

test_transcript = replay_all(Path(__file__).resolve().parent / "testdata_consumer", Runner)

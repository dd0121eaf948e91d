"""Make the runner beside this file and the transcript format of tests/raft (transcript.py) importable: pytest runs
with importlib mode."""

import sys
from pathlib import Path

_HERE = Path(__file__).resolve().parent
for _path in (str(_HERE), str(_HERE.parent / "raft")):
    if _path not in sys.path:
        sys.path.insert(0, _path)

"""Make the runner beside this file, the transcript format of tests/raft (transcript.py), and the offsets partition
and metadata image helpers of tests/groups and tests/controller importable: pytest runs with importlib mode."""

import sys
from pathlib import Path

_HERE = Path(__file__).resolve().parent
for _path in (str(_HERE), str(_HERE.parent / "raft"), str(_HERE.parent / "groups"), str(_HERE.parent / "controller")):
    if _path not in sys.path:
        sys.path.insert(0, _path)

"""Make the broker test harness (replicas.py, beside this file) and the metadata image builders of tests/controller
importable (pytest runs with importlib mode): broker tests decide ISR changes and elections with the real
controller code over images built the same way."""

import sys
from pathlib import Path

_HERE = Path(__file__).resolve().parent
for _path in (str(_HERE), str(_HERE.parent / "controller")):
    if _path not in sys.path:
        sys.path.insert(0, _path)

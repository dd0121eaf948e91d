"""Make the metadata image builders of tests/controller importable: pytest runs with importlib mode."""

import sys
from pathlib import Path

_CONTROLLER = str(Path(__file__).resolve().parent.parent / "controller")
if _CONTROLLER not in sys.path:
    sys.path.insert(0, _CONTROLLER)

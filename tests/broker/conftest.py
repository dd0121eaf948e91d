"""Make the metadata image builders of tests/controller importable: broker tests decide ISR changes and elections
with the real controller code over images built the same way."""

import sys
from pathlib import Path

_CONTROLLER_TESTS = str(Path(__file__).resolve().parent.parent / "controller")
if _CONTROLLER_TESTS not in sys.path:
    sys.path.insert(0, _CONTROLLER_TESTS)

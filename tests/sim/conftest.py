"""Make the simulation modules (beside this file) and the image builders of tests/controller importable: pytest runs
with importlib mode."""

import sys
from pathlib import Path

_HERE = Path(__file__).resolve().parent
for _path in (_HERE, _HERE.parent / "controller"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

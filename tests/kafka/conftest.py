"""Make the Kafka listener tests' harness (kafka_harness.py, beside this file) importable (pytest runs with
importlib mode)."""

import sys
from pathlib import Path

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

#!/usr/bin/env python3
"""The foundation benchmark (issue 2): partition-log append/read against raw os.write/os.pread, then record
encode/decode against kafka-python. One line per figure, each a ratio to a baseline measured in the same run.

Run with ``make bench`` or ``python bench/log_bench.py``.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import record_bench
import storage_bench

if __name__ == "__main__":
    storage_bench.main()
    record_bench.main()

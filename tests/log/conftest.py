import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from odradek.broker.log.config import LogConfig
from odradek.broker.log.log import Log

# Test modules import the batch builder (log_batches.py) by name; importlib mode does not add this folder itself.
sys.path.insert(0, str(Path(__file__).parent))


class Clock:
    """A settable wall clock in ms, for segment.ms, flush.ms and retention."""

    def __init__(self, now: int = 1_700_000_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def small_config() -> LogConfig:
    """Small segments and a dense sparse index, so tests cross many segments and index entries."""
    return LogConfig(segment_bytes=8192, index_interval_bytes=256, segment_index_bytes=4096)


@pytest.fixture
def open_log() -> Iterator[Callable[..., Log]]:
    """Log.open, closing every log the test opened when it ends (segment fds are not closed by the GC)."""
    opened: list[Log] = []

    def _open(*args: Any, **kwargs: Any) -> Log:
        log = Log.open(*args, **kwargs)
        opened.append(log)
        return log

    yield _open
    for log in opened:
        log.close()

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

# Tests import the fake cluster (fake_broker.py) by name; importlib mode does not add this folder itself.
sys.path.insert(0, str(Path(__file__).parent))

from fake_broker import FakeCluster


@pytest.fixture
def cluster() -> Iterator[FakeCluster]:
    """Three fake brokers; topic "t" has 3 partitions led by brokers 0, 1, 2."""
    c = FakeCluster(3)
    c.create_topic("t", 3)
    yield c
    c.stop()

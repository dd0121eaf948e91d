"""The partition log that holds the controllers' metadata log (``__cluster_metadata-0``): the Raft layer's log store
(``controller/quorum/log_store.py``) keeps its entries in it, opened by the node's wiring with this config."""

from __future__ import annotations

from pathlib import Path

from odradek.broker.log.config import LogConfig
from odradek.broker.log.log import Log

# Metadata entries are small and few; small segments let snapshots reclaim space soon.
METADATA_LOG_CONFIG = LogConfig(segment_bytes=16 * 1024 * 1024, retention_ms=-1, retention_bytes=-1)


def open_metadata_log(directory: Path) -> Log:
    return Log.open(directory, METADATA_LOG_CONFIG)

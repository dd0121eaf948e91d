"""The metadata log on disk: Raft entries stored in the foundation's partition log (``__cluster_metadata-0``).

Each Raft entry is one v2 record batch holding one record: the batch's base offset is the entry's offset, its
partition-leader-epoch field the entry's Raft epoch, and the control flag marks entries the Raft layer writes
itself. So the metadata log gets the same CRCs, recovery and torn-tail handling as every partition.
"""

from __future__ import annotations

import time
from pathlib import Path

from odradek.broker.log.config import LogConfig
from odradek.broker.log.log import Log
from odradek.client.record.batch import read_batches
from odradek.client.record.builder import BatchBuilder
from odradek.controller.raft.log import Entry

# Metadata entries are small and few; small segments let snapshots reclaim space soon.
METADATA_LOG_CONFIG = LogConfig(segment_bytes=16 * 1024 * 1024, retention_ms=-1, retention_bytes=-1)


def encode_entry(entry: Entry) -> bytes:
    builder = BatchBuilder(base_offset=entry.offset, partition_leader_epoch=entry.epoch, is_control=entry.control)
    builder.append(time.time_ns() // 1_000_000, None, entry.data)
    return builder.build()


class MetadataLogStore:
    def __init__(self, directory: Path) -> None:
        self.log = Log.open(directory, METADATA_LOG_CONFIG)
        if self.log.failure is not None:
            raise self.log.failure

    def load(self, start_offset: int) -> list[Entry]:
        """Entries from ``start_offset`` (the latest snapshot's end) to the log end, aligning the log start."""
        log = self.log
        if log.log_end_offset < start_offset:
            log.truncate_fully_and_start_at(start_offset)
            return []
        if log.log_start_offset < start_offset:
            self.trim_prefix(start_offset)
        entries = []
        offset = start_offset
        while offset < log.log_end_offset:
            data = log.read(offset, 1 << 20)
            for batch in read_batches(data.records):
                h = batch.header
                if h.base_offset < offset:
                    continue
                record = batch.records()[0]
                entries.append(Entry(h.base_offset, h.partition_leader_epoch, record.value or b"", h.is_control))
            if data.next_offset <= offset:
                raise RuntimeError(f"metadata log cannot be read at offset {offset}")
            offset = data.next_offset
        return entries

    def append(self, entries: list[Entry]) -> None:
        self.log.append_as_follower(b"".join(encode_entry(e) for e in entries))

    def truncate(self, offset: int) -> None:
        self.log.truncate_to(offset)

    def reset(self, start_offset: int) -> None:
        """Drop everything: a snapshot ending at ``start_offset`` replaces the log."""
        self.log.truncate_fully_and_start_at(start_offset)

    def trim_prefix(self, offset: int) -> None:
        """Entries below ``offset`` are in a durable snapshot: release their segments."""
        log = self.log
        log.high_watermark = log.log_end_offset
        if log.increment_log_start_offset(min(offset, log.log_end_offset)):
            log.delete_old_segments()

    def flush(self) -> None:
        self.log.flush()

    def close(self) -> None:
        self.log.close()

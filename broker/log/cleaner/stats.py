"""What one cleaning pass did: the figures the broker exports as metrics."""

from __future__ import annotations

from dataclasses import dataclass

from odradek.broker.log.cleaner.policy import NEVER


@dataclass
class PassStats:
    """What one pass did; the broker exports these as metrics (CleanerManager keeps the last one per log)."""

    first_dirty: int = 0
    end: int = 0  # the new first dirty offset (the map's end)
    bytes_read: int = 0
    bytes_written: int = 0
    records_read: int = 0
    records_removed: int = 0
    tombstones_removed: int = 0
    markers_removed: int = 0  # transaction markers whose transaction's data was gone and delete horizon passed
    keyless_records: int = 0
    segments_in: int = 0
    segments_out: int = 0
    map_entries: int = 0
    map_utilization: float = 0.0
    start_ms: int = 0
    duration_ms: int = 0
    throttled_ms: float = 0.0
    aborted: bool = False  # the log changed under the pass (truncated, segments deleted, a replica added): redone
    # Retained tombstones (and removable transaction markers): the earliest future delete horizon, and the lowest
    # offset of one whose horizon passed but which lies at or above the tombstone horizon offset. They make the log
    # due again (policy.py).
    tombstone_due_ms: int = NEVER
    tombstone_blocked_offset: int = NEVER

    @property
    def bytes_removed(self) -> int:
        return self.bytes_read - self.bytes_written

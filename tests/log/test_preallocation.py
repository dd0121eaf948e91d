"""Disk blocks reserved ahead of a segment's end: about what the segment holds (64 KiB at least, 4 MiB at most), so
that thousands of quiet partitions do not reserve 4 MiB each; released when the segment is sealed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from log_batches import make_batch

from odradek.broker.log.config import LogConfig
from odradek.broker.log.log import Log
from odradek.broker.log.segment import PREALLOCATE_BYTES, PREALLOCATE_MIN_BYTES

KIB = 1024
# st_blocks also counts the file's partial last blocks and ext4's extent-tree blocks: a few blocks of slack.
SLACK = 16 * KIB


def active_file(log: Log) -> Path:
    return max(log.dir.glob("*.log"))  # zero-padded base offsets: the greatest name is the active segment


def allocated(log: Log) -> tuple[int, int]:
    """(bytes of data, bytes of disk blocks) of the log's active segment file."""
    st = os.stat(active_file(log))
    return st.st_size, st.st_blocks * 512


def reserving(tmp_path: Path) -> Log:
    log = Log.open(tmp_path / "t-0", LogConfig(segment_bytes=64 * 1024 * 1024))
    log.append_as_leader(make_batch([b"x" * 100]), 0)
    if allocated(log)[1] < PREALLOCATE_MIN_BYTES:
        log.close()
        pytest.skip("this filesystem does not reserve blocks with fallocate")
    return log


def test_a_quiet_segment_reserves_64_kib_and_a_busy_one_at_most_4_mib_ahead(tmp_path: Path) -> None:
    log = reserving(tmp_path)
    try:
        size, blocks = allocated(log)
        assert blocks - size <= PREALLOCATE_MIN_BYTES + SLACK
        value = os.urandom(32 * KIB)
        most_ahead = 0
        while size < 12 * 1024 * 1024:
            log.append_as_leader(make_batch([value]), 0)
            size, blocks = allocated(log)
            ahead = blocks - size
            most_ahead = max(most_ahead, ahead)
            assert ahead <= max(PREALLOCATE_MIN_BYTES, size) + SLACK  # never more ahead than the segment holds
        assert ahead <= PREALLOCATE_BYTES + SLACK
        assert most_ahead > PREALLOCATE_BYTES // 2  # a busy segment does reserve in large steps
    finally:
        log.close()


def test_sealing_a_segment_releases_what_it_reserved(tmp_path: Path) -> None:
    log = reserving(tmp_path)
    try:
        sealed = active_file(log)
        log.roll_to(log.log_end_offset + 10)
        assert active_file(log) != sealed
        st = os.stat(sealed)
        assert st.st_blocks * 512 <= st.st_size + SLACK
    finally:
        log.close()

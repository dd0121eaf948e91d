"""A crash at every step of a cleaner swap: after recovery the log reads as before the pass or as after it."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from test_cleaner_pass import fill, rows

from odradek.broker.log.cleaner.cleaner import Cleaner
from odradek.broker.log.cleaner.policy import CompactionConfig
from odradek.broker.log.config import LogConfig
from odradek.broker.log.log import Log

# One group: the sealed segments together fit segment.bytes (they were rolled by segment.ms), so the pass is a
# single swap and "before" and "after" are the only two valid outcomes.
ONE_GROUP = LogConfig(
    segment_bytes=64 * 1024, segment_ms=1000, index_interval_bytes=256, segment_index_bytes=4096, preallocate=False
)


class Crash(Exception):
    pass


def build(open_log: Callable[..., Log], path: Path, clock: Any) -> Log:
    log = open_log(path, ONE_GROUP, clock=clock)
    for _ in range(4):
        fill(log, clock, 15, keys=10)
        clock.now += 2000
    fill(log, clock, 2, keys=10, seed=5)
    assert log.num_segments >= 4
    return log


def run_pass(log: Log, clock: Any, step: Callable[[str], None] | None) -> None:
    cleaner = Cleaner(1 << 20, clock=clock)
    cleaner.swap_step = step
    view = log.compaction_view()
    cleaner.clean(log, CompactionConfig(), 0, view.active_base_offset, log.log_end_offset)


def test_a_crash_at_any_step_of_the_swap_leaves_the_old_or_the_new_segments(
    open_log: Callable[..., Log], tmp_path: Path, clock: Any
) -> None:
    log = build(open_log, tmp_path / "orig-0", clock)
    before = rows(log)
    log.close()
    shutil.copytree(tmp_path / "orig-0", tmp_path / "dry-0")
    dry = open_log(tmp_path / "dry-0", ONE_GROUP, clean_shutdown=True, clock=clock)
    steps: list[str] = []
    run_pass(dry, clock, steps.append)
    after = rows(dry)
    assert after != before and len(steps) >= 8
    assert "delete-old" in steps and steps[-1] == "fsync-final"
    outcomes = set()
    for k, name in enumerate(steps):
        path = tmp_path / f"crash{k}-0"
        shutil.copytree(tmp_path / "orig-0", path)
        log = Log.open(path, ONE_GROUP, clean_shutdown=True, clock=clock)
        seen = 0

        def crash(step: str, k: int = k) -> None:
            nonlocal seen
            if seen == k:
                raise Crash(step)
            seen += 1

        with pytest.raises(Crash):
            run_pass(log, clock, crash)
        # The process dies here: no close, no flush. Recovery runs on the files as they are.
        log.take_offline(Crash("killed"))
        for clean_shutdown in (False, True):
            reopened = open_log(path, ONE_GROUP, clean_shutdown=clean_shutdown, clock=clock)
            got = rows(reopened)
            reopened.close()
            assert got in (before, after), f"crash before step {k} ({name}), clean_shutdown={clean_shutdown}"
            outcomes.add("after" if got == after else "before")
        assert not [p for p in path.iterdir() if p.name.endswith((".cleaned", ".swap"))]
    assert outcomes == {"before", "after"}

"""The log manager's running count of partitions per log dir, which places each new log in the emptiest dir."""

from __future__ import annotations

from pathlib import Path

import pytest

from odradek.broker.log.dir_counts import DirOf
from odradek.broker.log.manager import LogManager


def test_counts_follow_assignment_moves_and_removal() -> None:
    a, b = Path("/a"), Path("/b")
    dirs = DirOf()
    dirs[("t", 0)] = a
    dirs[("t", 1)] = a
    dirs[("t", 2)] = b
    assert (dirs.count(a), dirs.count(b)) == (2, 1)
    dirs[("t", 0)] = b  # a move between dirs
    assert (dirs.count(a), dirs.count(b)) == (1, 2)
    assert dirs.pop(("t", 1)) == a and dirs.pop(("t", 1), None) is None
    del dirs[("t", 2)]
    assert (dirs.count(a), dirs.count(b)) == (0, 1)
    with pytest.raises(NotImplementedError):
        dirs.clear()


def test_new_logs_go_to_the_dir_holding_fewest_and_deletions_count(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    logs = LogManager([a, b])
    for i in range(4):
        logs.get_or_create_log("t", i)
    assert sorted(str(logs.dir_of("t", i)) for i in range(4)) == sorted(map(str, [a, a, b, b]))
    emptied = logs.dir_of("t", 0)
    logs.delete_log("t", 0)
    logs.delete_log("t", 1 if logs.dir_of("t", 1) == emptied else 2)
    assert logs.dir_of("u", 0) is None
    logs.get_or_create_log("u", 0)
    assert logs.dir_of("u", 0) == emptied
    logs.close()

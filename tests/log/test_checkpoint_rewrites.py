"""An idle broker does not rewrite (and fsync) a checkpoint file that already holds what it would write."""

from __future__ import annotations

from pathlib import Path

import pytest

from odradek.broker.log import manager as manager_module
from odradek.broker.log.manager import HIGH_WATERMARK_CHECKPOINT, LogManager


def test_an_unchanged_checkpoint_is_written_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    logs = LogManager([tmp_path])
    logs.get_or_create_log("t", 0)
    writes: list[dict[tuple[str, int], int]] = []
    write = manager_module.OffsetCheckpoint.write

    def counting(self: manager_module.OffsetCheckpoint, offsets: dict[tuple[str, int], int]) -> None:
        if self.path.name == HIGH_WATERMARK_CHECKPOINT:
            writes.append(dict(offsets))
        write(self, offsets)

    monkeypatch.setattr(manager_module.OffsetCheckpoint, "write", counting)
    logs.checkpoint_high_watermarks()
    logs.checkpoint_high_watermarks()
    assert writes == [{("t", 0): 0}]
    logs.get_or_create_log("t", 1)  # a new log changes the file's contents: written again
    logs.checkpoint_high_watermarks()
    assert writes[-1] == {("t", 0): 0, ("t", 1): 0} and len(writes) == 2
    assert manager_module.OffsetCheckpoint(tmp_path / HIGH_WATERMARK_CHECKPOINT).read() == writes[-1]
    logs.close()

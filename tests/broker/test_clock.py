"""The node's skewable wall clock (client/common/clock.py, ``unsafe.testing.clock.offset.file``): the offset in the file
is added to wall-clock reads, the file is looked at no more than once per check interval, and without the key the
reads are the plain wall clock."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from odradek.broker.config import ConfigError, NodeConfig
from odradek.client.common import clock


@pytest.fixture(autouse=True)
def unconfigured() -> Iterator[None]:
    """The clock is process-wide: every test leaves it as a node without the key has it."""
    clock.configure(None)
    yield
    clock.configure(None)


def test_without_the_key_the_wall_clock_is_not_offset() -> None:
    before = time.time_ns()
    read = clock.wall_ns()
    assert before <= read <= time.time_ns()
    assert clock.offset_ns() == 0


def test_the_offset_in_the_file_is_added_and_removing_the_file_heals(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    offset_file = tmp_path / "clock-offset"
    offset_file.write_text("-90.5\n")
    monkeypatch.setattr(clock, "CHECK_INTERVAL_S", 0.0)  # look at the file on every read
    clock.configure(offset_file)
    assert clock.offset_ns() == -90_500_000_000
    assert abs(clock.wall_ms() - (time.time_ns() // 1_000_000 - 90_500)) < 1000
    offset_file.write_text("120")
    assert clock.offset_ns() == 120_000_000_000
    offset_file.unlink()
    assert clock.offset_ns() == 0


def test_the_file_is_read_at_most_once_per_interval(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    offset_file = tmp_path / "clock-offset"
    offset_file.write_text("5")
    reads: list[Path] = []
    real = Path.read_text

    def counting(self: Path, *args: object, **kwargs: object) -> str:
        reads.append(self)
        return real(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Path, "read_text", counting)
    clock.configure(offset_file)
    for _ in range(10_000):
        clock.wall_ns()
    assert len(reads) == 1  # configure's own read; the interval has not passed
    offset_file.write_text("7")
    assert clock.offset_ns() == 5_000_000_000  # not seen before the next look
    monkeypatch.setattr(clock, "_next_check_ns", 0)  # the interval is over
    assert clock.offset_ns() == 7_000_000_000
    assert len(reads) == 2


def test_a_torn_or_garbled_file_keeps_the_last_offset(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    offset_file = tmp_path / "clock-offset"
    offset_file.write_text("3")
    monkeypatch.setattr(clock, "CHECK_INTERVAL_S", 0.0)
    clock.configure(offset_file)
    offset_file.write_text("3.")  # still a number
    assert clock.offset_ns() == 3_000_000_000
    offset_file.write_text("-")
    assert clock.offset_ns() == 3_000_000_000


def test_the_config_key_is_accepted_and_defaults_to_off(tmp_path: Path) -> None:
    base = {
        "process.roles": "broker",
        "node.id": 4,
        "controller.quorum.voters": "1@127.0.0.1:9093",
        "listeners": "PLAINTEXT://127.0.0.1:9092",
        "log.dirs": str(tmp_path / "data"),
    }
    assert NodeConfig(base)["unsafe.testing.clock.offset.file"] == ""
    path = str(tmp_path / "clock-offset")
    assert NodeConfig({**base, "unsafe.testing.clock.offset.file": path})["unsafe.testing.clock.offset.file"] == path
    with pytest.raises(ConfigError):
        NodeConfig({**base, "unsafe.testing.clock.offset.files": path})  # unknown keys are refused

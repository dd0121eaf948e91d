import os
import random
from collections.abc import Callable
from pathlib import Path

import pytest
from log_batches import make_batch, split_batches

from odradek.broker.log.config import LogConfig
from odradek.broker.log.log import Log
from odradek.client.errors import CorruptRecordError
from odradek.client.record.header import parse_header, validate_batch

CONFIG = LogConfig(segment_bytes=4096, index_interval_bytes=200, segment_index_bytes=4096)


def written_log(open_log: Callable[..., Log], path: Path, batches: int = 60) -> tuple[Log, list[int]]:
    """A closed log of random batches over a few segments; the byte position where each active batch ends."""
    log = open_log(path, CONFIG)
    rng = random.Random(7)
    i = 0
    while i < batches or segment_files(path)[-1].stat().st_size < 2000:  # several batches in the active segment
        log.append_as_leader(make_batch([rng.randbytes(rng.randint(1, 120)) for _ in range(3)], timestamp=i), 0)
        i += 1
    assert log.num_segments >= 3
    log.close()
    active = segment_files(path)[-1]
    ends, position = [], 0
    for batch in split_batches(active.read_bytes()):
        position += len(batch)
        ends.append(position)
    return log, ends


def segment_files(path: Path) -> list[Path]:
    return sorted(path.glob("*.log"))


def edit(path: Path, change: Callable[[bytearray], bytearray]) -> None:
    path.write_bytes(bytes(change(bytearray(path.read_bytes()))))


def all_batches(log: Log) -> list[bytes]:
    out, offset = [], log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20)
        out.extend(split_batches(bytes(data.records)))
        offset = data.next_offset
    return out


def flip(at: int) -> Callable[[bytearray], bytearray]:
    def change(b: bytearray) -> bytearray:
        b[at] ^= 0x55
        return b

    return change


# How the end of the active segment is damaged, and which batch end recovery must cut back to (-1: the last).
TORN_TAILS: dict[str, tuple[Callable[[list[int]], Callable[[bytearray], bytearray]], int]] = {
    "partial batch": (lambda ends: lambda b: b[: ends[-1] - 7], -2),
    "partial header": (lambda ends: lambda b: b[: ends[-2] + 30], -2),
    "bad crc in the last batch": (lambda ends: flip(ends[-1] - 5), -2),
    "garbage after the last batch": (lambda ends: lambda b: b + random.Random(1).randbytes(3000), -1),
    "zeros after the last batch": (lambda ends: lambda b: b + bytes(5000), -1),
    "last batches overwritten with garbage": (
        lambda ends: lambda b: b[: ends[-3] + 9] + random.Random(2).randbytes(400),
        -3,
    ),
}


@pytest.mark.parametrize("case", sorted(TORN_TAILS))
def test_a_torn_tail_is_truncated(open_log: Callable[..., Log], tmp_path: Path, case: str) -> None:
    path = tmp_path / "t-0"
    log, ends = written_log(open_log, path)
    first_active = log.segment_base_offsets[-1]
    active = segment_files(path)[-1]
    damage, kept = TORN_TAILS[case]
    edit(active, damage(ends))
    log = open_log(path, CONFIG, recovery_point=first_active)  # unclean
    assert log.failure is None
    assert active.stat().st_size == ends[kept]
    batches = all_batches(log)
    for batch in batches:
        validate_batch(batch)
    offsets = [parse_header(b).base_offset for b in batches]
    assert offsets == sorted(set(offsets))
    assert log.log_end_offset == parse_header(batches[-1]).next_offset
    info = log.append_as_leader(make_batch(2), 0)  # appends continue right after the last good batch
    assert info.first_offset == parse_header(batches[-1]).next_offset


def test_a_corrupt_batch_followed_by_valid_ones_fails_the_log(open_log: Callable[..., Log], tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    log, ends = written_log(open_log, path)
    edit(segment_files(path)[-1], flip(ends[2] + 40))  # inside the fourth batch of the active segment
    log = open_log(path, CONFIG, recovery_point=log.segment_base_offsets[-1])
    assert log.offline and log.failure.code_name == "CORRUPT_MESSAGE"
    assert "followed by a valid batch" in str(log.failure)
    for operation in (
        lambda: log.read(0, 100),
        lambda: log.append_as_leader(make_batch(1), 0),
        lambda: log.append_as_follower(make_batch(1, base_offset=10**6)),
        lambda: log.truncate_to(0),
        lambda: log.flush(),
        lambda: log.latest_epoch,
    ):
        with pytest.raises(CorruptRecordError):
            operation()


def test_a_corrupt_batch_in_a_sealed_segment_fails_the_log(open_log: Callable[..., Log], tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    log, _ = written_log(open_log, path)
    sealed = segment_files(path)[-2]
    edit(sealed, flip(sealed.stat().st_size - 3))  # the very last batch of a sealed segment is no torn tail
    log = open_log(path, CONFIG, recovery_point=0)
    assert log.failure is not None and "sealed segment" in str(log.failure)
    assert isinstance(log.failure, CorruptRecordError)


def test_a_bad_tail_below_the_recovery_point_is_corruption(open_log: Callable[..., Log], tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    log, ends = written_log(open_log, path)
    leo = log.log_end_offset
    edit(segment_files(path)[-1], flip(ends[-1] - 5))  # it was fsynced: no torn write can explain it
    log = open_log(path, CONFIG, recovery_point=leo)
    assert log.failure is not None and "below the recovery point" in str(log.failure)


def test_clean_open_does_not_scan(open_log: Callable[..., Log], tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    log, ends = written_log(open_log, path)
    edit(segment_files(path)[-1], flip(ends[2] + 40))
    log = open_log(path, CONFIG, clean_shutdown=True)  # trusts fsynced data, like Kafka: consumers check CRCs
    assert log.failure is None


@pytest.mark.parametrize("damage", ["missing", "odd size", "wrong last entry", "empty"])
@pytest.mark.parametrize("which", ["sealed", "active"])
def test_damaged_indexes_are_rebuilt(open_log: Callable[..., Log], tmp_path: Path, damage: str, which: str) -> None:
    path = tmp_path / "t-0"
    log, _ = written_log(open_log, path, batches=120)
    log = open_log(path, CONFIG, clean_shutdown=True)
    expected = [(o, bytes(log.read(o, 1).records)) for o in range(0, log.log_end_offset, 7)]
    stamps = [log.offset_for_timestamp(t) for t in range(0, 130, 9)]
    log.close()
    index = sorted(path.glob("*.index"))[1 if which == "sealed" else -1]
    if damage == "missing":
        index.unlink()
    elif damage == "odd size":
        edit(index, lambda b: b + b"\x01\x02\x03")
    elif damage == "wrong last entry":
        edit(index, lambda b: b[:-4] + (int.from_bytes(b[-4:], "big") + 1).to_bytes(4, "big"))
    else:
        edit(index, lambda b: b[:0])
    log = open_log(path, CONFIG, clean_shutdown=True)
    assert log.failure is None
    assert [(o, bytes(log.read(o, 1).records)) for o in range(0, log.log_end_offset, 7)] == expected
    assert [log.offset_for_timestamp(t) for t in range(0, 130, 9)] == stamps
    if damage != "empty":
        assert index.exists() and index.stat().st_size > 0


def test_leftover_files_are_removed(open_log: Callable[..., Log], tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    written_log(open_log, path)
    for name in (f"{999:020d}.index", f"{999:020d}.timeindex", "leader-epoch-checkpoint.tmp"):
        (path / name).write_bytes(b"junk")
    log = open_log(path, CONFIG, clean_shutdown=True)
    assert log.failure is None
    assert not any(p.name.startswith(f"{999:020d}") or p.suffix == ".tmp" for p in path.iterdir())


def test_unclean_open_with_a_stale_recovery_point_rescans_sealed_segments(
    open_log: Callable[..., Log], tmp_path: Path
) -> None:
    path = tmp_path / "t-0"
    log, _ = written_log(open_log, path)
    before = all_batches(open_log(path, CONFIG, clean_shutdown=True))
    for p in path.glob("*index"):
        os.truncate(p, 0)
    log = open_log(path, CONFIG, recovery_point=0)
    assert log.failure is None
    assert all_batches(log) == before

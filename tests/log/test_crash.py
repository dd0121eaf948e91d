"""Crash safety: a child appends and flushes until SIGKILLed at a random moment; between some rounds the unflushed
tail of the active segment is torn (cut, overwritten with garbage, or padded with zeros). After every round the
log must recover with every batch reported flushed present and intact, no partial batch, and offsets contiguous;
the next child appends after whatever survived."""

import hashlib
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from crash_child import CONFIG

from odradek.broker.log.manager import LogManager
from odradek.client.record.header import HEADER_SIZE, parse_header, validate_batch

CHILD = Path(__file__).with_name("crash_child.py")
ROUNDS = 24
TIME_BUDGET_S = 15.0


def run_child(log_dir: Path, seed: int, rng: random.Random) -> tuple[int, list[tuple[int, int, str]]]:
    """Start a child, kill it at a random moment; its log end offset at start and the batches it reported."""
    child = subprocess.Popen([sys.executable, str(CHILD), str(log_dir), str(seed)], stdout=subprocess.PIPE)
    lines: list[bytes] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(child.stdout.readline, b"")))
    reader.start()
    deadline = time.monotonic() + 10
    while not lines and time.monotonic() < deadline and child.poll() is None:
        time.sleep(0.005)
    assert lines and lines[0].startswith(b"ready "), "the child did not start"
    time.sleep(rng.uniform(0.01, 0.2))
    child.send_signal(signal.SIGKILL)
    child.wait()
    reader.join()
    child.stdout.close()
    _, leo, offline = lines[0].split()
    assert offline == b"0"
    flushed = []
    for line in lines[1:]:
        if line.endswith(b"\n"):  # the last line may have been cut by the kill
            for entry in line.split()[1].decode().split(","):
                first, last, digest = entry.split(":")
                flushed.append((int(first), int(last), digest))
    return int(leo), flushed


def tear_tail(log_dir: Path, durable_end: int, rng: random.Random) -> None:
    """Damage the active segment after its last flushed batch, as a torn write would."""
    segment = max((log_dir / "crash-0").glob("*.log"))
    data = segment.read_bytes()
    position = keep = 0
    while position + HEADER_SIZE <= len(data):
        h = parse_header(data, position)
        if position + h.size > len(data):
            break
        position += h.size
        if h.last_offset < durable_end:
            keep = position
    cut = rng.randint(keep, len(data))
    how = rng.choice(["cut", "garbage", "zeros"])
    if how == "cut":
        damaged = data[:cut]
    elif how == "garbage":
        damaged = data[:cut] + rng.randbytes(rng.randint(1, 3000))
    else:
        damaged = data + bytes(rng.randint(1, 5000))
    segment.write_bytes(damaged)


def verify(log_dir: Path, copy: Path, durable: dict[int, tuple[int, str]]) -> int:
    """Recover a copy of the log dir as a broker would; check it; return its log end offset."""
    shutil.copytree(log_dir, copy)
    manager = LogManager([copy], CONFIG)
    try:
        log = manager.get_log("crash", 0)
        assert log is not None and not log.offline, log and log.failure
        stored: dict[int, tuple[int, str]] = {}
        offset = expected = log.log_start_offset
        while offset < log.log_end_offset:
            data = log.read(offset, 1 << 20)
            position = 0
            while position < len(data.records):
                h = validate_batch(data.records, position)  # whole and intact
                assert h.base_offset == expected, "offsets must be contiguous"
                batch = bytes(data.records[position : position + h.size])
                stored[h.base_offset] = (h.last_offset, hashlib.sha1(batch).hexdigest())
                expected = h.next_offset
                position += h.size
            offset = data.next_offset
        assert expected == log.log_end_offset
        missing = {first: v for first, v in durable.items() if stored.get(first) != v}
        assert not missing, f"flushed batches lost or changed: {sorted(missing)[:5]}"
        return log.log_end_offset
    finally:
        manager.close()
        shutil.rmtree(copy)


def test_flushed_batches_survive_kill_and_torn_tails(tmp_path: Path) -> None:
    rng = random.Random(20240611)
    log_dir = tmp_path / "broker"
    durable: dict[int, tuple[int, str]] = {}
    started = time.monotonic()
    rounds = tears = 0
    while rounds < ROUNDS and time.monotonic() - started < TIME_BUDGET_S:
        durable_end = max((last + 1 for last, _ in durable.values()), default=0)
        leo, flushed = run_child(log_dir, rng.randrange(2**32), rng)
        assert leo >= durable_end
        durable.update((first, (last, digest)) for first, last, digest in flushed)
        durable_end = max((last + 1 for last, _ in durable.values()), default=0)
        if rounds % 3 == 1:
            tear_tail(log_dir, durable_end, rng)
            tears += 1
        assert verify(log_dir, tmp_path / f"verify-{rounds}", durable) >= durable_end
        rounds += 1
    elapsed = time.monotonic() - started
    print(f"{rounds} kills, {tears} torn tails, {len(durable)} flushed batches checked in {elapsed:.1f} s")
    assert rounds >= 10 and tears >= 3
    assert len(durable) > 100
    segments = len(list((log_dir / "crash-0").glob("*.log")))
    assert segments > 3, "the children rolled segments"

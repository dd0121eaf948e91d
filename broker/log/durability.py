"""Test-only fsync ledger, for emulating power loss in chaos runs (``unsafe.testing.fsync.ledger``).

A SIGKILL loses nothing the process wrote: the page cache keeps it. A power loss also drops what was written but
not yet fsynced. With a ledger path configured, every fsync of a segment or index file goes through :func:`fsync`,
which appends the file's inode and its size *before* the fsync (what is certainly durable) to the ledger. After
killing the node, the chaos nemesis calls :func:`lose_unsynced`, which cuts every segment and index file back to
its last recorded size: 0 for a file never fsynced, or one replaced since (another inode at the same path). A
file renamed into place with :func:`rename` (the compaction swap moves fsynced ``.cleaned`` files to segment names)
keeps what its fsyncs made durable under its new name.

Limits: data rewritten in place below the durable size (mmapped index entries) is kept, and directory entries are
treated as durable. Files written atomically (write, fsync, rename: checkpoints, snapshots) need no emulation.
When no ledger is configured :func:`fsync` is ``os.fsync`` plus one global test.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

TRACKED_SUFFIXES = (".log", ".index", ".timeindex")

_ledger_fd: int | None = None
_lock = threading.Lock()


def enable(path: str | Path) -> None:
    """Record fsyncs into ``path`` (appended to, created if missing) from now on, in this process."""
    global _ledger_fd
    with _lock:
        if _ledger_fd is not None:
            os.close(_ledger_fd)
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        _ledger_fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)


def disable() -> None:
    global _ledger_fd
    with _lock:
        if _ledger_fd is not None:
            os.close(_ledger_fd)
        _ledger_fd = None


def fsync(fd: int) -> None:
    """``os.fsync(fd)``; with a ledger, also record the size the file had when the fsync started."""
    ledger = _ledger_fd
    if ledger is None:
        os.fsync(fd)
        return
    st = os.fstat(fd)
    os.fsync(fd)
    path = os.readlink(f"/proc/self/fd/{fd}")
    # One O_APPEND write per line: lines from concurrent flushes never interleave.
    os.write(ledger, f"{st.st_ino} {st.st_size} {path}\n".encode())


def rename(src: str | Path, dst: str | Path) -> None:
    """``os.rename``; with a ledger, also record the move, so the file's durable size follows it to ``dst``."""
    os.rename(src, dst)
    ledger = _ledger_fd
    if ledger is not None:
        os.write(ledger, f"{RENAMED} {os.path.realpath(src)}\t{os.path.realpath(dst)}\n".encode())


RENAMED = "R"  # a ledger line "R <src>\t<dst>": what was durable at src is now at dst


class Loss(NamedTuple):
    path: str
    size: int  # before the loss
    durable: int  # after


def read_ledger(text: str) -> dict[str, tuple[int, int]]:
    """{path: (inode, durable size)} from ledger lines, the last record of a path winning and renames moving records;
    a torn last line is ignored (the recorder died mid-write)."""
    out: dict[str, tuple[int, int]] = {}
    for line in text.splitlines():
        ino, _, rest = line.partition(" ")
        if ino == RENAMED:
            src, tab, dst = rest.partition("\t")
            if tab and dst and src in out:
                out[dst] = out.pop(src)
            continue
        size, _, path = rest.partition(" ")
        if ino.isdigit() and size.isdigit() and path:
            out[path] = (int(ino), int(size))
    return out


def plan_losses(ledger: dict[str, tuple[int, int]], files: Iterable[tuple[str, int, int]]) -> list[Loss]:
    """What a power loss takes from ``files`` (path, inode, size): everything beyond the last fsynced size."""
    losses = []
    for path, ino, size in files:
        recorded = ledger.get(path)
        durable = recorded[1] if recorded is not None and recorded[0] == ino else 0
        if size > durable:
            losses.append(Loss(path, size, durable))
    return losses


def tracked_files(log_dirs: Iterable[str | Path]) -> list[tuple[str, int, int]]:
    """(path, inode, size) of every segment and index file in the partition directories of ``log_dirs``."""
    out = []
    for log_dir in log_dirs:
        for part in sorted(Path(log_dir).iterdir()) if Path(log_dir).is_dir() else ():
            if not part.is_dir():
                continue
            for f in sorted(part.iterdir()):
                if f.suffix in TRACKED_SUFFIXES and f.is_file():
                    st = f.stat()
                    out.append((str(f.resolve()), st.st_ino, st.st_size))
    return out


def lose_unsynced(ledger_path: str | Path, log_dirs: Iterable[str | Path]) -> list[Loss]:
    """Emulate a power loss on a stopped node: truncate every tracked file to its last fsynced size."""
    try:
        ledger = read_ledger(Path(ledger_path).read_text())
    except FileNotFoundError:
        ledger = {}
    losses = plan_losses(ledger, tracked_files(log_dirs))
    for loss in losses:
        os.truncate(loss.path, loss.durable)
    return losses

"""Atomic checkpoint files in Kafka's text layout.

A checkpoint is replaced whole: write ``<name>.tmp``, fsync it, rename it over the old file, fsync the directory.
A crash at any point leaves either the old or the new file, never a mix. Layout (Kafka's CheckpointFile)::

    0                 <- format version
    2                 <- number of entries
    orders 0 1234     <- one entry a line, fields separated by one space
    orders 1 98

The per-log-dir offset checkpoints (recovery point, log start offset, high watermark) hold ``topic partition
offset`` entries; the per-partition leader-epoch checkpoint holds ``epoch start_offset`` entries.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from odradek.client.errors import StorageError

VERSION = 0
TMP_SUFFIX = ".tmp"


def fsync_dir(path: Path) -> None:
    """Make renames, creations and deletions in ``path`` durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + TMP_SUFFIX)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(path.parent)


def write_entries(path: Path, entries: list[tuple[object, ...]]) -> None:
    lines = [str(VERSION), str(len(entries)), *(" ".join(str(f) for f in entry) for entry in entries)]
    write_atomic(path, ("\n".join(lines) + "\n").encode())


def read_entries(path: Path, width: int) -> list[list[str]]:
    """The entries of a checkpoint as lists of ``width`` strings; [] if the file does not exist.

    A malformed file is a StorageError: the checkpoints are written atomically, so damage means the disk is bad.
    """
    try:
        text = path.read_text()
    except FileNotFoundError:
        return []
    lines = text.splitlines()
    try:
        if int(lines[0]) != VERSION:
            raise StorageError(f"{path}: unsupported checkpoint version {lines[0]}")
        count = int(lines[1])
        entries = [line.split(" ") for line in lines[2 : 2 + count]]
    except (IndexError, ValueError) as e:
        raise StorageError(f"{path}: malformed checkpoint ({e})") from None
    if len(entries) != count or any(len(e) != width for e in entries):
        raise StorageError(f"{path}: malformed checkpoint (expected {count} entries of {width} fields)")
    return entries


class OffsetCheckpoint:
    """A per-log-dir file mapping (topic, partition) -> offset."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def read(self) -> dict[tuple[str, int], int]:
        try:
            return {(t, int(p)): int(o) for t, p, o in read_entries(self.path, 3)}
        except ValueError as e:
            raise StorageError(f"{self.path}: malformed checkpoint ({e})") from None

    def write(self, offsets: dict[tuple[str, int], int]) -> None:
        write_entries(self.path, [(t, p, o) for (t, p), o in sorted(offsets.items())])


def remove_stale_tmp(directory: Path) -> None:
    """Drop temporary files a crash left behind mid-checkpoint."""
    for tmp in directory.glob("*" + TMP_SUFFIX):
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()

"""Durable Raft state besides the log: the quorum-state file and metadata snapshots.

Both are written atomically (temp file, fsync, rename, fsync of the directory), so a crash leaves the old
version or the new one, never a torn file. Snapshot files are named ``<end offset>-<epoch>.checkpoint`` as in
KIP-630; a download in progress is a ``.part`` file that becomes visible only when complete.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from odradek.controller.raft.snapshot import SnapshotId
from odradek.controller.raft.state import PersistentState

_SNAPSHOT = re.compile(r"^(\d{20})-(\d{10})\.checkpoint$")


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)


class QuorumStateFile:
    """The epoch, vote and known leader (KRaft's ``quorum-state``): fsynced before any vote is sent."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / "quorum-state"

    def load(self) -> PersistentState:
        if not self.path.exists():
            return PersistentState()
        data = json.loads(self.path.read_text())
        return PersistentState(data["epoch"], data.get("voted_for"), data.get("leader_id"))

    def store(self, state: PersistentState) -> None:
        data = {"epoch": state.epoch, "voted_for": state.voted_for, "leader_id": state.leader_id}
        write_atomic(self.path, json.dumps(data).encode())


class SnapshotStore:
    def __init__(self, directory: Path, keep: int = 2) -> None:
        self.directory = directory
        self.keep = keep
        directory.mkdir(parents=True, exist_ok=True)
        for stale in directory.glob("*.part"):
            stale.unlink()

    def path(self, sid: SnapshotId) -> Path:
        return self.directory / f"{sid.end_offset:020d}-{sid.epoch:010d}.checkpoint"

    def ids(self) -> list[SnapshotId]:
        found = []
        for p in self.directory.iterdir():
            m = _SNAPSHOT.match(p.name)
            if m:
                found.append(SnapshotId(int(m.group(1)), int(m.group(2))))
        return sorted(found)

    def latest(self) -> SnapshotId | None:
        ids = self.ids()
        return ids[-1] if ids else None

    def write(self, sid: SnapshotId, data: bytes) -> None:
        write_atomic(self.path(sid), data)
        self._prune()

    def read(self, sid: SnapshotId) -> bytes:
        return self.path(sid).read_bytes()

    def read_chunk(self, sid: SnapshotId, position: int, max_bytes: int) -> tuple[bytes, int]:
        """``max_bytes`` from ``position`` and the snapshot's total size."""
        with open(self.path(sid), "rb") as f:
            size = os.fstat(f.fileno()).st_size
            return os.pread(f.fileno(), max_bytes, position), size

    def write_chunk(self, sid: SnapshotId, position: int, data: bytes) -> None:
        part = self.path(sid).with_suffix(".part")
        if position == 0 and part.exists():
            part.unlink()
        with open(part, "ab") as f:
            if f.tell() != position:
                raise ValueError(f"snapshot chunk at {position}, but {f.tell()} bytes are present")
            f.write(data)

    def complete(self, sid: SnapshotId) -> None:
        """Make a downloaded snapshot visible (durably) and drop older ones."""
        part = self.path(sid).with_suffix(".part")
        if not part.exists():
            part.touch()
        with open(part, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(part, self.path(sid))
        fsync_dir(self.directory)
        self._prune()

    def _prune(self) -> None:
        for old in self.ids()[: -self.keep]:
            self.path(old).unlink(missing_ok=True)

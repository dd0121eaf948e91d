"""Disk faults for the nemesis, on a stopped or running node's data directories.

* :func:`wipe`: a replaced disk that the operator formatted again: everything in the node's data directories is
  removed (partitions, checkpoints, the metadata log copy) and ``meta.properties`` is written anew as ``odradek
  storage format`` would, so the node starts empty with its old id.
* :func:`mount_tmpfs` / :func:`fill` / :func:`unfill`: real ENOSPC. A data directory is a small tmpfs mounted before
  the node starts (it inherits the mount, also in the network namespace's mount namespace); filling it makes every
  write needing a new block fail with ENOSPC, the storage error Kafka treats as a failed log directory. Blocks a
  segment reserved ahead (fallocate) are released first (:func:`release_reservations`), else appends would go on
  into them. Writes to sparse pages of mmapped indexes then fail with SIGBUS, as they would on a real full disk.
  There is no device-mapper in our CI kernel, so no EIO target (dm-error/flakey) is used.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from odradek.broker.config import NodeConfig
from odradek.broker.storage import format_storage

FILLER = ".chaos-filler"


def wipe(config_path: str | Path, cluster_id: str) -> list[str]:
    """Empty every data directory of a stopped node and format it again; returns the directories wiped."""
    config = NodeConfig.load(config_path)
    dirs = [Path(d) for d in dict.fromkeys([*config.log_dirs, config.metadata_log_dir])]
    for d in dirs:
        for child in d.iterdir() if d.is_dir() else ():
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child)
            else:
                child.unlink()
    format_storage(config, cluster_id)
    return [str(d) for d in dirs]


def mount_tmpfs(directory: Path, size_mb: int) -> None:
    """Put ``directory`` (and what it holds now) on a tmpfs of ``size_mb`` MiB (needs root)."""
    directory.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=directory.parent) as tmp:
        saved = Path(tmp) / "saved"
        shutil.copytree(directory, saved)
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size_mb}m,mode=0755", "tmpfs", str(directory)],
            check=True,
            capture_output=True,
        )
        shutil.copytree(saved, directory, dirs_exist_ok=True)


def unmount(directory: Path) -> None:
    subprocess.run(["umount", "-l", str(directory)], check=False, capture_output=True)


def is_mount(directory: Path) -> bool:
    return os.path.ismount(directory)


def release_reservations(directory: Path) -> int:
    """Free the blocks files under ``directory`` hold beyond their end (fallocate KEEP_SIZE reservations, which
    segments take ahead of appends): a full disk would otherwise go unnoticed until they are used up. Cutting a
    file back to its own size frees them; only safe while nothing writes (the nemesis stops the node around it).
    Returns the bytes freed."""
    freed = 0
    for path in directory.rglob("*"):
        if not path.is_file() or path.is_symlink():
            continue
        st = path.stat()
        allocated = st.st_blocks * 512
        if allocated > st.st_size + 4096:  # more than the last partial page
            os.truncate(path, st.st_size + 1)
            os.truncate(path, st.st_size)  # a shrinking truncate frees every block past the new end
            freed += allocated - path.stat().st_blocks * 512
    return freed


def fill(directory: Path) -> int:
    """Use up every free block of the file system holding ``directory``; returns the bytes taken."""
    taken = 0
    fd = os.open(directory / FILLER, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        for chunk in (bytes(1 << 20), bytes(4096), bytes(1)):
            while True:
                try:
                    taken += os.write(fd, chunk)
                except OSError as e:
                    if e.errno != errno.ENOSPC:
                        raise
                    break
    finally:
        os.close(fd)
    return taken


def unfill(directory: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        (directory / FILLER).unlink()

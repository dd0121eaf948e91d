"""Replacing sealed segments with cleaned ones, crash-safely (the log cleaner's last step, and its recovery).

A cleaned segment replacing the old segments with base offsets in [base, end) is written as
``<base>.log.cleaned`` (with ``.index.cleaned`` and ``.timeindex.cleaned``, and ``.txnindex.cleaned`` when it holds
aborted transactions) and fsynced. Then, under the log's
lock, ``commit_swap``:

1. renames the index files to ``<base>-<end>.index.swap`` / ``.timeindex.swap``, then the log file to
   ``<base>-<end>.log.swap``, and fsyncs the directory: the log file's rename is the commit point;
2. deletes the old segments' files;
3. renames the swap files to their final names (``<base>.log`` ...) and fsyncs the directory.

``complete_swaps`` runs when a log opens, before its segments are listed: ``.cleaned`` files are deleted (the pass
had not committed: the old segments are all there); a ``.log.swap`` file finishes its swap (the old files in its
range are deleted, whatever step 2 left, and the swap files are renamed); index ``.swap`` files without their log
file are deleted (the indexes are rebuilt from the log). The range is in the swap's name because the cleaned
segment may end before the old ones did (its last records were superseded). A crash at any instant thus leaves the
old segments or the new one, never a gap; recovery itself can crash and rerun.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

from odradek.broker.log import durability
from odradek.broker.log.checkpoint import fsync_dir
from odradek.broker.log.segment import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, segment_name
from odradek.broker.log.txn_index import TXN_INDEX_SUFFIX

CLEANED = ".cleaned"
SWAP = ".swap"
SUFFIXES = (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX, LOG_SUFFIX)  # the log file last: its rename commits
FINAL_ORDER = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)


class Deletable(Protocol):
    def delete(self) -> None: ...


def cleaned_path(directory: Path, base: int, suffix: str) -> Path:
    return directory / f"{segment_name(base)}{suffix}{CLEANED}"


def swap_path(directory: Path, base: int, end: int, suffix: str) -> Path:
    return directory / f"{segment_name(base)}-{segment_name(end)}{suffix}{SWAP}"


def final_path(directory: Path, base: int, suffix: str) -> Path:
    return directory / f"{segment_name(base)}{suffix}"


def commit_swap(
    directory: Path,
    base: int,
    end: int,
    old: Sequence[Deletable],
    step: Callable[[str], None] | None = None,
) -> None:
    """Replace ``old`` (the segments with base offsets in [base, end)) by the cleaned segment at ``base``.

    ``step`` is told the name of each step before it runs (tests inject crashes there). Raises OSError."""

    def at(name: str) -> None:
        if step is not None:
            step(name)

    for suffix in SUFFIXES:
        at(f"swap{suffix}")
        if suffix == TXN_INDEX_SUFFIX and not cleaned_path(directory, base, suffix).exists():
            continue  # no aborted transaction in the cleaned segment
        durability.rename(cleaned_path(directory, base, suffix), swap_path(directory, base, end, suffix))
    at("fsync-swap")
    fsync_dir(directory)
    for seg in old:
        at("delete-old")
        seg.delete()
    for suffix in FINAL_ORDER:
        at(f"final{suffix}")
        if suffix == TXN_INDEX_SUFFIX and not swap_path(directory, base, end, suffix).exists():
            continue
        durability.rename(swap_path(directory, base, end, suffix), final_path(directory, base, suffix))
    at("fsync-final")
    fsync_dir(directory)


def _parse_base(name: str, suffix: str) -> int | None:
    stem = name[: -len(suffix)]
    return int(stem) if stem.isdigit() else None


def complete_swaps(directory: Path) -> bool:
    """Finish or undo what a crash interrupted (see the module docstring); True if anything changed."""
    changed = False
    names = sorted(p.name for p in directory.iterdir())
    for name in names:
        if name.endswith(CLEANED):
            (directory / name).unlink(missing_ok=True)
            changed = True
    log_swap = LOG_SUFFIX + SWAP
    for name in names:
        if not name.endswith(log_swap):
            continue
        first, _, last = name[: -len(log_swap)].partition("-")
        base, end = int(first), int(last)
        for path in directory.iterdir():
            for suffix in SUFFIXES:
                if path.name.endswith(suffix):
                    old = _parse_base(path.name, suffix)
                    if old is not None and base <= old < end:
                        path.unlink(missing_ok=True)
        for suffix in FINAL_ORDER:
            swap = swap_path(directory, base, end, suffix)
            if swap.exists():
                durability.rename(swap, final_path(directory, base, suffix))
        changed = True
    for path in directory.glob("*" + SWAP):  # index swaps whose log file was renamed (or never swapped)
        path.unlink(missing_ok=True)
        changed = True
    if changed:
        fsync_dir(directory)
    return changed

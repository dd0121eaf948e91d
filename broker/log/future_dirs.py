"""The directory names of a replica moving between log dirs (AlterReplicaLogDirs, KIP-113), and what a start does
with the ones a crash left behind.

A move copies the partition's log into a *future* log ``<topic>-<partition>.<id>-future`` in the destination dir,
then swaps it in (``LogManager.replace_current_with_future``). The swap's commit point is a marker file,
``SWAP_MARKER``, written into the future dir once the future log holds exactly what the current one holds (same log
end offset, flushed, with the current log's producer state and leader-epoch cache) and before anything of the
current log is touched. The swap then renames the current dir to a ``-delete`` dir, the future dir to
``<topic>-<partition>``, and removes the marker.

The rule at start (``settle``), as Kafka's promotes a future log only once the swap began: a future dir holding
the marker is promoted (a current dir still there is discarded: it holds nothing the future does not); one
without it is an interrupted copy, resumed when the current log is there and dropped when it is not (a copy
without its source is worth nothing, and may be incomplete). A partition dir still holding the marker finished
its swap: the marker is removed.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Sequence
from typing import NamedTuple

FUTURE_SUFFIX = "-future"
DELETE_SUFFIX = "-delete"
SWAP_MARKER = ".swap-started"


def future_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}.{uuid.uuid4().hex}{FUTURE_SUFFIX}"


def delete_dir_name(name: str) -> str:
    """The name a dir takes before it is removed: a crash midway finishes the removal at the next start."""
    return f"{name}.{uuid.uuid4().hex}{DELETE_SUFFIX}"


def parse_future_dir(name: str) -> tuple[str, int] | None:
    """(topic, partition) of a future dir name, None for any other name."""
    if not name.endswith(FUTURE_SUFFIX):
        return None
    stem, dot, unique = name[: -len(FUTURE_SUFFIX)].rpartition(".")
    topic, dash, partition = stem.rpartition("-")
    if not dot or not unique or not dash or not topic or not partition.isdigit():
        return None
    return topic, int(partition)


class Settle(enum.Enum):
    PROMOTE = "promote"  # the swap had begun: this future log becomes the partition's log
    RESUME = "resume"  # an interrupted copy of a current log that is still there: copying goes on
    DROP = "drop"  # an interrupted copy without its current log, or a spare one: removed


class FutureFound(NamedTuple):
    name: str
    swap_started: bool  # the dir holds SWAP_MARKER


def settle(current_found: bool, futures: Sequence[FutureFound]) -> dict[str, Settle]:
    """What becomes of each future dir of one partition found at start (see the module docstring). At most one is
    kept: a marked one first (there is never more than one: the swap is the move's last step), else the first by
    name when the current log is there."""
    marked = [f.name for f in futures if f.swap_started]
    keep = marked[0] if marked else (min(f.name for f in futures) if futures and current_found else None)
    out = {}
    for f in futures:
        if f.name != keep:
            out[f.name] = Settle.DROP
        else:
            out[f.name] = Settle.PROMOTE if f.swap_started else Settle.RESUME
    return out

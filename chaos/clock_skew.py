"""The ``clock-skew`` fault's side of a node's wall clock (client/common/clock.py): each node of a run with this fault
has ``unsafe.testing.clock.offset.file`` set to a file in its directory; the nemesis writes an offset in seconds there
to skew the node's wall clock and removes the file to heal. Nodes look at the file about once a second and log
each change they see, which is how the heal tells that the skew reached the node.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

from odradek.deploy.local import DevCluster

MIN_SKEW_S = 1.0
MAX_SKEW_S = 300.0
SEEN = "wall clock offset now {:+.3f} s"  # what client/common/clock.py logs when it sees a new offset


def offset_file(cluster: DevCluster, node_id: int) -> Path:
    """The node's ``unsafe.testing.clock.offset.file``, outside its data directory (a wiped disk keeps it)."""
    return cluster.node(node_id).directory / "clock-offset"


def draw_offset(rng: random.Random) -> float:
    """Seconds to minutes, either sign: log-uniform between MIN_SKEW_S and MAX_SKEW_S, to a tenth of a second."""
    magnitude = MIN_SKEW_S * (MAX_SKEW_S / MIN_SKEW_S) ** rng.random()
    return round(rng.choice((-1, 1)) * magnitude, 1)


def skew(path: Path, seconds: float) -> None:
    """Write the offset atomically (write, rename): a node never reads half of it."""
    partial = path.with_name(path.name + ".tmp")
    partial.write_text(f"{seconds}\n")
    os.replace(partial, path)


def unskew(path: Path) -> None:
    path.unlink(missing_ok=True)


def seen_by(log_file: Path, seconds: float, since: int) -> bool:
    """Whether the node logged that it saw ``seconds`` after byte ``since`` of its log."""
    try:
        with log_file.open("rb") as f:
            f.seek(since)
            tail = f.read().decode("utf-8", "replace")
    except OSError:
        return False
    return SEEN.format(seconds) in tail


def log_size(log_file: Path) -> int:
    try:
        return log_file.stat().st_size
    except OSError:
        return 0

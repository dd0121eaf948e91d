"""The node's wall clock: every wall-time read of the broker and the controller goes through :func:`wall_ms` or
:func:`wall_ns`, so that a chaos run can skew one node's clock without root (``odradek chaos run --faults
clock-skew``).

Testing only: with ``unsafe.testing.clock.offset.file`` set, each read adds the offset in seconds written in that
file (a decimal number, either sign; a missing file is 0), as a node whose clock is off would read it. The file is
read again at most once per :data:`CHECK_INTERVAL_S`, by whichever read comes due, so a read costs one monotonic
clock call more than ``time.time_ns()``; without the key it costs one test of a module global. A change is logged
once, which is how a run can tell that the node saw it.

Monotonic clocks are left alone, as a real clock step leaves them alone: session and lag timeouts, request
deadlines, quota windows and Raft timers do not see the offset.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

logger = logging.getLogger(__name__)

CHECK_INTERVAL_S = 1.0

_path = ""  # the offset file; "" (the default) disables the offset
_offset_ns = 0
_next_check_ns = 0  # monotonic time of the next look at the file


def configure(path: str | Path | None) -> None:
    """Read the wall-clock offset from ``path`` from now on (``""`` or None: no offset). One per process: the
    node calls it once with its config's ``unsafe.testing.clock.offset.file``."""
    global _path, _offset_ns, _next_check_ns
    _path = str(path or "")
    _offset_ns = 0
    _next_check_ns = 0
    if _path:
        logger.warning("UNSAFE: the wall clock is offset by the seconds in %s (testing only)", _path)
        _refresh(time.monotonic_ns())


def offset_ns() -> int:
    """The offset now added to wall-clock reads."""
    if not _path:
        return 0
    now = time.monotonic_ns()
    if now >= _next_check_ns:
        _refresh(now)
    return _offset_ns


def wall_ns() -> int:
    """``time.time_ns()`` plus the offset."""
    return time.time_ns() + offset_ns()


def wall_ms() -> int:
    """Wall-clock milliseconds since the epoch, plus the offset."""
    return wall_ns() // 1_000_000


def _refresh(now_ns: int) -> None:
    """Read the file (concurrent callers may both read it: the result is the same)."""
    global _offset_ns, _next_check_ns
    _next_check_ns = now_ns + int(CHECK_INTERVAL_S * 1e9)
    try:
        text = Path(_path).read_text().strip()
    except FileNotFoundError:
        text = ""
    except OSError as e:
        logger.warning("cannot read the wall-clock offset file %s: %s; keeping %+.3f s", _path, e, _offset_ns / 1e9)
        return
    try:
        offset = round(float(text) * 1e9) if text else 0
    except ValueError:
        logger.warning(
            "the wall-clock offset file %s holds %r, not seconds; keeping %+.3f s", _path, text, _offset_ns / 1e9
        )
        return
    if offset != _offset_ns:
        _offset_ns = offset
        logger.warning("wall clock offset now %+.3f s (unsafe.testing.clock.offset.file)", offset / 1e9)

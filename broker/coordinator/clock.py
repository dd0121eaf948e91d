"""The clock the coordinators' cores see.

Milliseconds that never go backwards within the process but read as wall time (the wall clock at start plus the
monotonic time since), so timers are immune to clock steps and the timestamps a coordinator persists (commit
times, the time a group became empty) still mean something to the next coordinator. Its start is read from the
node's wall clock (client/common/clock.py), so a node started while a chaos run skews its clock keeps that skew. The
transaction coordinator's clock (``follow_skew``) also follows the skew as it changes, as its timeouts follow the
wall clock in Kafka.
"""

from __future__ import annotations

import time

from odradek.client.common.clock import offset_ns


class Clock:
    """Milliseconds that never go backwards in the process and read as wall time (see the module docstring);
    ``follow_skew``: except that they follow the changes of the node's wall-clock offset, steps back included."""

    def __init__(self, follow_skew: bool = False) -> None:
        self._offset0 = offset_ns()
        self._wall0 = (time.time_ns() + self._offset0) // 1_000_000
        self._mono0 = time.monotonic_ns() // 1_000_000
        self._follow_skew = follow_skew

    def __call__(self) -> int:
        now = self._wall0 + time.monotonic_ns() // 1_000_000 - self._mono0
        if self._follow_skew:
            now += (offset_ns() - self._offset0) // 1_000_000
        return now

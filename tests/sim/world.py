"""The simulated world: one seeded clock (int milliseconds), one event queue, one lossy network, one trace.

Everything that happens is an event popped from the queue in (time, sequence) order, so a seed replays exactly.
The trace keeps the last lines always (a failure shows how it got there) and every line when asked to.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable
from heapq import heappop as _heappop
from heapq import heappush as _heappush

CONTROLLER = 0  # the active controller's node id on the network; brokers are 1..n

TRACE_TAIL = 400


class Violation(AssertionError):
    """An invariant broke; the message names it (``key``), the seed and the time."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key


class World:
    def __init__(self, seed: int, full_trace: bool = False, ignore: frozenset[str] = frozenset()) -> None:
        self.seed = seed
        self.ignore = ignore  # violation keys only logged (to look past a known defect)
        self.ignored: list[str] = []
        self.rng = random.Random(seed)
        self.now = 0
        self._queue: list[tuple[int, int, str, Callable[[], None]]] = []
        self._seq = 0
        self.full_trace = full_trace
        self.trace: deque[str] | list[str] = [] if full_trace else deque(maxlen=TRACE_TAIL)
        self.steps = 0

    def at(self, when: int, what: str, action: Callable[[], None]) -> None:
        self._seq = seq = self._seq + 1
        now = self.now
        _heappush(self._queue, (when if when > now else now, seq, what, action))

    def after(self, delay: int, what: str, action: Callable[[], None]) -> None:
        """``at(now + delay)``, spelled out: the sim schedules an event or more per message."""
        self._seq = seq = self._seq + 1
        now = self.now
        _heappush(self._queue, (now + delay if delay > 0 else now, seq, what, action))

    def log(self, line: str) -> None:
        self.trace.append(f"{self.now:6d}  {line}")

    def step(self) -> str | None:
        """Run the next event; its description, or None when nothing is left."""
        if not self._queue:
            return None
        self.now, _, what, action = _heappop(self._queue)
        self.steps += 1
        action()
        return what

    def fail(self, key: str, invariant: str, detail: str) -> None:
        """Raise a Violation named ``key`` (or only log it if that key is ignored)."""
        if key in self.ignore:
            if key not in self.ignored:
                self.ignored.append(key)
                self.log(f"VIOLATION IGNORED [{key}] {invariant}: {detail}")
            return
        self.log(f"VIOLATION [{key}] {invariant}: {detail}")
        lines = "\n".join(self.trace)
        raise Violation(
            key,
            f"[{key}] {invariant} at t={self.now} ms, seed {self.seed}: {detail}\n"
            f"replay: SIM_SEED={self.seed} pytest tests/sim -s\n--- trace (last lines) ---\n{lines}",
        )


class Network:
    """Delivers each message after a random delay; drops, duplicates (and so reorders) requests and responses
    independently. ``isolated`` nodes neither send nor receive anything while listed."""

    def __init__(self, world: World, drop: float, duplicate: float, max_delay_ms: int) -> None:
        self.world = world
        self.drop = drop
        self.duplicate = duplicate
        self.max_delay_ms = max_delay_ms
        self.isolated: set[int] = set()

    def send(self, src: int, dst: int, what: str, deliver: Callable[[], None]) -> None:
        w = self.world
        if src in self.isolated or dst in self.isolated or w.rng.random() < self.drop:
            w.log(f"net  {src}->{dst} {what}: DROPPED")
            return
        copies = 2 if w.rng.random() < self.duplicate else 1
        for _ in range(copies):
            w.after(w.rng.randint(1, self.max_delay_ms), what, self._arrive(src, dst, what, deliver))

    def _arrive(self, src: int, dst: int, what: str, deliver: Callable[[], None]) -> Callable[[], None]:
        def arrive() -> None:
            if src in self.isolated or dst in self.isolated:
                self.world.log(f"net  {src}->{dst} {what}: LOST (isolated)")
                return
            deliver()

        return arrive

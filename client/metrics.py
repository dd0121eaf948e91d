"""Windowed client metrics: the average and maximum of recorded values over a sliding window, as Kafka's clients
compute them (``SampledStat`` with ``Avg`` and ``Max``).

Values fall into samples of ``WINDOW_S`` seconds; the statistic covers the last ``SAMPLES`` of them, so a value
counts for between 30 and 60 seconds. A sample starts with the first value recorded after the previous one ended
(not on a wall-clock grid), and a sample older than ``SAMPLES * WINDOW_S`` is forgotten. With nothing recorded in
the window both statistics are NaN, as in Kafka. The window is fixed (Kafka's defaults for
``metrics.num.samples`` and ``metrics.sample.window.ms``): odradek's clients accept no setting for it.

Sans-I/O: the caller passes the time (monotonic seconds).
"""

from __future__ import annotations

import math

SAMPLES = 2
WINDOW_S = 30.0


class _Sample:
    __slots__ = ("count", "max", "start", "total")

    def __init__(self, start: float) -> None:
        self.start = start
        self.count = 0
        self.total = 0.0
        self.max = -math.inf

    def reset(self, start: float) -> None:
        self.start = start
        self.count = 0
        self.total = 0.0
        self.max = -math.inf


class WindowedStat:
    """Average and maximum over the last ``samples`` windows of ``window_s`` seconds."""

    def __init__(self, samples: int = SAMPLES, window_s: float = WINDOW_S) -> None:
        if samples < 1 or window_s <= 0:
            raise ValueError(f"a windowed stat needs samples >= 1 and window_s > 0, got {samples} and {window_s}")
        self._window = window_s
        self._samples: list[_Sample] = []
        self._size = samples
        self._current = 0

    def record(self, value: float, now: float) -> None:
        if not self._samples:
            self._samples.append(_Sample(now))
        sample = self._samples[self._current]
        if now - sample.start >= self._window:
            sample = self._advance(now)
        sample.count += 1
        sample.total += value
        if value > sample.max:
            sample.max = value

    def _advance(self, now: float) -> _Sample:
        self._current = (self._current + 1) % self._size
        if self._current >= len(self._samples):
            sample = _Sample(now)
            self._samples.append(sample)
            return sample
        sample = self._samples[self._current]
        sample.reset(now)
        return sample

    def _live(self, now: float) -> list[_Sample]:
        """The samples still in the window (older ones are cleared, as Kafka's purge does)."""
        expiry = self._size * self._window
        for sample in self._samples:
            if now - sample.start >= expiry:
                sample.reset(now)
        return [s for s in self._samples if s.count]

    def avg(self, now: float) -> float:
        live = self._live(now)
        count = sum(s.count for s in live)
        return sum(s.total for s in live) / count if count else math.nan

    def max(self, now: float) -> float:
        live = self._live(now)
        return max(s.max for s in live) if live else math.nan

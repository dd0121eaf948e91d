"""Windowed statistics and the throttle formula of KIP-13, as Kafka's metrics library computes them.

A ``SampledStat`` keeps ``num_samples`` samples of ``window_ms`` each in a ring. A sample starts at the first
record after the previous sample completed (so samples are not aligned to the clock), and is complete once
``now >= start + window_ms``; the next record then recycles the oldest slot. Before any measurement, samples
that started ``num_samples * window_ms`` or more ago are obsolete and reset (Kafka's ``purgeObsoleteSamples``).

``SampledRate`` is Kafka's ``Rate`` with one difference. The rate is the sum over the retained samples divided by
the elapsed time since the oldest retained sample started, and a young history is padded: samples start at a
record, so without padding a client sending steadily would look up to twice as fast as it is, and a new client's
first burst would be measured against the few milliseconds it has existed. Kafka pads to ``num_samples - 1``
windows. That lets a new greedy client send ten windows' worth at once, be blocked for ten seconds, and, when the
sample holding its burst expires, find its history young (one sample) and padded again: a burst of ten seconds'
quota every eleven seconds, 1.1-1.15 x its quota over a minute. odradek pads to half the span
(``(num_samples - 1) // 2`` windows, at least one): enough for the steady client, and short enough that by the
time a first burst's sample expires the client has at least as much history after it as the padding, so the burst
is never granted again. Kafka's own examples (a steady client under its quota is not throttled; the 2,100 ms case)
come out the same.

Every method takes ``now_ms``: no clock is read here.
"""

from __future__ import annotations

import math


class _Sample:
    __slots__ = ("count", "max", "start_ms", "total")

    def __init__(self, now_ms: int) -> None:
        self.reset(now_ms)

    def reset(self, now_ms: int) -> None:
        self.start_ms = now_ms
        self.total = 0.0
        self.count = 0
        self.max = -math.inf


class SampledStat:
    """Sum, count and max of recorded values over ``num_samples`` windows of ``window_ms``, ring-recycled."""

    def __init__(self, num_samples: int = 11, window_ms: int = 1000) -> None:
        if num_samples < 1:
            raise ValueError(f"num_samples must be at least 1, not {num_samples}")
        if window_ms < 1:
            raise ValueError(f"window_ms must be at least 1, not {window_ms}")
        self.num_samples = num_samples
        self.window_ms = window_ms
        self._samples: list[_Sample] = []
        self._current = 0

    def record(self, value: float, now_ms: int) -> None:
        sample = self._current_sample(now_ms)
        if now_ms - sample.start_ms >= self.window_ms:
            sample = self._advance(now_ms)
        sample.total += value
        sample.count += 1
        sample.max = max(sample.max, value)

    def _current_sample(self, now_ms: int) -> _Sample:
        if not self._samples:
            self._samples.append(_Sample(now_ms))
        return self._samples[self._current]

    def _advance(self, now_ms: int) -> _Sample:
        self._current = (self._current + 1) % self.num_samples
        if self._current >= len(self._samples):
            sample = _Sample(now_ms)
            self._samples.append(sample)
        else:
            sample = self._samples[self._current]
            sample.reset(now_ms)
        return sample

    def purge(self, now_ms: int) -> None:
        """Reset the samples that started ``num_samples`` windows or more before ``now_ms``."""
        expire_age = self.num_samples * self.window_ms
        for sample in self._samples:
            if now_ms - sample.start_ms >= expire_age:
                sample.reset(now_ms)

    def oldest_start_ms(self, now_ms: int) -> int:
        """The start of the oldest retained sample (``now_ms`` when nothing was recorded yet)."""
        return min((s.start_ms for s in self._samples), default=now_ms)

    def sum(self, now_ms: int) -> float:
        self.purge(now_ms)
        return sum(s.total for s in self._samples)

    def count(self, now_ms: int) -> int:
        self.purge(now_ms)
        return sum(s.count for s in self._samples)

    def avg(self, now_ms: int) -> float:
        """The mean of the values recorded in the retained samples; 0.0 when there are none."""
        self.purge(now_ms)
        count = sum(s.count for s in self._samples)
        return sum(s.total for s in self._samples) / count if count else 0.0

    def max(self, now_ms: int) -> float:
        """The largest value recorded in the retained samples; 0.0 when there are none."""
        self.purge(now_ms)
        return max((s.max for s in self._samples if s.count), default=0.0)


class SampledRate:
    """Kafka's ``Rate`` over a windowed sum: recorded units per second."""

    def __init__(self, num_samples: int = 11, window_ms: int = 1000) -> None:
        self._stat = SampledStat(num_samples, window_ms)

    @property
    def num_samples(self) -> int:
        return self._stat.num_samples

    @property
    def window_ms(self) -> int:
        return self._stat.window_ms

    def record(self, value: float, now_ms: int) -> None:
        self._stat.record(value, now_ms)

    def rate(self, now_ms: int) -> float:
        """The retained sum divided by ``window_size_ms`` in seconds."""
        total = self._stat.sum(now_ms)
        return total / (self.window_size_ms(now_ms) / 1000.0)

    def window_size_ms(self, now_ms: int) -> int:
        """The elapsed time since the oldest retained sample started, padded up to half the span's full windows
        when the history is shorter (the module docstring says why not Kafka's ``num_samples - 1``)."""
        self._stat.purge(now_ms)
        elapsed = now_ms - self._stat.oldest_start_ms(now_ms)
        return max(elapsed, self.padding_windows * self.window_ms)

    @property
    def padding_windows(self) -> int:
        return max(1, (self.num_samples - 1) // 2)


def throttle_time_ms(observed: float, bound: float, window_ms: float) -> int:
    """KIP-13's delay ``X = (O - T) / T * W``: how long a client observed at rate ``O`` over the window ``W`` must
    stay silent for its rate over the longer window to fall back to its quota ``T``. 0 when ``O <= T``; rounded
    half up like Java's ``Math.round``."""
    if not (math.isfinite(bound) and bound > 0):
        raise ValueError(f"a quota bound must be a positive finite number, not {bound!r}")
    if not math.isfinite(observed) or observed < 0:
        raise ValueError(f"an observed rate must be a non-negative finite number, not {observed!r}")
    if not math.isfinite(window_ms) or window_ms < 0:
        raise ValueError(f"a window must be a non-negative finite number of ms, not {window_ms!r}")
    if observed <= bound:
        return 0
    return math.floor((observed - bound) / bound * window_ms + 0.5)

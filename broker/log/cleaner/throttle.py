"""The cleaner's I/O throttle (``log.cleaner.io.max.bytes.per.second``): a token bucket, sans-I/O.

The pass reports the bytes it read or wrote with the current time and sleeps for the answer; the bucket holds at
most one second of credit, so a cleaner that was idle cannot burst far above the rate. The cleaner threads share
one bucket (the rate is the broker's), so ``acquire`` takes a lock.
"""

from __future__ import annotations

import math
import threading


class Throttler:
    def __init__(self, bytes_per_second: float, now_ms: int) -> None:
        if bytes_per_second <= 0:
            raise ValueError(f"the cleaner I/O rate must be positive, got {bytes_per_second}")
        self.rate = float(bytes_per_second)
        self._tokens = self.rate
        self._last_ms = now_ms
        self.throttled_ms = 0.0  # total sleep asked for: a metric
        self._lock = threading.Lock()

    def acquire(self, nbytes: int, now_ms: int) -> float:
        """Take ``nbytes`` of credit; return the seconds to sleep before the next I/O (0.0 when within the rate)."""
        if math.isinf(self.rate):
            return 0.0
        with self._lock:
            return self._acquire(nbytes, now_ms)

    def _acquire(self, nbytes: int, now_ms: int) -> float:
        elapsed = max(0, now_ms - self._last_ms)
        self._last_ms = now_ms
        self._tokens = min(self.rate, self._tokens + elapsed * self.rate / 1000)
        self._tokens -= nbytes
        if self._tokens >= 0:
            return 0.0
        wait = -self._tokens / self.rate
        self.throttled_ms += wait * 1000
        return wait

"""Client-side throttling (KIP-219): a broker that throttles a client answers at once with ``throttle_time_ms``,
and the client sends that broker nothing more of the throttled kind until the time has passed; a broker holds a
client that ignores it for the same time anyway. The producer's sender (Produce) and the consumer's fetcher
(Fetch, and its ListOffsets) each keep one ``NodeThrottles``; group coordinator requests are not held back.

Sans-I/O: the caller passes the time (monotonic seconds).
"""

from __future__ import annotations

from odradek.client.metrics import WindowedStat


class NodeThrottles:
    """When each broker's throttle ends, and the throttle times the broker reported (for the client's metrics)."""

    def __init__(self) -> None:
        self._until: dict[int, float] = {}
        self.times = WindowedStat()  # throttle_time_ms of every response recorded, 0 included (as Kafka)

    def record(self, node: int, throttle_ms: int, now: float) -> None:
        """A response from ``node``: hold the node and count its throttle time in the metrics."""
        self.times.record(throttle_ms, now)
        self.hold(node, throttle_ms, now)

    def hold(self, node: int, throttle_ms: int, now: float) -> None:
        """Send ``node`` nothing for ``throttle_ms`` from ``now`` (a later, shorter throttle does not shorten an
        earlier one)."""
        if throttle_ms > 0:
            end = now + throttle_ms / 1000
            if end > self._until.get(node, 0.0):
                self._until[node] = end

    def until(self, node: int) -> float:
        """When ``node`` may be sent to again (0.0: it is not throttled)."""
        return self._until.get(node, 0.0)

    def next_end(self, now: float) -> float:
        """The earliest end of a throttle still running (inf: none); ended ones are forgotten."""
        ended = [node for node, end in self._until.items() if end <= now]
        for node in ended:
            del self._until[node]
        return min(self._until.values(), default=float("inf"))


def throttle_metrics(kind: str, throttles: NodeThrottles, now: float) -> dict[str, float]:
    """Kafka's ``<kind>-throttle-time-avg`` and ``-max`` (ms) for ``kind`` produce or fetch."""
    return {
        f"{kind}-throttle-time-avg": throttles.times.avg(now),
        f"{kind}-throttle-time-max": throttles.times.max(now),
    }

"""Whether this broker can reach an active controller, worded for the operator.

A broker that cannot register or heartbeat keeps retrying quietly; without a report an operator sees a silent
process. ``ControllerReach`` is fed every attempt's outcome and answers with the line to log, if any: a warning
every ``interval`` seconds while no controller answers (naming each address tried and why it failed), and one
line when a controller answers again.
"""

from __future__ import annotations

WARN_INTERVAL_S = 5.0


class ControllerReach:
    def __init__(self, interval: float = WARN_INTERVAL_S) -> None:
        self.interval = interval
        self._failing_since: float | None = None
        self._last_warning: float | None = None
        self._tried: dict[str, str] = {}  # "node@address" -> the last failure seen, since the last warning

    def failed(self, now: float, node: int, address: str, reason: str) -> str | None:
        """An attempt failed; the warning to log now, if one is due."""
        if self._failing_since is None:
            self._failing_since = now
        self._tried[f"{node}@{address}"] = reason
        since = self._last_warning if self._last_warning is not None else self._failing_since
        if now - since < self.interval:
            return None
        self._last_warning = now
        tried = ", ".join(f"{target} ({why})" for target, why in sorted(self._tried.items()))
        self._tried = {}
        return f"no active controller reachable for {now - self._failing_since:.0f} s; tried {tried}"

    def succeeded(self, now: float, node: int, address: str) -> str | None:
        """An attempt got an answer; a line to log if a warning was given during the outage."""
        warned = self._last_warning is not None
        outage = now - self._failing_since if self._failing_since is not None else 0.0
        self._failing_since = self._last_warning = None
        self._tried = {}
        return f"reached active controller {node}@{address} after {outage:.0f} s" if warned else None

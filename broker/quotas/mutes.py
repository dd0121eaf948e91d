"""Who the broker processes nothing from, and until when.

A throttled client is held off for its throttle time whether or not it honours ``throttle_time_ms`` (KIP-219):
its further requests wait until the mute has passed, so a client that ignores the throttle gains nothing. Keys are
opaque; the shell uses ``(peer, user, client_id)``, the identity a gRPC channel gives.
"""

from __future__ import annotations

from collections.abc import Hashable


class Mutes:
    """Mute deadlines by key; a mute only ever extends, and an expired one is forgotten."""

    def __init__(self) -> None:
        self._until: dict[Hashable, int] = {}

    def mute(self, key: Hashable, until_ms: int) -> None:
        """Mute ``key`` until ``until_ms``, unless it is already muted until later."""
        current = self._until.get(key)
        if current is None or until_ms > current:
            self._until[key] = until_ms

    def remaining_ms(self, key: Hashable, now_ms: int) -> int:
        """How long ``key`` stays muted after ``now_ms``; 0 if it is not (an expired mute is forgotten)."""
        until = self._until.get(key)
        if until is None:
            return 0
        if until <= now_ms:
            del self._until[key]
            return 0
        return until - now_ms

    def expire(self, now_ms: int) -> int:
        """Forget every mute that has passed (keys never asked about again); return how many."""
        passed = [k for k, until in self._until.items() if until <= now_ms]
        for k in passed:
            del self._until[k]
        return len(passed)

    def __len__(self) -> int:
        return len(self._until)

"""Partition assignors by their `partition.assignment.strategy` names, as in Kafka.

"range" and "roundrobin" run under the eager protocol (every member gives up everything at each rebalance);
"cooperative-sticky" under the cooperative one (only partitions that move are revoked). Kafka's eager "sticky"
assignor is not offered.
"""

from __future__ import annotations

from collections.abc import Iterable

from odradek.client.consumer.assignors.base import Assignor, MemberId, RebalanceProtocol, member_order
from odradek.client.consumer.assignors.range import RangeAssignor
from odradek.client.consumer.assignors.roundrobin import RoundRobinAssignor
from odradek.client.consumer.assignors.sticky import CooperativeStickyAssignor
from odradek.client.errors import ConfigError

ASSIGNORS: dict[str, Assignor] = {
    assignor.name: assignor for assignor in (RangeAssignor(), RoundRobinAssignor(), CooperativeStickyAssignor())
}
DEFAULT_STRATEGY = ("range", "cooperative-sticky")  # Kafka 3.x's default partition.assignment.strategy


def get_assignor(name: str) -> Assignor:
    """The assignor for one strategy name; an unknown name is a ConfigError listing the known ones."""
    try:
        return ASSIGNORS[name.strip()]
    except KeyError:
        raise ConfigError(
            f"partition.assignment.strategy: unknown assignor {name!r}; known: {', '.join(sorted(ASSIGNORS))}"
        ) from None


def get_assignors(names: Iterable[str]) -> list[Assignor]:
    """The assignors for a strategy list, in preference order; empty or repeated names are a ConfigError."""
    out = [get_assignor(name) for name in names]
    if not out:
        raise ConfigError("partition.assignment.strategy: at least one assignor is required")
    if len({a.name for a in out}) != len(out):
        raise ConfigError("partition.assignment.strategy: an assignor is listed twice")
    return out


__all__ = [
    "ASSIGNORS",
    "DEFAULT_STRATEGY",
    "Assignor",
    "CooperativeStickyAssignor",
    "MemberId",
    "RangeAssignor",
    "RebalanceProtocol",
    "RoundRobinAssignor",
    "get_assignor",
    "get_assignors",
    "member_order",
]

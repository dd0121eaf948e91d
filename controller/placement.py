"""Replica placement for new topics: round-robin over brokers, rack-aware when racks are set, leaders spread.

Leaders (the first replica) go round-robin from a per-topic starting broker, so partitions of one topic and
topics with different names spread leadership evenly. With racks, brokers are interleaved by rack before the
round-robin and a partition's replicas prefer racks it does not use yet.
"""

from __future__ import annotations

import zlib
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass


class PlacementError(ValueError):
    """Not enough eligible brokers for the requested replication factor."""


@dataclass(frozen=True, slots=True)
class BrokerSlot:
    broker_id: int
    rack: str = ""


def _interleave_by_rack(brokers: Sequence[BrokerSlot]) -> list[BrokerSlot]:
    """rack a: 1, 2; rack b: 3; rack c: 4, 5 -> 1, 3, 4, 2, 5: neighbours sit on different racks."""
    by_rack: dict[str, list[BrokerSlot]] = defaultdict(list)
    for b in sorted(brokers, key=lambda b: b.broker_id):
        by_rack[b.rack].append(b)
    racks = [by_rack[r] for r in sorted(by_rack)]
    out: list[BrokerSlot] = []
    for i in range(max(len(r) for r in racks)):
        out.extend(r[i] for r in racks if i < len(r))
    return out


def start_index(topic: str, n: int) -> int:
    """A stable per-topic starting broker, so leaders of different topics do not all start on one broker."""
    return zlib.crc32(topic.encode()) % n if n else 0


def assign_replicas(
    topic: str, num_partitions: int, replication_factor: int, brokers: Sequence[BrokerSlot], first_partition: int = 0
) -> list[list[int]]:
    """Replica lists (leader first) for partitions ``first_partition .. first_partition + num_partitions - 1``."""
    if replication_factor < 1:
        raise PlacementError("replication factor must be at least 1")
    if num_partitions < 1:
        raise PlacementError("the number of partitions must be at least 1")
    if replication_factor > len(brokers):
        raise PlacementError(
            f"replication factor {replication_factor} is larger than the {len(brokers)} available brokers"
        )
    rack_aware = any(b.rack for b in brokers)
    ordered = _interleave_by_rack(brokers) if rack_aware else sorted(brokers, key=lambda b: b.broker_id)
    n = len(ordered)
    start = start_index(topic, n)
    assignments = []
    for p in range(first_partition, first_partition + num_partitions):
        leader_index = (start + p) % n
        # The follower offset shifts every n partitions so that replica sets vary, not just rotate.
        shift = 1 + (p // n) % max(n - 1, 1)
        chosen = [ordered[leader_index]]
        candidates = [ordered[(leader_index + shift + k) % n] for k in range(n)]
        candidates = [c for c in candidates if c is not ordered[leader_index]]
        while len(chosen) < replication_factor:
            used_racks = {c.rack for c in chosen}
            pick = next(
                (c for c in candidates if c not in chosen and (not rack_aware or c.rack not in used_racks)),
                None,
            )
            if pick is None:  # every rack used already: take the next broker in order
                pick = next(c for c in candidates if c not in chosen)
            chosen.append(pick)
        assignments.append([c.broker_id for c in chosen])
    return assignments

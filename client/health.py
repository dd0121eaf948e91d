"""Cluster health as a pure function of ``describe_cluster`` and topic descriptions (rpk's ``cluster health``).

Kept free of I/O so the rules can be tested on hand-made descriptions: a partition is offline when it has no
leader or its leader is fenced, under-replicated when its ISR is smaller than its replica set, and under min ISR
when its ISR is smaller than the topic's ``min.insync.replicas`` (1 unless the topic overrides it: describe output
shows topic overrides only, and the broker default is not exposed). Produce with ``acks=all`` fails on the last.

A controller is unavailable when, as a voter other than the leader, it has not fetched from the leader for
``VOTER_STALE_MS`` (followers long-poll every half second, so a live one never comes near): a rolling restart
must not take down a second controller while the first is still away, or the quorum loses its majority. The age
is taken against this machine's clock, so large clock skew between the client and the leader distorts it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from odradek.client.structs import TopicPartition

if TYPE_CHECKING:
    from odradek.client.admin import ClusterDescription, QuorumDescription, TopicInfo

NO_LEADER = -1
VOTER_STALE_MS = 5000
MIN_INSYNC_REPLICAS = "min.insync.replicas"


@dataclass(frozen=True)
class ClusterHealth:
    """``healthy`` is false when any broker is fenced, no controller leads, a controller is not following the
    leader, or any partition is offline, leaderless, under-replicated or under its min ISR."""

    healthy: bool
    controller_id: int
    unavailable_brokers: list[int]
    leaderless_partitions: int
    offline_partitions: list[TopicPartition]
    under_replicated_partitions: list[TopicPartition]
    under_min_isr_partitions: list[TopicPartition]
    unavailable_controllers: list[int] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The stable JSON shape of ``odradek cluster health``."""

        def refs(parts: list[TopicPartition]) -> list[dict[str, Any]]:
            return [{"topic": tp.topic, "partition": tp.partition} for tp in parts]

        return {
            "healthy": self.healthy,
            "controller_id": self.controller_id,
            "unavailable_brokers": list(self.unavailable_brokers),
            "leaderless_count": self.leaderless_partitions,
            "under_replicated_count": len(self.under_replicated_partitions),
            "under_min_isr_count": len(self.under_min_isr_partitions),
            "offline_partitions": refs(self.offline_partitions),
            "under_replicated_partitions": refs(self.under_replicated_partitions),
            "under_min_isr_partitions": refs(self.under_min_isr_partitions),
            "unavailable_controllers": list(self.unavailable_controllers),
        }


def min_insync_replicas(configs: dict[str, str]) -> int:
    """The topic's ``min.insync.replicas`` override, else 1 (a malformed value counts as 1 rather than failing)."""
    try:
        return max(1, int(configs.get(MIN_INSYNC_REPLICAS, "1")))
    except ValueError:
        return 1


def stale_voters(quorum: QuorumDescription, now_ms: int) -> list[int]:
    """Voters other than the leader that have not fetched within VOTER_STALE_MS of ``now_ms`` (or ever)."""
    return sorted(
        v.node_id
        for v in quorum.voters
        if v.node_id != quorum.leader_id and (v.last_fetch_ms <= 0 or now_ms - v.last_fetch_ms > VOTER_STALE_MS)
    )


def compute_health(
    cluster: ClusterDescription,
    topics: Iterable[TopicInfo],
    quorum: QuorumDescription | None = None,
    now_ms: int = 0,
) -> ClusterHealth:
    """Judge the cluster from one ``describe_cluster``, descriptions of every topic (internal ones included) and,
    if given, the controller quorum as seen at ``now_ms``."""
    fenced = sorted(b.node_id for b in cluster.brokers if b.fenced)
    available = {b.node_id for b in cluster.brokers if not b.fenced}
    leaderless = 0
    offline: list[TopicPartition] = []
    under_replicated: list[TopicPartition] = []
    under_min_isr: list[TopicPartition] = []
    for topic in sorted(topics, key=lambda t: t.name):
        min_isr = min_insync_replicas(topic.configs)
        for p in sorted(topic.partitions, key=lambda p: p.partition):
            tp = TopicPartition(topic.name, p.partition)
            if p.leader == NO_LEADER:
                leaderless += 1
            if p.leader not in available:  # no leader, a fenced one, or one no longer registered
                offline.append(tp)
            if p.under_replicated or len(p.isr) < len(p.replicas):
                under_replicated.append(tp)
            if len(p.isr) < min_isr:
                under_min_isr.append(tp)
    controllers = [] if quorum is None else stale_voters(quorum, now_ms)
    healthy = (
        cluster.controller_leader >= 0
        and not controllers
        and not fenced
        and not leaderless
        and not offline
        and not under_replicated
        and not under_min_isr
    )
    return ClusterHealth(
        healthy=healthy,
        controller_id=cluster.controller_leader,
        unavailable_brokers=fenced,
        leaderless_partitions=leaderless,
        offline_partitions=offline,
        under_replicated_partitions=under_replicated,
        under_min_isr_partitions=under_min_isr,
        unavailable_controllers=controllers,
    )

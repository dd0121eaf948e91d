"""Combined faults without a cluster: the pairing is a pure function of the seed that leaves the base schedule as
it was, never draws a pair that cannot be healed together safely, orders the halves so that the heals waiting for
whole ISRs come last, and the nemesis injects the second half away from the first one's node."""

from __future__ import annotations

import threading
from collections import Counter
from pathlib import Path

import pytest

from odradek.chaos import combined
from odradek.chaos.combined import ROLES, combine, conflict, halves, partners, second_choice, spell
from odradek.chaos.history import Fault, Heal, History
from odradek.chaos.nemesis import Nemesis, Step, schedule
from odradek.client.admin import PartitionInfo, TopicInfo
from odradek.deploy.local import DevCluster

KNOWN = list(ROLES)


def test_without_combine_the_schedule_is_unchanged() -> None:
    steps = schedule(7, 60, KNOWN, 3)
    assert combine(steps, 7, KNOWN, 0.0) == steps


def test_pairing_keeps_the_base_schedule_and_depends_only_on_the_seed() -> None:
    base = schedule(11, 120, KNOWN, 2)
    paired = combine(base, 11, KNOWN, 0.5)
    assert paired == combine(schedule(11, 120, KNOWN, 2), 11, KNOWN, 0.5)
    assert paired != combine(base, 12, KNOWN, 0.5)
    for b, p in zip(base, paired, strict=True):
        assert (p.at, p.duration, p.choice) == (b.at, b.duration, b.choice)
        assert b.kind in halves(p.kind)
    combined = sum(len(halves(s.kind)) == 2 for s in paired)
    assert 0.3 * len(paired) < combined < 0.7 * len(paired)


def test_with_probability_one_every_step_with_a_partner_is_combined() -> None:
    kinds = ["kill", "partition", "wipe-disk", "crash-unsynced"]
    paired = combine(schedule(3, 90, kinds, 3), 3, kinds, 1.0)
    assert all(len(halves(s.kind)) == 2 for s in paired)
    assert Counter(h for s in paired for h in halves(s.kind)).keys() == set(kinds)


def test_a_pair_that_cannot_be_healed_together_safely_is_never_drawn() -> None:
    for seed in range(30):
        for step in combine(schedule(seed, 60, KNOWN, 1), seed, KNOWN, 1.0):
            parts = halves(step.kind)
            assert len(parts) == 2 and parts[0] != parts[1]
            a, b = (ROLES[k] for k in parts)
            assert not (a.data_losing and b.data_losing), step.kind
            assert not (a.resource and a.resource == b.resource), step.kind


@pytest.mark.parametrize(
    ("a", "b", "why"),
    [
        ("wipe-disk", "crash-unsynced", "data-losing"),
        ("partition", "bridge", "network"),
        ("isolate-kill-leader", "slow", "network"),
        ("lost-responses", "late-responses", "responses"),
        ("reassign", "decommission", "membership"),
        ("kill", "kill", "same kind"),
        ("late-requests", "kill", "never combined"),
    ],
)
def test_conflicting_pairs_are_named(a: str, b: str, why: str) -> None:
    assert why in (conflict(a, b) or "")
    assert why in (conflict(b, a) or "")


def test_only_data_losing_kinds_have_no_partner() -> None:
    kinds = ["wipe-disk", "crash-unsynced"]
    assert partners("wipe-disk", kinds) == []
    assert combine(schedule(5, 30, kinds, 3), 5, kinds, 1.0) == schedule(5, 30, kinds, 3)
    assert partners("wipe-disk", ["kill", "wipe-disk", "kill"]) == ["kill"]


def test_halves_are_injected_membership_first_and_a_consumer_crash_last() -> None:
    assert spell("kill", "decommission") == "decommission+kill"
    assert spell("partition", "wipe-disk") == "wipe-disk+partition"
    assert spell("kill-consumer", "lost-responses") == "lost-responses+kill-consumer"
    assert spell("pause", "kill-leader") == "pause+kill-leader"  # same rank: the step's own kind first


def test_the_second_half_draws_its_own_choice() -> None:
    choices = [second_choice(c) for c in range(100)]
    assert choices == [second_choice(c) for c in range(100)]
    assert len(set(choices)) == 100 and all(0 <= c < 1 << 30 for c in choices)


class Recording(Nemesis):
    """Records kills and pauses (with the nodes it was told to avoid) instead of sending signals."""

    def __init__(self, cluster: DevCluster, log) -> None:
        super().__init__(cluster, History(), "t", log=log)
        self.done: list[tuple[str, int, frozenset[int]]] = []

    def _kill(self, kind: str, node: int, step: Step):
        return self._fake(kind, node, step)

    def _pause(self, kind: str, node: int, step: Step):
        return self._fake(kind, node, step)

    def _fake(self, kind: str, node: int, step: Step):
        self.done.append((kind, node, frozenset(self.avoid)))
        self._record(Fault(kind, f"node-{node}", "", process="nemesis"), step)

        def heal() -> None:
            self.done.append((f"heal {kind}", node, frozenset(self.avoid)))
            self._record(Heal(kind, f"node-{node}", "", process="nemesis"), step)

        return heal


@pytest.fixture
def cluster(tmp_path: Path) -> DevCluster:
    return DevCluster.create(tmp_path / "c", controllers=1, brokers=2)


def test_the_second_half_avoids_the_first_halfs_node_and_is_healed_first(cluster: DevCluster) -> None:
    lines: list[str] = []
    nemesis = Recording(cluster, lines.append)
    steps = [Step(0.05 * i, "kill+pause", 0.0, choice) for i, choice in enumerate(range(1000, 1010))]
    try:
        nemesis.run(steps, threading.Event())
    finally:
        nemesis.close()
    assert nemesis.injected == nemesis.combined == len(steps)
    assert not nemesis.avoid  # only while the second half is injected
    for i in range(len(steps)):
        (kill, killed, kill_avoid), (pause, paused, pause_avoid), healed, heal_killed = nemesis.done[4 * i : 4 * i + 4]
        assert (kill, pause) == ("kill", "pause")
        assert kill_avoid == frozenset() and pause_avoid == {killed}
        assert paused != killed
        assert healed[:2] == ("heal pause", paused) and heal_killed[:2] == ("heal kill", killed)
    kinds = Counter(e.kind for e in nemesis.history if isinstance(e, Fault))
    assert kinds == {"kill": len(steps), "pause": len(steps)}


def test_a_second_half_without_a_target_leaves_the_first_alone(
    cluster: DevCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(combined, "SECOND_HALF_WAIT_S", 0.5)
    lines: list[str] = []
    nemesis = Recording(cluster, lines.append)
    nemesis._partition_leader = lambda choice: None  # type: ignore[method-assign]  # no leader anywhere
    try:
        nemesis.run([Step(0.0, "kill+pause-leader", 0.0, 1)], threading.Event())
    finally:
        nemesis.close()
    assert [d[0] for d in nemesis.done] == ["kill", "heal kill"]
    assert nemesis.injected == 1 and nemesis.combined == 0
    assert any("pause-leader: no target besides kill's, injected alone" in line for line in lines)


class Leaders:
    """An admin client whose topic has partitions led by the given brokers (0: no leader)."""

    def __init__(self, leaders: list[int]) -> None:
        self.leaders = leaders

    def describe_topics(self, names: list[str]) -> list[TopicInfo]:
        partitions = [
            PartitionInfo(i, leader, 1, [leader], [leader], -1, -1, False) for i, leader in enumerate(self.leaders)
        ]
        return [TopicInfo(names[0], {}, partitions)]

    def close(self) -> None:
        pass


def test_a_leader_the_first_half_holds_is_passed_over_for_the_next_partitions(cluster: DevCluster) -> None:
    nemesis = Recording(cluster, print)
    nemesis.admin.close()
    nemesis.admin = Leaders([5, 0, 5, 6])  # type: ignore[assignment]
    assert nemesis._partition_leader(2) == 5  # alone: the drawn partition's leader, as before
    assert nemesis._partition_leader(1) is None  # alone: a partition without a leader is no target
    nemesis.avoid = {5}
    assert nemesis._partition_leader(2) == 6  # partition 2 is led by 5: partition 3's leader instead
    assert nemesis._partition_leader(0) == 6  # past the leaderless partition 1
    nemesis.avoid = {5, 6}
    assert nemesis._partition_leader(0) is None
    assert "no partition led by another node than [5, 6]" in nemesis.no_target

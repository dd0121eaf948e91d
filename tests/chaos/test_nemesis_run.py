"""The nemesis's schedule loop, without starting nodes: a step whose target is missing is retried until the next
step is due, so a slow leader election after one fault does not silently thin out the faults a run injects."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from odradek.chaos.history import History
from odradek.chaos.nemesis import Nemesis, Step
from odradek.deploy.local import DevCluster


class LateLeader(Nemesis):
    """Reports no partition leader for the first ``misses`` lookups; records kills instead of sending signals."""

    def __init__(self, cluster: DevCluster, misses: int, log) -> None:
        super().__init__(cluster, History(), "t", log=log)
        self.misses = misses
        self.lookups = 0
        self.killed: list[tuple[str, int]] = []

    def _partition_leader(self, choice: int) -> int | None:
        self.lookups += 1
        return None if self.lookups <= self.misses else self._brokers()[0]

    def _kill(self, kind: str, node: int, step: Step):
        self.killed.append((kind, node))
        return lambda: None


def test_a_step_without_a_target_is_retried_until_one_appears(tmp_path: Path) -> None:
    cluster = DevCluster.create(tmp_path / "c", controllers=1, brokers=1)
    lines: list[str] = []
    nemesis = LateLeader(cluster, misses=3, log=lines.append)
    try:
        nemesis.run([Step(0.0, "kill-leader", 0.01, 1), Step(1.5, "kill-leader", 0.01, 2)], threading.Event())
    finally:
        nemesis.close()
    assert nemesis.lookups == 3 + 1 + 1  # three misses, then a leader for each step
    assert nemesis.killed == [("kill-leader", cluster.nodes[1].node_id)] * 2
    assert nemesis.injected == 2
    assert not any("skipped" in line for line in lines)


def test_a_step_is_skipped_only_when_the_next_one_is_due(tmp_path: Path) -> None:
    cluster = DevCluster.create(tmp_path / "c", controllers=1, brokers=1)
    lines: list[str] = []
    nemesis = LateLeader(cluster, misses=1_000_000, log=lines.append)
    steps = [Step(0.0, "kill-leader", 0.01, 1), Step(1.0, "kill-leader", 0.01, 2)]
    started = time.monotonic()
    stop = threading.Event()
    threading.Timer(1.5, stop.set).start()
    try:
        nemesis.run(steps, stop)
    finally:
        nemesis.close()
    assert nemesis.injected == 0 and nemesis.killed == []
    assert nemesis.lookups >= 3  # looked again during the first step's second, not once
    assert any("0.00s kill-leader: no target before the next step was due, skipped" in line for line in lines)
    assert time.monotonic() - started < 5

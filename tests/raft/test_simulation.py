"""Randomized deterministic simulation of the Raft core: 2,500 seeded schedules per run (others: RAFT_SEED_BASE).

Replay one schedule with its trace:   RAFT_SEED=1234 pytest tests/raft/test_simulation.py -k replay -s
Explore other seeds:                  RAFT_SEED_BASE=50000 pytest tests/raft/test_simulation.py
Run the whole suite with a fault on:  RAFT_FAULTS=forget_votes pytest tests/raft/test_simulation.py  (fails)
"""

from __future__ import annotations

import os

import pytest
from raft_sim import Violation, run_seed

from odradek.controller.raft import Faults

SCHEDULES = 2_500
BLOCK = 250
BASE = int(os.environ.get("RAFT_SEED_BASE", "0"))
REPLAY = os.environ.get("RAFT_SEED")
ENV_FAULTS = Faults(**{f: True for f in os.environ.get("RAFT_FAULTS", "").split(",") if f})


@pytest.mark.skipif(REPLAY is not None, reason="replaying a single seed")
@pytest.mark.parametrize("block", range(SCHEDULES // BLOCK))
def test_random_schedules(block: int) -> None:
    for seed in range(BASE + block * BLOCK, BASE + (block + 1) * BLOCK):
        run_seed(seed, ENV_FAULTS)


@pytest.mark.skipif(REPLAY is None, reason="set RAFT_SEED=n to replay one schedule with its trace")
def test_replay() -> None:
    sim = run_seed(int(REPLAY or 0), ENV_FAULTS, trace=True)
    print("\n".join(sim.log))


@pytest.mark.parametrize(
    ("flag", "budget", "caught_as"),
    [
        ("commit_without_majority", 200, "leader completeness"),
        ("forget_votes", 3000, "vote safety"),
    ],
)
def test_simulation_catches_fault(flag: str, budget: int, caught_as: str) -> None:
    """Each deliberate bug must trip a checker within `budget` seeds; otherwise the checkers are blind."""
    faults = Faults(**{flag: True})
    for seed in range(budget):
        try:
            run_seed(seed, faults)
        except Violation as exc:
            assert caught_as in str(exc), str(exc)
            print(f"{flag}: caught at seed {seed}: {str(exc).splitlines()[0]}")
            return
    pytest.fail(f"{budget} schedules with {flag} on broke no invariant")

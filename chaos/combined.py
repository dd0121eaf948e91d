"""Combined faults (``odradek chaos run --combine P``): a step that injects two faults at once and heals both.

Real outages rarely come one at a time: a broker dies while the network is split, a disk is replaced while another
broker restarts. With ``--combine P`` each step of the schedule, with probability P, gets a second fault kind drawn
from the run's other kinds. The step's kind is then spelled ``first+second`` (``kill+partition``), in the order the
halves are injected; the schedule stays a pure function of the seed and is printed up front as before. The pairing
draws from a random stream of its own, so the steps' times, durations, first kinds and choices are exactly those
of the same seed without ``--combine``.

Only pairs that can be healed together safely are drawn (:func:`conflict`):

- at most one data-losing fault (``crash-unsynced``, ``wipe-disk``): two of them could reach both copies of a
  record that ``min.insync.replicas=2`` acknowledged, which a replication factor of 3 does not cover;
- at most one membership fault, one network fault (they share one heal of the whole network) and one response
  fault (they share the proxy's);
- never the same kind twice, and never a kind this table does not know (it might hold what the other half needs):
  ``late-requests`` stays single, as the network faults' heal of the proxy would end it early.

The halves are injected in a fixed order: membership first (it moves replicas while every broker is up), then a
data-losing fault, the other process and disk faults, the response faults, the network faults, and a consumer's
crash last. Their heals run the other way round, so a data-losing fault's heal, which waits until its node is back
in every ISR, and a membership heal, which waits for whole ISRs, come after the other half's node was restarted.
The second half never targets a node the first one holds (``Nemesis.avoid``): a leader, coordinator or broker
already killed, paused, wiped or decommissioned is passed over.
"""

from __future__ import annotations

import dataclasses
import random
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from odradek.chaos.history import Event, Fault, History

if TYPE_CHECKING:
    from odradek.chaos.nemesis import Nemesis, Step

SEPARATOR = "+"
COMBINE_SALT = 0x636F6D62  # the pairing's own random stream: the base schedule's draws stay as they were
SECOND_HALF_WAIT_S = 3.0  # how long the second half looks for a target once the first one is in place


@dataclass(frozen=True, slots=True)
class Role:
    """A fault kind's place in a combined step: ``rank`` orders injection (heals go the other way round),
    ``resource`` is what only one fault at a time may hold, ``data_losing`` marks faults that destroy a replica's
    data."""

    rank: int
    resource: str = ""
    data_losing: bool = False


_NODE = Role(2)
ROLES: dict[str, Role] = {
    "reassign": Role(0, "membership"),
    "decommission": Role(0, "membership"),
    "crash-unsynced": Role(1, data_losing=True),
    "wipe-disk": Role(1, data_losing=True),
    "kill": _NODE,
    "pause": _NODE,
    "kill-leader": _NODE,
    "pause-leader": _NODE,
    "kill-controller": _NODE,
    "kill-coordinator": _NODE,
    "pause-coordinator": _NODE,
    "disk-full": _NODE,
    "clock-skew": _NODE,
    "lost-responses": Role(3, "responses"),
    "late-responses": Role(3, "responses"),
    "partition": Role(4, "network"),
    "bridge": Role(4, "network"),
    "slow": Role(4, "network"),
    "isolate-kill-leader": Role(4, "network"),
    "kill-consumer": Role(5),
}


def conflict(a: str, b: str) -> str | None:
    """Why faults ``a`` and ``b`` may not run at once, or None when they may."""
    if a == b:
        return "the same kind twice"
    unknown = [k for k in (a, b) if k not in ROLES]
    if unknown:
        return f"{unknown[0]} is never combined"
    ra, rb = ROLES[a], ROLES[b]
    if ra.data_losing and rb.data_losing:
        return "two data-losing faults could take every acknowledged copy of a record"
    if ra.resource and ra.resource == rb.resource:
        return f"both are {ra.resource} faults"
    return None


def partners(kind: str, kinds: Sequence[str]) -> list[str]:
    """The kinds of ``kinds`` that may run together with ``kind``, in their order there, each once."""
    return [k for k in dict.fromkeys(kinds) if conflict(kind, k) is None]


def spell(a: str, b: str) -> str:
    """The combined kind, its halves in injection order (ties keep ``a`` first)."""
    first, second = sorted((a, b), key=lambda k: ROLES[k].rank)
    return f"{first}{SEPARATOR}{second}"


def halves(kind: str) -> list[str]:
    return kind.split(SEPARATOR)


def combine(steps: Sequence[Step], seed: int, kinds: Sequence[str], probability: float) -> list[Step]:
    """Give each step a second fault with ``probability`` (0 to 1), drawn among its compatible partners in
    ``kinds``; a step whose kind has none stays single. Every step takes the same draws whatever it gets, so one
    step's pairing never shifts another's."""
    if not 0.0 <= probability <= 1.0:
        raise ValueError(f"the combine probability must be between 0 and 1, not {probability}")
    if probability == 0.0:
        return list(steps)
    rng = random.Random(seed ^ COMBINE_SALT)
    out = []
    for step in steps:
        roll, pick = rng.random(), rng.randrange(1 << 30)
        others = partners(step.kind, kinds)
        if roll < probability and others:
            step = dataclasses.replace(step, kind=spell(step.kind, others[pick % len(others)]))
        out.append(step)
    return out


def second_choice(choice: int) -> int:
    """The second half's random number, derived from the step's (which the first half keeps, as if alone)."""
    return random.Random(choice + (1 << 30)).randrange(1 << 30)


class _Noting(History):
    """Passes the nemesis's events on to the run's history and notes the nodes its faults name."""

    def __init__(self, inner: History) -> None:
        super().__init__()
        self.inner = inner
        self.nodes: set[int] = set()

    def append(self, event: Event) -> None:
        self.inner.append(event)
        if isinstance(event, Fault) and (m := re.fullmatch(r"node-(\d+)", event.target)):
            self.nodes.add(int(m.group(1)))


def inject(nemesis: Nemesis, step: Step) -> Callable[[], None] | None:
    """Inject both halves of a combined step; return the heal of both (None, with nothing injected, while the
    first half has no target). The second half looks for a target that the first does not hold for up to
    ``SECOND_HALF_WAIT_S``; if it finds none, the step goes on with the first half alone, and the log says so."""
    first, second = halves(step.kind)
    noting = _Noting(nemesis.history)
    nemesis.history = noting
    try:
        heal_first = nemesis._inject(dataclasses.replace(step, kind=first))
    finally:
        nemesis.history = noting.inner
    if heal_first is None:
        return None
    later = dataclasses.replace(step, kind=second, choice=second_choice(step.choice))
    nemesis.avoid = set(noting.nodes)
    try:
        heal_second = nemesis._inject(later)
        deadline = time.monotonic() + SECOND_HALF_WAIT_S
        while heal_second is None and time.monotonic() < deadline:
            time.sleep(0.25)
            heal_second = nemesis._inject(later)
    finally:
        nemesis.avoid = set()
    if heal_second is None:
        nemesis.log(f"  {step.at:7.2f}s {second}: no target besides {first}'s, injected alone ({nemesis.no_target})")
        return heal_first
    nemesis.combined += 1

    def heal() -> None:
        try:
            heal_second()
        finally:
            heal_first()

    return heal

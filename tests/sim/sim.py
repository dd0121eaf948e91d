"""One simulated cluster run per seed: the controller, 3-4 brokers, producers, consumers, faults, invariants.

``run_seed`` must be called with an asyncio event loop running (Partition's acks=all futures need one), but
nothing awaits: the sim clock drives everything and a future's result is polled after every step.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from broker_model import SimBroker
from clients import Consumer, Producer
from controller_model import SimController
from invariants import Invariants
from schedule import Schedule
from world import Network, World

_TMP = "/dev/shm" if Path("/dev/shm").is_dir() else None  # fsync on tmpfs costs nothing
CONSUMER_POLL_MS = 25
EXPIRE_EVERY_MS = 50
MAX_STEPS = 400_000


class Sim:
    def __init__(self, world: World, schedule: Schedule, root: Path) -> None:
        self.world = world
        self.s = s = schedule
        self.net = Network(world, s.drop, s.duplicate, s.max_delay_ms)
        self.ctl = SimController(world, s.brokers, s.partitions, s.session_timeout_ms, s.min_isr)
        self.brokers: dict[int, SimBroker] = {}
        for b in range(1, s.brokers + 1):
            self.brokers[b] = SimBroker(b, root, world, self.net, self.ctl, s, self.brokers)
        self.producers = [Producer(i) for i in range(s.partitions)]
        self.consumers = [Consumer(i) for i in range(s.partitions)]
        self.invariants = Invariants(world, self.ctl, self.brokers, self.producers)
        self.end = s.chaos_ms + s.heal_ms

    def run(self) -> None:
        w = self.world
        for b in self.brokers.values():
            b.start(initial=True)
        w.after(EXPIRE_EVERY_MS, "expire sessions", self._expire)
        for i in range(self.s.partitions):
            w.after(w.rng.randint(1, self.s.produce_every_ms), "produce", lambda i=i: self._produce(i))
            w.after(w.rng.randint(1, CONSUMER_POLL_MS), "consume", lambda i=i: self._consume(i))
        w.after(w.rng.randint(1, self.s.fault_every_ms), "fault", self._fault)
        brokers, check = list(self.brokers.values()), self.invariants.check
        while w.steps < MAX_STEPS:
            if w.step() is None or w.now > self.end:
                break
            for b in brokers:
                if b.proc is not None and b.proc.produces:  # most steps complete none: skip the call
                    b.complete_produces()
            check()
        for b in self.brokers.values():
            if b.proc is not None:
                for p in b.proc.partitions.values():
                    p.close()
                    p.log.close()

    # -- periodic ------------------------------------------------------------------------------------------------

    def _expire(self) -> None:
        self.ctl.expire_sessions()
        self.world.after(EXPIRE_EVERY_MS, "expire sessions", self._expire)

    def _produce(self, i: int) -> None:
        if self.world.now < self.s.chaos_ms + self.s.heal_ms // 2:
            self.producers[i].produce(self.world, self.net, self.brokers)
        self.world.after(self.world.rng.randint(1, 2 * self.s.produce_every_ms), "produce", lambda: self._produce(i))

    def _consume(self, i: int) -> None:
        acked = {a.offset: a.value for a in self.producers[i].acked}
        self.consumers[i].poll(self.world, self.brokers, acked)
        self.world.after(self.world.rng.randint(1, 2 * CONSUMER_POLL_MS), "consume", lambda: self._consume(i))

    # -- faults --------------------------------------------------------------------------------------------------

    def _fault(self) -> None:
        w = self.world
        if w.now >= self.s.chaos_ms:
            w.log("HEAL: no more faults")
            self.net.isolated.clear()
            return
        w.after(w.rng.randint(1, 2 * self.s.fault_every_ms), "fault", self._fault)
        weights = self.s.fault_weights()
        if not any(weights.values()):
            return
        kind = w.rng.choices(list(weights), list(weights.values()))[0]
        if kind == "failover":
            self.ctl.fail_over(w.rng.randint(50, 600))
            return
        running = [b for b in self.brokers.values() if b.proc is not None and not b.proc.stopping]
        if not running:
            return
        b = w.rng.choice(running)
        if kind == "clean_stop":
            b.controlled_shutdown()
        elif kind == "isolate":
            ms = w.rng.randint(100, 1_500)
            w.log(f"FAULT B{b.id} isolated for {ms} ms")
            self.net.isolated.add(b.id)
            w.after(ms, "heal isolation", lambda: self.net.isolated.discard(b.id))
        else:
            w.log(f"FAULT B{b.id} {kind}")
            b.stop({"crash": "crash", "crash_lossy": "lossy", "wipe": "wipe"}[kind])
            w.after(w.rng.randint(100, 1_500), f"B{b.id} restart", lambda: b.proc is None and b.start())


def run_seed(seed: int, full_trace: bool = False, ignore: frozenset[str] = frozenset()) -> Sim:
    """Run the schedule of ``seed``; raises Violation (with the seed and the trace) if an invariant breaks, unless
    its key is in ``ignore`` (then it is only logged, to look past a known defect)."""
    asyncio.get_running_loop()  # Partition's futures need one
    world = World(seed, full_trace, ignore)
    schedule = Schedule.draw(world.rng)
    world.log(f"seed {seed}: {schedule}")
    with tempfile.TemporaryDirectory(prefix="odradek-sim-", dir=_TMP) as root:
        sim = Sim(world, schedule, Path(root))
        sim.run()
    return sim

"""The shape of one randomized run (cluster size, network quality, timeouts, fault mix), drawn from its seed."""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True)
class Schedule:
    brokers: int
    partitions: int
    min_isr: int
    chaos_ms: int  # faults happen before this; then the cluster heals and runs ``heal_ms`` more
    heal_ms: int
    drop: float
    duplicate: float
    max_delay_ms: int
    metadata_delay_ms: int  # how late committed metadata may reach a broker (in order)
    session_timeout_ms: int
    heartbeat_ms: int
    lag_max_ms: int
    fetch_timeout_ms: int
    isr_backoff_ms: int
    alter_timeout_ms: int
    flush_every_ms: int
    produce_every_ms: int
    fault_every_ms: int
    # relative weights of the faults
    crash: int
    crash_lossy: int
    wipe: int
    clean_stop: int
    failover: int
    isolate: int

    @staticmethod
    def draw(rng: random.Random) -> Schedule:
        c = rng.choice
        return Schedule(
            brokers=c((3, 3, 4)),
            partitions=rng.randint(1, 3),
            min_isr=c((1, 2, 2)),
            chaos_ms=rng.randint(2_000, 5_000),
            heal_ms=1_500,
            drop=c((0.0, 0.02, 0.1, 0.25)),
            duplicate=c((0.0, 0.05, 0.2)),
            max_delay_ms=c((3, 20, 80, 200)),
            metadata_delay_ms=c((5, 50, 300)),
            session_timeout_ms=c((300, 600, 900)),
            heartbeat_ms=c((50, 100)),
            lag_max_ms=c((100, 300, 600)),
            fetch_timeout_ms=c((50, 150, 400)),
            isr_backoff_ms=c((20, 100)),
            alter_timeout_ms=c((30, 100, 300)),
            flush_every_ms=c((50, 200, 1_000)),
            produce_every_ms=c((5, 20, 60)),
            fault_every_ms=c((150, 400, 1_000)),
            crash=c((0, 2, 4)),
            crash_lossy=c((0, 1, 3)),
            wipe=c((0, 1, 2)),
            clean_stop=c((0, 1, 3)),
            failover=c((0, 1, 3)),
            isolate=c((0, 2, 4)),
        )

    def fault_weights(self) -> dict[str, int]:
        return {
            "crash": self.crash,
            "crash_lossy": self.crash_lossy,
            "wipe": self.wipe,
            "clean_stop": self.clean_stop,
            "failover": self.failover,
            "isolate": self.isolate,
        }

"""The nemesis: a seeded schedule of faults, injected into a running cluster and healed, each recorded in the
history.

Fault kinds (``--faults``):

- ``kill`` / ``pause``: SIGKILL (then restart) or SIGSTOP (then SIGCONT) a random broker;
- ``kill-leader`` / ``pause-leader``: the same to the current leader of a random partition of the workload topic;
- ``kill-controller``: SIGKILL the active controller (the Raft leader), then restart it;
- ``partition``: isolate a random node, or split all nodes into a majority and a minority (needs network
  namespaces);
- ``bridge``: Jepsen's bridge, two halves that reach only one middle node;
- ``slow``: 30% packet loss on a random node's link;
- ``isolate-kill-leader``: cut a partition leader off from every other node (clients still reach it), then
  SIGKILL it while it is still cut off, heal and restart it: whatever it acknowledged alone must not count.

Each fault lasts a random time within the step and is healed before the next one starts, so the cluster keeps a
chance to make progress; the schedule (printed up front) depends only on the seed.
"""

from __future__ import annotations

import random
import signal
import threading
import time
from dataclasses import dataclass

from odradek.chaos.history import Fault, Heal, History
from odradek.chaos.netns import NetnsNetwork
from odradek.client import Admin
from odradek.client.cli.dev_cluster import DevCluster, process_state

PROCESS_FAULTS = ("kill", "pause", "kill-leader", "pause-leader", "kill-controller")
NETWORK_FAULTS = ("partition", "bridge", "slow", "isolate-kill-leader")
ALL_FAULTS = PROCESS_FAULTS + NETWORK_FAULTS


@dataclass(frozen=True, slots=True)
class Step:
    at: float  # seconds from the start
    kind: str
    duration: float
    choice: int  # a random number resolving the target when the step runs (leaders are only known then)


def schedule(seed: int, duration: float, kinds: list[str], interval: float) -> list[Step]:
    """One fault every ``interval`` seconds, lasting 30-70% of it."""
    rng = random.Random(seed)
    steps, at = [], 1.0
    while at + interval <= duration:
        steps.append(
            Step(round(at, 2), rng.choice(kinds), round(interval * rng.uniform(0.3, 0.7), 2), rng.randrange(1 << 30))
        )
        at += interval
    return steps


class Nemesis:
    def __init__(
        self,
        cluster: DevCluster,
        history: History,
        topic: str,
        network: NetnsNetwork | None = None,
        log=print,
    ) -> None:
        self.cluster = cluster
        self.history = history
        self.topic = topic
        self.network = network
        self.log = log
        self.admin = Admin({"bootstrap.servers": cluster.admin_servers, "request.timeout.ms": 3000})
        self.injected = 0

    def close(self) -> None:
        self.admin.close()

    # -- targets -------------------------------------------------------------------------------------------------

    def _brokers(self) -> list[int]:
        return [n.node_id for n in self.cluster.nodes if "broker" in n.roles]

    def _partition_leader(self, choice: int) -> int | None:
        try:
            partitions = self.admin.describe_topic(self.topic).partitions
        except Exception:
            return None
        p = partitions[choice % len(partitions)]
        return p.leader if p.leader > 0 else None

    def _controller_leader(self) -> int | None:
        try:
            leader = self.admin.describe_cluster().controller_leader
        except Exception:
            return None
        return leader if leader > 0 else None

    def _host(self, node_id: int) -> int:
        return [n.node_id for n in self.cluster.nodes].index(node_id)

    # -- running -------------------------------------------------------------------------------------------------

    def run(self, steps: list[Step], stop: threading.Event) -> None:
        start = time.monotonic()
        for step in steps:
            if stop.wait(max(0.0, start + step.at - time.monotonic())):
                return
            heal = self._inject(step)
            if heal is None:
                continue
            self.injected += 1
            stop.wait(step.duration)
            heal()

    def _inject(self, step: Step):
        """Start the fault; return the function that heals it (None if it had no target)."""
        rng = random.Random(step.choice)
        kind = step.kind
        if kind in ("kill", "pause"):
            target = rng.choice(self._brokers())
        elif kind in ("kill-leader", "pause-leader"):
            target = self._partition_leader(step.choice)
        elif kind == "kill-controller":
            target = self._controller_leader()
        elif kind == "isolate-kill-leader":
            target = self._partition_leader(step.choice)
            if target is not None:
                return self._isolate_kill(target, step)
        else:
            return self._network_fault(kind, rng)
        if target is None:
            self.log(f"  {step.at:7.2f}s {kind}: no target now, skipped")
            return None
        if kind.startswith("kill"):
            return self._kill(kind, target, step)
        return self._pause(kind, target, step)

    def _kill(self, kind: str, node: int, step: Step):
        self.cluster.signal(node, signal.SIGKILL)
        self._record(Fault(kind, f"node-{node}", f"SIGKILL for {step.duration}s", process="nemesis"), step)

        def heal() -> None:
            deadline = time.monotonic() + 5
            while process_state(self.cluster.node(node).pid) != "stopped" and time.monotonic() < deadline:
                time.sleep(0.05)
            self.cluster.start(node)
            self._record(Heal(kind, f"node-{node}", "restarted", process="nemesis"), step)

        return heal

    def _pause(self, kind: str, node: int, step: Step):
        self.cluster.signal(node, signal.SIGSTOP)
        self._record(Fault(kind, f"node-{node}", f"SIGSTOP for {step.duration}s", process="nemesis"), step)

        def heal() -> None:
            self.cluster.signal(node, signal.SIGCONT)
            self._record(Heal(kind, f"node-{node}", "SIGCONT", process="nemesis"), step)

        return heal

    def _isolate_kill(self, node: int, step: Step):
        net = self._network("isolate-kill-leader")
        net.isolate(self._host(node))
        detail = f"cut off for {step.duration}s, then SIGKILL"
        self._record(Fault("isolate-kill-leader", f"node-{node}", detail, process="nemesis"), step)

        def heal() -> None:
            self.cluster.signal(node, signal.SIGKILL)
            deadline = time.monotonic() + 5
            while process_state(self.cluster.node(node).pid) != "stopped" and time.monotonic() < deadline:
                time.sleep(0.05)
            net.heal()
            self.cluster.start(node)
            self._record(Heal("isolate-kill-leader", f"node-{node}", "healed and restarted", process="nemesis"), step)

        return heal

    def _network(self, kind: str) -> NetnsNetwork:
        if self.network is None:
            raise RuntimeError(f"fault {kind} needs network namespaces")
        return self.network

    def _network_fault(self, kind: str, rng: random.Random):
        net = self._network(kind)
        nodes = [n.node_id for n in self.cluster.nodes]
        hosts = list(range(len(nodes)))
        if kind == "partition":
            if rng.random() < 0.5:
                victim = rng.choice(hosts)
                net.isolate(victim)
                detail = f"isolated node-{nodes[victim]}"
            else:
                rng.shuffle(hosts)
                minority = hosts[: (len(hosts) - 1) // 2]
                net.partition([minority, hosts[len(minority) :]])
                detail = f"minority {sorted(nodes[h] for h in minority)} | the rest"
        elif kind == "bridge":
            middle = rng.choice(hosts)
            rest = [h for h in hosts if h != middle]
            rng.shuffle(rest)
            half = len(rest) // 2
            net.bridge(rest[:half], middle, rest[half:])
            detail = f"bridge through node-{nodes[middle]}"
        else:
            victim = rng.choice(hosts)
            net.slow(victim, loss_pct=30)
            detail = f"30% loss at node-{nodes[victim]}"
        self.history.append(Fault(kind, "network", detail, process="nemesis"))
        self.log(f"  {kind}: {detail}")

        def heal() -> None:
            net.heal()
            self.history.append(Heal(kind, "network", "healed", process="nemesis"))

        return heal

    def _record(self, event: Fault | Heal, step: Step) -> None:
        self.history.append(event)
        if isinstance(event, Fault):
            self.log(f"  {step.at:7.2f}s {event.kind} {event.target}: {event.detail}")

"""Membership faults for the nemesis: replicas moved and brokers retired, with only the public admin API.

What an operator does to a live cluster is a fault too: every move of a replica is a new follower catching up, a
leader handing over, an ISR that grows then shrinks, and a retired broker that comes back empty under its old id.

- ``reassign``: move a random partition to another replica set of the same size with at least one new broker
  (``Admin.alter_partition_reassignments``, as ``odradek partition reassign``). It draws from the workload's topic
  and, with the group and transactional workloads, from the ``__consumer_offsets`` and ``__transaction_state``
  partitions that the workload's group and transactional ids map to, half the time. The heal waits (60 s at most)
  until the reassignment completed and the ISR is whole.
- ``decommission``: move every replica off a random broker, then stop it (SIGTERM: a controlled shutdown). The heal
  empties its data directories and formats them again, restarts it (it registers again as a fresh broker with its
  old id), moves about half of the workload's and internal partitions it held back onto it, and ends once every ISR
  is whole (60 s at most), so the next fault starts from a healthy cluster. If the replicas could not all be moved
  off within 30 s, the broker is stopped all the same, but keeps its disk: wiping it would lose data.

Both need a broker outside each partition's replica set, so a run with them has one broker more than the
replication factor (``brokers_needed``). The Fault and Heal records name the replica sets before and after
(``chaos-3 [4, 5, 6] -> [7, 5, 6]``), as the cluster described them.
"""

from __future__ import annotations

import random
import signal
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from odradek.broker.groups.partitioner import offsets_partition_for
from odradek.chaos import disks
from odradek.chaos.history import Fault, Heal
from odradek.client.admin import PartitionInfo
from odradek.deploy.local import process_state

if TYPE_CHECKING:
    from odradek.chaos.nemesis import Nemesis, Step

MEMBERSHIP_FAULTS = ("reassign", "decommission")
REPLICATION_FACTOR = 3  # the workload topic's, the internal topics' and the metadata churn's
OFFSETS_TOPIC = "__consumer_offsets"
TRANSACTION_STATE_TOPIC = "__transaction_state"
SETTLE_TIMEOUT_S = 60.0  # the longest a heal waits for reassignments to complete and ISRs to be whole
EVACUATE_TIMEOUT_S = 30.0  # the longest decommission waits for the replicas to leave its broker
STOP_TIMEOUT_S = 15.0  # a controlled shutdown takes up to 10 s; then SIGKILL
POLL_S = 0.25

TopicPartition = tuple[str, int]
Move = tuple[list[int], list[int]]  # replicas before, replicas asked for


def brokers_needed(faults: Iterable[str], brokers: int) -> int:
    """How many brokers a run with ``faults`` needs: one more than the replication factor with membership
    faults, so that every partition has a broker to move to."""
    return max(brokers, REPLICATION_FACTOR + 1) if set(faults) & set(MEMBERSHIP_FAULTS) else brokers


def name(tp: TopicPartition) -> str:
    return f"{tp[0]}-{tp[1]}"


def describe_moves(moves: Mapping[TopicPartition, Move]) -> str:
    """``chaos-3 [4, 5, 6] -> [7, 5, 6]; ...``, sorted: what the Fault and Heal records say was moved."""
    return "; ".join(f"{name(tp)} {old} -> {new}" for tp, (old, new) in sorted(moves.items())) or "none"


def new_replicas(current: Sequence[int], brokers: Sequence[int], rng: random.Random) -> list[int] | None:
    """A replica set of the same size as ``current`` with 1 to all of its brokers replaced by others of
    ``brokers``, in a random order (the first is the preferred leader); None when no other broker exists."""
    outside = [b for b in sorted(brokers) if b not in current]
    if not outside or not current:
        return None
    k = rng.randint(1, min(len(current), len(outside)))
    leaving = set(rng.sample(sorted(current), k))
    target = [b for b in current if b not in leaving] + rng.sample(outside, k)
    rng.shuffle(target)
    return target


def coordinator_partitions(
    group: str | None, transactional_ids: Sequence[str], counts: Mapping[str, int]
) -> list[TopicPartition]:
    """The internal partitions the workload's group and transactional ids live in (its coordinators' logs), as
    the brokers map them (Kafka's hash of the id modulo the partition count); topics not created yet have none."""
    found: list[TopicPartition] = []
    if group and counts.get(OFFSETS_TOPIC):
        found.append((OFFSETS_TOPIC, offsets_partition_for(group, counts[OFFSETS_TOPIC])))
    if counts.get(TRANSACTION_STATE_TOPIC):
        for tid in transactional_ids:
            found.append((TRANSACTION_STATE_TOPIC, offsets_partition_for(tid, counts[TRANSACTION_STATE_TOPIC])))
    return list(dict.fromkeys(found))


def pick_partition(
    workload: Sequence[TopicPartition], coordinators: Sequence[TopicPartition], rng: random.Random
) -> TopicPartition:
    """A coordinator's partition half the time when there are some, else one of the workload's topic."""
    if coordinators and (not workload or rng.random() < 0.5):
        return rng.choice(list(coordinators))
    return rng.choice(list(workload))


def evacuation(
    replicas: Mapping[TopicPartition, Sequence[int]], victim: int, others: Sequence[int], rng: random.Random
) -> dict[TopicPartition, list[int]]:
    """For each partition on ``victim``, its replica list with the victim replaced, in its place, by the least
    loaded broker of ``others`` that the partition lacks (ties drawn at random); partitions with no such broker
    are left out."""
    load = {b: 0 for b in others}
    for rs in replicas.values():
        for b in rs:
            if b in load:
                load[b] += 1
    plan: dict[TopicPartition, list[int]] = {}
    for tp in sorted(replicas):
        rs = list(replicas[tp])
        if victim not in rs:
            continue
        free = [b for b in sorted(load) if b not in rs]
        if not free:
            continue
        least = min(load[b] for b in free)
        taker = rng.choice([b for b in free if load[b] == least])
        load[taker] += 1
        plan[tp] = [taker if b == victim else b for b in rs]
    return plan


def return_plan(
    moved: Mapping[TopicPartition, Move],
    current: Mapping[TopicPartition, Sequence[int]],
    victim: int,
    rng: random.Random,
) -> dict[TopicPartition, list[int]]:
    """About half (at least one) of the partitions ``moved`` off ``victim`` that still exist without it: the broker
    that took its place hands it back."""
    candidates = sorted(tp for tp in moved if tp in current and victim not in current[tp])
    if not candidates:
        return {}
    plan: dict[TopicPartition, list[int]] = {}
    for tp in sorted(rng.sample(candidates, max(1, len(candidates) // 2))):
        old, new = moved[tp]
        takers = [b for b in new if b not in old]
        rs = list(current[tp])
        if len(takers) == 1 and takers[0] in rs:
            plan[tp] = [victim if b == takers[0] else b for b in rs]
    return plan


def in_progress(p: PartitionInfo) -> bool:
    return bool(p.adding_replicas or p.removing_replicas)


def whole(p: PartitionInfo) -> bool:
    """No reassignment under way and every replica in sync."""
    return not in_progress(p) and set(p.isr) == set(p.replicas)


HealFn = Callable[[], None]


class Membership:
    """The membership faults of one nemesis, made with its admin client and recorded in its history."""

    def __init__(self, nemesis: Nemesis) -> None:
        self.nemesis = nemesis
        self.admin = nemesis.admin

    def inject(self, step: Step) -> HealFn | None:
        if step.kind == "reassign":
            return self.reassign(step)
        if step.kind == "decommission":
            return self.decommission(step)
        raise ValueError(f"not a membership fault: {step.kind}")

    # -- cluster state -------------------------------------------------------------------------------------------

    def partitions(self) -> dict[TopicPartition, PartitionInfo] | None:
        """Every partition, internal ones included, from metadata; None (and why, for the log) if the cluster did
        not answer."""
        try:
            topics = self.admin.describe_topics(include_internal=True)
        except Exception as e:
            self.nemesis.no_target = f"describing the topics failed: {e}"
            return None
        return {(t.name, p.partition): p for t in topics for p in t.partitions}

    def _alter(self, plan: Mapping[TopicPartition, Sequence[int]]) -> tuple[set[TopicPartition], str]:
        """Ask for ``plan``; the partitions accepted, and the first refusal's reason ("" if none)."""
        try:
            results = self.admin.alter_partition_reassignments(dict(plan))
        except Exception as e:  # indeterminate: a retry asks for the same again
            return set(), f"reassigning failed: {e}"
        refused = [r for r in results if r.error is not None]
        why = f"{refused[0].topic}-{refused[0].partition}: {refused[0].error} {refused[0].message}" if refused else ""
        return {(r.topic, r.partition) for r in results if r.error is None}, why

    def settle(
        self,
        moves: Mapping[TopicPartition, Sequence[int]],
        timeout: float,
        registered: tuple[int, int] | None = None,
        everywhere: bool = True,
    ) -> tuple[bool, dict[TopicPartition, PartitionInfo], str]:
        """Wait (at most ``timeout``) until the partitions of ``moves`` have the replica sets asked for and are
        whole, and with ``everywhere`` every other partition too; with ``registered`` (node, epoch), also until that
        node registered anew (a higher epoch) and is unfenced. Returns whether it happened, the last partitions seen
        and what still lagged."""
        started = time.monotonic()
        parts: dict[TopicPartition, PartitionInfo] = {}
        lagging = "no answer"
        while True:
            try:
                brokers = self.admin.describe_cluster().brokers
                parts = {
                    (t.name, p.partition): p
                    for t in self.admin.describe_topics(include_internal=True)
                    for p in t.partitions
                }
            except Exception as e:  # a controller may be electing: ask again
                lagging = f"no answer ({e})"
            else:
                watched = sorted(parts.items()) if everywhere else [(tp, parts[tp]) for tp in moves if tp in parts]
                laggards = [
                    f"{name(tp)} {p.replicas} ISR {p.isr}"
                    for tp, p in watched
                    if not whole(p) or set(p.replicas) != set(moves.get(tp, p.replicas))
                ]
                laggards += [f"{name(tp)} gone" for tp in sorted(moves) if tp not in parts]
                if registered is not None:
                    node, epoch = registered
                    if not any(b.node_id == node and b.epoch > epoch and not b.fenced for b in brokers):
                        laggards.insert(0, f"node-{node} not registered anew")
                if not laggards:
                    return True, parts, ""
                lagging = ", ".join(laggards[:4])
            if time.monotonic() - started >= timeout:
                return False, parts, lagging
            time.sleep(POLL_S)

    # -- reassign ------------------------------------------------------------------------------------------------

    def reassign(self, step: Step) -> HealFn | None:
        n = self.nemesis
        rng = random.Random(step.choice)
        parts = self.partitions()
        if parts is None:
            return None
        counts: dict[str, int] = {}
        for topic, _ in parts:
            counts[topic] = counts.get(topic, 0) + 1
        group = n.members.group if n.members is not None else None
        coordinators = [tp for tp in coordinator_partitions(group, n.transactional_ids, counts) if tp in parts]
        workload = sorted(tp for tp in parts if tp[0] == n.topic)
        if not workload and not coordinators:
            n.no_target = f"topic {n.topic} has no partitions"
            return None
        tp = pick_partition(workload, coordinators, rng)
        p = parts[tp]
        if in_progress(p):
            n.no_target = f"{name(tp)} is being reassigned already"
            return None
        target = new_replicas(p.replicas, n._brokers(), rng)
        if target is None:
            raise RuntimeError(f"reassign needs a broker outside {name(tp)}'s replicas {p.replicas}")
        accepted, why = self._alter({tp: target})
        if tp not in accepted:
            n.no_target = why
            return None
        move = {tp: (list(p.replicas), target)}
        detail = f"{describe_moves(move)} (leader {p.leader}, ISR {p.isr}), for {step.duration}s"
        n._record(Fault("reassign", name(tp), detail, process="nemesis"), step)

        def heal() -> None:
            started = time.monotonic()
            done, now, lagging = self.settle({tp: target}, SETTLE_TIMEOUT_S, everywhere=False)
            q = now.get(tp)
            state = f"replicas {q.replicas}, ISR {q.isr}, leader {q.leader}" if q is not None else "gone"
            took = time.monotonic() - started
            detail = f"done: {state} after {took:.1f}s" if done else f"not done after {took:.0f}s: {lagging}"
            n._record(Heal("reassign", name(tp), detail, process="nemesis"), step)
            n.log(f"           reassign {name(tp)} healed: {detail}")

        return heal

    # -- decommission --------------------------------------------------------------------------------------------

    def decommission(self, step: Step) -> HealFn | None:
        n = self.nemesis
        rng = random.Random(step.choice)
        brokers = n._brokers()
        if len(brokers) <= REPLICATION_FACTOR:
            raise RuntimeError(f"decommission needs more than {REPLICATION_FACTOR} brokers, not {brokers}")
        victim = rng.choice(brokers)
        if process_state(n.cluster.node(victim).pid) != "running":
            n.no_target = f"node-{victim} is not running"
            return None
        if self.partitions() is None:
            return None
        epoch = n._broker_epoch(victim)
        moved, left = self._evacuate(victim, [b for b in brokers if b != victim], rng)
        n.cluster.signal(victim, signal.SIGTERM)
        how = "stopped" if self._await_exit(victim) else f"still running after {STOP_TIMEOUT_S:.0f}s: SIGKILL"
        if how != "stopped":
            n.cluster.signal(victim, signal.SIGKILL)
            self._await_exit(victim)
        detail = f"{len(moved)} partitions moved off: {describe_moves(moved)}; SIGTERM, {how}, out for {step.duration}s"
        if left:
            detail += f"; still on it after {EVACUATE_TIMEOUT_S:.0f}s: {', '.join(map(name, left[:5]))}: disk kept"
        n._record(Fault("decommission", f"node-{victim}", detail, process="nemesis"), step)

        def heal() -> None:
            started = time.monotonic()
            if not left:
                disks.wipe(n.cluster.node(victim).config, n.cluster.cluster_id)
                from odradek.chaos.nemesis import ledger_path  # a cycle at import time: nemesis imports us

                ledger_path(n.cluster, victim).unlink(missing_ok=True)  # its inodes are gone
            n.cluster.start(victim)
            # Registered anew before anything moves back, so the moves name the fresh broker.
            self.settle({}, SETTLE_TIMEOUT_S / 2, registered=(victim, epoch), everywhere=False)
            parts = self.partitions() or {}
            current = {tp: p.replicas for tp, p in parts.items() if not in_progress(p)}
            kept = {tp: m for tp, m in moved.items() if tp[0] in (n.topic, OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC)}
            plan = return_plan(kept, current, victim, rng)
            accepted, why = self._alter(plan)
            back = {tp: (list(current[tp]), plan[tp]) for tp in sorted(accepted)}
            remaining = max(1.0, SETTLE_TIMEOUT_S - (time.monotonic() - started))
            done, _, lagging = self.settle(
                {tp: new for tp, (_, new) in back.items()}, remaining, registered=(victim, epoch)
            )
            took = time.monotonic() - started
            detail = (
                f"{'restarted with its disk' if left else 'wiped and formatted, restarted as a fresh broker'}; "
                f"{len(back)} partitions moved back: {describe_moves(back)}"
                f"{f' ({why})' if why else ''}; "
                + (f"every ISR whole after {took:.1f}s" if done else f"not settled after {took:.0f}s: {lagging}")
            )
            n._record(Heal("decommission", f"node-{victim}", detail, process="nemesis"), step)
            n.log(f"           decommission node-{victim} healed: {detail}")

        return heal

    def _evacuate(
        self, victim: int, others: Sequence[int], rng: random.Random
    ) -> tuple[dict[TopicPartition, Move], list[TopicPartition]]:
        """Move every replica off ``victim`` and wait (at most ``EVACUATE_TIMEOUT_S``) until no partition lists it;
        topics the metadata churn creates meanwhile are moved too. Returns the moves asked for and the partitions
        still on the victim."""
        moved: dict[TopicPartition, Move] = {}
        deadline = time.monotonic() + EVACUATE_TIMEOUT_S
        on_victim: list[TopicPartition] = []
        while True:
            parts = self.partitions()
            if parts is not None:
                on_victim = sorted(tp for tp, p in parts.items() if victim in p.replicas)
                if not on_victim:
                    return moved, []
                settled = {tp: p.replicas for tp, p in parts.items() if not in_progress(p)}  # all count for load
                plan = evacuation(settled, victim, others, rng)
                accepted, _ = self._alter(plan)
                for tp in sorted(accepted):
                    moved.setdefault(tp, (list(settled[tp]), plan[tp]))
            if time.monotonic() >= deadline:
                return moved, on_victim
            time.sleep(POLL_S)

    def _await_exit(self, node: int) -> bool:
        deadline = time.monotonic() + STOP_TIMEOUT_S
        while process_state(self.nemesis.cluster.node(node).pid) != "stopped":
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)
        return True

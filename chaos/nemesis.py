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
  SIGKILL it while it is still cut off, heal and restart it: whatever it acknowledged alone must not count;
- ``lost-responses`` / ``late-responses``: a random broker's calls to the controllers (registration, heartbeats,
  AlterPartition, metadata fetches) reach them and are applied, but the answers are dropped (the connection is
  reset after 2.5 s) or arrive 2.5 s late, past the 2 s deadline (through the runner's :class:`FaultProxy`);
- ``crash-unsynced``: SIGKILL a partition leader and emulate a power loss: its segment and index files lose what
  was written since their last fsync (broker/log/durability.py), then restart it;
- ``wipe-disk``: SIGKILL a random broker, empty its data directories and format them again (a replaced disk),
  restart it. The heal of these two data-losing faults ends once the node is back in the ISR of every partition
  it hosts (60 s at most), so that the next such fault never takes more copies than the replication factor covers;
- ``kill-coordinator`` / ``pause-coordinator`` (group, share and transactional workloads): the same to the broker
  leading the group's ``__consumer_offsets`` partition, its coordinator (found with FindCoordinator), or with the
  transactional workload the transaction coordinator of one of its transactional ids (the leader of the id's
  ``__transaction_state`` partition); with the share workload every other one hits instead the share coordinator
  of one of the topic's partitions (the leader of its ``__share_group_state`` partition);
- ``kill-consumer`` (group and share workloads): crash a group member (it stops heartbeating and never leaves the group,
  as a killed process); the heal starts a new member in its place;
- ``disk-full``: fill a random broker's data directory (a tmpfs) so that its writes fail with ENOSPC (blocks its
  segments reserved ahead are released first, with the broker stopped for that moment); the heal frees the space
  and restarts the broker (SIGKILL first if it still runs).
- ``late-requests`` (Kafka workloads): the workload's requests to a partition leader are held (through the
  runner's :class:`FaultProxy`) while answers pass, for at least 1.5 times the clients' request timeout; the heal
  delivers them in order, so the first ones land after their clients gave up, and ends once they landed;
- ``clock-skew``: offset a random broker's wall clock by seconds to minutes, either sign (client/common/clock.py); the
  heal removes the offset once the node saw it, and waits until it saw that too.
- ``reassign`` / ``decommission`` (chaos/membership.py): move a partition to a new replica set, or every replica
  off a broker that is then stopped, wiped and brought back under its old id; the heals wait for whole ISRs.

Each fault lasts a random time within the step and is healed before the next one starts, so the cluster keeps a
chance to make progress; the schedule (printed up front) depends only on the seed. A combined step
(``kill+partition``, chaos/combined.py) injects two faults at once and heals both at its end.
"""

from __future__ import annotations

import random
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import grpc

from odradek.broker.groups.partitioner import offsets_partition_for
from odradek.broker.log.durability import lose_unsynced
from odradek.broker.share.state_coordinator import coordinator_key
from odradek.broker.share.state_records import SharePartitionKey
from odradek.chaos import clock_skew, combined, disks
from odradek.chaos.history import Fault, Heal, History
from odradek.chaos.membership import MEMBERSHIP_FAULTS, Membership
from odradek.chaos.netns import NetnsNetwork
from odradek.chaos.proxy import FaultProxy
from odradek.client import Admin
from odradek.client.common.topic_rules import SHARE_STATE_TOPIC
from odradek.client.errors import ErrorCode
from odradek.client.tls import TlsFiles
from odradek.deploy.local import DevCluster, process_state
from odradek.proto import group_pb2 as gpb
from odradek.proto import group_pb2_grpc

PROCESS_FAULTS = ("kill", "pause", "kill-leader", "pause-leader", "kill-controller")
NETWORK_FAULTS = ("partition", "bridge", "slow", "isolate-kill-leader")
RESPONSE_FAULTS = ("lost-responses", "late-responses")  # need the broker->controller proxy
DISK_FAULTS = ("crash-unsynced", "wipe-disk", "disk-full")
REQUEST_FAULTS = ("late-requests",)  # need the Kafka workloads' connections through the runner's proxy
CLOCK_FAULTS = ("clock-skew",)
CLIENTS = "clients"  # the workload's side of the proxy's links to the brokers' Kafka listeners
CLIENT_TIMEOUT_MS = 2500  # the Kafka workloads' request timeout (librdkafka's socket.timeout.ms) with late-requests
REQUEST_HOLD_MS = CLIENT_TIMEOUT_MS * 3 // 2  # late-requests lasts at least this: past the timeout and its scan
CLOCK_SEEN_TIMEOUT_S = 3.0  # a node looks at its clock offset file about once a second
RESYNC_TIMEOUT_S = 60.0  # the longest a data-losing fault's heal waits for the node to catch up again
TARGET_RETRY_S = 0.25  # how often a step whose target is missing looks again
GROUP_FAULTS = ("kill-coordinator", "pause-coordinator", "kill-consumer")  # need the group workload
COORDINATOR_FAULTS = ("kill-coordinator", "pause-coordinator")  # also with the transactional workload
ALL_FAULTS = (
    PROCESS_FAULTS
    + NETWORK_FAULTS
    + RESPONSE_FAULTS
    + DISK_FAULTS
    + GROUP_FAULTS
    + MEMBERSHIP_FAULTS
    + REQUEST_FAULTS
    + CLOCK_FAULTS
)


class GroupMembers(Protocol):
    """What the nemesis needs of the group workload."""

    group: str

    def kill_member(self, choice: int) -> str | None: ...

    def revive_members(self) -> list[str]: ...


RESPONSE_HOLD_MS = 2500  # above the 2 s deadline of broker->controller calls


def data_dir(cluster: DevCluster, node_id: int) -> Path:
    """Where the runner puts a node's log dirs (and metadata log)."""
    return cluster.node(node_id).directory / "data"


def ledger_path(cluster: DevCluster, node_id: int) -> Path:
    """The node's fsync ledger (``unsafe.testing.fsync.ledger``), outside its data directory."""
    return cluster.node(node_id).directory / "fsync-ledger"


def probe_channel(cluster: DevCluster, address: str) -> grpc.Channel:
    """A channel for the nemesis's own calls to a node: with TLS it presents the cluster's admin client
    certificate and trusts its CA, as every listener of a TLS cluster requires."""
    security = cluster.security_config()
    if not security:
        return grpc.insecure_channel(address)
    files = TlsFiles(security["ssl.ca.location"], security["ssl.certificate.location"], security["ssl.key.location"])
    return grpc.secure_channel(address, files.channel_credentials())


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
        proxy: FaultProxy | None = None,
        members: GroupMembers | None = None,
        transactional_ids: list[str] | None = None,
    ) -> None:
        self.cluster = cluster
        self.members = members  # the group workload's consumers, for the group faults
        self.transactional_ids = transactional_ids or []  # the transactional workload's, for the coordinator faults
        self.history = history
        self.topic = topic
        self.network = network
        self.proxy = proxy  # broker->controller links (nodes named by host index), for response faults
        self.log = log
        self.admin = Admin(
            {"bootstrap.servers": cluster.admin_servers, "request.timeout.ms": 3000, **cluster.security_config()}
        )
        self.injected = 0
        self.no_target = "no target"  # why the last target lookup found none, for the log
        self.avoid: set[int] = set()  # nodes the first half of a combined step holds: no target for the second
        self.combined = 0  # steps injected with both halves (chaos/combined.py)

    def close(self) -> None:
        self.admin.close()

    # -- targets -------------------------------------------------------------------------------------------------

    def _brokers(self) -> list[int]:
        return [n.node_id for n in self.cluster.nodes if "broker" in n.roles and n.node_id not in self.avoid]

    def _partition_leader(self, choice: int) -> int | None:
        try:
            partitions = self.admin.describe_topics([self.topic])[0].partitions  # metadata only: no leader must answer
        except Exception as e:
            self.no_target = f"describing the topic failed: {e}"
            return None
        p = partitions[choice % len(partitions)]
        self.no_target = f"partition {p.partition} has no leader (ISR {list(p.isr)})"
        if p.leader in self.avoid:  # the first half of a combined step holds it: the next partition led elsewhere
            rest = partitions[choice % len(partitions) :] + partitions[: choice % len(partitions)]
            p = next((q for q in rest if q.leader > 0 and q.leader not in self.avoid), p)
            self.no_target = f"no partition led by another node than {sorted(self.avoid)}"
        return p.leader if p.leader > 0 and p.leader not in self.avoid else None

    def _controller_leader(self) -> int | None:
        try:
            leader = self.admin.describe_cluster().controller_leader
        except Exception as e:
            self.no_target = f"describing the cluster failed: {e}"
            return None
        self.no_target = "no controller leader"
        return leader if leader > 0 else None

    def _coordinator(self, choice: int) -> int | None:
        """The broker coordinating the workload's group, or with transactional ids the transaction coordinator of
        one of them (chosen by ``choice``), as the first broker that answers names it. With a share group, every
        other step's target is the share coordinator of one of the topic's partitions instead."""
        if self.members is not None and getattr(self.members, "share", False) and choice % 2:
            return self._share_coordinator(choice // 2)
        if self.members is not None:
            key_type, key = gpb.GROUP, self.members.group
        elif self.transactional_ids:
            key_type, key = gpb.TRANSACTION, self.transactional_ids[choice % len(self.transactional_ids)]
        else:
            raise RuntimeError("the coordinator faults need the group or the transactional workload")
        for n in self.cluster.nodes:
            if not n.broker_port:
                continue
            try:
                with probe_channel(self.cluster, f"{n.host}:{n.broker_port}") as channel:
                    request = gpb.FindCoordinatorRequest(key_type=key_type, keys=[key])
                    found = group_pb2_grpc.GroupCoordinatorStub(channel).FindCoordinator(request, timeout=3)
            except grpc.RpcError:
                continue
            c = found.coordinators[0]
            if c.error == ErrorCode.NONE and c.node_id > 0:
                if c.node_id in self.avoid:  # the first half of a combined step holds it
                    self.no_target = f"the coordinator, node-{c.node_id}, is held by the step's other fault"
                    return None
                return int(c.node_id)
        return None

    def _share_coordinator(self, choice: int) -> int | None:
        """The leader of the ``__share_group_state`` partition keeping the share group's state of one partition of
        the topic (chosen by ``choice``): the share coordinator its share-partition leader reads and writes."""
        assert self.members is not None
        try:
            found = {t.name: t for t in self.admin.describe_topics([self.topic, SHARE_STATE_TOPIC])}
            topic, state = found[self.topic], found[SHARE_STATE_TOPIC]
        except Exception as e:
            self.no_target = f"describing {self.topic} and {SHARE_STATE_TOPIC} failed: {e}"
            return None
        partition = choice % len(topic.partitions)
        key = coordinator_key(SharePartitionKey(self.members.group, bytes.fromhex(topic.topic_id), partition))
        leader = state.partitions[offsets_partition_for(key, len(state.partitions))].leader
        self.no_target = f"the share coordinator of partition {partition} has no leader"
        if leader <= 0 or leader in self.avoid:
            return None
        self.log(f"           the share coordinator of {self.topic}-{partition}: node-{leader}")
        return leader

    def _host(self, node_id: int) -> int:
        return [n.node_id for n in self.cluster.nodes].index(node_id)

    # -- running -------------------------------------------------------------------------------------------------

    def run(self, steps: list[Step], stop: threading.Event) -> None:
        """Inject each step at its time. A step whose target is missing (a leader not yet elected after the last
        fault, a metadata request that timed out on a loaded machine) is retried until the next step is due, so a
        slow recovery does not silently thin the schedule out."""
        start = time.monotonic()
        for i, step in enumerate(steps):
            if stop.wait(max(0.0, start + step.at - time.monotonic())):
                return
            due = start + (steps[i + 1].at if i + 1 < len(steps) else step.at + step.duration)
            heal = self._inject(step)
            while heal is None and time.monotonic() < due:
                if stop.wait(TARGET_RETRY_S):
                    return
                heal = self._inject(step)
            if heal is None:
                self.log(
                    f"  {step.at:7.2f}s {step.kind}: no target before the next step was due, skipped ({self.no_target})"
                )
                continue
            self.injected += 1
            stop.wait(step.duration)
            heal()

    def _inject(self, step: Step):
        """Start the fault; return the function that heals it (None if it had no target)."""
        if combined.SEPARATOR in step.kind:
            return combined.inject(self, step)
        rng = random.Random(step.choice)
        kind = step.kind
        self.no_target = "no target"
        target: int | None
        if kind in MEMBERSHIP_FAULTS:
            return Membership(self).inject(step)
        if kind in ("kill", "pause"):
            target = rng.choice(self._brokers())
        elif kind in ("kill-leader", "pause-leader"):
            target = self._partition_leader(step.choice)
        elif kind == "kill-controller":
            target = self._controller_leader()
        elif kind in ("kill-coordinator", "pause-coordinator"):
            target = self._coordinator(step.choice)
        elif kind == "kill-consumer":
            return self._kill_consumer(step)
        elif kind == "isolate-kill-leader":
            target = self._partition_leader(step.choice)
            if target is not None:
                return self._isolate_kill(target, step)
        elif kind in RESPONSE_FAULTS:
            return self._responses(kind, rng.choice(self._brokers()), step)
        elif kind in REQUEST_FAULTS:  # a leader: the clients surely talk to it (a broker just restarted may lead none)
            return self._late_requests(self._partition_leader(step.choice) or rng.choice(self._brokers()), step)
        elif kind in CLOCK_FAULTS:
            return self._clock_skew(rng.choice(self._brokers()), rng, step)
        elif kind == "crash-unsynced":
            target = self._partition_leader(step.choice) or rng.choice(self._brokers())
            return self._disk_fault(kind, target, step)
        elif kind in DISK_FAULTS:
            return self._disk_fault(kind, rng.choice(self._brokers()), step)
        else:
            return self._network_fault(kind, rng)
        if target is None:
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

    def _kill_consumer(self, step: Step):
        members = self.members
        if members is None:
            raise RuntimeError("fault kill-consumer needs the group workload")
        victim = members.kill_member(step.choice)
        if victim is None:
            return None
        self._record(Fault("kill-consumer", victim, f"crashed for {step.duration}s", process="nemesis"), step)

        def heal() -> None:
            revived = members.revive_members()
            self._record(Heal("kill-consumer", victim, f"replaced ({', '.join(revived)})", process="nemesis"), step)

        return heal

    def _stop(self, node: int) -> None:
        """SIGKILL (if running) and wait until the process is gone."""
        if process_state(self.cluster.node(node).pid) != "stopped":
            self.cluster.signal(node, signal.SIGKILL)
        deadline = time.monotonic() + 5
        while process_state(self.cluster.node(node).pid) != "stopped" and time.monotonic() < deadline:
            time.sleep(0.05)

    def _responses(self, kind: str, node: int, step: Step):
        proxy = self.proxy
        if proxy is None:
            raise RuntimeError(f"fault {kind} needs the broker->controller proxy")
        host = self._host(node)
        before = dict(proxy.response_counts)
        if kind == "lost-responses":
            proxy.lose_responses(host, hold_ms=RESPONSE_HOLD_MS)
            detail = f"controllers' answers to it lost (reset after {RESPONSE_HOLD_MS} ms) for {step.duration}s"
        else:
            proxy.delay_responses(host, RESPONSE_HOLD_MS)
            detail = f"controllers' answers to it {RESPONSE_HOLD_MS} ms late for {step.duration}s"
        self._record(Fault(kind, f"node-{node}", detail, process="nemesis"), step)

        def heal() -> None:
            proxy.heal(links=False, slow=False)
            counts = ", ".join(f"{k} {v - before[k]}" for k, v in proxy.response_counts.items() if v - before[k])
            detail = f"answers flow again ({counts or 'no answer was due'})"
            self._record(Heal(kind, f"node-{node}", detail, process="nemesis"), step)
            self.log(f"           {kind} node-{node} healed: {detail}")

        return heal

    def _late_requests(self, node: int, step: Step):
        """The workload's requests to ``node`` are held until the heal, at least REQUEST_HOLD_MS after the start,
        so the first of them land after their clients timed out and gave up (the client proxy's links; answers
        pass). The heal delivers them in order, as TCP retransmits once an outage ends, and ends once they landed."""
        proxy = self.proxy
        if proxy is None:
            raise RuntimeError("fault late-requests needs the runner's proxy for the clients' connections")
        host = self._host(node)
        before, apis = dict(proxy.request_counts), proxy.held_apis.copy()
        proxy.hold_requests(host, sources=[CLIENTS])
        started = time.monotonic()
        lasts = max(step.duration, REQUEST_HOLD_MS / 1000)
        detail = f"clients' requests to it held for {lasts}s (their timeout {CLIENT_TIMEOUT_MS} ms)"
        self._record(Fault("late-requests", f"node-{node}", detail, process="nemesis"), step)

        def heal() -> None:
            time.sleep(max(0.0, started + lasts - time.monotonic()))  # a step shorter than the hold runs longer
            proxy.heal(links=False, slow=False, responses=False)
            settled = proxy.wait_requests_landed(10)
            n = {k: v - before[k] for k, v in proxy.request_counts.items()}
            held = ", ".join(f"{api} x{count}" for api, count in (proxy.held_apis - apis).most_common())
            detail = (
                f"held {n['held']}, landed {n['landed']} ({n['landed_after_close']} after their client closed the "
                f"connection), dropped {n['dropped']}{'' if settled else ', some still held'}"
                + (f"; {held}" if held else "")
            )
            self._record(Heal("late-requests", f"node-{node}", detail, process="nemesis"), step)
            self.log(f"           late-requests node-{node} healed: {detail}")

        return heal

    def _clock_skew(self, node: int, rng: random.Random, step: Step):
        """Offset ``node``'s wall clock (client/common/clock.py) by seconds-minutes; the heal waits (bounded) until the
        node saw the offset, removes it, and waits until the node saw that too, so the fault surely happened."""
        path = clock_skew.offset_file(self.cluster, node)
        log_file = self.cluster.node(node).log_file
        offset = clock_skew.draw_offset(rng)
        mark = clock_skew.log_size(log_file)
        clock_skew.skew(path, offset)
        detail = f"wall clock {offset:+.1f} s for {step.duration}s"
        self._record(Fault("clock-skew", f"node-{node}", detail, process="nemesis"), step)

        def seen(seconds: float, since: int) -> float | None:
            """How long after the start of the wait the node logged that it saw ``seconds`` (None: not in time)."""
            started = time.monotonic()
            while time.monotonic() - started < CLOCK_SEEN_TIMEOUT_S:
                if clock_skew.seen_by(log_file, seconds, since):
                    return time.monotonic() - started
                time.sleep(0.1)
            return None

        def heal() -> None:
            skewed = seen(offset, mark)
            back_mark = clock_skew.log_size(log_file)
            clock_skew.unskew(path)
            back = seen(0.0, back_mark)
            saw = "the node saw it" if skewed is not None else f"the node did not log it in {CLOCK_SEEN_TIMEOUT_S:.0f}s"
            removal = f"and its removal {back:.1f}s after" if back is not None else "but not its removal"
            detail = f"offset removed; {saw} {removal}"
            self._record(Heal("clock-skew", f"node-{node}", detail, process="nemesis"), step)
            self.log(f"           clock-skew node-{node} healed: {detail}")

        return heal

    def _disk_fault(self, kind: str, node: int, step: Step):
        directory = data_dir(self.cluster, node)
        if kind == "disk-full":
            if not disks.is_mount(directory):
                raise RuntimeError(f"fault {kind} needs the runner's tmpfs data directories")
            running = process_state(self.cluster.node(node).pid) != "stopped"
            if running:
                self.cluster.signal(node, signal.SIGSTOP)  # no write may race with releasing its reservations
            try:
                freed = disks.release_reservations(directory)
                taken = disks.fill(directory)
            finally:
                if running:
                    self.cluster.signal(node, signal.SIGCONT)
            detail = f"data directory full ({taken >> 20} MiB filler, {freed >> 10} KiB reserved blocks freed)"
            detail += f" for {step.duration}s"
        else:
            epoch = self._broker_epoch(node)
            self._stop(node)
            if kind == "crash-unsynced":
                losses = lose_unsynced(ledger_path(self.cluster, node), [directory])
                lost = sum(loss.size - loss.durable for loss in losses if loss.path.endswith(".log"))
                detail = f"SIGKILL, power loss: {len(losses)} files cut back, {lost} unsynced segment bytes dropped"
            else:
                disks.wipe(self.cluster.node(node).config, self.cluster.cluster_id)
                ledger_path(self.cluster, node).unlink(missing_ok=True)  # its inodes are gone
                detail = "SIGKILL, data directories emptied and formatted again"
            detail += f", down for {step.duration}s"
        self._record(Fault(kind, f"node-{node}", detail, process="nemesis"), step)

        def heal() -> None:
            if kind == "disk-full":
                self._stop(node)
                disks.unfill(directory)
            self.cluster.start(node)
            detail = "restarted" if kind == "disk-full" else f"restarted, {self._wait_in_sync(node, epoch)}"
            self._record(Heal(kind, f"node-{node}", detail, process="nemesis"), step)

        return heal

    def _broker_epoch(self, node: int) -> int:
        """The node's registration epoch now (-1 if unknown): its next incarnation registers with a higher one."""
        try:
            return next((b.epoch for b in self.admin.describe_cluster().brokers if b.node_id == node), -1)
        except Exception:
            return -1

    def _wait_in_sync(self, node: int, old_epoch: int, timeout: float = RESYNC_TIMEOUT_S) -> str:
        """Wait (bounded) until a node whose disk lost data is back in the ISR of every partition it hosts, as an
        operator replacing disks one at a time waits for re-replication: a data-losing fault on a second replica
        before then takes more copies than the replication factor allows for (three wipes within seconds on a
        loaded machine destroyed every copy of a partition). Only metadata that already holds the node's new
        registration counts: until then the ISR still lists the lost incarnation, which the registration removes.
        Says how long it took, or what still lagged."""
        started = time.monotonic()
        lagging: list[str] = ["(its new registration not seen)"]
        while time.monotonic() - started < timeout:
            try:
                # The topics are read after the registration is seen, from the admin's node: at least as new.
                brokers = self.admin.describe_cluster().brokers
                registered = any(b.node_id == node and b.epoch > old_epoch and not b.fenced for b in brokers)
                topics = self.admin.describe_topics(include_internal=True) if registered else []
            except Exception:  # the cluster may still be electing: ask again
                time.sleep(0.2)
                continue
            if registered:
                lagging = [
                    f"{t.name}-{p.partition}"
                    for t in topics
                    for p in t.partitions
                    if node in p.replicas and node not in p.isr
                ]
                if not lagging:
                    return f"back in every ISR after {time.monotonic() - started:.1f}s"
            time.sleep(0.2)
        return f"not back in the ISR of {', '.join(sorted(lagging)[:5])} after {timeout:.0f}s"

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
        if self.proxy is not None:  # the proxied broker->controller links cross the runner's own link
            self.proxy.isolate(self._host(node))
        detail = f"cut off for {step.duration}s, then SIGKILL"
        self._record(Fault("isolate-kill-leader", f"node-{node}", detail, process="nemesis"), step)

        def heal() -> None:
            self.cluster.signal(node, signal.SIGKILL)
            deadline = time.monotonic() + 5
            while process_state(self.cluster.node(node).pid) != "stopped" and time.monotonic() < deadline:
                time.sleep(0.05)
            net.heal()
            if self.proxy is not None:
                self.proxy.heal(responses=False)
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
        # The proxied broker->controller links cross the runner's own link, which no netns fault cuts: the same
        # cut is made in the proxy (whose nodes are the host indices too).
        cuts: list[NetnsNetwork | FaultProxy] = [net] if self.proxy is None else [net, self.proxy]
        if kind == "partition":
            if rng.random() < 0.5:
                victim = rng.choice(hosts)
                for cut in cuts:
                    cut.isolate(victim)
                detail = f"isolated node-{nodes[victim]}"
            else:
                rng.shuffle(hosts)
                minority = hosts[: (len(hosts) - 1) // 2]
                for cut in cuts:
                    cut.partition([minority, hosts[len(minority) :]])
                detail = f"minority {sorted(nodes[h] for h in minority)} | the rest"
        elif kind == "bridge":
            middle = rng.choice(hosts)
            rest = [h for h in hosts if h != middle]
            rng.shuffle(rest)
            half = len(rest) // 2
            for cut in cuts:
                cut.bridge(rest[:half], middle, rest[half:])
            detail = f"bridge through node-{nodes[middle]}"
        else:
            victim = rng.choice(hosts)
            net.slow(victim, loss_pct=30)
            detail = f"30% loss at node-{nodes[victim]}"
        self.history.append(Fault(kind, "network", detail, process="nemesis"))
        self.log(f"  {kind}: {detail}")

        def heal() -> None:
            net.heal()
            if self.proxy is not None:
                self.proxy.heal(responses=False)
            self.history.append(Heal(kind, "network", "healed", process="nemesis"))

        return heal

    def _record(self, event: Fault | Heal, step: Step) -> None:
        self.history.append(event)
        if isinstance(event, Fault):
            self.log(f"  {step.at:7.2f}s {event.kind} {event.target}: {event.detail}")

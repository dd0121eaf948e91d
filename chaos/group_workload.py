"""The group workload (``odradek chaos run --workload group``): the producers of :class:`Workload`, and consumers
in one group instead of the assign readers.

Each member subscribes, records where it starts each partition it is given (``Assigned``: the committed offset it
fetched, or the log start), every record it processes (``Processed``, with its generation), then commits the
next offsets of what it processed, synchronously, and records each acknowledged commit (``Commit``); now and then
it records the group's committed offsets of its partitions as OffsetFetch answers them (``Committed``). The nemesis
may crash a member (:meth:`GroupWorkload.kill_member`: it stops heartbeating and never leaves, as a killed
process) and start a new incarnation in its place (:meth:`GroupWorkload.revive_members`). At the end, with every
member stopped, a final member of the same group reads from the committed offsets to the end of every partition,
commits, and records the final committed offsets for the checker.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Mapping
from typing import Any

from odradek.chaos.history import Assigned, Commit, Committed, History, Processed, Subscribed
from odradek.chaos.workload import Workload, _text, skip_records
from odradek.client import Admin, Consumer, TopicPartition
from odradek.client.consumer.consumer import ConsumerRebalanceListener

GROUP = "chaos-group"
SESSION_MS = 4000  # a crashed member's partitions move after this (the brokers allow it: GROUP_NODE_SETTINGS)
COMMITTED_EVERY = 2.0  # seconds between a member's OffsetFetch observations


class GroupWorkload(Workload):
    def __init__(
        self,
        servers: str,
        topic: str,
        partitions: int,
        history: History,
        producers: int = 2,
        consumers: int = 2,
        rate: float = 300.0,
        max_seconds: float = 3600.0,
        group: str = GROUP,
        security: Mapping[str, Any] | None = None,
        bug: str = "",
    ) -> None:
        super().__init__(
            servers, topic, partitions, history, producers, consumers, rate, max_seconds, security, bug=bug
        )
        self.group = group
        self._down = [threading.Event() for _ in range(consumers)]  # set: the member is crashed, not yet replaced
        self._crash = [threading.Event() for _ in range(consumers)]  # set: the running incarnation must crash now
        self._names = [f"g{i}.0" for i in range(consumers)]

    def member_config(self, name: str) -> dict[str, object]:
        return self.client_config(
            {
                "group.id": self.group,
                "client.id": name,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "session.timeout.ms": SESSION_MS,
                "heartbeat.interval.ms": 500,
                "fetch.max.wait.ms": 200,
                "request.timeout.ms": 5000,
            }
        )

    # -- the nemesis's side --------------------------------------------------------------------------------------

    def kill_member(self, choice: int) -> str | None:
        """Crash a running member (chosen by ``choice``); returns its name, None if none runs."""
        running = [i for i, down in enumerate(self._down) if not down.is_set()]
        if not running:
            return None
        index = running[choice % len(running)]
        self._down[index].set()
        self._crash[index].set()
        return self._names[index]

    def revive_members(self) -> list[str]:
        """Start a new incarnation in place of every crashed member; returns the slots (``g<i>``) revived."""
        revived = []
        for i, down in enumerate(self._down):
            if down.is_set():
                down.clear()
                revived.append(f"g{i}")
        return revived

    # -- members -------------------------------------------------------------------------------------------------

    def _consume(self, index: int) -> None:
        for incarnation in range(1_000_000):
            if self._stop.is_set() or time.monotonic() >= self.deadline:
                return
            while self._down[index].is_set():  # crashed: wait for the nemesis to start the replacement
                if self._stop.wait(0.2) or time.monotonic() >= self.deadline:
                    return
            name = self._names[index] = f"g{index}.{incarnation}"
            self._crash[index].clear()
            try:
                self._member(name, self._crash[index])
            except Exception:  # the consumer could not even start (no broker reachable): a new incarnation
                self._stop.wait(0.5)

    def _member(self, name: str, crash: threading.Event) -> None:
        consumer = Consumer(self.member_config(name))
        crashed = False
        try:
            starts = _Starts(consumer)
            consumer.subscribe([self.topic], starts)
            self.history.append(Subscribed(name, self.group, self.topic, process=name))
            observed = time.monotonic()
            while not self._stop.is_set() and time.monotonic() < self.deadline:
                if crash.is_set():
                    crashed = True
                    return
                try:
                    self._poll_process_commit(consumer, name, starts, crash)
                    if time.monotonic() - observed >= COMMITTED_EVERY:
                        observed = time.monotonic()
                        self._observe_committed(consumer, name, consumer.assignment())
                except _Crashed:
                    crashed = True
                    return
                except Exception:  # mid-failover or mid-rebalance (CommitFailedError...): the next poll goes on
                    self._stop.wait(0.2)
        finally:
            if crashed:
                _crash(consumer)
            else:
                with contextlib.suppress(Exception):
                    consumer.close()

    def _poll_process_commit(
        self, consumer: Consumer, name: str, starts: _Starts, crash: threading.Event | None = None
    ) -> None:
        """One poll; where it started the partitions it was given, then the records it returned are processed
        (recorded), then committed. A crash ordered meanwhile strikes between processing and commit, the window that
        makes a new owner process records again."""
        records = consumer.poll(200)
        starts.record(name, self.history)
        if not records:
            return
        generation = consumer.group_metadata().generation_id
        for r in skip_records(records) if self.bug == "skip-records" else records:
            self.history.append(
                Processed(name, r.topic, r.partition, r.offset, _text(r.value), generation, process=name)
            )
        ends: dict[int, int] = {}
        for r in records:  # with skip-records past the records passed over too: the member's position is
            ends[r.partition] = max(ends.get(r.partition, 0), r.offset + 1)
        if crash is not None and crash.is_set():
            raise _Crashed
        consumer.commit({TopicPartition(self.topic, p): o for p, o in ends.items()})
        for p, o in ends.items():
            self.history.append(Commit(name, self.topic, p, o, generation, process=name))

    def _observe_committed(
        self, consumer: Consumer, name: str, partitions: set[TopicPartition], final: bool = False
    ) -> None:
        if not partitions:
            return
        for tp, meta in consumer.committed(partitions).items():
            offset = -1 if meta is None else meta.offset
            self.history.append(Committed(name, tp.topic, tp.partition, offset, final, process=name))

    # -- the end -------------------------------------------------------------------------------------------------

    def final_read(self, timeout: float = 120.0) -> None:
        """The final member (every other one is stopped): from the committed offsets to each high watermark,
        processing and committing as the others did, then the final committed offsets. Also the plain final read
        of every partition from its start, which the data checks need."""
        super().final_read(timeout)
        with Admin(self.client_config({"request.timeout.ms": 10000})) as admin:
            ends = {p.partition: p.high_watermark for p in admin.describe_topic(self.topic).partitions}
        name = "final-member"
        tps = {TopicPartition(self.topic, p) for p in range(self.partitions)}
        with Consumer(self.member_config(name)) as consumer:
            starts = _Starts(consumer)
            consumer.subscribe([self.topic], starts)
            self.history.append(Subscribed(name, self.group, self.topic, process=name))
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                try:
                    self._poll_process_commit(consumer, name, starts)
                    if consumer.assignment() == tps and all(consumer.position(tp) >= ends[tp.partition] for tp in tps):
                        self._observe_committed(consumer, name, tps, final=True)
                        return
                except Exception:
                    time.sleep(0.2)
        raise TimeoutError(f"the final member did not reach the high watermarks {ends} in {timeout:.0f}s")


class _Starts(ConsumerRebalanceListener):
    """Notes each partition the member is given, in which generation, for ``record`` once the poll that gave it
    returns: the callback may run on the client's loop, where the consumer's blocking calls are refused."""

    def __init__(self, consumer: Consumer) -> None:
        self.consumer = consumer
        self.given: dict[TopicPartition, int] = {}  # partition -> generation

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        self.given.update(dict.fromkeys(assigned, self.consumer.group_metadata().generation_id))

    def record(self, name: str, history: History) -> None:
        """Record where the member starts the partitions given since the last call, before it processes any of
        their records: their committed offset, the one the consumer fetched when given them (only this member may
        commit them now, and it has processed nothing there yet), or the log start where none is committed
        (``auto.offset.reset``). Nothing if the lookup fails: the checker then holds the member to its first record
        there."""
        if not self.given:
            return
        given, self.given = self.given, {}
        try:
            committed = self.consumer.committed(set(given))
            starts = {tp: meta.offset for tp, meta in committed.items() if meta is not None}
            unset = [tp for tp in given if tp not in starts]
            if unset:
                starts.update(self.consumer.beginning_offsets(unset))
        except Exception:  # mid-failover
            return
        for tp, offset in sorted(starts.items()):
            if tp in given:
                history.append(Assigned(name, tp.topic, tp.partition, offset, given[tp], process=name))


class _Crashed(Exception):
    """The nemesis crashed this member between processing and commit."""


def _crash(consumer: Consumer) -> None:
    """Stop the client as a SIGKILL would, as far as the group can tell: heartbeats and fetches stop, nothing is
    committed (auto-commit is off) and no LeaveGroup is sent, so the coordinator finds out by the session timeout."""
    with contextlib.suppress(Exception):
        consumer.close(leave_group=False)

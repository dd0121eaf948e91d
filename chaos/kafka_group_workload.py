"""The group workload over the Kafka listener (``odradek chaos run --workload kafka-group``): the producers of
:class:`KafkaWorkload`, and librdkafka consumers in one group (subscribe, manual synchronous commits of what they
processed) instead of the assign readers, recording what chaos/group_workload.py records, for the same checks.

Each member is a process (chaos/kafka_member.py) that a thread of this workload starts and whose events it copies
into the history. ``kill-consumer`` SIGKILLs one (:meth:`kill_member`): it stops heartbeating, commits nothing and
never leaves, so the coordinator finds out at the session timeout, and its partitions' next owner processes again
what it processed but had not committed. The heal starts a new incarnation in its place (:meth:`revive_members`).
At the end, with every member stopped, a final member of the same group, in this process, reads from the committed
offsets to the end of every partition, commits, and records the final committed offsets.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from typing import IO, Any

from confluent_kafka import Consumer, KafkaException

from odradek.chaos.group_workload import GROUP, SESSION_MS
from odradek.chaos.history import History, from_json_line
from odradek.chaos.kafka_client import watermarks
from odradek.chaos.kafka_member import Member
from odradek.chaos.kafka_workload import KafkaWorkload

LEAVE_S = 30.0  # a stopping member has this long to leave the group before it is killed


class KafkaGroupWorkload(KafkaWorkload):
    member_module = "odradek.chaos.kafka_member"  # what a member process runs

    def __init__(
        self,
        servers: str,
        topic: str,
        partitions: int,
        history: History,
        producers: int = 2,
        consumers: int = 2,
        rate: float = 200.0,
        max_seconds: float = 3600.0,
        group: str = GROUP,
        security: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(servers, topic, partitions, history, producers, consumers, rate, max_seconds, security)
        self.group = group
        self._lock = threading.Lock()  # the slots below, shared with the nemesis's thread
        self._down = [False] * consumers  # crashed, not yet replaced
        self._processes: list[subprocess.Popen[str] | None] = [None] * consumers
        self._names = [f"g{i}.0" for i in range(consumers)]
        self._leave = self._stop  # makes the members leave (the share workload's drain outlasts its producers)

    def member_spec(self, name: str) -> dict[str, Any]:
        """What a member process reads on stdin."""
        return {"config": self.member_config(), "name": name, "group": self.group, "topic": self.topic}

    def member_config(self) -> dict[str, Any]:
        """Without callbacks: a member process gets it as JSON."""
        return {
            "bootstrap.servers": self.servers,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": SESSION_MS,
            "heartbeat.interval.ms": 500,
            "fetch.wait.max.ms": 200,
            "socket.timeout.ms": 10000,
            **self.security,
        }

    # -- the nemesis's side --------------------------------------------------------------------------------------

    def kill_member(self, choice: int) -> str | None:
        """SIGKILL a running member (chosen by ``choice``); returns its name, None if none runs."""
        with self._lock:
            running = [i for i, p in enumerate(self._processes) if p is not None and not self._down[i]]
            if not running:
                return None
            index = running[choice % len(running)]
            self._down[index] = True
            process = self._processes[index]
            assert process is not None
            process.kill()
            return self._names[index]

    def revive_members(self) -> list[str]:
        """Let a new incarnation start in place of every crashed member; returns the slots (``g<i>``) revived."""
        with self._lock:
            revived = [f"g{i}" for i, down in enumerate(self._down) if down]
            self._down = [False] * len(self._down)
        return revived

    # -- members -------------------------------------------------------------------------------------------------

    def _consume(self, index: int) -> None:
        """Run slot ``index``'s incarnations one after another: a new one when the last crashed (once revived) or
        exited by itself, until the workload stops."""
        for incarnation in range(1_000_000):
            while self._members_running() and self._is_down(index):
                self._leave.wait(0.2)
            if not self._members_running():
                return
            process = self._spawn(index, f"g{index}.{incarnation}")
            if process is None:
                continue
            copier = threading.Thread(target=self._copy_events, args=(process.stdout,), daemon=True)
            copier.start()
            while process.poll() is None:
                if self._leave.wait(0.2):
                    assert process.stdin is not None
                    with contextlib.suppress(OSError):
                        process.stdin.close()  # the member leaves the group and exits
                    try:
                        process.wait(LEAVE_S)
                    except subprocess.TimeoutExpired:
                        process.kill()
                        process.wait()
            copier.join()
            if not self._is_down(index):
                self._leave.wait(0.5)  # it exited by itself: a new incarnation

    def _members_running(self) -> bool:
        return not self._leave.is_set() and time.monotonic() < self.deadline

    def _is_down(self, index: int) -> bool:
        with self._lock:
            return self._down[index]

    def _spawn(self, index: int, name: str) -> subprocess.Popen[str] | None:
        """Start an incarnation, unless the slot crashed or the workload stopped meanwhile."""
        spec = self.member_spec(name)
        with self._lock:
            if self._down[index] or self._leave.is_set():
                return None
            process = subprocess.Popen(
                [sys.executable, "-m", self.member_module],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            self._processes[index] = process
            self._names[index] = name
        assert process.stdin is not None
        process.stdin.write(json.dumps(spec) + "\n")
        process.stdin.flush()
        return process

    def _copy_events(self, lines: IO[str]) -> None:
        """A member's events into the history, until its stdout closes (a killed member's last line may be cut)."""
        for line in lines:
            if line.endswith("\n"):
                self.history.append(from_json_line(line))

    # -- the end -------------------------------------------------------------------------------------------------

    def stop(self, timeout: float = 120.0) -> None:
        super().stop(timeout)
        with self._lock:  # a slot's thread that outlived the join must not leave its process behind
            for process in self._processes:
                if process is not None and process.poll() is None:
                    process.kill()

    def final_read(self, timeout: float = 120.0) -> None:
        """The plain final read of every partition from its start (the data checks need it), then the final member
        (every other one is stopped): from the committed offsets to each high watermark, processing and committing
        as the others did, then the final committed offsets."""
        super().final_read(timeout)
        deadline = time.monotonic() + timeout
        probe = Consumer(self.reader_config("watermarks"))
        try:
            ends = watermarks(probe, self.topic, self.partitions)
        finally:
            probe.close()
        member = Member(self.member_config(), "final-member", self.group, self.topic, self.history.append)
        try:
            member.subscribe()
            while time.monotonic() < deadline:
                try:
                    if member.step() or member.partitions() != set(ends):
                        continue
                    committed = member.observe_committed(set(ends))
                    if all(end == 0 or committed[p] >= end for p, end in ends.items()):
                        member.observe_committed(set(ends), final=True)
                        return
                except KafkaException:
                    time.sleep(0.2)
        finally:
            member.close()
        raise TimeoutError(f"the final member did not reach the high watermarks {ends} in {timeout:.0f}s")

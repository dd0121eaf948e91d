"""The share group workload over the Kafka listener (``odradek chaos run --workload kafka-share``): the producers of
:class:`KafkaWorkload`, and librdkafka share consumers (KIP-932) in one share group instead of readers, each a
process (chaos/kafka_share_member.py) that accepts, releases, rejects or holds past its lock what it receives, and
records every delivery and acknowledgement for chaos/share_checker.py.

The member slots are the group workload's: ``kill-consumer`` SIGKILLs a member holding its locks, and the heal
starts a new incarnation in its place. A share group starts at the end of each partition when it first fetches it
(``share.auto.offset.reset=latest``), so before the producers start, a warm-up writes records (recorded as the
``warm`` producer's) until a member has received and accepted one of every partition: every record produced after
that is the group's, and the accept stored the share-partition's start. At the end the producers stop first; then
the members drain, accepting everything they receive, until every acknowledged record is finished (accepted,
rejected or archived at the delivery count limit, as the checker judges it) or nothing changed for a while; then
they close, and the plain final read records the log for the checker.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Mapping
from typing import Any

from confluent_kafka import Producer

from odradek.chaos.history import Ack, History, Send, ShareAck
from odradek.chaos.kafka_client import LOG, located
from odradek.chaos.kafka_group_workload import KafkaGroupWorkload
from odradek.chaos.share_checker import BUGS, WARM, unfinished
from odradek.chaos.share_settings import DELIVERY_LIMIT, LOCK_MS

GROUP = "chaos-share"
WARM_UP_S = 60.0
DRAIN_S = 150.0  # the longest the drain lasts
DRAIN_IDLE_S = 4 * LOCK_MS / 1000 + 15  # the drain ends once the unfinished records stopped changing this long


class KafkaShareWorkload(KafkaGroupWorkload):
    member_module = "odradek.chaos.kafka_share_member"
    share = True  # the nemesis's coordinator faults also strike the share coordinators

    def __init__(
        self,
        servers: str,
        topic: str,
        partitions: int,
        history: History,
        producers: int = 2,
        consumers: int = 3,
        rate: float = 50.0,
        max_seconds: float = 3600.0,
        group: str = GROUP,
        security: Mapping[str, Any] | None = None,
        seed: int = 1,
        bug: str = "",
    ) -> None:
        if bug and bug not in BUGS:
            raise ValueError(f"unknown share workload bug {bug!r}; choose from {', '.join(BUGS)}")
        super().__init__(servers, topic, partitions, history, producers, consumers, rate, max_seconds, group, security)
        self.seed = seed
        self.bug = bug
        self._leave = threading.Event()  # the members outlast the producers: they drain first
        self._draining = False
        self.drain_summary = ""

    def member_config(self) -> dict[str, Any]:
        return {
            "bootstrap.servers": self.servers,
            "socket.timeout.ms": 10000,
            "max.poll.records": 50,
            **self.security,
        }

    def member_spec(self, name: str) -> dict[str, Any]:
        spec = super().member_spec(name)
        with self._lock:
            drain = self._draining
        return {**spec, "seed": self.seed, "lock_ms": LOCK_MS, "bug": self.bug, "drain": drain}

    # -- the start -----------------------------------------------------------------------------------------------

    def start(self) -> None:
        """Members first, then the warm-up, then the producers."""
        producers, members = self._threads[: self._producers], self._threads[self._producers :]
        for t in members:
            t.start()
        self._warm_up(WARM_UP_S)
        for t in producers:
            t.start()

    @property
    def _producers(self) -> int:
        return len(self._threads) - len(self._processes)

    def _warm_up(self, timeout: float) -> None:
        """Write a warm record to every partition not yet started until each has one accepted by a member."""
        producer = Producer(self.client_config({"client.id": WARM, "acks": "all", "linger.ms": 0, "logger": LOG}))
        deadline = time.monotonic() + timeout
        n = 0
        try:
            while (waiting := self._not_started()) and time.monotonic() < deadline:
                for p in sorted(waiting):
                    value = f"{WARM}-{p}-{n:05d}"
                    self.history.append(Send(value, self.topic, p, process=WARM))

                    def delivered(error: Any, message: Any, value: str = value) -> None:
                        if error is None:
                            self.history.append(Ack(value, self.topic, *located(message), process=WARM))

                    producer.produce(self.topic, value.encode(), partition=p, on_delivery=delivered)
                    n += 1
                producer.flush(10)
                self._stop.wait(0.5)
        finally:
            producer.flush(10)
        if waiting:
            raise TimeoutError(f"partitions {sorted(waiting)} of the share group did not start in {timeout:.0f}s")

    def _not_started(self) -> set[int]:
        """The partitions none of whose warm records a member accepted yet."""
        accepted = {
            e.partition
            for e in self.history.events()
            if isinstance(e, ShareAck) and e.kind == "accept" and e.result == "ok" and e.topic == self.topic
        }
        return set(range(self.partitions)) - accepted

    # -- the end -------------------------------------------------------------------------------------------------

    def stop(self, timeout: float = 120.0) -> None:
        """Producers first (they flush), then the drain, then the members leave."""
        self._stop.set()
        for t in self._threads[: self._producers]:
            t.join(timeout)
        self._drain()
        self._leave.set()
        for t in self._threads[self._producers :]:
            t.join(timeout)
        with self._lock:
            for process in self._processes:
                if process is not None and process.poll() is None:
                    process.kill()

    def _drain(self) -> None:
        """Every member (and every later incarnation) accepts all it receives, until no acknowledged record is left
        unfinished, or the unfinished ones stopped changing for DRAIN_IDLE_S."""
        with self._lock:
            self._draining = True
            for process in self._processes:
                if process is not None and process.poll() is None and process.stdin is not None:
                    with contextlib.suppress(OSError, ValueError):
                        process.stdin.write("drain\n")
                        process.stdin.flush()
        started = changed = time.monotonic()
        left = unfinished(self.history.events(), self.topic, DELIVERY_LIMIT, LOCK_MS)
        while left and time.monotonic() - started < DRAIN_S and time.monotonic() - changed < DRAIN_IDLE_S:
            time.sleep(1.0)
            now = unfinished(self.history.events(), self.topic, DELIVERY_LIMIT, LOCK_MS)
            if now != left:
                left, changed = now, time.monotonic()
        self.drain_summary = (
            f"share drain: {time.monotonic() - started:.1f}s, {len(left)} acknowledged records left unfinished"
        )

    def final_read(self, timeout: float = 120.0) -> None:
        """The plain final read of every partition (the log's checks and the delivered values' need it)."""
        super(KafkaGroupWorkload, self).final_read(timeout)

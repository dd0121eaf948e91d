"""A member of the share group workload (``--workload kafka-share``): a librdkafka share consumer (KIP-932) in
explicit acknowledgement mode that records every record it receives (``ShareDelivered``, with the broker's delivery
count) and every acknowledgement it sends (``ShareAck`` invoke) and what the broker answered (``ShareAck`` ok or
fail, from the acknowledgement commit callback).

What it does with a record is drawn, seeded by the record and its delivery count, so a rerun decides alike: mostly
ACCEPT, sometimes RELEASE (delivered again) or REJECT (never again); a few *poison* records are always released,
until the delivery count limit archives them. Now and then it holds one record of a poll past its acquisition lock
and only then accepts it: the broker must refuse that late accept (the record went back to the group). Every
acknowledgement is committed with ``commit_sync`` right away, so each answer arrives in the call that sent it.
After ``drain`` on stdin it accepts everything it receives (the workload's end).

Each member runs as its own process (``python -m odradek.chaos.kafka_share_member``) so that ``kill-consumer``
can SIGKILL it holding locks: it reads its settings as one JSON line on stdin, writes its events as JSON lines on
stdout (flushed before each commit, so a delivery is in the pipe before its acknowledgement is sent), and closes
(committing what is pending, leaving the group) when stdin closes.
"""

from __future__ import annotations

import contextlib
import json
import random
import sys
import threading
import zlib
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import AcknowledgeType, KafkaError, KafkaException, Message, ShareConsumer

from odradek.chaos.history import Event, ShareAck, ShareDelivered, to_json_line
from odradek.chaos.kafka_client import LOG, POLL_S, describe, located, text
from odradek.chaos.share_checker import DROP_EVERY

RELEASE_P = 0.08  # of the records that are not poison: released (delivered again)
REJECT_P = 0.03  # rejected (never delivered again)
HOLD_P = 0.05  # of the polls: one record held past its lock, then accepted (late: must be refused)
POISON_EVERY = 50  # one value in about this many is always released, until archived at the limit
HOLD_LOCKS = 1.5  # a held record is accepted this many lock durations after it was received
COMMIT_S = 10.0
TYPES = {"accept": AcknowledgeType.ACCEPT, "release": AcknowledgeType.RELEASE, "reject": AcknowledgeType.REJECT}


def poison(value: str) -> bool:
    return zlib.crc32(value.encode("utf-8", "surrogateescape")) % POISON_EVERY == 0


def delivery_count(m: Message) -> int:
    """The broker's count of the record's deliveries, this one included (0: librdkafka gave none)."""
    return m.delivery_count() or 0


def decide(seed: int, value: str, delivery_count: int) -> str:
    """accept, release or reject: the same for the same record's same delivery in every run of ``seed``."""
    if poison(value):
        return "release"
    r = random.Random(f"{seed}/{value}/{delivery_count}").random()
    return "release" if r < RELEASE_P else "reject" if r < RELEASE_P + REJECT_P else "accept"


class ShareMember:
    """One incarnation of a share group member."""

    def __init__(
        self,
        config: Mapping[str, Any],
        name: str,
        group: str,
        topic: str,
        record: Callable[[Event], None],
        flush: Callable[[], None] = lambda: None,
        seed: int = 1,
        lock_ms: int = 3000,
        bug: str = "",
    ) -> None:
        self.name = name
        self.topic = topic
        self.record = record
        self.flush = flush
        self.seed = seed
        self.hold_s = lock_ms / 1000 * HOLD_LOCKS
        self.bug = bug
        self.draining = threading.Event()  # accept everything from now on
        self.rng = random.Random(f"{seed}/{name}")
        self.pending: dict[tuple[int, int], deque[tuple[str, int]]] = {}  # sent, not answered: (kind, count)
        self.consumer = ShareConsumer(
            {**config, "group.id": group, "client.id": name, "share.acknowledgement.mode": "explicit", "logger": LOG}
        )
        self.consumer.set_acknowledgement_commit_callback(self._answered)

    def subscribe(self) -> None:
        self.consumer.subscribe([self.topic])

    def step(self, stop: threading.Event) -> int:
        """One poll: record what it delivered, acknowledge it (a held record after its lock). Returns how many."""
        records = [m for m in self.consumer.poll(POLL_S) if m.error() is None]
        if not records:
            return 0
        plan: list[tuple[Message, str]] = []
        for m in records:
            p, offset = located(m)
            value, count = text(m.value()), delivery_count(m)
            if self.bug == "drop-records" and offset % DROP_EVERY == 0:
                plan.append((m, "drop"))  # accepted, never processed: the checker must find it lost
                continue
            self.record(ShareDelivered(self.name, self.topic, p, offset, value, count, process=self.name))
            plan.append((m, "accept" if self.draining.is_set() else decide(self.seed, value, count)))
        held: list[tuple[Message, str]] = []
        if not self.draining.is_set() and self.rng.random() < HOLD_P:
            candidates = [i for i, (m, kind) in enumerate(plan) if kind == "accept"]
            if candidates:
                held = [plan.pop(self.rng.choice(candidates))]
        self._acknowledge(plan)
        if held:
            stop.wait(self.hold_s)  # the lock expires meanwhile (a stopping member accepts at once)
            self._acknowledge(held)
        return len(records)

    def _acknowledge(self, plan: list[tuple[Message, str]]) -> None:
        for m, kind in plan:
            p, offset = located(m)
            sent = "accept" if kind == "drop" else kind
            if kind != "drop":
                count = delivery_count(m)
                self.record(ShareAck(self.name, self.topic, p, offset, sent, "invoke", count, process=self.name))
                self.pending.setdefault((p, offset), deque()).append((sent, count))
            try:
                self.consumer.acknowledge(m, TYPES[sent])
            except RuntimeError as e:  # IllegalStateException: not in flight any more, nothing sent
                if kind != "drop":
                    self.pending[(p, offset)].pop()
                    self._answer(p, offset, sent, count, "fail", str(e), True)
        self.flush()
        with contextlib.suppress(KafkaException):  # no answer yet: the callback may still bring it
            self.consumer.commit_sync(COMMIT_S)
        self.flush()

    def _answered(self, offsets: dict[Any, set[int]], error: KafkaException | None) -> None:
        """The acknowledgement commit callback: the answer to the oldest unanswered acknowledgement of each offset."""
        refused = error is not None and bool(error.args) and error.args[0].code() == KafkaError.INVALID_RECORD_STATE
        reason = "" if error is None else describe(error.args[0]) if error.args else str(error)
        for tp, answered in offsets.items():
            for offset in sorted(answered):
                queue = self.pending.get((tp.partition, offset))
                if not queue:
                    continue  # a dropped record's (drop-records)
                kind, count = queue.popleft()
                if error is None:
                    self._answer(tp.partition, offset, kind, count, "ok")
                else:
                    self._answer(tp.partition, offset, kind, count, "fail", reason, refused)

    def _answer(
        self, p: int, offset: int, kind: str, count: int, result: str, error: str = "", definite: bool = False
    ) -> None:
        self.record(ShareAck(self.name, self.topic, p, offset, kind, result, count, error, definite, process=self.name))

    def run(self, stop: threading.Event) -> None:
        """Consume until ``stop``."""
        self.subscribe()
        while not stop.is_set():
            try:
                self.step(stop)
            except KafkaException:
                stop.wait(0.2)

    def close(self) -> None:
        with contextlib.suppress(KafkaException, RuntimeError):
            self.consumer.close()
        self.flush()


def main() -> None:
    spec = json.loads(sys.stdin.readline())
    stop = threading.Event()

    def record(event: Event) -> None:
        sys.stdout.write(to_json_line(event) + "\n")

    member = ShareMember(
        spec["config"],
        spec["name"],
        spec["group"],
        spec["topic"],
        record,
        sys.stdout.flush,
        spec["seed"],
        spec["lock_ms"],
        spec["bug"],
    )
    if spec["drain"]:
        member.draining.set()

    def commands() -> None:
        for line in sys.stdin:
            if line.strip() == "drain":
                member.draining.set()
        stop.set()

    threading.Thread(target=commands, daemon=True).start()
    try:
        member.run(stop)
    finally:
        member.close()


if __name__ == "__main__":
    main()

"""A member of the Kafka group workload's consumer group: librdkafka subscribes, the member records every record it
processes (``Processed``), then commits the next offsets of what it processed, synchronously, and records each
partition whose commit was acknowledged (``Commit``); every 2 s it records the committed offsets of its partitions
as OffsetFetch answers them (``Committed``).

Each member runs as its own process (``python -m odradek.chaos.kafka_member``), so that ``kill-consumer`` can crash
it with a real SIGKILL: librdkafka cannot be stopped in place without leaving the group. The process reads its
settings as one JSON line on stdin, writes its events as JSON lines on stdout, flushed before every commit (what
it processed is in the pipe before the commit that covers it is sent), and leaves the group when stdin closes.
The workload's final member runs the same code in the runner's process.
"""

from __future__ import annotations

import contextlib
import json
import sys
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import OFFSET_INVALID, Consumer, KafkaException, TopicPartition

from odradek.chaos.history import Commit, Committed, Event, Processed, Subscribed, to_json_line
from odradek.chaos.kafka_client import LOG, POLL_S, READ_BATCH, located, text

COMMITTED_EVERY = 2.0  # seconds between a member's OffsetFetch observations
CGMD_MAGIC = b"CGMDv2:"


def generation(consumer: Consumer) -> int:
    """The member's group generation. confluent-kafka has no call for it, but keeps it in the consumer group metadata
    it serialises for ``send_offsets_to_transaction`` (librdkafka's ``CGMDv2:`` format: the magic, then the
    generation as a native int32). -1 if that format is not found."""
    metadata = consumer.consumer_group_metadata()
    if isinstance(metadata, bytes) and metadata.startswith(CGMD_MAGIC) and len(metadata) >= len(CGMD_MAGIC) + 4:
        return int.from_bytes(metadata[len(CGMD_MAGIC) : len(CGMD_MAGIC) + 4], sys.byteorder, signed=True)
    return -1


class Member:
    """One incarnation of a member."""

    def __init__(
        self,
        config: Mapping[str, Any],
        name: str,
        group: str,
        topic: str,
        record: Callable[[Event], None],
        flush: Callable[[], None] = lambda: None,
    ) -> None:
        self.name = name
        self.group = group
        self.topic = topic
        self.record = record
        self.flush = flush
        self.consumer = Consumer({**config, "group.id": group, "client.id": name, "logger": LOG})

    def subscribe(self) -> None:
        self.consumer.subscribe([self.topic])
        self.record(Subscribed(self.name, self.group, self.topic, process=self.name))

    def step(self) -> int:
        """One poll; the records it returned are processed (recorded), then committed. Returns how many."""
        ends: dict[int, int] = {}
        records = self.consumer.consume(READ_BATCH, POLL_S)
        current = generation(self.consumer)
        for m in records:
            if m.error() is not None:
                continue  # informational: librdkafka goes on by itself
            p, offset = located(m)
            value = text(m.value())
            self.record(Processed(self.name, self.topic, p, offset, value, current, process=self.name))
            ends[p] = max(ends.get(p, 0), offset + 1)
        if not ends:
            return 0
        self.flush()
        offsets = [TopicPartition(self.topic, p, o) for p, o in sorted(ends.items())]
        try:
            done = self.consumer.commit(offsets=offsets, asynchronous=False)
        except KafkaException:  # mid-failover or mid-rebalance: the next owner processes these again
            return len(ends)
        for tp in done or []:
            if tp.error is None:
                self.record(Commit(self.name, self.topic, tp.partition, tp.offset, current, process=self.name))
        self.flush()
        return len(ends)

    def partitions(self) -> set[int]:
        return {tp.partition for tp in self.consumer.assignment()}

    def observe_committed(self, partitions: set[int], final: bool = False) -> dict[int, int]:
        """The group's committed offsets of ``partitions`` (-1: none), recorded as ``Committed``."""
        if not partitions:
            return {}
        asked = [TopicPartition(self.topic, p) for p in sorted(partitions)]
        found = {}
        for tp in self.consumer.committed(asked, timeout=5):
            offset = -1 if tp.offset == OFFSET_INVALID else tp.offset
            found[tp.partition] = offset
            self.record(Committed(self.name, self.topic, tp.partition, offset, final, process=self.name))
        self.flush()
        return found

    def run(self, stop: threading.Event) -> None:
        """Process and commit until ``stop``; then leave the group."""
        self.subscribe()
        observed = time.monotonic()
        while not stop.is_set():
            try:
                self.step()
                if time.monotonic() - observed >= COMMITTED_EVERY:
                    observed = time.monotonic()
                    self.observe_committed(self.partitions())
            except KafkaException:
                stop.wait(0.2)

    def close(self) -> None:
        with contextlib.suppress(KafkaException, RuntimeError):
            self.consumer.close()


def main() -> None:
    spec = json.loads(sys.stdin.readline())
    stop = threading.Event()

    def await_eof() -> None:
        sys.stdin.read()
        stop.set()

    threading.Thread(target=await_eof, daemon=True).start()

    def record(event: Event) -> None:
        sys.stdout.write(to_json_line(event) + "\n")

    member = Member(spec["config"], spec["name"], spec["group"], spec["topic"], record, sys.stdout.flush)
    try:
        member.run(stop)
    finally:
        member.close()


if __name__ == "__main__":
    main()

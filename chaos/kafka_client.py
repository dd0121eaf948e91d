"""What the Kafka-listener workloads share: librdkafka (confluent-kafka) settings, a count of the errors the client
reported, the assign readers and the final passes that read every partition to its end.

The readers use ``auto.offset.reset = error``: librdkafka would otherwise move a reader whose offset the broker
refused back to the log start without telling, which the history could not tell from a read going backwards. A
refused offset, a detected log truncation or a fatal error instead starts a new consumer over from offset 0, with
a recorded ``Seek``, as the gRPC workloads' readers do after an error; the count says how often it happened.

This module imports no odradek client code: the group workload's members, separate processes, load it too.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Message, TopicPartition

from odradek.chaos.history import FinalRead, History, ProducerEpoch, Read, Seek, UncommittedRead

# librdkafka's own log lines (connection failures, mostly) go here rather than to stderr; errors are counted.
LOG = logging.getLogger("odradek.chaos.kafka")
LOG.addHandler(logging.NullHandler())
LOG.propagate = False  # expected under faults: attach a handler to this logger to see them

# Reader errors after which a new consumer starts over, rather than librdkafka going on by itself.
START_OVER = frozenset({KafkaError._AUTO_OFFSET_RESET, KafkaError._LOG_TRUNCATION, KafkaError.OFFSET_OUT_OF_RANGE})
NOTABLE_KEPT = 5  # messages of offset resets and fatal errors kept for the run's log
READ_BATCH = 500  # records per consume() call
POLL_S = 0.2
T = TypeVar("T")


def text(value: bytes | None) -> str:
    """A record's value as the history keeps it (round-trips arbitrary bytes through JSON)."""
    return "" if value is None else value.decode("utf-8", "surrogateescape")


UNKNOWN_OFFSET = -1
"""The offset of a successful delivery report that carries none (seen from librdkafka's idempotent producer under
the late-requests fault); the checker then checks where the record is, not where it was acknowledged."""


def located(message: Message) -> tuple[int, int]:
    """A record's partition and offset (librdkafka sets both on records; a delivery report may lack the offset)."""
    partition, offset = message.partition(), message.offset()
    if partition is None:
        raise ValueError(f"librdkafka gave a record without a partition: {message!r}")
    return partition, UNKNOWN_OFFSET if offset is None or offset < 0 else offset


def describe(error: KafkaError) -> str:
    return f"{error.name()}: {error.str()}"


# librdkafka's lines for a producer id and epoch taken: from InitProducerId (GETPID), and after an epoch bump that
# needed no request (DRAIN: "All partitions drained, bumped epoch to PID{...}").
_ACQUIRED = re.compile(r"(?:Acquired PID|bumped epoch to PID)\{Id:(\d+),Epoch:(\d+)\}")


class EpochWatch:
    """An idempotent producer's librdkafka logger (``debug`` ``eos``): records each producer id and epoch it
    takes (at start, and at each epoch bump) as a ``ProducerEpoch`` event, and passes every line on to ``LOG``.
    The checker needs them: after an epoch bump librdkafka renumbers its unacknowledged messages, so one already
    written is written again."""

    def __init__(self, name: str, history: History) -> None:
        self.name = name
        self.history = history

    def log(self, level: int, fmt: str, *args: Any) -> None:
        """confluent-kafka's call: ``args`` are the facility, the client's name and the message."""
        if len(args) == 3 and args[0] in ("GETPID", "DRAIN") and (m := _ACQUIRED.search(str(args[2]))):
            self.history.append(ProducerEpoch(int(m.group(1)), int(m.group(2)), process=self.name))
        LOG.log(level, fmt, *args)


class ClientErrors:
    """How many errors of each kind librdkafka reported (``error_cb`` and consumer error events), and of the other
    setbacks a workload counts, for the run's log: most are expected under faults (brokers down, timeouts), while an
    offset reset or a fatal error points at the broker (the summary quotes the first few)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[str] = Counter()
        self._notable: list[str] = []  # the first messages of errors that point at the broker

    def note(self, error: KafkaError, where: str = "") -> None:
        self.count(where + error.name() + (" (fatal)" if error.fatal() else ""))
        if error.fatal() or error.code() in START_OVER:
            with self._lock:
                if len(self._notable) < NOTABLE_KEPT:
                    self._notable.append(f"{where}{describe(error)}")

    def count(self, what: str) -> None:
        with self._lock:
            self._counts[what] += 1

    def summary(self) -> str:
        with self._lock:
            counts = ", ".join(f"{name} x{n}" for name, n in self._counts.most_common()) or "none"
            return "; ".join([counts, *self._notable])

    def callbacks(self, on_fatal: Callable[[], None] | None = None) -> dict[str, Any]:
        """Config keys that route the client's logs to ``LOG`` and count its errors (``on_fatal``: also called on a
        fatal one, after which the client is unusable)."""

        def on_error(error: KafkaError) -> None:
            self.note(error)
            if on_fatal is not None and error.fatal():
                on_fatal()

        return {"logger": LOG, "error_cb": on_error}


def reader_settings(name: str, committed: bool = False) -> dict[str, Any]:
    """An assign reader's settings. librdkafka wants a ``group.id`` even for a consumer that never joins: each
    reader has its own and commits nothing."""
    return {
        "group.id": f"chaos-reader-{name}",
        "client.id": name,
        "enable.auto.commit": False,
        "auto.offset.reset": "error",
        "isolation.level": "read_committed" if committed else "read_uncommitted",
        "fetch.wait.max.ms": 200,
    }


def start_offsets(topic: str, partitions: int) -> list[TopicPartition]:
    return [TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)]


class _StartOver(Exception):
    """The reader's position is no longer trustworthy: a new consumer starts from offset 0."""


def read_concurrently(
    config: Mapping[str, Any],
    name: str,
    topic: str,
    partitions: int,
    history: History,
    running: Callable[[], bool],
    errors: ClientErrors,
) -> None:
    """Read every partition from offset 0 for as long as ``running()``, recording each record as a ``Read`` (a
    new consumer, after an error, starts over: its ``Seek`` to 0 is recorded)."""
    while running():
        consumer = Consumer(dict(config))
        try:
            consumer.assign(start_offsets(topic, partitions))
            for p in range(partitions):
                history.append(Seek(name, topic, p, 0, process=name))
            while running():
                for m in consumer.consume(READ_BATCH, POLL_S):
                    error = m.error()
                    if error is None:
                        history.append(Read(name, topic, *located(m), text(m.value()), process=name))
                        continue
                    errors.note(error, f"{name}: ")
                    if error.fatal() or error.code() in START_OVER:
                        raise _StartOver
        except (_StartOver, KafkaException):
            time.sleep(0.5)
        finally:
            consumer.close()


def watermarks(consumer: Consumer, topic: str, partitions: int) -> dict[int, int]:
    """Each partition's end as the consumer's isolation level sees it: the high watermark, or with read_committed
    the last stable offset (librdkafka asks ListOffsets with its isolation level)."""
    return {
        p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10, cached=False)[1]
        for p in range(partitions)
    }


def read_to_end(
    config: Mapping[str, Any],
    name: str,
    topic: str,
    partitions: int,
    kind: type[FinalRead] | type[UncommittedRead],
    history: History,
    deadline: float,
    ends: dict[int, int] | None = None,
) -> None:
    """Read every partition from its start to ``ends`` (by default its end as the config's isolation level sees it
    now), recording each record below it as ``kind``. Done when librdkafka reported each partition's end
    (``enable.partition.eof``) at or past it: with read_committed the aborted records and transaction markers
    before it are skipped, so no record offset need reach it."""
    consumer = Consumer({**config, "enable.partition.eof": True})
    try:
        if ends is None:
            ends = _retry(lambda: watermarks(consumer, topic, partitions), deadline)
        consumer.assign(start_offsets(topic, partitions))
        reached: dict[int, int] = {}
        while time.monotonic() < deadline:
            for m in consumer.consume(READ_BATCH, POLL_S):
                error = m.error()
                if error is None:
                    p, offset = located(m)
                    if offset < ends[p]:
                        history.append(kind(name, topic, p, offset, text(m.value()), process=name))
                elif error.code() == KafkaError._PARTITION_EOF:
                    p, offset = located(m)
                    reached[p] = max(reached.get(p, 0), offset)
            if all(reached.get(p, -1) >= end for p, end in ends.items()):
                return
        raise TimeoutError(f"the {name} read did not reach the ends {ends} (reached {reached})")
    finally:
        consumer.close()


def read_transactional_to_end(
    config: Callable[[str, bool], dict[str, Any]],
    topic: str,
    partitions: int,
    history: History,
    deadline: float,
) -> None:
    """The final passes over a topic written in transactions: ``read_committed`` to the last stable offset, once it
    reached the high watermark (nothing open any more) or the deadline passed, recorded as ``FinalRead``; then
    ``read_uncommitted`` to the high watermark, aborted records included, as ``UncommittedRead``. ``config(name,
    committed)``: a reader's config."""
    committed, uncommitted = config("final", True), config("final-uncommitted", False)
    stable_probe, high_probe = Consumer(committed), Consumer(uncommitted)
    try:
        high = _retry(lambda: watermarks(high_probe, topic, partitions), deadline)
        stable = _retry(lambda: watermarks(stable_probe, topic, partitions), deadline)
        while stable != high and time.monotonic() < deadline:
            time.sleep(0.2)
            stable = _retry(lambda: watermarks(stable_probe, topic, partitions), deadline)
    finally:
        stable_probe.close()
        high_probe.close()
    read_to_end(committed, "final", topic, partitions, FinalRead, history, deadline, stable)
    read_to_end(uncommitted, "final-uncommitted", topic, partitions, UncommittedRead, history, deadline, high)


def _retry(call: Callable[[], T], deadline: float) -> T:
    while True:
        try:
            return call()
        except KafkaException:
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.5)

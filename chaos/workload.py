"""The chaos workload: producers writing unique, sequenced values with acks=all, consumers reading concurrently,
and a final pass reading everything, all recorded in a History for the checker.

Value ``p<i>-<n>`` is producer i's n-th write; it goes to partition n % partitions, so each producer's writes to
one partition are sequenced by n. Every send is recorded before it is handed to the producer and every outcome
when its future completes. Most errors are indeterminate (after retries a failed write may still have been
appended); ``definite_failure`` tells the few that prove it never was. Loops are bounded in time and count and stop
by themselves.

``bug="skip-records"`` (``BUGS``) injects a defect the checker must catch: now and then a consumer passes over a
record, without recording a seek.
"""

from __future__ import annotations

import abc
import threading
import time
from collections.abc import Mapping
from typing import Any

from odradek.chaos.history import Ack, FinalRead, History, Read, Seek, Send, SendError
from odradek.client import Admin, Consumer, Producer, TopicPartition
from odradek.client.errors import ErrorCode, OdradekError
from odradek.client.producer.batch import RecordFuture
from odradek.client.structs import ConsumerRecord

MAX_WRITES_PER_PRODUCER = 1_000_000
BUGS = ("skip-records",)  # injected into the consumers of every workload, to prove the checker catches them
SKIP_EVERY = 20  # skip-records: the records at offsets that are multiples of this are passed over

# Produce errors that prove the record was never appended. Each is the broker's verdict on the batch as it is (its
# size, its records, its topic) or on who sends it, given before anything is appended and the same for every
# attempt: a retry resends the same bytes, alone in its partition's records (the idempotent producer's rule), and
# a run changes no topic config or ACL. Retriable errors, timeouts and NOT_ENOUGH_REPLICAS(_AFTER_APPEND) are not:
# they may end a batch whose earlier attempt was appended. Not INVALID_TIMESTAMP either: it depends on the clock.
DEFINITE_CODES = frozenset(
    {
        ErrorCode.MESSAGE_TOO_LARGE,
        ErrorCode.RECORD_LIST_TOO_LARGE,
        ErrorCode.INVALID_RECORD,
        ErrorCode.INVALID_TOPIC_EXCEPTION,
        ErrorCode.INVALID_REQUIRED_ACKS,
        ErrorCode.TOPIC_AUTHORIZATION_FAILED,
    }
)


def _text(value: bytes | None) -> str:
    return "" if value is None else value.decode("utf-8", "surrogateescape")


def definite_failure(error: BaseException) -> bool:
    """Whether a failed record future's ``error`` proves the record was never appended (``DEFINITE_CODES``). An
    error ``send()`` raises is always definite: nothing was queued."""
    return isinstance(error, OdradekError) and error.code in DEFINITE_CODES


def skip_records(records: list[ConsumerRecord]) -> list[ConsumerRecord]:
    """The skip-records bug: what a poll returned, less the records at offsets that are multiples of
    ``SKIP_EVERY``, as a consumer whose position jumped one record ahead would see it (and no seek is recorded).
    Dropped after the poll rather than by a seek: a reader that keeps up has no record past its position to seek
    over yet, and a seek past the end would be reset to the log start."""
    return [r for r in records if r.offset % SKIP_EVERY]


class WorkerThreads(abc.ABC):
    """A workload's producer and reader threads (``_produce(i)``, ``_consume(i)``), started together and stopped
    by one event that every loop watches. ``security``: the cluster's client security keys (a TLS cluster's CA
    and client certificate), added to every client's config."""

    servers: str  # the bootstrap servers, set by the subclass

    def __init__(
        self,
        producers: int,
        consumers: int,
        prefix: str,
        reader: str = "consumer",
        security: Mapping[str, Any] | None = None,
    ) -> None:
        self.security = dict(security or {})
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._produce, args=(i,), name=f"{prefix}-producer-{i}", daemon=True)
            for i in range(producers)
        ] + [
            threading.Thread(target=self._consume, args=(i,), name=f"{prefix}-{reader}-{i}", daemon=True)
            for i in range(consumers)
        ]

    def client_config(self, settings: Mapping[str, Any]) -> dict[str, Any]:
        """A client config of the workload: ``bootstrap.servers``, ``settings`` and the security keys."""
        return {"bootstrap.servers": self.servers, **settings, **self.security}

    @abc.abstractmethod
    def _produce(self, index: int) -> None: ...

    @abc.abstractmethod
    def _consume(self, index: int) -> None: ...

    def start(self) -> None:
        for t in self._threads:
            t.start()

    def stop(self, timeout: float = 120.0) -> None:
        """Set the stop event, then wait for every thread (producers finish what is under way first)."""
        self._stop.set()
        for t in self._threads:
            t.join(timeout)


class Workload(WorkerThreads):
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
        security: Mapping[str, Any] | None = None,
        bug: str = "",
    ) -> None:
        if bug and bug not in BUGS:
            raise ValueError(f"unknown workload bug {bug!r}; choose from {', '.join(BUGS)}")
        self.servers = servers
        self.topic = topic
        self.partitions = partitions
        self.history = history
        self.rate = rate  # writes per second per producer
        self.deadline = time.monotonic() + max_seconds
        self.bug = bug
        super().__init__(producers, consumers, "chaos", security=security)

    def _produce(self, index: int) -> None:
        name = f"p{index}"
        config = self.client_config(
            {"acks": "all", "linger.ms": 2, "request.timeout.ms": 5000, "delivery.timeout.ms": 60000, "client.id": name}
        )
        interval = 1.0 / self.rate
        with Producer(config) as producer:
            n = 0
            next_at = time.monotonic()
            while not self._stop.is_set() and time.monotonic() < self.deadline and n < MAX_WRITES_PER_PRODUCER:
                value, partition = f"{name}-{n:07d}", n % self.partitions
                self.history.append(Send(value, self.topic, partition, process=name))
                try:
                    future = producer.send(self.topic, value.encode(), partition=partition)
                except Exception as e:  # e.g. max.block.ms while no leader is known: the write never started
                    self.history.append(SendError(value, self.topic, partition, repr(e), True, process=name))
                else:
                    future.add_done_callback(self._outcome(name, value, partition))
                n += 1
                next_at += interval
                delay = next_at - time.monotonic()
                if delay > 0:
                    self._stop.wait(delay)
                else:
                    next_at = time.monotonic()
            producer.flush(90)

    def _outcome(self, name: str, value: str, partition: int):
        def record(future: RecordFuture) -> None:
            error = future.exception(0)
            if error is None:
                self.history.append(Ack(value, self.topic, partition, future.result(0).offset, process=name))
            else:
                definite = definite_failure(error)
                self.history.append(SendError(value, self.topic, partition, repr(error), definite, process=name))

        return record

    def _consume(self, index: int) -> None:
        name = f"c{index}"
        config = self.client_config({"auto.offset.reset": "earliest", "client.id": name})
        while not self._stop.is_set() and time.monotonic() < self.deadline:
            try:
                with Consumer(config) as consumer:
                    consumer.assign([TopicPartition(self.topic, p) for p in range(self.partitions)])
                    for p in range(self.partitions):  # a new consumer starts over: its reads restart at 0
                        self.history.append(Seek(name, self.topic, p, 0, process=name))
                    while not self._stop.is_set() and time.monotonic() < self.deadline:
                        records = consumer.poll(timeout_ms=200)
                        for r in skip_records(records) if self.bug == "skip-records" else records:
                            self.history.append(
                                Read(name, r.topic, r.partition, r.offset, _text(r.value), process=name)
                            )
                return
            except Exception:  # a poll error mid-failover: a new consumer continues from the start
                time.sleep(0.5)

    def final_read(self, timeout: float = 120.0) -> None:
        """Read every partition from its log start to its high watermark."""
        with Admin(self.client_config({"request.timeout.ms": 10000})) as admin:
            ends = {p.partition: p.high_watermark for p in admin.describe_topic(self.topic).partitions}
        config = self.client_config({"auto.offset.reset": "earliest", "client.id": "final"})
        with Consumer(config) as consumer:
            tps = [TopicPartition(self.topic, p) for p in range(self.partitions)]
            consumer.assign(tps)
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                for r in consumer.poll(timeout_ms=200):
                    self.history.append(
                        FinalRead("final", r.topic, r.partition, r.offset, _text(r.value), process="final")
                    )
                if all(consumer.position(tp) >= ends[tp.partition] for tp in tps):
                    return
        raise TimeoutError(f"final read did not reach the high watermarks {ends} in {timeout:.0f}s")

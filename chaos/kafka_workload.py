"""The plain workload over the Kafka listener (``odradek chaos run --workload kafka``): chaos/workload.py's
producers and readers, but with librdkafka (confluent-kafka), the client most Kafka applications run on, so the
Kafka wire protocol's produce, idempotence, metadata and fetch paths run under the faults.

Producer i writes ``p<i>-<n>`` to partition n % partitions with ``enable.idempotence`` and acks=all; readers assign
every partition and read from offset 0. How librdkafka's outcomes become history events:

- ``produce()`` raised (local queue full, a fatal producer): the message never entered the client, a
  ``SendError`` with ``definite=True``;
- a delivery report without error: an ``Ack`` at the report's offset;
- a delivery report with an error: a ``SendError`` with ``definite=False``. librdkafka knows whether a failed
  message may have been persisted (its message status), but the Python API does not expose it, and even a message
  purged from the queue may have been sent before a retry put it back, so no delivery error counts as definite;
- a fatal error (the idempotent producer cannot keep its guarantees): the producer's outstanding messages fail
  with it (indeterminate) and a new producer, with a new producer id, takes over the same sequence of values.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from odradek.chaos.history import Ack, FinalRead, History, Send, SendError
from odradek.chaos.kafka_client import (
    ClientErrors,
    EpochWatch,
    describe,
    located,
    read_concurrently,
    read_to_end,
    reader_settings,
)
from odradek.chaos.workload import MAX_WRITES_PER_PRODUCER, WorkerThreads

MESSAGE_TIMEOUT_MS = 60000  # librdkafka's delivery timeout, as the gRPC workload's delivery.timeout.ms
FLUSH_S = 90.0  # a stopping producer waits this long for its outstanding messages


class KafkaWorkload(WorkerThreads):
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
        security: Mapping[str, Any] | None = None,
    ) -> None:
        self.servers = servers  # the brokers' Kafka listeners
        self.topic = topic
        self.partitions = partitions
        self.history = history
        self.rate = rate  # writes per second per producer
        self.deadline = time.monotonic() + max_seconds
        self.errors = ClientErrors()
        super().__init__(producers, consumers, "chaos-kafka", security=security)

    def _running(self) -> bool:
        return not self._stop.is_set() and time.monotonic() < self.deadline

    def producer_config(self, name: str, fatal: threading.Event) -> dict[str, Any]:
        return self.client_config(
            {
                "client.id": name,
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 5,
                "message.timeout.ms": MESSAGE_TIMEOUT_MS,
                **self.errors.callbacks(on_fatal=fatal.set),
                "debug": "eos",  # the producer ids and epochs it acquires, for the history (EpochWatch)
                "logger": EpochWatch(name, self.history),
            }
        )

    def _produce(self, index: int) -> None:
        name = f"p{index}"
        interval = 1.0 / self.rate
        n = 0
        while self._running() and n < MAX_WRITES_PER_PRODUCER:
            fatal = threading.Event()
            producer = Producer(self.producer_config(name, fatal))
            try:
                next_at = time.monotonic()
                while self._running() and n < MAX_WRITES_PER_PRODUCER and not fatal.is_set():
                    self._send(producer, name, n)
                    n += 1
                    next_at += interval
                    delay = next_at - time.monotonic()
                    if delay > 0:
                        producer.poll(delay)  # serves delivery reports meanwhile
                    else:
                        producer.poll(0)
                        next_at = time.monotonic()
            finally:
                producer.flush(FLUSH_S)  # at the end; after a fatal error the outstanding messages fail at once

    def _send(self, producer: Producer, name: str, n: int) -> None:
        value, partition = f"{name}-{n:07d}", n % self.partitions
        self.history.append(Send(value, self.topic, partition, process=name))
        try:
            delivered = self._outcome(name, value, partition)
            producer.produce(self.topic, value.encode(), partition=partition, on_delivery=delivered)
        except BufferError as e:  # the local queue is full: the message never entered the client
            self.history.append(SendError(value, self.topic, partition, f"BufferError: {e}", True, process=name))
        except KafkaException as e:
            self.history.append(SendError(value, self.topic, partition, describe(e.args[0]), True, process=name))

    def _outcome(self, name: str, value: str, partition: int) -> Callable[[KafkaError | None, Message], None]:
        """The delivery report callback (served by poll and flush). A failed report has no offset."""

        def delivered(error: KafkaError | None, message: Message) -> None:
            if error is None:
                self.history.append(Ack(value, self.topic, *located(message), process=name))
            else:
                self.history.append(SendError(value, self.topic, partition, describe(error), process=name))

        return delivered

    def reader_config(self, name: str, committed: bool = False) -> dict[str, Any]:
        return self.client_config({**reader_settings(name, committed), **self.errors.callbacks()})

    def _consume(self, index: int) -> None:
        name = f"c{index}"
        config = self.reader_config(name)
        read_concurrently(config, name, self.topic, self.partitions, self.history, self._running, self.errors)

    def final_read(self, timeout: float = 120.0) -> None:
        """Read every partition from its log start to its high watermark."""
        config = self.reader_config("final")
        deadline = time.monotonic() + timeout
        read_to_end(config, "final", self.topic, self.partitions, FinalRead, self.history, deadline)

"""The transactional workload over the Kafka listener (``odradek chaos run --workload kafka-txn``):
chaos/txn_workload.py's transactions with librdkafka's transactional producer, and ``read_committed`` librdkafka
readers, recorded with the same events for chaos/txn_checker.py.

Producer i owns transactional id ``chaos-txn-<i>``; transaction ``t<i>-<n>`` writes 1 to 4 values ``t<i>-<n>-<j>``
to random partitions, flushes them, then commits, or one time in five aborts; one in twelve is abandoned and its
producer, fenced by a new one with the same id, commits it as a zombie. librdkafka's outcomes in the history:

- ``produce()`` raised: the value never entered the client, so never the transaction (``TxnSendError``,
  definite); a delivery report: ``TxnAck`` at its offset, or ``TxnSendError`` (indeterminate: the message may be
  in the log, and shares the transaction's fate);
- the ends of transactions and the fences: chaos/kafka_transactions.py.

At the end each id is initialised once more, then the final passes read every partition with ``read_committed``
to its last stable offset (once it reached the high watermark) and with ``read_uncommitted`` to its high
watermark.
"""

from __future__ import annotations

import contextlib
import random
import time
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from odradek.chaos.history import History, TxnAck, TxnEnd, TxnSendError, TxnWrite
from odradek.chaos.kafka_client import (
    ClientErrors,
    describe,
    located,
    read_concurrently,
    read_transactional_to_end,
    reader_settings,
)
from odradek.chaos.kafka_transactions import REPLACE, TransactionalIds, discard, error_text, until
from odradek.chaos.txn_workload import (
    ABANDON_SHARE,
    ABORT_SHARE,
    BUGS,
    CALL_TIMEOUT,
    MAX_TXNS_PER_PRODUCER,
    MAX_WRITES_PER_TXN,
    PAUSE_BEFORE_END,
    TXN_TIMEOUT_MS,
)
from odradek.chaos.workload import WorkerThreads


class KafkaTxnWorkload(WorkerThreads):
    def __init__(
        self,
        servers: str,
        topic: str,
        partitions: int,
        history: History,
        producers: int = 2,
        consumers: int = 2,
        rate: float = 20.0,
        max_seconds: float = 3600.0,
        seed: int = 1,
        bug: str = "",
        security: Mapping[str, Any] | None = None,
    ) -> None:
        if bug and bug not in BUGS:
            raise ValueError(f"unknown workload bug {bug!r}; choose from {', '.join(BUGS)}")
        self.servers = servers  # the brokers' Kafka listeners
        self.topic = topic
        self.partitions = partitions
        self.history = history
        self.rate = rate  # transactions per second per producer
        self.seed = seed
        self.bug = bug  # "read-uncommitted": the readers read uncommitted data but record it as read_committed
        self.deadline = time.monotonic() + max_seconds
        self.errors = ClientErrors()
        self.transactional_ids = [f"chaos-txn-{i}" for i in range(producers)]
        self.ids = TransactionalIds(history, self.transactional_ids, "tp")
        super().__init__(producers, consumers, "chaos-kafka-txn", reader="reader", security=security)

    def _running(self) -> bool:
        return not self._stop.is_set() and time.monotonic() < self.deadline

    # -- producers -----------------------------------------------------------------------------------------------

    def producer_config(self, index: int, incarnation: int) -> dict[str, Any]:
        return self.client_config(
            {
                "transactional.id": self.transactional_ids[index],
                "transaction.timeout.ms": TXN_TIMEOUT_MS,
                "acks": "all",
                "linger.ms": 2,
                "client.id": f"tp{index}.{incarnation}",
                **self.errors.callbacks(),
            }
        )

    def _initialised(self, index: int, incarnation: int, persist: bool) -> Producer | None:
        """A new producer of the id, its transactions initialised (fencing the former ones); None if the run ends
        first (``persist``: keep trying until the deadline anyway)."""
        going = until(self.deadline, self._stop.is_set, persist)
        return self.ids.initialised(index, lambda: self.producer_config(index, incarnation), going, self._stop.wait)

    def _produce(self, index: int) -> None:
        rng = random.Random(self.seed * 1009 + index)
        interval = 1.0 / self.rate
        incarnation = 0
        producer = self._initialised(index, incarnation, persist=False)
        try:
            for n in range(MAX_TXNS_PER_PRODUCER):
                if producer is None or not self._running():
                    return
                outcome = self._transaction(producer, index, f"t{index}-{n}", rng)
                if outcome in (REPLACE, "abandoned"):  # a new instance; an abandoned one commits as a zombie after
                    old = producer
                    incarnation += 1
                    producer = self._initialised(index, incarnation, persist=False)
                    if outcome == "abandoned" and producer is not None:  # fenced now, unless the run ended first
                        self._zombie_commit(old, index, f"t{index}-{n}")
                    discard(old)
                self._stop.wait(interval * rng.uniform(0.5, 1.5))
        finally:
            if producer is not None:
                discard(producer)

    def _transaction(self, producer: Producer, index: int, txn: str, rng: random.Random) -> str:
        """One transaction: how its end went (``COMMITTED``, ``ABORTED``, ``REPLACE``: the producer cannot go on),
        or "abandoned" (left open)."""
        name = f"tp{index}"
        writes = rng.randint(1, MAX_WRITES_PER_TXN)
        commit = rng.random() >= ABORT_SHARE
        abandon = rng.random() < ABANDON_SHARE
        try:
            producer.begin_transaction()
        except KafkaException:
            return REPLACE
        self.ids.begun(index, txn)
        for j in range(writes):
            value, partition = f"{txn}-{j}", rng.randrange(self.partitions)
            self.history.append(TxnWrite(txn, value, self.topic, partition, process=name))
            try:
                delivered = self._outcome(name, txn, value, partition)
                producer.produce(self.topic, value.encode(), partition=partition, on_delivery=delivered)
            except (BufferError, KafkaException) as e:  # refused before it entered the client
                error = error_text(e)
                self.history.append(TxnSendError(txn, value, self.topic, partition, error, True, process=name))
                break
        # The writes reach the log before the transaction ends, so a reader that ignores the last stable offset or
        # the aborted-transaction index would see them while they are uncommitted or after they are aborted.
        with contextlib.suppress(KafkaException):  # a fatal producer refuses: its commit fails, and it is replaced
            producer.flush(CALL_TIMEOUT)
        self._stop.wait(rng.uniform(0, PAUSE_BEFORE_END))
        if abandon:
            return "abandoned"
        if commit:
            return self.ids.commit(producer, index, txn)
        return self.ids.abort(producer, index, txn)

    def _zombie_commit(self, zombie: Producer, index: int, txn: str) -> None:
        """The abandoned producer commits its transaction after a new one took the id: it must be refused."""
        name = f"tp{index}-zombie"
        self.history.append(TxnEnd(txn, "commit", "invoke", process=name))
        try:
            zombie.commit_transaction(CALL_TIMEOUT)
        except KafkaException as e:
            self.history.append(TxnEnd(txn, "commit", "fail", error_text(e), process=name))
        else:
            self.history.append(TxnEnd(txn, "commit", "ok", process=name))

    def _outcome(self, name: str, txn: str, value: str, partition: int) -> Callable[[KafkaError | None, Message], None]:
        """The delivery report callback (served by flush and the transaction calls). A failed report has no offset."""

        def delivered(error: KafkaError | None, message: Message) -> None:
            if error is None:
                self.history.append(TxnAck(txn, value, self.topic, *located(message), process=name))
            else:
                self.history.append(TxnSendError(txn, value, self.topic, partition, describe(error), process=name))

        return delivered

    # -- readers -------------------------------------------------------------------------------------------------

    def reader_config(self, name: str, committed: bool = True) -> dict[str, Any]:
        return self.client_config({**reader_settings(name, committed), **self.errors.callbacks()})

    def _consume(self, index: int) -> None:
        name = f"r{index}"
        config = self.reader_config(name, committed=self.bug != "read-uncommitted")
        read_concurrently(config, name, self.topic, self.partitions, self.history, self._running, self.errors)

    # -- the end -------------------------------------------------------------------------------------------------

    def final_read(self, timeout: float = 120.0) -> None:
        """Close what the producers left open, then read every partition with read_committed to its last stable
        offset (once it reached the high watermark, or the timeout passed) and with read_uncommitted to its high
        watermark."""
        deadline = time.monotonic() + timeout
        for index in range(len(self.transactional_ids)):
            producer = self._initialised(index, 1_000_000, persist=True)
            if producer is None:
                raise TimeoutError(f"init_transactions of {self.transactional_ids[index]} failed until the deadline")
            discard(producer)
        read_transactional_to_end(self.reader_config, self.topic, self.partitions, self.history, deadline)

"""librdkafka's transactional producers as the transactional workloads over the Kafka listener use them: a new
producer per incarnation of a transactional id, and the end of each transaction, every step recorded as
chaos/txn_checker.py expects it (``TxnEnd``).

- ``commit_transaction()`` returned: ``commit ok``. It raised a retriable error (a timeout): the commit is resumed
  by calling it again, at most ``CALL_ATTEMPTS`` times. It raised an error that requires an abort: ``commit fail``,
  then an abort (the outcome stays unknown for the checker, as the commit was invoked). Any other error (fatal:
  fenced, or what librdkafka cannot recover from), or the attempts used up: ``commit fail``, and the id gets a new
  producer.
- ``abort_transaction()`` likewise (``abort ok`` or ``abort fail``).
- A new producer's ``init_transactions()`` returned: every transaction that the id's former producer left open
  without calling its commit is ``fence ok``; the coordinator aborted it before answering.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer

from odradek.chaos.history import History, TxnEnd
from odradek.chaos.kafka_client import describe
from odradek.chaos.txn_workload import CALL_ATTEMPTS, CALL_TIMEOUT

COMMITTED, ABORTED, REPLACE = "committed", "aborted", "replace"  # how a transaction's end went


def cause(e: Exception) -> KafkaError | None:
    return e.args[0] if isinstance(e, KafkaException) and e.args and isinstance(e.args[0], KafkaError) else None


def error_text(e: Exception) -> str:
    error = cause(e)
    return describe(error) if error is not None else repr(e)


def retriable(e: Exception) -> bool:
    error = cause(e)
    return error is not None and error.retriable()


def requires_abort(e: Exception) -> bool:
    error = cause(e)
    return error is not None and error.txn_requires_abort()


def discard(producer: Producer) -> None:
    """Let go of a producer without waiting on a transaction: what it still holds fails (indeterminate), then
    its delivery reports are served."""
    with contextlib.suppress(KafkaException):  # a fenced producer refuses even a flush
        producer.purge()
        producer.flush(1)


class TransactionalIds:
    """The transactional ids of a workload (slot i: ``ids[i]``), whose steps are recorded with process
    ``<prefix><i>``. Keeps, per id, the transactions begun and never ended nor committed: the next producer's
    ``init_transactions()`` aborts them."""

    def __init__(self, history: History, ids: list[str], prefix: str) -> None:
        self.history = history
        self.ids = ids
        self.prefix = prefix
        self._open: list[list[str]] = [[] for _ in ids]

    def process(self, slot: int) -> str:
        return f"{self.prefix}{slot}"

    def initialised(
        self, slot: int, config: Callable[[], dict[str, Any]], going: Callable[[], bool], pause: Callable[[float], Any]
    ) -> Producer | None:
        """A new producer of the id, its transactions initialised (fencing the former ones), or None once
        ``going()`` is false."""
        while going():
            producer = Producer(config())
            try:
                producer.init_transactions(CALL_TIMEOUT)
            except KafkaException:
                discard(producer)
                pause(0.5)
                continue
            for txn in self._open[slot]:  # the coordinator aborted them before it answered
                self.history.append(TxnEnd(txn, "fence", "ok", process=self.process(slot)))
            self._open[slot].clear()
            return producer
        return None

    def begun(self, slot: int, txn: str) -> None:
        self._open[slot].append(txn)

    def commit(self, producer: Producer, slot: int, txn: str) -> str:
        """Commit ``txn``: ``COMMITTED``, ``ABORTED`` (an abortable error, then the abort) or ``REPLACE``."""
        process = self.process(slot)
        self._open[slot].remove(txn)
        self.history.append(TxnEnd(txn, "commit", "invoke", process=process))
        error: Exception | None = None
        for _ in range(CALL_ATTEMPTS):
            try:
                producer.commit_transaction(CALL_TIMEOUT)
            except KafkaException as e:
                error = e
                if retriable(e):  # resumed by the next call
                    continue
                self.history.append(TxnEnd(txn, "commit", "fail", error_text(e), process=process))
                return self.abort(producer, slot, txn, invoked=True) if requires_abort(e) else REPLACE
            self.history.append(TxnEnd(txn, "commit", "ok", process=process))
            return COMMITTED
        self.history.append(TxnEnd(txn, "commit", "fail", error_text(error) if error else "", process=process))
        return REPLACE

    def abort(self, producer: Producer, slot: int, txn: str, invoked: bool = False) -> str:
        """Abort ``txn``: ``ABORTED`` or ``REPLACE``. ``invoked``: its commit was called (a fence would then
        prove nothing: the transaction stays of unknown outcome)."""
        process = self.process(slot)
        self.history.append(TxnEnd(txn, "abort", "invoke", process=process))
        error: Exception | None = None
        for _ in range(CALL_ATTEMPTS):
            try:
                producer.abort_transaction(CALL_TIMEOUT)
            except KafkaException as e:
                error = e
                if retriable(e):
                    continue
                break
            if not invoked:
                self._open[slot].remove(txn)
            self.history.append(TxnEnd(txn, "abort", "ok", process=process))
            return ABORTED
        self.history.append(TxnEnd(txn, "abort", "fail", error_text(error) if error else "", process=process))
        return REPLACE


def until(deadline: float, stop: Callable[[], bool], persist: bool = False) -> Callable[[], bool]:
    """A ``going`` for :meth:`TransactionalIds.initialised`: before ``deadline``, and unless ``stop()`` (or
    ``persist``)."""
    return lambda: time.monotonic() < deadline and (persist or not stop())

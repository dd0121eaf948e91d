"""The transactional workload (``odradek chaos run --workload txn``): transactional producers committing and
aborting small transactions across partitions, ``read_committed`` readers, and a final read of everything, all
recorded in a History for chaos/txn_checker.py.

Producer i owns transactional id ``chaos-txn-<i>``. Its n-th transaction ``t<i>-<n>`` writes 1 to 4 unique values
``t<i>-<n>-<j>`` to random partitions, flushes them into the log, then commits (most) or aborts (one in five),
recording each step before the call and its outcome after. A commit that fails is aborted if the producer still
can (abortable errors); otherwise (fenced, or a call that keeps timing out) the instance is replaced: a new
producer with the same id runs ``init_transactions()``, which fences the old one and makes the coordinator abort
what it left open. One transaction in twelve is abandoned that way on purpose, as by a crashed process, and its old
producer, a zombie, then tries to commit it anyway: that commit must fail and its writes must never be visible.
At the end each id is initialised once more (closing whatever was left open), and the final pass reads every
partition with ``read_committed`` up to its last stable offset, then with ``read_uncommitted`` up to its high
watermark.

Loops are bounded in time and count and stop by themselves; the randomness is seeded.
"""

from __future__ import annotations

import contextlib
import random
import time
from collections.abc import Callable, Mapping
from typing import Any

from odradek.chaos.history import (
    FinalRead,
    History,
    Read,
    Seek,
    TxnAck,
    TxnEnd,
    TxnSendError,
    TxnWrite,
    UncommittedRead,
)
from odradek.chaos.workload import BUGS as SHARED_BUGS
from odradek.chaos.workload import WorkerThreads, _text, skip_records
from odradek.client import Admin, Consumer, Producer, TopicPartition
from odradek.client.errors import ClientTimeoutError

MAX_TXNS_PER_PRODUCER = 100_000
ABORT_SHARE = 0.2
ABANDON_SHARE = 1 / 12
MAX_WRITES_PER_TXN = 4
CALL_TIMEOUT = 8.0  # seconds per init / commit / abort call; a call that timed out is resumed
CALL_ATTEMPTS = 3
PAUSE_BEFORE_END = 0.05  # seconds, at most, between a transaction's flushed writes and its end
TXN_TIMEOUT_MS = 15000  # the coordinator aborts a transaction open longer (a replaced producer's, say)
TXN_NODE_SETTINGS = {
    "transaction.state.log.num.partitions": 3,  # few coordinators, each hit by the coordinator faults
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": 1000,
}
BUGS = ("read-uncommitted",)  # injected into the workload (besides workload.BUGS), to prove the checker catches them


class TxnWorkload(WorkerThreads):
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
        if bug and bug not in (*BUGS, *SHARED_BUGS):
            raise ValueError(f"unknown workload bug {bug!r}; choose from {', '.join((*BUGS, *SHARED_BUGS))}")
        self.servers = servers
        self.topic = topic
        self.partitions = partitions
        self.history = history
        self.rate = rate  # transactions per second per producer
        self.seed = seed
        # "read-uncommitted": the readers read uncommitted data but record it as read_committed; "skip-records":
        # now and then a reader passes over a record without recording a seek (workload.skip_records).
        self.bug = bug
        self.deadline = time.monotonic() + max_seconds
        self.transactional_ids = [f"chaos-txn-{i}" for i in range(producers)]
        # Per producer: its transactions whose commit was never invoked and that no abort ended yet: the next
        # successful init_transactions of the id aborts them.
        self._open: list[list[str]] = [[] for _ in range(producers)]
        super().__init__(producers, consumers, "chaos-txn", reader="reader", security=security)

    def _running(self) -> bool:
        return not self._stop.is_set() and time.monotonic() < self.deadline

    # -- producers -----------------------------------------------------------------------------------------------

    def producer_config(self, index: int, incarnation: int) -> dict[str, object]:
        return self.client_config(
            {
                "transactional.id": self.transactional_ids[index],
                "transaction.timeout.ms": TXN_TIMEOUT_MS,
                "acks": "all",
                "linger.ms": 2,
                "request.timeout.ms": 5000,
                "delivery.timeout.ms": 30000,
                "max.block.ms": int(CALL_TIMEOUT * 1000),
                "client.id": f"tp{index}.{incarnation}",
            }
        )

    def _initialised(self, index: int, incarnation: int, persist: bool) -> Producer | None:
        """A new producer of the id, its transactions initialised (fencing the former ones); None if the run ends
        first (``persist``: keep trying until the deadline anyway)."""
        name = f"tp{index}"
        while time.monotonic() < self.deadline and (persist or not self._stop.is_set()):
            producer = Producer(self.producer_config(index, incarnation))
            try:
                producer.init_transactions(CALL_TIMEOUT)
            except Exception:
                with contextlib.suppress(Exception):
                    producer.close(1)
                self._stop.wait(0.5)
                continue
            for txn in self._open[index]:  # the coordinator aborted them before it answered
                self.history.append(TxnEnd(txn, "fence", "ok", process=name))
            self._open[index].clear()
            return producer
        return None

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
                if outcome != "ok":  # replace the instance; an abandoned one commits as a zombie afterwards
                    old = producer
                    incarnation += 1
                    producer = self._initialised(index, incarnation, persist=False)
                    if outcome == "abandoned" and producer is not None:  # fenced now, unless the run ended first
                        self._zombie_commit(old, index, f"t{index}-{n}")
                    with contextlib.suppress(Exception):
                        old.close(1)
                self._stop.wait(interval * rng.uniform(0.5, 1.5))
        finally:
            if producer is not None:
                with contextlib.suppress(Exception):
                    producer.close(CALL_TIMEOUT)

    def _transaction(self, producer: Producer, index: int, txn: str, rng: random.Random) -> str:
        """One transaction; "ok", or "replace" (the producer cannot go on), or "abandoned" (left open)."""
        name = f"tp{index}"
        writes = rng.randint(1, MAX_WRITES_PER_TXN)
        commit = rng.random() >= ABORT_SHARE
        abandon = rng.random() < ABANDON_SHARE
        try:
            producer.begin_transaction()
        except Exception:
            return "replace"
        self._open[index].append(txn)
        for j in range(writes):
            value, partition = f"{txn}-{j}", rng.randrange(self.partitions)
            self.history.append(TxnWrite(txn, value, self.topic, partition, process=name))
            try:
                future = producer.send(self.topic, value.encode(), partition=partition)
            except Exception as e:  # refused before anything was queued: never part of the transaction
                self.history.append(TxnSendError(txn, value, self.topic, partition, repr(e), True, process=name))
                break
            future.add_done_callback(self._outcome(name, txn, value, partition))
        # The writes reach the log before the transaction ends, so a reader that ignores the last stable offset or
        # the aborted-transaction index would see them while they are uncommitted or after they are aborted.
        with contextlib.suppress(Exception):  # a failed write fails the commit, which then aborts
            producer.flush(CALL_TIMEOUT)
        self._stop.wait(rng.uniform(0, PAUSE_BEFORE_END))
        if abandon:
            return "abandoned"
        if commit:
            return self._commit(producer, index, txn)
        return self._abort(producer, index, txn)

    def _commit(self, producer: Producer, index: int, txn: str) -> str:
        name = f"tp{index}"
        self._open[index].remove(txn)
        self.history.append(TxnEnd(txn, "commit", "invoke", process=name))
        error: Exception | None = None
        for _ in range(CALL_ATTEMPTS):
            try:
                producer.commit_transaction(CALL_TIMEOUT)
            except ClientTimeoutError as e:  # resumed by the next call
                error = e
                continue
            except Exception as e:  # abortable (or fatal: then the abort is refused and the producer replaced)
                self.history.append(TxnEnd(txn, "commit", "fail", repr(e), process=name))
                return self._abort(producer, index, txn, invoked=True)
            self.history.append(TxnEnd(txn, "commit", "ok", process=name))
            return "ok"
        self.history.append(TxnEnd(txn, "commit", "fail", repr(error), process=name))
        return "replace"

    def _abort(self, producer: Producer, index: int, txn: str, invoked: bool = False) -> str:
        """Abort ``txn``; ``invoked``: its commit was invoked (then a fence proves nothing: it stays unknown)."""
        name = f"tp{index}"
        self.history.append(TxnEnd(txn, "abort", "invoke", process=name))
        error: Exception | None = None
        for _ in range(CALL_ATTEMPTS):
            try:
                producer.abort_transaction(CALL_TIMEOUT)
            except ClientTimeoutError as e:
                error = e
                continue
            except Exception as e:
                error = e
                break
            if not invoked:
                self._open[index].remove(txn)
            self.history.append(TxnEnd(txn, "abort", "ok", process=name))
            return "ok"
        self.history.append(TxnEnd(txn, "abort", "fail", repr(error), process=name))
        return "replace"

    def _zombie_commit(self, zombie: Producer, index: int, txn: str) -> None:
        """The abandoned producer commits its transaction after a new one took the id: it must be refused."""
        name = f"tp{index}-zombie"
        self.history.append(TxnEnd(txn, "commit", "invoke", process=name))
        try:
            zombie.commit_transaction(CALL_TIMEOUT)
        except Exception as e:
            self.history.append(TxnEnd(txn, "commit", "fail", repr(e), process=name))
        else:
            self.history.append(TxnEnd(txn, "commit", "ok", process=name))

    def _outcome(self, name: str, txn: str, value: str, partition: int) -> Callable[[Any], None]:
        def record(future: Any) -> None:  # a RecordFuture or a DeferredRecordFuture
            error = future.exception(0)
            if error is None:
                offset = future.result(0).offset
                self.history.append(TxnAck(txn, value, self.topic, partition, offset, process=name))
            else:
                self.history.append(TxnSendError(txn, value, self.topic, partition, repr(error), process=name))

        return record

    # -- readers -------------------------------------------------------------------------------------------------

    def reader_config(self, name: str, committed: bool = True) -> dict[str, object]:
        return self.client_config(
            {
                "auto.offset.reset": "earliest",
                "client.id": name,
                "isolation.level": "read_committed" if committed else "read_uncommitted",
                "fetch.max.wait.ms": 200,
            }
        )

    def _consume(self, index: int) -> None:
        name = f"r{index}"
        committed = self.bug != "read-uncommitted"
        while self._running():
            try:
                with Consumer(self.reader_config(name, committed)) as consumer:
                    consumer.assign([TopicPartition(self.topic, p) for p in range(self.partitions)])
                    for p in range(self.partitions):  # a new consumer starts over: its reads restart at 0
                        self.history.append(Seek(name, self.topic, p, 0, process=name))
                    while self._running():
                        records = consumer.poll(timeout_ms=200)
                        for r in skip_records(records) if self.bug == "skip-records" else records:
                            self.history.append(
                                Read(name, r.topic, r.partition, r.offset, _text(r.value), process=name)
                            )
                return
            except Exception:  # a poll error mid-failover: a new consumer continues from the start
                self._stop.wait(0.5)

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
            producer.close(CALL_TIMEOUT)
        tps = [TopicPartition(self.topic, p) for p in range(self.partitions)]
        with Admin(self.client_config({"request.timeout.ms": 10000})) as admin:
            high = {p.partition: p.high_watermark for p in admin.describe_topic(self.topic).partitions}
        with Consumer(self.reader_config("final")) as consumer:
            stable = {tp.partition: o for tp, o in consumer.end_offsets(tps).items()}
            while stable != high and time.monotonic() < deadline:
                time.sleep(0.2)
                stable = {tp.partition: o for tp, o in consumer.end_offsets(tps).items()}
            self._read_to(consumer, tps, stable, FinalRead, deadline)
        with Consumer(self.reader_config("final-uncommitted", committed=False)) as consumer:
            self._read_to(consumer, tps, high, UncommittedRead, deadline)

    def _read_to(
        self,
        consumer: Consumer,
        tps: list[TopicPartition],
        ends: dict[int, int],
        kind: type[FinalRead] | type[UncommittedRead],
        deadline: float,
    ) -> None:
        consumer.assign(tps)
        name = "final" if kind is FinalRead else "final-uncommitted"
        while time.monotonic() < deadline:
            for r in consumer.poll(timeout_ms=200):
                if r.offset < ends[r.partition]:
                    self.history.append(kind(name, r.topic, r.partition, r.offset, _text(r.value), process=name))
            if all(consumer.position(tp) >= ends[tp.partition] for tp in tps):
                return
        raise TimeoutError(f"the {name} read did not reach the end offsets {ends}")

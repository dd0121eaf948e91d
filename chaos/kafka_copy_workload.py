"""The consume-transform-produce workload over the Kafka listener (``odradek chaos run --workload kafka-copy``):
copiers read the input topic in a consumer group and copy every record to the output topic in transactions that
also commit the group's offsets (``send_offsets_to_transaction``), the exactly-once pattern of Kafka Streams and
transactional applications. chaos/copy_checker.py judges the history.

:class:`KafkaWorkload`'s producers write the input (idempotent, acks=all). Copier slot i has the transactional id
``chaos-copy-<i>``, and each of its incarnations ``x<i>.<k>`` has a consumer in group ``chaos-copy`` (subscribe,
``read_committed``, no auto-commit) and a producer. For each batch it consumes, a copier begins a transaction and
records every input record as ``Processed``, with the generation, and its copy ``<value>@<txn>`` (unique to the
attempt) as a ``TxnWrite`` to the same partition of the output. Then it sends the batch's next offsets with the
consumer's group metadata and commits, each step recorded as chaos/kafka_transactions.py does. A committed
transaction's offsets are the group's: ``Commit`` for each partition of the batch. Each copier's second batch, and one
batch in ten after it, is aborted on purpose. After an abort the copier seeks back to where the batch started, so
its records are copied again. A copier
whose producer cannot go on (fenced, a commit of unknown outcome) or whose seek fails (the partition moved) gives
way to a new incarnation: its producer's ``init_transactions()`` fences the old one, and its consumer starts at the
group's committed offsets. ``read_committed`` readers read the output meanwhile.

At the end every id is initialised once more, which closes what was left open, and a final copier copies from the
committed offsets to the end of the input and records the final committed offsets. Then the input is read to its
high watermark, and the output with ``read_committed`` to its last stable offset and with ``read_uncommitted`` to
its high watermark.
"""

from __future__ import annotations

import contextlib
import functools
import random
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import OFFSET_INVALID, Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition

from odradek.chaos.group_workload import SESSION_MS
from odradek.chaos.history import (
    Commit,
    Committed,
    FinalRead,
    History,
    Processed,
    Subscribed,
    TxnAck,
    TxnSendError,
    TxnWrite,
)
from odradek.chaos.kafka_client import (
    POLL_S,
    READ_BATCH,
    describe,
    located,
    read_concurrently,
    read_to_end,
    read_transactional_to_end,
    text,
    watermarks,
)
from odradek.chaos.kafka_member import COMMITTED_EVERY, generation
from odradek.chaos.kafka_transactions import (
    ABORTED,
    COMMITTED,
    TransactionalIds,
    cause,
    discard,
    error_text,
    requires_abort,
    retriable,
    until,
)
from odradek.chaos.kafka_workload import KafkaWorkload
from odradek.chaos.txn_workload import CALL_ATTEMPTS, CALL_TIMEOUT, TXN_TIMEOUT_MS

COPY_GROUP = "chaos-copy"
ABORT_SHARE = 0.1  # batches aborted on purpose
OUTPUT_READERS = 1
# librdkafka's send_offsets_to_transaction() can block past its timeout, for good when the group coordinator's
# broker left the metadata meanwhile (confluentinc/librdkafka#5456, #5511): a call this much later is given up.
STUCK_AFTER = CALL_TIMEOUT + 5.0


class _Stuck(Exception):
    """A librdkafka call that did not return by its own timeout."""


def bounded(call: Callable[[], None], timeout: float) -> None:
    """``call()`` in a thread of its own; raises what it raised, or ``_Stuck`` if it is still blocked after
    ``timeout`` (the thread is left behind)."""
    done, failed = threading.Event(), []

    def target() -> None:
        try:
            call()
        except BaseException as e:  # handed to the caller
            failed.append(e)
        finally:
            done.set()

    threading.Thread(target=target, name="chaos-kafka-bounded-call", daemon=True).start()
    if not done.wait(timeout):
        raise _Stuck
    if failed:
        raise failed[0]


class KafkaCopyWorkload(KafkaWorkload):
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
        seed: int = 1,
        output: str = "chaos-copy",
        security: Mapping[str, Any] | None = None,
    ) -> None:
        """``consumers`` copiers copy ``topic`` (the input) to ``output``, which has as many partitions."""
        super().__init__(servers, topic, partitions, history, producers, consumers, rate, max_seconds, security)
        self.output = output
        self.seed = seed
        self.transactional_ids = [f"chaos-copy-{i}" for i in range(consumers)]
        self.ids = TransactionalIds(history, self.transactional_ids, "x")
        self._stuck: list[Producer] = []  # left to their blocked calls, never touched again (a new one fences them)
        self._threads += [
            threading.Thread(target=self._read_output, args=(i,), name=f"chaos-kafka-output-reader-{i}", daemon=True)
            for i in range(OUTPUT_READERS)
        ]

    def copier_config(self, name: str) -> dict[str, Any]:
        return self.client_config(
            {
                "group.id": COPY_GROUP,
                "client.id": name,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "isolation.level": "read_committed",
                "session.timeout.ms": SESSION_MS,
                "heartbeat.interval.ms": 500,
                "fetch.wait.max.ms": 200,
                **self.errors.callbacks(),
            }
        )

    def copy_producer_config(self, slot: int, name: str) -> dict[str, Any]:
        return self.client_config(
            {
                "transactional.id": self.transactional_ids[slot],
                "transaction.timeout.ms": TXN_TIMEOUT_MS,
                "acks": "all",
                "linger.ms": 2,
                "client.id": name,
                **self.errors.callbacks(),
            }
        )

    # -- copiers -------------------------------------------------------------------------------------------------

    def _consume(self, index: int) -> None:
        """Copier slot ``index``: one incarnation after another until the workload stops."""
        rng = random.Random(self.seed * 7919 + index)
        for incarnation in range(1_000_000):
            if not self._running():
                return
            self._copier(index, f"x{index}.{incarnation}", self._running, rng)
            self._stop.wait(0.5)

    def _copier(
        self,
        slot: int,
        name: str,
        going: Callable[[], bool],
        rng: random.Random | None,
        done: Callable[[Consumer, str], bool] | None = None,
    ) -> bool:
        """One incarnation: copies while ``going()`` and until ``done(consumer, name)`` holds when nothing is left to
        copy; ``rng`` chooses the batches aborted on purpose (None: none). False if it had to give up."""
        config = functools.partial(self.copy_producer_config, slot, name)
        producer = self.ids.initialised(slot, config, going, time.sleep)
        if producer is None:
            return False
        consumer = Consumer(self.copier_config(name))
        stuck = False
        try:
            consumer.subscribe([self.topic])
            self.history.append(Subscribed(name, COPY_GROUP, self.topic, process=name))
            observed, n = time.monotonic(), 0
            while going():
                records = [m for m in consumer.consume(READ_BATCH, POLL_S) if m.error() is None]
                if records:
                    # The second batch of each copier for sure (a short run aborts at least one), then by chance.
                    abort = rng is not None and (n == 1 or rng.random() < ABORT_SHARE)
                    if not self._copy(producer, consumer, slot, name, f"{name}-{n}", records, abort):
                        return False
                    n += 1
                elif done is not None and done(consumer, name):
                    return True
                if done is None and time.monotonic() - observed >= COMMITTED_EVERY:
                    observed = time.monotonic()
                    with contextlib.suppress(KafkaException):
                        self._observe_committed(consumer, name, {tp.partition for tp in consumer.assignment()})
            return done is None
        except KafkaException:
            return False
        except _Stuck:
            stuck = True
            self._stuck.append(producer)
            self.errors.count("copier gave way after send_offsets_to_transaction (stuck past its timeout)")
            return False
        finally:
            with contextlib.suppress(KafkaException, RuntimeError):
                consumer.close()
            if not stuck:
                discard(producer)

    def _copy(
        self,
        producer: Producer,
        consumer: Consumer,
        slot: int,
        name: str,
        txn: str,
        records: list[Message],
        abort: bool,
    ) -> bool:
        """Copy ``records`` in transaction ``txn`` with their offsets (or abort it on purpose, then seek back);
        False if this incarnation cannot go on."""
        process = self.ids.process(slot)
        current = generation(consumer)
        starts: dict[int, int] = {}  # where the batch started in each partition: an abort goes back there
        for m in records:
            p, offset = located(m)
            starts.setdefault(p, offset)
        try:
            producer.begin_transaction()
        except KafkaException as e:
            return self._gave_way("begin_transaction", e)
        self.ids.begun(slot, txn)
        ends: dict[int, int] = {}
        for m in records:
            p, offset = located(m)
            value = text(m.value())
            self.history.append(Processed(name, self.topic, p, offset, value, current, process=name))
            copy = f"{value}@{p}:{offset}@{txn}"  # names its input record: a value written twice is two records
            self.history.append(TxnWrite(txn, copy, self.output, p, process=process))
            try:
                delivered = self._copied(process, txn, copy, p)
                producer.produce(self.output, copy.encode(), partition=p, on_delivery=delivered)
            except (BufferError, KafkaException) as e:  # refused before it entered the client: abort the batch
                error = error_text(e)
                self.history.append(TxnSendError(txn, copy, self.output, p, error, True, process=process))
                abort = True
                break
            ends[p] = offset + 1
        if not abort:
            try:
                self._send_offsets(producer, consumer, ends)
            except KafkaException as e:
                if not requires_abort(e):
                    return self._gave_way("send_offsets_to_transaction", e)
                abort = True
        if abort:  # the copies reach the log first, so the readers have aborted records to skip
            with contextlib.suppress(KafkaException):
                producer.flush(CALL_TIMEOUT)
        outcome = self.ids.abort(producer, slot, txn) if abort else self.ids.commit(producer, slot, txn)
        if outcome == COMMITTED:
            for p, o in sorted(ends.items()):
                self.history.append(Commit(name, self.topic, p, o, current, process=name))
            return True
        if outcome == ABORTED:
            return self._rewind(consumer, starts)
        return self._gave_way(f"{'abort' if abort else 'commit'}_transaction")

    def _send_offsets(self, producer: Producer, consumer: Consumer, ends: dict[int, int]) -> None:
        """The batch's next offsets into the transaction; a retriable error (a timeout) is resumed by calling again.
        Raises ``_Stuck`` if a call blocks well past its timeout: the producer is then left to it."""
        offsets = [TopicPartition(self.topic, p, o) for p, o in sorted(ends.items())]
        metadata = consumer.consumer_group_metadata()
        for attempt in range(CALL_ATTEMPTS):
            try:
                bounded(lambda: producer.send_offsets_to_transaction(offsets, metadata, CALL_TIMEOUT), STUCK_AFTER)
                return
            except KafkaException as e:
                if not retriable(e) or attempt == CALL_ATTEMPTS - 1:
                    raise

    def _rewind(self, consumer: Consumer, starts: dict[int, int]) -> bool:
        """After an abort, back to where the batch started, so its records are copied again; False if a partition
        is no longer this consumer's."""
        try:
            for p, offset in starts.items():
                consumer.seek(TopicPartition(self.topic, p, offset))
        except KafkaException as e:
            return self._gave_way("seek", e)
        return True

    def _gave_way(self, step: str, e: Exception | None = None) -> bool:
        """Count why a copier gave way to a new incarnation (the run's log shows it with the client errors)."""
        error = cause(e) if e is not None else None
        self.errors.count(f"copier gave way after {step}" + (f" ({error.name()})" if error is not None else ""))
        return False

    def _copied(
        self, process: str, txn: str, copy: str, partition: int
    ) -> Callable[[KafkaError | None, Message], None]:
        """A copy's delivery report callback. A failed report has no offset."""

        def delivered(error: KafkaError | None, message: Message) -> None:
            if error is None:
                self.history.append(TxnAck(txn, copy, self.output, *located(message), process=process))
            else:
                self.history.append(TxnSendError(txn, copy, self.output, partition, describe(error), process=process))

        return delivered

    def _observe_committed(
        self, consumer: Consumer, name: str, partitions: set[int], final: bool = False
    ) -> dict[int, int]:
        """The group's committed offsets of ``partitions`` (-1: none), recorded as ``Committed``."""
        asked = [TopicPartition(self.topic, p) for p in sorted(partitions)]
        found = {}
        for tp in consumer.committed(asked, timeout=5) if asked else []:
            found[tp.partition] = -1 if tp.offset == OFFSET_INVALID else tp.offset
            self.history.append(Committed(name, self.topic, tp.partition, found[tp.partition], final, process=name))
        return found

    # -- readers -------------------------------------------------------------------------------------------------

    def _read_output(self, index: int) -> None:
        name = f"r{index}"
        config = self.reader_config(name, committed=True)
        read_concurrently(config, name, self.output, self.partitions, self.history, self._running, self.errors)

    # -- the end -------------------------------------------------------------------------------------------------

    def final_read(self, timeout: float = 120.0) -> None:
        """Close what the copiers left open, copy the rest of the input with a final copier, then read the input to
        its high watermark and the output to its last stable offset (read_committed, once it reached the high
        watermark) and to its high watermark (read_uncommitted)."""
        deadline = time.monotonic() + timeout
        going = until(deadline, self._stop.is_set, persist=True)
        for slot in range(len(self.transactional_ids)):
            config = functools.partial(self.copy_producer_config, slot, "final")
            producer = self.ids.initialised(slot, config, going, time.sleep)
            if producer is None:
                raise TimeoutError(f"init_transactions of {self.transactional_ids[slot]} failed until the deadline")
            discard(producer)
        probe = Consumer(self.reader_config("watermarks"))
        try:
            ends = watermarks(probe, self.topic, self.partitions)
        finally:
            probe.close()

        seen: dict[str, object] = {}  # what the final copier last found, for the timeout's message

        def caught_up(consumer: Consumer, name: str) -> bool:
            """Every partition is the final copier's and its committed offset reached the end: then recorded as
            the final committed offsets."""
            seen["assignment"] = sorted(tp.partition for tp in consumer.assignment())
            if seen["assignment"] != sorted(ends):
                return False
            try:
                committed = seen["committed"] = self._observe_committed(consumer, name, set(ends))
                if any(end > 0 and committed[p] < end for p, end in ends.items()):
                    return False
                self._observe_committed(consumer, name, set(ends), final=True)
            except KafkaException as e:
                seen["error"] = error_text(e)
                return False
            return True

        # A final copier gives way to another after a failed batch (say a rebalance between its batch and its commit).
        for incarnation in range(1_000_000):
            if self._copier(0, f"final-copier.{incarnation}", going, None, done=caught_up):
                break
            if not going():
                raise TimeoutError(f"the final copier did not copy the input to its ends {ends}: {seen}")
            time.sleep(0.5)
        reader = self.reader_config("final")
        read_to_end(reader, "final", self.topic, self.partitions, FinalRead, self.history, deadline)
        read_transactional_to_end(self.reader_config, self.output, self.partitions, self.history, deadline)

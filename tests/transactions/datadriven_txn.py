"""Transcripts of the transaction coordinator's core: one ``__transaction_state`` partition's ``TxnCore`` on a
simulated clock (file format: tests/raft/transcript.py).

The runner plays the shell's part as broker/transactions/coordinator.py does: it draws a fresh producer id before
a request that may need one (``needs_producer_id``), appends each record the core asks to persist to a simulated
log (encoded as the partition stores it) and reports the outcome, and keeps the markers the core asked for until a
command says they are written. So a transcript shows, in order, the events, the answers (``reply end#4: ...``,
answered once their record is durable), the records (``persist #N id: State ...``) and the markers. Records are
durable at once unless ``auto-persist off``; then ``persisted`` completes them. Producer ids are drawn from 1000 up.

Commands (``id=t`` names the transactional id, default ``t``; partitions are ``topic-index``):

- ``coordinator [max-timeout=900000] [expiration=604800000]``: a fresh partition (transaction.max.timeout.ms,
  transactional.id.expiration.ms);
- ``auto-persist on|off``;
- ``init [timeout=60000] [producer=P epoch=E]``: InitProducerId (with the producer's own id and epoch: KIP-360);
- ``add-partitions producer=P epoch=E partitions=a-0,...``, ``add-offsets producer=P epoch=E group=G``,
  ``verify producer=P epoch=E partitions=...`` (AddPartitionsToTxn verify_only);
- ``end commit|abort producer=P epoch=E [bump=no]``: EndTxn (``bump=no``: a client before KIP-890);
- ``persisted ok|error [code=NOT_ENOUGH_REPLICAS]``: the oldest record in flight is durable, or failed;
- ``markers-written [id=T]``: the markers asked for (of every id, or of T) are written;
- ``tick ms=N``: time passes, then the core's timers run (timeouts, completions to retry, id expiry);
- ``replay [epoch=E] [last-epoch=L]``: the log gains the id's record with those fields changed, as a long
  history would leave it (an epoch near exhaustion);
- ``load``: the partition moves to a new coordinator, which replays the log and resumes (records in flight and
  unwritten markers of the old one are lost);
- ``state [id=T]``: every id's metadata, or T's.
"""

from __future__ import annotations

import itertools
from dataclasses import replace

import transcript
from transcript import fields

from odradek.broker.transactions.core import Output, Persist, Reply, TxnCore, TxnCoreConfig, WriteMarkers
from odradek.broker.transactions.metadata import TxnMetadata
from odradek.broker.transactions.records import encode_batch, read_records
from odradek.client.errors import ErrorCode
from odradek.client.structs import TopicPartition

OFFSETS_PARTITIONS = 50
FIRST_PRODUCER_ID = 1000


def name(code: int) -> str:
    return ErrorCode.Name(ErrorCode.ValueType(code))


def partitions_of(text: str) -> list[TopicPartition]:
    out = []
    for item in text.split(","):
        topic, _, index = item.rpartition("-")
        out.append(TopicPartition(topic, int(index)))
    return out


def fmt_partitions(tps: frozenset[TopicPartition]) -> str:
    return ",".join(f"{tp.topic}-{tp.partition}" for tp in sorted(tps))


def fmt_md(md: TxnMetadata) -> str:
    def known(value: int) -> int | None:
        return value if value >= 0 else None

    detail = fields(
        producer=md.producer_id,
        epoch=md.producer_epoch,
        last_producer=known(md.last_producer_id),
        last_epoch=known(md.last_producer_epoch),
        timeout=md.timeout_ms,
        partitions=fmt_partitions(md.partitions),
        started=known(md.txn_start_ms),
        updated=md.last_update_ms,
    )
    return f"{md.state.value} {detail}"


class Runner(transcript.Commands):
    """One ``__transaction_state`` partition: its core, its log, the writes and markers in flight."""

    def __init__(self) -> None:
        self.start(TxnCoreConfig())

    def start(self, config: TxnCoreConfig) -> None:
        """A fresh partition: empty log, clock at 0, producer ids from 1000 again."""
        self.config = config
        self.auto = True
        self.now = 0
        self.log: list[bytes] = []
        self.producer_ids = itertools.count(FIRST_PRODUCER_ID)
        self.tokens = itertools.count(1)
        self.reset()

    def reset(self) -> None:
        self.core = TxnCore(self.config)
        self.writes: list[Persist] = []
        self.markers: list[WriteMarkers] = []
        self.labels: dict[int, str] = {}

    # -- helpers

    def token(self, kind: str) -> int:
        token = next(self.tokens)
        self.labels[token] = f"{kind}#{token}"
        return token

    def fresh(self, txn_id: str, *, ending: bool = False) -> int | None:
        return next(self.producer_ids) if self.core.needs_producer_id(txn_id, ending=ending) else None

    def show(self, out: Output) -> list[str]:
        lines = [f"event: {e}" for e in out.events]
        for a in out.actions:
            if isinstance(a, Reply):
                answer = fields(producer=a.producer_id, epoch=a.producer_epoch) if a.error == ErrorCode.NONE else ""
                lines.append(f"reply {self.labels.pop(a.token)}: {name(a.error)} {answer}".rstrip())
            elif isinstance(a, Persist):
                self.writes.append(a)
                record = "tombstone" if a.metadata is None else fmt_md(a.metadata)
                lines.append(f"persist #{a.persist_id} {a.transactional_id}: {record}")
            else:
                self.markers.append(a)
                outcome = "COMMIT" if a.committed else "ABORT"
                detail = fields(producer=a.producer_id, epoch=a.producer_epoch, partitions=fmt_partitions(a.partitions))
                lines.append(f"markers {a.transactional_id}: {outcome} {detail}")
        lines += [f"completed: {'commit' if c else 'abort'}" for c in out.completed]
        return lines

    def complete(self, error: int = ErrorCode.NONE) -> list[str]:
        write = self.writes.pop(0)
        if error == ErrorCode.NONE:
            self.log.append(encode_batch([(write.transactional_id, write.metadata)], self.now))
            head = f"persisted #{write.persist_id}"
        else:
            head = f"persist #{write.persist_id} failed: {name(error)}"
        return [head, *self.show(self.core.on_persisted(write.persist_id, error, self.now))]

    def step(self, out: Output) -> list[str]:
        """Print what the core did; with auto-persist, its records become durable (and those they cause)."""
        lines = self.show(out)
        while self.auto and self.writes:
            lines += self.complete()
        return lines

    def request(self, token: int, out: Output) -> list[str]:
        lines = self.step(out)
        return lines + ([f"{self.labels[token]} waits"] if token in self.labels else [])

    # -- commands

    def cmd_coordinator(self, max_timeout: str = "900000", expiration: str = "604800000") -> list[str]:
        self.start(TxnCoreConfig(int(max_timeout), int(expiration)))
        return [f"t={self.now}"]

    def cmd_auto_persist(self, mode: str) -> list[str]:
        self.auto = mode == "on"
        return self.step(Output())

    def cmd_init(self, id: str = "t", timeout: str = "60000", producer: str = "-1", epoch: str = "-1") -> list[str]:
        token = self.token("init")
        out = self.core.init_producer_id(
            token, id, int(timeout), int(producer), int(epoch), self.now, self.fresh(id)
        )  # fmt: skip
        return self.request(token, out)

    def cmd_add_partitions(self, producer: str, epoch: str, partitions: str, id: str = "t") -> list[str]:
        token = self.token("add")
        out = self.core.add_partitions(token, id, int(producer), int(epoch), partitions_of(partitions), self.now)
        return self.request(token, out)

    def cmd_add_offsets(self, producer: str, epoch: str, group: str, id: str = "t") -> list[str]:
        token = self.token("add-offsets")
        out = self.core.add_offsets(token, id, int(producer), int(epoch), group, OFFSETS_PARTITIONS, self.now)
        return self.request(token, out)

    def cmd_verify(self, producer: str, epoch: str, partitions: str, id: str = "t") -> list[str]:
        answers = self.core.verify(id, int(producer), int(epoch), partitions_of(partitions))
        return ["verify: " + " ".join(f"{tp.topic}-{tp.partition}={name(e)}" for tp, e in answers.items())]

    def cmd_end(self, outcome: str, producer: str, epoch: str, id: str = "t", bump: str = "yes") -> list[str]:
        token = self.token("end")
        committed = {"commit": True, "abort": False}[outcome]
        bumping = bump == "yes"
        fresh = self.fresh(id, ending=True) if bumping else None
        out = self.core.end_txn(
            token, id, int(producer), int(epoch), committed, self.now, fresh, bump_epoch=bumping
        )  # fmt: skip
        return self.request(token, out)

    def cmd_persisted(self, outcome: str, code: str = "NOT_ENOUGH_REPLICAS") -> list[str]:
        error = {"ok": ErrorCode.NONE, "error": ErrorCode.Value(code)}[outcome]
        return [*self.complete(error), *self.step(Output())]

    def cmd_markers_written(self, id: str | None = None) -> list[str]:
        done = [m for m in self.markers if id is None or m.transactional_id == id]
        self.markers = [m for m in self.markers if m not in done]
        lines = []
        for m in done:
            lines.append(f"markers of {m.transactional_id} written (producer {m.producer_id} epoch {m.producer_epoch})")
            out = self.core.on_markers_written(m.transactional_id, m.producer_id, m.producer_epoch, self.now)
            lines += self.step(out)
        return lines

    def cmd_tick(self, ms: str) -> list[str]:
        self.now += int(ms)
        return [f"t={self.now}", *self.step(self.core.tick(self.now))]

    def cmd_replay(self, id: str = "t", epoch: str | None = None, last_epoch: str | None = None) -> list[str]:
        md = self.core.txns[id]
        if epoch is not None:
            md = replace(md, producer_epoch=int(epoch))
        if last_epoch is not None:
            md = replace(md, last_producer_epoch=int(last_epoch))
        self.core.replay(id, md)
        self.log.append(encode_batch([(id, md)], self.now))
        return [f"{id}: {fmt_md(md)}"]

    def cmd_load(self) -> list[str]:
        lines = [f"lost: persist #{w.persist_id} {w.transactional_id}" for w in self.writes]
        lines += [f"lost: markers of {m.transactional_id}" for m in self.markers]
        lines += [f"reply {label}: NOT_COORDINATOR" for label in self.labels.values()]
        self.reset()
        for txn_id, md in read_records(b"".join(self.log)):
            self.core.replay(txn_id, md)
        lines.append(f"loaded {len(self.log)} records: {len(self.core.txns)} ids")
        return [*lines, *self.cmd_state(), *self.step(self.core.resume())]

    def cmd_state(self, id: str | None = None) -> list[str]:
        ids = sorted(self.core.txns) if id is None else [id]
        lines = []
        for txn_id in ids:
            md = self.core.txns.get(txn_id)
            pending = " (write in flight)" if self.core.pending(txn_id) else ""
            lines.append(f"{txn_id}: {'none' if md is None else fmt_md(md)}{pending}")
        return lines or ["no transactional ids"]

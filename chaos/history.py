"""The history of a chaos run: every send, outcome, read and fault, in the order the workers observed them.

The checker judges a run only from this record, so it must hold everything needed to tell a broken log from a
slow or failed client: sends before their outcome, the offset an ack claimed, whether an error was definite, each
consumer read with its offset, the explicit position resets of consumers, and a final read of every partition.
The group workload adds what a consumer group promises about: where a member starts each partition it is given,
each record it processed, each commit that was acknowledged, and the committed offsets that OffsetFetch answered.
The transactional workload records its writes with the transaction they belong to (``TxnWrite``, ``TxnAck``,
``TxnSendError``), each step of a transaction's end (``TxnEnd``), its ``read_committed`` readers as ``Read`` and
``FinalRead``, and a last ``read_uncommitted`` pass over the whole log (``UncommittedRead``). The share group
workload records each record a share consumer received (``ShareDelivered``) and each acknowledgement it sent and
what the broker answered (``ShareAck``).

Values are text: a workload writes unique strings such as ``"p3-000123"`` (producer 3's 123rd write) and decodes
the bytes it reads back (UTF-8 with ``surrogateescape`` keeps arbitrary bytes round-trippable through JSON).
Timestamps are ``time.monotonic()`` seconds; they are for humans reading the history and for merging per-process
files, while the checker relies on the order of events within one worker.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, fields
from pathlib import Path


@dataclass(frozen=True, slots=True, kw_only=True)
class Event:
    """``process`` names the worker that recorded the event (producer, consumer or nemesis id)."""

    process: str
    time: float = field(default_factory=time.monotonic)


@dataclass(frozen=True, slots=True)
class Send(Event):
    """A produce call, recorded before it is made. A producer's sends to one partition are sequenced: their
    order here is the order the log must keep for the acknowledged ones."""

    value: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class Ack(Event):
    """The broker acknowledged ``value`` (acks=all) at ``offset``: it must survive any fault from now on."""

    value: str
    topic: str
    partition: int
    offset: int


@dataclass(frozen=True, slots=True)
class SendError(Event):
    """A produce that failed. Most errors are indeterminate (a timeout, or a retriable error after retries, may hide
    an earlier attempt's append); ``definite`` marks errors that prove nothing was appended: ``send()`` refused the
    record, or the broker refused its batch for what it is (too large, invalid records, an unauthorized topic)."""

    value: str
    topic: str
    partition: int
    error: str
    definite: bool = False


@dataclass(frozen=True, slots=True)
class _Observed(Event):
    consumer: str
    topic: str
    partition: int
    offset: int
    value: str


@dataclass(frozen=True, slots=True)
class Read(_Observed):
    """A record a consumer received while the run was under way (only records below the high watermark)."""


@dataclass(frozen=True, slots=True)
class FinalRead(_Observed):
    """A record of the final pass that reads every partition from its log start to its end after the faults heal:
    the log's contents that every earlier observation is compared against."""


@dataclass(frozen=True, slots=True)
class Seek(Event):
    """A consumer's position was reset (seek, restart, rebalance): its next read of the partition may go back as
    far as ``offset`` without being a non-monotonic read."""

    consumer: str
    topic: str
    partition: int
    offset: int


@dataclass(frozen=True, slots=True)
class Subscribed(Event):
    """A group member (one incarnation of a consumer) subscribed ``topic`` in ``group``: every acknowledged record
    of the topic must then be processed by some member of the group (the group workload)."""

    consumer: str
    group: str
    topic: str


@dataclass(frozen=True, slots=True)
class Assigned(Event):
    """A group member was given ``partition`` in ``generation`` and starts it at ``offset`` (the committed offset it
    fetched, or where ``auto.offset.reset`` put it): in that generation it must process every record from there on,
    skipping none."""

    consumer: str
    topic: str
    partition: int
    offset: int
    generation: int


@dataclass(frozen=True, slots=True)
class Processed(_Observed):
    """A record a group member processed (recorded before the commit that covers it), in ``generation``."""

    generation: int = -1


@dataclass(frozen=True, slots=True)
class Commit(Event):
    """A commit acknowledged to ``consumer``: the group's position of the partition is ``offset`` (the next record
    to process) and, as acks=all data, it must survive every fault from now on."""

    consumer: str
    topic: str
    partition: int
    offset: int
    generation: int = -1


@dataclass(frozen=True, slots=True)
class Committed(Event):
    """The group's committed offset of a partition as an OffsetFetch (``committed()``) answered it (-1: none).
    ``final`` marks the read after the faults healed and every member but the final one stopped."""

    consumer: str
    topic: str
    partition: int
    offset: int
    final: bool = False


@dataclass(frozen=True, slots=True)
class ProducerEpoch(Event):
    """An idempotent producer (``process``) took producer id ``producer_id`` at ``epoch`` (librdkafka's
    ``Acquired PID`` and ``bumped epoch to PID``). After its first, each one is a new epoch: librdkafka then
    renumbers the messages it has not had acknowledged, so one already written but not acknowledged is written
    again (the broker cannot tell the copies apart across epochs)."""

    producer_id: int
    epoch: int


@dataclass(frozen=True, slots=True)
class Fault(Event):
    """A fault the nemesis injected, e.g. ``Fault("kill", "broker-2", process="nemesis")``."""

    kind: str
    target: str
    detail: str = ""


@dataclass(frozen=True, slots=True)
class Heal(Event):
    """The end of a fault (restart, resume, network healed)."""

    kind: str
    target: str
    detail: str = ""


@dataclass(frozen=True, slots=True)
class TxnWrite(Event):
    """A send inside transaction ``txn`` (the transactional workload), recorded before the send is made."""

    txn: str
    value: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class TxnAck(Event):
    """A transactional write was acknowledged at ``offset``: where it is in the log, committed or not."""

    txn: str
    value: str
    topic: str
    partition: int
    offset: int


@dataclass(frozen=True, slots=True)
class TxnSendError(Event):
    """A transactional write failed; ``definite`` if ``send()`` refused it, so it never was part of the
    transaction (a failed future may hide an append, which then shares the transaction's fate)."""

    txn: str
    value: str
    topic: str
    partition: int
    error: str
    definite: bool = False


TXN_OPS = ("commit", "abort", "fence")
TXN_RESULTS = ("invoke", "ok", "fail")


@dataclass(frozen=True, slots=True)
class TxnEnd(Event):
    """A step of the end of transaction ``txn``: ``op`` commit or abort, ``result`` invoke (recorded before the
    call), ok (acknowledged: the outcome is decided) or fail (unknown). ``fence`` ``ok``: a new producer with the
    same transactional id finished ``init_transactions`` while the transaction was open and its commit was never
    invoked, so the coordinator aborted it."""

    txn: str
    op: str
    result: str
    error: str = ""


@dataclass(frozen=True, slots=True)
class UncommittedRead(_Observed):
    """A record of the final ``read_uncommitted`` pass of the transactional workload: the whole log, aborted
    records included, to compare offsets and acknowledgements against."""


@dataclass(frozen=True, slots=True)
class ShareDelivered(_Observed):
    """A share consumer received a record it now holds the acquisition lock of, in its ``delivery_count``-th
    delivery as the broker counts it (recorded before it is acknowledged)."""

    delivery_count: int = 0


SHARE_ACK_KINDS = ("accept", "release", "reject")
SHARE_ACK_RESULTS = ("invoke", "ok", "fail")


@dataclass(frozen=True, slots=True)
class ShareAck(Event):
    """A share consumer's acknowledgement of the record it received in delivery ``delivery_count``: ``result``
    invoke (recorded before it is sent), ok (the broker applied it) or fail. ``definite`` marks a failure that
    proves it was not applied (INVALID_RECORD_STATE: the consumer no longer held the record's lock); any other
    failure (a timeout, a lost connection) may hide an applied one."""

    consumer: str
    topic: str
    partition: int
    offset: int
    kind: str
    result: str
    delivery_count: int = 0
    error: str = ""
    definite: bool = False


EVENT_TYPES: dict[str, type[Event]] = {
    "send": Send,
    "ack": Ack,
    "send_error": SendError,
    "read": Read,
    "final_read": FinalRead,
    "seek": Seek,
    "subscribed": Subscribed,
    "assigned": Assigned,
    "processed": Processed,
    "commit": Commit,
    "committed": Committed,
    "producer_epoch": ProducerEpoch,
    "fault": Fault,
    "heal": Heal,
    "txn_write": TxnWrite,
    "txn_ack": TxnAck,
    "txn_send_error": TxnSendError,
    "txn_end": TxnEnd,
    "uncommitted_read": UncommittedRead,
    "share_delivered": ShareDelivered,
    "share_ack": ShareAck,
}
_TYPE_NAMES = {cls: name for name, cls in EVENT_TYPES.items()}
_FIELDS = {cls: tuple(f.name for f in fields(cls)) for cls in EVENT_TYPES.values()}


def to_json_line(event: Event) -> str:
    """One event as a JSON object (without newline); ``type`` names its class."""
    cls = type(event)
    record: dict[str, object] = {"type": _TYPE_NAMES[cls]}
    for name in _FIELDS[cls]:
        record[name] = getattr(event, name)
    return json.dumps(record, separators=(",", ":"))


def from_json_line(line: str) -> Event:
    record = json.loads(line)
    return EVENT_TYPES[record.pop("type")](**record)


class History:
    """An append-only list of events that producers, consumers and the nemesis record into from their own threads."""

    def __init__(self, events: Iterable[Event] = ()) -> None:
        self._lock = threading.Lock()
        self._events: list[Event] = list(events)

    def append(self, event: Event) -> None:
        with self._lock:
            self._events.append(event)

    def events(self) -> list[Event]:
        """A snapshot: recording may go on while the caller iterates."""
        with self._lock:
            return list(self._events)

    def __iter__(self) -> Iterator[Event]:
        return iter(self.events())

    def __len__(self) -> int:
        return len(self._events)

    def write_jsonl(self, path: str | Path) -> None:
        with open(path, "w", encoding="utf-8") as out:
            for event in self.events():
                out.write(to_json_line(event))
                out.write("\n")

    @classmethod
    def read_jsonl(cls, path: str | Path) -> History:
        with open(path, encoding="utf-8") as lines:
            return cls(from_json_line(line) for line in lines if line.strip())

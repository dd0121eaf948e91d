"""The sink's transactional mode (``transactional.id.prefix``): each task's rows become visible to
``read_committed`` readers exactly once, across task retries, speculative attempts and query restarts.

Why it holds. The task writing input partition ``p`` of a micro-batch uses the transactional id ``<prefix>-p``, the
same for every attempt in every run of the query, and records in the same transaction as its rows which write it
was: a ``Marker`` (the query's id, which Spark keeps in the checkpoint, and the micro-batch id), committed as the
offset of ``MARKER_PARTITION`` in the group named as the transactional id. A task then:

1. ``init_transactions()``: fences every earlier attempt holding the id (their produce and commit calls fail from
   now on) and lets the coordinator finish what they left: an open transaction is aborted, one already committing
   completes, markers and group offsets included, before the call returns;
2. reads the group's marker: if it names this query at this batch (or later), an earlier attempt committed this
   write and the task writes nothing (a re-run batch commits nothing twice);
3. otherwise begins a transaction, sends its rows, sends the marker, commits.

Between 1 and 3 no other attempt can commit under the id without fencing this one first, which makes this
attempt's commit fail: so the check in 2 and the commit in 3 are atomic, whichever attempts race. What it rests on:
a re-run of a micro-batch gives task ``p`` the same rows (Spark re-plans a batch from the offsets in its checkpoint;
the plan must be deterministic), and the marker survives until the re-run (group offsets are kept for
``offsets.retention.minutes`` after the last commit).
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from odradek.client.structs import GroupMetadata, OffsetAndMetadata, TopicPartition

__all__ = [
    "MARKER_PARTITION",
    "Marker",
    "MarkerError",
    "TxnProducer",
    "already_written",
    "marker_group_metadata",
    "streaming_marker",
    "write_once",
]

logger = logging.getLogger(__name__)

MARKER_PARTITION = TopicPartition("__consumer_offsets", 0)
"""The partition a task's marker is committed for. The group coordinator accepts offsets only for partitions that
exist; this one does whenever groups work, whatever the sink writes to (rows may name their topics)."""

MARKER_FORMAT = "odradek-spark-sink/1"
ABORT_TIMEOUT = 10.0
"""Seconds a failed task spends aborting its transaction so that readers' last stable offset moves on at once
rather than at the transaction's timeout; the next attempt's init_transactions aborts it anyway."""

QUERY_ID_PROPERTY = "sql.streaming.queryId"
BATCH_ID_PROPERTY = "streaming.sql.batchId"
"""Local properties Spark sets on every task of a micro-batch (the query id is kept in the checkpoint)."""


class MarkerError(RuntimeError):
    """A task cannot tell which write it is, or the marker group holds something the sink did not write."""


@dataclass(frozen=True)
class Marker:
    """Which write a transaction was: ``run`` is Spark's query id (the same across restarts from one checkpoint)
    or, for a ``df.write`` job, an id drawn when the job starts; ``batch`` is the micro-batch id (0 for a job)."""

    run: str
    batch: int

    def to_offset(self) -> OffsetAndMetadata:
        """Offset batch + 1, so that ``odradek group describe`` shows how far the task's writes got."""
        metadata = json.dumps({"format": MARKER_FORMAT, "run": self.run, "batch": self.batch}, separators=(",", ":"))
        return OffsetAndMetadata(self.batch + 1, metadata)

    @classmethod
    def from_offset(cls, group: str, committed: OffsetAndMetadata | None) -> Marker | None:
        """The marker a committed offset holds; None if nothing is committed."""
        if committed is None:
            return None
        try:
            d = json.loads(committed.metadata)
            run, batch = d["run"], d["batch"]
            ours = d["format"] == MARKER_FORMAT and isinstance(run, str) and type(batch) is int
        except (ValueError, TypeError, KeyError):
            ours = False
        if not ours:
            raise MarkerError(
                f"group {group!r} has offset {committed.offset} for {MARKER_PARTITION.topic}-"
                f"{MARKER_PARTITION.partition} with metadata {committed.metadata!r}, which the sink did not write: "
                "the transactional.id.prefix is used by something else; choose another"
            )
        return cls(run, batch)


def already_written(last: Marker | None, this: Marker) -> bool:
    """Whether an earlier attempt committed the write ``this``: the same run at this batch or a later one (Spark
    starts batch N+1 only once N is in its commit log). A marker of another run, e.g. a query started from a new
    checkpoint with the same prefix, says nothing about this one."""
    return last is not None and last.run == this.run and last.batch >= this.batch


def marker_group_metadata(group: str) -> GroupMetadata:
    """The marker group has no members: commits to it are those of a standalone committer (generation -1)."""
    return GroupMetadata(group, -1, "", None)


def streaming_marker(local_property: Callable[[str], str | None]) -> Marker:
    """The marker of a micro-batch task, from its Spark local properties; MarkerError if they are missing."""
    query, batch = local_property(QUERY_ID_PROPERTY), local_property(BATCH_ID_PROPERTY)
    if not query or batch is None or not batch.isdigit():
        raise MarkerError(
            f"the task has no streaming query id or batch id (local properties {QUERY_ID_PROPERTY}={query!r}, "
            f"{BATCH_ID_PROPERTY}={batch!r}): the transactional mode cannot tell a re-run batch from a new one"
        )
    return Marker(query, int(batch))


class TxnProducer(Protocol):
    """The transactional calls of ``odradek.client.Producer`` that ``write_once`` makes."""

    def init_transactions(self, timeout: float | None = None) -> None: ...

    def begin_transaction(self) -> None: ...

    def send_offsets_to_transaction(
        self,
        offsets: dict[TopicPartition, OffsetAndMetadata | int],
        group_metadata: GroupMetadata,
        timeout: float | None = None,
    ) -> None: ...

    def commit_transaction(self, timeout: float | None = None) -> None: ...

    def abort_transaction(self, timeout: float | None = None) -> None: ...


def write_once(
    producer: TxnProducer,
    group: str,
    marker: Marker,
    read_marker: Callable[[], OffsetAndMetadata | None],
    send: Callable[[], int],
) -> int | None:
    """One task attempt in transactional mode: the rows sent (``send`` sends and flushes them, raising if one
    was not acknowledged) and the marker committed in one transaction; None if an earlier attempt committed this
    write already. ``read_marker`` reads the group's committed offset of ``MARKER_PARTITION``; it is called only
    after ``init_transactions`` has fenced earlier attempts and completed what they left."""
    producer.init_transactions()
    last = Marker.from_offset(group, read_marker())
    if already_written(last, marker):
        logger.info("odradek sink: %s already committed run %s batch %d; nothing to write", group, last, marker.batch)
        return None
    producer.begin_transaction()
    try:
        records = send()
        producer.send_offsets_to_transaction({MARKER_PARTITION: marker.to_offset()}, marker_group_metadata(group))
        producer.commit_transaction()
    except Exception:
        # Fenced (another attempt took the id and aborted this transaction) or failed: either way nothing of this
        # transaction is visible. Aborting now frees readers' last stable offset; if it fails, the next attempt's
        # init_transactions or the transaction timeout aborts it.
        with contextlib.suppress(Exception):
            producer.abort_transaction(ABORT_TIMEOUT)
        raise
    return records

"""What the cleaner needs to know about transactions while it walks a log in offset order (sans-I/O).

Fed every batch of the walk, ``TxnTracker`` says which transactional data batches belong to an aborted transaction
(their records are removed, and never enter the offset map: an aborted value must not supersede a committed one)
and which markers have no data of their transaction left behind them (such a marker may go once its delete horizon
passed, like a tombstone). The aborted transactions come from the log's aborted-transaction indexes; an ABORT marker
kept with data of its transaction still before it keeps its index entry, which the cleaner writes into the cleaned
segment's index (``take_kept_entries``).
"""

from __future__ import annotations

from collections import deque

from odradek.broker.log.txn_index import AbortedTxnEntry
from odradek.client.record.control import ControlType
from odradek.client.record.header import BatchHeader


class TxnTracker:
    """Transactions met in a walk over a log section (Kafka's cleaner transaction metadata)."""

    def __init__(self, aborted: list[AbortedTxnEntry]) -> None:
        self._pending = deque(sorted(aborted, key=lambda e: e.first_offset))
        self._aborted: dict[int, tuple[AbortedTxnEntry, bool]] = {}  # producer id -> (entry, data seen)
        self._committed: set[int] = set()  # producers with data seen in a transaction not (yet) aborted
        self._kept: list[AbortedTxnEntry] = []

    def _start_up_to(self, offset: int) -> None:
        """Aborted transactions starting at or before ``offset`` are now open in the walk."""
        pending = self._pending
        while pending and pending[0].first_offset <= offset:
            entry = pending.popleft()
            self._aborted.setdefault(entry.producer_id, (entry, False))

    def on_data_batch(self, h: BatchHeader) -> bool:
        """A data batch: True if it belongs to an aborted transaction (its records go)."""
        self._start_up_to(h.last_offset)
        if not h.is_transactional:
            return False
        open_abort = self._aborted.get(h.producer_id)
        if open_abort is not None:
            self._aborted[h.producer_id] = (open_abort[0], True)
            return True
        self._committed.add(h.producer_id)
        return False

    def on_marker(self, h: BatchHeader, marker_type: ControlType | None) -> bool:
        """A control batch (``marker_type`` None: it holds no record): True if no data of its transaction was met,
        so the marker itself may be removed once its delete horizon passed."""
        self._start_up_to(h.last_offset)
        if marker_type is None:
            return True
        if marker_type == ControlType.ABORT:
            self._committed.discard(h.producer_id)
            ended = self._aborted.pop(h.producer_id, None)
            if ended is not None and ended[1]:
                self._kept.append(ended[0])
                return False
            return True
        if h.producer_id in self._committed:
            self._committed.discard(h.producer_id)
            return False
        return True

    def take_kept_entries(self) -> list[AbortedTxnEntry]:
        """The index entries of the ABORT markers kept since the last call (one cleaned segment's)."""
        kept, self._kept = self._kept, []
        return kept

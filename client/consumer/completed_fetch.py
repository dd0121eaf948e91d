"""One partition's data from one Fetch response, decoded a batch at a time as ``poll()`` takes records.

Records decode straight into ``ConsumerRecord`` tuples (topic and partition included) with the record codec's
``decode_records``: one object per record, which is what the consumer's throughput rests on. A fetch returns whole
batches, so the first batch may start before the position (after a seek, or mid-batch ``max.poll.records``):
records below it are skipped. Control batches are never returned, and with ``read_committed`` neither are batches
of aborted transactions (using the response's aborted-transaction list, as Kafka's fetcher does).
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

from odradek.client.errors import CorruptRecordError, RecordTooLargeError
from odradek.client.record import codec
from odradek.client.record.batch import RecordBatch
from odradek.client.record.compression import decompress
from odradek.client.record.control import ControlType, parse_control_record
from odradek.client.record.header import (
    COMPRESSION_NONE,
    HEADER_SIZE,
    BatchHeader,
    batch_size_at,
    parse_header,
    validate_batch,
)
from odradek.client.structs import CREATE_TIME, LOG_APPEND_TIME, ConsumerRecord, TopicPartition

_CREATE_TIME = (CREATE_TIME,)  # the ConsumerRecord fields between timestamp and key
_LOG_APPEND_TIME = (LOG_APPEND_TIME,)


def _batch_data(buf: bytes, header: BatchHeader) -> tuple[bytes, int, int]:
    """The batch's records section as (bytes, start, end), decompressed if needed."""
    start = header.position + HEADER_SIZE
    end = header.position + header.size
    if header.compression == COMPRESSION_NONE:
        return buf, start, end
    data = decompress(header.compression, memoryview(buf)[start:end])
    return data, 0, len(data)


class CompletedFetch:
    """Records of one partition from one response. ``position`` is the offset after the last record taken (or
    batch passed) and ``position_epoch`` the leader epoch of that record's batch (None: unknown or no batch passed
    yet), which a commit of the position carries; ``fetch_end`` is where the next fetch of this partition starts:
    after the last whole batch."""

    __slots__ = (
        "_aborted",
        "_aborted_producers",
        "_batch_epoch",
        "_batch_next_offset",
        "_buf",
        "_check_crcs",
        "_end",
        "_index",
        "_pos",
        "_read_committed",
        "_records",
        "fetch_end",
        "generation",
        "position",
        "position_epoch",
        "tp",
    )

    def __init__(
        self,
        tp: TopicPartition,
        buf: bytes,
        position: int,
        generation: int,
        *,
        check_crcs: bool,
        read_committed: bool,
        aborted: Sequence[tuple[int, int]] = (),
    ) -> None:
        """``aborted``: (producer_id, first_offset) of the aborted transactions the broker listed."""
        self.tp = tp
        self.position = position
        self.position_epoch: int | None = None
        self._batch_epoch: int | None = None
        self.generation = generation
        self._buf = buf
        self._pos = 0
        self._check_crcs = check_crcs
        self._read_committed = read_committed
        self._aborted = [(first, pid) for pid, first in aborted]
        heapq.heapify(self._aborted)
        self._aborted_producers: set[int] = set()
        self._records: list[ConsumerRecord] | None = None
        self._index = 0
        self._batch_next_offset = position
        # Walk the batch lengths only: a trailing partial batch (the response hit its size limit) is left for the
        # next fetch.
        end = 0
        self.fetch_end = position
        while len(buf) - end >= HEADER_SIZE and (size := batch_size_at(buf, end)) <= len(buf) - end:
            if size < HEADER_SIZE:
                raise CorruptRecordError(f"batch length {size} at byte {end} is below the header size")
            self.fetch_end = max(self.fetch_end, parse_header(buf, end).next_offset)
            end += size
        if end == 0 and buf:
            raise RecordTooLargeError(
                f"{tp.topic}-{tp.partition}: the batch at offset {position} is larger than the fetch size "
                "(max.partition.fetch.bytes / fetch.max.bytes)"
            )
        self._end = end

    @property
    def exhausted(self) -> bool:
        return self._records is None and self._pos >= self._end

    def take(self, max_records: int) -> list[ConsumerRecord]:
        """Up to ``max_records`` records from the current position on, advancing it."""
        out: list[ConsumerRecord] = []
        while True:
            records = self._records
            if records is not None:
                start = self._index
                stop = start + max_records - len(out)
                chunk = records[start:stop]
                out += chunk
                if stop < len(records):
                    self._index = stop
                    self.position = chunk[-1].offset + 1
                    self.position_epoch = self._batch_epoch
                    return out
                self._records = None
                self.position = self._batch_next_offset
                self.position_epoch = self._batch_epoch
                if len(out) >= max_records:
                    return out
            if not self._next_batch():
                return out

    def _next_batch(self) -> bool:
        """Decode the next batch holding records at or after the position; False when none is left."""
        buf = self._buf
        while self._pos < self._end:
            header = validate_batch(buf, self._pos) if self._check_crcs else parse_header(buf, self._pos)
            self._pos += header.size
            next_offset = header.next_offset
            if next_offset <= self.position:
                continue
            epoch = header.partition_leader_epoch if header.partition_leader_epoch >= 0 else None
            if self._skip(header):
                self.position = next_offset
                self.position_epoch = epoch
                continue
            data, start, end = _batch_data(buf, header)
            log_append = header.is_log_append_time
            records = codec.decode_records(
                data,
                start,
                end,
                header.records_count,
                header.base_offset,
                header.base_timestamp,
                header.max_timestamp if log_append else None,
                ConsumerRecord,
                self.tp,  # topic, partition: the ConsumerRecord fields before offset
                _LOG_APPEND_TIME if log_append else _CREATE_TIME,
            )
            if records and records[0].offset < self.position:
                position = self.position
                records = [r for r in records if r.offset >= position]
            if not records:
                self.position = next_offset
                self.position_epoch = epoch
                continue
            self._records = records
            self._index = 0
            self._batch_next_offset = next_offset
            self._batch_epoch = epoch
            return True
        return False

    def _skip(self, header: BatchHeader) -> bool:
        """Whether a batch is hidden from the application: control batches always, aborted transactional ones with
        read_committed."""
        if self._read_committed and header.is_transactional:
            aborted = self._aborted
            while aborted and aborted[0][0] <= header.last_offset:
                self._aborted_producers.add(heapq.heappop(aborted)[1])
            if header.is_control:
                if self._is_abort_marker(header):
                    self._aborted_producers.discard(header.producer_id)
                return True
            return header.producer_id in self._aborted_producers
        return header.is_control

    def _is_abort_marker(self, header: BatchHeader) -> bool:
        records = RecordBatch(self._buf, header).records()
        return bool(records) and parse_control_record(records[0]).type == ControlType.ABORT

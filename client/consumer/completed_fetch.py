"""One partition's data from one Fetch response, decoded a batch at a time as ``poll()`` takes records.

Records decode straight into ``ConsumerRecord`` tuples (topic and partition included): one object per record,
which is what the consumer's throughput rests on. A fetch returns whole batches, so the first batch may start
before the position (after a seek, or mid-batch ``max.poll.records``): records below it are skipped. Control
batches are never returned, and with ``read_committed`` neither are batches of aborted transactions (using the
response's aborted-transaction list, as Kafka's fetcher does).
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

from odradek.client.errors import CorruptRecordError, RecordTooLargeError
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
from odradek.client.record.varint import read_zigzag
from odradek.client.structs import CREATE_TIME, LOG_APPEND_TIME, ConsumerRecord, TopicPartition

Headers = tuple[tuple[str, bytes | None], ...]


def _read_headers(data: bytes, pos: int) -> tuple[Headers, int]:
    z, pos = read_zigzag(data, pos)
    if z & 1:
        raise CorruptRecordError("negative record header count")
    headers = []
    for _ in range(z >> 1):
        z, pos = read_zigzag(data, pos)
        if z & 1:
            raise CorruptRecordError("negative record header key length")
        end = pos + (z >> 1)
        name = data[pos:end].decode("utf-8")
        z, pos = read_zigzag(data, end)
        if z == 1:
            value = None
        elif z & 1:
            raise CorruptRecordError("negative record header value length")
        else:
            end = pos + (z >> 1)
            value = data[pos:end]
            pos = end
        headers.append((name, value))
    return tuple(headers), pos


_UNZIGZAG = [(z >> 1) ^ -(z & 1) for z in range(0x80)]  # one-byte zigzag varint -> value


def decode_consumer_records(
    data: bytes,
    pos: int,
    end: int,
    count: int,
    base_offset: int,
    base_timestamp: int,
    topic: str,
    partition: int,
) -> list[ConsumerRecord]:
    """Decode ``count`` CreateTime records exactly filling ``data[pos:end]``.

    The loop reads one- and two-byte varints inline (records under 8 KiB), like ``record.batch.decode_records``,
    unzigzags one-byte deltas by table, and builds each ConsumerRecord in one step instead of a Record to copy."""
    records: list[ConsumerRecord] = []
    append = records.append
    new = tuple.__new__
    record_type = ConsumerRecord
    unzigzag = _UNZIGZAG
    create_time = CREATE_TIME
    no_headers: Headers = ()
    try:
        for _ in range(count):
            z = data[pos]  # length
            if z < 0x80:
                pos += 1
            else:
                b = data[pos + 1]
                if b < 0x80:
                    z = (z & 0x7F) | (b << 7)
                    pos += 2
                else:
                    z, pos = read_zigzag(data, pos)
            if z & 1:
                raise CorruptRecordError("negative record length")
            record_end = pos + (z >> 1)
            z = data[pos + 1]  # after the unused attributes byte: the timestamp delta
            if z < 0x80:
                pos += 2
                timestamp = base_timestamp + unzigzag[z]
            else:
                z, pos = read_zigzag(data, pos + 1)
                timestamp = base_timestamp + ((z >> 1) ^ -(z & 1))
            z = data[pos]  # offset delta
            if z < 0x80:
                pos += 1
                offset = base_offset + unzigzag[z]
            else:
                b = data[pos + 1]
                if b < 0x80:
                    z = (z & 0x7F) | (b << 7)
                    pos += 2
                else:
                    z, pos = read_zigzag(data, pos)
                offset = base_offset + ((z >> 1) ^ -(z & 1))
            z = data[pos]  # key length
            if z == 1:
                key = None
                pos += 1
            else:
                if z < 0x80:
                    pos += 1
                else:
                    b = data[pos + 1]
                    if b < 0x80:
                        z = (z & 0x7F) | (b << 7)
                        pos += 2
                    else:
                        z, pos = read_zigzag(data, pos)
                if z & 1:
                    raise CorruptRecordError("negative key length")
                key = data[pos : pos + (z >> 1)]
                pos += z >> 1
            z = data[pos]  # value length
            if z < 0x80:
                pos += 1
            else:
                b = data[pos + 1]
                if b < 0x80:
                    z = (z & 0x7F) | (b << 7)
                    pos += 2
                else:
                    z, pos = read_zigzag(data, pos)
            if z & 1:
                if z != 1:
                    raise CorruptRecordError("negative value length")
                value = None
            else:
                value = data[pos : pos + (z >> 1)]
                pos += z >> 1
            if data[pos] == 0:
                headers = no_headers
                pos += 1
            else:
                headers, pos = _read_headers(data, pos)
            if pos != record_end:
                raise CorruptRecordError(f"record fields end at byte {pos}, its length says {record_end}")
            append(new(record_type, (topic, partition, offset, timestamp, create_time, key, value, headers)))
    except IndexError:
        raise CorruptRecordError("record runs past the end of the batch") from None
    except UnicodeDecodeError as exc:
        raise CorruptRecordError(f"record header name is not UTF-8: {exc}") from None
    if pos != end:
        raise CorruptRecordError(f"{count} records end at byte {pos}, the batch at {end}")
    return records


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
            records = decode_consumer_records(
                data, start, end, header.records_count, header.base_offset, header.base_timestamp, *self.tp
            )
            if header.is_log_append_time:
                ts = header.max_timestamp
                records = [r._replace(timestamp=ts, timestamp_type=LOG_APPEND_TIME) for r in records]
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

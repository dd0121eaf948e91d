"""Leader-side batch rewrites that a topic's configs ask for, before the log appends a producer's batches.

- ``message.timestamp.type=LogAppendTime``: each batch's max timestamp becomes the leader's clock and its
  timestamp-type attribute bit (bit 3) is set; consumers then read that time for every record of the batch.
- ``compression.type`` other than ``producer``: a batch whose codec differs is recompressed with the topic's
  (``uncompressed`` = none). Offsets, record contents, producer id and sequence are unchanged.

Both keep the batch valid (the CRC is recomputed) and happen on the leader only: followers copy the leader's bytes.
A topic with neither setting takes the fast path: the buffer is returned untouched, nothing is decoded.
"""

from __future__ import annotations

from odradek.client.record.builder import assemble_batch
from odradek.client.record.compression import decompress
from odradek.client.record.header import (
    COMPRESSION_CODES,
    COMPRESSION_MASK,
    HEADER_SIZE,
    TIMESTAMP_TYPE_MASK,
    check_record_count,
    iter_batches,
)

CREATE_TIME = "CreateTime"
LOG_APPEND_TIME = "LogAppendTime"
PRODUCER = "producer"

# Topic compression.type -> batch codec; "producer" (keep the producer's) is absent.
TOPIC_CODECS: dict[str, int] = {"uncompressed": COMPRESSION_CODES["none"]} | {
    name: code for name, code in COMPRESSION_CODES.items() if name != "none"
}


def rewrite_for_append(
    buf: bytes | bytearray | memoryview, timestamp_type: str, compression_type: str, now_ms: int
) -> bytes | bytearray | memoryview:
    """The producer's batches as the topic stores them; ``buf`` itself when the topic keeps them as sent.

    Every batch is validated (header, CRC) before anything is rewritten, so a damaged batch is still refused
    rather than given a fresh CRC."""
    stamp = timestamp_type == LOG_APPEND_TIME
    codec = TOPIC_CODECS.get(compression_type)
    if not stamp and codec is None:
        return buf
    headers = iter_batches(buf)
    if codec is not None and not stamp and all(h.compression == codec or h.is_control for h in headers):
        return buf
    view = memoryview(buf)
    parts: list[bytes | memoryview] = []
    for h in headers:
        section: bytes | memoryview = view[h.position + HEADER_SIZE : h.position + h.size]
        attributes = h.attributes
        recompress_to = codec if codec is not None and h.compression != codec and not h.is_control else None
        if recompress_to is not None:
            if h.compression == 0:
                check_record_count(buf, h)  # the log checks uncompressed records only: check them before
            section = decompress(h.compression, section)
            attributes = (attributes & ~COMPRESSION_MASK) | recompress_to
        max_timestamp = h.max_timestamp
        if stamp:
            attributes |= TIMESTAMP_TYPE_MASK
            max_timestamp = now_ms
        if attributes == h.attributes and max_timestamp == h.max_timestamp:
            parts.append(view[h.position : h.position + h.size])
            continue
        parts.append(
            assemble_batch(
                bytes(section),
                h.records_count,
                0 if recompress_to is None else recompress_to,  # 0: the section is already in the batch's codec
                attributes,
                h.base_offset,
                h.partition_leader_epoch,
                h.last_offset_delta,
                h.base_timestamp,
                max_timestamp,
                h.producer_id,
                h.producer_epoch,
                h.base_sequence,
            )
        )
    return b"".join(parts)

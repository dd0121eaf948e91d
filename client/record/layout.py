"""The v2 RecordBatch header's byte layout (Kafka magic 2), shared by the header functions and the codec::

    offset  size  field
    0       8     base_offset
    8       4     batch_length            (bytes after this field)
    12      4     partition_leader_epoch
    16      1     magic (2)
    17      4     crc (CRC32C over attributes .. end of batch)
    21      2     attributes
    23      4     last_offset_delta
    27      8     base_timestamp
    35      8     max_timestamp
    43      8     producer_id
    51      2     producer_epoch
    53      4     base_sequence
    57      4     records_count
    61            records

``header.py`` reads and checks headers with these; ``reference.py`` (and the native accelerator, which spells the
same offsets in C) validates batches for an append with them.
"""

from __future__ import annotations

import struct

MAGIC = 2
HEADER_SIZE = 61
LOG_OVERHEAD = 12  # base_offset + batch_length: the bytes not counted in batch_length
CRC_START = 21  # the CRC covers attributes .. end
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD
COMPRESSION_MASK = 0x07  # attributes bits holding the compression codec; 0 is none

# The fields an append needs, in one unpack (base_timestamp skipped): base_offset, batch_length,
# partition_leader_epoch, magic, crc, attributes, last_offset_delta, max_timestamp, producer_id, producer_epoch,
# base_sequence, records_count.
APPEND_FIELDS = struct.Struct(">qiibIhi8xqqhii")

AppendBatch = tuple[int, int, int, int, int, int, int, int, int]
"""One batch as validated for an append: (base_offset, size, last_offset_delta, max_timestamp, records_count,
partition_leader_epoch, producer_id, producer_epoch, base_sequence)."""

"""A bounded key -> last offset map for one cleaning pass (Kafka's SkimpyOffsetMap).

Keys are stored as a 16-byte BLAKE2b digest next to an 8-byte offset in one preallocated bytearray: 24 bytes a
slot, open addressing with linear probing, so the memory is exactly the budget (``log.cleaner.dedupe.buffer.size``)
whatever the keys' sizes. The map accepts at most ``load_factor`` of its slots (Kafka's
``log.cleaner.io.buffer.load.factor``, 0.9) to keep probes short; the cleaner asks ``has_room`` before each batch
and stops the dirty section there when the map is full (the next pass continues from that offset).

A digest collision (2**-64 per pair for the bits compared) would make one key's record look superseded by the
other's: the same trade-off Kafka makes with its MD5 digests.
"""

from __future__ import annotations

import struct
from hashlib import blake2b

DIGEST_SIZE = 16
SLOT_SIZE = DIGEST_SIZE + 8
_OFFSET = struct.Struct("<q")
_EMPTY = -1  # offsets are >= 0, so an all-ones offset marks a free slot


class OffsetMap:
    """Digest of a key -> the largest offset put for it."""

    def __init__(self, memory_bytes: int, load_factor: float = 0.9) -> None:
        if memory_bytes < SLOT_SIZE:
            raise ValueError(f"the offset map needs at least {SLOT_SIZE} bytes, got {memory_bytes}")
        if not 0 < load_factor <= 1:
            raise ValueError(f"load factor must be in (0, 1], got {load_factor}")
        self.slots = memory_bytes // SLOT_SIZE
        self.max_entries = max(1, int(self.slots * load_factor))
        self._table = bytearray(b"\xff" * (self.slots * SLOT_SIZE))
        self.size = 0
        self.latest_offset = -1  # the largest offset put: the end (inclusive) of the section the map covers

    def clear(self) -> None:
        self._table[:] = b"\xff" * len(self._table)
        self.size = 0
        self.latest_offset = -1

    def has_room(self, count: int) -> bool:
        """True if ``count`` more keys fit (the cleaner asks per batch, with the batch's record count)."""
        return self.size + count <= self.max_entries

    @property
    def utilization(self) -> float:
        return self.size / self.slots

    def _find(self, digest: bytes) -> int:
        """Byte position of ``digest``'s slot, of the free slot where it would go, or -1 (absent, table full)."""
        table, slots = self._table, self.slots
        i = int.from_bytes(digest[:8], "little") % slots
        for _ in range(slots):
            p = i * SLOT_SIZE
            if table[p : p + DIGEST_SIZE] == digest or _OFFSET.unpack_from(table, p + DIGEST_SIZE)[0] == _EMPTY:
                return p
            i += 1
            if i == slots:
                i = 0
        return -1

    def put(self, key: bytes, offset: int) -> None:
        """Record ``offset`` for ``key`` (offsets are put in increasing order, so the last put wins)."""
        digest = blake2b(key, digest_size=DIGEST_SIZE).digest()
        table = self._table
        p = self._find(digest)
        if p < 0 or _OFFSET.unpack_from(table, p + DIGEST_SIZE)[0] == _EMPTY:
            if p < 0 or self.size >= self.max_entries:
                raise OverflowError("offset map is full")
            table[p : p + DIGEST_SIZE] = digest
            self.size += 1
        _OFFSET.pack_into(table, p + DIGEST_SIZE, offset)
        if offset > self.latest_offset:
            self.latest_offset = offset

    def get(self, key: bytes) -> int:
        """The offset put last for ``key``, or -1."""
        p = self._find(blake2b(key, digest_size=DIGEST_SIZE).digest())
        if p < 0:
            return -1
        offset: int = _OFFSET.unpack_from(self._table, p + DIGEST_SIZE)[0]
        return offset

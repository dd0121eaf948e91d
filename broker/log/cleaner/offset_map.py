"""A bounded key -> last offset map for one cleaning pass (Kafka's SkimpyOffsetMap).

Keys are stored as a 16-byte BLAKE2b digest next to an 8-byte offset in one preallocated bytearray: 24 bytes a
slot, open addressing with linear probing, so the memory is exactly the budget (``log.cleaner.dedupe.buffer.size``)
whatever the keys' sizes. The map accepts at most ``load_factor`` of its slots (Kafka's
``log.cleaner.io.buffer.load.factor``, 0.9) to keep probes short; the cleaner asks ``has_room`` before each batch
and stops the dirty section there when the map is full (the next pass continues from that offset).

A digest collision (2**-128 per pair) would make one key's record look superseded by the other's: the same
trade-off Kafka makes with its MD5 digests. The whole 16-byte digest is compared, never a shorter hash. A free
slot holds the all-ones digest; a key whose digest were all ones (as unlikely as a collision) would share the
free slots' marker.

Speed (this is the cleaner's hot path, in pure Python): the cleaner puts and gets a whole batch's keys in one call
(``put_batch``, ``get_batch``), so the per-key work is one BLAKE2b call and a probe loop of a few C-level
operations: ``bytearray.startswith(digest, position)`` compares a slot in place (no slice), against the key's
digest and then the free marker; the offset is unpacked only once the slot is found; the home slot is
``hash(digest)`` (the digest's own hash, computed in C; the digest is uniform, so any of its bits would do). One
table keeps a slot's digest and offset in the same cache line: with a large map most probes miss the CPU cache.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from hashlib import blake2b

DIGEST_SIZE = 16
SLOT_SIZE = DIGEST_SIZE + 8
_OFFSET = struct.Struct("<q")
_FREE = b"\xff" * DIGEST_SIZE
_CLEAR_CHUNK = 1 << 20


class OffsetMap:
    """Digest of a key -> the largest offset put for it."""

    def __init__(self, memory_bytes: int, load_factor: float = 0.9) -> None:
        if memory_bytes < SLOT_SIZE:
            raise ValueError(f"the offset map needs at least {SLOT_SIZE} bytes, got {memory_bytes}")
        if not 0 < load_factor <= 1:
            raise ValueError(f"load factor must be in (0, 1], got {load_factor}")
        self.slots = memory_bytes // SLOT_SIZE
        self.max_entries = max(1, int(self.slots * load_factor))
        self._table = bytearray(b"\xff" * SLOT_SIZE) * self.slots  # a free slot's offset bytes are never read
        self.size = 0
        self.latest_offset = -1  # the largest offset put: the end (inclusive) of the section the map covers

    @property
    def memory_bytes(self) -> int:
        """The bytes the table holds: ``slots * SLOT_SIZE``, allocated once."""
        return len(self._table)

    def clear(self) -> None:
        table = self._table
        ones = b"\xff" * min(len(table), _CLEAR_CHUNK)
        for p in range(0, len(table), len(ones)):  # in place, a chunk at a time (no second table-sized buffer)
            table[p : p + len(ones)] = ones[: len(table) - p]
        self.size = 0
        self.latest_offset = -1

    def has_room(self, count: int) -> bool:
        """True if ``count`` more keys fit (the cleaner asks per batch, with the batch's record count)."""
        return self.size + count <= self.max_entries

    @property
    def utilization(self) -> float:
        return self.size / self.slots

    def put(self, key: bytes, offset: int) -> None:
        """Record ``offset`` for ``key`` (offsets are put in increasing order, so the last put wins)."""
        self.put_batch((key,), (offset,))

    def get(self, key: bytes) -> int:
        """The offset put last for ``key``, or -1."""
        return self.get_batch((key,))[0]

    def put_batch(self, keys: Sequence[bytes | None], offsets: Sequence[int]) -> None:
        """``put(keys[i], offsets[i])`` for each i, in order, skipping None keys. OverflowError when a new key
        finds the map full (the keys before it are in)."""
        table, slots, end = self._table, self.slots, len(self._table)
        size, max_entries, latest = self.size, self.max_entries, self.latest_offset
        pack = _OFFSET.pack_into
        bounded = size + len(keys) > slots  # the table may fill: probe at most ``slots`` times
        try:
            for key, offset in zip(keys, offsets):
                if key is None:
                    continue
                digest = blake2b(key, digest_size=DIGEST_SIZE).digest()
                p = hash(digest) % slots * SLOT_SIZE
                if bounded:
                    p = self._find_bounded(digest, p)
                    new = p < 0 or table.startswith(_FREE, p)
                else:
                    # Terminates: before each put fewer than ``slots`` keys are in, so a free slot is reached.
                    while True:
                        if table.startswith(digest, p):
                            new = False
                            break
                        if table.startswith(_FREE, p):
                            new = True
                            break
                        p += SLOT_SIZE
                        if p == end:
                            p = 0
                if new:
                    if p < 0 or size >= max_entries:
                        raise OverflowError("offset map is full")
                    table[p : p + DIGEST_SIZE] = digest
                    size += 1
                pack(table, p + DIGEST_SIZE, offset)
                if offset > latest:
                    latest = offset
        finally:
            self.size, self.latest_offset = size, latest

    def get_batch(self, keys: Sequence[bytes | None]) -> list[int]:
        """``get(key)`` for each key (-1 for a None key)."""
        table, slots, end = self._table, self.slots, len(self._table)
        unpack = _OFFSET.unpack_from
        bounded = self.size >= slots
        out: list[int] = []
        append = out.append
        for key in keys:
            if key is None:
                append(-1)
                continue
            digest = blake2b(key, digest_size=DIGEST_SIZE).digest()
            p = hash(digest) % slots * SLOT_SIZE
            if bounded:
                p = self._find_bounded(digest, p)
                append(-1 if p < 0 or table.startswith(_FREE, p) else unpack(table, p + DIGEST_SIZE)[0])
                continue
            while True:
                if table.startswith(digest, p):
                    append(unpack(table, p + DIGEST_SIZE)[0])
                    break
                if table.startswith(_FREE, p):
                    append(-1)
                    break
                p += SLOT_SIZE
                if p == end:
                    p = 0
        return out

    def _find_bounded(self, digest: bytes, p: int) -> int:
        """The position of ``digest``'s slot or of the free slot where it would go, probing from ``p`` at most once
        around the table; -1 if absent from a full table. The slow path, for a table that is or may become full."""
        table, end = self._table, len(self._table)
        for _ in range(self.slots):
            if table.startswith(digest, p) or table.startswith(_FREE, p):
                return p
            p += SLOT_SIZE
            if p == end:
                p = 0
        return -1

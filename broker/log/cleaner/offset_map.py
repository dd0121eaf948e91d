"""A bounded key -> last offset map for one cleaning pass (Kafka's SkimpyOffsetMap).

Keys are stored as a 16-byte BLAKE2b digest (in one preallocated bytearray) next to an 8-byte offset (in a
parallel ``array('q')``): 24 bytes a slot, open addressing with linear probing, so the memory is exactly the budget
(``log.cleaner.dedupe.buffer.size``) whatever the keys' sizes. The map accepts at most ``load_factor`` of its slots
(Kafka's ``log.cleaner.io.buffer.load.factor``, 0.9) to keep probes short; the cleaner asks ``has_room`` before
each batch and stops the dirty section there when the map is full (the next pass continues from that offset).

A digest collision (2**-128 per pair) would make one key's record look superseded by the other's: the same
trade-off Kafka makes with its MD5 digests. The map never trusts a shorter hash for identity: the slot's whole
digest is compared.

Speed (this is the cleaner's hot path, in pure Python): the cleaner puts and gets a whole batch's keys in one call
(``put_batch``, ``get_batch``), so the per-key work is one BLAKE2b call and a probe loop of a few C-level
operations: a free slot is an offset of -1 in the array (one index and compare), a taken slot is matched with
``bytearray.startswith(digest, position)`` (compares in place, no slice), and the home slot is ``hash(digest)``
(the digest's own hash, computed once in C; the digest is uniform, so any of its bits would do).
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from hashlib import blake2b

DIGEST_SIZE = 16
OFFSET_SIZE = 8
SLOT_SIZE = DIGEST_SIZE + OFFSET_SIZE
_FREE = -1  # offsets are >= 0, so -1 marks a free slot


class OffsetMap:
    """Digest of a key -> the largest offset put for it."""

    def __init__(self, memory_bytes: int, load_factor: float = 0.9) -> None:
        if memory_bytes < SLOT_SIZE:
            raise ValueError(f"the offset map needs at least {SLOT_SIZE} bytes, got {memory_bytes}")
        if not 0 < load_factor <= 1:
            raise ValueError(f"load factor must be in (0, 1], got {load_factor}")
        self.slots = memory_bytes // SLOT_SIZE
        self.max_entries = max(1, int(self.slots * load_factor))
        self._digests = bytearray(self.slots * DIGEST_SIZE)  # stale bytes in a free slot are never compared
        self._offsets = array("q", [_FREE]) * self.slots
        assert self._offsets.itemsize == OFFSET_SIZE
        self.size = 0
        self.latest_offset = -1  # the largest offset put: the end (inclusive) of the section the map covers

    @property
    def memory_bytes(self) -> int:
        """The bytes the table holds: ``slots * SLOT_SIZE``, allocated once."""
        return len(self._digests) + len(self._offsets) * self._offsets.itemsize

    def clear(self) -> None:
        self._offsets[:] = array("q", [_FREE]) * self.slots
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
        digests, table, slots = self._digests, self._offsets, self.slots
        size, max_entries, latest = self.size, self.max_entries, self.latest_offset
        bounded = size + len(keys) >= slots  # the table may fill: probe at most ``slots`` times
        try:
            for key, offset in zip(keys, offsets):
                if key is None:
                    continue
                digest = blake2b(key, digest_size=DIGEST_SIZE).digest()
                i = hash(digest) % slots
                if bounded:
                    i = self._find_bounded(digest, i)
                    if i < 0 or table[i] == _FREE:
                        if i < 0 or size >= max_entries:
                            raise OverflowError("offset map is full")
                        digests[i * DIGEST_SIZE : (i + 1) * DIGEST_SIZE] = digest
                        size += 1
                else:
                    # Terminates: fewer than ``slots`` keys are in, so a free slot is reached.
                    while True:
                        if table[i] == _FREE:
                            if size >= max_entries:
                                raise OverflowError("offset map is full")
                            digests[i * DIGEST_SIZE : (i + 1) * DIGEST_SIZE] = digest
                            size += 1
                            break
                        if digests.startswith(digest, i * DIGEST_SIZE):
                            break
                        i += 1
                        if i == slots:
                            i = 0
                table[i] = offset
                if offset > latest:
                    latest = offset
        finally:
            self.size, self.latest_offset = size, latest

    def get_batch(self, keys: Sequence[bytes | None]) -> list[int]:
        """``get(key)`` for each key (-1 for a None key)."""
        digests, table, slots = self._digests, self._offsets, self.slots
        bounded = self.size >= slots
        out: list[int] = []
        append = out.append
        for key in keys:
            if key is None:
                append(-1)
                continue
            digest = blake2b(key, digest_size=DIGEST_SIZE).digest()
            i = hash(digest) % slots
            if bounded:
                i = self._find_bounded(digest, i)
                append(-1 if i < 0 else table[i])
                continue
            while True:
                offset = table[i]
                if offset == _FREE or digests.startswith(digest, i * DIGEST_SIZE):
                    append(offset)
                    break
                i += 1
                if i == slots:
                    i = 0
        return out

    def _find_bounded(self, digest: bytes, i: int) -> int:
        """The slot of ``digest`` or the free slot where it would go, probing from ``i`` at most once around the
        table; -1 if absent from a full table. The slow path, for a table that is or may become full."""
        digests, table, slots = self._digests, self._offsets, self.slots
        for _ in range(slots):
            if table[i] == _FREE or digests.startswith(digest, i * DIGEST_SIZE):
                return i
            i += 1
            if i == slots:
                i = 0
        return -1

"""Byte ranges of segment files: storage hands them out, the listeners send them with ``sendfile``.

Shared so that the storage layer never imports a listener."""

from __future__ import annotations

import os


class FileSlice:
    """A byte range of a segment file, for the listener to send with ``sendfile`` (zero copy).

    Owns ``fd``, a duplicate of the segment's descriptor, so the range stays readable when the segment's own
    descriptor is evicted from the handle cache or the file is deleted meanwhile. Whoever ends up with the slice
    closes it (``close`` is idempotent); ``read`` is the buffered fallback for transports that cannot sendfile."""

    __slots__ = ("fd", "length", "position")

    def __init__(self, fd: int, position: int, length: int) -> None:
        self.fd = fd
        self.position = position
        self.length = length

    def __len__(self) -> int:
        return self.length

    def __repr__(self) -> str:
        return f"FileSlice(fd={self.fd}, position={self.position}, length={self.length})"

    def read(self) -> bytes:
        """The range's bytes (short only if the file was truncated under it)."""
        parts, position, left = [], self.position, self.length
        while left > 0:
            chunk = os.pread(self.fd, left, position)
            if not chunk:
                break
            parts.append(chunk)
            position += len(chunk)
            left -= len(chunk)
        return b"".join(parts)

    def close(self) -> None:
        if self.fd >= 0:
            fd, self.fd = self.fd, -1
            os.close(fd)


Chunk = bytes | bytearray | memoryview | FileSlice


def chunks_size(chunks: list[Chunk]) -> int:
    return sum(len(c) for c in chunks)


def close_chunks(chunks: list[Chunk]) -> None:
    """Close the file slices among ``chunks`` (an answer that is dropped instead of sent)."""
    for c in chunks:
        if isinstance(c, FileSlice):
            c.close()

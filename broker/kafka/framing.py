"""Kafka's framing, sans-I/O: a 4-byte big-endian size, then that many bytes.

Small requests are read ahead several per ``recv`` (clients pipeline them) and copied out into a buffer of their
own; the rest of a large one is received straight into its own buffer, so a produce payload is copied once, by the
kernel. Each frame gets a buffer of its own because the handlers keep slices of it (produce appends them as they
are).
"""

from __future__ import annotations

import struct

_SIZE = struct.Struct(">i")
READ_AHEAD = 64 * 1024


class FrameSizeError(Exception):
    """A size prefix below 0 or above the limit (``socket.request.max.bytes``): the frame is not read."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"request size {size} outside [0, {limit}]")
        self.size = size


class FrameReader:
    """Cuts received bytes into frames. The shell receives into ``recv_buffer()``, reports the count with
    ``received``, and takes frames with ``next_frame`` until it returns None."""

    def __init__(self, max_frame_bytes: int, read_ahead: int = READ_AHEAD) -> None:
        self.max_frame_bytes = max_frame_bytes
        self._buf = bytearray(max(read_ahead, _SIZE.size))
        self._start = 0  # unread bytes are _buf[_start:_end]
        self._end = 0
        self._frame: bytearray | None = None  # a large frame being received into its own buffer
        self._filled = 0

    @property
    def partial(self) -> bool:
        """True while a frame (or its size prefix) is only partly received: an EOF now cuts it short."""
        return self._frame is not None or self._end > self._start

    def recv_buffer(self) -> memoryview:
        """Where the next bytes go: the rest of the frame being received, else the read-ahead buffer's free end."""
        if self._frame is not None:
            return memoryview(self._frame)[self._filled :]
        if self._start:
            n = self._end - self._start
            self._buf[:n] = self._buf[self._start : self._end]
            self._start, self._end = 0, n
        return memoryview(self._buf)[self._end :]

    def received(self, n: int) -> None:
        if self._frame is not None:
            self._filled += n
        else:
            self._end += n

    def next_frame(self) -> bytearray | None:
        """The next whole frame (without its size prefix), or None until more bytes are received.

        Raises FrameSizeError for a bad size prefix."""
        frame = self._frame
        if frame is not None:
            if self._filled < len(frame):
                return None
            self._frame = None
            return frame
        available = self._end - self._start
        if available < _SIZE.size:
            return None
        size = _SIZE.unpack_from(self._buf, self._start)[0]
        if size < 0 or size > self.max_frame_bytes:
            raise FrameSizeError(size, self.max_frame_bytes)
        begin = self._start + _SIZE.size
        take = min(size, available - _SIZE.size)
        frame = bytearray(size)
        frame[:take] = memoryview(self._buf)[begin : begin + take]
        self._start = begin + take
        if self._start == self._end:
            self._start = self._end = 0
        if take == size:
            return frame
        self._frame, self._filled = frame, take
        return None

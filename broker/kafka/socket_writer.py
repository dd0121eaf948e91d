"""Writing a response's chunks to a raw non-blocking socket, file ranges with ``os.sendfile`` (zero copy).

Record data of a fetch goes from the page cache to the socket without entering Python. asyncio's own
``loop.sendfile`` is no use here: uvloop does not implement it, and it refuses ``add_writer`` on a descriptor a
transport owns, so the listener keeps raw sockets and waits for writability itself. Where ``sendfile`` cannot
write to the socket (EINVAL, EOPNOTSUPP, ENOSYS, or a transport such as TLS that says so up front) the ranges are
read in pieces and sent as bytes.
"""

from __future__ import annotations

import asyncio
import errno
import os
import socket
import ssl

from odradek.client.common.file_slice import Chunk, FileSlice, close_chunks

_IOV_MAX = min(os.sysconf("SC_IOV_MAX") if hasattr(os, "sysconf") else 1024, 1024)
_MSG_MORE = getattr(socket, "MSG_MORE", 0)
_NO_SENDFILE = {errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, getattr(errno, "ENOTSUP", errno.EOPNOTSUPP)}
_SENDFILE_MAX = 0x7FFFF000  # Linux moves at most this much per call
FALLBACK_PIECE = 256 * 1024  # bytes read at a time where sendfile cannot be used


class SliceTruncatedError(Exception):
    """A file range yielded fewer bytes than its length (the file shrank under it): the size prefix already sent
    no longer matches, so the connection must be closed."""


class SocketWriter:
    """Writes whole responses to one connected non-blocking socket, in order (one ``write`` at a time)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, sock: socket.socket, *, use_sendfile: bool = True) -> None:
        self._loop = loop
        self._sock = sock
        self._fd = sock.fileno()
        self.tls = isinstance(sock, ssl.SSLSocket)
        # sendfile would put the file's plaintext on a TLS connection: its ranges are read and encrypted instead.
        self.use_sendfile = use_sendfile and hasattr(os, "sendfile") and not self.tls

    async def write(self, chunks: list[Chunk]) -> None:
        """Send ``chunks`` entirely. Every FileSlice among them is closed, whether sent or not (an error, a
        cancellation). Raises OSError (peer gone) or SliceTruncatedError."""
        try:
            i, n = 0, len(chunks)
            while i < n:
                chunk = chunks[i]
                if isinstance(chunk, FileSlice):
                    await self._send_slice(chunk)
                    chunk.close()
                    i += 1
                    continue
                j = i + 1  # a run of buffers goes in one sendmsg
                while j < n and j - i < _IOV_MAX and not isinstance(chunks[j], FileSlice):
                    j += 1
                more = j < n and isinstance(chunks[j], FileSlice)
                await self._send_buffers([c for c in chunks[i:j] if not isinstance(c, FileSlice)], more)
                i = j
        finally:
            close_chunks(chunks)

    async def _send_buffers(self, buffers: list[bytes | bytearray | memoryview], more: bool) -> None:
        """sendmsg, resuming after partial writes; ``more``: a file range follows (MSG_MORE fills the segment)."""
        if self.tls:
            await self._send_tls(b"".join(buffers))
            return
        views = [memoryview(b).cast("B") for b in buffers if len(b)]
        flags = _MSG_MORE if more else 0
        while views:
            try:
                sent = self._sock.sendmsg(views, (), flags)
            except BlockingIOError:
                await self._writable()
                continue
            while views and sent >= len(views[0]):
                sent -= len(views.pop(0))
            if views and sent:
                views[0] = views[0][sent:]

    async def _send_slice(self, piece: FileSlice) -> None:
        position, left = piece.position, piece.length
        while left > 0 and self.use_sendfile:
            try:
                sent = os.sendfile(self._fd, piece.fd, position, min(left, _SENDFILE_MAX))
            except BlockingIOError:
                await self._writable()
                continue
            except OSError as e:
                if e.errno not in _NO_SENDFILE:
                    raise
                self.use_sendfile = False  # this socket cannot: read and send from now on
                break
            if sent == 0:
                raise SliceTruncatedError(f"{piece!r} ends at byte {position}: the file shrank")
            position += sent
            left -= sent
        while left > 0:
            data = os.pread(piece.fd, min(left, FALLBACK_PIECE), position)
            if not data:
                raise SliceTruncatedError(f"{piece!r} ends at byte {position}: the file shrank")
            await self._send_buffers([data], False)
            position += len(data)
            left -= len(data)

    async def _send_tls(self, data: bytes) -> None:
        """SSLSocket.send, which takes no iovec; after a want-write it is retried with the same bytes, as OpenSSL
        requires."""
        view = memoryview(data)
        while view:
            try:
                sent = self._sock.send(view)
            except (BlockingIOError, ssl.SSLWantWriteError):
                await self._writable()
                continue
            except ssl.SSLWantReadError:
                await self._readable()
                continue
            view = view[sent:]

    async def writable(self) -> None:
        """Until the socket can take more bytes."""
        await self._writable()

    async def _readable(self) -> None:
        fut = self._loop.create_future()
        self._loop.add_reader(self._fd, _wake, fut)
        try:
            await fut
        finally:
            self._loop.remove_reader(self._fd)

    async def _writable(self) -> None:
        fut = self._loop.create_future()
        self._loop.add_writer(self._fd, _wake, fut)
        try:
            await fut
        finally:
            self._loop.remove_writer(self._fd)


def _wake(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)

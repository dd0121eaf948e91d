"""Compression codecs for the records section of a batch, with the framing Kafka's Java client writes and reads.

- gzip: a standard gzip stream (level 6, Java's GZIPOutputStream default); concatenated members are read too.
- snappy: xerial's block framing (what Kafka's SnappyOutputStream writes), 32 KiB blocks; a bare snappy block
  without the xerial header is accepted on read, as Kafka's SnappyInputStream does.
- lz4: an LZ4 frame with independent 64 KiB blocks and no content size, as Kafka's Lz4BlockOutputStream writes
  (Kafka cannot read linked blocks).
- zstd: a zstd frame at level 3 (Kafka's default); frames without a content size (Java's streaming writer) and
  several frames in a row are read too.

Compression contexts are per thread: zstd's are not thread-safe and cost ~12 µs to create, more than compressing a
16 KiB batch.
"""

from __future__ import annotations

import gzip
import struct
import threading
import zlib

import cramjam
import lz4.frame
import zstandard

from odradek.client.errors import CorruptRecordError
from odradek.client.record.header import (
    COMPRESSION_GZIP,
    COMPRESSION_LZ4,
    COMPRESSION_NONE,
    COMPRESSION_SNAPPY,
    COMPRESSION_ZSTD,
)

XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)  # version 1, minimum compatible version 1
XERIAL_BLOCK_SIZE = 32 * 1024
_INT32 = struct.Struct(">i")

GZIP_LEVEL = 6
ZSTD_LEVEL = 3

_local = threading.local()


def _zstd_compressor() -> zstandard.ZstdCompressor:
    try:
        compressor: zstandard.ZstdCompressor = _local.zstd_compressor
    except AttributeError:
        compressor = _local.zstd_compressor = zstandard.ZstdCompressor(level=ZSTD_LEVEL)
    return compressor


def _zstd_decompressor() -> zstandard.ZstdDecompressor:
    try:
        decompressor: zstandard.ZstdDecompressor = _local.zstd_decompressor
    except AttributeError:
        decompressor = _local.zstd_decompressor = zstandard.ZstdDecompressor()
    return decompressor


def xerial_snappy_compress(data: bytes | memoryview) -> bytes:
    """Snappy in xerial block framing: header, then (int32 length, raw snappy block) per 32 KiB of input."""
    view = memoryview(data)
    pieces = [XERIAL_HEADER]
    for start in range(0, len(view), XERIAL_BLOCK_SIZE):
        block = bytes(cramjam.snappy.compress_raw(view[start : start + XERIAL_BLOCK_SIZE]))
        pieces.append(_INT32.pack(len(block)))
        pieces.append(block)
    return b"".join(pieces)


def xerial_snappy_decompress(data: bytes | memoryview) -> bytes:
    """Inverse of ``xerial_snappy_compress``; a payload without the xerial magic is read as one raw block.

    Like Kafka, the version fields are not checked (some producers write them little-endian).
    """
    view = memoryview(data)
    if len(view) < len(XERIAL_HEADER) or view[: len(XERIAL_MAGIC)] != XERIAL_MAGIC:
        return bytes(cramjam.snappy.decompress_raw(view))
    pieces = []
    pos = len(XERIAL_HEADER)
    end = len(view)
    while pos < end:
        if pos + 4 > end:
            raise CorruptRecordError("truncated xerial snappy block length")
        (length,) = _INT32.unpack_from(view, pos)
        pos += 4
        if length < 0 or pos + length > end:
            raise CorruptRecordError(f"xerial snappy block of {length} bytes runs past the data")
        pieces.append(bytes(cramjam.snappy.decompress_raw(view[pos : pos + length])))
        pos += length
    return b"".join(pieces)


def _zstd_decompress(data: bytes | memoryview) -> bytes:
    """Frame by frame: ``read_across_frames`` would hide a truncated last frame (its ``eof`` never turns true)."""
    dctx = _zstd_decompressor()
    pieces = []
    while True:
        reader = dctx.decompressobj()
        pieces.append(reader.decompress(data))
        if not reader.eof:
            raise CorruptRecordError("truncated zstd frame")
        data = reader.unused_data
        if not data:
            return b"".join(pieces)


def compress(codec: int, data: bytes) -> bytes:
    """Compress a batch's records section with ``codec`` (a COMPRESSION_* code)."""
    if codec == COMPRESSION_NONE:
        return data
    if codec == COMPRESSION_GZIP:
        return zlib.compress(data, GZIP_LEVEL, wbits=31)  # wbits 16+15: gzip container
    if codec == COMPRESSION_SNAPPY:
        return xerial_snappy_compress(data)
    if codec == COMPRESSION_LZ4:
        frame: bytes = lz4.frame.compress(  # lz4 ships no type information
            data,
            block_size=lz4.frame.BLOCKSIZE_MAX64KB,
            block_linked=False,
            content_checksum=False,
            store_size=False,
        )
        return frame
    if codec == COMPRESSION_ZSTD:
        return _zstd_compressor().compress(data)
    raise ValueError(f"unknown compression codec {codec}")


def decompress(codec: int, data: bytes | memoryview) -> bytes:
    """Decompress a records section; damaged data raises CorruptRecordError, an unknown codec too."""
    try:
        if codec == COMPRESSION_NONE:
            return bytes(data)
        if codec == COMPRESSION_GZIP:
            return gzip.decompress(data)
        if codec == COMPRESSION_SNAPPY:
            return xerial_snappy_decompress(data)
        if codec == COMPRESSION_LZ4:
            records: bytes = lz4.frame.decompress(data)  # lz4 ships no type information
            return records
        if codec == COMPRESSION_ZSTD:
            return _zstd_decompress(data)
    except CorruptRecordError:
        raise
    except Exception as exc:  # each library raises its own types (OSError, RuntimeError, ZstdError, ...)
        raise CorruptRecordError(f"cannot decompress the records ({codec=}): {exc}") from exc
    raise CorruptRecordError(f"unknown compression codec {codec}")

"""Codecs with Kafka's framing, including hand-built xerial snappy streams and the framings Java writes."""

import gzip
import io
import os
import struct

import lz4.frame
import pytest
import zstandard

from odradek.client.errors import CorruptRecordError
from odradek.client.record.compression import (
    XERIAL_BLOCK_SIZE,
    compress,
    decompress,
    xerial_snappy_compress,
    xerial_snappy_decompress,
)
from odradek.client.record.header import (
    COMPRESSION_GZIP,
    COMPRESSION_LZ4,
    COMPRESSION_NONE,
    COMPRESSION_SNAPPY,
    COMPRESSION_ZSTD,
)

CODECS = [COMPRESSION_NONE, COMPRESSION_GZIP, COMPRESSION_SNAPPY, COMPRESSION_LZ4, COMPRESSION_ZSTD]
COMPRESSED = CODECS[1:]

# Built by hand from the xerial and snappy specs: magic, version 1, compatible 1, then (int32 length, block).
# Block 1 is b"hello": uncompressed length 5, one literal (tag (5-1)<<2).
# Block 2 is b"abcd" * 3: uncompressed length 12, literal "abcd", then a 1-byte-offset copy of 8 bytes from 4 back
# (tag (8-4)<<2 | 1, offset 4).
XERIAL_HEADER = b"\x82SNAPPY\x00" + b"\x00\x00\x00\x01" + b"\x00\x00\x00\x01"
HELLO_BLOCK = b"\x05\x10hello"
ABCD_BLOCK = b"\x0c\x0cabcd\x11\x04"
GOLDEN_XERIAL = XERIAL_HEADER + b"\x00\x00\x00\x07" + HELLO_BLOCK + b"\x00\x00\x00\x08" + ABCD_BLOCK


def payloads() -> list[bytes]:
    return [b"", b"x", os.urandom(1000), b"record " * 20000, os.urandom(70_000) + bytes(70_000)]


@pytest.mark.parametrize("codec", CODECS)
def test_round_trip(codec: int) -> None:
    for data in payloads():
        compressed = compress(codec, data)
        assert decompress(codec, compressed) == data
        assert decompress(codec, memoryview(compressed)) == data


@pytest.mark.parametrize("codec", COMPRESSED)
def test_truncated_data_is_corrupt(codec: int) -> None:
    compressed = compress(codec, b"some records " * 1000)
    for cut in (1, len(compressed) // 2, len(compressed) - 1):
        with pytest.raises(CorruptRecordError):
            decompress(codec, compressed[:cut])


def test_unknown_codec() -> None:
    with pytest.raises(ValueError):
        compress(5, b"x")
    with pytest.raises(CorruptRecordError):
        decompress(5, b"x")


def test_golden_xerial_stream_decodes() -> None:
    assert decompress(COMPRESSION_SNAPPY, GOLDEN_XERIAL) == b"hello" + b"abcd" * 3


def test_xerial_writes_the_golden_framing() -> None:
    # snappy stores input this short as a single literal, so the whole stream is predictable
    assert xerial_snappy_compress(b"hello") == XERIAL_HEADER + b"\x00\x00\x00\x07" + HELLO_BLOCK


def test_xerial_splits_into_32k_blocks() -> None:
    data = os.urandom(2 * XERIAL_BLOCK_SIZE + 10)
    stream = xerial_snappy_compress(data)
    assert stream.startswith(XERIAL_HEADER)
    pos, sizes = len(XERIAL_HEADER), []
    while pos < len(stream):
        (length,) = struct.unpack_from(">i", stream, pos)
        sizes.append(len(decompress(COMPRESSION_SNAPPY, stream[pos + 4 : pos + 4 + length])))
        pos += 4 + length
    assert sizes == [XERIAL_BLOCK_SIZE, XERIAL_BLOCK_SIZE, 10]


def test_raw_snappy_block_without_xerial_header_is_accepted() -> None:
    assert xerial_snappy_decompress(ABCD_BLOCK) == b"abcd" * 3


def test_xerial_block_length_past_the_end_is_corrupt() -> None:
    with pytest.raises(CorruptRecordError):
        decompress(COMPRESSION_SNAPPY, XERIAL_HEADER + b"\x00\x00\x00\x09" + HELLO_BLOCK)
    with pytest.raises(CorruptRecordError):
        decompress(COMPRESSION_SNAPPY, XERIAL_HEADER + b"\x00\x00")


def test_lz4_frame_has_kafkas_flags() -> None:
    frame = compress(COMPRESSION_LZ4, b"x" * 100)
    flg, bd = frame[4], frame[5]
    assert flg == 0b0110_0000  # version 01, independent blocks, no checksums, no content size
    assert bd == 0b0100_0000  # 64 KiB blocks


def test_reads_what_java_style_writers_produce() -> None:
    data = b"kafka " * 5000
    # zstd-jni's streaming writer: no content size in the frame header
    out = io.BytesIO()
    with zstandard.ZstdCompressor().stream_writer(out, closefd=False) as writer:
        writer.write(data)
    assert zstandard.frame_content_size(out.getvalue()) == -1
    assert decompress(COMPRESSION_ZSTD, out.getvalue()) == data
    # several zstd frames, several gzip members
    assert decompress(COMPRESSION_ZSTD, compress(COMPRESSION_ZSTD, data) * 2) == data * 2
    assert decompress(COMPRESSION_GZIP, gzip.compress(data) + gzip.compress(data)) == data * 2
    # an lz4 frame with linked blocks, checksums and content size still reads
    assert decompress(COMPRESSION_LZ4, lz4.frame.compress(data, content_checksum=True, store_size=True)) == data

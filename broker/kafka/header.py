"""Request and response headers of Kafka's protocol (request header v1/v2, response header v0/v1).

Sans-I/O: the listener hands in a frame without its size prefix and gets back where the body starts.
"""

from __future__ import annotations

import struct
from collections.abc import Callable

from odradek.broker.kafka.primitives import Reader
from odradek.broker.kafka.wire import RequestHeader

_CORRELATION = struct.Struct(">i")
_EMPTY_TAGS = b"\x00"


def read_request_header(frame: memoryview, flexible: Callable[[int, int], bool]) -> RequestHeader:
    """The header at the start of ``frame``. ``flexible(api_key, api_version)`` says whether that API version uses
    header v2 (tagged fields after the client id); ``size`` is where the body starts. Every API served uses header
    v1 or v2 (v0 has no client id and belongs to no API a client sends us). Raises ProtocolError if malformed."""
    r = Reader(frame)
    api_key = r.int16()
    api_version = r.int16()
    correlation_id = r.int32()
    client_id = r.nullable_string()  # a plain int16 string in header v2 too
    if flexible(api_key, api_version):
        r.skip_tagged_fields()
    return RequestHeader(api_key, api_version, correlation_id, client_id, r.pos)


def encode_response_header(correlation_id: int, header_version: int) -> bytes:
    """Response header v0 (the correlation id) or v1 (plus an empty tagged-field section)."""
    if header_version == 0:
        return _CORRELATION.pack(correlation_id)
    if header_version == 1:
        return _CORRELATION.pack(correlation_id) + _EMPTY_TAGS
    raise ValueError(f"no response header v{header_version}")

"""The native record codec (``_native.c``): the functions of ``reference.py``, with the same signatures."""

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from odradek.client.record.layout import AppendBatch

_T = TypeVar("_T", bound=tuple[Any, ...])
_Bytes = bytes | bytearray | memoryview
_Headers = Sequence[tuple[str, bytes | None]]

def append_batches(
    buf: _Bytes, view: memoryview, max_batch_size: int, check_records: bool, /
) -> list[AppendBatch] | int: ...
def records_end(buf: _Bytes, pos: int, count: int, /) -> int: ...
def decode_records(
    data: bytes,
    pos: int,
    end: int,
    count: int,
    base_offset: int,
    base_timestamp: int,
    timestamp: int | None,
    record_type: type[_T],
    leading: tuple[Any, ...],
    middle: tuple[Any, ...],
    /,
) -> list[_T]: ...
def scan_records(
    data: bytes, pos: int, end: int, count: int, base_offset: int, pause: Callable[[], None], /
) -> tuple[list[int], list[bytes | None], list[int], list[int]]: ...
def encode_record(
    offset_delta: int, timestamp_delta: int, key: _Bytes | None, value: _Bytes | None, headers: _Headers = (), /
) -> bytes: ...
def encode_records(
    values: Sequence[_Bytes | None],
    keys: Sequence[_Bytes | None] | None,
    timestamp_deltas: Sequence[int] | None,
    headers: Sequence[_Headers] | None,
    /,
) -> bytes: ...

"""The record codec every caller uses: the native accelerator when it is built, else the pure-Python reference.

``reference.py`` is the codec's specification and complete on its own; ``_native.c`` implements the same
functions (same results, same CorruptRecordError messages) in C for the hot paths the interpreter limits: batch
validation for an append (header checks, CRC32C, record walk), record encoding, record decoding and the log
cleaner's record scan. The choice is made once, at import:

- ``ODRADEK_NO_EXTENSIONS=1`` in the environment forces the reference;
- otherwise the native module is used if it imports (``pip install`` builds it where a C compiler is present;
  without one the install still succeeds, and the reference runs, with one log line saying so).

``IMPLEMENTATION`` says which one runs ("native" or "python"); ``odradek --version``, the broker's startup log and
its ``odradek_record_codec_info`` metric report it.
"""

from __future__ import annotations

import logging
import os
from types import ModuleType
from typing import Literal

logger = logging.getLogger(__name__)

NO_EXTENSIONS_ENV = "ODRADEK_NO_EXTENSIONS"

IMPLEMENTATION: Literal["native", "python"]
REASON: str  # why the reference runs ("" with the native codec)


def _load_native() -> tuple[ModuleType | None, str]:
    """The native module, or None and the reason it is not used."""
    if os.environ.get(NO_EXTENSIONS_ENV, "") not in ("", "0"):
        return None, f"{NO_EXTENSIONS_ENV} is set"
    try:
        from odradek.client.record import _native
    except ImportError as exc:
        logger.info("record codec: the native accelerator is not available (%s); using the pure-Python reference", exc)
        return None, f"native module not built: {exc}"
    return _native, ""


_native_module, REASON = _load_native()
if _native_module is not None:
    from odradek.client.record._native import (
        append_batches,
        decode_records,
        encode_record,
        encode_records,
        records_end,
        scan_records,
    )

    IMPLEMENTATION = "native"
else:
    from odradek.client.record.reference import (
        append_batches,
        decode_records,
        encode_record,
        encode_records,
        records_end,
        scan_records,
    )

    IMPLEMENTATION = "python"


def describe() -> str:
    """One line for ``--version`` and logs: which codec runs, and why the reference if it does."""
    if IMPLEMENTATION == "native":
        return "native"
    return f"pure Python ({REASON})"


__all__ = [
    "IMPLEMENTATION",
    "NO_EXTENSIONS_ENV",
    "REASON",
    "append_batches",
    "decode_records",
    "describe",
    "encode_record",
    "encode_records",
    "records_end",
    "scan_records",
]

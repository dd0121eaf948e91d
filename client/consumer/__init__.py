"""The consumer: fetcher with prefetch, record decoding, and the AsyncConsumer/Consumer API.

The two classes are imported on first use (PEP 562): brokers import this package's group protocol codec
(``protocol``) and need none of the consumer itself.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # "X as X": re-exported, for type checkers
    from odradek.client.consumer.consumer import AsyncConsumer as AsyncConsumer
    from odradek.client.consumer.consumer import Consumer as Consumer

__all__ = ["AsyncConsumer", "Consumer"]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.consumer"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})

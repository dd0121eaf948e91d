"""odradek client: producer, consumer, admin, the record format and the CLI.

The names below are imported on first use (PEP 562): every CLI command and every node imports this package, and
most of them need only a part of it (``odradek --version`` none), so importing it stays cheap.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # "X as X": re-exported, for type checkers
    from odradek.client.admin import Admin as Admin
    from odradek.client.admin import AsyncAdmin as AsyncAdmin
    from odradek.client.consumer import AsyncConsumer as AsyncConsumer
    from odradek.client.consumer import Consumer as Consumer
    from odradek.client.producer import AsyncProducer as AsyncProducer
    from odradek.client.producer import Producer as Producer
    from odradek.client.producer import TransactionAbortedError as TransactionAbortedError
    from odradek.client.structs import ConsumerGroupMetadata as ConsumerGroupMetadata
    from odradek.client.structs import ConsumerRecord as ConsumerRecord
    from odradek.client.structs import GroupMetadata as GroupMetadata
    from odradek.client.structs import OffsetAndMetadata as OffsetAndMetadata
    from odradek.client.structs import OffsetAndTimestamp as OffsetAndTimestamp
    from odradek.client.structs import RecordMetadata as RecordMetadata
    from odradek.client.structs import TopicPartition as TopicPartition

_HOMES = {
    "Admin": "admin",
    "AsyncAdmin": "admin",
    "AsyncConsumer": "consumer",
    "Consumer": "consumer",
    "AsyncProducer": "producer",
    "Producer": "producer",
    "TransactionAbortedError": "producer",
    "ConsumerGroupMetadata": "structs",
    "ConsumerRecord": "structs",
    "GroupMetadata": "structs",
    "OffsetAndMetadata": "structs",
    "OffsetAndTimestamp": "structs",
    "RecordMetadata": "structs",
    "TopicPartition": "structs",
}

__all__ = sorted(_HOMES)


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})

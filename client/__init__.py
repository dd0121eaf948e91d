"""odradek client: producer, consumer, admin, the record format and the CLI."""

from odradek.client.admin import Admin, AsyncAdmin
from odradek.client.consumer import AsyncConsumer, Consumer
from odradek.client.producer import AsyncProducer, Producer, TransactionAbortedError
from odradek.client.structs import (
    ConsumerGroupMetadata,
    ConsumerRecord,
    GroupMetadata,
    OffsetAndMetadata,
    OffsetAndTimestamp,
    RecordMetadata,
    TopicPartition,
)

__all__ = [
    "Admin",
    "AsyncAdmin",
    "AsyncConsumer",
    "AsyncProducer",
    "Consumer",
    "ConsumerGroupMetadata",
    "ConsumerRecord",
    "GroupMetadata",
    "OffsetAndMetadata",
    "OffsetAndTimestamp",
    "Producer",
    "RecordMetadata",
    "TopicPartition",
    "TransactionAbortedError",
]

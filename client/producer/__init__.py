"""The producer: partitioner, record accumulator, sender, transactions, and the AsyncProducer/Producer API."""

from odradek.client.producer.producer import AsyncProducer, Producer
from odradek.client.producer.transactions import TransactionAbortedError

__all__ = ["AsyncProducer", "Producer", "TransactionAbortedError"]

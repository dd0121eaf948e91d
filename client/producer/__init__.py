"""The producer: partitioner, record accumulator, sender, and the AsyncProducer/Producer API."""

from odradek.client.producer.producer import AsyncProducer, Producer

__all__ = ["AsyncProducer", "Producer"]

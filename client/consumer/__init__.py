"""The consumer: fetcher with prefetch, record decoding, and the AsyncConsumer/Consumer API."""

from odradek.client.consumer.consumer import AsyncConsumer, Consumer

__all__ = ["AsyncConsumer", "Consumer"]

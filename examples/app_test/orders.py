"""A tiny application on odradek: orders are published keyed by customer (so one customer's orders stay in order
on one partition), and ``totals`` reads the topic back to sum what each customer spent.

Its test (``test_orders.py``) runs it against a real cluster with the ``odradek_cluster`` fixture.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable

from odradek.client import Consumer, Producer, TopicPartition

TOPIC = "orders"


def place_orders(servers: str, orders: Iterable[tuple[str, int]]) -> list[int]:
    """Publish ``(customer, cents)`` orders and wait until each is acknowledged; return their partitions."""
    with Producer({"bootstrap.servers": servers, "acks": "all", "linger.ms": 5}) as producer:
        futures = [producer.send(TOPIC, str(cents), key=customer) for customer, cents in orders]
        return [future.result(30).partition for future in futures]


def totals(servers: str, timeout: float = 30.0) -> dict[str, int]:
    """Cents spent per customer over every order in the topic now."""
    spent: Counter[str] = Counter()
    with Consumer({"bootstrap.servers": servers, "auto.offset.reset": "earliest"}) as consumer:
        partitions = [TopicPartition(TOPIC, p) for p in consumer.partitions_for(TOPIC)]
        consumer.assign(partitions)
        consumer.seek_to_beginning(*partitions)
        end = consumer.end_offsets(partitions)
        deadline = time.monotonic() + timeout
        while any(consumer.position(tp) < end[tp] for tp in partitions):
            if time.monotonic() > deadline:
                raise TimeoutError(f"orders not read within {timeout}s")
            for record in consumer.poll(timeout_ms=200):
                spent[record.key.decode()] += int(record.value)
    return dict(spent)

#!/usr/bin/env python3
"""Copy a topic to another exactly once: consume, transform, produce, with the consumed offsets in the transaction.

Each poll's output records and the group's new positions are committed in one transaction, so a copier that
crashes, or is fenced by its replacement, either has copied a batch and moved the group past it, or neither.
Readers of the output use ``isolation.level=read_committed``. Run several copiers in one group to share the input
partitions; each needs its own ``--transactional-id`` that stays the same across its restarts (a restarted copier
fences its former self).

    python examples/exactly_once_copier.py --bootstrap-servers localhost:9092 --input in --output out \\
        --group copiers --transactional-id copier-0 [--idle-exit-s 10] \\
        [--consumer-property session.timeout.ms=10000] [--producer-property transaction.timeout.ms=30000]

An abortable error (a refused batch, a rebalance that took the partitions) aborts the transaction and rewinds
the consumer to the group's committed positions, so the batch is copied again; ProducerFencedError (another
copier with the same transactional id took over) ends the process.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time

from odradek.client import Consumer, OffsetAndMetadata, Producer, TopicPartition
from odradek.client.errors import OdradekError, ProducerFencedError

logger = logging.getLogger("exactly_once_copier")


def transform(value: bytes | None) -> bytes | None:
    """The copy's transformation: here the identity."""
    return value


def rewind(consumer: Consumer) -> None:
    """Go back to the group's committed positions: what the aborted transaction consumed is read again."""
    assignment = consumer.assignment()
    committed = consumer.committed(assignment)
    for tp in assignment:
        om = committed.get(tp)
        if om is None:
            consumer.seek_to_beginning(tp)
        else:
            consumer.seek(tp, om.offset)


def copy(
    servers: str,
    input_topic: str,
    output_topic: str,
    group: str,
    txn_id: str,
    idle_exit_s: float,
    consumer_properties: dict[str, str] | None = None,
    producer_properties: dict[str, str] | None = None,
) -> int:
    """Copy until ``idle_exit_s`` passes without input (0: forever). Returns the records copied."""
    consumer = Consumer(
        {
            "bootstrap.servers": servers,
            "group.id": group,
            "enable.auto.commit": False,  # the offsets are committed by the transactions
            "isolation.level": "read_committed",  # the input may be another transactional copier's output
            "auto.offset.reset": "earliest",
            **(consumer_properties or {}),
        }
    )
    producer = Producer({"bootstrap.servers": servers, "transactional.id": txn_id, **(producer_properties or {})})
    copied = 0
    try:
        producer.init_transactions()
        consumer.subscribe([input_topic])
        last_input = time.monotonic()
        while not idle_exit_s or time.monotonic() - last_input < idle_exit_s:
            records = consumer.poll(500)
            if not records:
                continue
            last_input = time.monotonic()
            producer.begin_transaction()
            try:
                positions: dict[TopicPartition, OffsetAndMetadata] = {}
                for r in records:
                    producer.send(output_topic, transform(r.value), key=r.key, headers=r.headers)
                    positions[TopicPartition(r.topic, r.partition)] = OffsetAndMetadata(r.offset + 1)
                producer.send_offsets_to_transaction(positions, consumer.group_metadata())
                producer.commit_transaction()
                copied += len(records)
            except ProducerFencedError:
                raise
            except OdradekError as e:
                logger.warning("transaction aborted, copying the batch again: %s", e)
                producer.abort_transaction()
                rewind(consumer)
    except ProducerFencedError as e:
        logger.error("fenced by another copier with transactional id %r: %s", txn_id, e)
        sys.exit(1)
    finally:
        producer.close()
        consumer.close()
    return copied


def property_pair(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, value


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap-servers", required=True)
    parser.add_argument("--input", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--transactional-id", required=True)
    parser.add_argument("--idle-exit-s", type=float, default=0.0, help="stop after this long without input")
    for side in ("consumer", "producer"):
        parser.add_argument(
            f"--{side}-property",
            type=property_pair,
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help=f"a {side} config setting (repeatable)",
        )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    n = copy(
        args.bootstrap_servers,
        args.input,
        args.output,
        args.group,
        args.transactional_id,
        args.idle_exit_s,
        dict(args.consumer_property),
        dict(args.producer_property),
    )
    logger.info("copied %d records", n)


if __name__ == "__main__":
    main()

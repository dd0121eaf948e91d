"""Helpers of the compaction tests on real clusters: each replica's records read from its segment files, producing
keyed records, and reading a topic back through a consumer."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from odradek.client import Consumer, Producer
from odradek.client.record.batch import read_batches

Record = tuple[int, bytes | None, bytes | None]  # offset, key, value


def partition_dir(cluster: Any, node_id: int, topic: str, partition: int = 0) -> Path:
    return Path(cluster.node(node_id).directory) / "data" / f"{topic}-{partition}"


def replica_records(cluster: Any, node_id: int, topic: str, partition: int = 0) -> list[Record] | None:
    """Every record of ``node_id``'s replica read from its ``.log`` files in offset order, or None when a file went
    away under the read (a swap or a retention deletion: read again). Only for a stopped broker is it final."""
    d = partition_dir(cluster, node_id, topic, partition)
    out: list[Record] = []
    try:
        for f in sorted(d.glob("*.log")):
            for b in read_batches(f.read_bytes()):
                out += [(r.offset, r.key, r.value) for r in b.records()]
    except (FileNotFoundError, ValueError):
        return None
    return out


def produce_keyed(
    cluster: Any, topic: str, pairs: Sequence[tuple[bytes, bytes | None]], producer: Producer | None = None
) -> list[Record]:
    """Produce ``pairs`` in order to partition 0 (acks=all, idempotent); return what was acknowledged."""
    own = producer is None
    p = producer or Producer({"bootstrap.servers": cluster.bootstrap_servers, "linger.ms": 5, "batch.size": 1024})
    try:
        futures = [(k, v, p.send(topic, v, key=k, partition=0)) for k, v in pairs]
        p.flush(60)
        return [(f.result(30).offset, k, v) for k, v, f in futures]
    finally:
        if own:
            p.close()


def consume_all(cluster: Any, topic: str, timeout: float = 30.0) -> list[Record]:
    """Partition 0 from its log start to its high watermark, through a consumer."""
    with Consumer({"bootstrap.servers": cluster.bootstrap_servers}) as c:
        c.assign([(topic, 0)])
        c.seek_to_beginning((topic, 0))
        end = c.end_offsets([(topic, 0)])[(topic, 0)]
        out: list[Record] = []
        deadline = time.monotonic() + timeout
        while c.position((topic, 0)) < end and time.monotonic() < deadline:
            out += [(r.offset, r.key, r.value) for r in c.poll(500)]
        assert c.position((topic, 0)) >= end, f"consumer stuck at {c.position((topic, 0))} below {end}"
        return out


def last_values(records: Sequence[Record]) -> dict[bytes | None, bytes | None]:
    out: dict[bytes | None, bytes | None] = {}
    for _, k, v in records:
        out[k] = v
    return out

"""``odradek transaction ...`` as an operator runs it against a real cluster with a real transactional producer: list
and describe an open transaction, describe-producers shows where it starts, find-hanging does not report a
transaction its coordinator tracks, abort by partition and start offset ends it on the partition (the LSO moves on),
abort by transactional id fences the producer, and bad input is one error line."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from odradek.client import Consumer, Producer
from odradek.client.errors import ProducerFencedError
from odradek.client.structs import TopicPartition

from .conftest import FAST, wait_for

TXN_NODE = {
    **FAST,
    "transaction.state.log.num.partitions": 3,
    "transaction.state.log.replication.factor": 2,
    "transaction.state.log.min.isr": 1,
}
TOPIC = "tcli"
pytestmark = [
    pytest.mark.integration,
    pytest.mark.odradek_cluster(
        controllers=1, brokers=2, config=TXN_NODE, topics={TOPIC: {"partitions": 2, "replication_factor": 2}}
    ),
]
CLI = [sys.executable, "-m", "odradek.client.cli.main"]


def cli(cluster: Any, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "ODRADEK_BOOTSTRAP_SERVERS": cluster.bootstrap_servers}
    return subprocess.run([*CLI, *args], capture_output=True, text=True, env=env, timeout=60)


def cli_json(cluster: Any, *args: str) -> Any:
    result = cli(cluster, *args, "--format", "json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def one_error(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 1, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    return lines[0]


def open_producer(cluster: Any, txn_id: str, partition: int) -> Producer:
    """A transactional producer with an open transaction holding one record of ``partition``."""
    p = Producer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "transactional.id": txn_id,
            "transaction.timeout.ms": 120_000,
        }
    )
    p.init_transactions(30)
    p.begin_transaction()
    p.send(TOPIC, b"open", partition=partition).result(30)
    return p


@pytest.fixture
def producers() -> Iterator[list[Producer]]:
    made: list[Producer] = []
    yield made
    for p in made:
        with contextlib.suppress(Exception):  # a fenced producer may refuse to flush
            p.close(5)


def open_txn_at(cluster: Any, partition: int, pid: int) -> int | None:
    d = cli_json(cluster, "transaction", "describe-producers", "--topic", TOPIC, "--partition", str(partition))
    starts = [p["current_txn_start_offset"] for p in d["producers"] if p["producer_id"] == pid]
    return starts[0] if starts and starts[0] >= 0 else None


def lso(cluster: Any, partition: int) -> int:
    """The partition's last stable offset: its latest offset as a read_committed consumer asks it."""
    config = {"bootstrap.servers": cluster.bootstrap_servers, "isolation.level": "read_committed"}
    with Consumer(config) as consumer:
        tp = TopicPartition(TOPIC, partition)
        return consumer.end_offsets([tp])[tp]


def test_list_describe_and_abort_by_transactional_id(odradek_cluster: Any, producers: list[Producer]) -> None:
    cluster = odradek_cluster
    producer = open_producer(cluster, "cli-app", 0)
    producers.append(producer)

    listed = cli_json(cluster, "transaction", "list", "--state", "ongoing")
    [row] = [t for t in listed if t["transactional_id"] == "cli-app"]
    assert set(row) == {"transactional_id", "producer_id", "state", "coordinator"} and row["state"] == "Ongoing"
    pid = row["producer_id"]
    assert "cli-app" not in [
        t["transactional_id"] for t in cli_json(cluster, "transaction", "list", "--state", "Empty")
    ]
    assert [t["transactional_id"] for t in cli_json(cluster, "transaction", "list", "--producer-id", str(pid))] == [
        "cli-app"
    ]

    d = cli_json(cluster, "transaction", "describe", "cli-app")
    assert d["state"] == "Ongoing" and d["producer_id"] == pid and d["coordinator"] == row["coordinator"]
    assert d["partitions"] == [{"topic": TOPIC, "partition": 0}]
    assert d["transaction_timeout_ms"] == 120_000 and d["transaction_start_time_ms"] > 0
    human = cli(cluster, "transaction", "describe", "cli-app").stdout
    assert "state:             Ongoing" in human and f"{TOPIC}  0" in human.replace("    ", "  ")

    start = open_txn_at(cluster, 0, pid)
    assert start is not None
    # Older than a 0 ms max timeout, but its coordinator lists it Ongoing with the partition: not hanging.
    hanging = cli_json(cluster, "transaction", "find-hanging", "--topic", TOPIC, "--max-transaction-timeout-ms", "0")
    assert [h for h in hanging if h["producer_id"] == pid] == []

    aborted = cli_json(cluster, "transaction", "abort", "--transactional-id", "cli-app")
    assert aborted["aborted"] is True and aborted["previous_state"] == "Ongoing" and aborted["producer_id"] == pid
    assert aborted["producer_epoch"] > d["producer_epoch"]
    wait_for(
        lambda: cli_json(cluster, "transaction", "describe", "cli-app")["state"] == "CompleteAbort",
        30,
        what="the coordinator completed the abort",
    )
    wait_for(lambda: open_txn_at(cluster, 0, pid) is None, 30, what="the abort marker on the partition")
    with pytest.raises(ProducerFencedError):
        producer.commit_transaction(30)

    again = one_error(cli(cluster, "transaction", "abort", "--transactional-id", "cli-app"))
    assert "INVALID_TXN_STATE" in again and "no ongoing transaction (state CompleteAbort)" in again


def test_abort_a_partitions_open_transaction_by_start_offset(odradek_cluster: Any, producers: list[Producer]) -> None:
    cluster = odradek_cluster
    producer = open_producer(cluster, "cli-partition", 1)
    producers.append(producer)
    [d] = [cli_json(cluster, "transaction", "describe", "cli-partition")]
    pid = d["producer_id"]
    start = open_txn_at(cluster, 1, pid)
    assert start is not None

    wait_for(lambda: lso(cluster, 1) == start, 30, what="the LSO held at the open transaction")
    wrong = one_error(
        cli(cluster, "transaction", "abort", "--topic", TOPIC, "--partition", "1", "--start-offset", str(start + 1000))
    )
    assert "INVALID_TXN_STATE" in wrong and f"open transactions start at {start}" in wrong
    assert open_txn_at(cluster, 1, pid) == start  # nothing changed

    aborted = cli_json(
        cluster, "transaction", "abort", "--topic", TOPIC, "--partition", "1", "--start-offset", str(start)
    )
    assert aborted == {
        "topic": TOPIC,
        "partition": 1,
        "start_offset": start,
        "producer_id": pid,
        "producer_epoch": d["producer_epoch"],
        "coordinator_epoch": aborted["coordinator_epoch"],
        "aborted": True,
    }
    assert open_txn_at(cluster, 1, pid) is None  # the marker ended it on the partition
    # The partition's last stable offset moved past it: read_committed consumers see to the end again.
    wait_for(lambda: lso(cluster, 1) > start, 30, what="the LSO past the aborted transaction")


def test_bad_input_and_unknown_ids_are_one_error_line(odradek_cluster: Any) -> None:
    cluster = odradek_cluster
    assert "TRANSACTIONAL_ID_NOT_FOUND" in one_error(cli(cluster, "transaction", "describe", "no-such-id"))
    assert "TRANSACTIONAL_ID_NOT_FOUND" in one_error(
        cli(cluster, "transaction", "abort", "--transactional-id", "no-such-id")
    )
    assert "unknown transaction state 'running'" in one_error(cli(cluster, "transaction", "list", "--state", "running"))
    assert "UNKNOWN_TOPIC_OR_PARTITION" in one_error(
        cli(cluster, "transaction", "describe-producers", "--topic", TOPIC, "--partition", "7")
    )
    result = cli(cluster, "transaction", "describe", "no-such-id", "--format", "json")
    assert result.returncode == 1
    assert json.loads(result.stderr)["error"]["code"] == "TRANSACTIONAL_ID_NOT_FOUND"

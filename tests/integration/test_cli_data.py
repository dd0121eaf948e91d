"""``odradek produce`` and ``odradek consume`` as a user runs them, against the shared real cluster: fast truthful
failures, streaming stdin, binary data, kcat offsets and format strings."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import time

import pytest

from odradek.client import Consumer, OffsetAndTimestamp, Producer, TopicPartition
from odradek.client.admin import Admin
from odradek.deploy.local import DevCluster, free_port

pytestmark = pytest.mark.integration

CLI = [sys.executable, "-m", "odradek.client.cli.main"]


@pytest.fixture(scope="module")
def env(cluster: DevCluster, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    home = tmp_path_factory.mktemp("home")
    return {**os.environ, "ODRADEK_HOME": str(home), "ODRADEK_BOOTSTRAP_SERVERS": cluster.bootstrap_servers}


@pytest.fixture(scope="module")
def topics(admin: Admin, cluster: DevCluster) -> None:
    """The tests' topics; ``four`` holds the 4 records 'r0'..'r3'."""
    for name, partitions in (("four", 1), ("pair", 2), ("times", 2), ("stream", 1), ("bin", 1), ("keyed", 1)):
        admin.create_topic(name, partitions=partitions, replication_factor=2)
    with Producer({"bootstrap.servers": cluster.bootstrap_servers}) as producer:
        for i in range(4):
            producer.send_and_wait("four", f"r{i}".encode(), partition=0)


def run(env: dict[str, str], *args: str, stdin: bytes = b"", timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], input=stdin, capture_output=True, env=env, timeout=timeout)


def one_error(result: subprocess.CompletedProcess) -> str:
    assert result.returncode != 0
    lines = result.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    return lines[0]


def test_partition_out_of_range_fails_at_once_with_the_count(env: dict[str, str], topics: None) -> None:
    for command in (("consume", "pair", "--num", "1"), ("produce", "pair")):
        start = time.monotonic()
        result = run(env, *command, "--partition", "99", stdin=b"x\n", timeout=30)
        assert "has 2 partitions" in one_error(result)
        assert time.monotonic() - start < 10
    assert "partition must be >= 0" in one_error(run(env, "consume", "pair", "--partition", "-1", "--num", "1"))


@pytest.mark.parametrize("command", ["produce", "consume"])
def test_a_dead_address_is_a_connection_error_within_the_timeout(env: dict[str, str], command: str) -> None:
    address = f"127.0.0.1:{free_port()}"
    start = time.monotonic()
    result = run(env, command, "orders", "-X", address, "--timeout-ms", "1500", stdin=b"x\n", timeout=60)
    line = one_error(result)
    assert "NETWORK_EXCEPTION" in line and f"no node reachable: {address}" in line and "orders" not in line
    assert time.monotonic() - start < 10


def test_binary_stdin_headers_key_and_tombstones(env: dict[str, str], topics: None) -> None:
    blob = bytes(range(256))
    produced = run(env, "produce", "bin", "--binary", "-k", "k1", "-H", "h=v", "--format", "json", stdin=blob)
    assert produced.returncode == 0, produced.stderr
    assert json.loads(produced.stdout) == {"topic": "bin", "records": 1, "partitions": {"0": [0, 0]}}
    produced = run(env, "produce", "bin", "--tombstone", "-K", ":", stdin=b"k2:\nk3:None\n")
    assert produced.returncode == 0, produced.stderr
    out = run(env, "consume", "bin", "-e", "--format", "json").stdout.decode().splitlines()
    records = [json.loads(line) for line in out]
    assert base64.b64decode(records[0]["value"].removeprefix("base64:")) == blob
    assert records[0]["value_encoding"] == "base64" and records[0]["key"] == "k1"
    assert records[0]["headers"] == [["h", "v"]]
    assert [(r["key"], r["value"]) for r in records[1:]] == [("k2", None), ("k3", "None")]
    text = run(env, "consume", "bin", "-e", "--binary", "hex").stdout.decode().splitlines()
    assert text[0].endswith(f"value=hex:{blob.hex()}") and 'headers="h":"v"' in text[0]
    assert text[1].endswith("value=null") and text[2].endswith('value="None"')


def test_produce_sends_each_line_as_it_arrives(env: dict[str, str], topics: None) -> None:
    producer = subprocess.Popen([*CLI, "produce", "stream"], stdin=subprocess.PIPE, env=env)
    try:
        assert producer.stdin is not None
        producer.stdin.write(b"first\n")
        producer.stdin.flush()
        # The consumer must see line 1 while the producer's stdin is still open and line 2 not yet written.
        seen = run(env, "consume", "stream", "--num", "1", "-f", "%s", timeout=60)
        assert seen.returncode == 0 and seen.stdout == b"first", seen.stderr
        assert producer.poll() is None
        producer.stdin.write(b"second\n")
        producer.stdin.close()
        assert producer.wait(timeout=30) == 0
    finally:
        if producer.poll() is None:
            producer.kill()
    assert run(env, "consume", "stream", "-e", "-f", "%o:%s\\n").stdout == b"0:first\n1:second\n"


def test_out_of_range_offsets_are_errors_unless_reset_says_otherwise(env: dict[str, str], topics: None) -> None:
    line = one_error(run(env, "consume", "four", "--offset", "1000", "--num", "1"))
    assert "offset 1000 is out of range for four-0 (offsets 0-4)" in line
    assert run(env, "consume", "four", "-o", "1000", "--reset", "latest", "-e").stdout == b""
    earliest = run(env, "consume", "four", "-o", "1000", "--reset", "earliest", "-e", "-f", "%o ")
    assert earliest.stdout == b"0 1 2 3 "


def test_kcat_offsets_and_format_tokens(env: dict[str, str], topics: None) -> None:
    assert run(env, "consume", "four", "-o", "-2", "-e", "-f", "%t/%p/%o=%s;").stdout == b"four/0/2=r2;four/0/3=r3;"
    assert run(env, "consume", "four", "-o", "end", "-e").stdout == b""
    assert run(env, "consume", "four", "-o", "0:1", "-p", "0", "-e", "-f", "%o%%%K%S ").stdout == b"1%-12 2%-12 3%-12 "
    assert run(env, "consume", "four", "-o", "9", "-o", "0:beginning", "--num", "1", "-f", "%s").stdout == b"r0"
    assert "unknown format token %x" in one_error(run(env, "consume", "four", "-f", "%x"))
    assert "bad offset" in one_error(run(env, "consume", "four", "-o", "soon"))


def test_offsets_by_time_in_the_client_and_the_cli(env: dict[str, str], cluster: DevCluster, topics: None) -> None:
    servers = cluster.bootstrap_servers
    with Producer({"bootstrap.servers": servers, "linger.ms": 50}) as producer:
        # Partition 0: one batch with four timestamps; partition 1: one batch per record.
        futures = [producer.send("times", f"a{i}", partition=0, timestamp=1000 * (i + 1)) for i in range(4)]
        producer.flush()
        assert [f.result().offset for f in futures] == [0, 1, 2, 3]
        for i in range(4):
            producer.send_and_wait("times", f"b{i}", partition=1, timestamp=1000 * (i + 1))
    p0, p1 = TopicPartition("times", 0), TopicPartition("times", 1)
    with Consumer({"bootstrap.servers": servers}) as consumer:
        # The first record at or after the time, inside a batch too, with its own timestamp (not the one asked).
        found = consumer.offsets_for_times({p1: 2500, p0: 2500})
        assert found == {p0: OffsetAndTimestamp(2, 3000), p1: OffsetAndTimestamp(2, 3000)}
        assert consumer.offsets_for_times({p0: 4000, p1: 1}) == {
            p0: OffsetAndTimestamp(3, 4000),
            p1: OffsetAndTimestamp(0, 1000),
        }
        assert consumer.offsets_for_times({p1: 99_999}) == {p1: None}
        with pytest.raises(ValueError):
            consumer.offsets_for_times({p1: -5})
    # The CLI starts at that record.
    for spec in ("@2500", "@1970-01-01T00:00:02.500", "@1970-01-01T01:00:02.500+01:00"):
        out = run(env, "consume", "times", "-o", spec, "-e", "-f", "%p:%o:%T ").stdout.decode().split()
        assert sorted(out) == ["0:2:3000", "0:3:4000", "1:2:3000", "1:3:4000"], spec
    assert run(env, "consume", "times", "-o", "@99999", "-e").stdout == b""


def test_topic_offsets_like_kafka_get_offsets(env: dict[str, str], cluster: DevCluster, admin: Admin) -> None:
    admin.create_topic("stamps", partitions=2, replication_factor=2)
    with Producer({"bootstrap.servers": cluster.bootstrap_servers, "linger.ms": 50}) as producer:
        futures = [producer.send("stamps", f"t{i}", partition=0, timestamp=1000 * (i + 1)) for i in range(3)]
        producer.flush()
        assert [f.result().offset for f in futures] == [0, 1, 2]

    def offsets(*args: str) -> list[dict]:
        result = run(env, "topic", "offsets", "stamps", *args, "--format", "json")
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout)

    latest = [{"topic": "stamps", "partition": p, "offset": o, "timestamp": None} for p, o in ((0, 3), (1, 0))]
    assert offsets("--time", "-1") == offsets() == offsets("--time", "latest") == latest
    assert [r["offset"] for r in offsets("--time=-2")] == [0, 0]
    for when in ("1500", "1970-01-01T00:00:01.500"):  # inside the one batch: the record, with its timestamp
        assert offsets("--time", when, "-p", "0") == [
            {"topic": "stamps", "partition": 0, "offset": 1, "timestamp": 2000}
        ]
    assert [r["offset"] for r in offsets("--time", "99999")] == [None, None]
    human = run(env, "topic", "offsets", "stamps", "--time", "1500").stdout.decode().splitlines()
    assert [line.split() for line in human] == [
        ["PARTITION", "OFFSET", "TIMESTAMP"],
        ["0", "1", "2000"],
        ["1", "-", "-"],
        ["('-':", "no", "record", "at", "or", "after", "1500", "ms)"],
    ], human
    assert "no partition 7" in one_error(run(env, "topic", "offsets", "stamps", "-p", "7"))
    assert "bad time" in one_error(run(env, "topic", "offsets", "stamps", "--time", "-5"))


def test_acks_compression_and_the_summary(env: dict[str, str], topics: None) -> None:
    lines = b"".join(b"line %d\n" % i for i in range(10))
    result = run(env, "produce", "keyed", "--acks", "1", "-z", "gzip", "-k", "same", "--format", "json", stdin=lines)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"topic": "keyed", "records": 10, "partitions": {"0": [0, 9]}}
    human = run(env, "produce", "keyed", "-D", ";", stdin=b"a;b;c").stdout.decode()
    assert human.strip() == "produced 3 records to keyed (partition 0: offsets 10-12)"
    out = run(env, "consume", "keyed", "-o", "-4", "-e", "-f", "%k=%s|").stdout
    assert out == b"same=line 9|=a|=b|=c|"

"""The broker's log-dir mover (broker/log_dir_moves.py) over a real replica manager and logs: each
AlterReplicaLogDirs answer, DescribeLogDirs showing the future replica, and a leader that keeps taking writes while
its replica moves, then serves every record from the new dir."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from odradek.broker.describe_log_dirs import describe_log_dirs, future_positions, replica_positions
from odradek.broker.log.config import LogConfig
from odradek.broker.log.manager import LogManager
from odradek.broker.log_dir_moves import LogDirMoves
from odradek.broker.log_dirs import log_dir_usage
from odradek.broker.replica_manager import ReplicaManager
from odradek.client.errors import ErrorCode, StorageError
from odradek.client.record.batch import read_batches
from odradek.client.record.builder import encode_batch
from odradek.controller.metadata.image import MetadataDelta, MetadataImage
from odradek.proto import metadata_pb2 as md

TOPIC_ID = b"t" * 16
CONFIG = LogConfig(segment_bytes=8192, index_interval_bytes=512, segment_index_bytes=4096)


def hosted(tmp_path: Path) -> tuple[LogManager, ReplicaManager, LogDirMoves]:
    """Broker 1 leads t-0 (its only replica) and hosts no replica of t-1 (broker 2's)."""
    logs = LogManager([tmp_path / "a", tmp_path / "b"], CONFIG)
    rm = ReplicaManager(1, logs, CONFIG)
    moves = LogDirMoves(rm, copy_bytes=4096, retry_s=0.01)
    records = [md.MetadataRecord(topic=md.TopicRecord(name="t", topic_id=TOPIC_ID))]
    for b in (1, 2):
        endpoint = md.BrokerEndpoint(host="127.0.0.1", port=1)
        records.append(
            md.MetadataRecord(
                register_broker=md.RegisterBrokerRecord(broker_id=b, broker_epoch=b, endpoint=endpoint, fenced=False)
            )
        )
    for index, broker in ((0, 1), (1, 2)):
        partition = md.PartitionRecord(topic_id=TOPIC_ID, partition=index, replicas=[broker], isr=[broker])
        partition.leader = broker
        records.append(md.MetadataRecord(partition=partition))
    delta = MetadataDelta(MetadataImage())
    delta.replay_all(records)
    rm.apply(delta.image(), delta)
    return logs, rm, moves


def values(data: bytes) -> list[bytes]:
    return [r.value or b"" for b in read_batches(data) for r in b.records()]


def everything(rm: ReplicaManager) -> list[bytes]:
    log = rm.get("t", 0).log
    out, offset = [], log.log_start_offset
    while offset < log.log_end_offset:
        chunk = log.read(offset, 1 << 20)
        out += values(bytes(chunk.records))
        offset = chunk.next_offset
    return out


async def test_request_answers(tmp_path: Path) -> None:
    logs, _, moves = hosted(tmp_path)
    a, b = logs.log_dirs
    here = logs.dir_of("t", 0)
    assert here == a
    answers = moves.alter(
        {
            ("t", 0): "/not/a/log/dir",
            ("t", 1): str(b),  # broker 2's replica: this broker keeps the dir for when it gets one
            ("nope", 0): str(b),
        }
    )
    assert answers == {
        ("t", 0): ErrorCode.LOG_DIR_NOT_FOUND,
        ("t", 1): ErrorCode.REPLICA_NOT_AVAILABLE,
        ("nope", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    }
    assert logs.preferred_dir("t", 1) == b and logs.future_log("t", 0) is None
    assert moves.alter({("t", 0): str(a)}) == {("t", 0): ErrorCode.NONE}  # already there
    assert logs.future_log("t", 0) is None

    assert moves.alter({("t", 0): str(b)}) == {("t", 0): ErrorCode.NONE}
    assert logs.future_dir_of("t", 0) == b and ("t", 0) in moves.copies
    # Asked back to where it is: the move stops and its copy goes.
    assert moves.alter({("t", 0): str(a)}) == {("t", 0): ErrorCode.NONE}
    assert logs.future_log("t", 0) is None and moves.copies == {}
    assert [c.name for c in b.iterdir() if c.name.startswith("t-0")] == []

    logs.fail_dir(b, StorageError("EIO"))
    assert moves.alter({("t", 0): str(b)}) == {("t", 0): ErrorCode.KAFKA_STORAGE_ERROR}
    await moves.close()
    logs.close()


async def test_describe_log_dirs_shows_the_future_replica(tmp_path: Path) -> None:
    logs, rm, moves = hosted(tmp_path)
    p = rm.get("t", 0)
    for i in range(20):
        p.append_as_leader(encode_batch([f"v{i}".encode()], timestamps=1))
    b = logs.log_dirs[1]
    assert moves.alter({("t", 0): str(b)}) == {("t", 0): ErrorCode.NONE}
    # Read at once, before the move's task first runs: the future replica has copied nothing yet.
    r = describe_log_dirs(1, log_dir_usage(logs), replica_positions(rm), futures=future_positions(rm))
    replicas = {(d.path, x.is_future): x for d in r.dirs for x in d.replicas}
    future = replicas[str(b), True]
    assert (future.topic, future.partition, future.log_end_offset, future.offset_lag) == ("t", 0, 0, 20)
    assert replicas[str(logs.log_dirs[0]), False].log_end_offset == 20
    gauges = {f.name: f.samples[0].value for f in moves.gauges()}
    assert gauges == {"odradek_replica_alter_log_dirs_partitions": 1, "odradek_replica_alter_log_dirs_max_lag": 0}
    await moves.close()
    logs.close()


async def test_a_leader_keeps_taking_writes_while_its_replica_moves(tmp_path: Path) -> None:
    logs, rm, moves = hosted(tmp_path)
    p = rm.get("t", 0)
    written: list[bytes] = []

    def write(n: int) -> None:
        for _ in range(n):
            value = f"record-{len(written)}".encode() * 4
            p.append_as_leader(encode_batch([value], timestamps=1), acks=-1)
            written.append(value)

    write(400)
    a, b = logs.log_dirs
    old = logs.dir_of("t", 0) / "t-0"
    assert moves.alter({("t", 0): str(b)}) == {("t", 0): ErrorCode.NONE}
    deadline = time.monotonic() + 30
    while ("t", 0) in moves.copies and time.monotonic() < deadline:
        write(3)  # between the copy's rounds: the swap must not lose or double any of them
        await asyncio.sleep(0.001)
    assert ("t", 0) not in moves.copies, "the move did not finish"
    assert logs.dir_of("t", 0) == b and p.log is logs.get_log("t", 0) and p.log.dir == b / "t-0"
    assert everything(rm) == written
    write(5)  # the partition appends to its new log
    assert everything(rm) == written and p.log.high_watermark == p.log.log_end_offset == len(written)
    await moves.close()  # waits for the old dir's removal too
    assert not old.exists() and [c.name for c in a.iterdir() if c.name.startswith("t-0")] == []
    logs.close()


async def test_a_move_a_restart_interrupted_resumes_once_the_partition_is_hosted(tmp_path: Path) -> None:
    logs, rm, moves = hosted(tmp_path)
    p = rm.get("t", 0)
    for i in range(50):
        p.append_as_leader(encode_batch([f"v{i}".encode()], timestamps=1))
    expected = everything(rm)
    b = logs.log_dirs[1]
    logs.create_future_log("t", 0, b)  # as a move leaves it when the broker stops: its future log, part copied
    await moves.close()
    logs.close()

    logs, rm, moves = hosted(tmp_path)  # the restart: the future log is found, the partition hosted again
    deadline = time.monotonic() + 30
    while logs.future_log("t", 0) is not None and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    assert logs.future_log("t", 0) is None and logs.dir_of("t", 0) == b and rm.get("t", 0).log.dir == b / "t-0"
    assert everything(rm) == expected
    await moves.close()
    logs.close()

"""The broker's log-dir mover (broker/log_dir_moves.py) over a real replica manager and logs: each
AlterReplicaLogDirs answer, DescribeLogDirs showing the future replica, a leader that keeps taking writes while
its replica moves, then serves every record from the new dir, the copy held to
replica.alter.log.dirs.io.max.bytes.per.second, and a compacted replica whose last batches were cleaned away."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from odradek.broker.describe_log_dirs import describe_log_dirs, future_positions, replica_positions
from odradek.broker.log.cleaner.cleaner import Cleaner
from odradek.broker.log.cleaner.policy import CompactionConfig
from odradek.broker.log.config import LogConfig
from odradek.broker.log.manager import LogManager
from odradek.broker.log_dir_moves import FINAL_ROUNDS, LogDirMoves
from odradek.broker.log_dirs import log_dir_usage
from odradek.broker.replica_manager import ReplicaManager
from odradek.client.common.metadata_image import MetadataDelta, MetadataImage
from odradek.client.errors import ErrorCode, StorageError
from odradek.client.record.batch import read_batches
from odradek.client.record.builder import encode_batch
from odradek.proto import metadata_pb2 as md

TOPIC_ID = b"t" * 16
CONFIG = LogConfig(segment_bytes=8192, index_interval_bytes=512, segment_index_bytes=4096)


def hosted(tmp_path: Path, **moving: Any) -> tuple[LogManager, ReplicaManager, LogDirMoves]:
    """Broker 1 leads t-0 (its only replica) and hosts no replica of t-1 (broker 2's)."""
    logs = LogManager([tmp_path / "a", tmp_path / "b"], CONFIG)
    rm = ReplicaManager(1, logs, CONFIG)
    moves = LogDirMoves(rm, copy_bytes=4096, retry_s=0.01, **moving)
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
        if not len(chunk.records):  # only offsets compaction removed are left
            break
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


class SimulatedTime:
    """The mover's clock and sleep: a sleep advances the clock (and lets the other tasks run)."""

    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds
        await asyncio.sleep(0)


async def test_the_copy_keeps_to_replica_alter_log_dirs_io_max_bytes_per_second(tmp_path: Path) -> None:
    rate = 8192
    sim = SimulatedTime()
    logs, rm, moves = hosted(tmp_path, io_max_bytes_per_second=rate, clock=sim.clock, sleep=sim.sleep)
    p = rm.get("t", 0)
    for i in range(1200):
        p.append_as_leader(encode_batch([f"value-{i}".encode() * 8], timestamps=1))
    size = p.log.size_in_bytes
    expected = everything(rm)
    assert moves.throttle.rate == rate and size > 20 * rate
    b = logs.log_dirs[1]
    assert moves.alter({("t", 0): str(b)}) == {("t", 0): ErrorCode.NONE}
    deadline = time.monotonic() + 60
    while ("t", 0) in moves.copies and time.monotonic() < deadline:
        await asyncio.sleep(0.001)
    assert ("t", 0) not in moves.copies, "the move did not finish"
    assert logs.dir_of("t", 0) == b and everything(rm) == expected
    # A second of credit at the start, the rest at the rate, but for the last rounds, which run on the event loop
    # right before the swap and never wait (at most FINAL_ROUNDS of 4096 bytes); a round may wait for its grant.
    final = FINAL_ROUNDS * 4096
    assert (size - rate - final) / rate <= sim.now <= (size + 4096) / rate
    assert all(0 < s <= 0.01 for s in sim.slept)  # waits in steps of retry_s at most, to notice a cancel
    await moves.close()
    logs.close()


async def test_an_unthrottled_copy_never_waits(tmp_path: Path) -> None:
    sim = SimulatedTime()
    logs, rm, moves = hosted(tmp_path, clock=sim.clock, sleep=sim.sleep)
    p = rm.get("t", 0)
    for i in range(300):
        p.append_as_leader(encode_batch([f"value-{i}".encode() * 8], timestamps=1))
    assert moves.alter({("t", 0): str(logs.log_dirs[1])}) == {("t", 0): ErrorCode.NONE}
    deadline = time.monotonic() + 30
    while ("t", 0) in moves.copies and time.monotonic() < deadline:
        await asyncio.sleep(0.001)
    assert ("t", 0) not in moves.copies and sim.slept == []
    await moves.close()
    logs.close()


async def test_a_compacted_replica_whose_last_batches_were_cleaned_away_moves_without_an_append(
    tmp_path: Path,
) -> None:
    """Its last batches before its end are gone (expired tombstones) and its active segment is empty: the move
    used to wait for the partition's next append; it completes at once, and the new log ends where the old one did."""
    logs, rm, moves = hosted(tmp_path)
    p = rm.get("t", 0)
    for i in range(20):
        p.append_as_leader(encode_batch([b"v%d" % i * 20], [b"k%d" % (i % 4)], timestamps=1))
    for k in range(1, 4):
        p.append_as_leader(encode_batch([None], [b"k%d" % k], timestamps=1))
    tail = p.log.log_end_offset
    p.append_as_leader(encode_batch([b"x" * 7000], [b"big"], timestamps=1))  # rolls: the tombstones are sealed
    p.log.high_watermark = p.log.log_end_offset
    now = [1000]
    cleaner = Cleaner(1 << 20, clock=lambda: now[0])
    for _ in range(2):  # the first pass stamps the tombstones' delete horizon, the second removes them
        cleaner.clean(p.log, CompactionConfig(delete_retention_ms=0), 0, tail, p.log.log_end_offset)
        now[0] += 1000
    p.log.truncate_to(tail)  # the active segment is now empty, after the cleaned-away tombstones
    p.log.high_watermark = tail
    expected = everything(rm)
    assert expected and p.log.log_end_offset == tail
    b = logs.log_dirs[1]
    assert moves.alter({("t", 0): str(b)}) == {("t", 0): ErrorCode.NONE}
    deadline = time.monotonic() + 10
    while ("t", 0) in moves.copies and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    assert ("t", 0) not in moves.copies, "the move waited for an append"
    assert logs.dir_of("t", 0) == b and p.log.dir == b / "t-0"
    assert everything(rm) == expected and p.log.log_end_offset == tail
    await moves.close()
    logs.close()

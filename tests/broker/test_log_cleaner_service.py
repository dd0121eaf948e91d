"""The broker's log cleaner shell over a real replica manager and real logs: which logs it cleans and with which
settings, its checkpoint, truncations and deleted logs, uncleanable logs, metrics and DescribeLogDirs, and its pause
while a partition's replica moves to another log dir."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from replicas import latest_values

from odradek.broker import log_cleaner
from odradek.broker.config import NodeConfig
from odradek.broker.describe_log_dirs import describe_log_dirs, replica_positions
from odradek.broker.log.cleaner.policy import CompactionConfig
from odradek.broker.log.cleaner.runner import CHECKPOINT_FILE, read_checkpoint
from odradek.broker.log.config import LogConfig
from odradek.broker.log.manager import LogManager
from odradek.broker.log_cleaner import BrokerLogCleaner, compaction_config
from odradek.broker.log_dir_moves import LogDirMoves
from odradek.broker.log_dirs import log_dir_usage
from odradek.broker.replica_manager import ReplicaManager
from odradek.client.common.metadata_image import BROKER_RESOURCE, CLUSTER_DEFAULT, TOPIC_RESOURCE, MetadataDelta
from odradek.client.record.builder import encode_batch
from odradek.proto import metadata_pb2 as md

NOW = 10_000_000


def node(tmp_path: Path, **extra: object) -> NodeConfig:
    props: dict[str, object] = {
        "process.roles": "broker",
        "node.id": 1,
        "controller.quorum.voters": "9@127.0.0.1:19091",
        "listeners": "PLAINTEXT://127.0.0.1:19092",
        "log.dirs": str(tmp_path / "data"),
        "log.cleaner.dedupe.buffer.size": 1 << 20,
        "log.cleaner.backoff.ms": 10,
    }
    props.update(extra)
    return NodeConfig(props)


def records(topics: dict[str, dict[str, str]], defaults: dict[str, str] | None = None) -> list[md.MetadataRecord]:
    out = []
    for i, (name, configs) in enumerate(sorted(topics.items())):
        topic_id = bytes([i + 1]) * 16
        out.append(md.MetadataRecord(topic=md.TopicRecord(name=name, topic_id=topic_id)))
        out.append(
            md.MetadataRecord(
                partition=md.PartitionRecord(topic_id=topic_id, partition=0, replicas=[1], isr=[1], leader=1)
            )
        )
        for k, v in configs.items():
            out.append(
                md.MetadataRecord(
                    config=md.ConfigRecord(resource_type=TOPIC_RESOURCE, resource_name=name, name=k, value=v)
                )
            )
    for k, v in (defaults or {}).items():
        config = md.ConfigRecord(resource_type=BROKER_RESOURCE, resource_name=CLUSTER_DEFAULT, name=k, value=v)
        out.append(md.MetadataRecord(config=config))
    return out


class Broker:
    def __init__(self, tmp_path: Path, **extra: object) -> None:
        self.config = node(tmp_path, **extra)
        self.logs = LogManager(self.config.log_dirs)
        self.replicas = ReplicaManager(1, self.logs, LogConfig(segment_bytes=200))
        self.cleaner = BrokerLogCleaner(self.config, self.logs, self.replicas, clock=lambda: NOW)

    def apply(self, recs: list[md.MetadataRecord]) -> None:
        delta = MetadataDelta(self.replicas.image)
        delta.replay_all(recs)
        self.replicas.apply(delta.image(), delta)

    def put(self, topic: str, pairs: list[tuple[bytes, bytes | None]]) -> None:
        p = self.replicas.get(topic, 0)
        for key, value in pairs:
            p.append_as_leader(encode_batch([value], [key], timestamps=1_000))

    def latest(self, topic: str) -> dict[bytes, bytes | None]:
        return latest_values(self.replicas.get(topic, 0).log)

    def clean(self) -> int:
        """Rounds of the first cleaner thread until none is due; the number of passes."""
        passes = 0
        while passes < 20 and self.cleaner.threads[0].run_once():
            passes += 1
        return passes

    def close(self) -> None:
        self.logs.close()


@pytest.fixture
def broker(tmp_path: Path):
    b = Broker(tmp_path)
    yield b
    b.close()


def test_settings_come_from_the_topic_then_the_cluster_default_then_the_node(tmp_path: Path) -> None:
    config = node(tmp_path, **{"log.cleaner.delete.retention.ms": 5000, "log.cleaner.min.cleanable.ratio": 0.25})
    assert compaction_config({}, {}, config) == CompactionConfig(0.25, 0, 2**63 - 1, 5000)
    dynamic = {"log.cleaner.delete.retention.ms": "7000", "log.cleaner.min.compaction.lag.ms": "30"}
    assert compaction_config({}, dynamic, config) == CompactionConfig(0.25, 30, 2**63 - 1, 7000)
    own = {"delete.retention.ms": "1", "max.compaction.lag.ms": "99", "min.cleanable.dirty.ratio": "0.75"}
    assert compaction_config(own, dynamic, config) == CompactionConfig(0.75, 30, 99, 1)


def test_only_topics_whose_policy_includes_compact_are_cleaned(broker: Broker) -> None:
    broker.apply(
        records(
            {"c": {"cleanup.policy": "compact"}, "both": {"cleanup.policy": "compact,delete"}, "d": {}},
            {"log.cleaner.min.cleanable.ratio": "0"},
        )
    )
    assert set(broker.cleaner.compacted_logs()) == {("c", 0), ("both", 0)}
    assert broker.cleaner.compacted_logs()[("c", 0)].config.min_cleanable_dirty_ratio == 0.0
    # the node's default policy makes every topic without its own compacted; a live change of it too
    broker.apply(records({}, {"log.cleanup.policy": "compact"}))
    assert set(broker.cleaner.compacted_logs()) == {("c", 0), ("both", 0), ("d", 0)}


def test_an_idle_compacted_log_is_flushed_so_its_deletes_can_complete(
    broker: Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Tombstones go only below every replica's durable offset, and a replica's log becomes durable at a segment
    roll, which never comes once writes stop: each cleaner round fsyncs compacted logs idle for IDLE_FLUSH_MS (a
    torture run under load kept its deleted keys' tombstones for minutes). Other topics keep their flush policy."""
    monkeypatch.setattr(log_cleaner, "IDLE_FLUSH_MS", 100)
    broker.apply(records({"c": {"cleanup.policy": "compact"}, "d": {}}))
    for topic in ("c", "d"):
        broker.put(topic, [(b"k", b"v"), (b"k", None)])
    logs = {t: broker.replicas.get(t, 0).log for t in ("c", "d")}
    before = {t: log.recovery_point for t, log in logs.items()}
    assert all(before[t] < logs[t].log_end_offset for t in logs)
    broker.cleaner.compacted_logs()
    assert logs["c"].recovery_point == before["c"]  # just written: not idle yet
    time.sleep(0.15)
    broker.cleaner.compacted_logs()
    assert logs["c"].recovery_point == logs["c"].log_end_offset
    assert logs["d"].recovery_point == before["d"]


def test_a_pass_compacts_checkpoints_and_reports(broker: Broker) -> None:
    broker.apply(records({"c": {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0"}}))
    broker.put("c", [(b"k%d" % (i % 3), b"v%d" % i) for i in range(12)])
    broker.replicas.get("c", 0).log.high_watermark = broker.replicas.get("c", 0).log.log_end_offset
    assert broker.clean() >= 1
    latest = broker.latest("c")
    assert latest == {b"k0": b"v9", b"k1": b"v10", b"k2": b"v11"}
    log_dir = broker.logs.dir_of("c", 0)
    assert log_dir is not None and (log_dir / CHECKPOINT_FILE).exists()
    first_dirty = read_checkpoint(log_dir)[("c", 0)]
    assert 0 < first_dirty <= 12
    gauges = {m.name: m.samples[0].value for m in broker.cleaner.gauges() if m.samples}
    assert gauges["odradek_log_cleaner_passes"] >= 1
    assert gauges["odradek_log_cleaner_bytes_read"] > gauges["odradek_log_cleaner_bytes_written"] > 0
    assert gauges["odradek_log_cleaner_uncleanable_partitions"] == 0

    # a restarted broker starts from the checkpoint
    restarted = BrokerLogCleaner(broker.config, broker.logs, broker.replicas, clock=lambda: NOW)
    state = restarted.manager.log_state(("c", 0))
    assert state is not None and state.first_dirty == first_dirty


def test_a_truncation_makes_what_follows_dirty_and_a_recreated_log_starts_over(broker: Broker) -> None:
    broker.apply(records({"c": {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0"}}))
    broker.put("c", [(b"k%d" % (i % 3), b"v%d" % i) for i in range(12)])
    log = broker.replicas.get("c", 0).log
    log.high_watermark = log.log_end_offset
    broker.clean()
    state = broker.cleaner.manager.log_state(("c", 0))
    assert state is not None and state.first_dirty > 4
    log.truncate_to(4)
    broker.cleaner.compacted_logs()
    state = broker.cleaner.manager.log_state(("c", 0))
    assert state is not None and state.first_dirty == 4

    # the topic deleted and created again under the same name: the old log's offsets are forgotten
    broker.apply([md.MetadataRecord(remove_topic=md.RemoveTopicRecord(topic_id=b"\x01" * 16))])
    broker.cleaner.compacted_logs()
    assert broker.cleaner.manager.log_state(("c", 0)) is None


def test_a_corrupt_log_is_uncleanable_and_the_others_are_still_cleaned(broker: Broker) -> None:
    broker.apply(
        records(
            {
                "bad": {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0"},
                "good": {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0"},
            }
        )
    )
    for topic in ("bad", "good"):
        broker.put(topic, [(b"k%d" % (i % 3), b"v%d" % i) for i in range(12)])
        log = broker.replicas.get(topic, 0).log
        log.high_watermark = log.log_end_offset
    bad = broker.replicas.get("bad", 0).log
    first = bad.compaction_view().sealed[0].log_path
    with open(first, "r+b") as f:  # a flipped byte in a record: the batch's CRC no longer matches
        f.seek(70)
        byte = f.read(1)
        f.seek(70)
        f.write(bytes([byte[0] ^ 0xFF]))
    broker.clean()
    assert ("bad", 0) in broker.cleaner.uncleanable()
    assert "CorruptRecordError" in broker.cleaner.uncleanable()[("bad", 0)]
    assert broker.latest("good") == {b"k0": b"v9", b"k1": b"v10", b"k2": b"v11"}
    gauges = {m.name: m for m in broker.cleaner.gauges()}
    assert gauges["odradek_log_cleaner_uncleanable_partitions"].samples[0].value == 1
    assert gauges["odradek_log_cleaner_uncleanable_bytes"].samples[0].value == bad.size_in_bytes
    assert [s.labels for s in gauges["odradek_log_cleaner_uncleanable"].samples] == [{"topic": "bad", "partition": "0"}]
    answer = describe_log_dirs(
        1, log_dir_usage(broker.logs), replica_positions(broker.replicas), (), broker.cleaner.uncleanable()
    )
    why = {(r.topic, r.partition): r.uncleanable for d in answer.dirs for r in d.replicas}
    assert "CorruptRecordError" in why[("bad", 0)] and why[("good", 0)] == ""


def test_an_unexpected_failure_is_counted_uncleanable_and_long_max_delete_retention_is_cleaned(
    broker: Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    compact = {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0"}
    broker.apply(records({"bad": compact, "forever": compact | {"delete.retention.ms": str(2**63 - 1)}}))
    for topic in ("bad", "forever"):
        broker.put(topic, [(b"k%d" % (i % 3), b"v%d" % i) for i in range(12)] + [(b"k0", None)])
        broker.put(topic, [(b"x%d" % i, b"v") for i in range(6)])
        log = broker.replicas.get(topic, 0).log
        log.high_watermark = log.log_end_offset
    bad = broker.replicas.get("bad", 0).log
    entry = broker.cleaner.compacted_logs()[("forever", 0)]
    assert entry.tombstone_horizon is not None  # the live horizon, read again before each swap
    assert entry.tombstone_horizon() == entry.tombstone_horizon_offset
    cleaner = broker.cleaner.threads[0].cleaner
    clean = cleaner.clean

    def fails_on_bad(log: object, *args: object) -> object:
        if log is bad:
            raise RuntimeError("a bug")
        return clean(log, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(cleaner, "clean", fails_on_bad)
    assert broker.clean() >= 2
    assert broker.cleaner.uncleanable() == {("bad", 0): "RuntimeError: a bug"}
    gauges = {m.name: m for m in broker.cleaner.gauges()}
    assert gauges["odradek_log_cleaner_uncleanable_partitions"].samples[0].value == 1
    latest = broker.latest("forever")
    assert latest[b"k0"] is None and latest[b"k1"] == b"v10"  # cleaned, the tombstone kept for good
    state = broker.cleaner.manager.log_state(("forever", 0))
    assert state is not None and state.first_dirty > 12  # cleaned past the tombstone
    assert broker.clean() == 0  # nothing left in progress nor due


def test_the_node_keys_become_the_cleaner_threads_settings(tmp_path: Path) -> None:
    keys = {
        "log.cleaner.threads": 2,
        "log.cleaner.dedupe.buffer.size": 2 * 1024 * 1024,
        "log.cleaner.io.buffer.load.factor": 0.5,
        "log.cleaner.io.max.bytes.per.second": 1_000_000,
        "log.cleaner.backoff.ms": 250,
    }
    b = Broker(tmp_path, **keys)
    try:
        threads = b.cleaner.threads
        assert len(threads) == 2
        for t in threads:
            m = t.cleaner.offset_map  # each thread's share of the dedupe buffer, filled to the load factor
            assert m.slots == 2 * 1024 * 1024 // 2 // 24 and m.max_entries == int(m.slots * 0.5)
            assert t.cleaner.throttler is threads[0].cleaner.throttler  # one rate for the broker
            assert t.cleaner.throttler.rate == 1_000_000
            assert t._backoff == 0.25
    finally:
        b.close()
    off = Broker(tmp_path / "off", **{"log.cleaner.enable": False})
    try:
        assert off.cleaner.threads == []
    finally:
        off.close()


def test_the_backoff_is_waited_only_when_no_log_is_due(broker: Broker) -> None:
    """A round that cleaned goes on at once; one that found nothing waits ``log.cleaner.backoff.ms``."""
    broker.apply(records({"c": {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0"}}))
    broker.put("c", [(b"k%d" % (i % 3), b"v%d" % i) for i in range(12)])
    log = broker.replicas.get("c", 0).log
    log.high_watermark = log.log_end_offset
    thread = broker.cleaner.threads[0]
    waits: list[float | None] = []
    stop = thread._stop

    def wait(timeout: float | None = None) -> bool:
        waits.append(timeout)
        stop.set()  # one idle round is enough
        return True

    stop.wait = wait  # type: ignore[method-assign]
    thread._run()
    assert waits == [0.01]  # the pass ran first without waiting, then nothing was due
    assert broker.latest("c") == {b"k0": b"v9", b"k1": b"v10", b"k2": b"v11"}


async def test_a_move_pauses_cleaning_from_its_start_to_its_swap_or_cancel_also_across_a_restart(
    tmp_path: Path,
) -> None:
    """As Kafka's LogManager aborts and pauses a partition's cleaning for a move and resumes it afterwards: while
    the partition has a future log (a move started, or found at start and resumed) the cleaner leaves it alone and
    keeps its first dirty offset; a cancel or the swap resumes cleaning."""
    dirs = {"log.dirs": f"{tmp_path / 'a'},{tmp_path / 'b'}"}
    compact = records({"c": {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0"}})
    b = Broker(tmp_path, **dirs)
    b.apply(compact)
    b.put("c", [(b"k%d" % (i % 3), b"v%d" % i) for i in range(12)])
    log = b.replicas.get("c", 0).log
    log.high_watermark = log.log_end_offset
    src = b.logs.dir_of("c", 0)
    dest = next(d for d in b.logs.log_dirs if d != src)
    entry = b.cleaner.compacted_logs()[("c", 0)]
    assert entry.paused is not None and not entry.paused()

    b.logs.create_future_log("c", 0, dest)  # a move starts
    assert entry.paused() and b.clean() == 0
    b.logs.delete_future_log("c", 0)  # cancelled (or failed): cleaning resumes
    assert not entry.paused() and b.clean() >= 1
    first_dirty = b.cleaner.manager.log_state(("c", 0))
    assert first_dirty is not None

    b.put("c", [(b"k%d" % (i % 3), b"w%d" % i) for i in range(12)])
    log.high_watermark = log.log_end_offset
    b.logs.create_future_log("c", 0, dest)  # moving again when the broker stops
    b.close()

    b = Broker(tmp_path, **dirs)  # the restart finds the future log: paused before the partition is even hosted
    assert b.logs.cleaning_paused("c", 0)
    moves = LogDirMoves(b.replicas, copy_bytes=4096, retry_s=0.01)
    b.apply(compact)  # hosted again: the move resumes
    paused = b.cleaner.compacted_logs()[("c", 0)].paused
    assert paused is not None and paused()
    passes = 0
    deadline = time.monotonic() + 30
    while b.logs.future_log("c", 0) is not None and time.monotonic() < deadline:
        passes += b.clean()  # the cleaner keeps running meanwhile, and leaves the moving partition alone
        await asyncio.sleep(0.01)
    assert b.logs.future_log("c", 0) is None and b.logs.dir_of("c", 0) == dest, "the move did not finish"
    assert passes == 0
    # Swapped: cleaned again, in its new dir (the restart opened the log with the default segment size, one
    # segment: with small segments again, the next append rolls it).
    moved = b.replicas.get("c", 0).log
    after = b.cleaner.compacted_logs()[("c", 0)]
    assert after.paused is not None and not after.paused()
    moved.update_config(LogConfig(segment_bytes=200))
    b.put("c", [(b"k3", b"x")])
    moved.high_watermark = moved.log_end_offset
    assert b.clean() >= 1
    assert b.latest("c") == {b"k0": b"w9", b"k1": b"w10", b"k2": b"w11", b"k3": b"x"}
    await moves.close()
    b.close()

"""The DescribeLogDirs answer: every dir with its state and disk figures, the replicas in it with size, log end
offset and lag behind the leader; an offline dir answers KAFKA_STORAGE_ERROR without figures."""

from __future__ import annotations

from pathlib import Path

from odradek.broker.describe_log_dirs import UNKNOWN, ReplicaPosition, describe_log_dirs
from odradek.broker.log.manager import LogManager
from odradek.broker.log_dirs import log_dir_usage
from odradek.client.errors import ErrorCode, StorageError
from odradek.client.record.builder import encode_batch


def test_dirs_replicas_positions_and_topic_filter(tmp_path: Path) -> None:
    logs = LogManager([tmp_path / "a", tmp_path / "b"])
    log = logs.get_or_create_log("t", 0)
    log.append_as_leader(encode_batch([b"x" * 100, b"y"]), 0)
    logs.get_or_create_log("t", 1)
    logs.get_or_create_log("u", 0)
    positions = {("t", 0): ReplicaPosition(2, True, 0), ("t", 1): ReplicaPosition(5, False, 3)}

    r = describe_log_dirs(7, log_dir_usage(logs), positions)
    assert r.broker_id == 7 and r.error == ErrorCode.NONE
    assert sorted(d.path for d in r.dirs) == sorted(str((tmp_path / x).resolve()) for x in "ab")
    replicas = {(x.topic, x.partition): x for d in r.dirs for x in d.replicas}
    assert set(replicas) == {("t", 0), ("t", 1), ("u", 0)}
    t0 = replicas["t", 0]
    assert (t0.size_bytes, t0.log_end_offset, t0.is_leader, t0.offset_lag) == (log.size_in_bytes, 2, True, 0)
    assert (replicas["t", 1].offset_lag, replicas["t", 1].is_leader) == (3, False)
    assert (replicas["u", 0].offset_lag, replicas["u", 0].log_end_offset) == (UNKNOWN, UNKNOWN)
    for d in r.dirs:
        assert d.error == ErrorCode.NONE and d.total_bytes >= d.free_bytes > 0
        assert d.used_bytes == sum(x.size_bytes for x in d.replicas)

    only_u = describe_log_dirs(7, log_dir_usage(logs), positions, ["u"])
    assert [(x.topic, x.partition) for d in only_u.dirs for x in d.replicas] == [("u", 0)]
    assert len(only_u.dirs) == 2  # every dir is still described, with its whole usage
    assert sum(d.used_bytes for d in only_u.dirs) == sum(d.used_bytes for d in r.dirs)

    failed = logs.dir_of("t", 0)
    logs.fail_dir(failed, StorageError("EIO"))
    after = {d.path: d for d in describe_log_dirs(7, log_dir_usage(logs), positions).dirs}
    offline = after[str(failed)]
    assert offline.error == ErrorCode.KAFKA_STORAGE_ERROR and not offline.replicas
    assert (offline.total_bytes, offline.free_bytes, offline.used_bytes) == (-1, -1, -1)
    assert [d.error for p, d in after.items() if p != str(failed)] == [ErrorCode.NONE]

"""Log-dir usage figures and their Prometheus gauges: replica sizes per dir, disk totals, offline dirs."""

from __future__ import annotations

from pathlib import Path

from odradek.broker.log.manager import LogManager
from odradek.broker.log_dirs import log_dir_gauges, log_dir_usage
from odradek.client.errors import StorageError
from odradek.client.record.builder import encode_batch


def test_usage_per_dir_and_gauges(tmp_path: Path) -> None:
    logs = LogManager([tmp_path / "a", tmp_path / "b"])
    log = logs.get_or_create_log("t", 0)
    log.append_as_leader(encode_batch([b"x" * 100]), 0)
    logs.get_or_create_log("t", 1)
    usage = {d.path: d for d in log_dir_usage(logs)}
    assert set(usage) == {str((tmp_path / "a").resolve()), str((tmp_path / "b").resolve())}
    replicas = [r for d in usage.values() for r in d.replicas]
    assert sorted((r.topic, r.partition) for r in replicas) == [("t", 0), ("t", 1)]
    assert next(r for r in replicas if r.partition == 0).size_bytes == log.size_in_bytes > 100
    assert all(d.online and d.total_bytes >= d.free_bytes > 0 for d in usage.values())
    dir_of_t0 = logs.dir_of("t", 0)
    assert usage[str(dir_of_t0)].size_bytes >= log.size_in_bytes

    logs.fail_dir(dir_of_t0, StorageError("EIO"))
    after = {d.path: d for d in log_dir_usage(logs)}
    assert after[str(dir_of_t0)].online is False and after[str(dir_of_t0)].replicas == []
    families = {f.name: f for f in log_dir_gauges(list(after.values()))}
    online = {s.labels["dir"]: s.value for s in families["odradek_log_dir_online"].samples}
    assert online[str(dir_of_t0)] == 0 and sorted(online.values()) == [0, 1]
    assert {s.labels["dir"] for s in families["odradek_log_dir_free_bytes"].samples} == {
        p for p, d in after.items() if d.online
    }

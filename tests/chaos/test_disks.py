"""Disk faults of the nemesis: a full tmpfs really fails the log's writes with ENOSPC, freeing it lets them through
again; a wiped data directory is formatted again with the node's cluster id and nothing else; the schedule of the
new kinds is seeded."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import tomli_w

from odradek.broker.config import NodeConfig
from odradek.broker.log.config import LogConfig
from odradek.broker.log.manager import LogManager
from odradek.broker.storage import format_storage, verify_storage
from odradek.chaos import disks
from odradek.chaos.nemesis import ALL_FAULTS, DISK_FAULTS, RESPONSE_FAULTS, schedule
from odradek.client.errors import OdradekError
from odradek.client.record.builder import encode_batch


def tmpfs_works() -> bool:
    return os.geteuid() == 0 and shutil.which("mount") is not None


@pytest.fixture
def small_tmpfs(tmp_path: Path) -> Iterator[Path]:
    if not tmpfs_works():
        pytest.skip("mounting a tmpfs needs root")
    directory = tmp_path / "data"
    directory.mkdir()
    (directory / "kept").write_text("there before the mount")
    try:
        disks.mount_tmpfs(directory, 4)
    except subprocess.CalledProcessError as e:
        pytest.skip(f"mount -t tmpfs is not allowed here: {e.stderr!r}")
    yield directory
    disks.unmount(directory)


def batch(n: int) -> bytes:
    return encode_batch([bytes(2000)] * n)


def test_a_full_log_dir_fails_appends_with_enospc_and_goes_offline(small_tmpfs: Path) -> None:
    assert disks.is_mount(small_tmpfs)
    assert (small_tmpfs / "kept").read_text() == "there before the mount"  # moved onto the tmpfs
    manager = LogManager([small_tmpfs], LogConfig(segment_bytes=1 << 20))  # segments reserve blocks ahead
    try:
        log = manager.get_or_create_log("t", 0)
        log.append_as_leader(batch(4), 0)
        assert disks.release_reservations(small_tmpfs) > 0
        assert disks.fill(small_tmpfs) > 1 << 20
        with pytest.raises(OdradekError, match="No space left"):
            for _ in range(8):  # the first append may still fit the page it started
                log.append_as_leader(batch(4), 0)
        assert log.offline and manager.offline_dirs() == [small_tmpfs.resolve()]  # the whole dir, as Kafka's
        assert "No space left" in str(log.failure)
        manager.checkpoint()  # nothing more is written to an offline dir
        disks.unfill(small_tmpfs)
        with pytest.raises(OdradekError):
            manager.get_or_create_log("t2", 0)  # it stays offline until the broker restarts
    finally:
        disks.unfill(small_tmpfs)
        manager.close()


def test_wipe_leaves_a_formatted_empty_directory(tmp_path: Path) -> None:
    data = tmp_path / "data"
    config = tmp_path / "node.toml"
    config.write_text(
        tomli_w.dumps(
            {"process.roles": "broker", "node.id": 4, "controller.quorum.voters": "1@h:1", "log.dirs": str(data)}
        )
    )
    format_storage(NodeConfig.load(config), "chaoscluster")
    (data / "chaos-0").mkdir()
    (data / "chaos-0" / "00000000000000000000.log").write_bytes(b"x" * 100)
    (data / "__raft").mkdir()
    (data / "recovery-point-offset-checkpoint").write_text("0\n0\n")
    assert disks.wipe(config, "chaoscluster") == [str(data)]
    assert [p.name for p in data.iterdir()] == ["meta.properties"]
    assert verify_storage(NodeConfig.load(config)) == "chaoscluster"


def test_new_kinds_are_scheduled_by_seed() -> None:
    kinds = list(RESPONSE_FAULTS + DISK_FAULTS)
    assert set(kinds) <= set(ALL_FAULTS)
    a = schedule(11, 60, kinds, 2.5)
    assert a == schedule(11, 60, kinds, 2.5)
    assert {s.kind for s in a} == set(kinds)
    assert all(0.3 * 2.5 <= s.duration <= 0.7 * 2.5 for s in a)

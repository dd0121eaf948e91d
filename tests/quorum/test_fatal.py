"""A Ready the driver cannot carry out (an fsync fails) stops the metadata quorum for good, and the node's
process with it, instead of leaving a core that waits forever for advance() and still believes it leads."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from quorum_disk import RecordingStateMachine

from odradek.broker.log.metadata import open_metadata_log
from odradek.controller.quorum.driver import MetadataLogFailedError, RaftDriver
from odradek.controller.raft import NotLeaderError, Role
from odradek.deploy.local import DevCluster


def eio(*_args, **_kwargs):
    raise OSError(5, "Input/output error")


async def test_a_failed_flush_stops_a_leading_driver(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    sm = RecordingStateMachine()
    fatal: list[BaseException] = []
    driver = RaftDriver(
        1, {1: "127.0.0.1:1"}, "c", tmp_path, sm, tick_ms=10, election_timeout_ms=50, open_log=open_metadata_log
    )
    driver.on_fatal = fatal.append
    await driver.start()
    try:
        async with asyncio.timeout(10):
            await sm.leading.wait()
        driver._log.flush = eio
        with pytest.raises(MetadataLogFailedError, match="Input/output error") as raised:
            driver.propose([b"a"])
        assert isinstance(raised.value, NotLeaderError)  # callers look for the leader elsewhere
        assert [type(e) for e in fatal] == [OSError]
        [line] = [r.getMessage() for r in caplog.records if "fatal" in r.getMessage()]
        assert line.startswith("fatal: metadata log I/O error on node 1") and line.endswith("; stopping")
        assert driver.leader.role is not Role.LEADER and sm.leaders[-1].role is not Role.LEADER

        del driver._log.flush  # the disk answers again: the driver stays stopped all the same
        with pytest.raises(MetadataLogFailedError):
            driver.propose([b"b"])  # the old code: RuntimeError "advance() the previous Ready first"
        async with asyncio.timeout(5):
            await driver._ticker  # ticks stop
        now = driver.node.now
        await asyncio.sleep(0.05)
        assert driver.node.now == now and len(fatal) == 1
    finally:
        await driver.stop(graceful=True)


@pytest.mark.integration
def test_a_fatal_metadata_log_error_exits_the_server_non_zero(tmp_path: Path) -> None:
    """A single-controller server whose quorum-state write fails at its first election logs one line and exits
    with status 1 (a real process; the error is injected before it starts)."""
    cluster = DevCluster.create(tmp_path, controllers=1, brokers=0)
    config = cluster.node(1).config
    script = textwrap.dedent(
        f"""
        from odradek.broker.config import NodeConfig
        from odradek.broker.node import run
        from odradek.controller.quorum.files import QuorumStateFile

        def eio(self, state):
            raise OSError(5, "Input/output error")

        QuorumStateFile.store = eio
        run(NodeConfig.load({config!r}))
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    fatal = [line for line in done.stderr.splitlines() if "fatal: metadata log I/O error" in line]
    assert done.returncode == 1, done.stderr[-2000:]
    assert len(fatal) == 1 and "Input/output error; stopping" in fatal[0] and "CRITICAL" in fatal[0]

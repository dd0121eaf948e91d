"""The driver writes the core's transition events to the node log at INFO: an operator reads elections there."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest
from quorum_disk import RecordingStateMachine

from odradek.broker.log.metadata import open_metadata_log
from odradek.controller.quorum.driver import RaftDriver


async def test_a_single_voter_logs_its_election(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="odradek.controller.quorum.driver")
    sm = RecordingStateMachine()
    driver = RaftDriver(
        1, {1: "127.0.0.1:1"}, "c", tmp_path, sm, tick_ms=10, election_timeout_ms=50, open_log=open_metadata_log
    )
    await driver.start()
    try:
        async with asyncio.timeout(10):
            await sm.leading.wait()
    finally:
        await driver.stop(graceful=True)
    lines = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO and r.getMessage().startswith("raft")]
    assert lines[:3] == [
        "raft node 1: asking for pre-votes for epoch 1: election timeout",
        "raft node 1: became candidate in epoch 1 (pre-votes from 1)",
        "raft node 1: became leader of epoch 1 (votes from 1)",
    ]
    assert lines[-1] == "raft node 1: stepped down as leader of epoch 1: asked to resign"

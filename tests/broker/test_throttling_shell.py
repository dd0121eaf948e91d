"""The quota shell's timing of a handler's event-loop steps (the request quota's measure): busy steps count, the
time spent waiting does not, and results, errors and cancellations pass through unchanged."""

from __future__ import annotations

import asyncio
import time

import pytest

from odradek.broker.throttling import _TimedSteps


def busy(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


async def handler(log: list[str]) -> str:
    busy(0.02)
    await asyncio.sleep(0.2)  # waiting (replication, a long poll): not the broker's work
    busy(0.02)
    log.append("done")
    return "answer"


async def test_steps_are_timed_and_waits_are_not() -> None:
    log: list[str] = []
    timed = _TimedSteps(handler(log))
    assert await timed == "answer" and log == ["done"]
    assert 0.04 <= timed.seconds < 0.15


async def test_an_error_passes_through_and_its_step_is_timed() -> None:
    async def failing() -> None:
        await asyncio.sleep(0)
        busy(0.01)
        raise ValueError("bad request")

    timed = _TimedSteps(failing())
    with pytest.raises(ValueError, match="bad request"):
        await timed
    assert timed.seconds >= 0.01


async def test_a_cancellation_reaches_the_handler() -> None:
    seen: list[str] = []

    async def waiting() -> None:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise

    async def run() -> None:
        await _TimedSteps(waiting())

    task = asyncio.ensure_future(run())
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert seen == ["cancelled"]

"""The node's cycle-collection schedule: freezes what survives, and still reclaims a frozen cycle at its full pass."""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import Iterator

import pytest

from odradek.broker.heap import CycleCollection, keep_collecting


class Recorder:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def collect(self) -> int:
        self.calls.append("collect")
        return 0

    def freeze(self) -> None:
        self.calls.append("freeze")

    def unfreeze(self) -> None:
        self.calls.append("unfreeze")


def test_every_step_collects_then_freezes_and_every_nth_unfreezes_first() -> None:
    recorder = Recorder()
    collection = CycleCollection(recorder, full_every=3)
    kinds = [collection.step() for _ in range(7)]
    assert kinds == [True, False, False, True, False, False, True]
    full, partial = ["unfreeze", "collect", "freeze"], ["collect", "freeze"]
    assert recorder.calls == full + partial + partial + full + partial + partial + full


class Node:
    """A long-lived object in a reference cycle, as a partition and its state can be."""

    def __init__(self) -> None:
        self.me = self


@pytest.fixture
def thawed() -> Iterator[None]:
    """The test process's heap is unfrozen again afterwards, whatever the test froze."""
    try:
        yield
    finally:
        gc.unfreeze()


def test_a_frozen_cycle_outlives_partial_passes_and_is_reclaimed_by_the_full_one(thawed: None) -> None:
    collection = CycleCollection(gc, full_every=3)
    node = Node()
    alive = weakref.ref(node)
    assert collection.step()  # the first step is full, then freezes the node with everything else
    assert gc.get_freeze_count() > 0
    del node  # garbage now, but only the cycle collector can see it
    assert not collection.step()
    gc.collect()  # an automatic pass (any generation) skips frozen objects too
    assert alive() is not None
    assert not collection.step()
    assert alive() is not None
    assert collection.step()  # full: unfrozen, collected
    assert alive() is None


async def test_the_node_task_steps_at_once_and_then_every_interval() -> None:
    recorder = Recorder()
    task = asyncio.create_task(keep_collecting(CycleCollection(recorder, full_every=2), interval_s=0.01))
    try:
        for _ in range(500):
            if recorder.calls.count("collect") >= 3:
                break
            await asyncio.sleep(0.01)
    finally:
        task.cancel()
    assert recorder.calls[:7] == ["unfreeze", "collect", "freeze", "collect", "freeze", "unfreeze", "collect"]

"""Sends partition leaders' ISR changes to the active controller (AlterPartition), batched: the asyncio shell
around ``isr_batcher.IsrChangeBatcher``, which decides what to send and what each answer means."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from odradek.broker.isr_batcher import NOT_APPLIED_CODES, IsrChangeBatcher, Outcome
from odradek.broker.partition import Partition
from odradek.broker.replication import IsrChange
from odradek.client.errors import ErrorCode
from odradek.proto import controller_pb2 as cpb

logger = logging.getLogger(__name__)


class IsrChangeSender:
    """The asyncio shell: one AlterPartition at a time for everything queued, with a backoff after trouble."""

    def __init__(
        self,
        broker_id: int,
        broker_epoch: Callable[[], int],
        call: Callable[[str, cpb.AlterPartitionRequest], Awaitable[cpb.AlterPartitionResponse | None]],
        backoff_ms: int = 500,
    ) -> None:
        self.batcher: IsrChangeBatcher[Partition] = IsrChangeBatcher(broker_id)
        self.broker_epoch = broker_epoch
        self.call = call
        self.backoff = backoff_ms / 1000
        self._wake = asyncio.Event()
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="isr-changes")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    def submit(self, p: Partition, change: IsrChange) -> None:
        # The partition already logged why at INFO (replication events).
        logger.debug("%s: asking for ISR %s (was %s)", p, list(change.new_isr), list(p.isr))
        self.batcher.submit(p, change)
        self._wake.set()

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            try:
                await self._send_queued()
            except Exception:  # a bug here must not stop ISR changes for good
                logger.exception("sending ISR changes failed")
                await asyncio.sleep(self.backoff)
                self._wake.set()

    async def _send_queued(self) -> None:
        items = self.batcher.take()
        if not items:
            return
        response = await self.call("AlterPartition", self.batcher.request(items, self.broker_epoch()))
        outcome = self.batcher.on_response(items, response)
        _log(outcome)
        loop = asyncio.get_running_loop()
        for p, c in outcome.not_applied:
            loop.call_later(self.backoff, p.isr_change_failed, c)
        if outcome.retry:
            self.batcher.requeue(outcome.retry)
            await asyncio.sleep(self.backoff)
            self._wake.set()


def _log(outcome: Outcome[Partition]) -> None:
    if outcome.refused_whole is not None:
        logger.warning("AlterPartition refused as a whole: %s", _name(outcome.refused_whole))
    for (p, _), code in outcome.refusals:
        if code in NOT_APPLIED_CODES:
            logger.info("%s: ISR change refused: %s", p, _name(code))
        else:
            logger.info("%s: ISR change answered %s: waiting for the metadata that settles it", p, _name(code))


def _name(code: int) -> str:
    return ErrorCode.Name(ErrorCode.ValueType(code))

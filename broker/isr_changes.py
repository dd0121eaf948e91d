"""Sends partition leaders' ISR changes to the active controller (AlterPartition), batched.

Changes queued while a request is out go together in the next one. A change the controller commits settles in
the leader when the metadata carrying it arrives (replication.LeaderState.on_metadata); a refused one frees the
partition for a new request after a backoff, so a follower that keeps qualifying does not flood the controller.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from odradek.broker.partition import Partition
from odradek.broker.replication import IsrChange
from odradek.client.errors import ErrorCode
from odradek.proto import controller_pb2 as cpb

log = logging.getLogger(__name__)

RETRY_CODES = frozenset({ErrorCode.NOT_CONTROLLER, ErrorCode.REQUEST_TIMED_OUT})


class IsrChangeSender:
    def __init__(
        self,
        broker_id: int,
        broker_epoch: Callable[[], int],
        call: Callable[[str, cpb.AlterPartitionRequest], Awaitable[cpb.AlterPartitionResponse | None]],
        backoff_ms: int = 500,
    ) -> None:
        self.broker_id = broker_id
        self.broker_epoch = broker_epoch
        self.call = call
        self.backoff = backoff_ms / 1000
        self._queue: dict[tuple[str, int], tuple[Partition, IsrChange]] = {}
        self._wake = asyncio.Event()
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="isr-changes")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    def submit(self, p: Partition, change: IsrChange) -> None:
        log.info("%s: asking for ISR %s (was %s)", p, list(change.new_isr), list(p.isr))
        self._queue[(p.topic, p.partition)] = (p, change)
        self._wake.set()

    def _request(self, items: list[tuple[Partition, IsrChange]]) -> cpb.AlterPartitionRequest:
        topics: dict[str, list[cpb.AlterPartitionItem]] = {}
        for p, c in items:
            topics.setdefault(p.topic, []).append(
                cpb.AlterPartitionItem(
                    partition=p.partition,
                    leader_epoch=c.leader_epoch,
                    partition_epoch=c.partition_epoch,
                    new_isr=c.new_isr,
                )
            )
        return cpb.AlterPartitionRequest(
            broker_id=self.broker_id,
            broker_epoch=self.broker_epoch(),
            topics=[cpb.AlterPartitionTopic(name=n, partitions=ps) for n, ps in topics.items()],
        )

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            try:
                await self._send_queued()
            except Exception:  # a bug here must not stop ISR changes for good
                log.exception("sending ISR changes failed")
                await asyncio.sleep(self.backoff)
                self._wake.set()

    async def _send_queued(self) -> None:
        """One AlterPartition for everything queued (requeueing what should be retried)."""
        loop = asyncio.get_running_loop()
        batch, self._queue = self._queue, {}
        items = [(p, c) for p, c in batch.values() if p.leader_state is not None and p.leader_state.pending == c]
        if not items:
            return
        response = await self.call("AlterPartition", self._request(items))
        if response is None or response.error in RETRY_CODES:
            self._requeue(items)
            await asyncio.sleep(self.backoff)
            return
        if response.error != ErrorCode.NONE:
            log.warning("AlterPartition refused: %s", ErrorCode.Name(response.error))
            for p, c in items:
                loop.call_later(self.backoff, p.isr_change_failed, c)
            return
        by_key = {(p.topic, p.partition): (p, c) for p, c in items}
        retry = []
        for t in response.topics:
            for r in t.partitions:
                p, c = by_key.get((t.name, r.partition), (None, None))
                if p is None or r.error == ErrorCode.NONE:
                    continue
                if r.error in RETRY_CODES:
                    retry.append((p, c))
                    continue
                log.info("%s: ISR change refused: %s", p, ErrorCode.Name(r.error))
                loop.call_later(self.backoff, p.isr_change_failed, c)
        if retry:
            self._requeue(retry)
            await asyncio.sleep(self.backoff)

    def _requeue(self, items: list[tuple[Partition, IsrChange]]) -> None:
        for p, c in items:
            self._queue.setdefault((p.topic, p.partition), (p, c))
        self._wake.set()

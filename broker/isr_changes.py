"""Sends partition leaders' ISR changes to the active controller (AlterPartition), batched.

``IsrChangeBatcher`` is the sans-I/O core: it queues changes, builds one request for everything queued and tells
what each answer means; ``IsrChangeSender`` is the asyncio shell that sends, waits and backs off.

A change stays *pending* in the leader (and keeps counting in its maximal ISR, so the high watermark waits for a
member being added) until committed metadata at a higher partition epoch settles it
(``replication.LeaderState.on_metadata``). The leader gives a change up only on an answer that proves the
controller applied nothing: the controller checks the leader and partition epochs before anything else, so
INVALID_REQUEST or INELIGIBLE_REPLICA at the current epochs means this change was never committed. Any other
refusal may be the answer to a retry of a change the controller already committed (its first answer lost to a
deadline or a controller failover): INVALID_UPDATE_VERSION then only says the epoch moved on, and forgetting the
change would let the high watermark advance without a replica the committed ISR contains.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from odradek.broker.partition import Partition
from odradek.broker.replication import IsrChange
from odradek.client.errors import ErrorCode
from odradek.proto import controller_pb2 as cpb

logger = logging.getLogger(__name__)

# Nothing was decided (no controller, or it could not finish): send the same change again.
RETRY_CODES = frozenset(
    {ErrorCode.NOT_CONTROLLER, ErrorCode.REQUEST_TIMED_OUT, ErrorCode.STALE_BROKER_EPOCH, ErrorCode.NETWORK_EXCEPTION}
)
# Decided against at the current epochs: the change was not applied, the leader may ask anew.
NOT_APPLIED_CODES = frozenset({ErrorCode.INVALID_REQUEST, ErrorCode.INELIGIBLE_REPLICA})

Item = tuple[Partition, IsrChange]


@dataclass(slots=True)
class Outcome:
    """What one answer means: ``retry`` goes out again after the backoff; ``not_applied`` is given up (after the
    backoff, so a follower that keeps qualifying does not flood the controller); anything else waits for the
    metadata that settles it."""

    retry: list[Item] = field(default_factory=list)
    not_applied: list[Item] = field(default_factory=list)


class IsrChangeBatcher:
    def __init__(self, broker_id: int) -> None:
        self.broker_id = broker_id
        self._queue: dict[tuple[str, int], Item] = {}

    def submit(self, p: Partition, change: IsrChange) -> None:
        self._queue[(p.topic, p.partition)] = (p, change)

    def requeue(self, items: list[Item]) -> None:
        for p, c in items:
            self._queue.setdefault((p.topic, p.partition), (p, c))

    def take(self) -> list[Item]:
        """Everything queued that its partition still waits for (settled or superseded changes are dropped)."""
        batch, self._queue = self._queue, {}
        return [(p, c) for p, c in batch.values() if p.leader_state is not None and p.leader_state.pending == c]

    def request(self, items: list[Item], broker_epoch: int) -> cpb.AlterPartitionRequest:
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
            broker_epoch=broker_epoch,
            topics=[cpb.AlterPartitionTopic(name=n, partitions=ps) for n, ps in topics.items()],
        )

    def on_response(self, items: list[Item], response: cpb.AlterPartitionResponse | None) -> Outcome:
        """Classify the answer to a request for ``items`` (None: no answer, e.g. a deadline or a lost connection)."""
        if response is None or response.error in RETRY_CODES:
            return Outcome(retry=list(items))
        if response.error != ErrorCode.NONE:
            # Refused as a whole before any partition was looked at: nothing of this request was applied, but an
            # earlier attempt may have been, so ask again rather than forget.
            logger.warning("AlterPartition refused as a whole: %s", ErrorCode.Name(response.error))
            return Outcome(retry=list(items))
        by_key = {(p.topic, p.partition): (p, c) for p, c in items}
        outcome = Outcome()
        for t in response.topics:
            for r in t.partitions:
                item = by_key.get((t.name, r.partition))
                if item is None or r.error == ErrorCode.NONE:
                    continue
                if r.error in RETRY_CODES:
                    outcome.retry.append(item)
                elif r.error in NOT_APPLIED_CODES:
                    logger.info("%s: ISR change refused: %s", item[0], ErrorCode.Name(r.error))
                    outcome.not_applied.append(item)
                else:
                    logger.info(
                        "%s: ISR change answered %s: waiting for the metadata that settles it",
                        item[0],
                        ErrorCode.Name(r.error),
                    )
        return outcome


class IsrChangeSender:
    """The asyncio shell: one AlterPartition at a time for everything queued, with a backoff after trouble."""

    def __init__(
        self,
        broker_id: int,
        broker_epoch: Callable[[], int],
        call: Callable[[str, cpb.AlterPartitionRequest], Awaitable[cpb.AlterPartitionResponse | None]],
        backoff_ms: int = 500,
    ) -> None:
        self.batcher = IsrChangeBatcher(broker_id)
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
        loop = asyncio.get_running_loop()
        for p, c in outcome.not_applied:
            loop.call_later(self.backoff, p.isr_change_failed, c)
        if outcome.retry:
            self.batcher.requeue(outcome.retry)
            await asyncio.sleep(self.backoff)
            self._wake.set()

"""Producer ids for InitProducerId, drawn from blocks the active controller allocates (Kafka's KIP-730).

A broker asks the controller (AllocateProducerIds) for a block of ids and hands them out one by one, so a new
producer costs no metadata write. The next block is fetched in the background once 90% of the current one is
used, so producers rarely wait; when the current block runs out before the next arrives, callers wait for it
(retrying with a short backoff) up to a timeout and then fail with a retriable REQUEST_TIMED_OUT.

``ProducerIdBlocks`` holds the block arithmetic without I/O; ``ProducerIdManager`` is its asyncio shell. Only one
AllocateProducerIds request is in flight at a time: each one commits a metadata record and burns a block.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from odradek.client.errors import ErrorCode, RequestTimedOutError
from odradek.proto import controller_pb2 as cpb

logger = logging.getLogger(__name__)

PREFETCH_RATIO = 0.9


class ProducerIdsUnavailableError(RequestTimedOutError):
    """No producer id could be obtained from the controller in time (retriable)."""


class ProducerIdBlocks:
    """The current block ``[next, end)`` and at most one prefetched block after it.

    Blocks must arrive in increasing, disjoint order (the controller's guarantee); a block overlapping ids already
    seen is refused rather than risk handing out an id twice.
    """

    def __init__(self, prefetch_ratio: float = PREFETCH_RATIO) -> None:
        self.prefetch_ratio = prefetch_ratio
        self._next = 0
        self._end = 0  # current block exhausted when _next == _end
        self._prefetch_at = 0  # the id whose handing out makes the next block wanted
        self._pending: tuple[int, int] | None = None  # prefetched (start, end)
        self._highest = -1  # the end of the newest block accepted

    @property
    def available(self) -> int:
        """Ids that can be handed out without another block."""
        pending = self._pending[1] - self._pending[0] if self._pending else 0
        return self._end - self._next + pending

    def wants_block(self) -> bool:
        """Whether another block should be requested: none is prefetched and the current one is 90% used."""
        return self._pending is None and self._next >= self._prefetch_at

    def add_block(self, start: int, length: int) -> bool:
        """Accept a block from the controller; False (and ignored) if empty, overlapping or unwanted."""
        if length <= 0 or start < 0 or start < self._highest or self._pending is not None:
            return False
        end = start + length
        self._highest = end
        if self._next >= self._end:
            self._start_block(start, end)
        else:
            self._pending = (start, end)
        return True

    def _start_block(self, start: int, end: int) -> None:
        self._next, self._end = start, end
        self._prefetch_at = start + int((end - start) * self.prefetch_ratio)

    def take(self) -> int | None:
        """The next id, moving on to the prefetched block when the current one is used up; None if none left."""
        if self._next >= self._end and self._pending is not None:
            self._start_block(*self._pending)
            self._pending = None
        if self._next >= self._end:
            return None
        pid = self._next
        self._next += 1
        return pid


AllocateCall = Callable[[str, cpb.AllocateProducerIdsRequest], Awaitable[cpb.AllocateProducerIdsResponse | None]]


class ProducerIdManager:
    """Hands out producer ids unique across the cluster; ``call`` sends a Controller RPC to the active controller
    (None when it could not answer), as ``BrokerLifecycleManager.call`` does."""

    def __init__(
        self,
        broker_id: int,
        broker_epoch: Callable[[], int],
        call: AllocateCall,
        *,
        timeout_s: float = 10.0,
        backoff_s: float = 0.1,
        prefetch_ratio: float = PREFETCH_RATIO,
    ) -> None:
        self.broker_id = broker_id
        self.broker_epoch = broker_epoch
        self.call = call
        self.timeout_s = timeout_s
        self.backoff_s = backoff_s
        self.blocks = ProducerIdBlocks(prefetch_ratio)
        self._fetch: asyncio.Task | None = None
        self._retry_at = 0.0  # loop time before which no new request is sent after a failed one
        self._last_error = "no block requested yet"

    async def close(self) -> None:
        if self._fetch is not None:
            self._fetch.cancel()
            await asyncio.gather(self._fetch, return_exceptions=True)

    async def next_id(self) -> int:
        """A producer id never handed out before by any broker. Raises ProducerIdsUnavailableError when no block
        could be had within ``timeout_s``."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout_s
        while True:
            pid = self.blocks.take()
            if pid is not None:
                if self.blocks.wants_block():
                    self._maybe_fetch(loop.time())
                return pid
            now = loop.time()
            if now >= deadline:
                raise ProducerIdsUnavailableError(
                    f"no producer id block from the controller within {self.timeout_s}s ({self._last_error})"
                )
            fetch = self._maybe_fetch(now)
            if fetch is None:  # backing off after a failed request
                await asyncio.sleep(min(self._retry_at, deadline) - now)
            else:
                # wait() neither cancels the shared request on timeout nor when this caller is cancelled.
                await asyncio.wait([fetch], timeout=deadline - now)

    def _maybe_fetch(self, now: float) -> asyncio.Task | None:
        """The request in flight, or a new one unless backing off."""
        if self._fetch is None and now >= self._retry_at:
            self._fetch = asyncio.create_task(self._allocate(), name="allocate-producer-ids")
        return self._fetch

    async def _allocate(self) -> None:
        request = cpb.AllocateProducerIdsRequest(broker_id=self.broker_id, broker_epoch=self.broker_epoch())
        try:
            response = await self.call("AllocateProducerIds", request)
            if response is None:
                self._failed("the controller did not answer")
            elif response.error != ErrorCode.NONE:
                self._failed(f"the controller answered {ErrorCode.Name(response.error)}")
            elif not self.blocks.add_block(response.producer_id_start, response.producer_id_len):
                self._failed(f"refused block {response.producer_id_start}+{response.producer_id_len}")
                logger.error("producer id block %s is not above the ids seen", response)
            else:
                logger.info(
                    "producer id block [%d, %d)",
                    response.producer_id_start,
                    response.producer_id_start + response.producer_id_len,
                )
        except Exception as e:  # a request that fails in any way is retried after the backoff
            self._failed(repr(e))
            logger.exception("AllocateProducerIds failed")
        finally:
            self._fetch = None

    def _failed(self, why: str) -> None:
        self._last_error = why
        self._retry_at = asyncio.get_running_loop().time() + self.backoff_s
        logger.debug("no producer id block: %s", why)

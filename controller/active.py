"""The active controller: turns requests into metadata records and commits them through Raft.

Only the Raft leader acts, and only once everything before its epoch is committed and applied, so its image is
the whole log. Writes are serialized and each waits for its commit before the next is decided: metadata
changes are rare, and this keeps every decision based on an image that includes all earlier ones. Besides
requests, two timers write: session expiry (fencing silent brokers) and, when enabled, the automatic
preferred-leader rebalance (``leader.imbalance.check.interval.seconds``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import TypeVar

from odradek.client.common.metadata_image import MetadataImage
from odradek.client.errors import ErrorCode, OdradekError
from odradek.controller.brokers import BrokerControl
from odradek.controller.elections import rebalance_leaders
from odradek.controller.metadata.state_machine import MetadataStateMachine, encode_batch
from odradek.controller.quorum.driver import RaftDriver
from odradek.controller.raft import LeaderAndEpoch, NotLeaderError, RaftNode, Role
from odradek.controller.replica_logs import ReplicaLogInspector
from odradek.controller.unclean_recovery import BALANCED, Inspection, Recovery, balanced_inspections, recoveries
from odradek.proto import metadata_pb2 as md

logger = logging.getLogger(__name__)

T = TypeVar("T")


def now_ms() -> int:
    return time.monotonic_ns() // 1_000_000


class NotControllerError(OdradekError):
    code = ErrorCode.NOT_CONTROLLER

    def __init__(self, leader_id: int | None) -> None:
        super().__init__(f"not the active controller (leader: {leader_id})")
        self.leader_id = leader_id


class ActiveController:
    def __init__(
        self,
        driver: RaftDriver,
        state_machine: MetadataStateMachine,
        lifecycle: BrokerControl,
        session_check_ms: int = 250,
        *,
        rebalance_interval_s: float | None = None,
        imbalance_percentage: int = 10,
        recovery_strategy: Callable[[str], str] = lambda _topic: BALANCED,
        recovery_interval_s: float = 1.0,
    ) -> None:
        """``rebalance_interval_s`` None disables the automatic preferred-leader rebalance."""
        self.driver = driver
        self.sm = state_machine
        self.lifecycle = lifecycle
        self.session_check_ms = session_check_ms
        self.rebalance_interval_s = rebalance_interval_s
        self.imbalance_percentage = imbalance_percentage
        self.recovery_strategy = recovery_strategy
        self.recovery_interval_s = recovery_interval_s
        self.inspector = ReplicaLogInspector()
        self._lock = asyncio.Lock()
        self._active = asyncio.Event()
        self._epoch_start: int | None = None
        self._tasks: list[asyncio.Task] = []
        state_machine.on_leader_change(self._leader_changed)
        state_machine.on_change(lambda image, delta: self._maybe_activate())

    @property
    def is_active(self) -> bool:
        return self._active.is_set()

    @property
    def image(self) -> MetadataImage:
        return self.sm.image

    @property
    def _raft(self) -> RaftNode:
        """The driver's Raft core: leadership changes and writes come only from a started driver."""
        node = self.driver.node
        if node is None:
            raise RuntimeError(f"the Raft driver of node {self.driver.node_id} is not started")
        return node

    def start(self) -> None:
        self._tasks.append(asyncio.create_task(self._session_loop(), name="controller-sessions"))
        self._tasks.append(asyncio.create_task(self._recovery_loop(), name="controller-unclean-recovery"))
        if self.rebalance_interval_s is not None:
            rebalance = self._rebalance_loop(self.rebalance_interval_s)
            self._tasks.append(asyncio.create_task(rebalance, name="controller-leader-rebalance"))

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        await self.inspector.close()

    def _leader_changed(self, leader: LeaderAndEpoch) -> None:
        if leader.role is Role.LEADER:
            # The epoch's first entry was appended with this change; everything up to it must be applied first.
            self._epoch_start = self._raft.log.end_offset
            self._maybe_activate()
        else:
            self._epoch_start = None
            self._active.clear()

    def _maybe_activate(self) -> None:
        if self._epoch_start is None or self._active.is_set():
            return
        if self._raft.high_watermark >= self._epoch_start:
            self.lifecycle.became_active(self.sm.image, now_ms())
            self._active.set()
            logger.info("node %d is the active controller (epoch %d)", self.driver.node_id, self._raft.epoch)

    async def wait_active(self, timeout: float) -> None:
        """Wait briefly for a just-elected leader to catch up; raise NotControllerError if this is not it."""
        if self._active.is_set():
            return
        if self.driver.leader.role is not Role.LEADER:
            raise NotControllerError(self.driver.leader.leader_id)
        try:
            async with asyncio.timeout(timeout):
                await self._active.wait()
        except TimeoutError:
            raise NotControllerError(self.driver.leader.leader_id) from None

    async def write(
        self, decide: Callable[[MetadataImage, int], tuple[list[md.MetadataRecord], T]], timeout: float = 10.0
    ) -> T:
        """Decide records from the current image (and the next log offset) and commit them; return the result."""
        await self.wait_active(timeout)
        async with self._lock:
            if not self._active.is_set():
                raise NotControllerError(self.driver.leader.leader_id)
            records, result = decide(self.sm.image, self._raft.log.end_offset)
            if records:
                try:
                    await self.driver.propose_and_wait([encode_batch(records)], timeout)
                except NotLeaderError as e:
                    raise NotControllerError(e.leader_id) from None
                except TimeoutError:
                    raise OdradekError("metadata commit timed out", code=ErrorCode.REQUEST_TIMED_OUT) from None
            return result

    async def _periodic(self, interval_s: float, what: str, decide: Callable[[MetadataImage, int], list]) -> None:
        """Every ``interval_s``, while active, commit what ``decide`` returns for the current image."""
        while True:
            await asyncio.sleep(interval_s)
            if not self._active.is_set():
                continue
            try:
                await self.write(lambda image, offset: (decide(image, offset), None), 5.0)
            except OdradekError as e:
                logger.debug("%s skipped: %s", what, e)
            except Exception:
                logger.exception("%s failed", what)

    async def _session_loop(self) -> None:
        await self._periodic(
            self.session_check_ms / 1000,
            "session check",
            lambda image, offset: self.lifecycle.expire_sessions(image, now_ms(), offset),
        )

    async def _rebalance_loop(self, interval_s: float) -> None:
        def decide(image: MetadataImage, _offset: int) -> list[md.MetadataRecord]:
            records = rebalance_leaders(image, self.imbalance_percentage)
            if records:
                logger.info("leader rebalance: electing preferred leaders for %d partitions", len(records))
            return records

        await self._periodic(interval_s, "leader rebalance", decide)

    async def recover(self, inspections: list[Inspection], every: bool = True) -> list[Recovery]:
        """Compare the inspected replicas' logs and elect the most complete where the answers allow it."""
        if not inspections:
            return []
        answers = await self.inspector.inspect(self.sm.image, inspections)

        def decide(image: MetadataImage, _offset: int) -> tuple[list[md.MetadataRecord], list[Recovery]]:
            done = recoveries(image, inspections, answers, self.lifecycle.min_isr, every)
            return [md.MetadataRecord(partition_change=r.record) for r in done], done

        done = await self.write(decide, 5.0)
        for r in done:
            logger.warning("%s", r.describe())
        return done

    async def _recovery_loop(self) -> None:
        while True:
            await asyncio.sleep(self.recovery_interval_s)
            if not self._active.is_set():
                continue
            try:
                due = balanced_inspections(self.sm.image, self.recovery_strategy, self.lifecycle.unclean_allowed)
                await self.recover(due)
            except OdradekError as e:
                logger.debug("unclean recovery skipped: %s", e)
            except Exception:
                logger.exception("unclean recovery failed")

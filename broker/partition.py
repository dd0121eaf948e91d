"""One partition replica on this broker: its log, its role and leader epoch, and the offsets readers may see.

A leader appends producer batches stamped with its leader epoch and exposes records below the high watermark.
Until followers replicate (the replication issue), the ISR of a partition this broker leads is the leader
alone as far as the data path is concerned, so the high watermark follows the leader's log end offset.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from odradek.broker.log.log import AppendInfo, FetchData, Log
from odradek.client.errors import ErrorCode, NotLeaderOrFollowerError, OdradekError


class FencedLeaderEpochError(OdradekError):
    code = ErrorCode.FENCED_LEADER_EPOCH


class UnknownLeaderEpochError(OdradekError):
    code = ErrorCode.UNKNOWN_LEADER_EPOCH


@dataclass(frozen=True, slots=True)
class LeaderHint:
    leader_id: int
    leader_epoch: int


class Partition:
    def __init__(self, topic: str, partition: int, log: Log, broker_id: int) -> None:
        self.topic = topic
        self.partition = partition
        self.log = log
        self.broker_id = broker_id
        self.leader_id = -1
        self.leader_epoch = -1
        self.partition_epoch = -1
        self.replicas: tuple[int, ...] = ()
        self.isr: tuple[int, ...] = ()
        # Futures of parked fetches (the fetch purgatory), completed when new data becomes visible.
        self._waiters: list[asyncio.Future] = []

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.broker_id

    def hint(self) -> LeaderHint:
        return LeaderHint(self.leader_id, self.leader_epoch)

    def update(self, leader: int, leader_epoch: int, partition_epoch: int, replicas, isr) -> None:
        """Apply the partition's state from the metadata image (leader epochs only move forward)."""
        if leader_epoch < self.leader_epoch:
            return
        self.leader_id = leader
        self.leader_epoch = leader_epoch
        self.partition_epoch = partition_epoch
        self.replicas = tuple(replicas)
        self.isr = tuple(isr)
        if self.is_leader:
            self.log.high_watermark = self.log.log_end_offset

    def check_leader(self, client_epoch: int = -1) -> None:
        """Raise the typed error a client must see when this replica cannot serve as leader at its epoch."""
        if client_epoch >= 0:
            if client_epoch < self.leader_epoch:
                raise FencedLeaderEpochError(f"leader epoch {client_epoch} is older than {self.leader_epoch}")
            if client_epoch > self.leader_epoch:
                raise UnknownLeaderEpochError(f"leader epoch {client_epoch} is newer than {self.leader_epoch}")
        if not self.is_leader:
            raise NotLeaderOrFollowerError(f"broker {self.broker_id} does not lead {self.topic}-{self.partition}")

    def append_as_leader(self, records: bytes, max_message_bytes: int) -> AppendInfo:
        self.check_leader()
        info = self.log.append_as_leader(records, self.leader_epoch, max_message_bytes)
        self.log.high_watermark = self.log.log_end_offset
        self._wake()
        return info

    def read(self, offset: int, max_bytes: int, client_epoch: int = -1) -> FetchData:
        self.check_leader(client_epoch)
        return self.log.read(offset, max_bytes, max_offset=self.log.high_watermark)

    def add_waiter(self, future: asyncio.Future) -> None:
        self._waiters.append(future)

    def remove_waiter(self, future: asyncio.Future) -> None:
        if future in self._waiters:
            self._waiters.remove(future)

    @property
    def waiter_count(self) -> int:
        return len(self._waiters)

    def _wake(self) -> None:
        waiters, self._waiters = self._waiters, []
        for future in waiters:
            if not future.done():
                future.set_result(None)

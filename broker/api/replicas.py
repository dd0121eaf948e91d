"""What a broker does to its own replicas on request, whatever the listener: DeleteRecords (advance a partition's
log start as its leader), DescribeLogDirs and AlterReplicaLogDirs (this broker's log dirs), and the replica log
information the controller's unclean recovery asks for.

The gRPC servicer (``BrokerService``) and the Kafka listener's handlers call it with typed requests and the
caller's ``RequestContext``, and translate its answers.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from odradek.broker import delete_records, describe_log_dirs
from odradek.broker.api.data import LeaderHint
from odradek.broker.describe_log_dirs import LogDirsAnswer
from odradek.broker.log_dir_moves import LogDirMoves
from odradek.broker.partition import LowWatermark
from odradek.broker.replica_manager import ReplicaManager
from odradek.client.common.access import OPEN, AccessControl, denial
from odradek.client.common.acls import AclOperation, ResourceType
from odradek.client.common.metadata_image import MetadataImage
from odradek.client.common.request_context import RequestContext
from odradek.client.errors import ErrorCode, OdradekError

DEFAULT_DELETE_TIMEOUT_MS = 30_000


@dataclass(frozen=True, slots=True)
class DeleteRecordsRequest:
    """Each topic's (partition, offset to delete below) pairs."""

    topics: Sequence[tuple[str, Sequence[tuple[int, int]]]]
    timeout_ms: int  # 0 or less: DEFAULT_DELETE_TIMEOUT_MS


@dataclass(slots=True)
class DeletedRecords:
    """One partition's answer: its new log start (``low_watermark``), or the error and where its leader is."""

    partition: int
    low_watermark: int = -1
    error: int = ErrorCode.NONE
    error_message: str = ""
    leader: LeaderHint | None = None


@dataclass(frozen=True, slots=True)
class ReplicaLogInfo:
    """A replica's last leader epoch and log end offset (or the error), for the controller's unclean recovery."""

    partition: int
    last_leader_epoch: int = -1
    log_end_offset: int = -1
    error: int = ErrorCode.NONE


@dataclass(frozen=True, slots=True)
class ReplicaLogInfoAnswer:
    broker_epoch: int = -1  # which incarnation of this broker answered
    topics: tuple[tuple[str, tuple[ReplicaLogInfo, ...]], ...] = ()
    error: int = ErrorCode.NONE


class ReplicaService:
    def __init__(
        self,
        broker_id: int,
        replicas: ReplicaManager,
        image: Callable[[], MetadataImage],
        leader_hint: Callable[[str, int], LeaderHint | None],
        access: AccessControl = OPEN,
        uncleanable: Callable[[], Mapping[tuple[str, int], str]] = dict,
        log_dir_moves: LogDirMoves | None = None,
    ) -> None:
        self.broker_id = broker_id
        self.replicas = replicas
        self._image = image
        self._leader_hint = leader_hint
        self.access = access
        # The log cleaner's uncleanable partitions and why (DescribeLogDirs reports them).
        self.uncleanable = uncleanable
        # Replicas moving between this broker's log dirs (AlterReplicaLogDirs); the broker passes its own.
        self._log_dir_moves = log_dir_moves

    def _cluster_allowed(self, ctx: RequestContext, operation: AclOperation, api: str) -> bool:
        return not self.access.enabled or self.access.allows_cluster(ctx.caller, operation, api=api)

    # ---- DeleteRecords ----

    async def delete_records(
        self, request: DeleteRecordsRequest, ctx: RequestContext
    ) -> list[tuple[str, list[DeletedRecords]]]:
        """Advance each partition's log start offset as its leader (``kafka-delete-records``; topic Delete
        needed), then answer once every ISR replica's log starts there too (or REQUEST_TIMED_OUT after
        ``timeout_ms``); the new log start is written to the log-start checkpoint first, so it survives a crash of
        this broker."""
        denied = self._topic_denials(ctx, (name for name, _ in request.topics))
        answer: list[tuple[str, list[DeletedRecords]]] = []
        waits: list[tuple[DeletedRecords, asyncio.Future[LowWatermark]]] = []
        for name, parts in request.topics:
            results: list[DeletedRecords] = []
            answer.append((name, results))
            for index, offset in parts:
                r = DeletedRecords(index)
                results.append(r)
                try:
                    if name in denied:
                        raise denied[name]
                    delete_records.check_topic(name, self.replicas.cleanup_policy(name))
                    partition = self.replicas.get(name, index)
                    target = partition.delete_records(offset)
                except OdradekError as e:
                    r.error, r.error_message = e.code, str(e)
                    if e.code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH):
                        r.leader = self._leader_hint(name, index)
                    continue
                waits.append((r, partition.wait_for_low_watermark(target)))
        if waits:
            await asyncio.to_thread(self.replicas.logs.checkpoint_log_start_offsets)
            timeout_ms = request.timeout_ms if request.timeout_ms > 0 else DEFAULT_DELETE_TIMEOUT_MS
            await asyncio.wait([f for _, f in waits], timeout=timeout_ms / 1000)
            for r, future in waits:
                if not future.done():
                    future.cancel()
                    r.error = ErrorCode.REQUEST_TIMED_OUT
                    r.error_message = "not every in-sync replica reached the new log start offset in time"
                elif (done := future.result()).error != ErrorCode.NONE:
                    r.error = done.error
                else:
                    r.low_watermark = done.low_watermark
        return answer

    def _topic_denials(self, ctx: RequestContext, names: Iterable[str]) -> dict[str, OdradekError]:
        if not self.access.enabled:
            return {}
        caller = ctx.caller
        denied = self.access.denied(caller, AclOperation.DELETE, ResourceType.TOPIC, names, api="DeleteRecords")
        return {name: denial(caller, AclOperation.DELETE, ResourceType.TOPIC, name) for name in denied}

    # ---- Log dirs ----

    async def describe_log_dirs(self, topics: Sequence[str], ctx: RequestContext) -> LogDirsAnswer:
        """Each log dir's state and disk figures and the replicas of ``topics`` it holds (every topic when empty;
        cluster Describe needed)."""
        if not self._cluster_allowed(ctx, AclOperation.DESCRIBE, "DescribeLogDirs"):
            return LogDirsAnswer(self.broker_id, error=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        return await describe_log_dirs.answer(self.broker_id, self.replicas, topics, self.uncleanable())

    @property
    def log_dir_moves(self) -> LogDirMoves:
        """The broker's mover, or one made on first use (a service built on stand-in replicas never asks)."""
        if self._log_dir_moves is None:
            self._log_dir_moves = LogDirMoves(self.replicas)
        return self._log_dir_moves

    def alter_replica_log_dirs(
        self, destinations: Mapping[tuple[str, int], str], ctx: RequestContext
    ) -> tuple[int, dict[tuple[str, int], int]]:
        """Move replicas between this broker's log dirs (cluster Alter, as Kafka requires): the request's error
        and each partition's, saying whether its move started (or it is there already); the move itself runs in
        the background."""
        if not self._cluster_allowed(ctx, AclOperation.ALTER, "AlterReplicaLogDirs"):
            error = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
            return error, dict.fromkeys(destinations, error)
        return ErrorCode.NONE, dict(self.log_dir_moves.alter(destinations))

    # ---- Unclean recovery ----

    def replica_log_info(
        self, broker_id: int, topics: Sequence[tuple[str, bytes, Sequence[int]]], ctx: RequestContext
    ) -> ReplicaLogInfoAnswer:
        """Each replica's last leader epoch and log end offset, for the controller to elect the most complete log
        of a partition that no replica is known to hold entirely (cluster ClusterAction needed). ``topics``: (name,
        topic id, partitions). The broker epoch says which incarnation answered: one that restarts before the
        election may have lost what it reported."""
        if not self._cluster_allowed(ctx, AclOperation.CLUSTER_ACTION, "GetReplicaLogInfo"):
            return ReplicaLogInfoAnswer(error=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        epoch = self.replicas.registered_epoch()
        if broker_id != self.broker_id:
            return ReplicaLogInfoAnswer(error=ErrorCode.INVALID_REQUEST)
        if epoch < 0:
            return ReplicaLogInfoAnswer(error=ErrorCode.STALE_BROKER_EPOCH)
        image = self._image()
        return ReplicaLogInfoAnswer(
            epoch,
            tuple(
                (name, tuple(self._log_info(name, index, image.topic_ids.get(name) == topic_id) for index in parts))
                for name, topic_id, parts in topics
            ),
        )

    def _log_info(self, topic: str, index: int, known: bool) -> ReplicaLogInfo:
        p = self.replicas.partitions.get((topic, index)) if known else None
        if p is None:
            return ReplicaLogInfo(index, error=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        if (topic, index) in self.replicas.offline or p.log.offline:
            return ReplicaLogInfo(index, error=ErrorCode.KAFKA_STORAGE_ERROR)
        try:
            last_epoch, end = p.log.latest_epoch, p.log.log_end_offset
        except OdradekError as e:
            return ReplicaLogInfo(index, error=e.code)
        return ReplicaLogInfo(index, -1 if last_epoch is None else last_epoch, end)

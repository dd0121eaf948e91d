"""The consumer's side of a group (Kafka's ConsumerCoordinator): finding the coordinator, joining and syncing,
the leader's assignment, heartbeats, leaving, and committed offsets.

The decisions are pure functions (membership.py, rebalance.py); this is the asyncio shell around them. It never
calls the application: ``next_step`` does the network work of a rebalance up to the point where listener
callbacks are due and returns them as a ``RebalanceStep``; the consumer runs the callbacks on the caller's
thread or task (as Kafka runs them inside poll()) and then hands the step back to ``apply``. So a listener can
commit, seek or look up positions from its callbacks without deadlocking the client loop.

A background task heartbeats every heartbeat.interval.ms while the member is in a stable generation, and enforces
max.poll.interval.ms: if the application has not polled in time, a dynamic member sends LeaveGroup (a static one
does not, as in Kafka: its session simply expires), forgets its generation, and its next commit raises
CommitFailedError; the next poll() rejoins, reporting the partitions as lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from collections.abc import Awaitable, Iterable, Mapping
from typing import TYPE_CHECKING, Protocol, TypeVar

import grpc

from odradek.client.config import ConsumerConfig
from odradek.client.connection import ChannelPool
from odradek.client.consumer.assignors import get_assignors
from odradek.client.consumer.assignors.base import Assignor
from odradek.client.consumer.membership import (
    Action,
    JoinedMember,
    commit_refusal,
    error_action,
    heartbeat_due,
    leader_assignments,
    metadata_rejoin_needed,
    poll_expired,
    subscribed_topics,
)
from odradek.client.consumer.protocol import NO_GENERATION, PROTOCOL_TYPE, Assignment, Subscription
from odradek.client.consumer.rebalance import RebalanceStep, choose_protocol, complete_join, lose_all, prepare_join
from odradek.client.consumer.rebalance import prepare_leave as _prepare_leave
from odradek.client.errors import (
    CommitFailedError,
    CoordinatorNotAvailableError,
    ErrorCode,
    FencedInstanceIdError,
    OdradekError,
    error_for_code,
)
from odradek.client.group_requests import commit_topics, partitions_by_topic
from odradek.client.metadata import Metadata, rpc_error
from odradek.client.structs import GroupMetadata, OffsetAndMetadata, TopicPartition
from odradek.proto import group_pb2 as gpb
from odradek.proto import group_pb2_grpc

if TYPE_CHECKING:
    from odradek.proto.group_pb2_grpc import GroupCoordinatorAsyncStub

logger = logging.getLogger(__name__)

Req = TypeVar("Req")
Resp = TypeVar("Resp")
ReqC = TypeVar("ReqC", contravariant=True)
RespC = TypeVar("RespC", covariant=True)
JOIN_EXTRA_S = 5.0  # JoinGroup waits up to the rebalance timeout; give the RPC this much more (as Kafka)


def _name(code: int) -> str:
    return ErrorCode.Name(ErrorCode.ValueType(code))


class _Unary(Protocol[ReqC, RespC]):
    def __call__(self, request: ReqC, *, timeout: float) -> Awaitable[RespC]: ...


class _Retry(Exception):
    """A join attempt ended without a fatal error: the next poll tries again after retry.backoff.ms."""


class ConsumerCoordinator:
    """Created on the consumer's event loop when group.id is set; group membership starts with ``subscribe``."""

    def __init__(self, config: ConsumerConfig, metadata: Metadata, pool: ChannelPool) -> None:
        assert config.group_id is not None
        self.group_id: str = config.group_id
        self.instance_id = config.group_instance_id
        self._client_id = config.client_id
        self._metadata = metadata
        self._pool = pool
        self._timeout = config.request_timeout_ms / 1000
        self._backoff = config.retry_backoff_ms / 1000
        self._session_timeout_ms = config.session_timeout_ms
        self._rebalance_timeout_ms = config.max_poll_interval_ms
        self._heartbeat_interval = config.heartbeat_interval_ms / 1000
        self._max_poll_interval = config.max_poll_interval_ms / 1000
        # KIP-447: a read_committed consumer asks only for stable offsets. A committed transaction whose offsets are
        # not yet written to the group (its markers still on their way) answers UNSTABLE_OFFSET_COMMIT, retried,
        # instead of the offset before it: a consumer that took the partition over then would copy that
        # transaction's input a second time (as Kafka's consumer, requireStable follows isolation.level).
        self._require_stable = config.isolation_level == "read_committed"
        self._assignors: list[Assignor] = get_assignors(config.partition_assignment_strategy)
        self.protocol = choose_protocol(self._assignors)
        self.generation = NO_GENERATION
        self.member_id = ""
        self.protocol_name: str | None = None
        self._subscription: frozenset[str] | re.Pattern[str] | None = None
        # The topics of the subscription the member joined with: those its JoinGroup named, not those its metadata
        # shows when the join completes (topics learned meanwhile need another join, as in Kafka).
        self._joined_topics: frozenset[str] = frozenset()
        self._joining_topics: frozenset[str] = frozenset()
        # The leader's partition count of each subscribed topic it assigned from (None: not in its metadata then);
        # None on other members.
        self._joined_counts: dict[str, int | None] | None = None
        self.owned: frozenset[TopicPartition] = frozenset()
        self._stable = False
        self._rejoin_needed = False
        self._join_prepared = False
        self._join_task: asyncio.Task[Assignment] | None = None
        self._retry_at = 0.0
        self._left_reason: str | None = None
        self._fatal: OdradekError | None = None
        self._coordinator: GroupCoordinatorAsyncStub | None = None
        self._coordinator_address: str | None = None
        self.last_poll = time.monotonic()
        self._last_heartbeat = 0.0
        self._heartbeat_wake = asyncio.Event()
        self._heartbeat_task = asyncio.get_running_loop().create_task(self._heartbeat_loop())

    # ---- state the consumer reads ----

    @property
    def subscribed(self) -> bool:
        return self._subscription is not None

    def group_metadata(self) -> GroupMetadata:
        return GroupMetadata(self.group_id, self.generation, self.member_id, self.instance_id)

    def subscription(self) -> set[str]:
        return set(self._current_topics())

    def needs_attention(self) -> bool:
        """Whether poll() must go through ``next_step`` (cheap; readable from the caller's thread)."""
        if self._fatal is not None:
            return True
        if self._subscription is None:
            return False
        return self._rejoin_needed or self._join_task is not None or self._topics_changed()

    # ---- subscription ----

    def subscribe(self, subscription: Iterable[str] | re.Pattern[str]) -> None:
        if isinstance(subscription, re.Pattern):
            self._subscription = subscription
            self._metadata.want_all_topics()
        else:
            topics = frozenset(subscription)
            self._subscription = topics
            self._metadata.add_topics(topics)
        self._rejoin_needed = True

    def unsubscribe_step(self) -> RebalanceStep:
        """The callbacks before leaving on unsubscribe (revoked, or lost if the generation is gone)."""
        return _prepare_leave(self.owned, generation_valid=self._stable, rebalance_in_progress=self._rebalancing)

    async def unsubscribe(self) -> None:
        """After the callbacks: leave the group (dynamic members) and forget the subscription."""
        self._subscription = None
        self._rejoin_needed = False
        self._join_prepared = False
        await self._cancel_join()
        await self.leave("the consumer unsubscribed from all topics")
        self.owned = frozenset()

    def _current_topics(self) -> frozenset[str]:
        if self._subscription is None:
            return frozenset()
        return subscribed_topics(self._subscription, self._metadata.partition_counts)

    def _topics_changed(self) -> bool:
        """A pattern now matches other topics, or (leader) a subscribed topic's partition count changed: rejoin,
        as Kafka's coordinator does on metadata changes."""
        if not self._stable:
            return False
        return metadata_rejoin_needed(
            self._current_topics(), self._joined_topics, self._metadata.partition_counts, self._joined_counts
        )

    @property
    def _rebalancing(self) -> bool:
        return self._join_task is not None

    # ---- the rebalance, driven from poll() ----

    def polled(self) -> None:
        """The application called poll(): restart the max.poll.interval.ms clock."""
        self.last_poll = time.monotonic()

    async def next_step(self, timeout: float) -> RebalanceStep | None:
        """Advance the rebalance for up to ``timeout`` seconds. Returns the next step whose callbacks are due (the
        consumer runs them, then calls ``apply``), or None when there is nothing more to do in this poll."""
        if self._fatal is not None:
            raise self._fatal
        if self._subscription is None:
            return None
        if self._join_task is not None:
            return await self._await_join(timeout)
        if self._topics_changed():
            self._rejoin_needed = True
        if not self._rejoin_needed:
            return None
        if not self._join_prepared:
            self._join_prepared = True
            step = prepare_join(self.protocol, self.owned, self._current_topics(), self.generation != NO_GENERATION)
            if step.callbacks():
                return step
        if time.monotonic() < self._retry_at:
            return None
        self._stable = False
        self._join_task = asyncio.get_running_loop().create_task(self._join_and_sync())
        return await self._await_join(timeout)

    async def _await_join(self, timeout: float) -> RebalanceStep | None:
        task = self._join_task
        assert task is not None
        await asyncio.wait({task}, timeout=max(0.0, timeout))  # its outcome, even an exception, is read below
        if not task.done():
            return None
        self._join_task = None
        try:
            assignment = task.result()
        except _Retry:
            self._retry_at = time.monotonic() + self._backoff
            if self.generation == NO_GENERATION and self.owned:
                self._join_prepared = False  # the partitions are lost: report them before the next attempt
            return None
        except OdradekError as e:
            self._fatal = e
            raise
        topics = self._current_topics()
        step = complete_join(self.protocol, self.owned, assignment, topics)
        self._stable = True
        self._left_reason = None
        self._join_prepared = False
        self._rejoin_needed = step.needs_rejoin
        self._joined_topics = self._joining_topics
        self._last_heartbeat = time.monotonic()
        self._heartbeat_wake.set()
        return step

    def apply(self, step: RebalanceStep) -> frozenset[TopicPartition]:
        """After the step's revoked/lost callbacks: the member now owns ``step.owned``. Returns the newly owned
        partitions (those that need a committed position)."""
        new = step.owned - self.owned
        self.owned = step.owned
        return new

    def lose_all(self) -> RebalanceStep:
        return lose_all(self.owned)

    async def _join_and_sync(self) -> Assignment:
        stub = await self._find_coordinator()
        topics = self._joining_topics = self._current_topics()
        assignor_by_name = {a.name: a for a in self._assignors}
        join = None
        for _ in range(3):  # a first join is answered MEMBER_ID_REQUIRED once, then accepted or refused
            subscription = Subscription(
                tuple(sorted(topics)),
                owned_partitions=tuple(self.owned) if self.protocol == "cooperative" else (),
                generation_id=self.generation,
            )
            request = gpb.JoinGroupRequest(
                group_id=self.group_id,
                session_timeout_ms=self._session_timeout_ms,
                rebalance_timeout_ms=self._rebalance_timeout_ms,
                member_id=self.member_id,
                group_instance_id=self.instance_id,
                protocol_type=PROTOCOL_TYPE,
                protocols=[
                    gpb.JoinGroupProtocol(
                        name=a.name,
                        metadata=Subscription(
                            subscription.topics,
                            a.subscription_user_data(self.generation),
                            subscription.owned_partitions,
                            subscription.generation_id,
                        ).encode(),
                    )
                    for a in self._assignors
                ],
                client_id=self._client_id,
            )
            response = await self._call(stub.JoinGroup, request, self._rebalance_timeout_ms / 1000 + JOIN_EXTRA_S)
            if response.error == ErrorCode.MEMBER_ID_REQUIRED:
                self.member_id = response.member_id
                continue
            self._check(response.error, "JoinGroup")
            join = response
            break
        if join is None:
            raise _Retry()
        self.generation = join.generation_id
        self.member_id = join.member_id
        self.protocol_name = join.protocol_name
        assignments: dict[str, bytes] = {}
        if join.leader == join.member_id and not join.skip_assignment:
            assignor = assignor_by_name.get(join.protocol_name)
            if assignor is None:
                raise error_for_code(
                    ErrorCode.INCONSISTENT_GROUP_PROTOCOL, f"the group chose unknown assignor {join.protocol_name!r}"
                )
            members = [
                JoinedMember(m.member_id, m.group_instance_id if m.HasField("group_instance_id") else None, m.metadata)
                for m in join.members
            ]
            wanted = {t for m in members for t in Subscription.decode(m.metadata).topics}
            self._metadata.add_topics(wanted)
            counts = await self._partition_counts(wanted)
            assignments = leader_assignments(assignor, counts, members)
            self._joined_counts = {t: counts.get(t) for t in wanted}
        else:
            self._joined_counts = None
        sync = await self._call(
            stub.SyncGroup,
            gpb.SyncGroupRequest(
                group_id=self.group_id,
                generation_id=self.generation,
                member_id=self.member_id,
                group_instance_id=self.instance_id,
                protocol_type=PROTOCOL_TYPE,
                protocol_name=join.protocol_name,
                assignments=[gpb.SyncGroupAssignment(member_id=m, assignment=a) for m, a in assignments.items()],
            ),
            self._timeout,
        )
        self._check(sync.error, "SyncGroup")
        return Assignment.decode(sync.assignment) if sync.assignment else Assignment(())

    async def _partition_counts(self, topics: set[str]) -> dict[str, int]:
        """Partition counts for the leader's assignment; a topic metadata does not know is skipped (as Kafka)."""
        with contextlib.suppress(OdradekError):
            await self._metadata.refresh()
        counts = self._metadata.partition_counts
        return {t: counts[t] for t in topics if t in counts}

    def _check(self, code: int, rpc: str) -> None:
        """Apply a group response's error to the member's state; raise _Retry or the fatal error."""
        action = error_action(code)
        if action is Action.OK:
            return
        logger.info("group %s: %s answered %s", self.group_id, rpc, _name(code))
        self._apply_action(action, code, rpc)
        if action is Action.FATAL:
            raise self._fatal_error(code, rpc)
        raise _Retry()

    def _apply_action(self, action: Action, code: int, why: str) -> None:
        if action is Action.FIND_COORDINATOR:
            self._coordinator = None
        elif action is Action.REJOIN:
            self._rejoin_needed = True
        elif action in (Action.RESET_GENERATION, Action.RESET_MEMBER):
            self._reset(member=action is Action.RESET_MEMBER, reason=f"{why}: {_name(code)}")
        elif action is Action.FATAL:
            self._fatal = self._fatal_error(code, why)

    def _fatal_error(self, code: int, why: str) -> OdradekError:
        if code == ErrorCode.FENCED_INSTANCE_ID:
            return FencedInstanceIdError(
                f"{why}: another consumer joined group {self.group_id!r} with group.instance.id {self.instance_id!r}"
            )
        return error_for_code(code, f"{why} in group {self.group_id!r}: {_name(code)}")

    def _reset(self, member: bool, reason: str) -> None:
        """The generation is gone (and the member id with it if ``member``): the owned partitions are lost and the
        member rejoins at the next poll."""
        self.generation = NO_GENERATION
        if member:
            self.member_id = ""
        self._stable = False
        self._left_reason = reason
        self._rejoin_needed = True
        self._join_prepared = False

    async def _cancel_join(self) -> None:
        task, self._join_task = self._join_task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    # ---- the coordinator's address ----

    async def _find_coordinator(self) -> GroupCoordinatorAsyncStub:
        """Ask any broker where the group's coordinator is; raise _Retry if no broker can say now."""
        if self._coordinator is not None:
            return self._coordinator
        candidates = self._metadata.nodes()
        request = gpb.FindCoordinatorRequest(key_type=gpb.GROUP, keys=[self.group_id])
        for address in candidates:
            stub: GroupCoordinatorAsyncStub = group_pb2_grpc.GroupCoordinatorStub(self._pool.get(address))
            try:
                response = await stub.FindCoordinator(request, timeout=self._timeout)
            except grpc.aio.AioRpcError as e:
                logger.debug("FindCoordinator to %s failed: %s", address, rpc_error(address, e))
                continue
            for found in response.coordinators:
                if found.key != self.group_id:
                    continue
                action = error_action(found.error)
                if action is Action.FATAL:
                    self._fatal = self._fatal_error(found.error, "FindCoordinator")
                    raise self._fatal
                if action is Action.OK:
                    self._coordinator_address = f"{found.host}:{found.port}"
                    self._coordinator = group_pb2_grpc.GroupCoordinatorStub(self._pool.get(self._coordinator_address))
                    return self._coordinator
            break  # the broker answered: the coordinator is not available yet; retry after the backoff
        raise _Retry()

    async def _call(self, method: _Unary[Req, Resp], request: Req, timeout: float) -> Resp:
        """One RPC to the coordinator; a failed connection makes the member look for the coordinator again."""
        try:
            return await method(request, timeout=timeout)
        except grpc.aio.AioRpcError as e:
            logger.debug("group %s: coordinator unreachable: %s", self.group_id, e.code().name)
            self._coordinator = None
            raise _Retry() from None

    # ---- heartbeats and max.poll.interval.ms ----

    async def _heartbeat_loop(self) -> None:
        while True:
            self._heartbeat_wake.clear()
            now = time.monotonic()
            wait = self._heartbeat_interval
            if self._stable and self._fatal is None:
                if poll_expired(self.last_poll, now, self._max_poll_interval):
                    await self._leave_on_poll_timeout()
                    continue
                wait = heartbeat_due(self._last_heartbeat, now, self._heartbeat_interval)
                if wait <= 0:
                    self._last_heartbeat = now
                    await self._heartbeat()
                    wait = self._heartbeat_interval
                wait = min(wait, max(0.0, self.last_poll + self._max_poll_interval - now) + 0.001)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait):
                    await self._heartbeat_wake.wait()

    async def _heartbeat(self) -> None:
        stub = self._coordinator
        if stub is None:
            try:
                stub = await self._find_coordinator()
            except (_Retry, OdradekError):
                return
        request = gpb.HeartbeatRequest(
            group_id=self.group_id,
            generation_id=self.generation,
            member_id=self.member_id,
            group_instance_id=self.instance_id,
        )
        try:
            response = await self._call(stub.Heartbeat, request, self._timeout)
        except _Retry:
            return
        if not self._stable:  # a rebalance or a reset started while the heartbeat was in flight
            return
        action = error_action(response.error)
        if action not in (Action.OK, Action.RETRY):
            logger.info("group %s: heartbeat answered %s", self.group_id, _name(response.error))
            self._apply_action(action, response.error, "Heartbeat")

    async def _leave_on_poll_timeout(self) -> None:
        reason = (
            f"poll() was not called within max.poll.interval.ms ({self._max_poll_interval * 1000:.0f} ms); "
            "processing records took too long"
        )
        logger.warning("group %s: member %s leaves the group: %s", self.group_id, self.member_id, reason)
        await self.leave(reason)
        self._reset(member=True, reason=reason)

    async def leave(self, reason: str, send: bool | None = None) -> None:
        """Leave the group now. By default (``send`` None) a static member sends nothing (its session expires, or
        its restart reclaims its place), as Kafka, and a dynamic member sends LeaveGroup so its partitions move at
        once; ``send`` True sends it for a static member too (named by its instance id, so it is removed), False
        sends nothing for either."""
        member_id = self.member_id
        self._stable = False
        self.generation = NO_GENERATION  # before sending: once the coordinator has the leave, this member is gone
        self.member_id = ""
        if send is None:
            send = self.instance_id is None
        if send and member_id:
            try:
                stub = await self._find_coordinator()
                leaving = gpb.LeavingMember(member_id=member_id, group_instance_id=self.instance_id, reason=reason)
                request = gpb.LeaveGroupRequest(group_id=self.group_id, members=[leaving])
                response = await self._call(stub.LeaveGroup, request, self._timeout)
                if response.error != ErrorCode.NONE:
                    logger.info("group %s: LeaveGroup answered %s", self.group_id, _name(response.error))
            except (_Retry, OdradekError) as e:
                logger.info("group %s: LeaveGroup failed: %s", self.group_id, e)

    # ---- committed offsets ----

    def commit_refusal(self) -> CommitFailedError | None:
        return commit_refusal(self.subscribed, self._stable, self._rebalancing, self._left_reason)

    async def commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        """OffsetCommit, retried through coordinator moves until request.timeout.ms. A group member commits in its
        generation; a consumer using ``assign`` sends a simple commit (generation -1, no member id)."""
        if not offsets:
            return
        refusal = self.commit_refusal()
        if refusal is not None:
            raise refusal
        group_managed = self.subscribed
        topics = commit_topics(offsets)
        deadline = time.monotonic() + self._timeout
        while True:
            request = gpb.OffsetCommitRequest(
                group_id=self.group_id,
                generation_id=self.generation if group_managed else NO_GENERATION,
                member_id=self.member_id if group_managed else "",
                group_instance_id=self.instance_id if group_managed else None,
                topics=topics,
            )
            try:
                stub = await self._find_coordinator()
                response = await self._call(stub.OffsetCommit, request, self._timeout)
                code = next(
                    (p.error for t in response.topics for p in t.partitions if p.error != ErrorCode.NONE),
                    ErrorCode.NONE,
                )
                action = error_action(code)
                if action is Action.OK:
                    return
                if action in (Action.RETRY, Action.FIND_COORDINATOR):
                    self._apply_action(action, code, "OffsetCommit")
                    raise _Retry()
            except _Retry:
                if self._fatal is not None:
                    raise self._fatal from None
                if time.monotonic() + self._backoff >= deadline:
                    raise CoordinatorNotAvailableError(
                        f"group {self.group_id!r}: commit not acknowledged within request.timeout.ms"
                    ) from None
                await asyncio.sleep(self._backoff)
                continue
            if group_managed and action in (Action.REJOIN, Action.RESET_GENERATION, Action.RESET_MEMBER):
                self._apply_action(action, code, "OffsetCommit")
                raise CommitFailedError(
                    f"commit refused by group {self.group_id!r}: {_name(code)}; poll() rejoins", code=code
                )
            if action is Action.FATAL and code == ErrorCode.FENCED_INSTANCE_ID:
                self._apply_action(action, code, "OffsetCommit")
            raise self._fatal_error(code, "OffsetCommit")

    async def committed(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """OffsetFetch: each partition's committed position, None where nothing is committed."""
        wanted = sorted(set(partitions))
        if not wanted:
            return {}
        by_topic = partitions_by_topic(wanted)
        request = gpb.OffsetFetchRequest(
            group_id=self.group_id,
            topics=[gpb.OffsetFetchTopic(name=t, partitions=ps) for t, ps in by_topic.items()],
            require_stable=self._require_stable,
        )
        deadline = time.monotonic() + self._timeout
        while True:
            try:
                stub = await self._find_coordinator()
                response = await self._call(stub.OffsetFetch, request, self._timeout)
                codes = [response.error] + [p.error for t in response.topics for p in t.partitions]
                code = next((c for c in codes if c != ErrorCode.NONE), ErrorCode.NONE)
                action = error_action(code)
                if action in (Action.RETRY, Action.FIND_COORDINATOR):
                    self._apply_action(action, code, "OffsetFetch")
                    raise _Retry()
                if action is not Action.OK:
                    raise error_for_code(code, f"OffsetFetch in group {self.group_id!r}: {_name(code)}")
            except _Retry:
                if self._fatal is not None:
                    raise self._fatal from None
                if time.monotonic() + self._backoff >= deadline:
                    raise CoordinatorNotAvailableError(
                        f"group {self.group_id!r}: committed offsets not fetched within request.timeout.ms"
                    ) from None
                await asyncio.sleep(self._backoff)
                continue
            out: dict[TopicPartition, OffsetAndMetadata | None] = dict.fromkeys(wanted)
            for t in response.topics:
                for p in t.partitions:
                    tp = TopicPartition(t.name, p.partition)
                    if tp in out and p.committed_offset >= 0:
                        epoch = p.committed_leader_epoch if p.committed_leader_epoch >= 0 else None
                        out[tp] = OffsetAndMetadata(p.committed_offset, p.metadata, epoch)
            return out

    async def close(self) -> None:
        self._heartbeat_task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._heartbeat_task
        await self._cancel_join()

"""A broker process over the REAL partition code: Partition objects over Logs in a temporary directory.

Per process (incarnation): the metadata it has applied (committed batches reach it late but in order), its
registration and heartbeats, the ISR change sender core (IsrChangeBatcher) with a backoff in sim time, periodic
lag checks and flushes, followers' fetch loops, and produce requests parked until their acks=all commit.
What survives a process is its disk: the log directories and the checkpoints (recovery point, high watermark,
whether the last stop was clean, and the broker epoch it stopped at).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from controller_model import TOPIC, SimController
from world import CONTROLLER, Network, World

from odradek.broker.fetch_response import FetchedPartition, FetchPosition, apply_fetched
from odradek.broker.isr_batcher import IsrChangeBatcher
from odradek.broker.log.config import LogConfig
from odradek.broker.log.log import Log
from odradek.broker.partition import FollowerRead, Partition
from odradek.broker.replication import IsrChange
from odradek.client.common.metadata_image import MetadataDelta, MetadataImage
from odradek.client.errors import ErrorCode, OdradekError
from odradek.controller.isr import isr_items
from odradek.proto import controller_pb2 as cpb

# The codes as module constants: a protobuf enum's attributes go through a Python __getattr__, and the sim's hot
# paths compare them on every message.
_NONE, _REQUEST_TIMED_OUT = ErrorCode.NONE, ErrorCode.REQUEST_TIMED_OUT
_NOT_LEADER_OR_FOLLOWER = ErrorCode.NOT_LEADER_OR_FOLLOWER
_STALE_BROKER_EPOCH, _BROKER_ID_NOT_REGISTERED = ErrorCode.STALE_BROKER_EPOCH, ErrorCode.BROKER_ID_NOT_REGISTERED

if TYPE_CHECKING:
    import asyncio

LOG_CONFIG = LogConfig(segment_bytes=4096, segment_index_bytes=4096, index_interval_bytes=256)
FETCH_MAX_BYTES = 300  # a few batches per fetch, so catching up takes several rounds
FETCH_BACKOFF_MS = 10
PRODUCE_TIMEOUT_MS = 800


@dataclass(frozen=True)
class FetchRequest:
    replica_id: int
    partition: int
    fetch_offset: int
    last_fetched_epoch: int
    leader_epoch: int


@dataclass(frozen=True)
class FetchResponse:
    error: int
    read: FollowerRead | None = None
    log_start_offset: int = -1  # with OFFSET_OUT_OF_RANGE
    log_end_offset: int = -1


def apply_fetch_response(p: Partition, request: FetchRequest, response: FetchResponse) -> str:
    """The ONE place a follower applies a fetch answer: the fetcher's own sans-I/O step (broker/fetch_response.py),
    fed any answer that reaches this process, including a stale one (duplicated, or late after a timeout)."""
    sent = FetchPosition(request.fetch_offset, request.last_fetched_epoch, request.leader_epoch)
    read = response.read
    if response.error == _NONE:
        assert read is not None
        fetched = FetchedPartition(
            _NONE,
            b"" if read.data is None else bytes(read.data.records),
            read.high_watermark,
            read.log_start_offset,
            read.log_end_offset,
            read.diverging,
        )
    else:
        fetched = FetchedPartition(
            response.error, log_start_offset=response.log_start_offset, log_end_offset=response.log_end_offset
        )
    action = apply_fetched(p, sent, fetched)
    return f"{type(action).__name__} -> leo {p.log.log_end_offset}, hw {p.log.high_watermark}"


def incarnation_id(broker_id: int, generation: int) -> bytes:
    return f"b{broker_id}-g{generation}".encode().ljust(16, b".")


@dataclass
class Disk:
    """What survives a process: checkpoints next to the log directories."""

    recovery_point: dict[int, int] = field(default_factory=dict)
    high_watermark: dict[int, int] = field(default_factory=dict)
    clean: bool = False
    last_epoch: int = -1  # broker epoch at the last clean stop, else -1


class Process:
    """One incarnation of a broker."""

    def __init__(self, broker: SimBroker, incarnation: bytes, previous_epoch: int) -> None:
        self.broker = broker
        self.incarnation = incarnation
        self.previous_epoch = previous_epoch
        self.alive = True
        self.epoch = -1
        self.fenced = True
        self.session_renewed = -(10**9)
        self.stopping = False
        self.image = MetadataImage()
        self.published = False  # partition roles taken up (the image reached this incarnation's registration)
        self.applied = 0  # batches applied
        self.scheduled = 0  # batches whose application is scheduled
        self.last_apply_at = 0
        self.partitions: dict[int, Partition] = {}
        self.batcher = IsrChangeBatcher(broker.id)
        self.isr_in_flight: object | None = None
        self.isr_backoff_until = 0
        self.fetching: dict[int, object | None] = {}  # partition -> token of the fetch in flight
        self.produces: list[tuple[asyncio.Future, int, object]] = []  # (future, deadline, reply)


class SimBroker:
    def __init__(
        self, broker_id: int, root: Path, world: World, net: Network, ctl: SimController, schedule, brokers: dict
    ) -> None:
        self.id = broker_id
        self.root = root / f"b{broker_id}"
        self.world = world
        self.net = net
        self.ctl = ctl
        self.s = schedule
        self.brokers = brokers  # id -> SimBroker, for routing requests
        self.disk = Disk()
        self.generation = 0
        self.proc: Process | None = None
        ctl.listeners.append(self._on_commit)

    def log(self, line: str) -> None:
        self.world.log(f"B{self.id}   {line}")

    # -- lifecycle -----------------------------------------------------------------------------------------------

    def start(self, initial: bool = False) -> None:
        self.generation += 1
        incarnation = incarnation_id(self.id, self.generation)
        previous = self.disk.last_epoch if self.disk.clean else -1
        proc = self.proc = Process(self, incarnation, previous)
        self.log(f"START incarnation {self.generation} (previous epoch {previous})")
        if initial:  # registered in the bootstrap metadata
            proc.epoch = self.ctl.broker_epoch(self.id)
            proc.fenced = False
            proc.session_renewed = 0
        self._schedule_metadata(proc, len(self.ctl.batches))
        self.world.after(self.world.rng.randint(0, self.s.heartbeat_ms), f"B{self.id} heartbeat", self._beat(proc))
        self.world.after(self.world.rng.randint(1, self.s.flush_every_ms), f"B{self.id} flush", self._flush(proc))
        self.world.after(self.s.lag_max_ms // 2, f"B{self.id} lag check", self._lag_check(proc))

    def stop(self, how: str) -> None:
        """``clean`` (after controlled shutdown), ``crash`` (unflushed data kept), ``lossy`` (unflushed data lost),
        ``wipe`` (the log directory is gone)."""
        proc = self.proc
        assert proc is not None
        proc.alive = False
        self.proc = None
        for i, p in proc.partitions.items():
            log_ = p.log
            rp = log_.recovery_point
            if how == "lossy" and log_.log_end_offset > rp:
                self.log(f"  p{i}: loses unflushed [{rp}, {log_.log_end_offset})")
                log_.truncate_to(rp)
            if how == "clean":
                self.disk.high_watermark[i] = log_.high_watermark
            p.close()
            log_.close()
            self.disk.recovery_point[i] = log_.log_end_offset if how == "clean" else rp
        self.disk.clean = how == "clean"
        self.disk.last_epoch = proc.epoch if how == "clean" else -1
        if how == "wipe":
            shutil.rmtree(self.root, ignore_errors=True)
            self.disk = Disk()
        self.log(f"STOP ({how})")

    @property
    def running(self) -> bool:
        return self.proc is not None

    def session_valid(self, proc: Process) -> bool:
        return not proc.fenced and self.world.now - proc.session_renewed < self.s.session_timeout_ms

    # -- metadata ------------------------------------------------------------------------------------------------

    def _on_commit(self, count: int) -> None:
        proc = self.proc
        if proc is not None:
            self._schedule_metadata(proc, count)

    def _schedule_metadata(self, proc: Process, count: int) -> None:
        if count <= proc.scheduled:
            return
        proc.scheduled = count
        when = max(proc.last_apply_at, self.world.now + self.world.rng.randint(0, self.s.metadata_delay_ms))
        proc.last_apply_at = when
        self.world.at(when, f"B{self.id} metadata", lambda: self._apply_metadata(proc, count))

    def _apply_metadata(self, proc: Process, count: int) -> None:
        if not proc.alive or count <= proc.applied:
            return
        delta = MetadataDelta(proc.image)
        for b in self.ctl.batches[proc.applied : count]:
            delta.replay_all(b.records)
        last = self.ctl.batches[count - 1]
        delta.set_position(last.first_offset + len(last.records) - 1, 0)
        proc.image = delta.image()
        proc.applied = count
        self.log(f"metadata -> offset {proc.image.offset}")
        self._publish(proc)

    def _publish(self, proc: Process) -> None:
        """As the broker's replica manager: no partition role until the image holds this incarnation's registration."""
        if not proc.published:
            if proc.epoch < 0 or proc.image.offset < proc.epoch:
                return
            proc.published = True
        for state in proc.image.topic(TOPIC).partitions.values():
            i = state.partition
            if self.id not in state.replicas:
                continue
            p = proc.partitions.get(i)
            if p is None:
                p = proc.partitions[i] = self._open(proc, i)
            if p.update(state, self.s.min_isr, self.world.now):
                role = "LEADER" if p.is_leader else "follower"
                self.log(f"p{i}: {role} at epoch {p.leader_epoch}, isr {list(p.isr)}, leo {p.log.log_end_offset}")
            if p.is_follower and proc.fetching.get(i) is None:
                self._fetch(proc, i)

    def _open(self, proc: Process, i: int) -> Partition:
        log_ = Log.open(
            self.root / f"{TOPIC}-{i}",
            LOG_CONFIG,
            recovery_point=self.disk.recovery_point.get(i, 0),
            high_watermark=self.disk.high_watermark.get(i, 0),
            clean_shutdown=self.disk.clean,
            clock=lambda: self.world.now,
        )
        self.log(f"p{i}: log opened, leo {log_.log_end_offset}, hw {log_.high_watermark}")
        return Partition(TOPIC, i, log_, self.id, lambda p, c: self._isr_change(proc, p, c))

    # -- controller sessions -------------------------------------------------------------------------------------

    def _beat(self, proc: Process):
        def beat() -> None:
            if not proc.alive:
                return
            self.world.after(self.s.heartbeat_ms, f"B{self.id} heartbeat", beat)
            term = self.ctl.term
            sent = self.world.now
            if proc.epoch < 0:
                self.net.send(self.id, CONTROLLER, f"register B{self.id}", lambda: self._register(proc, term))
                return
            epoch, offset, shutdown = proc.epoch, proc.image.offset, proc.stopping

            def deliver() -> None:
                d = self.ctl.on_heartbeat(self.id, epoch, offset, shutdown)
                if d is not None:
                    self._reply(
                        proc, f"heartbeat answer {ErrorCode.Name(d.error)}", lambda: self._on_beat(proc, d, sent)
                    )

            self.net.send(self.id, CONTROLLER, f"heartbeat B{self.id}@{epoch} offset {offset}", deliver)

        return beat

    def _reply(self, proc: Process, what: str, action) -> None:
        """An answer from the controller; lost if the controller fails over before it arrives."""
        term = self.ctl.term

        def arrive() -> None:
            if self.ctl.term != term or not self.ctl.active:
                self.world.log(f"net  0->{self.id} {what}: LOST (controller failover)")
            elif proc.alive:
                action()

        self.net.send(CONTROLLER, self.id, what, arrive)

    def _register(self, proc: Process, term: int) -> None:
        d = self.ctl.on_register(self.id, proc.incarnation, proc.previous_epoch)
        if d is None:
            return

        def registered() -> None:
            if d.error == _NONE and proc.epoch < 0:
                proc.epoch = d.broker_epoch
                self.log(f"registered at epoch {d.broker_epoch}")
                self._publish(proc)

        self._reply(proc, f"register answer {ErrorCode.Name(d.error)}", registered)

    def _on_beat(self, proc: Process, d, sent: int) -> None:
        if d.error in (_STALE_BROKER_EPOCH, _BROKER_ID_NOT_REGISTERED):
            if proc.epoch >= 0:
                self.log(f"heartbeat refused ({ErrorCode.Name(d.error)}): registering again")
            proc.epoch = -1
            proc.fenced = True
            return
        if d.error != _NONE:
            return
        if proc.fenced != d.is_fenced:
            self.log("unfenced" if not d.is_fenced else "fenced")
        proc.fenced = d.is_fenced
        proc.session_renewed = max(proc.session_renewed, sent)
        if proc.stopping and d.should_shut_down and self.proc is proc:
            self.stop("clean")
            self.world.after(self.world.rng.randint(100, 800), f"B{self.id} restart", self.start)

    def controlled_shutdown(self) -> None:
        proc = self.proc
        if proc is None or proc.stopping:
            return
        proc.stopping = True
        self.log("asks for controlled shutdown")

        def give_up() -> None:  # the controller did not release it in time: it stops anyway (not cleanly)
            if self.proc is proc:
                self.stop("crash")
                self.world.after(self.world.rng.randint(100, 800), f"B{self.id} restart", self.start)

        self.world.after(3 * self.s.session_timeout_ms, f"B{self.id} shutdown deadline", give_up)

    # -- ISR changes (the IsrChangeSender's loop, in sim time) ---------------------------------------------------

    def _isr_change(self, proc: Process, p: Partition, change: IsrChange) -> None:
        self.log(
            f"p{p.partition}: asks for ISR {list(change.new_isr)} at {change.leader_epoch}/{change.partition_epoch}"
        )
        proc.batcher.submit(p, change)
        self.world.after(0, f"B{self.id} send ISR changes", lambda: self._send_isr(proc))

    def _send_isr(self, proc: Process) -> None:
        if not proc.alive or proc.isr_in_flight is not None:
            return
        if self.world.now < proc.isr_backoff_until:
            self.world.at(proc.isr_backoff_until, f"B{self.id} send ISR changes", lambda: self._send_isr(proc))
            return
        items = proc.batcher.take()
        if not items:
            return
        request = proc.batcher.request(items, proc.epoch)
        token = proc.isr_in_flight = object()

        def deliver() -> None:
            out = self.ctl.on_alter_partition(request.broker_id, request.broker_epoch, isr_items(request))
            if out is not None:
                response = out.response()
                self._reply(proc, f"AlterPartition answer {_summary(response)}", lambda: answered(response))

        def answered(response: cpb.AlterPartitionResponse | None) -> None:
            if proc.isr_in_flight is not token:
                return  # a duplicate, or an answer after the deadline
            proc.isr_in_flight = None
            outcome = proc.batcher.on_response(items, response)
            for p, c in outcome.not_applied:
                self.world.after(self.s.isr_backoff_ms, "ISR change given up", lambda p=p, c=c: p.isr_change_failed(c))
            if outcome.retry:
                proc.batcher.requeue(outcome.retry)
                proc.isr_backoff_until = self.world.now + self.s.isr_backoff_ms
            self._send_isr(proc)

        what = ", ".join(
            f"p{i.partition}:{list(i.new_isr)}@{i.leader_epoch}/{i.partition_epoch}" for i in isr_items(request)
        )
        self.net.send(self.id, CONTROLLER, f"AlterPartition B{self.id}@{proc.epoch} {what}", deliver)

        def deadline() -> None:
            if proc.isr_in_flight is token:
                self.log("AlterPartition deadline: no answer")
                answered(None)

        self.world.after(self.s.alter_timeout_ms, f"B{self.id} AlterPartition deadline", deadline)

    # -- periodic ------------------------------------------------------------------------------------------------

    def _lag_check(self, proc: Process):
        def check() -> None:
            if not proc.alive:
                return
            for p in proc.partitions.values():
                p.check_lagging(self.world.now, self.s.lag_max_ms)
            self.world.after(self.s.lag_max_ms // 2, f"B{self.id} lag check", check)

        return check

    def _flush(self, proc: Process):
        def flush() -> None:
            if not proc.alive:
                return
            for i, p in proc.partitions.items():
                p.log.flush()
                self.disk.recovery_point[i] = p.log.recovery_point
                self.disk.high_watermark[i] = p.log.high_watermark
            self.world.after(self.s.flush_every_ms, f"B{self.id} flush", flush)

        return flush

    # -- replication ---------------------------------------------------------------------------------------------

    def _fetch(self, proc: Process, i: int) -> None:
        p = proc.partitions[i]
        if not proc.alive or not p.is_follower:
            proc.fetching[i] = None
            return
        offset, epoch = p.fetch_position()
        request = FetchRequest(self.id, i, offset, epoch, p.leader_epoch)
        token = proc.fetching[i] = object()
        leader = self.brokers[p.leader_id]

        def deliver() -> None:
            response = leader.serve_fetch(request)
            if response is not None:
                self.net.send(leader.id, self.id, f"fetch answer p{i} for {offset}", lambda: answered(response))

        def answered(response: FetchResponse) -> None:
            if not proc.alive or proc.partitions.get(i) is not p:
                return
            try:
                did = apply_fetch_response(p, request, response)
            except OdradekError as e:
                did = f"failed: {e!r}"
            self.log(f"p{i}: fetch answer (asked {offset}/{epoch}@{request.leader_epoch}): {did}")
            if proc.fetching.get(i) is token:
                proc.fetching[i] = None
                delay = 0 if response.error == _NONE and response.read.data else FETCH_BACKOFF_MS
                self.world.after(delay, f"B{self.id} fetch p{i}", lambda: self._fetch_if_idle(proc, i))

        def deadline() -> None:
            if proc.fetching.get(i) is token:
                proc.fetching[i] = None
                self._fetch_if_idle(proc, i)

        self.net.send(self.id, leader.id, f"fetch p{i} {offset}/{epoch}@{p.leader_epoch}", deliver)
        self.world.after(self.s.fetch_timeout_ms, f"B{self.id} fetch deadline p{i}", deadline)

    def _fetch_if_idle(self, proc: Process, i: int) -> None:
        if proc.alive and proc.fetching.get(i) is None and i in proc.partitions:
            self._fetch(proc, i)

    def serve_fetch(self, r: FetchRequest) -> FetchResponse | None:
        proc = self.proc
        if proc is None:
            return None
        p = proc.partitions.get(r.partition)
        if p is None:
            return FetchResponse(_NOT_LEADER_OR_FOLLOWER)
        try:
            read = p.read_for_follower(
                r.replica_id, r.fetch_offset, r.last_fetched_epoch, FETCH_MAX_BYTES, r.leader_epoch, self.world.now
            )
        except OdradekError as e:
            return FetchResponse(e.code, None, p.log.log_start_offset, p.log.log_end_offset)
        return FetchResponse(_NONE, read)

    # -- produce -------------------------------------------------------------------------------------------------

    def serve_produce(self, i: int, records: bytes, reply) -> None:
        """acks=all: answer once the batch commits, fails, or the request times out."""
        proc = self.proc
        if proc is None:
            return
        p = proc.partitions.get(i)
        try:
            if not self.session_valid(proc) or p is None:
                reply(_NOT_LEADER_OR_FOLLOWER, -1)
                return
            info = p.append_as_leader(records, acks=-1)
        except OdradekError as e:
            reply(e.code, -1)
            return
        future = p.wait_for_commit(info.last_offset + 1)
        proc.produces.append((future, self.world.now + PRODUCE_TIMEOUT_MS, lambda code: reply(code, info.last_offset)))

    def complete_produces(self) -> None:
        proc = self.proc
        if proc is None or not proc.produces:
            return
        waiting = []
        for future, deadline, reply in proc.produces:
            if future.done():
                reply(future.result())
            elif self.world.now >= deadline:
                reply(_REQUEST_TIMED_OUT)
            else:
                waiting.append((future, deadline, reply))
        proc.produces = waiting


def _summary(response: cpb.AlterPartitionResponse) -> str:
    if response.error:
        return ErrorCode.Name(response.error)
    return ", ".join(f"p{r.partition}:{ErrorCode.Name(r.error)}" for t in response.topics for r in t.partitions)

"""``odradek server``: one process with the controller role, the broker role, or both (combined mode).

Both roles share one Raft driver and one metadata image: a controller is a voter of the metadata quorum, a
broker-only node follows the committed metadata log as an observer. Each role serves on its own listener:
``CONTROLLER`` carries Raft, Controller and Admin; the broker listener carries Admin (and the data plane).

This module owns a node's assembly: building each role from the config (``_build_controller``,
``_build_broker``), serving its listener, starting and stopping the roles in order, and the node's state gauges.
The components themselves get their collaborators through their constructors.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from collections.abc import Awaitable
from pathlib import Path

import grpc

from odradek.broker.config import NodeConfig
from odradek.broker.dataplane import BrokerService
from odradek.broker.fetcher import FetcherConfig, ReplicaFetcherManager
from odradek.broker.isr_changes import IsrChangeSender
from odradek.broker.lifecycle import BrokerLifecycleManager
from odradek.broker.log import durability
from odradek.broker.log.config import LogManagerConfig
from odradek.broker.log.manager import LogManager
from odradek.broker.log_dirs import log_dir_gauges, log_dir_usage
from odradek.broker.metrics import NodeMetrics, gauge
from odradek.broker.producer_ids import ProducerIdManager
from odradek.broker.replica_manager import ReplicaManager, broker_log_config
from odradek.broker.storage import verify_storage
from odradek.broker.topic_defaults import topic_defaults
from odradek.client.connection import channel_options
from odradek.client.errors import StorageError
from odradek.controller.active import ActiveController
from odradek.controller.brokers import BrokerControl
from odradek.controller.metadata.state_machine import MetadataStateMachine
from odradek.controller.quorum.driver import RaftDriver, RaftService
from odradek.controller.services import AdminService, ControllerService
from odradek.proto import admin_pb2_grpc, broker_pb2_grpc, controller_pb2_grpc, raft_pb2_grpc

logger = logging.getLogger(__name__)

STOP_STEP_TIMEOUT_S = 10.0

RAFT_DIR = "__raft"


class Node:
    def __init__(self, config: NodeConfig) -> None:
        self.config = config
        self.cluster_id = verify_storage(config)
        c = config
        self.voters = {v.node_id: f"{v.host}:{v.port}" for v in c.voters}
        self.sm = MetadataStateMachine(self.cluster_id, c["metadata.log.max.snapshot.interval.records"])
        self.driver = RaftDriver(
            c.node_id,
            self.voters,
            self.cluster_id,
            Path(c.metadata_log_dir) / RAFT_DIR,
            self.sm,
            election_timeout_ms=c["controller.quorum.election.timeout.ms"],
            fetch_timeout_ms=c["controller.quorum.fetch.timeout.ms"],
            on_fatal=lambda _error: self._stop_requested.set(),
        )
        self.controller: ActiveController | None = None
        self.broker_lifecycle: BrokerLifecycleManager | None = None
        self.logs: LogManager | None = None
        self.replicas: ReplicaManager | None = None
        self._log_task: asyncio.Task | None = None
        self._lag_task: asyncio.Task | None = None
        self.fetchers: ReplicaFetcherManager | None = None
        self.isr_changes: IsrChangeSender | None = None
        self.servers: list[grpc.aio.Server] = []
        self.metrics = NodeMetrics(c.node_id)
        self.metrics.add_collector(self._collect)
        self.admin: AdminService | None = None
        self._stopped = asyncio.Event()
        self._stop_requested = asyncio.Event()  # a signal, or a fatal error of the Raft driver

    def _unclean_allowed(self, topic: str) -> bool:
        value = self.sm.image.topic_configs(topic).get("unclean.leader.election.enable")
        return value == "true" if value is not None else self.config["unclean.leader.election.enable"]

    def _recovery_strategy(self, topic: str) -> str:
        value = self.sm.image.topic_configs(topic).get("unclean.recovery.strategy")
        return value if value is not None else self.config["unclean.recovery.strategy"]

    def _min_isr(self, topic: str) -> int:
        value = self.sm.image.topic_configs(topic).get("min.insync.replicas")
        return int(value) if value is not None else self.config["min.insync.replicas"]

    def _server(self, endpoint) -> grpc.aio.Server:
        server = grpc.aio.server(
            options=channel_options(self.config["socket.request.max.bytes"]),
            interceptors=[self.metrics.interceptor()],
        )
        bound = server.add_insecure_port(f"{endpoint.host}:{endpoint.port}")
        if bound == 0:
            raise OSError(f"cannot listen on {endpoint.host}:{endpoint.port}")
        self.servers.append(server)
        return server

    async def start(self) -> None:
        """Build the node's roles, serve their listeners, then start the Raft driver and the roles' loops."""
        c = self.config
        if c.is_controller:
            self.controller = self._build_controller()
        self.admin = self._build_admin()
        if c.is_controller:
            self._serve_controller()
        if c.is_broker:
            self._build_broker()
            self._serve_broker()
        for server in self.servers:
            await server.start()
        self.metrics.serve(c["metrics.port"])
        await self.driver.start()
        if self.controller is not None:
            self.controller.start()
        if self.broker_lifecycle is not None:
            self._start_broker()
        if self.logs is not None:
            self._log_task = asyncio.create_task(self._log_maintenance(), name="log-maintenance")
        logger.info("node %d started with roles %s", c.node_id, ",".join(sorted(c.roles)))
        if c["unsafe.testing.bug"]:
            logger.warning(
                "UNSAFE: running with the injected bug %r (for testing the chaos checker)", c["unsafe.testing.bug"]
            )

    # -- controller role ----------------------------------------------------------------------------------------

    def _build_controller(self) -> ActiveController:
        """The controller role: decides on the metadata log while this node leads the quorum."""
        c = self.config
        lifecycle = BrokerControl(self.cluster_id, c["broker.session.timeout.ms"], self._unclean_allowed, self._min_isr)
        rebalance = c["leader.imbalance.check.interval.seconds"] if c["auto.leader.rebalance.enable"] else None
        return ActiveController(
            self.driver,
            self.sm,
            lifecycle,
            rebalance_interval_s=rebalance,
            imbalance_percentage=c["leader.imbalance.per.broker.percentage"],
            recovery_strategy=self._recovery_strategy,
        )

    def _build_admin(self) -> AdminService:
        """Admin is served by both roles; requests reach the active controller through ``self.controller`` when
        this node has one, or are forwarded to it."""
        c = self.config
        defaults = {
            "num.partitions": c["num.partitions"],
            "default.replication.factor": c["default.replication.factor"],
            "max.partitions.per.broker": c["max.partitions.per.broker"],
        }
        return AdminService(
            self.sm, self.driver, self.voters, defaults, self.controller, topic_defaults=topic_defaults(c)
        )

    def _serve_controller(self) -> None:
        """The CONTROLLER listener: Raft, Controller and Admin."""
        server = self._server(self.config.controller_listener)
        raft_pb2_grpc.add_RaftServicer_to_server(RaftService(self.driver), server)
        controller_pb2_grpc.add_ControllerServicer_to_server(ControllerService(self.controller), server)
        admin_pb2_grpc.add_AdminServicer_to_server(self.admin, server)

    # -- broker role --------------------------------------------------------------------------------------------

    def _build_broker(self) -> None:
        """The broker role: its log dirs, its registration and heartbeats, and the partition replicas it hosts
        (fed by the committed metadata)."""
        c = self.config
        if c["unsafe.testing.fsync.ledger"]:
            durability.enable(c["unsafe.testing.fsync.ledger"])
        base = broker_log_config(c)
        self.logs = LogManager(
            c.log_dirs,
            base,
            LogManagerConfig.from_properties(
                {
                    "log.retention.check.interval.ms": c["log.retention.check.interval.ms"],
                    "log.max.open.fds": c["log.max.open.files"],
                }
            ),
        )
        lifecycle = self.broker_lifecycle = self._build_lifecycle(self.logs.clean_shutdown_epoch)
        self.fetchers = ReplicaFetcherManager(
            c.node_id,
            lambda: lifecycle.broker_epoch,
            lambda: self.sm.image,
            FetcherConfig(
                max_wait_ms=c["replica.fetch.wait.max.ms"],
                min_bytes=c["replica.fetch.min.bytes"],
                partition_max_bytes=c["replica.fetch.max.bytes"],
                response_max_bytes=c["replica.fetch.response.max.bytes"],
                backoff_ms=c["replica.fetch.backoff.ms"],
            ),
        )
        self.isr_changes = IsrChangeSender(c.node_id, lambda: lifecycle.broker_epoch, lifecycle.call)
        self.replicas = ReplicaManager(
            c.node_id,
            self.logs,
            base,
            min_isr_default=c["min.insync.replicas"],
            fetchers=self.fetchers,
            isr_changes=self.isr_changes.submit,
            metrics=self.metrics,
            unsafe_bug=c["unsafe.testing.bug"],
            registered_epoch=lambda: lifecycle.broker_epoch,
        )
        self.sm.on_change(self.replicas.publish)
        loop = asyncio.get_running_loop()
        self.logs.on_dir_offline(lambda d: loop.call_soon_threadsafe(self._log_dir_offline, d))
        if self._all_log_dirs_offline():
            raise StorageError(f"every log dir is offline: {', '.join(c.log_dirs)}")

    def _build_lifecycle(self, previous_broker_epoch: int) -> BrokerLifecycleManager:
        """Registration and heartbeats with the active controller, advertising the broker listener."""
        c = self.config
        advertised = c.advertised_broker_listener
        return BrokerLifecycleManager(
            broker_id=c.node_id,
            cluster_id=self.cluster_id,
            host=advertised.host,
            port=advertised.port,
            rack=c["broker.rack"],
            log_dirs=c.log_dirs,
            voters=self.voters,
            leader_hint=lambda: self.sm.leader.leader_id,
            metadata_offset=lambda: self.sm.image.offset,
            heartbeat_interval_ms=c["broker.heartbeat.interval.ms"],
            session_timeout_ms=c["broker.session.timeout.ms"],
            previous_broker_epoch=previous_broker_epoch,
            offline=self._offline_report,
            on_registered=lambda: self.replicas.publish(self.sm.image),
        )

    def _serve_broker(self) -> None:
        """The broker listener: Admin and the data plane."""
        c = self.config
        lifecycle = self.broker_lifecycle
        server = self._server(c.broker_listener)
        admin_pb2_grpc.add_AdminServicer_to_server(self.admin, server)
        service = BrokerService(
            c.node_id,
            self.cluster_id,
            self.replicas,
            self.metrics,
            controller_id=lambda: -1 if self.sm.leader.leader_id is None else self.sm.leader.leader_id,
            session_valid=lifecycle.session_valid,
            producer_ids=ProducerIdManager(c.node_id, lambda: lifecycle.broker_epoch, lifecycle.call),
            fetch_max_bytes=c["fetch.max.bytes"],
        )
        broker_pb2_grpc.add_BrokerServicer_to_server(service, server)

    def _start_broker(self) -> None:
        self.broker_lifecycle.start()
        self.isr_changes.start()
        self._lag_task = asyncio.create_task(self._lag_checks(), name="isr-lag-checks")

    def _collect(self):
        """State gauges, read at scrape time."""
        node = self.driver.node
        if self.controller is not None and self.controller.is_active:
            image = self.sm.image
            live = {b.broker_id for b in image.active_brokers()}
            states = [p for t in image.topics.values() for p in t.partitions.values()]
            for name, doc, value in (
                (
                    "odradek_offline_partitions",
                    "partitions without a live leader",
                    sum(p.leader not in live for p in states),
                ),
                (
                    "odradek_cluster_under_replicated_partitions",
                    "partitions with ISR < replicas",
                    sum(p.under_replicated for p in states),
                ),
            ):
                g = gauge(name, doc)
                g.add_metric([], value)
                yield g
        if node is not None:
            for name, doc, value in (
                ("odradek_raft_epoch", "current Raft epoch (term)", node.epoch),
                ("odradek_raft_high_watermark", "committed metadata log offset", node.high_watermark),
                ("odradek_raft_log_end_offset", "metadata log end offset", node.log.end_offset),
                ("odradek_raft_is_leader", "1 on the active controller", int(node.leader_id == node.node_id)),
                ("odradek_metadata_applied_offset", "metadata offset applied to the image", self.sm.image.offset),
            ):
                g = gauge(name, doc)
                g.add_metric([], value)
                yield g
        if self.replicas is not None:
            partitions = list(self.replicas.partitions.values())
            for name, doc, value in (
                ("odradek_partitions", "partition replicas hosted", len(partitions)),
                ("odradek_leader_partitions", "partitions led", sum(p.is_leader for p in partitions)),
                (
                    "odradek_under_replicated_partitions",
                    "led partitions whose ISR is smaller than the replica set",
                    sum(p.is_leader and len(p.isr) < len(p.replicas) for p in partitions),
                ),
                (
                    "odradek_under_min_isr_partitions",
                    "led partitions whose ISR is smaller than min.insync.replicas (acks=all writes are refused)",
                    sum(p.is_leader and len(p.isr) < p.min_isr for p in partitions),
                ),
                ("odradek_fetch_purgatory_size", "parked fetch waiters", sum(p.waiter_count for p in partitions)),
                (
                    "odradek_produce_purgatory_size",
                    "acks=all produces waiting for the high watermark",
                    sum(p.acks_waiter_count for p in partitions),
                ),
            ):
                g = gauge(name, doc)
                g.add_metric([], value)
                yield g
            lag = gauge(
                "odradek_follower_lag", "offsets a follower is behind its leader", ["topic", "partition", "replica"]
            )
            for p in partitions:
                for replica, behind in p.follower_lag().items():
                    lag.add_metric([p.topic, str(p.partition), str(replica)], behind)
            for (topic, index), behind in self.fetchers.lag.items():
                lag.add_metric([topic, str(index), str(self.config.node_id)], behind)
            yield lag
            leo = gauge("odradek_log_end_offset", "log end offset", ["topic", "partition"])
            hw = gauge("odradek_high_watermark", "high watermark", ["topic", "partition"])
            for p in partitions:
                labels = [p.topic, str(p.partition)]
                leo.add_metric(labels, p.log.log_end_offset)
                hw.add_metric(labels, p.log.high_watermark)
            yield leo
            yield hw
        if self.logs is not None:
            yield from log_dir_gauges(log_dir_usage(self.logs))

    def _offline_report(self) -> tuple[list[str], dict[bytes, list[int]]]:
        return [str(d) for d in self.logs.offline_dirs()], self.replicas.offline_replicas()

    def _all_log_dirs_offline(self) -> bool:
        """As in Kafka, a broker cannot go on without its metadata log dir or with no log dir at all."""
        offline = self.logs.offline_dirs()
        return not self.logs.online_dirs() or Path(self.config.metadata_log_dir).resolve() in offline

    def _log_dir_offline(self, log_dir: Path) -> None:
        """A log dir failed: stop serving its replicas and tell the controller now; halt if nothing is left."""
        if self._all_log_dirs_offline():
            logger.critical(
                "broker %d stops: log dirs offline after I/O errors: %s (metadata log dir %s)",
                self.config.node_id,
                ", ".join(str(d) for d in self.logs.offline_dirs()),
                self.config.metadata_log_dir,
            )
            logging.shutdown()
            os._exit(1)  # as Kafka halts: nothing on the failed disks can be flushed or trusted
        self.replicas.check_offline()
        self.broker_lifecycle.wake()

    async def _lag_checks(self) -> None:
        """Leaders drop followers that fell behind for ``replica.lag.time.max.ms`` (checked at a quarter of it)."""
        lag_max = self.config["replica.lag.time.max.ms"]
        while True:
            await asyncio.sleep(max(0.05, lag_max / 4000))
            try:
                self.replicas.check_lagging(lag_max)
            except Exception:
                logger.exception("ISR lag check failed")

    async def _log_maintenance(self) -> None:
        """Flush policy, retention and checkpoints, off the event loop (they may fsync)."""
        trigger = self.config["unsafe.testing.log.dir.failure.file"]
        while True:
            await asyncio.sleep(1.0)
            if trigger:
                for d in self.logs.online_dirs():
                    if (d / trigger).exists():
                        logger.warning("UNSAFE: injecting an I/O error into log dir %s (%s found)", d, trigger)
                        self.logs.inject_dir_failure(d)
            try:
                await asyncio.to_thread(self.logs.tick)
            except Exception:
                logger.exception("log maintenance failed")

    async def stop(self) -> None:
        """Graceful stop: controlled shutdown of the broker role, then resignation of a leading controller."""
        if self.broker_lifecycle is not None:
            done = await self.broker_lifecycle.controlled_shutdown(timeout=10)
            logger.info("controlled shutdown %s", "completed" if done else "timed out")
            for task in (self._lag_task,):
                if task is not None:
                    task.cancel()
            await _step("isr", self.isr_changes.stop())
            await _step("fetchers", self.fetchers.close())
            await _step("lifecycle", self.broker_lifecycle.stop())
        if self.controller is not None:
            await _step("controller", self.controller.stop())
        await _step("driver", self.driver.stop(graceful=True))
        await _step("servers", asyncio.gather(*(s.stop(grace=1.0) for s in self.servers)))
        if self._log_task is not None:
            self._log_task.cancel()
            await asyncio.gather(self._log_task, return_exceptions=True)
        if self.logs is not None:
            self.logs.close(self.broker_lifecycle.broker_epoch)
        if self.admin is not None:
            await _step("admin", self.admin.close())
        logger.info("node %d stopped", self.config.node_id)
        self._stopped.set()

    async def run_until_signalled(self) -> int:
        """Run until SIGTERM/SIGINT (exit status 0) or a fatal metadata quorum error (1)."""
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._stop_requested.set)
        await self.start()
        await self._stop_requested.wait()
        logger.info("node %d stopping", self.config.node_id)
        await self.stop()
        return 0 if self.driver.failure is None else 1


async def _step(name: str, aw: Awaitable[object], timeout: float = STOP_STEP_TIMEOUT_S) -> None:
    """One step of a graceful stop. A step that hangs is logged and skipped, so the node still closes its logs and
    exits before the service manager's SIGKILL (TimeoutStopSec)."""
    try:
        async with asyncio.timeout(timeout):
            await aw
    except TimeoutError:
        logger.warning("stop: %s did not finish within %.0f s; going on", name, timeout)


def run(config: NodeConfig) -> None:
    """Run a node until SIGTERM/SIGINT, on uvloop."""
    import uvloop

    logging.basicConfig(
        level=logging.INFO,
        format=f"%(asctime)s node-{config.node_id} %(levelname)s %(name)s: %(message)s",
    )
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        status = runner.run(Node(config).run_until_signalled())
    if status:
        raise SystemExit(status)

"""The broker role of a node: its log dirs, its registration and heartbeats, and the partition replicas it hosts.

``BrokerRole`` owns the broker's long-lived parts, built together from the node config in its constructor (so
none of them is ever missing while the role exists), their start and graceful stop in order, the periodic ISR
lag checks and log maintenance, the reaction to a failed log dir, and the broker's gauges. ``Node`` builds one
when the node has the broker role and serves its data plane.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from odradek.broker.auto_create import TopicAutoCreation
from odradek.broker.config import ConfigError, NodeConfig
from odradek.broker.dataplane import BrokerService
from odradek.broker.fetcher import FetcherConfig, ReplicaFetcherManager
from odradek.broker.groups.coordinator import CoordinatorConfig, GroupCoordinator
from odradek.broker.groups.group_service import GroupService
from odradek.broker.groups.lag import EndOffsetPoller, lag_samples
from odradek.broker.groups.records import OFFSETS_TOPIC
from odradek.broker.isr_changes import IsrChangeSender
from odradek.broker.lifecycle import BrokerLifecycleManager
from odradek.broker.log import durability
from odradek.broker.log.config import LogManagerConfig
from odradek.broker.log.handles import derived_max_open_fds
from odradek.broker.log.manager import LogManager
from odradek.broker.log_cleaner import BrokerLogCleaner
from odradek.broker.log_dir_moves import LogDirMoves
from odradek.broker.log_dirs import log_dir_gauges, log_dir_usage
from odradek.broker.metrics import NodeMetrics, gauge
from odradek.broker.process_limits import max_map_count, raise_open_file_limit
from odradek.broker.producer_ids import ProducerIdManager
from odradek.broker.quotas.manager import QuotaConfig
from odradek.broker.replica_manager import ReplicaManager, broker_log_config
from odradek.broker.security.tls import NodeTls
from odradek.broker.share.broker import ShareBroker
from odradek.broker.throttling import BrokerQuotas
from odradek.broker.transactions.coordinator import TransactionCoordinator, TxnCoordinatorConfig
from odradek.broker.transactions.markers import MarkerChannel, grpc_sender
from odradek.broker.transactions.records import TRANSACTION_STATE_TOPIC
from odradek.broker.transactions.txn_service import TxnService
from odradek.broker.txn_markers import PartitionTransactions
from odradek.broker.txn_verifier import TxnVerifier
from odradek.client.common.access import OPEN, AccessControl
from odradek.client.common.metadata_image import MetadataFeed
from odradek.client.common.topic_rules import SHARE_STATE_TOPIC
from odradek.client.connection import ChannelPool
from odradek.client.errors import ErrorCode, StorageError
from odradek.client.structs import TopicPartition
from odradek.proto import controller_pb2 as cpb

logger = logging.getLogger(__name__)

MARKER_RPC_TIMEOUT_S = 30.0  # one WriteTxnMarkers call: the leader answers once the marker is replicated

# One step of a graceful stop, bounded in time by the node.
Step = Callable[[str, Awaitable[object]], Awaitable[None]]


class BrokerRole:
    def __init__(
        self,
        config: NodeConfig,
        cluster_id: str,
        sm: MetadataFeed,
        voters: dict[int, str],
        metrics: NodeMetrics,
    ) -> None:
        c = self.config = config
        self.cluster_id = cluster_id
        self.sm = sm
        self.metrics = metrics
        if c["unsafe.testing.fsync.ledger"]:
            durability.enable(c["unsafe.testing.fsync.ledger"])
        base = broker_log_config(c)
        nofile = raise_open_file_limit()
        self.logs = LogManager(
            c.log_dirs,
            base,
            LogManagerConfig.from_properties(
                {
                    "log.retention.check.interval.ms": c["log.retention.check.interval.ms"],
                    "log.max.open.fds": c["log.max.open.files"] or derived_max_open_fds(nofile, max_map_count()),
                }
            ),
        )
        self.lifecycle = self._lifecycle(voters, self.logs.clean_shutdown_epoch)
        self.fetchers = ReplicaFetcherManager(
            c.node_id,
            self._broker_epoch,
            lambda: sm.image,
            FetcherConfig(
                max_wait_ms=c["replica.fetch.wait.max.ms"],
                min_bytes=c["replica.fetch.min.bytes"],
                partition_max_bytes=c["replica.fetch.max.bytes"],
                response_max_bytes=c["replica.fetch.response.max.bytes"],
                backoff_ms=c["replica.fetch.backoff.ms"],
                protocol=c["replica.fetch.protocol"],
                kafka_listener_names=frozenset(n.upper() for n in c["kafka.listener.names"]),
                kafka_tls=NodeTls(c).kafka_client_context,
                kafka_refused=c.kafka_fetch_refusal() or "",
            ),
            persist_log_starts=self.logs.checkpoint_log_start_offsets,
        )
        self.isr_changes = IsrChangeSender(c.node_id, self._broker_epoch, self.lifecycle.call)
        self.replicas = ReplicaManager(
            c.node_id,
            self.logs,
            base,
            min_isr_default=c["min.insync.replicas"],
            fetchers=self.fetchers,
            isr_changes=self.isr_changes.submit,
            metrics=metrics,
            unsafe_bug=c["unsafe.testing.bug"],
            registered_epoch=self._broker_epoch,
            cleanup_policy=c["log.cleanup.policy"],
        )
        self.groups = GroupCoordinator(
            c.node_id, lambda: self.replicas.image, CoordinatorConfig.from_node(c), self._create_offsets_topic
        )
        self.replicas.add_leadership_listener(self.groups.on_leadership)
        self.producer_ids = ProducerIdManager(c.node_id, self._broker_epoch, self.lifecycle.call)
        self._marker_pool = ChannelPool(inter_broker=True)
        image = lambda: self.replicas.image  # noqa: E731
        self.transactions = TransactionCoordinator(
            c.node_id,
            image,
            TxnCoordinatorConfig.from_node(c),
            self._create_transaction_state_topic,
            self.producer_ids,
            MarkerChannel(image, grpc_sender(image, self._marker_pool, MARKER_RPC_TIMEOUT_S)),
            self.groups.offsets_partitions_for_transactions,
        )
        self.replicas.add_leadership_listener(self.transactions.on_leadership)
        self.partition_transactions = PartitionTransactions(self.replicas, self.groups.on_txn_marker)
        self.share = ShareBroker(c, image, self.replicas, self.groups, self._create_share_state_topic)
        self.replicas.add_leadership_listener(self.share.on_leadership)
        self.verifier = TxnVerifier(c.node_id, self.transactions.find_coordinator, self._verify_locally)
        self.cleaner = BrokerLogCleaner(c, self.logs, self.replicas)
        self.log_dir_moves = LogDirMoves(
            self.replicas, io_max_bytes_per_second=c["replica.alter.log.dirs.io.max.bytes.per.second"]
        )
        metrics.add_collector(self.log_dir_moves.gauges)
        self.end_offsets = EndOffsetPoller(
            lambda: {tp for offsets in self.groups.committed_offsets().values() for tp in offsets},
            lambda: self.replicas.image,
        )
        self.quotas = BrokerQuotas(
            QuotaConfig(num_samples=c["quota.window.num"], window_ms=c["quota.window.size.seconds"] * 1000),
            lambda: self.replicas.image,
        )
        metrics.add_collector(self.quotas.metrics)
        self._group_lag_task: asyncio.Task[None] | None = None
        sm.on_change(self.replicas.publish)
        loop = asyncio.get_running_loop()
        self.logs.on_dir_offline(lambda d: self._call_soon(loop, d))
        if self._all_log_dirs_offline():
            raise StorageError(f"every log dir is offline: {', '.join(c.log_dirs)}")
        self._lag_task: asyncio.Task[None] | None = None
        self._log_task: asyncio.Task[None] | None = None

    def _broker_epoch(self) -> int:
        return self.lifecycle.broker_epoch

    def _call_soon(self, loop: asyncio.AbstractEventLoop, log_dir: Path) -> None:
        """From the thread whose I/O failed, onto the event loop."""
        loop.call_soon_threadsafe(self._log_dir_offline, log_dir)

    def _lifecycle(self, voters: dict[int, str], previous_broker_epoch: int) -> BrokerLifecycleManager:
        """Registration and heartbeats with the active controller, advertising the broker listener, the Kafka
        listener, the schema registry listener and the HTTP API listener (when there are), so that every broker can
        point Kafka clients at the others and forward registry writes and HTTP API requests to the broker serving
        them."""
        c = self.config
        advertised = c.advertised_broker_listener
        if advertised is None:  # the config refuses a broker without a listener
            raise ConfigError("the broker role has no listener to advertise")
        kafka = c.advertised_kafka_listener
        registry = c.advertised_schema_registry_listener  # where other brokers forward registry writes
        http = c.advertised_http_listener  # where other brokers forward HTTP API requests (docs/http-api.md)
        listeners = [(e.name, e.host, e.port) for e in (kafka, registry, http) if e is not None]
        return BrokerLifecycleManager(
            broker_id=c.node_id,
            cluster_id=self.cluster_id,
            host=advertised.host,
            port=advertised.port,
            rack=c["broker.rack"],
            log_dirs=c.log_dirs,
            voters=voters,
            leader_hint=lambda: self.sm.leader.leader_id,
            metadata_offset=lambda: self.sm.image.offset,
            heartbeat_interval_ms=c["broker.heartbeat.interval.ms"],
            session_timeout_ms=c["broker.session.timeout.ms"],
            previous_broker_epoch=previous_broker_epoch,
            offline=self._offline_report,
            on_registered=lambda: self.replicas.publish(self.sm.image),
            listeners=listeners,
        )

    def service(
        self,
        controller_id: Callable[[], int],
        access: AccessControl = OPEN,
        auto_create: TopicAutoCreation | None = None,
    ) -> BrokerService:
        """The data plane served on the broker listener; ``auto_create``: how its Metadata creates missing topics
        (None: it does not)."""
        c = self.config
        return BrokerService(
            c.node_id,
            self.cluster_id,
            self.replicas,
            self.metrics,
            controller_id=controller_id,
            session_valid=self.lifecycle.session_valid,
            producer_ids=self.producer_ids,
            fetch_max_bytes=c["fetch.max.bytes"],
            uncleanable=self.cleaner.uncleanable,
            verifier=self.verifier,
            transactions=self.transactions,
            quotas=self.quotas,
            access=access,
            auto_create=auto_create,
            log_dir_moves=self.log_dir_moves,
        )

    def group_service(self, access: AccessControl = OPEN) -> GroupService:
        """The group coordinator's service, which every listener serves (FindCoordinator answers for transactions
        too)."""
        return GroupService(self.groups, self.transactions.find_coordinator, access)

    def transactions_service(self, access: AccessControl = OPEN) -> TxnService:
        """The transaction coordinator's and the partition leaders' service (markers, producers), which every
        listener serves."""
        return TxnService(self.transactions, self.partition_transactions, access)

    async def _verify_locally(
        self, transactional_id: str, producer_id: int, producer_epoch: int, partitions: list[TopicPartition]
    ) -> dict[TopicPartition, int]:
        """Verification when this broker is the producer's coordinator: no round trip."""
        error, answers = self.transactions.verify(transactional_id, producer_id, producer_epoch, partitions)
        return dict.fromkeys(partitions, error) if error != ErrorCode.NONE else answers

    async def _create_transaction_state_topic(self, partitions: int, replication_factor: int) -> None:
        """The transaction state topic on first use (FindCoordinator for a transactional id), created by the
        active controller with transaction.state.log.min.isr and .segment.bytes."""
        c = self.config
        request = cpb.CreateInternalTopicRequest(
            broker_id=c.node_id,
            name=TRANSACTION_STATE_TOPIC,
            num_partitions=partitions,
            replication_factor=replication_factor,
            segment_bytes=c["transaction.state.log.segment.bytes"],
            min_insync_replicas=c["transaction.state.log.min.isr"],
        )
        response = await self.lifecycle.call("CreateInternalTopic", request)
        if response is not None and response.error not in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS):
            logger.warning("creating %s failed: %s", TRANSACTION_STATE_TOPIC, response.error_message or response.error)

    async def _create_share_state_topic(self, partitions: int, replication_factor: int) -> None:
        """The share state topic (KIP-932) on first use, created by the active controller with
        share.coordinator.state.topic.min.isr."""
        request = cpb.CreateInternalTopicRequest(
            broker_id=self.config.node_id,
            name=SHARE_STATE_TOPIC,
            num_partitions=partitions,
            replication_factor=replication_factor,
            min_insync_replicas=self.config["share.coordinator.state.topic.min.isr"],
        )
        response = await self.lifecycle.call("CreateInternalTopic", request)
        if response is not None and response.error not in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS):
            logger.warning("creating %s failed: %s", SHARE_STATE_TOPIC, response.error_message or response.error)

    async def _create_offsets_topic(self, partitions: int, replication_factor: int) -> None:
        """The offsets topic on first use, created by the active controller (it caps the replication factor)."""
        request = cpb.CreateInternalTopicRequest(
            broker_id=self.config.node_id,
            name=OFFSETS_TOPIC,
            num_partitions=partitions,
            replication_factor=replication_factor,
            segment_bytes=self.config["offsets.topic.segment.bytes"],
        )
        response = await self.lifecycle.call("CreateInternalTopic", request)
        if response is not None and response.error not in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS):
            logger.warning("creating %s failed: %s", OFFSETS_TOPIC, response.error_message or response.error)

    def start(self) -> None:
        self.lifecycle.start()
        self.isr_changes.start()
        self._lag_task = asyncio.create_task(self._lag_checks(), name="isr-lag-checks")
        self._log_task = asyncio.create_task(self._log_maintenance(), name="log-maintenance")
        self._group_lag_task = asyncio.create_task(self.end_offsets.run(), name="group-lag")
        self.cleaner.start()
        self.share.start()

    async def stop(self, step: Step) -> None:
        """Controlled shutdown (leaderships move away first), then the loops that talk to the cluster."""
        done = await self.lifecycle.controlled_shutdown(timeout=10)
        logger.info("controlled shutdown %s", "completed" if done else "timed out")
        if self._lag_task is not None:
            self._lag_task.cancel()
        if self._group_lag_task is not None:
            self._group_lag_task.cancel()
            await asyncio.gather(self._group_lag_task, return_exceptions=True)
        await step("group-lag", self.end_offsets.close())
        await step("share-groups", self.share.close())
        await step("groups", self.groups.close())
        await step("transactions", self.transactions.close())
        await step("transaction-channels", self._close_transaction_channels())
        await step("producer-ids", self.producer_ids.close())
        await step("isr", self.isr_changes.stop())
        await step("fetchers", self.fetchers.close())
        await step("log-dir-moves", self.log_dir_moves.close())
        await step("lifecycle", self.lifecycle.stop())

    async def close(self) -> None:
        """Last, once nothing serves the logs any more: the clean-shutdown marker records the broker epoch, so the
        next start may skip log recovery."""
        if self._log_task is not None:
            self._log_task.cancel()
            await asyncio.gather(self._log_task, return_exceptions=True)
        await asyncio.to_thread(self.cleaner.stop)
        self.logs.close(self.lifecycle.broker_epoch)

    async def _close_transaction_channels(self) -> None:
        await self.verifier.close()
        await self._marker_pool.close()

    def gauges(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        """The broker's state gauges, read at scrape time."""
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
        lso = gauge("odradek_last_stable_offset", "last stable offset (led partitions)", ["topic", "partition"])
        lso_lag = gauge(
            "odradek_last_stable_offset_lag",
            "high watermark minus last stable offset: offsets read_committed consumers wait for (led partitions)",
            ["topic", "partition"],
        )
        for p in partitions:
            if p.is_leader and not p.log.offline:
                labels = [p.topic, str(p.partition)]
                stable = p.log.last_stable_offset
                lso.add_metric(labels, stable)
                lso_lag.add_metric(labels, p.log.high_watermark - stable)
        yield lso
        yield lso_lag
        yield from log_dir_gauges(log_dir_usage(self.logs))
        yield from self.groups.metrics()
        yield from self.transactions.metrics()
        yield from self._group_lag_gauges()
        yield from self.cleaner.gauges()

    def _group_lag_gauges(self) -> Iterator[GaugeMetricFamily]:
        """Consumer lag of the groups coordinated here: high watermark (polled from the leaders) minus commit."""
        rows, sums = lag_samples(self.groups.committed_offsets(), self.end_offsets.ends)
        per_partition = gauge(
            "odradek_consumer_group_lag",
            "high watermark minus the group's committed offset",
            ["group", "topic", "partition"],
        )
        for group, tp, lag in rows:
            per_partition.add_metric([group, tp.topic, str(tp.partition)], lag)
        yield per_partition
        total = gauge("odradek_consumer_group_lag_sum", "consumer lag summed over a group's partitions", ["group"])
        for group, lag in sorted(sums.items()):
            total.add_metric([group], lag)
        yield total

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
        self.lifecycle.wake()

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
            self.quotas.expire()

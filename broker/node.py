"""``odradek server``: one process with the controller role, the broker role, or both (combined mode).

Both roles share one Raft driver and one metadata image: a controller is a voter of the metadata quorum, a
broker-only node follows the committed metadata log as an observer. Each role serves on its own listener:
``CONTROLLER`` carries Raft, Controller and Admin; the broker listener carries Admin (and the data plane); a broker
may also serve Kafka's own binary protocol on a Kafka listener, over the same services (broker/kafka/).

This module owns a node's assembly: building each role from the config (``_build_controller``,
``_build_broker``), serving its listener, starting and stopping the roles in order, and the node's state gauges.
The components themselves get their collaborators through their constructors.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import signal
from collections.abc import Awaitable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import grpc
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from odradek.broker.auto_create import TopicAutoCreation
from odradek.broker.broker_role import BrokerRole
from odradek.broker.config import TLS_PROTOCOLS, ConfigError, Endpoint, NodeConfig
from odradek.broker.dataplane import BrokerService
from odradek.broker.fetch_session import FetchSessionCache
from odradek.broker.fetch_sessions import FetchSessions
from odradek.broker.groups.group_service import GroupService
from odradek.broker.groups.service import GroupCoordinatorService
from odradek.broker.heap import CycleCollection, keep_collecting
from odradek.broker.kafka.apis import ApiRegistry
from odradek.broker.kafka.backend import KafkaBackend
from odradek.broker.kafka.dispatch import KafkaDispatcher, may_release
from odradek.broker.kafka.server import KafkaListener
from odradek.broker.log.metadata import open_metadata_log
from odradek.broker.metrics import NodeMetrics, gauge
from odradek.broker.security.cluster_action import ClusterActionInterceptor
from odradek.broker.security.grpc_auth import AuthenticationService, CertificateInterceptor, SaslInterceptor
from odradek.broker.security.grpc_sessions import GrpcSessions
from odradek.broker.security.sasl_session import CredentialLookup, SaslSession
from odradek.broker.security.tls import NodeTls
from odradek.broker.security.tls_identity import CertificatePrincipals
from odradek.broker.serving_gate import ServingGate
from odradek.broker.share.grpc_service import ShareGroupsService
from odradek.broker.storage import verify_storage
from odradek.broker.throttling import QuotaInterceptor
from odradek.broker.topic_defaults import topic_defaults
from odradek.broker.transactions.service import TransactionsService
from odradek.client.common import clock
from odradek.client.common.access import AccessControl
from odradek.client.common.group_configs import GroupConfigSettings
from odradek.client.common.scram import Mechanism, ScramCredential
from odradek.client.connection import channel_options, set_inter_node_security
from odradek.client.record import codec
from odradek.controller.active import ActiveController
from odradek.controller.admin.service import NodeAdmin
from odradek.controller.brokers import BrokerControl
from odradek.controller.metadata.state_machine import MetadataStateMachine
from odradek.controller.quorum.driver import RaftDriver, RaftService
from odradek.controller.services import AdminService, ControllerService
from odradek.proto import (
    admin_pb2_grpc,
    broker_pb2_grpc,
    controller_pb2_grpc,
    group_pb2_grpc,
    raft_pb2_grpc,
    security_pb2_grpc,
    share_group_pb2_grpc,
    share_pb2_grpc,
    transaction_pb2_grpc,
)

if TYPE_CHECKING:
    from odradek.broker.rest.api import HttpApi
    from odradek.broker.schema_registry.registry import SchemaRegistry

logger = logging.getLogger(__name__)

STOP_STEP_TIMEOUT_S = 10.0

RAFT_DIR = "__raft"


class Node:
    def __init__(self, config: NodeConfig) -> None:
        self.config = config
        clock.configure(config["unsafe.testing.clock.offset.file"])  # first: every wall-clock read goes through it
        self.cluster_id = verify_storage(config)
        c = config
        self.tls = NodeTls(config)
        self.tls.check()
        # Every pool this node makes without explicit security reaches the other nodes this way (mTLS on SSL).
        set_inter_node_security(self.tls.channel_security())
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
            open_log=open_metadata_log,
        )
        self.controller: ActiveController | None = None
        self.broker: BrokerRole | None = None
        self.servers: list[grpc.aio.Server] = []
        self.kafka: KafkaListener | None = None
        self.schema_registry: SchemaRegistry | None = None
        self.http_api: HttpApi | None = None
        self.metrics = NodeMetrics(c.node_id)
        self.metrics.add_collector(self._collect)
        self.admin_service: NodeAdmin | None = None  # the typed admin service the listeners' adapters call
        self.admin: AdminService | None = None  # its gRPC adapter, the Admin service
        self._stopped = asyncio.Event()
        self._stop_requested = asyncio.Event()  # a signal, or a fatal error of the Raft driver
        # Where SASL listeners find SCRAM credentials (replaceable before start, for tests).
        self.scram_lookup: CredentialLookup = self._image_credential
        self.grpc_sessions: GrpcSessions | None = None  # the broker listener's, when it requires SASL
        # Authorization on every listener of this node, from the ACLs of the metadata image it has applied.
        self.access = AccessControl(c.authorizer_settings, lambda: self.sm.image.acls)
        # Verified client certificates to principals (ssl.principal.mapping.rules), shared by every listener.
        self.certificates = CertificatePrincipals(c["ssl.principal.mapping.rules"])

    def _image_credential(self, user: str, mechanism: Mechanism) -> ScramCredential | None:
        """The user's credential from the metadata image's SCRAM records (none before they exist)."""
        credentials = getattr(self.sm.image, "scram_credentials", None)
        return None if credentials is None else credentials.get((user, mechanism.value))

    def _topic_setting(self, topic: str, name: str) -> str | None:
        """A topic's own value, else the cluster's dynamic default; None: the node's config file decides."""
        image = self.sm.image
        return image.topic_configs(topic).get(name, image.cluster_defaults().get(name))

    def _unclean_allowed(self, topic: str) -> bool:
        value = self._topic_setting(topic, "unclean.leader.election.enable")
        return value == "true" if value is not None else self.config["unclean.leader.election.enable"]

    def _recovery_strategy(self, topic: str) -> str:
        value = self._topic_setting(topic, "unclean.recovery.strategy")
        return value if value is not None else self.config["unclean.recovery.strategy"]

    def _min_isr(self, topic: str) -> int:
        value = self._topic_setting(topic, "min.insync.replicas")
        return int(value) if value is not None else self.config["min.insync.replicas"]

    def _server(
        self,
        endpoint: Endpoint | None,
        interceptors: tuple[grpc.aio.ServerInterceptor, ...] = (),
        gate: ServingGate | None = None,
    ) -> grpc.aio.Server:
        """A gRPC server on ``endpoint``; ``gate``, when given, holds every call (before it is timed or
        authenticated) until the node may serve it."""
        if endpoint is None:  # the config refuses a role without its listener; this guards the programming error
            raise ConfigError("no listener for this role")
        server = grpc.aio.server(
            # gRPC sets SO_REUSEPORT by default, and then a second process bound to the same port shares it silently
            # (connections land on either). A port in use must stop the node, as it stops a Kafka broker.
            options=[*channel_options(self.config["socket.request.max.bytes"]), ("grpc.so_reuseport", 0)],
            interceptors=[*(() if gate is None else (gate,)), self.metrics.interceptor(), *interceptors],
        )
        address = f"{endpoint.host}:{endpoint.port}"
        credentials = self.tls.server_credentials(endpoint.name)
        try:
            if credentials is None:
                bound = server.add_insecure_port(address)
            else:
                bound = server.add_secure_port(address, credentials)
        except RuntimeError:
            bound = 0
        if bound == 0:
            raise OSError(f"cannot listen on {address} (listener {endpoint.name}): the address is in use or not local")
        self.servers.append(server)
        return server

    async def start(self) -> None:
        """Build the node's roles, serve their listeners, then start the Raft driver and the roles' loops."""
        c = self.config
        if c.is_controller:
            self.controller = self._build_controller()
        self.admin_service = self._build_admin()
        admin = self.admin = AdminService(self.admin_service)
        if self.controller is not None:
            self._serve_controller(self.controller, admin)
        if c.is_broker:
            self.broker = BrokerRole(c, self.cluster_id, self.sm, self.voters, self.metrics)
            self._serve_broker(self.broker, admin)
            self.schema_registry = self._build_schema_registry(self.broker)
        for server in self.servers:
            await server.start()
        if self.kafka is not None:
            await self.kafka.start()
        if self.schema_registry is not None:
            await self.schema_registry.serve()
        if self.http_api is not None:
            await self.http_api.serve()
        self.metrics.serve(c["metrics.port"])
        await self.driver.start()
        if self.controller is not None:
            self.controller.start()
        if self.broker is not None:
            self.broker.start()
        if self.schema_registry is not None:
            self.schema_registry.start()
        logger.info("node %d started with roles %s", c.node_id, ",".join(sorted(c.roles)))
        if c.is_broker:
            logger.info("record codec: %s", codec.describe())
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

    def _build_admin(self) -> NodeAdmin:
        """Admin is served by both roles; requests reach the active controller through ``self.controller`` when
        this node has one, or are forwarded to it."""
        c = self.config
        defaults = {
            "num.partitions": c["num.partitions"],
            "default.replication.factor": c["default.replication.factor"],
            "max.partitions.per.broker": c["max.partitions.per.broker"],
        }
        return NodeAdmin(
            self.sm,
            self.driver,
            self.voters,
            defaults,
            self.controller,
            topic_defaults=topic_defaults(c),
            access=self.access,
            group_settings=GroupConfigSettings.from_node(c),
        )

    def _fetch_sessions(self, service: BrokerService) -> FetchSessions:
        """The Kafka listener's fetch session cache, its gauges on this node's metrics."""
        sessions = FetchSessions(
            FetchSessionCache(self.config["max.incremental.fetch.session.cache.slots"]),
            service.replicas,
            refresh_ms=self.config["replica.lag.time.max.ms"] // 4,
        )
        service.metrics.add_collector(sessions.collect)
        return sessions

    def _client_certificates(self, endpoint: Endpoint | None) -> CertificatePrincipals | None:
        """How a listener's clients are known by their certificates: on a TLS listener that asks for one (its
        listener.name.<name>.ssl.client.auth, else ssl.client.auth)."""
        c = self.config
        if endpoint is None or c.client_auth(endpoint.name) == "none":
            return None
        return self.certificates if c.listener_protocol(endpoint.name) in TLS_PROTOCOLS else None

    def _authentication(
        self, endpoint: Endpoint | None, sessions: GrpcSessions | None
    ) -> tuple[grpc.aio.ServerInterceptor, ...]:
        """The interceptor that binds each call's principal on a gRPC listener: the SASL user and/or the client
        certificate's principal; none (``User:ANONYMOUS``) on a listener without either."""
        certificates = self._client_certificates(endpoint)
        if sessions is not None:
            return (SaslInterceptor(sessions, certificates=certificates),)
        if certificates is not None:
            return (CertificateInterceptor(certificates),)
        return ()

    def _serve_controller(self, controller: ActiveController, admin: AdminService) -> None:
        """The CONTROLLER listener: Raft, Controller and Admin. Nodes reach it without SASL: on TLS requiring client
        certificates each call is its certificate's principal; with an authorizer, the inter-node APIs need
        cluster ClusterAction."""
        endpoint = self.config.controller_listener
        gate = (ClusterActionInterceptor(self.access),) if self.access.enabled else ()
        server = self._server(endpoint, (*self._authentication(endpoint, None), *gate))
        raft_pb2_grpc.add_RaftServicer_to_server(RaftService(self.driver), server)
        controller_pb2_grpc.add_ControllerServicer_to_server(ControllerService(controller), server)
        admin_pb2_grpc.add_AdminServicer_to_server(admin, server)

    # -- broker role --------------------------------------------------------------------------------------------

    def _serve_broker(self, broker: BrokerRole, admin: AdminService) -> None:
        """The broker listener: Admin, the data plane and the group coordinator, under client quotas."""
        c, lookup = self.config, self.scram_lookup
        mechanisms = tuple(Mechanism.parse(m) for m in c.sasl_mechanisms)
        sessions = GrpcSessions(mechanisms, lookup) if c.requires_sasl(c.broker_listener) else None
        self.grpc_sessions = sessions
        authentication = self._authentication(c.broker_listener, sessions)
        # Clients are served once the broker has caught up with the metadata log (see ServingGate).
        ready = broker.lifecycle.caught_up
        gate = ServingGate(ready, c.node_id)
        server = self._server(c.broker_listener, (*authentication, QuotaInterceptor(broker.quotas, self.access)), gate)
        security_pb2_grpc.add_AuthenticationServicer_to_server(AuthenticationService(sessions), server)
        admin_pb2_grpc.add_AdminServicer_to_server(admin, server)
        access = self.access
        auto_create = (
            TopicAutoCreation(
                admin.service.create_topics,
                c["num.partitions"],
                c["default.replication.factor"],
                access,
            )
            if c["auto.create.topics.enable"]
            else None
        )
        service = broker.service(
            lambda: -1 if self.sm.leader.leader_id is None else self.sm.leader.leader_id, access, auto_create
        )
        broker_pb2_grpc.add_BrokerServicer_to_server(service, server)
        groups, transactions = broker.group_service(access), broker.transactions_service(access)
        group_pb2_grpc.add_GroupCoordinatorServicer_to_server(GroupCoordinatorService(groups), server)
        transaction_pb2_grpc.add_TransactionsServicer_to_server(TransactionsService(transactions), server)
        share_pb2_grpc.add_ShareCoordinatorServicer_to_server(broker.share.coordinator_service(access), server)
        share = broker.share.service(access)
        share_group_pb2_grpc.add_ShareGroupsServicer_to_server(ShareGroupsService(share), server)
        self.http_api = self._build_http_api(admin, service, groups, ready)
        endpoint = self.config.kafka_listener
        if endpoint is not None:
            sm, name = self.sm, endpoint.name

            def kafka_address(node_id: int) -> tuple[str, int] | None:
                registered = sm.image.brokers.get(node_id)
                return None if registered is None or registered.fenced else registered.endpoint(name)

            backend = KafkaBackend(
                self.config.node_id,
                self.cluster_id,
                name,
                lambda: sm.image,
                service.metadata.controller_id,
                kafka_address,
                service,
                groups,
                transactions,
                admin.service,
                broker.quotas,
                access,
                self.config,
                self._fetch_sessions(service),
                share=share,
            )
            # A connection's session, given its client certificate's principal if it has one.
            kafka_sasl = functools.partial(SaslSession, mechanisms, lookup) if c.requires_sasl(endpoint) else None
            certificates = self._client_certificates(endpoint)
            self.kafka = KafkaListener(
                endpoint.host,
                endpoint.port,
                name,
                KafkaDispatcher(
                    functools.partial(_kafka_apis, backend, kafka_sasl is not None), broker.quotas, kafka_sasl, access
                ),
                max_request_bytes=self.config["socket.request.max.bytes"],
                idle_timeout_ms=self.config["connections.max.idle.ms"],
                failed_authentication_delay_ms=self.config["connection.failed.authentication.delay.ms"],
                tls=self.tls.kafka_context(name),
                certificate_principal=None if certificates is None else certificates.of_der,
                ready=ready,
                may_release=may_release,
            )

    def _build_http_api(
        self, admin: AdminService, service: BrokerService, groups: GroupService, ready: asyncio.Event
    ) -> HttpApi | None:
        """The HTTP API on http.listeners (None when unset), over the typed services this broker's other listeners'
        adapters call (the admin service behind its gRPC adapter, the data and replica services behind
        ``BrokerService``)."""
        c = self.config
        endpoint = c.http_listener
        if endpoint is None:
            return None
        from odradek.broker.rest.api import HttpApi
        from odradek.broker.rest.security import security_of
        from odradek.broker.rest.service import Services

        services = Services(
            c.node_id,
            self.cluster_id,
            c,
            lambda: self.sm.image,
            admin.service,
            service.service,
            service.replica_service,
            groups,
            self.access,
            clock.wall_ms,
        )
        api = HttpApi(
            services,
            endpoint,
            c.http_authentication,
            self.scram_lookup,
            tuple(Mechanism.parse(m) for m in c.sasl_mechanisms),
            c["connection.failed.authentication.delay.ms"],
            ready,
            security_of(c, self.tls.files, self.certificates.of_der),
        )
        self.metrics.add_collector(api.metrics)
        return api

    def _build_schema_registry(self, broker: BrokerRole) -> SchemaRegistry | None:
        """The schema registry on schema.registry.listeners (None when unset), secured as configured; its reader and
        admin client reach the cluster through this broker's own listener."""
        c = self.config
        endpoint, advertised = c.schema_registry_listener, c.advertised_broker_listener
        if endpoint is None or advertised is None:
            return None
        # Imported only when configured: its formats' parsers (fastavro, jsonschema) cost every other node's start.
        from odradek.broker.schema_registry.registry import SchemaRegistry, security_of

        host = "127.0.0.1" if advertised.host in ("0.0.0.0", "::", "") else advertised.host
        replicas = broker.replicas
        registry = SchemaRegistry(
            c.node_id,
            endpoint,
            f"{host}:{advertised.port}",
            lambda: replicas.image,
            lambda tp: replicas.partitions.get((tp.topic, tp.partition)),
            c["default.replication.factor"],
            clock.wall_ms,
            security_of(
                c, self.tls.files, self.access, self.scram_lookup, self.certificates.of_der, broker.lifecycle.caught_up
            ),
        )
        self.metrics.add_collector(registry.metrics)
        return registry

    def _collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
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
        if self.broker is not None:
            yield from self.broker.gauges()

    async def stop(self) -> None:
        """Graceful stop: controlled shutdown of the broker role, then resignation of a leading controller."""
        if self.http_api is not None:  # first: its requests are served by the broker's services
            await _step("http api", self.http_api.stop())
        if self.schema_registry is not None:  # first: its reader is a client of this broker
            await _step("schema registry", self.schema_registry.stop())
        if self.broker is not None:
            await self.broker.stop(_step)
        if self.controller is not None:
            await _step("controller", self.controller.stop())
        await _step("driver", self.driver.stop(graceful=True))
        await _step("servers", asyncio.gather(*(s.stop(grace=1.0) for s in self.servers)))
        if self.kafka is not None:
            await _step("kafka listener", self.kafka.stop())
        if self.broker is not None:
            await self.broker.close()
        if self.admin_service is not None:
            await _step("admin", self.admin_service.close())
        # The process's inter-node security was this node's: a client or a later node in the same process (tests,
        # embedded use) starts from plaintext again, not from this node's certificates.
        set_inter_node_security(None)
        logger.info("node %d stopped", self.config.node_id)
        self._stopped.set()

    async def run_until_signalled(self) -> int:
        """Run until SIGTERM/SIGINT (exit status 0) or a fatal metadata quorum error (1)."""
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._stop_requested.set)
        await self.start()
        collecting = loop.create_task(keep_collecting(CycleCollection()), name="cycle-collection")
        try:
            await self._stop_requested.wait()
        finally:
            collecting.cancel()
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


def _kafka_apis(backend: KafkaBackend, sasl: bool) -> ApiRegistry:
    """The Kafka listener's APIs, built at its first request (KafkaDispatcher)."""
    from odradek.broker.kafka.catalog import kafka_apis

    return kafka_apis(backend, sasl=sasl)


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

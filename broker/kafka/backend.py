"""What the Kafka listener's API handlers reach: the broker's own services and state, the same objects the gRPC
listener serves. A handler translates a Kafka request into the service's call and its answer back, and decides
nothing itself."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from odradek.broker.config import NodeConfig
from odradek.broker.dataplane import BrokerService
from odradek.broker.fetch_sessions import FetchSessions
from odradek.broker.groups.group_service import GroupService
from odradek.broker.kafka.wire import KafkaContext
from odradek.broker.share.service import ShareService
from odradek.broker.throttling import BrokerQuotas
from odradek.broker.transactions.txn_service import TxnService
from odradek.client.common.access import OPEN, AccessControl
from odradek.client.common.admin.api import AdminApi
from odradek.client.common.caller import Caller
from odradek.client.common.metadata_image import MetadataImage


@dataclass(frozen=True)
class KafkaBackend:
    broker_id: int
    cluster_id: str
    listener: str  # the Kafka listener's name: Metadata answers each broker's endpoint of that listener
    image: Callable[[], MetadataImage]
    controller_id: Callable[[], int]  # the active controller as this broker knows it, -1 if none
    # node id -> that broker's advertised (host, port) of this listener; None if it has none or is unknown. Every
    # address a Kafka client is given (Metadata, FindCoordinator, leader hints) comes from here.
    endpoint: Callable[[int], tuple[str, int] | None]
    data: BrokerService  # Metadata, Produce, Fetch, ListOffsets, DeleteRecords, InitProducerId, ...
    groups: GroupService  # groups, offsets, FindCoordinator
    transactions: TxnService  # transaction coordinator APIs, DescribeProducers
    # Topics, configs, quotas, ACLs, SCRAM credentials, elections, the cluster: the typed admin service (writes
    # forwarded to the active controller, as on gRPC).
    admin: AdminApi
    quotas: BrokerQuotas | None = None
    access: AccessControl = OPEN  # the services' authorization, for the calls that pass the caller explicitly
    # This node's config: the static broker configs DescribeConfigs reports, the voters' endpoints DescribeQuorum
    # lists. Only a backend built for APIs that read neither (in tests) goes without it.
    config: NodeConfig | None = None
    # Fetch sessions (KIP-227) of this listener's Fetch v7+; None: none are kept (every answer has session id 0).
    fetch_sessions: FetchSessions | None = None
    # Share groups (KIP-932): their membership and the share-partitions this broker leads; None: not served.
    share: ShareService | None = None

    def node_config(self) -> NodeConfig:
        """This node's config, for the handlers that read it."""
        if self.config is None:
            raise RuntimeError("this Kafka backend was built without the node's config")
        return self.config


def request_caller(backend: KafkaBackend, ctx: KafkaContext) -> Caller | None:
    """The caller to authorize a request as, for the services' internal calls (produce, fetch); None without an
    authorizer. (Calls through a servicer method read the same principal from the request's task.)"""
    return Caller(ctx.principal, ctx.connection.peer_host) if backend.access.enabled else None

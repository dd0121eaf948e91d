"""What the Kafka listener's API handlers reach: the broker's own services and state, the same objects the gRPC
listener serves. A handler translates a Kafka request into the service's call and its answer back, and decides
nothing itself."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from odradek.broker.dataplane import BrokerService
from odradek.broker.groups.service import GroupCoordinatorService
from odradek.broker.throttling import BrokerQuotas
from odradek.broker.transactions.service import TransactionsService
from odradek.controller.metadata.image import MetadataImage
from odradek.controller.services import AdminService


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
    groups: GroupCoordinatorService  # groups, offsets, FindCoordinator
    transactions: TransactionsService  # transaction coordinator APIs
    admin: AdminService  # topics, configs, quotas, cluster (forwarded to the active controller as on gRPC)
    quotas: BrokerQuotas | None = None

"""Every API the Kafka listener serves, registered against one broker's services: the single place that decides
what ApiVersions advertises."""

from __future__ import annotations

from odradek.broker.kafka import (
    admin_apis,
    api_versions,
    cluster_apis,
    consumer_group_apis,
    data_apis,
    group_apis,
    metadata_apis,
    offset_apis,
    sasl_apis,
    security_apis,
    share_apis,
    share_offset_apis,
    txn_admin_apis,
    txn_apis,
)
from odradek.broker.kafka.apis import ApiRegistry
from odradek.broker.kafka.backend import KafkaBackend


def kafka_apis(backend: KafkaBackend, *, sasl: bool = False) -> ApiRegistry:
    """``sasl``: the listener authenticates its connections (SaslHandshake and SaslAuthenticate are served)."""
    registry = ApiRegistry()
    api_versions.register(registry)
    if sasl:
        sasl_apis.register(registry)
    for module in (
        data_apis,
        metadata_apis,
        offset_apis,
        admin_apis,
        cluster_apis,
        security_apis,
        group_apis,
        consumer_group_apis,
        txn_apis,
        txn_admin_apis,
        share_apis,
        share_offset_apis,
    ):
        module.register(registry, backend)
    return registry

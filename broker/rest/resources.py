"""The HTTP API's answers in Confluent REST Proxy v3's JSON shapes, from the typed answers of the broker's services
(``client/common/admin/``, ``broker/groups/requests.py``): every resource has a ``kind`` and ``metadata.self`` (its
URL), a collection holds its resources in ``data``, and a resource points at related ones with ``{"related": url}``.
Pure: values in, JSON out."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from odradek.broker.groups.requests import DescribedGroup, DescribedMember, ListedGroup
from odradek.client.common.acls import AclBinding
from odradek.client.common.admin.cluster import BrokerInfo
from odradek.client.common.admin.configs import ConfigSource, DescribedConfig
from odradek.client.common.admin.topics import PartitionDescription, TopicDescription
from odradek.client.record.batch import Record
from odradek.client.structs import TopicPartition

JsonObject = dict[str, Any]

# odradek's config sources, by Confluent's names.
CONFIG_SOURCES: dict[int, str] = {
    ConfigSource.TOPIC_CONFIG: "DYNAMIC_TOPIC_CONFIG",
    ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG: "DYNAMIC_DEFAULT_BROKER_CONFIG",
    ConfigSource.STATIC_BROKER_CONFIG: "STATIC_BROKER_CONFIG",
    ConfigSource.DEFAULT_CONFIG: "DEFAULT_CONFIG",
}
# Kafka's group states, by Confluent's names.
GROUP_STATES = {
    "PreparingRebalance": "PREPARING_REBALANCE",
    "CompletingRebalance": "COMPLETING_REBALANCE",
    "Stable": "STABLE",
    "Dead": "DEAD",
    "Empty": "EMPTY",
    "Assigning": "ASSIGNING",
    "Reconciling": "RECONCILING",
}


@dataclass(frozen=True, slots=True)
class Links:
    """The URLs of a cluster's resources: ``base`` is where the client reached this API (``http://host:port``)."""

    base: str
    cluster_id: str

    def url(self, *parts: str | int) -> str:
        path = "/".join(quote(str(p), safe="") for p in parts)
        return f"{self.base}/v3/clusters/{quote(self.cluster_id, safe='')}" + (f"/{path}" if path else "")

    def related(self, *parts: str | int) -> JsonObject:
        return {"related": self.url(*parts)}


def collection(kind: str, self_url: str, data: Iterable[JsonObject]) -> JsonObject:
    return {"kind": f"Kafka{kind}List", "metadata": {"self": self_url, "next": None}, "data": list(data)}


def _resource(kind: str, self_url: str, **fields: Any) -> JsonObject:
    return {"kind": f"Kafka{kind}", "metadata": {"self": self_url, "resource_name": None}, **fields}


def iso_time(millis: int) -> str:
    """Milliseconds since the epoch as Confluent writes them: ISO 8601 in UTC, to the millisecond."""
    moment = datetime.fromtimestamp(millis / 1000, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{millis % 1000:03d}Z"


# ---- cluster and brokers ----


def cluster(links: Links, controller_id: int, brokers: Iterable[int]) -> JsonObject:
    """The cluster; ``controller`` points at the active controller where it is a broker too (a combined node)."""
    out = _resource(
        "Cluster",
        links.url(),
        cluster_id=links.cluster_id,
        acls=links.related("acls"),
        brokers=links.related("brokers"),
        broker_configs=links.related("broker-configs"),
        consumer_groups=links.related("consumer-groups"),
        topics=links.related("topics"),
        partition_reassignments=links.related("topics", "-", "partitions", "-", "reassignment"),
    )
    if controller_id in set(brokers):
        out["controller"] = links.related("brokers", controller_id)
    return out


def broker(links: Links, b: BrokerInfo) -> JsonObject:
    return _resource(
        "Broker",
        links.url("brokers", b.node_id),
        cluster_id=links.cluster_id,
        broker_id=b.node_id,
        host=b.host,
        port=b.port,
        rack=b.rack or None,
        configs=links.related("brokers", b.node_id, "configs"),
        partition_replicas=links.related("brokers", b.node_id, "partition-replicas"),
    )


# ---- topics, partitions, replicas ----


def topic(links: Links, name: str, internal: bool, partitions: int, replication_factor: int) -> JsonObject:
    return _resource(
        "Topic",
        links.url("topics", name),
        cluster_id=links.cluster_id,
        topic_name=name,
        is_internal=internal,
        replication_factor=replication_factor,
        partitions_count=partitions,
        partitions=links.related("topics", name, "partitions"),
        configs=links.related("topics", name, "configs"),
        partition_reassignments=links.related("topics", name, "partitions", "-", "reassignment"),
    )


def described_topic(links: Links, t: TopicDescription) -> JsonObject:
    factor = len(t.partitions[0].replicas) if t.partitions else 0
    return topic(links, t.name, t.is_internal, len(t.partitions), factor)


def partition(links: Links, topic_name: str, p: PartitionDescription) -> JsonObject:
    out = _resource(
        "Partition",
        links.url("topics", topic_name, "partitions", p.partition),
        cluster_id=links.cluster_id,
        topic_name=topic_name,
        partition_id=p.partition,
        replicas=links.related("topics", topic_name, "partitions", p.partition, "replicas"),
        reassignment=links.related("topics", topic_name, "partitions", p.partition, "reassignment"),
    )
    if p.leader >= 0:
        out["leader"] = links.related("topics", topic_name, "partitions", p.partition, "replicas", p.leader)
    return out


def replica(links: Links, topic_name: str, p: PartitionDescription, broker_id: int) -> JsonObject:
    return _resource(
        "Replica",
        links.url("topics", topic_name, "partitions", p.partition, "replicas", broker_id),
        cluster_id=links.cluster_id,
        topic_name=topic_name,
        partition_id=p.partition,
        broker_id=broker_id,
        is_leader=p.leader == broker_id,
        is_in_sync=broker_id in p.isr,
        broker=links.related("brokers", broker_id),
    )


def reassignment(links: Links, topic_name: str, p: PartitionDescription) -> JsonObject:
    return _resource(
        "Reassignment",
        links.url("topics", topic_name, "partitions", p.partition, "reassignment"),
        cluster_id=links.cluster_id,
        topic_name=topic_name,
        partition_id=p.partition,
        adding_replicas=list(p.adding_replicas),
        removing_replicas=list(p.removing_replicas),
        replicas=links.related("topics", topic_name, "partitions", p.partition, "replicas"),
    )


# ---- configs ----


def _config(kind: str, self_url: str, cluster_id: str, c: DescribedConfig, **owner: Any) -> JsonObject:
    source = CONFIG_SOURCES.get(c.source, "UNKNOWN")
    value = None if c.sensitive else c.value
    return _resource(
        kind,
        self_url,
        cluster_id=cluster_id,
        **owner,
        name=c.name,
        value=value,
        is_default=c.source == ConfigSource.DEFAULT_CONFIG,
        is_read_only=c.read_only,
        is_sensitive=c.sensitive,
        source=source,
        synonyms=[{"name": c.name, "value": value, "source": source}],
    )


def topic_config(links: Links, topic_name: str, c: DescribedConfig) -> JsonObject:
    url = links.url("topics", topic_name, "configs", c.name)
    return _config("TopicConfig", url, links.cluster_id, c, topic_name=topic_name)


def broker_config(links: Links, broker_id: int, c: DescribedConfig) -> JsonObject:
    url = links.url("brokers", broker_id, "configs", c.name)
    return _config("BrokerConfig", url, links.cluster_id, c, broker_id=broker_id)


def cluster_config(links: Links, c: DescribedConfig) -> JsonObject:
    url = links.url("broker-configs", c.name)
    return _config("ClusterConfig", url, links.cluster_id, c, config_type="BROKER")


# ---- consumer groups ----


def group(links: Links, g: DescribedGroup, coordinator: int) -> JsonObject:
    name = g.group_id
    return _resource(
        "ConsumerGroup",
        links.url("consumer-groups", name),
        cluster_id=links.cluster_id,
        consumer_group_id=name,
        is_simple=not g.protocol_type,
        partition_assignor=g.protocol_data,
        state=GROUP_STATES.get(g.group_state, "UNKNOWN"),
        type=(g.group_type or "classic").upper(),
        is_mixed_consumer_group=False,
        coordinator=links.related("brokers", coordinator),
        consumers=links.related("consumer-groups", name, "consumers"),
        lag_summary=links.related("consumer-groups", name, "lag-summary"),
    )


def listed_group(links: Links, g: ListedGroup, coordinator: int) -> JsonObject:
    """A group of the listing, from what ListGroups tells (the selected assignor is not among it)."""
    described = DescribedGroup(
        group_id=g.group_id, group_state=g.group_state, protocol_type=g.protocol_type, group_type=g.group_type
    )
    return group(links, described, coordinator)


def consumer(links: Links, group_id: str, m: DescribedMember) -> JsonObject:
    return _resource(
        "Consumer",
        links.url("consumer-groups", group_id, "consumers", m.member_id),
        cluster_id=links.cluster_id,
        consumer_group_id=group_id,
        consumer_id=m.member_id,
        instance_id=m.group_instance_id,
        client_id=m.client_id,
        assignments=links.related("consumer-groups", group_id, "consumers", m.member_id, "assignments"),
    )


def assignment(links: Links, group_id: str, member_id: str, tp: TopicPartition) -> JsonObject:
    return _resource(
        "ConsumerAssignment",
        links.url(
            "consumer-groups", group_id, "consumers", member_id, "assignments", tp.topic, "partitions", tp.partition
        ),
        cluster_id=links.cluster_id,
        consumer_group_id=group_id,
        consumer_id=member_id,
        topic_name=tp.topic,
        partition_id=tp.partition,
        partition=links.related("topics", tp.topic, "partitions", tp.partition),
        lag=links.related("consumer-groups", group_id, "lags", tp.topic, "partitions", tp.partition),
    )


@dataclass(frozen=True, slots=True)
class Lag:
    """A group's position on one partition: its committed offset, the partition's end, and the member it is
    assigned to (None: none)."""

    tp: TopicPartition
    current_offset: int
    log_end_offset: int
    member: DescribedMember | None

    @property
    def lag(self) -> int:
        return max(0, self.log_end_offset - self.current_offset)


def lag(links: Links, group_id: str, found: Lag) -> JsonObject:
    m, tp = found.member, found.tp
    return _resource(
        "ConsumerLag",
        links.url("consumer-groups", group_id, "lags", tp.topic, "partitions", tp.partition),
        cluster_id=links.cluster_id,
        consumer_group_id=group_id,
        topic_name=tp.topic,
        partition_id=tp.partition,
        current_offset=found.current_offset,
        log_end_offset=found.log_end_offset,
        lag=found.lag,
        consumer_id=m.member_id if m is not None else "",
        instance_id=m.group_instance_id if m is not None else None,
        client_id=m.client_id if m is not None else "",
    )


def lag_summary(links: Links, group_id: str, lags: Sequence[Lag]) -> JsonObject:
    """The largest lag (the first of equals, by topic and partition) and the total; zeros for a group that has
    committed nothing."""
    top = max(sorted(lags, key=lambda x: (x.tp.topic, x.tp.partition)), key=lambda x: x.lag, default=None)
    m = top.member if top is not None else None
    out = _resource(
        "ConsumerGroupLagSummary",
        links.url("consumer-groups", group_id, "lag-summary"),
        cluster_id=links.cluster_id,
        consumer_group_id=group_id,
        max_lag_consumer_id=m.member_id if m is not None else "",
        max_lag_instance_id=m.group_instance_id if m is not None else None,
        max_lag_client_id=m.client_id if m is not None else "",
        max_lag_topic_name=top.tp.topic if top is not None else "",
        max_lag_partition_id=top.tp.partition if top is not None else 0,
        max_lag=top.lag if top is not None else 0,
        total_lag=sum(x.lag for x in lags),
    )
    if top is not None:
        if m is not None:
            out["max_lag_consumer"] = links.related("consumer-groups", group_id, "consumers", m.member_id)
        out["max_lag_partition"] = links.related("topics", top.tp.topic, "partitions", top.tp.partition)
    return out


# ---- ACLs ----


def acl(links: Links, b: AclBinding) -> JsonObject:
    return _resource(
        "Acl",
        links.url("acls")
        + f"?resource_type={b.resource_type.name}&resource_name={quote(b.resource_name, safe='')}"
        + f"&pattern_type={b.pattern_type.name}&principal={quote(b.principal, safe='')}"
        + f"&host={quote(b.host, safe='')}&operation={b.operation.name}&permission={b.permission.name}",
        cluster_id=links.cluster_id,
        resource_type=b.resource_type.name,
        resource_name=b.resource_name,
        pattern_type=b.pattern_type.name,
        principal=b.principal,
        host=b.host,
        operation=b.operation.name,
        permission=b.permission.name,
    )


# ---- records ----


def produced(
    links: Links,
    topic_name: str,
    partition_id: int,
    offset: int,
    timestamp_ms: int,
    key: tuple[str, int] | None,
    value: tuple[str, int] | None,
) -> JsonObject:
    """Confluent's answer to a produced record: where it went, when, and the sizes of its key and value."""
    return {
        "error_code": 200,
        "cluster_id": links.cluster_id,
        "topic_name": topic_name,
        "partition_id": partition_id,
        "offset": offset,
        "timestamp": iso_time(timestamp_ms),
        "key": None if key is None else {"type": key[0], "size": key[1]},
        "value": None if value is None else {"type": value[0], "size": value[1]},
    }


def record_data(data: bytes | None) -> JsonObject | None:
    """A record's key or value: its JSON where it is JSON text, else its bytes in base64; None for null."""
    if data is None:
        return None
    try:
        return {"type": "JSON", "data": json.loads(data)}
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        return {"type": "BINARY", "data": base64.b64encode(data).decode()}


def record(links: Links, topic_name: str, partition_id: int, r: Record) -> JsonObject:
    return {
        "kind": "KafkaRecord",
        "topic_name": topic_name,
        "partition_id": partition_id,
        "offset": r.offset,
        "timestamp": iso_time(r.timestamp),
        "timestamp_ms": r.timestamp,
        "key": record_data(r.key),
        "value": record_data(r.value),
        "headers": [
            {"name": name, "value": None if value is None else base64.b64encode(value).decode()}
            for name, value in r.headers
        ],
    }

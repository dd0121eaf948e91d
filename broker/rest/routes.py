"""The HTTP API's routes: one table (``ROUTES``) from which both the router and the OpenAPI document (openapi.py)
are made, so the two cannot drift. Each route names its method, its path template (Confluent REST Proxy v3's, or
odradek's own where Confluent has none), how its path, query and body become a typed request (requests.py), and
what the document says of it. A path the table does not hold is 404, a known path with another method 405, a query
parameter the route does not take 400; all in Confluent's error shape. Pure: the service decides."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from odradek.broker.rest import bodies, errors
from odradek.broker.rest import requests as rq
from odradek.broker.rest.bodies import Query

CLUSTER = "/v3/clusters/{cluster_id}"
TOPIC = CLUSTER + "/topics/{topic_name}"
PARTITION = TOPIC + "/partitions/{partition_id}"
GROUP = CLUSTER + "/consumer-groups/{consumer_group_id}"
CONSUMER = GROUP + "/consumers/{consumer_id}"

# Path parameters: their OpenAPI type and description.
PATH_PARAMETERS = {
    "cluster_id": ("string", "The cluster's id."),
    "broker_id": ("integer", "The broker's node id."),
    "topic_name": ("string", "The topic's name."),
    "partition_id": ("integer", "The partition's index."),
    "name": ("string", "The config's name."),
    "consumer_group_id": ("string", "The consumer group's id."),
    "consumer_id": ("string", "The group member's id."),
    "user": ("string", "The SCRAM user's name."),
}


@dataclass(frozen=True, slots=True)
class Param:
    """A query parameter, for the document and for refusing the ones a route does not take."""

    name: str
    description: str
    type: str = "string"
    required: bool = False


@dataclass(frozen=True, slots=True)
class Args:
    """What a route's builder reads: the path's parameters (percent-decoded), the query and the body."""

    path: Mapping[str, str]
    query: Query
    body: bytes

    def number(self, name: str) -> int:
        text = self.path[name]
        if not text.isdigit():
            raise errors.bad_request(f"{name} must be a whole number, not {text!r}")
        return int(text)


Build = Callable[[Args], rq.Request]


@dataclass(frozen=True, slots=True)
class Route:
    method: str
    template: str
    operation: str  # the document's operationId (Confluent's, for its routes)
    summary: str
    tag: str
    build: Build
    status: int = 200  # the answer's status on success
    query: tuple[Param, ...] = ()
    body: str | None = None  # the request body's schema (openapi.py's components), None without a body
    own: bool = False  # odradek's own, not a Confluent route

    @property
    def segments(self) -> tuple[str, ...]:
        return tuple(self.template.strip("/").split("/"))

    def params(self) -> list[str]:
        return [s[1:-1] for s in self.segments if s.startswith("{")]


@dataclass(frozen=True, slots=True)
class Routed:
    route: Route
    request: rq.Request
    cluster_id: str | None  # the path's cluster id, None for routes outside a cluster


_READ_QUERY = (
    Param("offset", "The first offset to read: a number, `earliest` (the default) or `latest`."),
    Param("timestamp", "Read from the first record at or after this time (milliseconds since the epoch or ISO 8601)."),
    Param("max_records", f"At most this many records (1 to {bodies.MAX_READ_RECORDS}; 100 by default).", "integer"),
    Param("max_bytes", f"About this many bytes (1 to {bodies.MAX_READ_BYTES}; 1 MiB by default).", "integer"),
    Param("timeout_ms", f"Wait this long for a first record (0 to {bodies.MAX_READ_TIMEOUT_MS}; 1000).", "integer"),
)
_ACL_QUERY = (
    Param("resource_type", "TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID or ANY."),
    Param("resource_name", "The resource's name (or prefix)."),
    Param("pattern_type", "LITERAL, PREFIXED, MATCH or ANY."),
    Param("principal", "A principal, `User:<name>`."),
    Param("host", "A host (an IP address, or `*`)."),
    Param("operation", "An operation (READ, WRITE, ..., ANY)."),
    Param("permission", "ALLOW, DENY or ANY."),
)


def _acls(method: str, operation: str, summary: str, *, delete: bool) -> Route:
    """Searching and deleting ACLs: both take a filter in the query, which a delete must name in full (resource
    type, pattern type, operation and permission; ANY for every value), as Confluent's does."""

    def build(a: Args) -> rq.Request:
        found = bodies.acl_filter(a.query, delete=delete)
        return rq.DeleteAcls(found) if delete else rq.SearchAcls(found)

    required = ("resource_type", "pattern_type", "operation", "permission") if delete else ()
    query = tuple(Param(p.name, p.description, p.type, p.name in required) for p in _ACL_QUERY)
    return Route(method, CLUSTER + "/acls", operation, summary, "ACL", build, query=query)


def _topic(a: Args) -> str:
    return a.path["topic_name"]


# odradek's own routes (and Confluent's PATCH of a topic) the web console uses (docs/console.md).
CONSOLE_ROUTES: tuple[Route, ...] = (
    Route(
        "GET",
        CLUSTER + "/overview",
        "getOdradekOverview",
        "odradek's own: brokers, controllers and quorum, and the partitions without a leader or short of replicas.",
        "Cluster",
        lambda a: rq.GetOverview(),
        own=True,
    ),
    Route(
        "PATCH",
        TOPIC,
        "updatePartitionCountKafkaTopic",
        "Grow a topic to a new partition count.",
        "Topic",
        lambda a: bodies.add_partitions(_topic(a), a.body),
        body="UpdatePartitionCountRequest",
    ),
    Route(
        "GET",
        TOPIC + "/details",
        "getOdradekTopicDetails",
        "odradek's own: every partition's leader, replicas, ISR, ELR, offsets and size.",
        "Topic",
        lambda a: rq.GetTopicDetails(_topic(a)),
        own=True,
    ),
    Route(
        "POST",
        TOPIC + "/records:search",
        "searchOdradekRecords",
        "odradek's own: search a topic's records, bounded in records scanned, matches and time; paged.",
        "Records",
        lambda a: bodies.search_records(_topic(a), a.body),
        body="SearchRequest",
        own=True,
    ),
    Route(
        "POST",
        TOPIC + "/records:republish",
        "republishOdradekRecords",
        "odradek's own: copy chosen records, or an offset range, to another topic with their keys, values, headers.",
        "Records",
        lambda a: bodies.republish_records(_topic(a), a.body),
        body="RepublishRequest",
        own=True,
    ),
    Route(
        "POST",
        GROUP + "/offsets:reset",
        "resetOdradekConsumerGroupOffsets",
        "odradek's own: reset the offsets of a group without members (earliest, latest, offset, timestamp).",
        "Consumer Group",
        lambda a: bodies.reset_offsets(a.path["consumer_group_id"], a.body),
        body="ResetOffsetsRequest",
        own=True,
    ),
    Route(
        "GET",
        CLUSTER + "/user-scram-credentials",
        "listOdradekScramUsers",
        "odradek's own: the users with SCRAM credentials, and their mechanisms (never a secret).",
        "Security",
        lambda a: rq.ListScramUsers(),
        own=True,
    ),
    Route(
        "POST",
        CLUSTER + "/user-scram-credentials",
        "upsertOdradekScramUser",
        "odradek's own: create or replace a user's SCRAM credential.",
        "Security",
        lambda a: bodies.scram_user(a.body),
        status=201,
        body="ScramCredentialRequest",
        own=True,
    ),
    Route(
        "DELETE",
        CLUSTER + "/user-scram-credentials/{user}",
        "deleteOdradekScramUser",
        "odradek's own: delete a user's SCRAM credential for one mechanism.",
        "Security",
        lambda a: bodies.scram_deletion(a.path["user"], a.query),
        status=204,
        query=(Param("mechanism", "SCRAM-SHA-256 or SCRAM-SHA-512.", required=True),),
        own=True,
    ),
    Route(
        "GET",
        CLUSTER + "/client-quotas",
        "listOdradekClientQuotas",
        "odradek's own: every client quota (user, client id, their defaults).",
        "Security",
        lambda a: rq.ListClientQuotas(),
        own=True,
    ),
    Route(
        "POST",
        CLUSTER + "/client-quotas:alter",
        "alterOdradekClientQuota",
        "odradek's own: set or remove an entity's quota values.",
        "Security",
        lambda a: bodies.client_quota(a.body),
        status=204,
        body="AlterClientQuotaRequest",
        own=True,
    ),
    Route(
        "GET",
        CLUSTER + "/brokers/-/metrics",
        "getOdradekBrokerMetrics",
        "odradek's own: each broker's byte and record counters by topic and its groups' lag, from its metrics.",
        "Broker",
        lambda a: rq.GetBrokerMetrics(),
        own=True,
    ),
)


ROUTES: tuple[Route, ...] = (
    Route("GET", "/openapi.json", "getOpenApi", "This OpenAPI document.", "Meta", lambda a: rq.OpenApi(), own=True),
    Route("GET", "/v3/clusters", "listKafkaClusters", "The cluster (one).", "Cluster", lambda a: rq.ListClusters()),
    Route("GET", CLUSTER, "getKafkaCluster", "The cluster.", "Cluster", lambda a: rq.GetCluster()),
    Route(
        "GET",
        CLUSTER + "/broker-configs",
        "listKafkaClusterConfigs",
        "The cluster-wide dynamic broker configs.",
        "Configs",
        lambda a: rq.ListClusterConfigs(),
    ),
    Route(
        "GET",
        CLUSTER + "/broker-configs/{name}",
        "getKafkaClusterConfig",
        "One cluster-wide dynamic broker config.",
        "Configs",
        lambda a: rq.GetClusterConfig(a.path["name"]),
    ),
    Route("GET", CLUSTER + "/brokers", "listKafkaBrokers", "The brokers.", "Broker", lambda a: rq.ListBrokers()),
    Route(
        "GET",
        CLUSTER + "/brokers/{broker_id}",
        "getKafkaBroker",
        "One broker.",
        "Broker",
        lambda a: rq.GetBroker(a.number("broker_id")),
    ),
    Route(
        "GET",
        CLUSTER + "/brokers/{broker_id}/configs",
        "listKafkaBrokerConfigs",
        "A broker's configs, as it runs with them.",
        "Configs",
        lambda a: rq.ListBrokerConfigs(a.number("broker_id")),
    ),
    Route(
        "GET",
        CLUSTER + "/brokers/{broker_id}/configs/{name}",
        "getKafkaBrokerConfig",
        "One of a broker's configs.",
        "Configs",
        lambda a: rq.GetBrokerConfig(a.number("broker_id"), a.path["name"]),
    ),
    Route(
        "GET",
        CLUSTER + "/brokers/{broker_id}/partition-replicas",
        "searchKafkaReplicasByBroker",
        "The partition replicas a broker hosts.",
        "Replica",
        lambda a: rq.ListBrokerReplicas(a.number("broker_id")),
    ),
    Route("GET", CLUSTER + "/topics", "listKafkaTopics", "The topics.", "Topic", lambda a: rq.ListTopics()),
    Route(
        "POST",
        CLUSTER + "/topics",
        "createKafkaTopic",
        "Create a topic.",
        "Topic",
        lambda a: bodies.create_topic(a.body),
        status=201,
        body="CreateTopicRequest",
    ),
    Route("GET", TOPIC, "getKafkaTopic", "One topic.", "Topic", lambda a: rq.GetTopic(_topic(a))),
    Route("DELETE", TOPIC, "deleteKafkaTopic", "Delete a topic.", "Topic", lambda a: rq.DeleteTopic(_topic(a)), 204),
    Route(
        "GET",
        TOPIC + "/partitions",
        "listKafkaPartitions",
        "A topic's partitions.",
        "Partition",
        lambda a: rq.ListPartitions(_topic(a)),
    ),
    Route(
        "GET",
        PARTITION,
        "getKafkaPartition",
        "One partition.",
        "Partition",
        lambda a: rq.GetPartition(_topic(a), a.number("partition_id")),
    ),
    Route(
        "GET",
        PARTITION + "/replicas",
        "listKafkaReplicas",
        "A partition's replicas.",
        "Replica",
        lambda a: rq.ListReplicas(_topic(a), a.number("partition_id")),
    ),
    Route(
        "GET",
        PARTITION + "/replicas/{broker_id}",
        "getKafkaReplica",
        "One replica of a partition.",
        "Replica",
        lambda a: rq.GetReplica(_topic(a), a.number("partition_id"), a.number("broker_id")),
    ),
    Route(
        "GET",
        PARTITION + "/records",
        "readOdradekRecords",
        "odradek's own: read a partition's records from an offset or a time, bounded in count, bytes and wait.",
        "Records",
        lambda a: bodies.read_records(_topic(a), a.number("partition_id"), a.query),
        query=_READ_QUERY,
        own=True,
    ),
    Route(
        "GET",
        CLUSTER + "/topics/-/partitions/-/reassignment",
        "listKafkaPartitionReassignments",
        "The partitions being reassigned.",
        "Partition",
        lambda a: rq.ListReassignments(),
    ),
    Route(
        "GET",
        TOPIC + "/partitions/-/reassignment",
        "listKafkaPartitionReassignmentByTopic",
        "A topic's partitions being reassigned.",
        "Partition",
        lambda a: rq.ListReassignments(_topic(a)),
    ),
    Route(
        "GET",
        PARTITION + "/reassignment",
        "getKafkaPartitionReassignment",
        "A partition's reassignment (empty lists: none).",
        "Partition",
        lambda a: rq.GetReassignment(_topic(a), a.number("partition_id")),
    ),
    Route(
        "GET",
        TOPIC + "/configs",
        "listKafkaTopicConfigs",
        "A topic's configs.",
        "Configs",
        lambda a: rq.ListTopicConfigs(_topic(a)),
    ),
    Route(
        "POST",
        TOPIC + "/configs:alter",
        "updateKafkaTopicConfigBatch",
        "Set or reset several of a topic's configs at once (all or none).",
        "Configs",
        lambda a: bodies.alter_configs(_topic(a), a.body),
        status=204,
        body="AlterConfigBatchRequest",
    ),
    Route(
        "GET",
        TOPIC + "/configs/{name}",
        "getKafkaTopicConfig",
        "One of a topic's configs.",
        "Configs",
        lambda a: rq.GetTopicConfig(_topic(a), a.path["name"]),
    ),
    Route(
        "PUT",
        TOPIC + "/configs/{name}",
        "updateKafkaTopicConfig",
        "Set one of a topic's configs.",
        "Configs",
        lambda a: rq.AlterTopicConfigs(
            _topic(a), (rq.ConfigChange(a.path["name"], "SET", bodies.config_value(a.body)),)
        ),
        status=204,
        body="UpdateConfigRequest",
    ),
    Route(
        "DELETE",
        TOPIC + "/configs/{name}",
        "deleteKafkaTopicConfig",
        "Reset one of a topic's configs to its default.",
        "Configs",
        lambda a: rq.AlterTopicConfigs(_topic(a), (rq.ConfigChange(a.path["name"], "DELETE"),)),
        status=204,
    ),
    Route(
        "POST",
        TOPIC + "/records",
        "produceRecord",
        "Produce one record (acks=all).",
        "Records",
        lambda a: bodies.produce_record(_topic(a), a.body),
        body="ProduceRequest",
    ),
    Route(
        "GET",
        CLUSTER + "/consumer-groups",
        "listKafkaConsumerGroups",
        "The consumer groups.",
        "Consumer Group",
        lambda a: rq.ListGroups(),
    ),
    Route(
        "GET",
        GROUP,
        "getKafkaConsumerGroup",
        "One consumer group.",
        "Consumer Group",
        lambda a: rq.GetGroup(a.path["consumer_group_id"]),
    ),
    Route(
        "GET",
        GROUP + "/consumers",
        "listKafkaConsumers",
        "A group's members.",
        "Consumer Group",
        lambda a: rq.ListConsumers(a.path["consumer_group_id"]),
    ),
    Route(
        "GET",
        CONSUMER,
        "getKafkaConsumer",
        "One member of a group.",
        "Consumer Group",
        lambda a: rq.GetConsumer(a.path["consumer_group_id"], a.path["consumer_id"]),
    ),
    Route(
        "GET",
        CONSUMER + "/assignments",
        "listKafkaConsumerAssignment",
        "The partitions assigned to a member.",
        "Consumer Group",
        lambda a: rq.ListAssignments(a.path["consumer_group_id"], a.path["consumer_id"]),
    ),
    Route(
        "GET",
        CONSUMER + "/assignments/{topic_name}/partitions/{partition_id}",
        "getKafkaConsumerAssignment",
        "One partition assigned to a member.",
        "Consumer Group",
        lambda a: rq.GetAssignment(
            a.path["consumer_group_id"], a.path["consumer_id"], _topic(a), a.number("partition_id")
        ),
    ),
    Route(
        "GET",
        GROUP + "/lags",
        "listKafkaConsumerLags",
        "The group's lag on each partition it has committed.",
        "Consumer Group",
        lambda a: rq.ListLags(a.path["consumer_group_id"]),
    ),
    Route(
        "GET",
        GROUP + "/lags/{topic_name}/partitions/{partition_id}",
        "getKafkaConsumerLag",
        "The group's lag on one partition.",
        "Consumer Group",
        lambda a: rq.GetLag(a.path["consumer_group_id"], _topic(a), a.number("partition_id")),
    ),
    Route(
        "GET",
        GROUP + "/lag-summary",
        "getKafkaConsumerGroupLagSummary",
        "The group's largest and total lag.",
        "Consumer Group",
        lambda a: rq.GetLagSummary(a.path["consumer_group_id"]),
    ),
    _acls("GET", "getKafkaAcls", "The ACLs matching the query.", delete=False),
    Route(
        "POST",
        CLUSTER + "/acls",
        "createKafkaAcls",
        "Create an ACL.",
        "ACL",
        lambda a: rq.CreateAcl(bodies.acl_binding(a.body)),
        status=201,
        body="CreateAclRequest",
    ),
    _acls("DELETE", "deleteKafkaAcls", "Delete the ACLs matching the query.", delete=True),
    *CONSOLE_ROUTES,
)


def route(method: str, target: str, body: bytes, routes: tuple[Route, ...] = ROUTES) -> Routed:
    """The typed request for ``method`` on ``target`` (path and query), or the RestError refusing it."""
    split = urlsplit(target)
    raw = split.path.strip("/")
    segments = tuple(unquote(s) for s in raw.split("/")) if raw else ()
    matched = [(r, path) for r in routes if (path := _match(r.segments, segments)) is not None]
    # A literal segment wins over a parameter (``topics/t/partitions/-/reassignment`` is the topic's listing).
    matched.sort(key=lambda m: -sum(not s.startswith("{") for s in m[0].segments))
    if not matched:
        raise errors.not_found(split.path)
    found = next(((r, path) for r, path in matched if r.method == method), None)
    if found is None:
        raise errors.method_not_allowed(method, split.path)
    r, path = found
    query = Query(split.query)
    query.check(tuple(p.name for p in r.query))
    request = r.build(Args(path, query, body))
    return Routed(r, request, path.get("cluster_id"))


def _match(template: tuple[str, ...], segments: tuple[str, ...]) -> dict[str, str] | None:
    if len(template) != len(segments):
        return None
    path: dict[str, str] = {}
    for t, s in zip(template, segments, strict=True):
        if t.startswith("{"):
            if not s:
                return None
            path[t[1:-1]] = s
        elif t != s:
            return None
    return path

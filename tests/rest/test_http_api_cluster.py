"""The HTTP API in a real cluster (1 controller, 2 brokers, each serving it), with a plain HTTP client (urllib):
Confluent REST Proxy v3's cluster, broker, topic, partition, config, consumer group, lag and ACL resources; records
produced (JSON, binary and string, with keys, headers, partitions) and read back from either broker (a partition
led by the other one is forwarded to its leader); and bad input (unknown topic, bad JSON, an oversized record, a
bad payload) answered in Confluent's error shape with nothing written; and the web console's own routes where
partitions and groups are on either broker (search, republish, offset resets, details, metrics, users, quotas)."""

from __future__ import annotations

import base64
import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from odradek.broker.rest.routes import ROUTES
from odradek.client.admin import Admin
from odradek.client.consumer import Consumer
from odradek.client.structs import TopicPartition
from odradek.deploy.local import DevCluster, running_cluster

from ..integration.conftest import FAST, wait_for

pytestmark = pytest.mark.integration


def http(url: str, method: str = "GET", body: Any = None, raw: bytes | None = None) -> tuple[int, Any]:
    """Status and JSON answer (None for an empty body)."""
    data = raw if raw is not None else None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method)
    request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            status, text = response.status, response.read()
    except urllib.error.HTTPError as e:
        status, text = e.code, e.read()
    return status, json.loads(text) if text else None


def confluent_error(answer: Any, status: int, code: int, got: int) -> None:
    assert got == status, answer
    assert set(answer) == {"error_code", "message"} and answer["error_code"] == code, answer


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevCluster]:
    with running_cluster(1, 2, config=FAST, directory=tmp_path_factory.mktemp("http-api"), http_api=True) as c:
        yield c


@pytest.fixture(scope="module")
def admin(cluster: DevCluster) -> Iterator[Admin]:
    a = Admin({"bootstrap.servers": cluster.bootstrap_servers, "request.timeout.ms": 15000})
    yield a
    a.close()


@pytest.fixture(scope="module")
def urls(cluster: DevCluster) -> list[str]:
    """Each broker's cluster URL, ``http://host:port/v3/clusters/<id>``."""
    out = [f"{u}/v3/clusters/{cluster.cluster_id}" for u in cluster.http_urls.split(",")]
    assert len(out) == 2
    return out


def create_topic(url: str, name: str, partitions: int, **extra: Any) -> dict[str, Any]:
    status, answer = http(f"{url}/topics", "POST", {"topic_name": name, "partitions_count": partitions, **extra})
    assert status == 201, answer
    return answer


def ends(admin: Admin, topic: str) -> list[int]:
    return [p.high_watermark for p in admin.describe_topic(topic).partitions]


def test_cluster_and_brokers(cluster: DevCluster, urls: list[str]) -> None:
    base = cluster.http_urls.split(",")[0]
    status, listed = http(f"{base}/v3/clusters")
    assert status == 200 and listed["kind"] == "KafkaClusterList"
    [found] = listed["data"]
    assert found["cluster_id"] == cluster.cluster_id and found["metadata"]["self"] == urls[0]
    assert found["topics"] == {"related": f"{urls[0]}/topics"}
    status, brokers = http(f"{urls[0]}/brokers")
    ids = sorted(b["broker_id"] for b in brokers["data"])
    assert status == 200 and ids == sorted(n.node_id for n in cluster.nodes if "broker" in n.roles)
    status, one = http(f"{urls[1]}/brokers/{ids[0]}")
    assert status == 200 and one["broker_id"] == ids[0] and one["kind"] == "KafkaBroker"
    status, answer = http(f"{urls[0]}/brokers/99")
    confluent_error(answer, 404, 404, status)
    status, answer = http(f"{base}/v3/clusters/not-this-one/topics")
    confluent_error(answer, 404, 404, status)


def test_a_brokers_configs_are_its_own_whichever_broker_is_asked(urls: list[str]) -> None:
    status, brokers = http(f"{urls[0]}/brokers")
    for broker_id in sorted(b["broker_id"] for b in brokers["data"]):
        for url in urls:
            status, configs = http(f"{url}/brokers/{broker_id}/configs")
            assert status == 200, configs
            by_name = {c["name"]: c for c in configs["data"]}
            assert by_name["broker.id"]["value"] == str(broker_id) and by_name["broker.id"]["is_read_only"]
            assert by_name["log.retention.ms"]["source"] in ("DEFAULT_CONFIG", "STATIC_BROKER_CONFIG")
            status, one = http(f"{url}/brokers/{broker_id}/configs/node.id")
            assert status == 200 and one["value"] == str(broker_id) and one["broker_id"] == broker_id
    status, cluster_configs = http(f"{urls[0]}/broker-configs")
    assert status == 200 and cluster_configs["kind"] == "KafkaClusterConfigList"


def test_topic_lifecycle_with_partitions_replicas_and_configs(admin: Admin, urls: list[str]) -> None:
    a, b = urls
    created = create_topic(
        a, "lifecycle", 3, replication_factor=1, configs=[{"name": "retention.ms", "value": "3600000"}]
    )
    assert (created["topic_name"], created["partitions_count"], created["replication_factor"]) == ("lifecycle", 3, 1)
    status, answer = http(f"{a}/topics", "POST", {"topic_name": "lifecycle", "partitions_count": 3})
    confluent_error(answer, 400, 40002, status)
    status, answer = http(f"{a}/topics", "POST", {"topic_name": "only-checked", "validate_only": True})
    assert status == 201
    assert "only-checked" not in admin.list_topics()
    status, topic = http(f"{b}/topics/lifecycle")
    assert status == 200 and topic["partitions_count"] == 3 and not topic["is_internal"]
    status, listed = http(f"{a}/topics")
    assert "lifecycle" in [t["topic_name"] for t in listed["data"]]
    status, partitions = http(f"{a}/topics/lifecycle/partitions")
    assert [p["partition_id"] for p in partitions["data"]] == [0, 1, 2]
    leader = admin.describe_topic("lifecycle").partitions[1].leader
    status, partition = http(f"{b}/topics/lifecycle/partitions/1")
    assert partition["leader"]["related"].endswith(f"/topics/lifecycle/partitions/1/replicas/{leader}")
    status, replicas = http(f"{a}/topics/lifecycle/partitions/1/replicas")
    assert [(r["broker_id"], r["is_leader"], r["is_in_sync"]) for r in replicas["data"]] == [(leader, True, True)]
    status, reassignment = http(f"{a}/topics/lifecycle/partitions/1/reassignment")
    assert status == 200 and reassignment["adding_replicas"] == [] and reassignment["removing_replicas"] == []
    status, reassignments = http(f"{a}/topics/-/partitions/-/reassignment")
    assert status == 200 and reassignments["data"] == []

    status, configs = http(f"{a}/topics/lifecycle/configs")
    by_name = {c["name"]: c for c in configs["data"]}
    assert by_name["retention.ms"]["value"] == "3600000" and by_name["retention.ms"]["source"] == "DYNAMIC_TOPIC_CONFIG"
    assert by_name["cleanup.policy"]["source"] in ("DEFAULT_CONFIG", "STATIC_BROKER_CONFIG")
    # Each broker answers from its own metadata, caught up with a write made through it (as on the other listeners).
    status, _ = http(f"{b}/topics/lifecycle/configs/segment.ms", "PUT", {"value": "60000"})
    assert status == 204
    status, one = http(f"{b}/topics/lifecycle/configs/segment.ms")
    assert one["value"] == "60000" and one["source"] == "DYNAMIC_TOPIC_CONFIG"
    batch = {"data": [{"name": "segment.ms", "operation": "DELETE"}, {"name": "max.message.bytes", "value": "2048"}]}
    assert http(f"{a}/topics/lifecycle/configs:alter", "POST", batch)[0] == 204
    assert http(f"{a}/topics/lifecycle/configs/retention.ms", "DELETE")[0] == 204
    own = {c["name"]: c["value"] for c in http(f"{a}/topics/lifecycle/configs")[1]["data"]}
    assert own["max.message.bytes"] == "2048" and own["segment.ms"] != "60000" and own["retention.ms"] != "3600000"
    wait_for(lambda: admin.describe_topic("lifecycle").configs == {"max.message.bytes": "2048"}, 10, 0.2, "the configs")
    status, answer = http(f"{a}/topics/lifecycle/configs/no.such.config", "PUT", {"value": "1"})
    confluent_error(answer, 400, 40002, status)

    assert http(f"{b}/topics/lifecycle", "DELETE")[0] == 204
    wait_for(lambda: http(f"{a}/topics/lifecycle")[0] == 404, 10, 0.2, "the topic's deletion")
    status, answer = http(f"{a}/topics/lifecycle")
    confluent_error(answer, 404, 40403, status)


def test_records_produced_in_each_type_are_read_back_from_either_broker(admin: Admin, urls: list[str]) -> None:
    a, b = urls
    create_topic(a, "records", 2)
    leaders = {p.partition: p.leader for p in admin.describe_topic("records").partitions}
    key = b"\x00\x01key"
    headers = [{"name": "trace", "value": base64.b64encode(b"t-1").decode()}, {"name": "empty", "value": None}]
    produced = []
    for partition in (0, 1):  # one of them is led by the other broker: the produce is forwarded there
        body = {
            "partition_id": partition,
            "key": {"type": "BINARY", "data": base64.b64encode(key).decode()},
            "value": {"type": "JSON", "data": {"n": partition, "s": "é"}},
            "headers": headers,
            "timestamp": "2024-01-02T03:04:05.678Z",
        }
        status, answer = http(f"{a}/topics/records/records", "POST", body)
        assert status == 200, answer
        assert (answer["error_code"], answer["partition_id"], answer["offset"]) == (200, partition, 0)
        assert answer["timestamp"] == "2024-01-02T03:04:05.678Z"
        assert answer["key"] == {"type": "BINARY", "size": len(key)}
        produced.append(answer)
    status, answer = http(
        f"{b}/topics/records/records", "POST", {"partition_id": 1, "value": {"type": "STRING", "data": "text"}}
    )
    assert status == 200 and answer["offset"] == 1 and answer["key"] is None
    status, keyed = http(f"{b}/topics/records/records", "POST", {"key": {"type": "STRING", "data": "user-1"}})
    assert status == 200
    assert ends(admin, "records")[keyed["partition_id"]] >= 1
    assert len(set(leaders.values())) == 2  # so each broker forwarded one of the records to the other

    for url in urls:
        status, read = http(f"{url}/topics/records/partitions/0/records?offset=0&max_records=1&timeout_ms=0")
        assert status == 200, read
        [first] = read["data"]
        assert first["offset"] == 0 and first["value"] == {"type": "JSON", "data": {"n": 0, "s": "é"}}
        assert base64.b64decode(first["key"]["data"]) == key and first["key"]["type"] == "BINARY"
        assert first["headers"] == headers
        assert first["timestamp"] == "2024-01-02T03:04:05.678Z"
        assert read["next_offset"] == 1
        status, more = http(read["metadata"]["next"])
        assert status == 200 and [r["offset"] for r in more["data"]] == list(range(1, more["next_offset"]))
        status, second = http(f"{url}/topics/records/partitions/1/records?offset=1&timeout_ms=0")
        assert [r["value"] for r in second["data"][:1]] == [
            {"type": "BINARY", "data": base64.b64encode(b"text").decode()}
        ]

    status, by_time = http(f"{b}/topics/records/partitions/1/records?timestamp=2024-01-02T03:04:05.678Z&timeout_ms=0")
    assert status == 200 and by_time["data"][0]["offset"] == 0
    started = time.monotonic()
    status, waited = http(f"{a}/topics/records/partitions/0/records?offset=latest&timeout_ms=300")
    assert status == 200 and waited["data"] == [] and time.monotonic() - started >= 0.25


def test_consumer_groups_members_and_lag(cluster: DevCluster, admin: Admin, urls: list[str]) -> None:
    a, b = urls
    create_topic(a, "lagging", 2)
    for i in range(6):
        assert http(f"{a}/topics/lagging/records", "POST", {"partition_id": i % 2, "value": {"data": i}})[0] == 200
    admin.alter_group_offsets("idle", {TopicPartition("lagging", 0): 1, TopicPartition("lagging", 1): 3})
    consumer = Consumer(
        {"bootstrap.servers": cluster.bootstrap_servers, "group.id": "live", "auto.offset.reset": "earliest"}
    )
    try:
        consumer.subscribe(["lagging"])
        seen = 0
        deadline = time.monotonic() + 60
        while seen < 6 and time.monotonic() < deadline:
            seen += len(consumer.poll(timeout_ms=500))
        assert seen == 6
        consumer.commit()
        for url in urls:  # each broker lists every broker's groups
            status, groups = http(f"{url}/consumer-groups")
            assert status == 200
            found = {g["consumer_group_id"]: g for g in groups["data"]}
            assert {"idle", "live"} <= set(found) and found["idle"]["state"] == "EMPTY"
        status, live = http(f"{b}/consumer-groups/live")
        assert status == 200 and live["state"] == "STABLE" and live["partition_assignor"] and not live["is_simple"]
        status, members = http(f"{a}/consumer-groups/live/consumers")
        [member] = members["data"]
        status, assigned = http(f"{a}/consumer-groups/live/consumers/{member['consumer_id']}/assignments")
        assert sorted(x["partition_id"] for x in assigned["data"]) == [0, 1]
        status, lags = http(f"{b}/consumer-groups/live/lags")
        assert [(x["partition_id"], x["lag"], x["consumer_id"]) for x in lags["data"]] == [
            (0, 0, member["consumer_id"]),
            (1, 0, member["consumer_id"]),
        ]
    finally:
        consumer.close()
    status, lags = http(f"{a}/consumer-groups/idle/lags")
    assert status == 200
    assert [(x["partition_id"], x["current_offset"], x["log_end_offset"], x["lag"]) for x in lags["data"]] == [
        (0, 1, 3, 2),
        (1, 3, 3, 0),
    ]
    status, one = http(f"{b}/consumer-groups/idle/lags/lagging/partitions/0")
    assert status == 200 and one["lag"] == 2
    status, summary = http(f"{b}/consumer-groups/idle/lag-summary")
    assert (summary["max_lag"], summary["total_lag"], summary["max_lag_partition_id"]) == (2, 2, 0)
    status, answer = http(f"{a}/consumer-groups/no-such-group")
    confluent_error(answer, 404, 404, status)


def test_acls_are_created_searched_and_deleted(urls: list[str]) -> None:
    a, b = urls
    acl = {
        "resource_type": "TOPIC",
        "resource_name": "audit-",
        "pattern_type": "PREFIXED",
        "principal": "User:alice",
        "host": "*",
        "operation": "READ",
        "permission": "ALLOW",
    }
    status, created = http(f"{a}/acls", "POST", acl)
    assert status == 201 and created["kind"] == "KafkaAcl"
    wait_for(lambda: http(f"{b}/acls?principal=User%3Aalice")[1]["data"], 10, 0.2, "the ACL on the other broker")
    status, found = http(f"{b}/acls?resource_type=TOPIC&principal=User%3Aalice")
    assert [{k: x[k] for k in acl} for x in found["data"]] == [acl]
    status, answer = http(f"{a}/acls?resource_type=TOPIC", "DELETE")
    confluent_error(answer, 400, 400, status)
    query = "resource_type=TOPIC&pattern_type=ANY&operation=ANY&permission=ANY&principal=User%3Aalice"
    status, deleted = http(f"{a}/acls?{query}", "DELETE")
    assert status == 200 and [x["resource_name"] for x in deleted["data"]] == ["audit-"]
    assert http(f"{a}/acls")[1]["data"] == []


def test_bad_input_is_refused_in_confluents_shape_and_writes_nothing(admin: Admin, urls: list[str]) -> None:
    a = urls[0]
    create_topic(a, "guarded", 2, configs=[{"name": "max.message.bytes", "value": "1024"}])
    assert http(f"{a}/topics/guarded/records", "POST", {"partition_id": 0, "value": {"data": "ok"}})[0] == 200
    before = ends(admin, "guarded")

    status, answer = http(f"{a}/topics/no-such-topic/records", "POST", {"value": {"data": 1}})
    confluent_error(answer, 404, 40403, status)
    assert "no-such-topic" not in admin.list_topics()  # not created on the way
    status, answer = http(f"{a}/topics/no-such-topic/partitions/0/records")
    confluent_error(answer, 404, 40403, status)
    status, answer = http(f"{a}/topics/no-such-topic")
    confluent_error(answer, 404, 40403, status)
    for url in urls:
        status, answer = http(f"{url}/topics/guarded/records", "POST", raw=b'{"value": {"data": ')
        confluent_error(answer, 400, 400, status)
        big = {"partition_id": 0, "value": {"type": "BINARY", "data": base64.b64encode(bytes(4096)).decode()}}
        for target in (0, 1):  # led by either broker: the leader refuses it
            status, answer = http(f"{url}/topics/guarded/records", "POST", {**big, "partition_id": target})
            confluent_error(answer, 413, 41301, status)
        status, answer = http(f"{url}/topics/guarded/records", "POST", {"value": {"type": "BINARY", "data": "%%"}})
        confluent_error(answer, 422, 42206, status)
        status, answer = http(f"{url}/topics/guarded/records", "POST", {"partition_id": 7, "value": {"data": 1}})
        confluent_error(answer, 404, 40402, status)
        status, answer = http(f"{url}/topics/guarded/records", "POST", {"value": {"data": 1}, "extra": True})
        confluent_error(answer, 400, 400, status)
        status, answer = http(f"{url}/topics/guarded/records", "PUT", {"value": {"data": 1}})
        confluent_error(answer, 405, 405, status)
        status, answer = http(f"{url}/topics/guarded/partitions/0/records?offset=999&timeout_ms=0")
        confluent_error(answer, 400, 40002, status)
    assert ends(admin, "guarded") == before  # nothing was written

    status, answer = http(f"{a}/topics/guarded/partitions/0/records?offset=0&timeout_ms=0")
    assert [r["value"]["data"] for r in answer["data"]] == ["ok"]


def test_the_openapi_document_describes_every_route(urls: list[str], cluster: DevCluster) -> None:
    base = cluster.http_urls.split(",")[1]
    status, doc = http(f"{base}/openapi.json")
    assert status == 200 and doc["openapi"].startswith("3.")
    described = {(path, method) for path, ops in doc["paths"].items() for method in ops}
    assert described == {(r.template, r.method.lower()) for r in ROUTES}
    assert "security" not in doc  # no authentication on this cluster


def test_every_related_link_of_the_answers_is_served(urls: list[str]) -> None:
    a = urls[0]
    create_topic(a, "linked", 1)
    seen: set[str] = set()
    pending = [a, f"{a}/topics/linked", f"{a}/topics/linked/partitions/0", f"{a}/brokers"]
    while pending:
        url = pending.pop()
        if url in seen:
            continue
        seen.add(url)
        status, answer = http(url)
        assert status == 200, (url, answer)
        items = answer.get("data", [answer]) if isinstance(answer, dict) else []
        for item in items:
            for value in item.values():
                if (
                    isinstance(value, dict)
                    and set(value) == {"related"}
                    and "/consumer-groups/" not in value["related"]
                ):
                    pending.append(value["related"])
    assert len(seen) > 10


def search_all(url: str, topic: str, body: dict[str, Any]) -> tuple[list[tuple[int, int]], int]:
    """Every match of a search, paging with its cursor: (partition, offset) pairs in the order found, and pages."""
    found: list[tuple[int, int]] = []
    pages = 0
    while True:
        status, page = http(f"{url}/topics/{topic}/records:search", "POST", body)
        assert status == 200, page
        pages += 1
        found += [(r["partition_id"], r["offset"]) for r in page["data"]]
        if page["cursor"] is None:
            return found, pages
        body = {**body, "cursor": page["cursor"]}


def test_the_consoles_routes_across_brokers(cluster: DevCluster, admin: Admin, urls: list[str]) -> None:
    """The web console's routes (docs/console.md) where partitions, their data and a group's coordinator are on
    either broker: a search's pages merged from both leaders, paged without a match skipped or repeated; a topic's
    details with each broker's sizes; partitions added; a range republished across brokers; a group's offsets
    reset from either broker; the brokers' metrics, SCRAM users and quotas."""
    a, b = urls
    create_topic(a, "browsed", 2)
    leaders = {p.partition: p.leader for p in admin.describe_topic("browsed").partitions}
    assert len(set(leaders.values())) == 2  # one partition led by each broker
    for i in range(10):
        body = {"partition_id": i % 2, "key": {"type": "STRING", "data": f"k{i}"}, "value": {"data": {"n": i}}}
        body["headers"] = [{"name": "even" if i % 2 == 0 else "odd", "value": base64.b64encode(b"1").decode()}]
        assert http(f"{a}/topics/browsed/records", "POST", body)[0] == 200
    everything, pages = search_all(b, "browsed", {"max_matches": 3})
    assert sorted(everything) == [(p, o) for p in (0, 1) for o in range(5)] and pages == 4
    assert search_all(a, "browsed", {"filter": {"key": "k7"}})[0] == [(1, 3)]
    assert search_all(b, "browsed", {"filter": {"header": "even"}, "max_matches": 2})[0] == [(0, o) for o in range(5)]
    assert search_all(a, "browsed", {"filter": {"json_path": "$.n", "json_value": 4}})[0] == [(0, 2)]
    status, tail = http(f"{a}/topics/browsed/records:search", "POST", {"start": "end", "tail": 1, "partitions": [1]})
    assert [(r["partition_id"], r["offset"]) for r in tail["data"]] == [(1, 4)] and tail["cursor"] is None

    status, details = http(f"{b}/topics/browsed/details")
    assert status == 200 and details["sizes_error"] is None
    for p in details["partitions"]:
        assert (p["leader"], p["isr"], p["log_end_offset"]) == (leaders[p["partition_id"]], p["replicas"], 5)
        assert p["size_bytes"] > 0 and list(p["replica_sizes"]) == [str(r) for r in sorted(p["replicas"])]
    status, grown = http(f"{b}/topics/browsed", "PATCH", {"partitions_count": 3})
    assert status == 200 and grown["partitions_count"] == 3
    status, answer = http(f"{a}/topics/browsed", "PATCH", {"partitions_count": 2})
    confluent_error(answer, 400, 40002, status)

    create_topic(a, "browsed-copy", 2)
    range_ = {"destination": "browsed-copy", "partition_id": 1, "start_offset": 1, "end_offset": 4}
    status, copied = http(f"{a}/topics/browsed/records:republish", "POST", {**range_, "same_partition": True})
    assert status == 200 and copied["republished"] == 3 and copied["partitions"][0]["partition_id"] == 1
    status, read = http(f"{b}/topics/browsed-copy/partitions/1/records?timeout_ms=0")
    assert [r["value"]["data"] for r in read["data"]] == [{"n": 3}, {"n": 5}, {"n": 7}]
    assert [r["headers"][0]["name"] for r in read["data"]] == ["odd"] * 3

    admin.alter_group_offsets("resettable", {TopicPartition("browsed", 0): 3, TopicPartition("browsed", 1): 4})
    for url in urls:  # one of them forwards to the group's coordinator
        status, dry = http(f"{url}/consumer-groups/resettable/offsets:reset", "POST", {"to": "latest", "dry_run": True})
        assert status == 200 and [x["offset"] for x in dry["data"]] == [5, 5, 0], dry
    status, reset = http(f"{b}/consumer-groups/resettable/offsets:reset", "POST", {"to": "earliest"})
    assert [(x["partition_id"], x["previous_offset"], x["offset"]) for x in reset["data"]] == [
        (0, 3, 0),
        (1, 4, 0),
        (2, None, 0),
    ]
    status, lags = http(f"{a}/consumer-groups/resettable/lags")
    assert [x["current_offset"] for x in lags["data"]] == [0, 0, 0]

    status, overview = http(f"{a}/overview")
    assert status == 200 and len(overview["brokers"]) == 2 and overview["offline_count"] == 0
    status, metrics = http(f"{b}/brokers/-/metrics")
    assert sorted(m["broker_id"] for m in metrics["data"]) == sorted(set(leaders.values()))
    assert sum(m["messages_in"].get("browsed", 0) for m in metrics["data"]) >= 10
    status, _ = http(f"{a}/user-scram-credentials", "POST", {"user": "carol", "password": "carol-secret"})
    assert status == 201
    # Each broker answers from its own metadata, caught up with the write soon after.
    wait_for(lambda: "carol" in [u["user"] for u in http(f"{b}/user-scram-credentials")[1]["data"]], 10, 0.1, "b")
    assert http(f"{a}/user-scram-credentials/carol?mechanism=SCRAM-SHA-256", "DELETE")[0] == 204
    quota = {"entity": [{"entity_type": "client-id", "name": None}], "set": {"producer_byte_rate": 2048}}
    assert http(f"{b}/client-quotas:alter", "POST", quota)[0] == 204
    wanted = {"entity": [{"entity_type": "client-id", "name": None}], "values": {"producer_byte_rate": 2048.0}}

    def quotas() -> list[dict[str, Any]]:
        return [{k: q[k] for k in ("entity", "values")} for q in http(f"{a}/client-quotas")[1]["data"]]

    wait_for(lambda: wanted in quotas(), 10, 0.1, "the default client-id quota on the other broker")

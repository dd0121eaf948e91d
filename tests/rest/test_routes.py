"""The HTTP API's router, request bodies and OpenAPI document, without a broker: every route is served by the
table and described by the document, and bad input is refused in Confluent's error shape before anything runs."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from odradek.broker.rest import openapi
from odradek.broker.rest import requests as rq
from odradek.broker.rest.errors import RestError
from odradek.broker.rest.routes import ROUTES, route
from odradek.client.common.acls import AclBinding, AclOperation, AclPermissionType, PatternType, ResourceType

C = "/v3/clusters/abc"


def refused(method: str, target: str, body: Any = b"") -> RestError:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    with pytest.raises(RestError) as e:
        route(method, target, raw)
    assert set(e.value.body()) == {"error_code", "message"}
    return e.value


def routed(method: str, target: str, body: Any = b"") -> rq.Request:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return route(method, target, raw).request


def test_paths_become_typed_requests_with_their_cluster_id() -> None:
    found = route("GET", f"{C}/topics/orders/partitions/2", b"")
    assert found.request == rq.GetPartition("orders", 2) and found.cluster_id == "abc"
    assert routed("GET", "/v3/clusters") == rq.ListClusters()
    assert route("GET", "/openapi.json", b"").cluster_id is None
    assert routed("GET", f"{C}/brokers/3/configs/num.partitions") == rq.GetBrokerConfig(3, "num.partitions")
    assert routed("GET", f"{C}/consumer-groups/g%2F1/lags/t/partitions/0") == rq.GetLag("g/1", "t", 0)
    assert routed("DELETE", f"{C}/topics/t/configs/retention.ms") == rq.AlterTopicConfigs(
        "t", (rq.ConfigChange("retention.ms", "DELETE"),)
    )
    assert routed("PUT", f"{C}/topics/t/configs/retention.ms", {"value": "1000"}) == rq.AlterTopicConfigs(
        "t", (rq.ConfigChange("retention.ms", "SET", "1000"),)
    )


def test_a_literal_segment_wins_over_a_parameter() -> None:
    assert routed("GET", f"{C}/topics/t/partitions/-/reassignment") == rq.ListReassignments("t")
    assert routed("GET", f"{C}/topics/-/partitions/-/reassignment") == rq.ListReassignments()
    assert routed("GET", f"{C}/topics/t/partitions/3/reassignment") == rq.GetReassignment("t", 3)


def test_unknown_paths_methods_and_query_parameters_are_refused() -> None:
    e = refused("GET", f"{C}/nope")
    assert (e.status, e.code) == (404, 404)
    e = refused("PATCH", f"{C}/topics")
    assert (e.status, e.code) == (405, 405)
    e = refused("GET", f"{C}/topics?include_authorized_operations=true")
    assert (e.status, e.code) == (400, 400) and "include_authorized_operations" in e.message
    e = refused("GET", f"{C}/topics/t/partitions/x")
    assert (e.status, e.code) == (400, 400)


@pytest.mark.parametrize(
    "body",
    [
        b"{not json",
        b"[1, 2]",
        b"",
        {"partitions_count": 3},
        {"topic_name": "t", "partitions_count": "3"},
        {"topic_name": "t", "partitions_count": 0},
        {"topic_name": "t", "shiny": True},
        {"topic_name": "t", "configs": [{"name": "retention.ms"}]},
        {"topic_name": "t", "replicas_assignments": {"1": [1]}},
        # Kafka's INT32 fields: a larger number is the caller's mistake (400), not the server's (500)
        {"topic_name": "t", "partitions_count": 2**31},
        {"topic_name": "t", "replication_factor": 2**40},
        {"topic_name": "t", "replicas_assignments": {"0": [2**31]}},
    ],
)
def test_a_bad_topic_creation_is_a_bad_request(body: Any) -> None:
    e = refused("POST", f"{C}/topics", body)
    assert (e.status, e.code) == (400, 400)


def test_a_topic_creation() -> None:
    body = {
        "topic_name": "t",
        "partitions_count": 2,
        "replication_factor": 1,
        "configs": [{"name": "cleanup.policy", "value": "compact"}],
        "validate_only": True,
    }
    assert routed("POST", f"{C}/topics", body) == rq.CreateTopic("t", 2, 1, (("cleanup.policy", "compact"),), (), True)
    assigned = routed("POST", f"{C}/topics", {"topic_name": "t", "replicas_assignments": {"1": [2], "0": [1, 2]}})
    assert assigned == rq.CreateTopic("t", assignments=((1, 2), (2,)))


def test_a_config_batch() -> None:
    body = {"data": [{"name": "retention.ms", "value": "5"}, {"name": "cleanup.policy", "operation": "DELETE"}]}
    assert routed("POST", f"{C}/topics/t/configs:alter", body) == rq.AlterTopicConfigs(
        "t", (rq.ConfigChange("retention.ms", "SET", "5"), rq.ConfigChange("cleanup.policy", "DELETE"))
    )
    assert refused("POST", f"{C}/topics/t/configs:alter", {"data": []}).code == 400
    assert refused("POST", f"{C}/topics/t/configs:alter", {"data": [{"name": "a", "operation": "MERGE"}]}).code == 400
    assert refused("PUT", f"{C}/topics/t/configs/a", {"value": None}).code == 400


def test_produce_bodies_in_each_type() -> None:
    body = {
        "partition_id": 1,
        "key": {"type": "BINARY", "data": base64.b64encode(b"\x00k").decode()},
        "value": {"type": "JSON", "data": {"n": [1, 2], "s": "é"}},
        "headers": [{"name": "h", "value": base64.b64encode(b"v").decode()}, {"name": "none", "value": None}],
        "timestamp": "2021-02-05T19:14:42.123Z",
    }
    r = routed("POST", f"{C}/topics/t/records", body)
    assert r == rq.ProduceRecord(
        "t",
        1,
        rq.Payload(b"\x00k", "BINARY"),
        rq.Payload('{"n":[1,2],"s":"é"}'.encode(), "JSON"),
        (("h", b"v"), ("none", None)),
        1612552482123,
    )
    plain = routed("POST", f"{C}/topics/t/records", {"value": {"type": "STRING", "data": "hi"}, "timestamp": 5})
    assert plain == rq.ProduceRecord("t", value=rq.Payload(b"hi", "STRING"), timestamp_ms=5)
    untyped = routed("POST", f"{C}/topics/t/records", {"key": {"data": "k"}, "value": {"data": None}})
    assert untyped == rq.ProduceRecord("t", key=rq.Payload(b'"k"', "JSON"), value=rq.Payload(None, "JSON"))


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        (b"{", 400, 400),
        ({"value": "not an object"}, 400, 400),
        ({"value": {"data": 1}, "partition": 0}, 400, 400),
        ({"partition_id": -1}, 400, 400),
        ({"partition_id": "1"}, 400, 400),
        ({"timestamp": "yesterday"}, 400, 400),
        ({"headers": [{"value": "eA=="}]}, 400, 400),
        ({"value": {"type": "BINARY", "data": "not base64!"}}, 422, 42206),
        ({"value": {"type": "STRING", "data": 5}}, 422, 42206),
        ({"value": {"type": "AVRO", "data": {}}}, 422, 42206),
        ({"value": {"schema_id": 1, "data": {}}}, 422, 42206),
        ({"value": {"type": "XML", "data": "<a/>"}}, 422, 42206),
        ({"headers": [{"name": "h", "value": "%%"}]}, 422, 42206),
    ],
)
def test_bad_produce_bodies_are_refused(body: Any, status: int, code: int) -> None:
    e = refused("POST", f"{C}/topics/t/records", body)
    assert (e.status, e.code) == (status, code)


def test_the_read_query_and_its_bounds() -> None:
    target = f"{C}/topics/t/partitions/0/records"
    assert routed("GET", target) == rq.ReadRecords("t", 0)
    assert routed("GET", f"{target}?offset=latest&max_records=5&max_bytes=10&timeout_ms=0") == rq.ReadRecords(
        "t", 0, "latest", None, 5, 10, 0
    )
    assert routed("GET", f"{target}?timestamp=1000") == rq.ReadRecords("t", 0, timestamp_ms=1000)
    assert routed("GET", f"{target}?timestamp=1970-01-01T00:00:02Z").timestamp_ms == 2000  # type: ignore[union-attr]
    for query in ("offset=1&timestamp=2", "offset=-1", "max_records=0", "max_records=1001", "max_bytes=99999999"):
        assert refused("GET", f"{target}?{query}").status == 400, query
    assert refused("GET", f"{target}?timeout_ms=30001").status == 400
    assert refused("GET", f"{target}?from=0").status == 400


def test_acl_bodies_and_filters() -> None:
    body = {
        "resource_type": "TOPIC",
        "resource_name": "orders",
        "pattern_type": "PREFIXED",
        "principal": "User:alice",
        "host": "*",
        "operation": "READ",
        "permission": "ALLOW",
    }
    binding = AclBinding(
        ResourceType.TOPIC,
        "orders",
        PatternType.PREFIXED,
        "User:alice",
        "*",
        AclOperation.READ,
        AclPermissionType.ALLOW,
    )
    assert routed("POST", f"{C}/acls", body) == rq.CreateAcl(binding)
    assert refused("POST", f"{C}/acls", {**body, "operation": "FLY"}).status == 400
    assert refused("POST", f"{C}/acls", {k: v for k, v in body.items() if k != "host"}).status == 400
    search = routed("GET", f"{C}/acls?resource_type=TOPIC&principal=User%3Aalice")
    assert isinstance(search, rq.SearchAcls)
    assert (search.filter.resource_type, search.filter.principal, search.filter.operation) == (
        ResourceType.TOPIC,
        "User:alice",
        None,
    )
    e = refused("DELETE", f"{C}/acls?resource_type=TOPIC")
    assert e.status == 400 and "pattern_type" in e.message
    delete = routed("DELETE", f"{C}/acls?resource_type=ANY&pattern_type=ANY&operation=ANY&permission=ANY")
    assert isinstance(delete, rq.DeleteAcls)


def test_the_openapi_document_describes_every_route_and_no_other() -> None:
    doc = openapi.document()
    served = {(r.template, r.method.lower()) for r in ROUTES}
    described = {(path, method) for path, ops in doc["paths"].items() for method in ops}
    assert served == described
    operations = [op["operationId"] for ops in doc["paths"].values() for op in ops.values()]
    assert len(operations) == len(set(operations)) == len(ROUTES)
    for r in ROUTES:
        op = doc["paths"][r.template][r.method.lower()]
        assert [p["name"] for p in op["parameters"] if p["in"] == "path"] == r.params()
        assert [p["name"] for p in op["parameters"] if p["in"] == "query"] == [q.name for q in r.query]
        assert str(r.status) in op["responses"]
        if r.body is not None:
            assert op["requestBody"]["content"]["application/json"]["schema"]["$ref"].endswith(r.body)
            assert r.body in doc["components"]["schemas"]
    json.dumps(doc)  # it is JSON
    assert openapi.document(basic_auth=True)["security"] == [{"basic": []}]


def test_every_route_template_routes_to_itself() -> None:
    for r in ROUTES:
        path = r.template
        for name in r.params():
            path = path.replace("{" + name + "}", "7" if name in ("broker_id", "partition_id") else "x")
        if r.method == "DELETE" and r.query:
            required = [q.name for q in r.query if q.required]
            path += "?mechanism=SCRAM-SHA-256" if required == ["mechanism"] else ACL_DELETE_QUERY
        found = route(r.method, path, b"{}" if r.body is None else _sample(r.body)).route
        assert found == r, r.template


ACL_DELETE_QUERY = "?resource_type=ANY&pattern_type=ANY&operation=ANY&permission=ANY"


def _sample(schema: str) -> bytes:
    samples = {
        "UpdatePartitionCountRequest": {"partitions_count": 3},
        "SearchRequest": {},
        "RepublishRequest": {"destination": "y", "records": [{"partition_id": 0, "offset": 1}]},
        "ResetOffsetsRequest": {"to": "earliest"},
        "ScramCredentialRequest": {"user": "u", "password": "p"},
        "AlterClientQuotaRequest": {"entity": [{"entity_type": "user", "name": "u"}], "remove": ["producer_byte_rate"]},
        "CreateTopicRequest": {"topic_name": "x"},
        "UpdateConfigRequest": {"value": "1"},
        "AlterConfigBatchRequest": {"data": [{"name": "a", "value": "1"}]},
        "ProduceRequest": {},
        "CreateAclRequest": {
            "resource_type": "TOPIC",
            "resource_name": "x",
            "pattern_type": "LITERAL",
            "principal": "User:a",
            "host": "*",
            "operation": "READ",
            "permission": "ALLOW",
        },
    }
    return json.dumps(samples[schema]).encode()

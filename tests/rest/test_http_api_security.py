"""The HTTP API where the cluster authorizes (an authorizer, ``http.authentication=basic``): callers log in with
HTTP Basic as a SCRAM user, unauthenticated requests get 401, and every action is checked against the caller's ACLs
as on the other listeners: a request an ACL forbids is 403 in Confluent's shape and changes nothing."""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from odradek.client.admin import Admin
from odradek.deploy.local import DevCluster, running_cluster

from ..integration.conftest import FAST, wait_for

pytestmark = pytest.mark.integration

ADMIN, ALICE = ("admin", "admin-secret"), ("alice", "alice-secret")
SECURED = {
    **FAST,
    "authorizer.class.name": "odradek",
    # The nodes call each other on PLAINTEXT listeners, as User:ANONYMOUS: they must be allowed everything.
    "super.users": "User:ANONYMOUS;User:admin",
    "http.authentication": "basic",
}


def http(
    url: str, method: str = "GET", body: Any = None, user: tuple[str, str] | None = None
) -> tuple[int, Any, dict[str, str]]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method)
    request.add_header("Content-Type", "application/json")
    if user is not None:
        request.add_header("Authorization", "Basic " + base64.b64encode(":".join(user).encode()).decode())
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            status, text, headers = response.status, response.read(), dict(response.headers)
    except urllib.error.HTTPError as e:
        status, text, headers = e.code, e.read(), dict(e.headers)
    return status, json.loads(text) if text else None, {k.lower(): v for k, v in headers.items()}


def refused(answer: tuple[int, Any, dict[str, str]], status: int, code: int) -> None:
    assert answer[0] == status, answer
    assert set(answer[1]) == {"error_code", "message"} and answer[1]["error_code"] == code, answer


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevCluster]:
    directory = tmp_path_factory.mktemp("http-api-secured")
    with running_cluster(1, 1, config=SECURED, directory=directory, http_api=True) as c:
        yield c


@pytest.fixture(scope="module")
def admin(cluster: DevCluster) -> Iterator[Admin]:
    a = Admin({"bootstrap.servers": cluster.bootstrap_servers, "request.timeout.ms": 15000})
    for user, password in (ADMIN, ALICE):
        a.upsert_user_scram_credential(user, password)
    a.create_topic("secured", 1, 1)
    yield a
    a.close()


@pytest.fixture(scope="module")
def url(cluster: DevCluster, admin: Admin) -> str:
    out = f"{cluster.http_urls}/v3/clusters/{cluster.cluster_id}"
    wait_for(lambda: http(f"{out}/topics/secured", user=ALICE)[0] == 403, 20, 0.2, "alice's login on the broker")
    return out


def end_offset(admin: Admin) -> int:
    return admin.describe_topic("secured").partitions[0].high_watermark


def test_requests_without_valid_credentials_are_401(url: str, cluster: DevCluster) -> None:
    status, answer, headers = http(f"{url}/topics")
    refused((status, answer, headers), 401, 40101)
    assert headers["www-authenticate"].startswith("Basic")
    refused(http(f"{url}/topics", user=("alice", "wrong")), 401, 40101)
    refused(http(f"{url}/topics", user=("nobody", "wrong")), 401, 40101)
    refused(http(f"{cluster.http_urls}/openapi.json"), 401, 40101)
    status, doc, _ = http(f"{cluster.http_urls}/openapi.json", user=ALICE)
    assert status == 200 and doc["security"] == [{"basic": []}]


def test_a_user_without_acls_is_refused_everything_and_nothing_changes(url: str, admin: Admin) -> None:
    before = end_offset(admin)
    status, topics, _ = http(f"{url}/topics", user=ALICE)
    assert status == 200 and topics["data"] == []  # a listing leaves out what alice may not describe
    refused(http(f"{url}/topics", "POST", {"topic_name": "alices"}, user=ALICE), 403, 40301)
    refused(http(f"{url}/topics/secured", user=ALICE), 403, 40301)
    refused(http(f"{url}/topics/secured/records", "POST", {"value": {"data": 1}}, user=ALICE), 403, 40301)
    refused(http(f"{url}/topics/no-such-topic/records", "POST", {"value": {"data": 1}}, user=ALICE), 403, 40301)
    refused(http(f"{url}/topics/secured/partitions/0/records?timeout_ms=0", user=ALICE), 403, 40301)
    refused(http(f"{url}/topics/secured/configs/retention.ms", "PUT", {"value": "1"}, user=ALICE), 403, 40301)
    refused(http(f"{url}/topics/secured", "DELETE", user=ALICE), 403, 40301)
    refused(http(f"{url}/acls", user=ALICE), 403, 40301)
    acl = {
        "resource_type": "TOPIC",
        "resource_name": "secured",
        "pattern_type": "LITERAL",
        "principal": "User:alice",
        "host": "*",
        "operation": "ALL",
        "permission": "ALLOW",
    }
    refused(http(f"{url}/acls", "POST", acl, user=ALICE), 403, 40301)
    refused(http(f"{url}/brokers/{admin.describe_cluster().brokers[0].node_id}/configs", user=ALICE), 403, 40301)
    assert "alices" not in admin.list_topics()
    assert end_offset(admin) == before
    assert "retention.ms" not in admin.describe_topic("secured").configs
    assert admin.describe_acls() == []


def test_acls_granted_over_http_let_the_user_write_and_then_read(url: str, admin: Admin) -> None:
    grant = {
        "resource_type": "TOPIC",
        "resource_name": "secured",
        "pattern_type": "LITERAL",
        "principal": "User:alice",
        "host": "*",
        "operation": "WRITE",
        "permission": "ALLOW",
    }
    status, _, _ = http(f"{url}/acls", "POST", grant, user=ADMIN)  # admin is a super user
    assert status == 201
    wait_for(
        lambda: http(f"{url}/topics/secured", user=ALICE)[0] == 200, 10, 0.2, "the grant to apply"
    )  # WRITE implies DESCRIBE
    before = end_offset(admin)
    status, produced, _ = http(f"{url}/topics/secured/records", "POST", {"value": {"data": "hi"}}, user=ALICE)
    assert status == 200 and produced["offset"] == before
    refused(http(f"{url}/topics/secured/partitions/0/records?timeout_ms=0", user=ALICE), 403, 40301)
    status, _, _ = http(f"{url}/acls", "POST", {**grant, "operation": "READ"}, user=ADMIN)
    assert status == 201
    wait_for(
        lambda: http(f"{url}/topics/secured/partitions/0/records?timeout_ms=0", user=ALICE)[0] == 200, 10, 0.2, "READ"
    )
    status, read, _ = http(f"{url}/topics/secured/partitions/0/records?offset={before}&timeout_ms=0", user=ALICE)
    assert [r["value"]["data"] for r in read["data"]] == ["hi"]
    status, created, _ = http(f"{url}/topics", "POST", {"topic_name": "admins", "partitions_count": 1}, user=ADMIN)
    assert status == 201 and created["topic_name"] == "admins"

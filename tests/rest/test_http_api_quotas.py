"""Client quotas (KIP-13) for HTTP callers, on a cluster of real processes: a user's produce and fetch byte-rate
quotas hold over the HTTP API as over the Kafka listener, on the same sensor. A caller over its quota is answered as
Confluent's REST Proxy answers, 429 (42901) with ``Retry-After``, and nothing is done: every record answered 200 is
written once, none answered 429 is written. The console's search is paced by the fetch quota (it waits within its
page's time) and its republish is refused while the caller is over either quota."""

from __future__ import annotations

import base64
import json
import re
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from odradek.client.admin import Admin
from odradek.deploy.local import DevCluster, running_cluster

from ..integration.conftest import FAST, wait_for

pytestmark = pytest.mark.integration

ADMIN, CAROL = ("admin", "admin-secret"), ("carol", "carol-secret")
CONFIG = {
    **FAST,
    "authorizer.class.name": "odradek",
    "super.users": "User:ANONYMOUS;User:admin;User:carol",
    "http.authentication": "basic",
}
VALUE = "x" * 1000


def http(url: str, method: str = "GET", body: Any = None, user: tuple[str, str] = CAROL) -> tuple[int, Any, Any]:
    request = urllib.request.Request(url, None if body is None else json.dumps(body).encode(), method=method)
    request.add_header("Content-Type", "application/json")
    request.add_header("Authorization", "Basic " + base64.b64encode(":".join(user).encode()).decode())
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read() or b"null"), response.headers
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null"), e.headers


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevCluster]:
    directory = tmp_path_factory.mktemp("http-api-quotas")
    with running_cluster(1, 1, config=CONFIG, directory=directory, http_api=True) as c:
        yield c


@pytest.fixture(scope="module")
def url(cluster: DevCluster) -> Iterator[str]:
    with Admin({"bootstrap.servers": cluster.bootstrap_servers, "request.timeout.ms": 15000}) as a:
        for user, password in (ADMIN, CAROL):
            a.upsert_user_scram_credential(user, password)
        for name in ("quota-produce", "quota-search", "quota-copy"):
            a.create_topic(name, 1, 1)
    out = f"{cluster.http_urls}/v3/clusters/{cluster.cluster_id}"
    wait_for(lambda: http(f"{out}/topics/quota-produce")[0] == 200, 20, 0.2, "carol's login")
    yield out


def set_quota(url: str, values: dict[str, float]) -> None:
    entity = [{"entity_type": "user", "name": "carol"}]
    assert http(f"{url}/client-quotas:alter", "POST", {"entity": entity, "set": values}, ADMIN)[0] == 204


def remove_quotas(url: str, names: list[str]) -> None:
    entity = [{"entity_type": "user", "name": "carol"}]
    assert http(f"{url}/client-quotas:alter", "POST", {"entity": entity, "remove": names}, ADMIN)[0] == 204


def end_offset(url: str, topic: str) -> int:
    """As admin, who has no quota."""
    return int(
        http(f"{url}/topics/{topic}/partitions/0/records?offset=latest&timeout_ms=0", user=ADMIN)[1]["next_offset"]
    )


def test_produce_over_the_quota_is_429_with_retry_after_and_writes_nothing(url: str, cluster: DevCluster) -> None:
    set_quota(url, {"producer_byte_rate": 4000})
    offsets, refusals = [], []
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and len(refusals) < 3:
        status, body, headers = http(f"{url}/topics/quota-produce/records", "POST", {"value": {"data": VALUE}})
        if status == 200:
            offsets.append(body["offset"])
        else:
            assert status == 429 and body["error_code"] == 42901, body
            assert int(headers["Retry-After"]) >= 1
            refusals.append(body)
    assert refusals, "the produce quota never held carol back"
    assert offsets == list(range(len(offsets)))  # each answered record written once, in order
    assert end_offset(url, "quota-produce") == len(offsets)  # and none refused was written
    # Charged to carol's user quota's sensor, which her Kafka clients (any client id) share.
    broker = next(n for n in cluster.nodes if n.http_port)
    with urllib.request.urlopen(f"http://127.0.0.1:{broker.metrics_port}/metrics", timeout=10) as response:
        metrics = response.read().decode()
    assert re.search(
        r'odradek_quota_throttled_requests_total\{client_id="",kind="produce",user="carol"\} [1-9]', metrics
    )
    time.sleep(int(headers["Retry-After"]))  # waited as told: let in again
    assert http(f"{url}/topics/quota-produce/records", "POST", {"value": {"data": VALUE}})[0] in (200, 429)
    remove_quotas(url, ["producer_byte_rate"])


def over_the_fetch_quota(url: str) -> tuple[int, Any, Any]:
    """Read until carol's fetch quota refuses her (it reaches the broker in a moment); that refusal."""
    deadline, answer = time.monotonic() + 20, None
    while time.monotonic() < deadline:
        answer = http(f"{url}/topics/quota-search/partitions/0/records?offset=0&max_records=1000&timeout_ms=0")
        if answer[0] == 429:
            return answer
        assert answer[0] == 200
    raise AssertionError(f"the fetch quota never held carol back: {answer}")


def test_a_read_over_the_fetch_quota_is_429_with_retry_after(url: str) -> None:
    for _ in range(30):
        assert http(f"{url}/topics/quota-search/records", "POST", {"value": {"data": VALUE}})[0] == 200
    set_quota(url, {"consumer_byte_rate": 2000})
    status, body, headers = over_the_fetch_quota(url)
    assert (status, body["error_code"]) == (429, 42901) and int(headers["Retry-After"]) >= 1


def test_the_search_is_paced_by_the_fetch_quota(url: str) -> None:
    """30 records of 1 kB at 2 kB/s, the caller over its quota already: a 3 s page waits on it, scans no more than
    the quota lets it, and ends with a cursor to go on from."""
    over_the_fetch_quota(url)
    body = {"filter": {"value_contains": base64.b64encode(b"nowhere").decode()}, "timeout_ms": 3000}
    status, page, _ = http(f"{url}/topics/quota-search/records:search", "POST", body)
    assert status == 200, page
    assert page["stopped"] == "timeout" and page["throttled_ms"] > 0, page
    assert page["scanned"] < 30 and page["cursor"] is not None
    remove_quotas(url, ["consumer_byte_rate"])


def test_republish_is_refused_while_over_a_quota_and_copies_nothing(url: str) -> None:
    set_quota(url, {"consumer_byte_rate": 1000})
    over_the_fetch_quota(url)
    copy = {"destination": "quota-copy", "partition_id": 0, "start_offset": 0, "end_offset": 30}
    answer = http(f"{url}/topics/quota-search/records:republish", "POST", copy)
    assert answer[0] == 429 and int(answer[2]["Retry-After"]) >= 1, answer
    assert end_offset(url, "quota-copy") == 0  # the refused copy wrote nothing
    remove_quotas(url, ["consumer_byte_rate"])

"""The HTTP API over https on a secured cluster of real processes (as ``odradek dev up --security``: TLS everywhere,
SCRAM on the client listeners, the authorizer on), with a real https client (``requests``) and the cluster's CA.
Broker A requires client certificates (``http.ssl.client.auth=required``), broker B only requests them: without a
certificate A refuses the TLS handshake, B takes HTTP Basic; a client certificate's principal is the caller whose
ACLs are checked (allowed, and denied with nothing written), also when the request is forwarded to the other broker
(which believes the forwarding node, not a client that names a principal itself)."""

from __future__ import annotations

import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import tomli_w

from odradek.client.acls import AclBinding
from odradek.client.admin import Admin
from odradek.deploy.certs import load_ca, make_leaf
from odradek.deploy.local import DevCluster

from ..integration.conftest import FAST, wait_for

pytestmark = pytest.mark.integration

ALICE = "User:CN=alice,O=odradek"  # the default mapping rule: the certificate's subject as RFC 4514


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevCluster]:
    directory = tmp_path_factory.mktemp("http-api-tls")
    c = DevCluster.create(directory, controllers=1, brokers=2, security=True, overrides=dict(FAST), http_api=True)
    assert c.http_urls.startswith("https://")  # as `odradek dev up --security` serves it
    first = min((n for n in c.nodes if n.http_port), key=lambda n: n.node_id)
    config = tomllib.loads(Path(first.config).read_text())
    assert config["http.ssl.client.auth"] == "requested"
    Path(first.config).write_text(tomli_w.dumps(config | {"http.ssl.client.auth": "required"}))
    c.start_all_and_wait()
    try:
        yield c
    finally:
        c.stop_all()


@pytest.fixture(scope="module")
def files(cluster: DevCluster, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The CA to trust, alice's client certificate (signed by the cluster's CA) and the admin's Basic login."""
    tls = cluster.directory / "tls"
    alice = make_leaf(load_ca(tls / "ca.crt", tls / "ca.key"), "alice").write(tmp_path_factory.mktemp("alice"), "a")
    login = cluster.admin_client_config()
    return {
        "ca": str(tls / "ca.crt"),
        "alice": tuple(map(str, alice)),
        "admin": (login["sasl.username"], login["sasl.password"]),
    }


@pytest.fixture(scope="module")
def admin(cluster: DevCluster) -> Iterator[Admin]:
    with Admin({**cluster.client_config(), "request.timeout.ms": 15000}) as a:
        yield a


@pytest.fixture(scope="module")
def urls(cluster: DevCluster, admin: Admin, files: dict[str, Any]) -> list[str]:
    """Broker A's (client certificates required) and broker B's (requested) API, once each knows alice's ACLs on
    the topics (partition i led by broker i, so that requests are forwarded)."""
    nodes = sorted((n for n in cluster.nodes if n.http_port), key=lambda n: n.node_id)
    out = [f"https://127.0.0.1:{n.http_port}/v3/clusters/{cluster.cluster_id}" for n in nodes]
    spread = {"0": [nodes[0].node_id], "1": [nodes[1].node_id]}
    for name in ("tls-allowed", "tls-denied"):
        body = {"topic_name": name, "replicas_assignments": spread}
        made = requests.post(out[1] + "/topics", json=body, auth=files["admin"], verify=files["ca"], timeout=30)
        assert made.status_code == 201, made.text
    acls = [
        AclBinding(resource_type="TOPIC", resource_name="tls-allowed", principal=ALICE, operation=operation)
        for operation in ("DESCRIBE", "READ", "WRITE")
    ]
    admin.create_acls(acls)
    for url in out:
        ready = url + "/topics/tls-allowed/partitions/1"
        wait_for(lambda ready=ready: get(ready, files, files["alice"]).status_code == 200, 30, 0.3, "alice's ACLs")
    return out


def get(url: str, files: dict[str, Any], cert: Any = None, **kwargs: Any) -> requests.Response:
    return requests.get(url, verify=files["ca"], cert=cert, timeout=30, **kwargs)


def produce(url: str, files: dict[str, Any], topic: str, partition: int, **kwargs: Any) -> requests.Response:
    body = {"partition_id": partition, "value": {"type": "STRING", "data": "over https"}}
    return requests.post(f"{url}/topics/{topic}/records", json=body, verify=files["ca"], timeout=30, **kwargs)


def ends(admin: Admin, topic: str) -> list[int]:
    return [p.high_watermark for p in sorted(admin.describe_topic(topic).partitions, key=lambda p: p.partition)]


def test_a_listener_requiring_client_certificates_refuses_the_handshake_without_one(
    urls: list[str], files: dict[str, Any]
) -> None:
    with pytest.raises((requests.exceptions.SSLError, requests.exceptions.ConnectionError)):
        get(urls[0] + "/topics", files, auth=files["admin"])
    with pytest.raises(requests.exceptions.SSLError):  # nor is the server trusted without the cluster's CA
        requests.get(urls[1] + "/topics", auth=files["admin"], timeout=30)


def test_basic_credentials_over_https_where_certificates_are_only_requested(
    urls: list[str], files: dict[str, Any]
) -> None:
    answer = get(urls[1] + "/topics", files, auth=files["admin"])
    assert answer.status_code == 200, answer.text
    assert answer.json()["metadata"]["self"].startswith("https://")  # the links are https too
    refused = get(urls[1] + "/topics", files)
    assert refused.status_code == 401 and refused.json()["error_code"] == 40101


def test_a_client_certificate_is_its_principal_with_its_acls(
    urls: list[str], files: dict[str, Any], admin: Admin
) -> None:
    alice = files["alice"]
    for url in urls:
        assert get(url + "/topics/tls-allowed", files, alice).status_code == 200
        denied = get(url + "/topics/tls-denied", files, alice)
        assert denied.status_code == 403 and denied.json()["error_code"] == 40301
    before = ends(admin, "tls-denied")
    for url in urls:
        for partition in (0, 1):  # one of the two is forwarded to the other broker
            answer = produce(url, files, "tls-allowed", partition, cert=alice)
            assert answer.status_code == 200, answer.text
            refused = produce(url, files, "tls-denied", partition, cert=alice)
            assert refused.status_code == 403, refused.text
    assert ends(admin, "tls-allowed") == [2, 2]
    assert ends(admin, "tls-denied") == before == [0, 0]  # nothing written where alice may not write


def test_a_client_cannot_name_its_own_principal(urls: list[str], files: dict[str, Any], admin: Admin) -> None:
    """Only a node's certificate is believed when it names the caller of a request it forwards."""
    spoofed = {"x-odradek-principal": "User:admin", "x-odradek-forwarded": "1"}
    for url in urls:
        answer = produce(url, files, "tls-denied", 0, cert=files["alice"], headers=spoofed)
        assert answer.status_code == 403, answer.text  # as alice: as User:admin it would be written
    assert ends(admin, "tls-denied") == [0, 0]


def test_the_console_signs_a_certificate_in_without_a_password(urls: list[str], files: dict[str, Any]) -> None:
    """Its session is the certificate's principal, its cookie Secure, and it is worth nothing without the
    certificate."""
    base = urls[1].split("/v3/")[0]
    with requests.Session() as browser:
        browser.trust_env = False  # REQUESTS_CA_BUNDLE would replace the cluster's CA
        browser.verify, browser.cert = files["ca"], files["alice"]
        assert browser.get(base + "/ui/session", timeout=30).json()["certificate_principal"] == ALICE
        opened = browser.post(base + "/ui/session", json={}, headers={"origin": base}, timeout=30)
        assert opened.status_code == 200 and opened.json()["principal"] == ALICE
        assert "Secure" in opened.headers["set-cookie"]
        assert browser.get(urls[1] + "/topics/tls-allowed", timeout=30).status_code == 200
        cookie = {"odradek_session": browser.cookies["odradek_session"]}
    # The cookie without the certificate (Basic-less on the listener that only requests one): no session.
    stolen = requests.get(urls[1] + "/topics/tls-allowed", cookies=cookie, verify=files["ca"], timeout=30)
    assert stolen.status_code == 401

"""``odradek user create|delete|list`` and ``odradek acl add|list|remove`` (and the admin client's ACL and credential
requests under them) against a real cluster: stored in the metadata log and seen by every node, the password never
printed nor sent, bad input refused with one ``error:`` line and nothing stored."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from odradek.client.acls import AclBinding, AclBindingFilter
from odradek.client.admin import Admin
from odradek.client.errors import (
    InvalidRequestError,
    ResourceNotFoundError,
    UnacceptableCredentialError,
    UnsupportedSaslMechanismError,
)
from odradek.deploy.local import DevCluster

from .cli_runner import as_json, odradek
from .conftest import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.odradek_cluster(controllers=1, brokers=2)]


@pytest.fixture
def admin(odradek_cluster: DevCluster) -> Iterator[Admin]:
    a = Admin({"bootstrap.servers": odradek_cluster.admin_servers, "request.timeout.ms": 10000})
    yield a
    a.close()


def on_every_node(cluster: DevCluster, ask) -> list:
    """``ask(admin)`` against each node alone: what each node's own image holds."""
    out = []
    for n in cluster.nodes:
        with Admin({"bootstrap.servers": f"{n.host}:{n.broker_port or n.controller_port}"}) as a:
            out.append(ask(a))
    return out


def refused(cluster: DevCluster, *args: str, says: str) -> None:
    result = odradek(cluster, *args)
    assert result.returncode != 0 and result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and says in lines[0], result.stderr


def test_users_round_trip_without_the_password_anywhere(odradek_cluster: DevCluster) -> None:
    c = odradek_cluster
    password = "pw-Zq81-never-shown"
    out = as_json(c, "user", "create", "alice", "--password", password)
    assert out == {"user": "alice", "mechanism": "SCRAM-SHA-256", "iterations": 4096}
    created = odradek(
        c, "user", "create", "alice", "-p", password, "--mechanism", "scram-sha-512", "--iterations", "8192"
    )
    assert created.returncode == 0 and password not in created.stdout + created.stderr
    expected = {
        "user": "alice",
        "credentials": [
            {"mechanism": "SCRAM-SHA-256", "iterations": 4096},
            {"mechanism": "SCRAM-SHA-512", "iterations": 8192},
        ],
    }
    wait_for(lambda: expected in as_json(c, "user", "list"), 10, what="alice's two credentials")

    def everywhere() -> bool:
        return all(
            len(x["alice"]) == 2 for x in on_every_node(c, lambda a: a.describe_user_scram_credentials(["alice"]))
        )

    wait_for(everywhere, 10, what="alice on every node")
    human = odradek(c, "user", "list").stdout
    assert "alice" in human and "SCRAM-SHA-512(8192)" in human and password not in human
    stored = [p for p in c.directory.rglob("*") if p.is_file()]  # metadata logs, snapshots, node logs, profile
    assert stored and not [p for p in stored if password.encode() in p.read_bytes()]
    assert as_json(c, "user", "delete", "alice", "--mechanism", "SCRAM-SHA-256") == {
        "user": "alice",
        "deleted": ["SCRAM-SHA-256"],
    }
    assert as_json(c, "user", "delete", "alice") == {"user": "alice", "deleted": ["SCRAM-SHA-512"]}
    wait_for(lambda: all(u["user"] != "alice" for u in as_json(c, "user", "list")), 10, what="alice gone")


def test_bad_user_input_is_refused_with_one_error_line(odradek_cluster: DevCluster, admin: Admin) -> None:
    c = odradek_cluster
    refused(c, "user", "create", "bob", "--password", "x", "--iterations", "100", says="4096")
    refused(c, "user", "create", "bob", "--password", "x", "--mechanism", "PLAIN", says="SCRAM-SHA-256")
    refused(c, "user", "create", "", "--password", "x", says="empty")
    refused(c, "user", "delete", "nobody-here", "--mechanism", "SCRAM-SHA-256", says="RESOURCE_NOT_FOUND")
    result = odradek(c, "user", "create", "bob", "--password", "x", "--iterations", "1", "--format", "json")
    assert json.loads(result.stderr)["error"]["code"] == "UNACCEPTABLE_CREDENTIAL"
    assert all(u["user"] != "bob" for u in as_json(c, "user", "list"))
    with pytest.raises(UnacceptableCredentialError):
        admin.upsert_user_scram_credential("bob", "pw", iterations=20000)
    with pytest.raises(UnsupportedSaslMechanismError):
        admin.upsert_user_scram_credential("bob", "pw", mechanism="SCRAM-SHA-1")
    with pytest.raises(ResourceNotFoundError):
        admin.describe_user_scram_credentials(["bob"])


def test_acls_add_list_remove(odradek_cluster: DevCluster, admin: Admin) -> None:
    c = odradek_cluster
    out = as_json(
        c, "acl", "add", "--allow-principal", "User:ann", "--operation", "read,describe", "--topic", "orders",
        "--group", "g1",
    )  # fmt: skip
    assert [(b["resource_type"], b["resource_name"], b["operation"]) for b in out["created"]] == [
        ("TOPIC", "orders", "READ"),
        ("TOPIC", "orders", "DESCRIBE"),
        ("GROUP", "g1", "READ"),
        ("GROUP", "g1", "DESCRIBE"),
    ]
    assert out["created"][0] == {
        "principal": "User:ann",
        "host": "*",
        "resource_type": "TOPIC",
        "resource_name": "orders",
        "pattern_type": "LITERAL",
        "operation": "READ",
        "permission": "ALLOW",
    }
    as_json(
        c, "acl", "add", "--deny-principal", "User:*", "--operation", "write", "--topic", "ord",
        "--resource-pattern-type", "prefixed", "--host", "10.0.0.7",
    )  # fmt: skip
    mine = AclBindingFilter(principal="User:ann")
    wait_for(lambda: all(len(x) == 4 for x in on_every_node(c, lambda a: a.describe_acls(mine))), 10, what="4 ACLs")
    applying = as_json(c, "acl", "list", "--topic", "orders", "--resource-pattern-type", "match")
    assert {(b["principal"], b["operation"]) for b in applying} == {
        ("User:ann", "READ"),
        ("User:ann", "DESCRIBE"),
        ("User:*", "WRITE"),
    }
    assert [b["resource_name"] for b in as_json(c, "acl", "list", "--deny-principal", "User:*")] == ["ord"]
    human = odradek(c, "acl", "list", "--principal", "User:ann").stdout
    assert "PRINCIPAL" in human and "User:ann" in human and "g1" in human
    removed = as_json(c, "acl", "remove", "--principal", "User:ann", "--operation", "describe")
    assert sorted(b["resource_name"] for b in removed["removed"]) == ["g1", "orders"]
    left = admin.describe_acls(AclBindingFilter(principal="User:ann"))
    assert {(b.resource_name, b.operation) for b in left} == {("orders", "READ"), ("g1", "READ")}
    assert odradek(c, "acl", "remove", "--principal", "User:nobody").stdout.strip() == "no ACL matched: nothing removed"


def test_bad_acl_input_is_refused_and_nothing_is_stored(odradek_cluster: DevCluster, admin: Admin) -> None:
    c = odradek_cluster
    base = ("acl", "add", "--allow-principal", "User:zed", "--topic", "zt")
    refused(c, *base, "--operation", "read,idempotent-write", says="does not apply to TOPIC")
    refused(c, *base, "--operation", "fly", says="unknown operation 'fly'")
    refused(c, "acl", "add", "--allow-principal", "zed", "--topic", "zt", "--operation", "read", says="Type:name")
    refused(c, *base, "--operation", "read", "--host", "example.com", says="IP address")
    refused(c, "acl", "add", "--allow-principal", "User:zed", "--operation", "read", says="give a resource")
    refused(c, "acl", "remove", says="--all")
    refused(c, "acl", "remove", "--all", "--topic", "zt", says="without filter options")
    assert admin.describe_acls(AclBindingFilter(principal="User:zed")) == []
    with pytest.raises(InvalidRequestError, match="kafka-cluster"):
        admin.create_acls(
            [AclBinding(resource_type="cluster", resource_name="c", principal="User:zed", operation="alter")]
        )


def test_remove_all(odradek_cluster: DevCluster, admin: Admin) -> None:
    c = odradek_cluster
    as_json(c, "acl", "add", "--allow-principal", "User:ra", "--operation", "all", "--cluster")
    wait_for(lambda: as_json(c, "acl", "list", "--cluster"), 10, what="the cluster ACL")
    removed = as_json(c, "acl", "remove", "--all")["removed"]
    assert {"principal": "User:ra", "host": "*", "resource_type": "CLUSTER", "resource_name": "kafka-cluster",
            "pattern_type": "LITERAL", "operation": "ALL", "permission": "ALLOW"} in removed  # fmt: skip
    wait_for(lambda: as_json(c, "acl", "list") == [], 10, what="no ACL left")

"""``odradek quota set|describe|delete`` and the admin client's quota requests against a real cluster (1 controller,
brokers 2 and 3): stored in the metadata log, seen by every node, kept across a restart of every node, and bad
input refused with a typed error and nothing stored."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest

from odradek.client.admin import Admin
from odradek.client.errors import InvalidRequestError
from odradek.client.quotas import QuotaEntity, entity
from odradek.deploy.local import DevCluster

from .cli_runner import as_json, odradek
from .conftest import start_cluster, wait_for

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevCluster]:
    c = start_cluster(tmp_path_factory.mktemp("cluster"), controllers=1, brokers=2)
    yield c
    c.stop_all(timeout=10)


def node_addresses(cluster: DevCluster) -> dict[int, str]:
    """Each node's own admin address (its broker listener, or a controller's controller listener)."""
    return {n.node_id: f"{n.host}:{n.broker_port or n.controller_port}" for n in cluster.nodes}


def stored_on(address: str, e: QuotaEntity) -> dict[str, float]:
    """``e``'s values in the image of the one node at ``address`` ({} when it has none)."""
    with Admin({"bootstrap.servers": address, "request.timeout.ms": 5000}) as admin:
        found = dict(
            admin.describe_client_quotas(e.user, e.client_id, e.user_default, e.client_id_default, strict=True)
        )
    return found.get(e, {})


def stored_paths(cluster: DevCluster) -> dict[str, dict]:
    return {d["path"]: d for d in as_json(cluster, "quota", "describe")}


def test_set_describe_delete_round_trip(cluster: DevCluster) -> None:
    path = "/config/users/alice/clients/app"
    entity_args = ("--user", "alice", "--client-id", "app")
    out = as_json(
        cluster, "quota", "set", *entity_args, "--producer-byte-rate", "1048576", "--request-percentage", "12.5"
    )
    assert out == {
        "entity": {"user": "alice", "client_id": "app"},
        "path": path,
        "set": {"producer_byte_rate": 1048576, "request_percentage": 12.5},
        "dry_run": False,
    }
    stored = wait_for(lambda: stored_paths(cluster).get(path), 10, what="the quota in describe")
    assert stored == {
        "entity": {"user": "alice", "client_id": "app"},
        "path": path,
        "quotas": {"producer_byte_rate": 1048576, "request_percentage": 12.5},
    }
    human = odradek(cluster, "quota", "describe").stdout
    assert "ENTITY" in human and "PRODUCER_BYTE_RATE" in human and path in human
    out = as_json(cluster, "quota", "delete", *entity_args, "--producer-byte-rate")
    assert out == {"entity": {"user": "alice", "client_id": "app"}, "path": path, "removed": ["producer_byte_rate"]}
    wait_for(lambda: stored_paths(cluster)[path]["quotas"] == {"request_percentage": 12.5}, 10, what="one key removed")
    as_json(cluster, "quota", "delete", *entity_args)  # no key: every key
    wait_for(lambda: path not in stored_paths(cluster), 10, what="the entity removed")
    human = odradek(cluster, "quota", "set", "--client-id-default", "--consumer-byte-rate", "1000", "--dry-run")
    assert human.returncode == 0 and "valid, nothing stored: /config/clients/<default>" in human.stdout
    assert "/config/clients/<default>" not in stored_paths(cluster)


def test_describe_gives_the_effective_quota_and_the_entity_it_comes_from(cluster: DevCluster) -> None:
    for args in (
        ("--client-id-default", "--consumer-byte-rate", "1000"),
        ("--user-default", "--producer-byte-rate", "2000"),
        ("--user", "erin", "--client-id-default", "--producer-byte-rate", "3000"),
        ("--user", "erin", "--client-id", "app", "--request-percentage", "50"),
        ("--client-id", "app", "--consumer-byte-rate", "4000"),
    ):
        as_json(cluster, "quota", "set", *args)
    try:

        def effective(*args: str) -> dict:
            return as_json(cluster, "quota", "describe", *args)["quotas"]

        def source(q: dict | None) -> tuple | None:
            return None if q is None else (q["value"], q["path"])

        wait_for(lambda: effective("--user", "erin", "--client-id", "app")["request_percentage"], 10, what="all set")
        quotas = effective("--user", "erin", "--client-id", "app")
        assert source(quotas["request_percentage"]) == (50, "/config/users/erin/clients/app")  # level 1
        assert source(quotas["producer_byte_rate"]) == (3000, "/config/users/erin/clients/<default>")  # level 2
        assert source(quotas["consumer_byte_rate"]) == (4000, "/config/clients/app")  # level 7 over level 8
        assert quotas["producer_byte_rate"]["entity"] == {"user": "erin", "client_id": None}
        # No user given: ANONYMOUS, which falls to the default user (level 6) for producing.
        data = as_json(cluster, "quota", "describe", "--client-id", "other")
        assert (data["user"], data["client_id"]) == ("ANONYMOUS", "other")
        assert source(data["quotas"]["producer_byte_rate"]) == (2000, "/config/users/<default>")
        assert source(data["quotas"]["consumer_byte_rate"]) == (1000, "/config/clients/<default>")  # level 8
        assert data["quotas"]["request_percentage"] is None  # unlimited
        human = odradek(cluster, "quota", "describe", "--user", "erin", "--client-id", "app").stdout
        assert "effective quotas of user erin, client id app" in human
        assert "/config/users/erin/clients/<default>" in human and "unlimited" not in human
    finally:
        for args in (
            ("--client-id-default",),
            ("--user-default",),
            ("--user", "erin", "--client-id-default"),
            ("--user", "erin", "--client-id", "app"),
            ("--client-id", "app"),
        ):
            as_json(cluster, "quota", "delete", *args)


def test_a_change_reaches_every_node_within_seconds(cluster: DevCluster) -> None:
    """Reads answer from each node's own image, so asking each node shows what its brokers enforce. The change goes
    through a broker, which forwards it to the controller."""
    carol = entity("carol")
    addresses = node_addresses(cluster)
    broker = addresses[max(addresses)]
    with Admin({"bootstrap.servers": broker, "request.timeout.ms": 10000}) as admin:
        for value in (5000.0, 7000.0):
            admin.alter_client_quotas(carol, set={"consumer_byte_rate": value})
            started = time.monotonic()
            for node_id, address in addresses.items():
                wait_for(
                    lambda address=address, value=value: stored_on(address, carol) == {"consumer_byte_rate": value},
                    5,
                    what=f"node {node_id} to see consumer_byte_rate {value}",
                )
            assert time.monotonic() - started < 5
        admin.alter_client_quotas(carol, remove=["consumer_byte_rate"])


def test_bad_input_is_refused_with_a_typed_error_and_nothing_stored(cluster: DevCluster) -> None:
    entity_args = ("--user", "mallory")
    cases = [
        (("--producer-byte-rate", "fast"), "'fast'"),
        (("--producer-byte-rate", "-5"), "producer_byte_rate"),
        (("--consumer-byte-rate", "10.5"), "whole number"),
        (("--request-percentage", "0"), "request_percentage"),
        (("--set", "fetch_rate=5"), "'fetch_rate'"),  # refused by the server: the CLI knows no such check
    ]
    for args, named in cases:
        result = odradek(cluster, "quota", "set", *entity_args, *args)
        assert result.returncode == 1, (args, result.stdout)
        assert result.stderr.startswith("error: ") and len(result.stderr.splitlines()) == 1, result.stderr
        assert named in result.stderr and "INVALID_REQUEST" in result.stderr
    empty = odradek(cluster, "quota", "set", "--producer-byte-rate", "100", "--format", "json")
    assert empty.returncode == 1 and "Traceback" not in empty.stderr
    error = json.loads(empty.stderr)["error"]
    assert error["code"] == "INVALID_REQUEST" and "empty quota entity" in error["message"]

    address = node_addresses(cluster)[1]
    mallory = entity("mallory")
    with Admin({"bootstrap.servers": address, "request.timeout.ms": 10000}) as admin:
        for bad, named in [
            ({"producer_byte_rate": -1}, "producer_byte_rate"),
            ({"bogus": 1}, "'bogus'"),
            ({"producer_byte_rate": "abc"}, "'abc'"),
            ({"request_percentage": float("nan")}, "request_percentage"),
        ]:
            with pytest.raises(InvalidRequestError, match=named):
                admin.alter_client_quotas(mallory, set=bad)
        with pytest.raises(InvalidRequestError, match="empty quota entity"):
            admin.alter_client_quotas(QuotaEntity(), set={"producer_byte_rate": 100})
        with pytest.raises(InvalidRequestError, match="'bogus'"):
            admin.alter_client_quotas(mallory, remove=["bogus"])
        admin.alter_client_quotas(mallory, set={"producer_byte_rate": 100}, validate_only=True)
        # A later valid change, once seen, shows that nothing before it was stored.
        marker = entity("marker")
        admin.alter_client_quotas(marker, set={"producer_byte_rate": 1})
        wait_for(lambda: admin.describe_client_quotas(user="marker"), 10, what="the marker")
        assert admin.describe_client_quotas(user="mallory") == []
        admin.alter_client_quotas(marker, remove=["producer_byte_rate"])


def test_quotas_survive_a_restart_of_every_node(cluster: DevCluster) -> None:
    dave = entity("dave", client_default=True)
    with Admin({"bootstrap.servers": cluster.admin_servers, "request.timeout.ms": 10000}) as admin:
        admin.alter_client_quotas(dave, set={"producer_byte_rate": 123456, "request_percentage": 7.5})
    expected = {"producer_byte_rate": 123456.0, "request_percentage": 7.5}
    for address in node_addresses(cluster).values():
        wait_for(lambda address=address: stored_on(address, dave) == expected, 10, what="every node to have it")
    cluster.stop_all(timeout=10)
    cluster.start_all_and_wait(60)
    for node_id, address in node_addresses(cluster).items():
        wait_for(lambda address=address: stored_on(address, dave) == expected, 20, what=f"node {node_id} after restart")

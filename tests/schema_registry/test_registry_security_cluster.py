"""The schema registry on a secured cluster of real processes (``running_cluster(security=True,
schema_registry=True)``, as ``odradek dev up --security``: one controller, two brokers, TLS everywhere, SCRAM on the
client listeners, the authorizer on). The registry answers over https only; a request without credentials, or with
a wrong password, is 401 (40101); a SCRAM user without SUBJECT ACLs is 403 (40301) and writes nothing; ACLs added
with the admin client and ``odradek acl add --subject`` (literal and prefixed) let confluent-kafka's
SchemaRegistryClient, AvroSerializer and AvroDeserializer through; the global config needs cluster ALTER_CONFIGS; a
write sent to the broker that is not the writer is forwarded over https; ``odradek schema`` works with the
profile's settings, as after ``odradek dev up --security`` (which a last test runs)."""

from __future__ import annotations

import base64
import json
import os
import secrets
import ssl
import subprocess
import sys
import time
import tomllib
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.serialization import MessageField, SerializationContext

from odradek.client import Consumer, Producer
from odradek.client.acls import AclBinding
from odradek.client.admin import Admin
from odradek.client.cli.client_settings import security_only
from odradek.client.serialization import RecordDeserializationError, SerializationError
from odradek.deploy.local import DevCluster, running_cluster

from ..integration.conftest import FAST, wait_for

pytestmark = pytest.mark.integration

USER_SCHEMA = json.dumps(
    {
        "type": "record",
        "name": "User",
        "namespace": "com.example",
        "fields": [{"name": "name", "type": "string"}, {"name": "favorite_number", "type": "long"}],
    }
)
MECHANISM = "SCRAM-SHA-512"


@pytest.fixture(scope="module")
def cluster() -> Iterator[DevCluster]:
    with running_cluster(1, 2, config=FAST, security=True, schema_registry=True) as c:
        yield c


@pytest.fixture(scope="module")
def admin(cluster: DevCluster) -> Iterator[Admin]:
    with Admin({**cluster.client_config(), "request.timeout.ms": 15000}) as a:
        yield a


@pytest.fixture(scope="module")
def admin_user(cluster: DevCluster) -> tuple[str, str]:
    config = cluster.admin_client_config()
    return config["sasl.username"], config["sasl.password"]


@pytest.fixture(scope="module")
def urls(cluster: DevCluster, admin_user: tuple[str, str]) -> list[str]:
    out = cluster.schema_registry_urls.split(",")
    assert all(u.startswith("https://") for u in out) and len(out) == 2
    for url in out:  # every broker's copy has read _schemas
        wait_for(lambda url=url: http(cluster, url + "/subjects", user=admin_user)[0] == 200, 60, 0.5, url)
    return out


def http(
    cluster: DevCluster, url: str, method: str = "GET", body: Any = None, user: tuple[str, str] | None = None
) -> tuple[int, Any]:
    context = ssl.create_default_context(cafile=cluster.security_config()["ssl.ca.location"])
    request = urllib.request.Request(url, None if body is None else json.dumps(body).encode(), method=method)
    request.add_header("Content-Type", "application/vnd.schemaregistry.v1+json")
    if user is not None:
        request.add_header("Authorization", "Basic " + base64.b64encode(":".join(user).encode()).decode())
    try:
        with urllib.request.urlopen(request, timeout=30, context=context) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def refused(answer: tuple[int, Any], status: int, code: int) -> None:
    assert answer[0] == status and answer[1]["error_code"] == code, answer


def new_user(cluster: DevCluster, admin: Admin, urls: list[str]) -> tuple[str, str]:
    """A fresh SCRAM user with no ACLs, once every broker's registry knows its password."""
    user = (f"u-{secrets.token_hex(4)}", secrets.token_urlsafe(12))
    admin.upsert_user_scram_credential(*user, MECHANISM)
    for url in urls:
        wait_for(lambda url=url: http(cluster, url + "/subjects", user=user)[0] == 200, 30, 0.2, "the user's login")
    return user


def grant(admin: Admin, *bindings: AclBinding) -> None:
    admin.create_acls(list(bindings))
    wanted = set(bindings)
    wait_for(lambda: wanted <= set(admin.describe_acls()), 20, 0.2, "the ACLs")


def subject_acl(user: str, operation: str, name: str, pattern: str = "LITERAL") -> AclBinding:
    return AclBinding(
        resource_type="SUBJECT", resource_name=name, principal=f"User:{user}", operation=operation, pattern_type=pattern
    )


def registry_client(cluster: DevCluster, url: str, user: tuple[str, str]) -> SchemaRegistryClient:
    return SchemaRegistryClient(
        {
            "url": url,
            "basic.auth.user.info": ":".join(user),
            "ssl.ca.location": cluster.security_config()["ssl.ca.location"],
        }
    )


def writer_and_follower(admin: Admin, cluster: DevCluster, urls: list[str]) -> tuple[str, str]:
    leader = admin.describe_topic("_schemas").partitions[0].leader
    ports = {n.node_id: n.schema_registry_port for n in cluster.nodes if n.schema_registry_port}
    writer = next(u for u in urls if u.endswith(f":{ports[leader]}"))
    return writer, next(u for u in urls if u != writer)


def test_tls_and_credentials_are_required(cluster: DevCluster, urls: list[str], admin_user: tuple[str, str]) -> None:
    url = urls[0]
    refused(http(cluster, url + "/subjects"), 401, 40101)
    refused(http(cluster, url + "/subjects", user=(admin_user[0], "wrong")), 401, 40101)
    assert http(cluster, url + "/subjects", user=admin_user)[0] == 200  # admin is a super user
    with pytest.raises(OSError):  # plain HTTP on the https port gets no answer
        urllib.request.urlopen(url.replace("https://", "http://") + "/subjects", timeout=10)
    client = registry_client(cluster, url, (admin_user[0], "wrong"))
    with pytest.raises(SchemaRegistryError) as e:
        client.get_subjects()
    assert e.value.http_status_code == 401 and e.value.error_code == 40101


def test_a_user_without_acls_is_refused_and_nothing_is_written(
    cluster: DevCluster, admin: Admin, urls: list[str], admin_user: tuple[str, str]
) -> None:
    user = new_user(cluster, admin, urls)
    refused(
        http(cluster, urls[0] + "/subjects/secret-value/versions", "POST", {"schema": USER_SCHEMA}, user), 403, 40301
    )
    refused(
        http(cluster, urls[1] + "/subjects/secret-value/versions", "POST", {"schema": USER_SCHEMA}, user), 403, 40301
    )
    refused(http(cluster, urls[0] + "/config", "PUT", {"compatibility": "NONE"}, user), 403, 40301)
    assert "secret-value" not in http(cluster, urls[0] + "/subjects", user=admin_user)[1]
    assert http(cluster, urls[0] + "/config", user=admin_user)[1] == {"compatibilityLevel": "BACKWARD"}
    serializer = AvroSerializer(registry_client(cluster, urls[0], user), USER_SCHEMA)
    with pytest.raises(SchemaRegistryError, match="40301"):
        serializer({"name": "ada", "favorite_number": 1}, SerializationContext("secret", MessageField.VALUE))


def test_granted_read_and_write_let_confluents_serializers_through(
    cluster: DevCluster, admin: Admin, urls: list[str]
) -> None:
    user = new_user(cluster, admin, urls)
    grant(admin, subject_acl(user[0], "WRITE", "users-value"))
    grant(admin, subject_acl(user[0], "READ", "users-value"))
    writer, follower = writer_and_follower(admin, cluster, urls)
    context = SerializationContext("users", MessageField.VALUE)
    # Through the broker that is not the writer: the registration is forwarded over https, for this user.
    serializer = AvroSerializer(registry_client(cluster, follower, user), USER_SCHEMA)
    data = serializer({"name": "ada", "favorite_number": 7}, context)
    for url in (writer, follower):  # each broker's deserializer reads the id through the subject that holds it
        deserializer = AvroDeserializer(registry_client(cluster, url, user))
        assert deserializer(data, context) == {"name": "ada", "favorite_number": 7}
    assert http(cluster, follower + "/subjects", user=user) == (200, ["users-value"])
    refused(http(cluster, follower + "/subjects/users-value", "DELETE", user=user), 403, 40301)


def test_odradeks_serializers_reach_an_https_registry_with_the_cluster_ca(
    cluster: DevCluster, admin: Admin, urls: list[str]
) -> None:
    """odradek's own producer and consumer (value.serializer=avro) over https with a registry user's Basic
    credentials, checking the registry's certificate against the cluster CA (schema.registry.ssl.ca.location)."""
    user = new_user(cluster, admin, urls)
    subject = "odradek-users-value"
    grant(admin, subject_acl(user[0], "WRITE", subject), subject_acl(user[0], "READ", subject))
    admin.create_topic("odradek-users", partitions=1, replication_factor=2)
    registry = {
        "schema.registry.url": ",".join(urls),
        "schema.registry.basic.auth.user.info": ":".join(user),
        "schema.registry.ssl.ca.location": cluster.security_config()["ssl.ca.location"],
    }
    serde = {"value.serializer": "avro", "value.schema": USER_SCHEMA, **registry}
    with Producer({**cluster.client_config(), **serde}) as producer:
        producer.send("odradek-users", {"name": "ada", "favorite_number": 3}, partition=0).result(30)
    consumer_config = {**cluster.client_config(), "auto.offset.reset": "earliest", "value.deserializer": "avro"}
    with Consumer({**consumer_config, **registry}) as consumer:
        consumer.assign([("odradek-users", 0)])
        values: list[object] = []
        wait_for(lambda: values.extend(r.value for r in consumer.poll(1000)) or values, 30, 0.1, "the record")
    assert values == [{"name": "ada", "favorite_number": 3}]
    without_ca = {k: v for k, v in registry.items() if k != "schema.registry.ssl.ca.location"}
    with Consumer({**consumer_config, **without_ca}) as consumer:  # the cluster's CA is not one of the system's
        consumer.assign([("odradek-users", 0)])
        with pytest.raises(RecordDeserializationError, match="did not answer"):
            wait_for_error(consumer)


def test_odradeks_serializers_log_in_with_a_client_certificate(
    cluster: DevCluster, admin: Admin, urls: list[str]
) -> None:
    """odradek's producer and consumer present a client certificate (schema.registry.ssl.certificate.location and
    .key.location, here the admin client's, whose principal is a super user) and no password: the registry takes
    the certificate's principal, as a registry that requires client certificates (deploy config --tls) does. Without
    the certificate, and without credentials, the same registration is 401."""
    files = cluster.security_config()
    registry = {
        "schema.registry.url": ",".join(urls),
        "schema.registry.ssl.ca.location": files["ssl.ca.location"],
        "schema.registry.ssl.certificate.location": files["ssl.certificate.location"],
        "schema.registry.ssl.key.location": files["ssl.key.location"],
    }
    admin.create_topic("odradek-mtls", partitions=1, replication_factor=2)
    serde = {"value.serializer": "avro", "value.schema": USER_SCHEMA}
    ca_only = {k: v for k, v in registry.items() if "certificate" not in k and ".key." not in k}
    producer = Producer({**cluster.client_config(), **serde, **ca_only})
    with producer, pytest.raises(SerializationError, match="40101"):
        producer.send("odradek-mtls", {"name": "ada", "favorite_number": 5}, partition=0)
    with Producer({**cluster.client_config(), **serde, **registry}) as producer:
        producer.send("odradek-mtls", {"name": "ada", "favorite_number": 5}, partition=0).result(30)
    consumer_config = {**cluster.client_config(), "auto.offset.reset": "earliest", "value.deserializer": "avro"}
    with Consumer({**consumer_config, **registry}) as consumer:
        consumer.assign([("odradek-mtls", 0)])
        values: list[object] = []
        wait_for(lambda: values.extend(r.value for r in consumer.poll(1000)) or values, 30, 0.1, "the record")
    assert values == [{"name": "ada", "favorite_number": 5}]


def wait_for_error(consumer: Consumer) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        consumer.poll(1000)
    pytest.fail("no error within 30 s")


def test_prefixed_acls_and_the_acl_cli(cluster: DevCluster, admin: Admin, urls: list[str]) -> None:
    user = new_user(cluster, admin, urls)
    added = odradek(
        cluster, "acl", "add", "--allow-principal", f"User:{user[0]}", "--subject", "team-a.",
        "--resource-pattern-type", "prefixed", "--operation", "read,write",
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    assert json.loads(added.stdout)["created"][0]["resource_type"] == "SUBJECT"
    listed = odradek(cluster, "acl", "list", "--subject", "team-a.", "--resource-pattern-type", "prefixed")
    assert sorted(b["operation"] for b in json.loads(listed.stdout)) == ["READ", "WRITE"]
    body = {"schema": USER_SCHEMA}
    wait_for(
        lambda: http(cluster, urls[0] + "/subjects/team-a.orders/versions", "POST", body, user)[0] == 200,
        20,
        0.2,
        "the prefixed grant",
    )
    refused(http(cluster, urls[1] + "/subjects/team-b.orders/versions", "POST", body, user), 403, 40301)
    removed = odradek(cluster, "acl", "remove", "--subject", "team-a.", "--resource-pattern-type", "prefixed")
    assert removed.returncode == 0 and len(json.loads(removed.stdout)["removed"]) == 2, removed.stderr
    wait_for(
        lambda: http(cluster, urls[0] + "/subjects/team-a.orders/versions", user=user)[0] == 403, 20, 0.2, "removal"
    )


def test_the_global_config_needs_cluster_permissions(cluster: DevCluster, admin: Admin, urls: list[str]) -> None:
    user = new_user(cluster, admin, urls)
    refused(http(cluster, urls[1] + "/config", "PUT", {"compatibility": "FULL"}, user), 403, 40301)
    cluster_acl = AclBinding(
        resource_type="CLUSTER", resource_name="kafka-cluster", principal=f"User:{user[0]}", operation="ALTER_CONFIGS"
    )
    grant(admin, cluster_acl)
    wait_for(
        lambda: http(cluster, urls[1] + "/config", "PUT", {"compatibility": "FULL"}, user)[0] == 200, 20, 0.2, "grant"
    )
    # ALTER implies DESCRIBE. Another broker's registry reads the change from the schemas topic a moment later.
    wait_for(lambda: http(cluster, urls[0] + "/config", user=user) == (200, {"compatibilityLevel": "FULL"}), 20, 0.2)
    # The grant reached the first broker too (it learns ACLs from the metadata log, as the second did).
    wait_for(lambda: http(cluster, urls[0] + "/config", "PUT", {"compatibility": "BACKWARD"}, user)[0] == 200, 20, 0.2)


def test_the_schema_cli_uses_the_profiles_credentials(cluster: DevCluster, admin: Admin, urls: list[str]) -> None:
    schema = cluster.directory / "user.avsc"
    schema.write_text(USER_SCHEMA)
    registered = odradek(cluster, "schema", "register", "cli-value", "-f", str(schema), profile=True)
    assert registered.returncode == 0, registered.stderr
    assert json.loads(registered.stdout)["version"] == 1
    # Given explicitly instead: the URL, the CA and a SCRAM user.
    config = cluster.admin_client_config()
    explicit = odradek(
        cluster, "schema", "list", "--registry-url", urls[1], "--ca-location", config["ssl.ca.location"],
        "--basic-auth", f"{config['sasl.username']}:{config['sasl.password']}",
    )  # fmt: skip
    assert explicit.returncode == 0 and "cli-value" in json.loads(explicit.stdout), explicit.stderr
    refused_cli = odradek(
        cluster, "schema", "list", "--registry-url", urls[1], "--ca-location", config["ssl.ca.location"]
    )
    assert refused_cli.returncode != 0 and "40101" in refused_cli.stderr


def odradek(cluster: DevCluster, *args: str, profile: bool = False) -> subprocess.CompletedProcess[str]:
    """The real CLI as the super user ``admin`` (``--client-config`` for the admin commands; with ``profile``, a
    profile as ``dev up --security`` saves it: the registry's URLs and the super user's client config)."""
    home = cluster.directory / "cli-home"
    env = {**os.environ, "ODRADEK_HOME": str(home)}
    for name in ("ODRADEK_BOOTSTRAP_SERVERS", "ODRADEK_SCHEMA_REGISTRY_URL", "ODRADEK_SCHEMA_REGISTRY_BASIC_AUTH"):
        env.pop(name, None)
    if profile:
        home.mkdir(exist_ok=True)
        saved = {
            "schema_registry_url": cluster.schema_registry_urls,
            "client_config": security_only(cluster.admin_client_config()),
        }
        (home / "profile.json").write_text(json.dumps(saved))
    command = [sys.executable, "-m", "odradek.client.cli.main", *args, "--format", "json"]
    if args[0] == "acl":
        command += ["--client-config", str(cluster.admin_client_file)]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=90)


def test_dev_up_security_serves_the_registry_over_https_to_the_cli_and_confluents_client(tmp_path: Path) -> None:
    home, directory = tmp_path / "home", tmp_path / "dev"
    env = {**os.environ, "ODRADEK_HOME": str(home)}
    for name in ("ODRADEK_BOOTSTRAP_SERVERS", "ODRADEK_SCHEMA_REGISTRY_URL", "ODRADEK_SCHEMA_REGISTRY_BASIC_AUTH"):
        env.pop(name, None)

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "odradek.client.cli.main", *args, "--format", "json"]
        return subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)

    up = cli("dev", "up", "--security", "--controllers", "1", "--brokers", "1", "--dir", str(directory))
    assert up.returncode == 0, up.stderr
    try:
        [url] = json.loads(up.stdout)["schema_registry_urls"].split(",")
        assert url.startswith("https://")
        schema = tmp_path / "user.avsc"
        schema.write_text(USER_SCHEMA)
        registered = wait_for(
            lambda: (r := cli("schema", "register", "dev-value", "-f", str(schema))).returncode == 0 and r,
            60,
            0.5,
            "the registry through the profile",
        )
        assert json.loads(registered.stdout)["id"] >= 1
        config = json.loads((directory / "admin-client.json").read_text())
        client = SchemaRegistryClient(
            {
                "url": url,
                "basic.auth.user.info": f"{config['sasl.username']}:{config['sasl.password']}",
                "ssl.ca.location": config["ssl.ca.location"],
            }
        )
        assert client.get_latest_version("dev-value").schema_id == json.loads(registered.stdout)["id"]
        nodes = [tomllib.loads(p.read_text()) for p in directory.glob("node-*/node.toml")]
        registry = [n for n in nodes if "schema.registry.listeners" in n]
        assert registry and all(n["schema.registry.listeners"].startswith("https://") for n in registry)
    finally:
        cli("dev", "down", "--dir", str(directory))

"""The registry's ACL rules: every request type maps to what it needs (a SUBJECT operation, a cluster one, READ on
some subject holding an id, a filtered listing, or nothing), and SUBJECT bindings are validated as the other
resource types' are, by the broker and by the admin client."""

from __future__ import annotations

import json
import typing

import pytest

from odradek.broker.schema_registry import requests as rq
from odradek.broker.schema_registry.authorization import Listing, Need, OnCluster, OnSubject, ReadsId, need
from odradek.broker.schema_registry.routes import route
from odradek.client import acls as client_acls
from odradek.client.common.acls import (
    KAFKA_RESOURCE_TYPES,
    AclBinding,
    AclOperation,
    AclPermissionType,
    Authorizer,
    PatternType,
    ResourceType,
    validate_binding,
)
from odradek.client.errors import InvalidRequestError

Op = AclOperation
SCHEMA = json.dumps({"schema": '"string"'}).encode()

# (method, path, body) -> what it needs
TABLE: list[tuple[str, str, bytes, Need]] = [
    ("GET", "/", b"", None),
    ("GET", "/schemas/types", b"", None),
    ("GET", "/contexts", b"", None),
    ("GET", "/subjects", b"", Listing(Op.DESCRIBE)),
    ("GET", "/schemas", b"", Listing(Op.READ)),
    ("GET", "/schemas/ids/3", b"", ReadsId(3)),
    ("GET", "/schemas/ids/3/schema", b"", ReadsId(3)),
    ("GET", "/schemas/ids/3/subjects", b"", ReadsId(3)),
    ("GET", "/schemas/ids/3/versions", b"", ReadsId(3)),
    ("GET", "/subjects/s/versions", b"", OnSubject(Op.READ, "s")),
    ("GET", "/subjects/s/versions/1", b"", OnSubject(Op.READ, "s")),
    ("GET", "/subjects/s/versions/latest/schema", b"", OnSubject(Op.READ, "s")),
    ("GET", "/subjects/s/versions/1/referencedby", b"", OnSubject(Op.READ, "s")),
    ("POST", "/subjects/s", SCHEMA, OnSubject(Op.READ, "s")),
    ("POST", "/compatibility/subjects/s/versions/latest", SCHEMA, OnSubject(Op.READ, "s")),
    ("POST", "/compatibility/subjects/s/versions", SCHEMA, OnSubject(Op.READ, "s")),
    ("POST", "/subjects/s/versions", SCHEMA, OnSubject(Op.WRITE, "s")),
    ("DELETE", "/subjects/s", b"", OnSubject(Op.DELETE, "s")),
    ("DELETE", "/subjects/s/versions/1", b"", OnSubject(Op.DELETE, "s")),
    ("GET", "/config/s", b"", OnSubject(Op.DESCRIBE_CONFIGS, "s")),
    ("GET", "/mode/s", b"", OnSubject(Op.DESCRIBE_CONFIGS, "s")),
    ("PUT", "/config/s", b'{"compatibility": "FULL"}', OnSubject(Op.ALTER_CONFIGS, "s")),
    ("DELETE", "/config/s", b"", OnSubject(Op.ALTER_CONFIGS, "s")),
    ("PUT", "/mode/s", b'{"mode": "READONLY"}', OnSubject(Op.ALTER_CONFIGS, "s")),
    ("DELETE", "/mode/s", b"", OnSubject(Op.ALTER_CONFIGS, "s")),
    ("GET", "/config", b"", OnCluster(Op.DESCRIBE_CONFIGS)),
    ("GET", "/mode", b"", OnCluster(Op.DESCRIBE_CONFIGS)),
    ("PUT", "/config", b'{"compatibility": "FULL"}', OnCluster(Op.ALTER_CONFIGS)),
    ("DELETE", "/config", b"", OnCluster(Op.ALTER_CONFIGS)),
    ("PUT", "/mode", b'{"mode": "IMPORT"}', OnCluster(Op.ALTER_CONFIGS)),
]


@pytest.mark.parametrize(("method", "path", "body", "expected"), TABLE)
def test_each_endpoint_needs_what_the_table_says(method: str, path: str, body: bytes, expected: Need) -> None:
    assert need(route(method, path, body)) == expected


def test_the_table_covers_every_request_type() -> None:
    covered = {type(route(method, path, body)) for method, path, body, _ in TABLE}
    assert covered == set(typing.get_args(rq.Request))


def test_a_subject_binding_takes_the_registry_operations_only() -> None:
    def binding(operation: AclOperation) -> AclBinding:
        return AclBinding(
            ResourceType.SUBJECT, "orders-", PatternType.PREFIXED, "User:a", "*", operation, AclPermissionType.ALLOW
        )

    for operation in (Op.READ, Op.WRITE, Op.DELETE, Op.DESCRIBE, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS, Op.ALL):
        validate_binding(binding(operation))
    for operation in (Op.CREATE, Op.ALTER, Op.CLUSTER_ACTION, Op.IDEMPOTENT_WRITE):
        with pytest.raises(ValueError, match="does not apply to Subject"):
            validate_binding(binding(operation))
    assert ResourceType.parse("subject") is ResourceType.SUBJECT and ResourceType.SUBJECT not in KAFKA_RESOURCE_TYPES
    assert max(KAFKA_RESOURCE_TYPES) < ResourceType.SUBJECT <= 127  # beyond Kafka's codes, within its INT8 field


def test_subject_acls_authorize_as_topic_acls_do() -> None:
    allow, deny = AclPermissionType.ALLOW, AclPermissionType.DENY
    authorizer = Authorizer(
        [
            AclBinding(ResourceType.SUBJECT, "team-a.", PatternType.PREFIXED, "User:a", "*", Op.WRITE, allow),
            AclBinding(ResourceType.SUBJECT, "team-a.secret", PatternType.LITERAL, "User:a", "*", Op.ALL, deny),
        ]
    )
    assert authorizer.authorize("User:a", "10.0.0.1", Op.WRITE, ResourceType.SUBJECT, "team-a.orders")
    assert authorizer.authorize("User:a", "10.0.0.1", Op.DESCRIBE, ResourceType.SUBJECT, "team-a.orders")  # implied
    assert not authorizer.authorize("User:a", "10.0.0.1", Op.READ, ResourceType.SUBJECT, "team-a.orders")
    assert not authorizer.authorize("User:a", "10.0.0.1", Op.WRITE, ResourceType.SUBJECT, "team-a.secret")
    assert not authorizer.authorize("User:a", "10.0.0.1", Op.WRITE, ResourceType.TOPIC, "team-a.orders")


def test_the_admin_client_names_and_checks_subject_bindings() -> None:
    b = client_acls.AclBinding(resource_type="subject", resource_name="s", principal="User:a", operation="read")
    assert (b.resource_type, client_acls.code("resource type", b.resource_type)) == ("SUBJECT", 100)
    client_acls.check_binding(b)
    with pytest.raises(InvalidRequestError, match="does not apply to SUBJECT"):
        client_acls.check_binding(
            client_acls.AclBinding(resource_type="SUBJECT", resource_name="s", principal="User:a", operation="CREATE")
        )
    assert client_acls.name_of("resource type", 100) == "SUBJECT"

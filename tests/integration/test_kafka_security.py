"""kafka-python's KafkaAdminClient manages ACLs and SCRAM credentials through the Kafka listener of a real cluster:
what it stores odradek's own admin client reads back, and the other way round."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kafka import KafkaAdminClient
from kafka.admin import (
    ACL,
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)
from kafka.admin._users import ScramMechanism, UserScramCredentialDeletion, UserScramCredentialUpsertion

from odradek.client.acls import AclBinding, AclBindingFilter
from odradek.client.admin import Admin
from odradek.client.errors import ErrorCode
from odradek.deploy.local import DevCluster

from .conftest import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.odradek_cluster(controllers=1, brokers=2)]


@pytest.fixture
def admin(odradek_cluster: DevCluster) -> Iterator[Admin]:
    a = Admin({"bootstrap.servers": odradek_cluster.admin_servers, "request.timeout.ms": 10000})
    yield a
    a.close()


def test_acls_through_kafka_python(kafka_admin: KafkaAdminClient, admin: Admin) -> None:
    read = ACL(
        principal="User:kp",
        host="*",
        operation=ACLOperation.READ,
        permission_type=ACLPermissionType.ALLOW,
        resource_pattern=ResourcePattern(ResourceType.TOPIC, "kp-topic"),
    )
    deny = ACL(
        principal="User:kp",
        host="10.1.2.3",
        operation=ACLOperation.WRITE,
        permission_type=ACLPermissionType.DENY,
        resource_pattern=ResourcePattern(ResourceType.TOPIC, "kp-", ACLResourcePatternType.PREFIXED),
    )
    bad = ACL(
        principal="User:kp",
        host="*",
        operation=ACLOperation.IDEMPOTENT_WRITE,
        permission_type=ACLPermissionType.ALLOW,
        resource_pattern=ResourcePattern(ResourceType.TOPIC, "kp-topic"),
    )
    result = kafka_admin.create_acls([read, deny, bad])
    assert result["succeeded"] == [read, deny]
    assert [error.errno for error in result["failed"]] == [ErrorCode.INVALID_REQUEST]  # kafka-python keeps no message

    mine = AclBindingFilter(principal="User:kp")
    wait_for(lambda: len(admin.describe_acls(mine)) == 2, 10, what="kafka-python's ACLs in odradek's image")
    assert AclBinding(
        resource_type="TOPIC", resource_name="kp-", pattern_type="PREFIXED", principal="User:kp", host="10.1.2.3",
        operation="WRITE", permission="DENY",
    ) in admin.describe_acls(mine)  # fmt: skip

    applying = ACLFilter(
        principal=None,
        host=None,
        operation=ACLOperation.ANY,
        permission_type=ACLPermissionType.ANY,
        resource_pattern=ResourcePatternFilter(ResourceType.TOPIC, "kp-topic", ACLResourcePatternType.MATCH),
    )
    found, error = kafka_admin.describe_acls(applying)
    assert error.errno == 0 and {a.operation for a in found} == {ACLOperation.READ, ACLOperation.WRITE}

    admin.create_acls([AclBinding(resource_type="group", resource_name="kp-g", principal="User:kp", operation="read")])
    everything_of_kp = ACLFilter(
        principal="User:kp",
        host=None,
        operation=ACLOperation.ANY,
        permission_type=ACLPermissionType.ANY,
        resource_pattern=ResourcePatternFilter(ResourceType.ANY, None, ACLResourcePatternType.ANY),
    )
    wait_for(lambda: len(kafka_admin.describe_acls(everything_of_kp)[0]) == 3, 10, what="odradek's ACL over Kafka")
    [(_, deleted, error)] = kafka_admin.delete_acls([everything_of_kp])
    assert error.errno == 0 and len(deleted) == 3
    wait_for(lambda: admin.describe_acls(mine) == [], 10, what="every ACL of User:kp removed")


def test_scram_credentials_through_kafka_python(kafka_admin: KafkaAdminClient, admin: Admin) -> None:
    result = kafka_admin.alter_user_scram_credentials(
        [
            UserScramCredentialUpsertion("kp-user", "SCRAM-SHA-512", "secret", iterations=8192),
            UserScramCredentialUpsertion("kp-low", "SCRAM-SHA-256", "secret", iterations=1000),
        ]
    )
    assert result["kp-user"] is None and "Too few iterations" in result["kp-low"]
    wait_for(lambda: "kp-user" in admin.describe_user_scram_credentials(), 10, what="kp-user in odradek's image")
    [info] = admin.describe_user_scram_credentials(["kp-user"])["kp-user"]
    assert (info.mechanism, info.iterations) == ("SCRAM-SHA-512", 8192)

    admin.upsert_user_scram_credential("kp-user", "other")  # SCRAM-SHA-256
    wait_for(
        lambda: len(kafka_admin.describe_user_scram_credentials(["kp-user"])["kp-user"]["credential_infos"]) == 2,
        10,
        what="two credentials over Kafka",
    )
    described = kafka_admin.describe_user_scram_credentials(["kp-user", "kp-nobody"])
    assert sorted((c["mechanism"], c["iterations"]) for c in described["kp-user"]["credential_infos"]) == [
        (ScramMechanism.SCRAM_SHA_256, 4096),
        (ScramMechanism.SCRAM_SHA_512, 8192),
    ]
    assert described["kp-nobody"]["error"] and described["kp-nobody"]["credential_infos"] == []
    result = kafka_admin.alter_user_scram_credentials(
        [UserScramCredentialDeletion("kp-user", "SCRAM-SHA-512"), UserScramCredentialDeletion("kp-nobody", 1)]
    )
    assert result["kp-user"] is None and "does not exist" in result["kp-nobody"]

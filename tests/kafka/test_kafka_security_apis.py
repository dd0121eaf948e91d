"""Kafka's ACL and SCRAM credential APIs on the Kafka listener at every served version. Reads go to the real Admin
service over a real metadata image holding ACLs and credentials; writes go to a recording stand-in of the service,
so each test checks the request handed to the service and the Kafka answer made of its reply."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest
from google.protobuf.message import Message
from kafka.admin._users import UserScramCredentialUpsertion
from kafka.net.sasl.scram import ScramClient
from kafka.protocol.admin.acl import CreateAclsRequest, DeleteAclsRequest, DescribeAclsRequest
from kafka.protocol.admin.users import AlterUserScramCredentialsRequest, DescribeUserScramCredentialsRequest
from kafka_harness import call, served
from recording_admin import RecordingAdmin

from odradek.broker.kafka import security_apis
from odradek.broker.kafka.apis import ApiRegistry
from odradek.broker.kafka.backend import KafkaBackend
from odradek.broker.security.sasl_session import SaslSession
from odradek.broker.topic_defaults import topic_defaults
from odradek.client.common.acls import AclBinding, AclOperation, AclPermissionType, PatternType, ResourceType
from odradek.client.common.metadata_image import MetadataDelta, MetadataImage
from odradek.client.common.scram import Mechanism, make_credential
from odradek.client.errors import ErrorCode
from odradek.controller.admin.service import NodeAdmin
from odradek.controller.raft import Role
from odradek.proto import admin_pb2 as apb

READ = AclBinding(
    ResourceType.TOPIC, "orders", PatternType.LITERAL, "User:ann", "*", AclOperation.READ, AclPermissionType.ALLOW
)
WRITE = AclBinding(
    ResourceType.TOPIC, "orders", PatternType.LITERAL, "User:ann", "*", AclOperation.WRITE, AclPermissionType.ALLOW
)
DENY = AclBinding(
    ResourceType.GROUP, "g-", PatternType.PREFIXED, "User:*", "10.0.0.1", AclOperation.ALL, AclPermissionType.DENY
)


def image() -> MetadataImage:
    return MetadataImage(
        offset=5,
        acls={b"a" * 16: READ, b"b" * 16: WRITE, b"c" * 16: DENY},
        scram_credentials={
            ("ann", "SCRAM-SHA-256"): make_credential(Mechanism.SCRAM_SHA_256, "pw"),
            ("ann", "SCRAM-SHA-512"): make_credential(Mechanism.SCRAM_SHA_512, "pw", iterations=8192),
        },
    )


def setup(**answers: Message) -> tuple[ApiRegistry, RecordingAdmin]:
    admin = RecordingAdmin(answers, image)
    return registry(admin, image), admin


def registry(admin: Any, image: Callable[[], MetadataImage]) -> ApiRegistry:
    backend: Any = KafkaBackend(
        broker_id=2,
        cluster_id="cluster-x",
        listener="KAFKA",
        image=image,
        controller_id=lambda: 9,
        endpoint=lambda _: None,
        data=None,  # type: ignore[arg-type]
        groups=None,  # type: ignore[arg-type]
        transactions=None,  # type: ignore[arg-type]
        admin=admin,  # type: ignore[arg-type]
    )
    r = ApiRegistry()
    security_apis.register(r, backend)
    return r


def test_served_versions() -> None:
    reg, _ = setup()
    assert served(reg, DescribeAclsRequest) == range(1, 4)
    assert served(reg, CreateAclsRequest) == range(1, 4)
    assert served(reg, DeleteAclsRequest) == range(1, 4)
    assert served(reg, DescribeUserScramCredentialsRequest) == range(0, 1)
    assert served(reg, AlterUserScramCredentialsRequest) == range(0, 1)


def describe(version: int, **fields: Any) -> DescribeAclsRequest:
    base = dict(
        resource_type_filter=1,
        resource_name_filter=None,
        pattern_type_filter=1,
        principal_filter=None,
        host_filter=None,
        operation=1,
        permission_type=1,
    )
    return DescribeAclsRequest(version=version, **{**base, **fields})


@pytest.mark.parametrize("version", range(1, 4))
async def test_describe_acls_groups_bindings_by_resource(version: int) -> None:
    reg, admin = setup()
    response = await call(reg, describe(version), version)
    assert response.error_code == 0 and response.error_message is None
    got = {
        (r.resource_type, r.resource_name, r.pattern_type): sorted(
            (a.principal, a.host, a.operation, a.permission_type) for a in r.acls
        )
        for r in response.resources
    }
    assert got == {
        (2, "orders", 3): [("User:ann", "*", 3, 3), ("User:ann", "*", 4, 3)],
        (3, "g-", 4): [("User:*", "10.0.0.1", 2, 2)],
    }
    # ANY codes and null strings become an empty filter; a MATCH filter passes its name
    assert admin.requests["DescribeAcls"] == apb.DescribeAclsRequest(
        filter=apb.AclBindingFilter(resource_type=1, pattern_type=1, operation=1, permission_type=1)
    )
    response = await call(reg, describe(version, resource_name_filter="g-1", pattern_type_filter=2), version)
    assert [(r.resource_name, r.pattern_type) for r in response.resources] == [("g-", 4)]
    response = await call(reg, describe(version, operation=4, principal_filter="User:ann"), version)
    assert [[a.operation for a in r.acls] for r in response.resources] == [[4]]


@pytest.mark.parametrize("version", range(1, 4))
async def test_describe_acls_refuses_an_unknown_code(version: int) -> None:
    reg, _ = setup()
    response = await call(reg, describe(version, operation=0), version)
    assert response.error_code == ErrorCode.INVALID_REQUEST and "operation" in response.error_message
    assert response.resources == []


@pytest.mark.parametrize("version", range(1, 4))
async def test_create_acls_passes_bindings_and_answers_per_creation(version: int) -> None:
    answer = apb.CreateAclsResponse(
        results=[apb.AclCreationResult(), apb.AclCreationResult(error=ErrorCode.INVALID_REQUEST, error_message="bad")],
    )
    reg, admin = setup(CreateAcls=answer)
    c = CreateAclsRequest.AclCreation
    request = CreateAclsRequest(
        version=version,
        creations=[
            c(resource_type=2, resource_name="t", resource_pattern_type=3, principal="User:a", host="*", operation=3,
              permission_type=3),
            c(resource_type=4, resource_name="x", resource_pattern_type=3, principal="User:a", host="*", operation=7,
              permission_type=2),
        ],
    )  # fmt: skip
    response = await call(reg, request, version, throttle_ms=3)  # the request quota's throttle
    assert [(r.error_code, r.error_message) for r in response.results] == [
        (0, None),
        (ErrorCode.INVALID_REQUEST, "bad"),
    ]
    assert response.throttle_time_ms == 3
    sent = admin.requests["CreateAcls"]
    assert sent.creations[1] == apb.AclBinding(
        resource_type=4, resource_name="x", pattern_type=3, principal="User:a", host="*", operation=7, permission_type=2
    )


@pytest.mark.parametrize("version", range(1, 4))
async def test_writes_without_a_controller_answer_not_controller_per_item(version: int) -> None:
    reg, _ = setup()
    c = CreateAclsRequest.AclCreation
    creation = c(resource_type=2, resource_name="t", resource_pattern_type=3, principal="User:a", host="*",
                 operation=3, permission_type=3)  # fmt: skip
    response = await call(reg, CreateAclsRequest(version=version, creations=[creation]), version)
    assert [r.error_code for r in response.results] == [ErrorCode.NOT_CONTROLLER]
    f = DeleteAclsRequest.DeleteAclsFilter
    any_filter = f(resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1, principal_filter=None,
                   host_filter=None, operation=1, permission_type=1)  # fmt: skip
    response = await call(reg, DeleteAclsRequest(version=version, filters=[any_filter]), version)
    assert [(r.error_code, r.matching_acls) for r in response.filter_results] == [(ErrorCode.NOT_CONTROLLER, [])]


@pytest.mark.parametrize("version", range(1, 4))
async def test_delete_acls_lists_what_each_filter_removed(version: int) -> None:
    deleted = apb.AclBinding(
        resource_type=2, resource_name="t", pattern_type=3, principal="User:a", host="*", operation=3, permission_type=3
    )
    refusal = apb.AclDeletionResult(error=ErrorCode.INVALID_REQUEST, error_message="unknown operation")
    # The second filter is for ANY resource type: it goes to the service as one filter per Kafka type (four).
    answer = apb.DeleteAclsResponse(results=[apb.AclDeletionResult(deleted=[deleted]), *[refusal] * 4])
    reg, admin = setup(DeleteAcls=answer)
    f = DeleteAclsRequest.DeleteAclsFilter
    request = DeleteAclsRequest(
        version=version,
        filters=[
            f(resource_type_filter=2, resource_name_filter="t", pattern_type_filter=3, principal_filter="User:a",
              host_filter="*", operation=3, permission_type=3),
            f(resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1, principal_filter=None,
              host_filter=None, operation=0, permission_type=1),
        ],
    )  # fmt: skip
    response = await call(reg, request, version)
    first, second = response.filter_results
    assert first.error_code == 0 and [
        (m.error_code, m.resource_type, m.resource_name, m.pattern_type, m.principal, m.host, m.operation,
         m.permission_type)
        for m in first.matching_acls
    ] == [(0, 2, "t", 3, "User:a", "*", 3, 3)]  # fmt: skip
    assert (second.error_code, second.error_message, second.matching_acls) == (
        ErrorCode.INVALID_REQUEST,
        "unknown operation",
        [],
    )
    sent = admin.requests["DeleteAcls"].filters
    assert sent[0].resource_name == "t" and not sent[1].HasField("resource_name") and sent[1].operation == 0
    assert [f.resource_type for f in sent] == [2, 2, 3, 4, 5]


SUBJECT_READ = AclBinding(
    ResourceType.SUBJECT, "orders-value", PatternType.LITERAL, "User:ann", "*", AclOperation.READ,
    AclPermissionType.ALLOW,
)  # fmt: skip


def image_with_a_subject_acl() -> MetadataImage:
    return MetadataImage(offset=5, acls={b"a" * 16: READ, b"s" * 16: SUBJECT_READ})


@pytest.mark.parametrize("version", range(1, 4))
async def test_a_filter_for_any_resource_type_leaves_schema_registry_subjects_out(version: int) -> None:
    """Kafka's clients cannot read odradek's SUBJECT code: listing every ACL shows the Kafka ones alone, and a
    filter naming the SUBJECT code (100) selects them."""
    reg = registry(RecordingAdmin({}, image_with_a_subject_acl), image_with_a_subject_acl)
    response = await call(reg, describe(version), version)
    assert [(r.resource_type, r.resource_name) for r in response.resources] == [(2, "orders")]
    response = await call(reg, describe(version, resource_type_filter=100), version)
    assert [(r.resource_type, r.resource_name) for r in response.resources] == [(100, "orders-value")]


@pytest.mark.parametrize("version", range(1, 4))
async def test_deleting_every_acl_over_kafka_keeps_schema_registry_subjects(version: int) -> None:
    topic = apb.AclBinding(
        resource_type=2, resource_name="t", pattern_type=3, principal="User:a", host="*", operation=3, permission_type=3
    )
    answer = apb.DeleteAclsResponse(
        results=[apb.AclDeletionResult(deleted=[topic]), *[apb.AclDeletionResult()] * 3, apb.AclDeletionResult()]
    )
    reg, admin = setup(DeleteAcls=answer)
    f = DeleteAclsRequest.DeleteAclsFilter
    request = DeleteAclsRequest(
        version=version,
        filters=[
            f(resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1, principal_filter=None,
              host_filter=None, operation=1, permission_type=1),
            f(resource_type_filter=100, resource_name_filter=None, pattern_type_filter=1, principal_filter=None,
              host_filter=None, operation=1, permission_type=1),
        ],
    )  # fmt: skip
    response = await call(reg, request, version)
    assert [[m.resource_name for m in r.matching_acls] for r in response.filter_results] == [["t"], []]
    assert [f.resource_type for f in admin.requests["DeleteAcls"].filters] == [2, 3, 4, 5, 100]


async def test_describe_user_scram_credentials() -> None:
    reg, _ = setup()
    request = DescribeUserScramCredentialsRequest(version=0, users=None)
    response = await call(reg, request, 0)
    assert response.error_code == 0
    [ann] = response.results
    assert (ann.user, ann.error_code) == ("ann", 0)
    assert sorted((c.mechanism, c.iterations) for c in ann.credential_infos) == [(1, 4096), (2, 8192)]
    user = DescribeUserScramCredentialsRequest.UserName
    response = await call(reg, DescribeUserScramCredentialsRequest(version=0, users=[user(name="bob")]), 0)
    assert [(r.user, r.error_code, r.credential_infos) for r in response.results] == [
        ("bob", ErrorCode.RESOURCE_NOT_FOUND, [])
    ]


async def test_alter_user_scram_credentials_translates_mechanism_codes() -> None:
    answer = apb.AlterUserScramCredentialsResponse(
        results=[
            apb.AlterUserScramCredentialsResult(user="ann"),
            apb.AlterUserScramCredentialsResult(
                user="bob", error=ErrorCode.UNSUPPORTED_SASL_MECHANISM, error_message="x"
            ),
        ]
    )
    reg, admin = setup(AlterUserScramCredentials=answer)
    salted = hashlib.pbkdf2_hmac("sha512", b"pw", b"s" * 24, 4096)
    r = AlterUserScramCredentialsRequest
    request = r(
        version=0,
        deletions=[r.ScramCredentialDeletion(name="bob", mechanism=9)],
        upsertions=[
            r.ScramCredentialUpsertion(name="ann", mechanism=2, iterations=4096, salt=b"s" * 24, salted_password=salted)
        ],
    )
    response = await call(reg, request, 0)
    assert [(x.user, x.error_code, x.error_message) for x in response.results] == [
        ("ann", 0, None),
        ("bob", ErrorCode.UNSUPPORTED_SASL_MECHANISM, "x"),
    ]
    sent = admin.requests["AlterUserScramCredentials"]
    assert sent.upsertions[0] == apb.ScramCredentialUpsertion(
        user="ann", mechanism="SCRAM-SHA-512", iterations=4096, salt=b"s" * 24, salted_password=salted
    )
    assert sent.deletions[0].mechanism == "mechanism code 9"


async def test_alter_user_scram_credentials_without_a_controller() -> None:
    reg, _ = setup()
    r = AlterUserScramCredentialsRequest
    request = r(version=0, deletions=[r.ScramCredentialDeletion(name="bob", mechanism=1)], upsertions=[])
    response = await call(reg, request, 0)
    assert [(x.user, x.error_code) for x in response.results] == [("bob", ErrorCode.NOT_CONTROLLER)]


class ImageController:
    """The active controller's write path without a log: the records it decides are replayed into its image."""

    def __init__(self) -> None:
        self.image = MetadataImage()

    async def write(self, decide: Callable[[MetadataImage, int], tuple[list, Any]]) -> Any:
        records, result = decide(self.image, self.image.offset + 1)
        delta = MetadataDelta(self.image)
        delta.replay_all(records)
        self.image = delta.image()
        return result


async def test_a_credential_with_a_four_byte_salt_is_set_and_logs_in() -> None:
    """Kafka takes any non-empty salt (confluent-kafka's integration tests set one of 4 bytes), and refuses an empty
    one as an unacceptable credential. Set through the listener onto the admin service of an active controller,
    the credential then logs in on a SASL session that reads the resulting image."""
    controller = ImageController()
    leader = SimpleNamespace(node_id=1, leader=SimpleNamespace(role=Role.LEADER))
    sm = SimpleNamespace(image=controller.image)
    admin = NodeAdmin(sm, leader, {}, {}, controller, topic_defaults=topic_defaults())  # type: ignore[arg-type]
    reg = registry(admin, lambda: controller.image)
    dave = UserScramCredentialUpsertion("dave", "SCRAM-SHA-256", "dave-secret", iterations=8192, salt=b"salt")
    r = AlterUserScramCredentialsRequest
    request = r(
        version=0,
        deletions=[],
        upsertions=[
            r.ScramCredentialUpsertion(
                name="dave", mechanism=1, iterations=8192, salt=b"salt", salted_password=dave.salted_password
            ),
            r.ScramCredentialUpsertion(
                name="erin", mechanism=1, iterations=8192, salt=b"", salted_password=dave.salted_password
            ),
        ],
    )
    response = await call(reg, request, 0)
    assert [(x.user, x.error_code, x.error_message) for x in response.results] == [
        ("dave", 0, None),
        ("erin", ErrorCode.UNACCEPTABLE_CREDENTIAL, "a SCRAM salt must not be empty"),
    ]
    assert set(controller.image.scram_credentials) == {("dave", "SCRAM-SHA-256")}

    session = SaslSession(tuple(Mechanism), lambda user, m: controller.image.scram_credentials.get((user, m.value)))
    assert session.handshake("SCRAM-SHA-256").error_code == ErrorCode.NONE
    client = ScramClient("dave", "dave-secret", "SCRAM-SHA-256")
    client.process_server_first_message(session.authenticate(client.first_message()).auth_bytes)
    final = session.authenticate(client.final_message())
    assert final.error_code == ErrorCode.NONE
    client.process_server_final_message(final.auth_bytes)  # raises unless the server proved it holds the credential
    assert session.authenticated and session.principal == "User:dave"

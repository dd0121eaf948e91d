"""ACL and SCRAM credential records: replayed into the image, removed by id / (user, mechanism), and rebuilt from a
snapshot (the image's own records) exactly."""

from __future__ import annotations

from controller_images import apply, build

from odradek.client.common.acls import AclBinding, AclOperation, AclPermissionType, PatternType, ResourceType
from odradek.client.common.metadata_image import acl_record, image_from_records, scram_record
from odradek.client.common.scram import Mechanism, make_credential
from odradek.proto import metadata_pb2 as md

READ_T = AclBinding(
    ResourceType.TOPIC, "t", PatternType.LITERAL, "User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW
)
DENY_G = AclBinding(
    ResourceType.GROUP, "g-", PatternType.PREFIXED, "User:*", "10.0.0.1", AclOperation.ALL, AclPermissionType.DENY
)


def acl(acl_id: bytes, binding: AclBinding) -> md.MetadataRecord:
    return md.MetadataRecord(access_control_entry=acl_record(acl_id, binding))


def test_acls_are_added_and_removed_by_id() -> None:
    img = apply(build(), [acl(b"a" * 16, READ_T), acl(b"b" * 16, DENY_G)])
    assert dict(img.acls) == {b"a" * 16: READ_T, b"b" * 16: DENY_G}
    img = apply(
        img,
        [
            md.MetadataRecord(remove_access_control_entry=md.RemoveAccessControlEntryRecord(id=b"a" * 16)),
            md.MetadataRecord(remove_access_control_entry=md.RemoveAccessControlEntryRecord(id=b"x" * 16)),
        ],
    )
    assert dict(img.acls) == {b"b" * 16: DENY_G}


def test_credentials_are_kept_per_user_and_mechanism_and_replaced_by_a_new_one() -> None:
    first = make_credential(Mechanism.SCRAM_SHA_256, "pw1")
    second = make_credential(Mechanism.SCRAM_SHA_256, "pw2", iterations=8192)
    other = make_credential(Mechanism.SCRAM_SHA_512, "pw3")
    img = apply(
        build(),
        [
            md.MetadataRecord(user_scram_credential=scram_record("alice", first)),
            md.MetadataRecord(user_scram_credential=scram_record("alice", other)),
            md.MetadataRecord(user_scram_credential=scram_record("alice", second)),
        ],
    )
    assert dict(img.scram_credentials) == {("alice", "SCRAM-SHA-256"): second, ("alice", "SCRAM-SHA-512"): other}
    remove = md.RemoveUserScramCredentialRecord(name="alice", mechanism="SCRAM-SHA-512")
    img = apply(img, [md.MetadataRecord(remove_user_scram_credential=remove)])
    assert dict(img.scram_credentials) == {("alice", "SCRAM-SHA-256"): second}


def test_a_snapshot_rebuilds_acls_and_credentials() -> None:
    credential = make_credential(Mechanism.SCRAM_SHA_512, "secret")
    img = apply(
        build(),
        [
            acl(b"a" * 16, READ_T),
            acl(b"b" * 16, DENY_G),
            md.MetadataRecord(user_scram_credential=scram_record("bob", credential)),
        ],
    )
    rebuilt = image_from_records(img.to_records())
    assert dict(rebuilt.acls) == dict(img.acls)
    assert dict(rebuilt.scram_credentials) == {("bob", "SCRAM-SHA-512"): credential}


def test_other_records_leave_acls_and_credentials_as_they_are() -> None:
    img = apply(build(), [acl(b"a" * 16, READ_T)])
    after = apply(img, [md.MetadataRecord(producer_ids=md.ProducerIdsRecord(next_producer_id=5))])
    assert after.acls is img.acls and after.scram_credentials is img.scram_credentials

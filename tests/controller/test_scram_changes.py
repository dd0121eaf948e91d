"""AlterUserScramCredentials and DescribeUserScramCredentials decided against an image, with KIP-554's per-user
rules: keys derived from the salted password, a user named twice refused, bad mechanisms, names and iteration
counts refused with their codes, deleting what does not exist refused."""

from __future__ import annotations

import hashlib

import pytest
from controller_images import apply, build

from odradek.client.common.metadata_image import MetadataImage
from odradek.client.common.scram import MAX_ITERATIONS, MIN_ITERATIONS, Mechanism, make_credential
from odradek.client.errors import ErrorCode
from odradek.controller.scram_changes import (
    Deletion,
    Upsertion,
    alter_user_scram_credentials,
    describe_user_scram_credentials,
)

SALT = b"s" * 24


def upsert(user: str, password: str = "pw", mechanism: str = "SCRAM-SHA-256", iterations: int = 4096) -> Upsertion:
    hash_name = "sha512" if mechanism == "SCRAM-SHA-512" else "sha256"
    salted = hashlib.pbkdf2_hmac(hash_name, password.encode(), SALT, iterations)
    return Upsertion(user, mechanism, iterations, SALT, salted)


def alter(
    img: MetadataImage,
    upsertions: list[Upsertion],
    deletions: list[Deletion] = (),  # type: ignore[assignment]
) -> tuple[list, MetadataImage]:
    results = alter_user_scram_credentials(img, upsertions, deletions)
    return results, apply(img, [r for res in results for r in res.records])


def outcome(results: list) -> list[tuple[str, int]]:
    return [(r.user, r.error) for r in results]


def test_an_upsertion_stores_the_keys_a_password_login_needs_and_never_the_password() -> None:
    results, img = alter(build(), [upsert("alice", "secret"), upsert("bob", mechanism="SCRAM-SHA-512")])
    assert outcome(results) == [("alice", ErrorCode.NONE), ("bob", ErrorCode.NONE)]
    stored = img.scram_credentials[("alice", "SCRAM-SHA-256")]
    assert stored == make_credential(Mechanism.SCRAM_SHA_256, "secret", salt=SALT)
    record = results[0].records[0].user_scram_credential
    assert b"secret" not in record.SerializeToString()
    assert ("bob", "SCRAM-SHA-512") in img.scram_credentials


def test_an_upsertion_replaces_the_users_credential_for_that_mechanism() -> None:
    _, img = alter(build(), [upsert("alice", "one")])
    _, img = alter(img, [upsert("alice", "two", iterations=8192)])
    assert img.scram_credentials[("alice", "SCRAM-SHA-256")].iterations == 8192
    assert len(img.scram_credentials) == 1


def test_a_deletion_removes_one_mechanism_and_a_missing_one_is_not_found() -> None:
    _, img = alter(build(), [upsert("alice"), upsert("bob", mechanism="SCRAM-SHA-512")])
    _, img = alter(img, [upsert("bob")])
    results, img = alter(
        img,
        [],
        [Deletion("bob", "SCRAM-SHA-512"), Deletion("alice", "SCRAM-SHA-512"), Deletion("carol", "SCRAM-SHA-256")],
    )
    assert outcome(results) == [
        ("bob", ErrorCode.NONE),
        ("alice", ErrorCode.RESOURCE_NOT_FOUND),
        ("carol", ErrorCode.RESOURCE_NOT_FOUND),
    ]
    assert set(img.scram_credentials) == {("alice", "SCRAM-SHA-256"), ("bob", "SCRAM-SHA-256")}


def test_a_user_named_twice_is_refused_whole_and_others_proceed() -> None:
    _, img = alter(build(), [upsert("bob")])
    results, after = alter(
        img,
        [upsert("alice"), upsert("alice", mechanism="SCRAM-SHA-512"), upsert("carol"), upsert("bob")],
        [Deletion("bob", "SCRAM-SHA-256")],
    )
    assert outcome(results) == [
        ("bob", ErrorCode.DUPLICATE_RESOURCE),
        ("alice", ErrorCode.DUPLICATE_RESOURCE),
        ("carol", ErrorCode.NONE),
    ]
    assert all(r.records == [] for r in results if r.error)
    assert set(after.scram_credentials) == {("bob", "SCRAM-SHA-256"), ("carol", "SCRAM-SHA-256")}


@pytest.mark.parametrize(
    "bad, code, named",
    [
        (upsert(""), ErrorCode.UNACCEPTABLE_CREDENTIAL, "empty"),
        (upsert("u", mechanism="SCRAM-SHA-1"), ErrorCode.UNSUPPORTED_SASL_MECHANISM, "SCRAM-SHA-1"),
        (upsert("u", iterations=MIN_ITERATIONS - 1), ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few"),
        (upsert("u", iterations=MAX_ITERATIONS + 1), ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many"),
        (Upsertion("u", "SCRAM-SHA-256", 4096, b"", b"x" * 32), ErrorCode.UNACCEPTABLE_CREDENTIAL, "salt"),
        (Upsertion("u", "SCRAM-SHA-512", 4096, SALT, b"x" * 32), ErrorCode.UNACCEPTABLE_CREDENTIAL, "64 bytes"),
    ],
)
def test_bad_upsertions_are_refused_with_their_code(bad: Upsertion, code: int, named: str) -> None:
    results, img = alter(build(), [bad, upsert("fine")])
    assert results[0].error == code and named in results[0].message and results[0].records == []
    assert results[1].error == ErrorCode.NONE and set(img.scram_credentials) == {("fine", "SCRAM-SHA-256")}


def test_bad_deletions_are_refused_with_their_code() -> None:
    results, _ = alter(build(), [], [Deletion("", "SCRAM-SHA-256"), Deletion("u", "PLAIN")])
    assert outcome(results) == [("", ErrorCode.UNACCEPTABLE_CREDENTIAL), ("u", ErrorCode.UNSUPPORTED_SASL_MECHANISM)]


def test_describe_lists_mechanisms_and_iterations_never_keys() -> None:
    _, img = alter(build(), [upsert("bob", mechanism="SCRAM-SHA-512"), upsert("alice", iterations=8192)])
    _, img = alter(img, [upsert("bob")])
    everyone = describe_user_scram_credentials(img, None)
    assert [(d.user, d.credentials) for d in everyone] == [
        ("alice", [("SCRAM-SHA-256", 8192)]),
        ("bob", [("SCRAM-SHA-256", 4096), ("SCRAM-SHA-512", 4096)]),
    ]
    assert describe_user_scram_credentials(img, []) == everyone
    named = describe_user_scram_credentials(img, ["bob", "nobody", "alice", "alice"])
    assert [(d.user, d.error) for d in named] == [
        ("bob", ErrorCode.NONE),
        ("nobody", ErrorCode.RESOURCE_NOT_FOUND),
        ("alice", ErrorCode.DUPLICATE_RESOURCE),
    ]
    assert named[2].credentials == []

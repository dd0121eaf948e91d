"""SCRAM credentials stored in the metadata log: Kafka's AlterUserScramCredentials and DescribeUserScramCredentials
(KIP-554) decided against the image, as Kafka's ScramControlManager does.

An upsertion carries what the client computed, the salt, the iteration count and SaltedPassword, never the
password; the controller derives StoredKey and ServerKey from it and stores those. Results are per user: a user
named twice in one request (whatever the mechanisms) is refused with DUPLICATE_RESOURCE and none of its
alterations are applied; each other user's alterations are validated on their own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from odradek.client.common.metadata_image import MetadataImage, scram_record
from odradek.client.common.scram import (
    MAX_ITERATIONS,
    MIN_ITERATIONS,
    Mechanism,
    credential_from_salted_password,
)
from odradek.client.errors import ErrorCode
from odradek.proto import metadata_pb2 as md


@dataclass(frozen=True)
class Upsertion:
    """Set ``user``'s credential for ``mechanism`` (its SASL name, e.g. SCRAM-SHA-256)."""

    user: str
    mechanism: str
    iterations: int
    salt: bytes
    salted_password: bytes = field(repr=False)


@dataclass(frozen=True)
class Deletion:
    user: str
    mechanism: str


@dataclass
class UserResult:
    """One user's outcome: the records of its alteration, or why it is refused (and then no records)."""

    user: str
    error: ErrorCode.ValueType = ErrorCode.NONE
    message: str = ""
    records: list[md.MetadataRecord] = field(default_factory=list)


@dataclass
class UserDescription:
    """One user's credentials as (mechanism name, iterations), by mechanism; or why there are none to show."""

    user: str
    error: ErrorCode.ValueType = ErrorCode.NONE
    message: str = ""
    credentials: list[tuple[str, int]] = field(default_factory=list)


class _Refused(Exception):
    def __init__(self, code: ErrorCode.ValueType, message: str) -> None:
        super().__init__(message)
        self.code = code


_TWICE = "A user credential cannot be altered twice in the same request"


def alter_user_scram_credentials(
    image: MetadataImage, upsertions: Sequence[Upsertion], deletions: Sequence[Deletion]
) -> list[UserResult]:
    """One result per user named, in the order users first appear (deletions first, then upsertions)."""
    results: dict[str, UserResult] = {}
    alterations: list[Deletion | Upsertion] = [*deletions, *upsertions]
    for alteration in alterations:
        user = alteration.user
        if user in results:
            if results[user].error == ErrorCode.NONE:
                results[user] = UserResult(user, ErrorCode.DUPLICATE_RESOURCE, _TWICE)
            continue
        try:
            if isinstance(alteration, Deletion):
                record = _deletion_record(image, alteration)
            else:
                record = _upsertion_record(alteration)
        except _Refused as refused:
            results[user] = UserResult(user, refused.code, str(refused))
            continue
        results[user] = UserResult(user, records=[record])
    return list(results.values())


def _mechanism(name: str) -> Mechanism:
    try:
        return Mechanism.parse(name)
    except ValueError as err:
        raise _Refused(ErrorCode.UNSUPPORTED_SASL_MECHANISM, str(err)) from None


def _check_user(user: str) -> None:
    if not user:
        raise _Refused(ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty")


def _deletion_record(image: MetadataImage, deletion: Deletion) -> md.MetadataRecord:
    _check_user(deletion.user)
    mechanism = _mechanism(deletion.mechanism)
    if (deletion.user, mechanism.value) not in image.scram_credentials:
        raise _Refused(
            ErrorCode.RESOURCE_NOT_FOUND,
            f"Attempt to delete a user credential that does not exist: {deletion.user} has no {mechanism.value}",
        )
    remove = md.RemoveUserScramCredentialRecord(name=deletion.user, mechanism=mechanism.value)
    return md.MetadataRecord(remove_user_scram_credential=remove)


def _upsertion_record(upsertion: Upsertion) -> md.MetadataRecord:
    _check_user(upsertion.user)
    mechanism = _mechanism(upsertion.mechanism)
    if upsertion.iterations < MIN_ITERATIONS:
        raise _Refused(
            ErrorCode.UNACCEPTABLE_CREDENTIAL,
            f"Too few iterations: {upsertion.iterations} (at least {MIN_ITERATIONS} for {mechanism.value})",
        )
    if upsertion.iterations > MAX_ITERATIONS:
        raise _Refused(
            ErrorCode.UNACCEPTABLE_CREDENTIAL,
            f"Too many iterations: {upsertion.iterations} (at most {MAX_ITERATIONS} for {mechanism.value})",
        )
    try:
        credential = credential_from_salted_password(
            mechanism, upsertion.salt, upsertion.iterations, upsertion.salted_password
        )
    except ValueError as err:  # an empty salt or a salted password of the wrong length
        raise _Refused(ErrorCode.UNACCEPTABLE_CREDENTIAL, str(err)) from None
    return md.MetadataRecord(user_scram_credential=scram_record(upsertion.user, credential))


def describe_user_scram_credentials(image: MetadataImage, users: Sequence[str] | None) -> list[UserDescription]:
    """Every user with a credential, by name, when ``users`` is None or empty; otherwise each named user in request
    order: RESOURCE_NOT_FOUND for one without credentials, DUPLICATE_RESOURCE for one named twice."""
    by_user: dict[str, list[tuple[str, int]]] = {}
    for (user, mechanism), credential in image.scram_credentials.items():
        by_user.setdefault(user, []).append((mechanism, credential.iterations))
    if not users:
        return [UserDescription(user, credentials=sorted(by_user[user])) for user in sorted(by_user)]
    out: dict[str, UserDescription] = {}
    for user in users:
        if user in out:
            out[user] = UserDescription(
                user,
                ErrorCode.DUPLICATE_RESOURCE,
                "Cannot describe SCRAM credentials for the same user twice in a single request",
            )
        elif user in by_user:
            out[user] = UserDescription(user, credentials=sorted(by_user[user]))
        else:
            out[user] = UserDescription(
                user, ErrorCode.RESOURCE_NOT_FOUND, f"Attempt to describe a user credential that does not exist: {user}"
            )
    return list(out.values())

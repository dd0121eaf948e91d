"""SCRAM credentials (Kafka's KIP-554): AlterUserScramCredentials and DescribeUserScramCredentials. Mechanisms are
named (SCRAM-SHA-256, SCRAM-SHA-512); a name that is none is refused (UNSUPPORTED_SASL_MECHANISM). A password is
never sent: the client computes the salted password."""

from __future__ import annotations

from dataclasses import dataclass

from odradek.client.errors import ErrorCode

NONE = int(ErrorCode.NONE)


@dataclass(frozen=True, slots=True)
class ScramUpsertion:
    user: str
    mechanism: str
    iterations: int
    salt: bytes
    salted_password: bytes  # Hi(password, salt, iterations)


@dataclass(frozen=True, slots=True)
class ScramDeletion:
    user: str
    mechanism: str


@dataclass(frozen=True, slots=True)
class AlterScramCredentials:
    deletions: tuple[ScramDeletion, ...] = ()
    upsertions: tuple[ScramUpsertion, ...] = ()


@dataclass(frozen=True, slots=True)
class AlterScramResult:
    user: str
    error: int = NONE
    error_message: str = ""


@dataclass(frozen=True, slots=True)
class AlterScramCredentialsAnswer:
    error: int = NONE  # the whole request
    results: tuple[AlterScramResult, ...] = ()  # one per user named
    metadata_offset: int | None = None


@dataclass(frozen=True, slots=True)
class DescribeScramCredentials:
    users: tuple[str, ...] = ()  # empty: every user with a credential


@dataclass(frozen=True, slots=True)
class ScramCredentialInfo:
    mechanism: str
    iterations: int


@dataclass(frozen=True, slots=True)
class UserScramCredentials:
    user: str
    error: int = NONE  # RESOURCE_NOT_FOUND for a named user without credentials
    error_message: str = ""
    credentials: tuple[ScramCredentialInfo, ...] = ()


@dataclass(frozen=True, slots=True)
class DescribeScramCredentialsAnswer:
    error: int = NONE
    error_message: str = ""
    results: tuple[UserScramCredentials, ...] = ()  # from the answering node's own metadata image

"""The admin client's ACL and SCRAM credential requests (Kafka's Admin createAcls, describeAcls, deleteAcls,
alterUserScramCredentials, describeUserScramCredentials).

Both are stored in the metadata log: a change goes to the active controller (any node forwards it) and reaches
every broker as it replays the log; a describe is answered from the answering node's own image. A password never
leaves this process: the client draws a salt and sends SaltedPassword = PBKDF2(password, salt, iterations), from
which the controller derives the keys it stores (KIP-554).
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from odradek.client.acls import AclBinding, AclBindingFilter, code, name_of
from odradek.client.errors import (
    ErrorCode,
    InvalidRequestError,
    UnacceptableCredentialError,
    UnsupportedSaslMechanismError,
    error_for_code,
    error_name,
)
from odradek.proto import admin_pb2 as pb

if TYPE_CHECKING:
    from odradek.proto.admin_pb2_grpc import AdminAsyncStub

R = TypeVar("R")

SCRAM_MECHANISMS: dict[str, str] = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
"""The SCRAM mechanisms and their hash functions."""
MIN_ITERATIONS, MAX_ITERATIONS, DEFAULT_ITERATIONS = 4096, 16384, 4096
"""The iteration counts the server accepts (Kafka's bounds), checked here too so a typo costs no long hashing."""
SALT_BYTES = 24


@dataclass(frozen=True)
class ScramCredentialInfo:
    mechanism: str
    iterations: int


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    """SCRAM's Hi(password, salt, iterations): PBKDF2-HMAC over the password's UTF-8 bytes, as Kafka's clients
    compute it (no SASLprep)."""
    return hashlib.pbkdf2_hmac(SCRAM_MECHANISMS[mechanism], password.encode("utf-8"), salt, iterations)


def _binding_message(b: AclBinding) -> pb.AclBinding:
    return pb.AclBinding(
        resource_type=pb.AclResourceType.ValueType(code("resource type", b.resource_type)),
        resource_name=b.resource_name,
        pattern_type=pb.AclPatternType.ValueType(code("pattern type", b.pattern_type)),
        principal=b.principal,
        host=b.host,
        operation=pb.AclOperation.ValueType(code("operation", b.operation)),
        permission_type=pb.AclPermissionType.ValueType(code("permission", b.permission)),
    )


def _binding(m: pb.AclBinding) -> AclBinding:
    return AclBinding(
        resource_type=name_of("resource type", m.resource_type),
        resource_name=m.resource_name,
        pattern_type=name_of("pattern type", m.pattern_type),
        principal=m.principal,
        host=m.host,
        operation=name_of("operation", m.operation),
        permission=name_of("permission", m.permission_type),
    )


def _filter_message(f: AclBindingFilter) -> pb.AclBindingFilter:
    m = pb.AclBindingFilter()
    if f.resource_type is not None:
        m.resource_type = pb.AclResourceType.ValueType(code("resource type", f.resource_type))
    if f.resource_name is not None:
        m.resource_name = f.resource_name
    if f.pattern_type is not None:
        m.pattern_type = pb.AclPatternType.ValueType(code("pattern type", f.pattern_type))
    if f.principal is not None:
        m.principal = f.principal
    if f.host is not None:
        m.host = f.host
    if f.operation is not None:
        m.operation = pb.AclOperation.ValueType(code("operation", f.operation))
    if f.permission is not None:
        m.permission_type = pb.AclPermissionType.ValueType(code("permission", f.permission))
    return m


def _raise_if(error: int, message: str = "") -> None:
    if error != ErrorCode.NONE:
        raise error_for_code(error, message or error_name(error))


def _mechanism(mechanism: str) -> str:
    name = mechanism.strip().upper()
    if name not in SCRAM_MECHANISMS:
        raise UnsupportedSaslMechanismError(
            f"unknown SCRAM mechanism {mechanism!r}: expected one of {', '.join(SCRAM_MECHANISMS)}"
        )
    return name


class SecurityAdmin:
    """ACL and SCRAM credential requests; ``AsyncAdmin`` inherits them. Needs ``_call`` and ``_timeout`` of its
    host."""

    _timeout: float

    if TYPE_CHECKING:

        async def _call(self, invoke: Callable[[AdminAsyncStub], Awaitable[R]]) -> R: ...

    # -- ACLs -------------------------------------------------------------------------------------------------------

    async def create_acls(self, bindings: Iterable[AclBinding]) -> None:
        """Store the bindings (one already stored is kept as it is). Each is judged on its own: when one is
        refused (InvalidRequestError naming why, e.g. an operation that does not apply to the resource type), the
        first refusal is raised and the valid ones of the same call are stored all the same."""
        request = pb.CreateAclsRequest(creations=[_binding_message(b) for b in bindings])
        r = await self._call(lambda s: s.CreateAcls(request, timeout=self._timeout))
        _raise_if(r.error)
        for result in r.results:
            _raise_if(result.error, result.error_message)

    async def describe_acls(self, acl_filter: AclBindingFilter | None = None) -> list[AclBinding]:
        """The stored bindings the filter selects (all without one), ordered by resource, then entry."""
        request = pb.DescribeAclsRequest(filter=_filter_message(acl_filter or AclBindingFilter()))
        r = await self._call(lambda s: s.DescribeAcls(request, timeout=self._timeout))
        _raise_if(r.error, r.error_message)
        return [_binding(b) for b in r.bindings]

    async def delete_acls(self, filters: Iterable[AclBindingFilter]) -> list[AclBinding]:
        """Remove every stored binding any of the filters selects and return them (each once). A refused filter
        raises (InvalidRequestError) after the others have removed theirs."""
        request = pb.DeleteAclsRequest(filters=[_filter_message(f) for f in filters])
        r = await self._call(lambda s: s.DeleteAcls(request, timeout=self._timeout))
        _raise_if(r.error)
        deleted = [_binding(b) for result in r.results for b in result.deleted]
        for result in r.results:
            _raise_if(result.error, result.error_message)
        return deleted

    # -- SCRAM credentials ------------------------------------------------------------------------------------------

    async def upsert_user_scram_credential(
        self, user: str, password: str, mechanism: str = "SCRAM-SHA-256", iterations: int = DEFAULT_ITERATIONS
    ) -> None:
        """Create or replace ``user``'s credential for ``mechanism``. The password is salted here with a fresh
        random salt and never sent. UnacceptableCredentialError for an empty user or password or an iteration
        count outside 4096..16384, UnsupportedSaslMechanismError for another mechanism."""
        mechanism = _mechanism(mechanism)
        if not user:
            raise UnacceptableCredentialError("the user name must not be empty")
        if not password:
            raise UnacceptableCredentialError("the password must not be empty")
        if isinstance(iterations, bool) or not isinstance(iterations, int):
            raise InvalidRequestError(f"iterations must be an integer, not {iterations!r}")
        if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
            raise UnacceptableCredentialError(
                f"iterations must be between {MIN_ITERATIONS} and {MAX_ITERATIONS}, not {iterations}"
            )
        salt = secrets.token_bytes(SALT_BYTES)
        upsertion = pb.ScramCredentialUpsertion(
            user=user,
            mechanism=mechanism,
            iterations=iterations,
            salt=salt,
            salted_password=salted_password(mechanism, password, salt, iterations),
        )
        await self._alter_credentials(pb.AlterUserScramCredentialsRequest(upsertions=[upsertion]))

    async def delete_user_scram_credential(self, user: str, mechanism: str) -> None:
        """Remove ``user``'s credential for ``mechanism``; ResourceNotFoundError when it has none."""
        deletion = pb.ScramCredentialDeletion(user=user, mechanism=_mechanism(mechanism))
        await self._alter_credentials(pb.AlterUserScramCredentialsRequest(deletions=[deletion]))

    async def _alter_credentials(self, request: pb.AlterUserScramCredentialsRequest) -> None:
        r = await self._call(lambda s: s.AlterUserScramCredentials(request, timeout=self._timeout))
        _raise_if(r.error)
        for result in r.results:
            _raise_if(result.error, result.error_message)

    async def describe_user_scram_credentials(
        self, users: Sequence[str] | None = None
    ) -> dict[str, list[ScramCredentialInfo]]:
        """Each user's credentials (mechanism and iterations, never keys), every user with one when ``users`` is
        None or empty. ResourceNotFoundError for a named user without credentials."""
        request = pb.DescribeUserScramCredentialsRequest(users=list(users or ()))
        r = await self._call(lambda s: s.DescribeUserScramCredentials(request, timeout=self._timeout))
        _raise_if(r.error, r.error_message)
        out = {}
        for result in r.results:
            _raise_if(result.error, result.error_message)
            out[result.user] = [ScramCredentialInfo(c.mechanism, c.iterations) for c in result.credentials]
        return out

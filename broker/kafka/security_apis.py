"""Kafka's ACL and SCRAM credential APIs on the Kafka listener, each translated onto the typed admin service
(``KafkaBackend.admin``, where writes are forwarded to the active controller and every rule is decided):
DescribeAcls, CreateAcls and DeleteAcls v1-v3, DescribeUserScramCredentials and AlterUserScramCredentials v0.

The ACL enums' wire codes are odradek's (both are Kafka's numbers; a code no member has is UNKNOWN), and a null
filter string is an unset filter field. SCRAM mechanisms travel as Kafka's codes (1 SCRAM-SHA-256, 2 SCRAM-SHA-512)
here and as names in the service; an unknown code reaches the controller as a name it refuses with
UNSUPPORTED_SASL_MECHANISM. Who may call these APIs is not decided here.

odradek's own ACL resource type (SUBJECT, the schema registry's) is a code Kafka's clients do not know: a filter for
ANY resource type selects the Kafka types alone here (DescribeAcls leaves SUBJECT bindings out, DeleteAcls neither
removes nor lists them), so that Kafka's tools listing or deleting every ACL neither meet nor wipe them. A filter
naming the SUBJECT code selects them as on the other listeners.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from itertools import groupby
from typing import Any

from kafka.protocol.admin.acl import (
    CreateAclsRequest,
    CreateAclsResponse,
    DeleteAclsRequest,
    DeleteAclsResponse,
    DescribeAclsRequest,
    DescribeAclsResponse,
)
from kafka.protocol.admin.users import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
)

from odradek.broker.kafka.apis import ApiRegistry, schema_api
from odradek.broker.kafka.backend import KafkaBackend
from odradek.broker.kafka.wire import KafkaContext
from odradek.client.common.acls import (
    KAFKA_RESOURCE_TYPES,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from odradek.client.common.admin.acls import CreateAcls, DeleteAcls, DescribeAcls
from odradek.client.common.admin.scram import (
    AlterScramCredentials,
    DescribeScramCredentials,
    ScramDeletion,
    ScramUpsertion,
)
from odradek.client.common.scram import Mechanism
from odradek.client.errors import ErrorCode

DESCRIBE_ACLS_VERSIONS = (1, 3)
CREATE_ACLS_VERSIONS = (1, 3)
DELETE_ACLS_VERSIONS = (1, 3)
DESCRIBE_USER_SCRAM_CREDENTIALS_VERSIONS = (0, 0)
ALTER_USER_SCRAM_CREDENTIALS_VERSIONS = (0, 0)


def register(registry: ApiRegistry, backend: KafkaBackend) -> None:
    apis = [
        (DescribeAclsRequest, DESCRIBE_ACLS_VERSIONS, _describe_acls),
        (CreateAclsRequest, CREATE_ACLS_VERSIONS, _create_acls),
        (DeleteAclsRequest, DELETE_ACLS_VERSIONS, _delete_acls),
        (DescribeUserScramCredentialsRequest, DESCRIBE_USER_SCRAM_CREDENTIALS_VERSIONS, _describe_credentials),
        (AlterUserScramCredentialsRequest, ALTER_USER_SCRAM_CREDENTIALS_VERSIONS, _alter_credentials),
    ]
    for request_cls, (low, high), translate in apis:

        async def handler(ctx: KafkaContext, version: int, request: Any, translate=translate) -> Any:
            return await translate(backend, ctx, version, request)

        registry.add(*schema_api(request_cls, low, high, handler))


# ---- ACLs ----


def _filter(f: Any) -> AclBindingFilter:
    """Kafka's filter (ANY codes, null strings for "any") as odradek's; a code no member has is UNKNOWN, which the
    service refuses."""
    return AclBindingFilter(
        resource_type=ResourceType.from_code(f.resource_type_filter),
        resource_name=f.resource_name_filter,
        pattern_type=PatternType.from_code(f.pattern_type_filter),
        principal=f.principal_filter,
        host=f.host_filter,
        operation=AclOperation.from_code(f.operation),
        permission=AclPermissionType.from_code(f.permission_type),
    )


def _kafka_types(f: AclBindingFilter) -> list[AclBindingFilter]:
    """``f``, or for ANY resource type one filter per type Kafka knows (see the module doc)."""
    if f.resource_type != ResourceType.ANY:
        return [f]
    return [replace(f, resource_type=ResourceType(kind)) for kind in sorted(KAFKA_RESOURCE_TYPES)]


def _error(code: int, message: str = "") -> tuple[int, str | None]:
    return int(code), message or None


async def _describe_acls(backend: KafkaBackend, ctx: KafkaContext, version: int, request: Any) -> Any:
    """Bindings grouped by resource pattern, as Kafka's answer has them."""
    answer = await backend.admin.describe_acls(DescribeAcls(_filter(request)), ctx.request_context)
    resource = DescribeAclsResponse.DescribeAclsResource
    resources = []
    kafka_only = request.resource_type_filter == ResourceType.ANY
    bindings = [b for b in answer.bindings if not kafka_only or int(b.resource_type) in KAFKA_RESOURCE_TYPES]

    def pattern(b: AclBinding) -> tuple[int, str, int]:
        return (int(b.resource_type), b.resource_name, int(b.pattern_type))

    for (rtype, name, ptype), group in groupby(sorted(bindings, key=pattern), key=pattern):
        acls = [
            resource.AclDescription(
                principal=b.principal, host=b.host, operation=int(b.operation), permission_type=int(b.permission)
            )
            for b in group
        ]
        resources.append(resource(resource_type=rtype, resource_name=name, pattern_type=ptype, acls=acls))
    error_code, message = _error(answer.error, answer.error_message)
    return DescribeAclsResponse(
        version=version,
        throttle_time_ms=0,
        error_code=error_code,
        error_message=message,
        resources=resources if error_code == ErrorCode.NONE else [],
    )


async def _create_acls(backend: KafkaBackend, ctx: KafkaContext, version: int, request: Any) -> Any:
    creations = tuple(
        AclBinding(
            ResourceType.from_code(c.resource_type),
            c.resource_name,
            PatternType.from_code(c.resource_pattern_type),
            c.principal,
            c.host,
            AclOperation.from_code(c.operation),
            AclPermissionType.from_code(c.permission_type),
        )
        for c in request.creations
    )
    answer = await backend.admin.create_acls(CreateAcls(creations), ctx.request_context)
    result = CreateAclsResponse.AclCreationResult
    out = []
    for i in range(len(creations)):
        if answer.error != ErrorCode.NONE or i >= len(answer.results):
            error_code, message = _error(answer.error or ErrorCode.UNKNOWN_SERVER_ERROR)
        else:
            error_code, message = _error(answer.results[i].error, answer.results[i].error_message)
        out.append(result(error_code=error_code, error_message=message))
    return CreateAclsResponse(version=version, throttle_time_ms=0, results=out)


def _matching(deleted: Sequence[AclBinding]) -> list[Any]:
    acl = DeleteAclsResponse.DeleteAclsFilterResult.DeleteAclsMatchingAcl
    return [
        acl(
            error_code=0,
            error_message=None,
            resource_type=int(b.resource_type),
            resource_name=b.resource_name,
            pattern_type=int(b.pattern_type),
            principal=b.principal,
            host=b.host,
            operation=int(b.operation),
            permission_type=int(b.permission),
        )
        for b in deleted
    ]


async def _delete_acls(backend: KafkaBackend, ctx: KafkaContext, version: int, request: Any) -> Any:
    parts = [_kafka_types(_filter(f)) for f in request.filters]
    filters = tuple(one for part in parts for one in part)
    answer = await backend.admin.delete_acls(DeleteAcls(filters), ctx.request_context)
    result = DeleteAclsResponse.DeleteAclsFilterResult
    out = []
    first = 0
    for part in parts:  # each Kafka filter's answer: those of the filters it became, together
        mine = answer.results[first : first + len(part)]
        first += len(part)
        failed = next((r for r in mine if r.error != ErrorCode.NONE), None)
        if answer.error != ErrorCode.NONE or len(mine) < len(part):
            error_code, message = _error(answer.error or ErrorCode.UNKNOWN_SERVER_ERROR)
            out.append(result(error_code=error_code, error_message=message, matching_acls=[]))
        elif failed is not None:
            error_code, message = _error(failed.error, failed.error_message)
            out.append(result(error_code=error_code, error_message=message, matching_acls=[]))
        else:
            deleted = [b for r in mine for b in r.deleted]
            out.append(result(error_code=0, error_message=None, matching_acls=_matching(deleted)))
    return DeleteAclsResponse(version=version, throttle_time_ms=0, filter_results=out)


# ---- SCRAM credentials ----


def _mechanism_name(code: int) -> str:
    try:
        return Mechanism.from_code(code).value
    except ValueError:
        return f"mechanism code {code}"


def _mechanism_code(name: str) -> int:
    try:
        return Mechanism.parse(name).code
    except ValueError:
        return 0  # UNKNOWN: a mechanism this listener cannot name (none is stored)


async def _describe_credentials(backend: KafkaBackend, ctx: KafkaContext, version: int, request: Any) -> Any:
    users = tuple(u.name for u in request.users or [])
    answer = await backend.admin.describe_user_scram_credentials(DescribeScramCredentials(users), ctx.request_context)
    result = DescribeUserScramCredentialsResponse.DescribeUserScramCredentialsResult
    error_code, message = _error(answer.error, answer.error_message)
    return DescribeUserScramCredentialsResponse(
        version=version,
        throttle_time_ms=0,
        error_code=error_code,
        error_message=message,
        results=[
            result(
                user=r.user,
                error_code=int(r.error),
                error_message=r.error_message or None,
                credential_infos=[
                    result.CredentialInfo(mechanism=_mechanism_code(c.mechanism), iterations=c.iterations)
                    for c in r.credentials
                ],
            )
            for r in answer.results
        ],
    )


async def _alter_credentials(backend: KafkaBackend, ctx: KafkaContext, version: int, request: Any) -> Any:
    alter = AlterScramCredentials(
        deletions=tuple(ScramDeletion(d.name, _mechanism_name(d.mechanism)) for d in request.deletions),
        upsertions=tuple(
            ScramUpsertion(u.name, _mechanism_name(u.mechanism), u.iterations, u.salt, u.salted_password)
            for u in request.upsertions
        ),
    )
    answer = await backend.admin.alter_user_scram_credentials(alter, ctx.request_context)
    result = AlterUserScramCredentialsResponse.AlterUserScramCredentialsResult
    if answer.error != ErrorCode.NONE:  # the whole request failed (no controller): every user named gets the error
        users = dict.fromkeys([d.name for d in request.deletions] + [u.name for u in request.upsertions])
        results = [result(user=user, error_code=int(answer.error), error_message=None) for user in users]
    else:
        results = [
            result(user=r.user, error_code=int(r.error), error_message=r.error_message or None) for r in answer.results
        ]
    return AlterUserScramCredentialsResponse(version=version, throttle_time_ms=0, results=results)

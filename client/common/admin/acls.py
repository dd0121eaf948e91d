"""ACLs: CreateAcls, DescribeAcls and DeleteAcls, over the bindings and filters of ``client/common/acls.py`` (whose
enum values are Kafka's wire codes; a code no member has is UNKNOWN, which the controller refuses)."""

from __future__ import annotations

from dataclasses import dataclass

from odradek.client.common.acls import AclBinding, AclBindingFilter
from odradek.client.errors import ErrorCode

NONE = int(ErrorCode.NONE)


@dataclass(frozen=True, slots=True)
class CreateAcls:
    creations: tuple[AclBinding, ...]  # each stored or refused on its own; an identical stored one is kept


@dataclass(frozen=True, slots=True)
class AclCreationResult:
    error: int = NONE
    error_message: str = ""


@dataclass(frozen=True, slots=True)
class CreateAclsAnswer:
    error: int = NONE  # the whole request (NOT_CONTROLLER, CLUSTER_AUTHORIZATION_FAILED...)
    results: tuple[AclCreationResult, ...] = ()  # one per creation, in request order
    metadata_offset: int | None = None


@dataclass(frozen=True, slots=True)
class DescribeAcls:
    filter: AclBindingFilter


@dataclass(frozen=True, slots=True)
class DescribeAclsAnswer:
    error: int = NONE
    error_message: str = ""
    bindings: tuple[AclBinding, ...] = ()  # from the answering node's own metadata image


@dataclass(frozen=True, slots=True)
class DeleteAcls:
    filters: tuple[AclBindingFilter, ...]


@dataclass(frozen=True, slots=True)
class AclDeletionResult:
    error: int = NONE
    error_message: str = ""
    deleted: tuple[AclBinding, ...] = ()  # a binding two filters match is listed under the first


@dataclass(frozen=True, slots=True)
class DeleteAclsAnswer:
    error: int = NONE  # the whole request
    results: tuple[AclDeletionResult, ...] = ()  # one per filter, in request order
    metadata_offset: int | None = None

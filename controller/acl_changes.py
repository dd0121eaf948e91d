"""ACLs stored in the metadata log: Kafka's CreateAcls, DeleteAcls and DescribeAcls decided against the image, as
Kafka's AclControlManager does.

Each binding of a CreateAcls request is validated on its own (``validate_binding``) and becomes one
AccessControlEntryRecord under a fresh 16-byte id, or INVALID_REQUEST naming what is wrong; a binding identical to
a stored one (or to an earlier one of the same request) creates nothing and succeeds. Each filter of a DeleteAcls
request removes the stored bindings it matches; a binding two filters match is removed (and reported) once, under
the first. Nothing here enforces the bindings: that is the authorizer's job on the brokers, fed from the image.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from odradek.client.common.acls import AclBinding, AclBindingFilter, validate_binding, validate_filter
from odradek.client.common.metadata_image import MetadataImage, acl_record
from odradek.client.errors import ErrorCode, InvalidRequestError
from odradek.proto import metadata_pb2 as md


@dataclass
class CreateResult:
    """One binding's outcome: its record (none when already stored or refused) or why it is refused."""

    error: ErrorCode.ValueType = ErrorCode.NONE
    message: str = ""
    records: list[md.MetadataRecord] = field(default_factory=list)


@dataclass
class DeleteResult:
    """One filter's outcome: the bindings it removes and their records, or why the filter is refused."""

    error: ErrorCode.ValueType = ErrorCode.NONE
    message: str = ""
    deleted: list[AclBinding] = field(default_factory=list)
    records: list[md.MetadataRecord] = field(default_factory=list)


def _random_id() -> bytes:
    return uuid.uuid4().bytes


def create_acls(
    image: MetadataImage, bindings: Iterable[AclBinding], new_id: Callable[[], bytes] = _random_id
) -> list[CreateResult]:
    """Each binding's result, in request order. ``new_id`` draws the ids of new bindings (16 bytes each)."""
    stored = set(image.acls.values())
    results = []
    for binding in bindings:
        try:
            validate_binding(binding)
        except ValueError as err:
            results.append(CreateResult(ErrorCode.INVALID_REQUEST, str(err)))
            continue
        if binding in stored:
            results.append(CreateResult())
            continue
        stored.add(binding)
        acl_id = new_id()
        while acl_id in image.acls:  # a collision of random UUIDs: draw again rather than overwrite
            acl_id = new_id()
        results.append(CreateResult(records=[md.MetadataRecord(access_control_entry=acl_record(acl_id, binding))]))
    return results


def delete_acls(image: MetadataImage, filters: Iterable[AclBindingFilter]) -> list[DeleteResult]:
    """Each filter's result, in request order: an invalid filter (an UNKNOWN value) is refused with
    INVALID_REQUEST and removes nothing; the others remove what they match and earlier filters left."""
    removed: set[bytes] = set()
    results = []
    for acl_filter in filters:
        try:
            validate_filter(acl_filter)
        except ValueError as err:
            results.append(DeleteResult(ErrorCode.INVALID_REQUEST, str(err)))
            continue
        result = DeleteResult()
        for acl_id, binding in sorted(image.acls.items(), key=lambda item: item[1]):
            if acl_id not in removed and acl_filter.matches(binding):
                removed.add(acl_id)
                result.deleted.append(binding)
                remove = md.RemoveAccessControlEntryRecord(id=acl_id)
                result.records.append(md.MetadataRecord(remove_access_control_entry=remove))
        results.append(result)
    return results


def describe_acls(image: MetadataImage, acl_filter: AclBindingFilter) -> list[AclBinding]:
    """The stored bindings the filter matches, in a stable order (by resource, then entry). InvalidRequestError for
    a filter with an UNKNOWN value."""
    try:
        validate_filter(acl_filter)
    except ValueError as err:
        raise InvalidRequestError(str(err)) from None
    return sorted(b for b in image.acls.values() if acl_filter.matches(b))

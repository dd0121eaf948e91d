"""Client quotas stored in the metadata log: Kafka's AlterClientQuotas and DescribeClientQuotas (KIP-546),
decided against the current image.

An entity is given as components, each a type (``user`` or ``client-id``) with a name or the default; an
alteration sets or removes quota keys of one entity. Each entry of a request is validated on its own, against the
image, and becomes ClientQuotaRecords or a typed error: an invalid entry stores nothing, valid ones beside it are
stored. Removing a key the entity does not set is no change (and no error). Values are checked with
``odradek.client.quotas`` so that the controller, the brokers and the client agree on what a quota may be.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from odradek.client.common.metadata_image import MetadataImage, quota_record
from odradek.client.errors import ErrorCode, InvalidRequestError
from odradek.client.quotas import QUOTA_KEYS, QuotaEntity, entity, validate_value
from odradek.proto import metadata_pb2 as md

USER = "user"
CLIENT_ID = "client-id"
ENTITY_TYPES = (USER, CLIENT_ID)
Match = Literal["exact", "default", "any"]


@dataclass(frozen=True)
class Component:
    """One component of an entity: ``name`` None for the entity type's default."""

    entity_type: str
    name: str | None


@dataclass(frozen=True)
class QuotaOp:
    key: str
    value: float = 0.0
    remove: bool = False


@dataclass(frozen=True)
class Alteration:
    components: Sequence[Component]
    ops: Sequence[QuotaOp]


@dataclass
class AlterResult:
    """One entry's outcome: its records (empty when refused or when nothing changes) or why it is refused."""

    error: ErrorCode.ValueType = ErrorCode.NONE
    message: str = ""
    records: list[md.MetadataRecord] = field(default_factory=list)


@dataclass(frozen=True)
class FilterComponent:
    """Matches entities by one entity type: the one named ``name`` (exact), its default, or any."""

    entity_type: str
    match: Match
    name: str = ""


def entity_of(components: Sequence[Component]) -> QuotaEntity:
    """The entity the components name, or InvalidRequestError naming what is wrong (an unknown or repeated type,
    an empty name, no component at all)."""
    seen: dict[str, Component] = {}
    for c in components:
        if c.entity_type not in ENTITY_TYPES:
            known = ", ".join(ENTITY_TYPES)
            raise InvalidRequestError(f"unknown quota entity type {c.entity_type!r} (known: {known})")
        if c.entity_type in seen:
            raise InvalidRequestError(f"quota entity type {c.entity_type!r} given twice")
        seen[c.entity_type] = c
    user, client = seen.get(USER), seen.get(CLIENT_ID)
    return entity(
        user=user.name if user is not None else None,
        client_id=client.name if client is not None else None,
        user_default=user is not None and user.name is None,
        client_default=client is not None and client.name is None,
    )


def components_of(e: QuotaEntity) -> list[Component]:
    """The entity as components (user first)."""
    out = []
    if e.has_user:
        out.append(Component(USER, None if e.user_default else e.user))
    if e.has_client_id:
        out.append(Component(CLIENT_ID, None if e.client_id_default else e.client_id))
    return out


def alter_client_quotas(image: MetadataImage, alterations: Sequence[Alteration]) -> list[AlterResult]:
    """Each entry's records, or why it is refused, in request order. An entity altered by two entries of one
    request is refused the second time (the order of the two would decide the outcome)."""
    results = []
    altered: set[QuotaEntity] = set()
    for alteration in alterations:
        try:
            e = entity_of(alteration.components)
            if e in altered:
                raise InvalidRequestError(f"quota entity {e.path()} is altered twice in one request")
            altered.add(e)
            records = _entity_records(image.client_quotas.get(e, {}), e, alteration.ops)
        except InvalidRequestError as err:
            results.append(AlterResult(ErrorCode.INVALID_REQUEST, str(err)))
            continue
        results.append(AlterResult(records=records))
    return results


def _entity_records(current: Mapping[str, float], e: QuotaEntity, ops: Sequence[QuotaOp]) -> list[md.MetadataRecord]:
    seen: set[str] = set()
    for op in ops:
        if op.key in seen:
            raise InvalidRequestError(f"quota key {op.key!r} is given twice for {e.path()}")
        seen.add(op.key)
        if op.remove:
            if op.key not in QUOTA_KEYS:
                raise InvalidRequestError(f"unknown quota key {op.key!r} (known: {', '.join(QUOTA_KEYS)})")
        else:
            validate_value(op.key, op.value)
    records = []
    for op in ops:
        if op.remove and op.key in current:
            records.append(md.MetadataRecord(client_quota=quota_record(e, op.key, 0.0, remove=True)))
        elif not op.remove and current.get(op.key) != op.value:
            records.append(md.MetadataRecord(client_quota=quota_record(e, op.key, float(op.value))))
    return records


def describe_client_quotas(
    quotas: Mapping[tuple[str | None, bool, str | None, bool], Mapping[str, float]],
    components: Sequence[FilterComponent],
    strict: bool = False,
) -> list[tuple[QuotaEntity, dict[str, float]]]:
    """The stored entities the filter matches, with their values, ordered by path. An entity matches when each
    component matches it; with ``strict``, it must also have no component of a type the filter leaves out.
    InvalidRequestError for an unknown or repeated entity type, or an exact match without a name."""
    by_type: dict[str, FilterComponent] = {}
    for c in components:
        if c.entity_type not in ENTITY_TYPES:
            known = ", ".join(ENTITY_TYPES)
            raise InvalidRequestError(f"unknown quota entity type {c.entity_type!r} (known: {known})")
        if c.entity_type in by_type:
            raise InvalidRequestError(f"quota entity type {c.entity_type!r} filtered twice")
        if c.match == "exact" and not c.name:
            raise InvalidRequestError(f"an exact match of quota entity type {c.entity_type!r} needs a name")
        by_type[c.entity_type] = c
    out = []
    for key, values in quotas.items():
        e = QuotaEntity(*key)
        sides = {
            USER: (e.has_user, e.user_default, e.user),
            CLIENT_ID: (e.has_client_id, e.client_id_default, e.client_id),
        }
        if all(_matches(by_type.get(t), *sides[t], strict) for t in ENTITY_TYPES):
            out.append((e, dict(values)))
    return sorted(out, key=lambda item: item[0].path())


def _matches(f: FilterComponent | None, present: bool, default: bool, name: str | None, strict: bool) -> bool:
    if f is None:
        return not (strict and present)
    if f.match == "any":
        return present
    if f.match == "default":
        return default
    return present and not default and name == f.name

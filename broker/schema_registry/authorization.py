"""What each registry request needs of the caller's ACLs when the cluster has an authorizer, as data (pure: the
service asks the node's authorizer, client/common/access.py, with it).

Subjects are ACL resources of odradek's own type SUBJECT (literal or prefixed names, as topics); the registry's
global compatibility level and mode belong to the cluster:

- `GET /`, `/schemas/types`, `/contexts`: nothing beyond authentication.
- `GET /subjects` lists the subjects the caller may DESCRIBE (implied by READ, WRITE, DELETE); `GET /schemas` the
  versions of those it may READ.
- READ on subject s: `GET /subjects/{s}/versions...` (and `/schema`, `/referencedby`), `POST /subjects/{s}`
  (lookup), `POST /compatibility/subjects/{s}/...`.
- WRITE on s: `POST /subjects/{s}/versions` (register). DELETE on s: `DELETE /subjects/{s}` and its versions.
- DESCRIBE_CONFIGS on s: `GET /config/{s}`, `GET /mode/{s}`; ALTER_CONFIGS on s: `PUT` and `DELETE` of them.
- On the cluster: DESCRIBE_CONFIGS for `GET /config`, `GET /mode`; ALTER_CONFIGS for `PUT`, `DELETE /config`,
  `PUT /mode`.
- `GET /schemas/ids/{id}` (and `/schema`, `/subjects`, `/versions`): READ on at least one subject holding the id
  (Confluent's rule for SCHEMA_READ); `/subjects` and `/versions` list those subjects alone.
"""

from __future__ import annotations

from dataclasses import dataclass

from odradek.broker.schema_registry import requests as rq
from odradek.client.common.acls import AclOperation


@dataclass(frozen=True, slots=True)
class OnSubject:
    operation: AclOperation
    subject: str


@dataclass(frozen=True, slots=True)
class OnCluster:
    operation: AclOperation


@dataclass(frozen=True, slots=True)
class ReadsId:
    """READ on at least one subject that holds schema ``id`` (live or soft-deleted versions)."""

    id: int


@dataclass(frozen=True, slots=True)
class Listing:
    """A listing of subjects: those the caller may perform ``operation`` on, alone."""

    operation: AclOperation


Need = OnSubject | OnCluster | ReadsId | Listing | None  # None: any authenticated caller

_READ, _WRITE, _DELETE = AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE
_DESCRIBE_CONFIGS, _ALTER_CONFIGS = AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS


def _on(operation: AclOperation, subject: str | None) -> OnSubject | OnCluster:
    """A subject's config or mode, or (no subject) the global one, the cluster's."""
    return OnCluster(operation) if subject is None else OnSubject(operation, subject)


def need(request: rq.Request) -> Need:
    """What ``request`` needs (see the module doc)."""
    r = request
    if isinstance(r, (rq.Root, rq.SchemaTypes, rq.ListContexts)):
        return None
    if isinstance(r, rq.ListSubjects):
        return Listing(AclOperation.DESCRIBE)
    if isinstance(r, rq.ListSchemas):
        return Listing(_READ)
    if isinstance(r, (rq.GetSchemaById, rq.SubjectsOfId, rq.VersionsOfId)):
        return ReadsId(r.id)
    if isinstance(r, (rq.ListVersions, rq.GetVersion, rq.ReferencedBy, rq.Lookup, rq.CheckCompatibility)):
        return OnSubject(_READ, r.subject)
    if isinstance(r, rq.Register):
        return OnSubject(_WRITE, r.subject)
    if isinstance(r, (rq.DeleteVersion, rq.DeleteSubject)):
        return OnSubject(_DELETE, r.subject)
    if isinstance(r, (rq.GetConfig, rq.GetMode)):
        return _on(_DESCRIBE_CONFIGS, r.subject)
    if isinstance(r, (rq.SetConfig, rq.DeleteConfig, rq.SetMode, rq.DeleteMode)):
        return _on(_ALTER_CONFIGS, r.subject)
    raise ValueError(f"no ACL rule for {type(r).__name__}")  # every request type has one (a test holds to it)

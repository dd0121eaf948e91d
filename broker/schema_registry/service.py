"""The registry service: typed requests in, Confluent's JSON answers out. Reads are served from this broker's copy
of the registry once it has read ``_schemas`` to its end; writes are decided by the writer (the leader of
``_schemas`` partition 0) through its store, and a broker that is not the writer says where to forward them
(``Forward``), as Confluent's followers forward to their leader.

With an authorizer, each request is checked against the caller's ACLs first (authorization.py says what it needs):
a refusal is 403 (40301) and writes nothing, listings leave out the subjects the caller may not see. A write is
checked before it is forwarded, and again by the writer."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from odradek.broker.schema_registry import authorization, errors
from odradek.broker.schema_registry import requests as rq
from odradek.broker.schema_registry.core import RegistryCore, Write
from odradek.broker.schema_registry.formats import AVRO, schema_types
from odradek.broker.schema_registry.records import SchemaValue
from odradek.client.common.access import OPEN, AccessControl
from odradek.client.common.acls import AclOperation, ResourceType
from odradek.client.common.caller import ANONYMOUS, Caller

T = TypeVar("T")

audit = logging.getLogger("odradek.audit")  # access.py's: the denials the authorizer logs go there too
API = "schema registry"
NOBODY = Caller(ANONYMOUS, "*")

Visible = Callable[[str], bool]  # may the caller see this subject in a listing


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    body: Any  # JSON-able; a str with ``raw`` is sent as it is (the /schema endpoints)
    raw: bool = False


class Forward(Exception):
    """This broker is not the writer: the request goes to ``url`` (the writer's registry listener)."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.url = url


class Store(Protocol):
    """What the service needs of the storage shell (store.py)."""

    core: RegistryCore
    applied: int  # the next offset of _schemas the copy applies

    async def wait_ready(self) -> None: ...

    async def caught_up(self, offset: int) -> bool:
        """Wait (bounded) until the copy has applied everything before ``offset``; whether it has."""
        ...

    def writer_url(self) -> str | None:
        """None when this broker is the writer; else the writer's registry URL (RegistryError if unknown)."""
        ...

    async def write(self, decide: Callable[[RegistryCore], Write[T]]) -> T: ...


def version_body(core: RegistryCore, v: SchemaValue, fmt: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {"subject": v.subject, "version": v.version, "id": v.id}
    out.update(schema_body(core, v, fmt))
    return out


def schema_body(core: RegistryCore, v: SchemaValue, fmt: str = "") -> dict[str, Any]:
    """Confluent leaves schemaType out for Avro, and references out when there are none; the schema is in the form
    ``fmt`` names (``?format=``)."""
    out: dict[str, Any] = {}
    if v.schema_type != AVRO:
        out["schemaType"] = v.schema_type
    if v.references:
        out["references"] = [r.to_json() for r in v.references]
    out["schema"] = core.formatted(v, fmt)
    return out


def _everything(_subject: str) -> bool:
    return True


class RegistryService:
    """``access``: the node's authorizer (OPEN: none, every request allowed)."""

    def __init__(self, store: Store, access: AccessControl = OPEN) -> None:
        self.store = store
        self.access = access

    async def handle(self, request: rq.Request, caller: Caller = NOBODY) -> Answer:
        """The answer to ``request`` for ``caller``; raises RegistryError for a refusal and Forward for a write
        elsewhere (once the caller may make it)."""
        if isinstance(request, rq.WRITES):
            await self.store.wait_ready()
            self.authorize(request, caller)
            url = self.store.writer_url()
            if url is not None:
                raise Forward(url)
            return Answer(200, await self._write(request))
        if isinstance(request, rq.Root):
            return Answer(200, {})
        if isinstance(request, rq.SchemaTypes):
            return Answer(200, schema_types())
        if isinstance(request, rq.ListContexts):
            return Answer(200, ["."])  # the default context only: subjects with a ":.context:" prefix are plain names
        await self.store.wait_ready()
        return self._read(request, self.authorize(request, caller))

    def authorize(self, request: rq.Request, caller: Caller) -> Visible:
        """Refuse (403) what ``caller`` may not do; for a listing, which subjects it shows."""
        need = authorization.need(request)
        if not self.access.enabled or need is None:
            return _everything
        access = self.access
        if isinstance(need, authorization.Listing):
            op = need.operation
            return lambda s: access.allows(caller, op, ResourceType.SUBJECT, s, api=API, audit_denial=False)
        if isinstance(need, authorization.OnCluster):
            if not access.allows_cluster(caller, need.operation, api=API):
                raise errors.forbidden(
                    f"{caller.principal} is not authorized to {need.operation.display_name} the cluster"
                )
            return _everything
        if isinstance(need, authorization.OnSubject):
            if not access.allows(caller, need.operation, ResourceType.SUBJECT, need.subject, api=API):
                raise errors.forbidden(
                    f"{caller.principal} is not authorized to {need.operation.display_name} Subject {need.subject!r}"
                )
            return _everything
        core = self.store.core
        core.schema(need.id)  # 40403 for an id that does not exist
        holders = {s for s, _ in core.subjects_of(need.id, True)}

        def readable(s: str) -> bool:
            return access.allows(caller, AclOperation.READ, ResourceType.SUBJECT, s, api=API, audit_denial=False)

        if not any(readable(s) for s in holders):
            audit.info(
                "denied %s from %s: Read on the subjects of schema id %d (%s)",
                caller.principal,
                caller.host,
                need.id,
                API,
            )
            raise errors.forbidden(
                f"{caller.principal} is not authorized to Read schema id {need.id}: it needs Read on a subject "
                "that holds it"
            )
        return readable

    def _read(self, r: rq.Request, visible: Visible = _everything) -> Answer:
        core = self.store.core
        if isinstance(r, rq.ListSubjects):
            return Answer(200, [s for s in core.subjects(r.deleted, r.prefix) if visible(s)])
        if isinstance(r, rq.ListVersions):
            return Answer(200, core.versions(r.subject, r.deleted))
        if isinstance(r, rq.GetVersion):
            v = core.version(r.subject, r.version, r.deleted)
            if r.raw:
                return Answer(200, core.formatted(v, r.format), raw=True)
            return Answer(200, version_body(core, v, r.format))
        if isinstance(r, rq.GetSchemaById):
            v = core.schema(r.id)
            if r.raw:
                return Answer(200, core.formatted(v, r.format), raw=True)
            return Answer(200, schema_body(core, v, r.format))
        if isinstance(r, rq.SubjectsOfId):
            return Answer(200, sorted({s for s, _ in core.subjects_of(r.id, r.deleted) if visible(s)}))
        if isinstance(r, rq.VersionsOfId):
            held = core.subjects_of(r.id, r.deleted)
            return Answer(200, [{"subject": s, "version": v} for s, v in held if visible(s)])
        if isinstance(r, rq.ReferencedBy):
            return Answer(200, core.referenced_by(r.subject, r.version))
        if isinstance(r, rq.Lookup):
            return Answer(200, version_body(core, core.lookup(r.subject, r.schema, r.normalize, r.deleted)))
        if isinstance(r, rq.CheckCompatibility):
            problems = core.check_compatibility(r.subject, r.version, r.schema, r.normalize)
            body: dict[str, Any] = {"is_compatible": not problems}
            if r.verbose:
                body["messages"] = problems
            return Answer(200, body)
        if isinstance(r, rq.GetConfig):
            return Answer(200, {"compatibilityLevel": core.config(r.subject, r.default_to_global)})
        if isinstance(r, rq.GetMode):
            return Answer(200, {"mode": core.mode(r.subject, r.default_to_global)})
        if isinstance(r, rq.ListSchemas):
            out = []
            for subject in filter(visible, core.subjects(r.deleted, r.prefix)):
                versions = core.versions(subject, r.deleted)
                for version in versions[-1:] if r.latest_only else versions:
                    out.append(version_body(core, core.version(subject, version, r.deleted)))
            return Answer(200, out)
        raise errors.store_error(f"no handler for {type(r).__name__}")

    async def _write(self, r: rq.Request) -> Any:
        store = self.store
        if isinstance(r, rq.Register):
            registered = await store.write(lambda c: c.register(r.subject, r.schema, r.normalize))
            return {"id": registered.id}
        if isinstance(r, rq.DeleteVersion):
            return await store.write(lambda c: c.delete_version(r.subject, r.version, r.permanent))
        if isinstance(r, rq.DeleteSubject):
            return await store.write(lambda c: c.delete_subject(r.subject, r.permanent))
        if isinstance(r, rq.SetConfig):
            return {"compatibility": await store.write(lambda c: c.set_config(r.subject, r.level))}
        if isinstance(r, rq.DeleteConfig):
            return {"compatibilityLevel": await store.write(lambda c: c.delete_config(r.subject))}
        if isinstance(r, rq.SetMode):
            return {"mode": await store.write(lambda c: c.set_mode(r.subject, r.mode, r.force))}
        if isinstance(r, rq.DeleteMode):
            return {"mode": await store.write(lambda c: c.delete_mode(r.subject))}
        raise errors.store_error(f"no handler for {type(r).__name__}")

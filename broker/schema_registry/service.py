"""The registry service: typed requests in, Confluent's JSON answers out. Reads are served from this broker's copy
of the registry once it has read ``_schemas`` to its end; writes are decided by the writer (the leader of
``_schemas`` partition 0) through its store, and a broker that is not the writer says where to forward them
(``Forward``), as Confluent's followers forward to their leader."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from odradek.broker.schema_registry import errors
from odradek.broker.schema_registry import requests as rq
from odradek.broker.schema_registry.core import RegistryCore, Write
from odradek.broker.schema_registry.formats import AVRO, schema_types
from odradek.broker.schema_registry.records import SchemaValue

T = TypeVar("T")


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


class RegistryService:
    def __init__(self, store: Store) -> None:
        self.store = store

    async def handle(self, request: rq.Request) -> Answer:
        """The answer to ``request``; raises RegistryError for a refusal and Forward for a write elsewhere."""
        if isinstance(request, rq.WRITES):
            await self.store.wait_ready()
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
        return self._read(request)

    def _read(self, r: rq.Request) -> Answer:
        core = self.store.core
        if isinstance(r, rq.ListSubjects):
            return Answer(200, core.subjects(r.deleted, r.prefix))
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
            return Answer(200, sorted({s for s, _ in core.subjects_of(r.id, r.deleted)}))
        if isinstance(r, rq.VersionsOfId):
            return Answer(200, [{"subject": s, "version": v} for s, v in core.subjects_of(r.id, r.deleted)])
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
            for subject in core.subjects(r.deleted, r.prefix):
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

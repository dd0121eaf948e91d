"""The registry's requests, typed: what the HTTP adapter (routes.py) makes of a request and the service takes.
Reads are answered by any broker from its own copy; writes (``WRITES``) by the one writer, to which other brokers
forward them."""

from __future__ import annotations

from dataclasses import dataclass

from odradek.broker.schema_registry.core import SchemaInput


@dataclass(frozen=True, slots=True)
class Root:
    pass


@dataclass(frozen=True, slots=True)
class SchemaTypes:
    pass


@dataclass(frozen=True, slots=True)
class ListContexts:
    pass


@dataclass(frozen=True, slots=True)
class ListSchemas:
    prefix: str = ""
    deleted: bool = False
    latest_only: bool = False


@dataclass(frozen=True, slots=True)
class GetSchemaById:
    id: int
    raw: bool = False  # /schemas/ids/{id}/schema: the schema text alone
    format: str = ""  # ?format=: Protobuf's "serialized" (a base64 descriptor) or text


@dataclass(frozen=True, slots=True)
class SubjectsOfId:
    id: int
    deleted: bool = False


@dataclass(frozen=True, slots=True)
class VersionsOfId:
    id: int
    deleted: bool = False


@dataclass(frozen=True, slots=True)
class ListSubjects:
    prefix: str = ""
    deleted: bool = False


@dataclass(frozen=True, slots=True)
class ListVersions:
    subject: str
    deleted: bool = False


@dataclass(frozen=True, slots=True)
class GetVersion:
    subject: str
    version: int
    deleted: bool = False
    raw: bool = False  # .../versions/{v}/schema
    format: str = ""


@dataclass(frozen=True, slots=True)
class ReferencedBy:
    subject: str
    version: int


@dataclass(frozen=True, slots=True)
class Lookup:
    subject: str
    schema: SchemaInput
    normalize: bool = False
    deleted: bool = False


@dataclass(frozen=True, slots=True)
class CheckCompatibility:
    subject: str
    version: int | None  # None: against what a registration would check
    schema: SchemaInput
    normalize: bool = False
    verbose: bool = False


@dataclass(frozen=True, slots=True)
class GetConfig:
    subject: str | None
    default_to_global: bool = False


@dataclass(frozen=True, slots=True)
class GetMode:
    subject: str | None
    default_to_global: bool = False


@dataclass(frozen=True, slots=True)
class Register:
    subject: str
    schema: SchemaInput
    normalize: bool = False


@dataclass(frozen=True, slots=True)
class DeleteVersion:
    subject: str
    version: int
    permanent: bool = False


@dataclass(frozen=True, slots=True)
class DeleteSubject:
    subject: str
    permanent: bool = False


@dataclass(frozen=True, slots=True)
class SetConfig:
    subject: str | None
    level: object


@dataclass(frozen=True, slots=True)
class DeleteConfig:
    subject: str | None


@dataclass(frozen=True, slots=True)
class SetMode:
    subject: str | None
    mode: object
    force: bool = False


@dataclass(frozen=True, slots=True)
class DeleteMode:
    subject: str


Request = (
    Root
    | SchemaTypes
    | ListContexts
    | ListSchemas
    | GetSchemaById
    | SubjectsOfId
    | VersionsOfId
    | ListSubjects
    | ListVersions
    | GetVersion
    | ReferencedBy
    | Lookup
    | CheckCompatibility
    | GetConfig
    | GetMode
    | Register
    | DeleteVersion
    | DeleteSubject
    | SetConfig
    | DeleteConfig
    | SetMode
    | DeleteMode
)
WRITES = (Register, DeleteVersion, DeleteSubject, SetConfig, DeleteConfig, SetMode, DeleteMode)

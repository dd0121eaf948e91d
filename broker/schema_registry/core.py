"""The registry's state and decisions, sans I/O.

``RegistryCore`` holds what the ``_schemas`` topic says (subjects, their versions, schema ids, configs, modes) and
changes only through ``apply``, one record at a time, as replayed from the topic. A write (``register``,
``delete_version``, ...) decides from the current state and returns a ``Write``: the answer and the records to
append. Its shell appends them (one batch, acks=all), replays them, and only then answers, so every broker's copy,
the writer's included, is the topic's. Writes are decided by one writer at a time, caught up with the topic, so a
new schema id is always above every id the topic has held.

Schema ids are global: the same schema (format, text, references) gets the same id under every subject, and an id is
never given to another schema, even after a hard delete (the ``ID_FLOOR`` record keeps the next id).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Generic, TypeVar

from odradek.broker.schema_registry import errors
from odradek.broker.schema_registry.compatibility import DEFAULT_LEVEL, check_level, incompatibilities
from odradek.broker.schema_registry.formats import ParsedSchema, check_type, parse
from odradek.broker.schema_registry.records import (
    ConfigKey,
    IdFloorKey,
    Key,
    ModeKey,
    Record,
    Reference,
    SchemaKey,
    SchemaValue,
    Value,
)

MODES = ("READWRITE", "READONLY", "IMPORT")
DEFAULT_MODE = "READWRITE"
LATEST = -1  # a version of "latest" (Confluent also takes -1)
MAX_VERSION = 2**31 - 1

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Write(Generic[T]):
    """A decided write: ``result`` is the answer once ``records`` (possibly none) are in the topic."""

    result: T
    records: tuple[Record, ...] = ()


@dataclass(frozen=True, slots=True)
class SchemaInput:
    """A schema as a request gives it. ``id`` and ``version`` only in IMPORT mode."""

    schema: str
    schema_type: str = "AVRO"
    references: tuple[Reference, ...] = ()
    id: int | None = None
    version: int | None = None


@dataclass(frozen=True, slots=True)
class Registered:
    subject: str
    version: int
    id: int
    schema_type: str
    schema: str
    references: tuple[Reference, ...] = ()


@dataclass(frozen=True, slots=True)
class Content:
    """What identifies a schema id: the same content under two subjects is one id."""

    schema_type: str
    schema: str
    references: tuple[Reference, ...]


def parse_version(text: str) -> int:
    """A version path parameter: "latest", -1, or 1..2^31-1; else RegistryError 42202."""
    if text == "latest":
        return LATEST
    try:
        version = int(text)
    except ValueError:
        raise errors.invalid_version(text) from None
    if version == LATEST or 1 <= version <= MAX_VERSION:
        return version
    raise errors.invalid_version(text)


def check_mode(mode: object) -> str:
    name = mode.upper() if isinstance(mode, str) else None
    if name not in MODES:
        raise errors.invalid_mode(mode)
    return name


@dataclass
class _Subject:
    versions: dict[int, SchemaValue] = field(default_factory=dict)

    def live(self) -> list[SchemaValue]:
        return [v for _, v in sorted(self.versions.items()) if not v.deleted]

    def all(self) -> list[SchemaValue]:
        return [v for _, v in sorted(self.versions.items())]


class RegistryCore:
    def __init__(self) -> None:
        self._subjects: dict[str, _Subject] = {}
        self._configs: dict[str | None, str] = {}
        self._modes: dict[str | None, str] = {}
        self._id_floor = 1
        self._parsed: dict[Content, ParsedSchema] = {}
        # Indexes of the versions, kept by ``apply``: each id's versions, and each schema's id (reads by id and
        # registrations find them without a scan of every version).
        self._holders: dict[int, dict[tuple[str, int], SchemaValue]] = {}
        self._ids: dict[Content, int] = {}

    # -- state ---------------------------------------------------------------------------------------------------

    def apply(self, key: Key, value: Value | None) -> None:
        """One record of the topic, in log order (a None value is a tombstone)."""
        if isinstance(key, SchemaKey):
            subject = self._subjects.setdefault(key.subject, _Subject())
            previous = subject.versions.pop(key.version, None)
            if isinstance(value, SchemaValue):
                if previous is not None and previous.id != value.id:
                    self._unindex(previous)
                subject.versions[key.version] = value  # a soft delete replaces its version in place
                self._holders.setdefault(value.id, {})[(value.subject, value.version)] = value
                self._ids.setdefault(_content(value), value.id)
                self._id_floor = max(self._id_floor, value.id + 1)
            else:
                if previous is not None:
                    self._unindex(previous)
                if not subject.versions:
                    del self._subjects[key.subject]
        elif isinstance(key, ConfigKey):
            self._set(self._configs, key.subject, value)
        elif isinstance(key, ModeKey):
            self._set(self._modes, key.subject, value)
        elif isinstance(key, IdFloorKey) and isinstance(value, int):
            self._id_floor = max(self._id_floor, value)

    def _unindex(self, value: SchemaValue) -> None:
        holders = self._holders.get(value.id, {})
        holders.pop((value.subject, value.version), None)
        if not holders:
            self._holders.pop(value.id, None)
            content = _content(value)
            if self._ids.get(content) == value.id:
                del self._ids[content]
            self._parsed.pop(content, None)

    @staticmethod
    def _set(table: dict[str | None, str], subject: str | None, value: Value | None) -> None:
        if isinstance(value, str):
            table[subject] = value
        else:
            table.pop(subject, None)

    def _values(self) -> Iterable[SchemaValue]:
        for subject in self._subjects.values():
            yield from subject.versions.values()

    @property
    def next_id(self) -> int:
        return self._id_floor

    def _content_id(self, content: Content) -> int | None:
        return self._ids.get(content)

    def _by_id(self, schema_id: int) -> list[SchemaValue]:
        return list(self._holders.get(schema_id, {}).values())

    # -- reads ---------------------------------------------------------------------------------------------------

    def subjects(self, deleted: bool = False, prefix: str = "") -> list[str]:
        return sorted(
            name for name, s in self._subjects.items() if name.startswith(prefix) and (s.all() if deleted else s.live())
        )

    def _subject(self, name: str, deleted: bool = False) -> _Subject:
        subject = self._subjects.get(name)
        if subject is None or not (subject.all() if deleted else subject.live()):
            raise errors.subject_not_found(name)
        return subject

    def versions(self, subject: str, deleted: bool = False) -> list[int]:
        s = self._subject(subject, deleted)
        return [v.version for v in (s.all() if deleted else s.live())]

    def version(self, subject: str, version: int, deleted: bool = False) -> SchemaValue:
        """A version (LATEST: the latest not deleted, or with ``deleted`` the latest of all)."""
        s = self._subject(subject, deleted)
        candidates = s.all() if deleted else s.live()
        if version == LATEST:
            return candidates[-1]
        found = s.versions.get(version)
        if found is None or (found.deleted and not deleted):
            raise errors.version_not_found(subject, version)
        return found

    def schema(self, schema_id: int) -> SchemaValue:
        """The schema of an id (from any version holding it, soft-deleted ones included, as Confluent answers)."""
        found = self._by_id(schema_id)
        if not found:
            raise errors.schema_not_found(f"Schema {schema_id} not found")
        return found[0]

    def formatted(self, value: SchemaValue, fmt: str = "") -> str:
        """A stored schema in the form ``?format=`` asks (Protobuf: ``serialized`` or text; others as stored)."""
        return self._parsed_of(value).formatted(fmt)

    def subjects_of(self, schema_id: int, deleted: bool = False) -> list[tuple[str, int]]:
        """(subject, version) of every version holding ``schema_id``."""
        self.schema(schema_id)
        return sorted((v.subject, v.version) for v in self._by_id(schema_id) if deleted or not v.deleted)

    def referenced_by(self, subject: str, version: int) -> list[int]:
        """Ids of the live schemas that reference this version."""
        target = self.version(subject, version)
        return sorted(
            {
                v.id
                for v in self._values()
                if not v.deleted and any(r.subject == subject and r.version == target.version for r in v.references)
            }
        )

    def lookup(self, subject: str, given: SchemaInput, normalize: bool = False, deleted: bool = False) -> SchemaValue:
        """The version of ``subject`` holding ``given`` (40401 without versions, 40403 if none holds it)."""
        s = self._subject(subject, deleted)
        parsed = self._parse_input(given)
        text = parsed.normalized() if normalize else parsed.text
        for value in reversed(s.all() if deleted else s.live()):
            if value.schema_type != parsed.schema_type or value.references != given.references:
                continue
            if value.schema == text or (normalize and self._parsed_of(value).normalized() == text):
                return value
        raise errors.schema_not_found()

    def compatibility(self, subject: str) -> str:
        """The level that applies to ``subject``: its own, else the global one."""
        return self._configs.get(subject) or self._configs.get(None) or DEFAULT_LEVEL

    def config(self, subject: str | None, default_to_global: bool = False) -> str:
        if subject is None:
            return self._configs.get(None) or DEFAULT_LEVEL
        if subject in self._configs:
            return self._configs[subject]
        if default_to_global:
            return self.compatibility(subject)
        raise errors.subject_compatibility_not_configured(subject)

    def mode(self, subject: str | None, default_to_global: bool = False) -> str:
        if subject is None:
            return self._modes.get(None) or DEFAULT_MODE
        if subject in self._modes:
            return self._modes[subject]
        if default_to_global:
            return self._effective_mode(subject)
        raise errors.subject_mode_not_configured(subject)

    def _effective_mode(self, subject: str) -> str:
        return self._modes.get(subject) or self._modes.get(None) or DEFAULT_MODE

    def check_compatibility(
        self, subject: str, version: int | None, given: SchemaInput, normalize: bool = False
    ) -> list[str]:
        """Why ``given`` is not compatible under ``subject``'s level: against one version (LATEST: the latest, or
        every earlier one at a transitive level), or with ``version`` None against what a registration checks."""
        parsed = self._parse_input(given)
        if normalize:
            parsed = self._parse_text(parsed.schema_type, parsed.normalized(), given.references)
        level = self.compatibility(subject)
        if version is None:
            subject_state = self._subjects.get(subject)
            live = [] if subject_state is None else subject_state.live()
        elif version == LATEST:
            live = self._subject(subject).live()
        else:
            live = [self.version(subject, version)]
        return incompatibilities(level, parsed, [self._parsed_of(v) for v in live])

    # -- writes --------------------------------------------------------------------------------------------------

    def register(self, subject: str, given: SchemaInput, normalize: bool = False) -> Write[Registered]:
        """A new version of ``subject`` (or the existing one holding the same schema)."""
        mode = self._effective_mode(subject)
        if given.id is not None:
            if mode != "IMPORT":
                raise errors.operation_not_permitted(f"Subject {subject} is not in import mode")
        elif mode != "READWRITE":
            raise errors.operation_not_permitted(f"Subject {subject} is not in read-write mode")
        parsed = self._parse_input(given)
        text = parsed.normalized() if normalize else parsed.text
        content = Content(parsed.schema_type, text, given.references)
        if normalize:
            parsed = self._parse_text(parsed.schema_type, text, given.references)
        state = self._subjects.get(subject)
        live = [] if state is None else state.live()
        existing = next((v for v in reversed(live) if self._same(v, content, normalize)), None)
        if existing is not None and (given.id is None or given.id == existing.id):
            return Write(_registered(existing))
        if given.id is None:
            problems = incompatibilities(self.compatibility(subject), parsed, [self._parsed_of(v) for v in live])
            if problems:
                raise errors.incompatible(problems)
        schema_id = self._choose_id(content, given.id)
        version = self._choose_version(subject, state, given.version)
        value = SchemaValue(subject, version, schema_id, content.schema_type, text, given.references)
        return Write(_registered(value), ((SchemaKey(subject, version), value),))

    def _same(self, value: SchemaValue, content: Content, normalize: bool) -> bool:
        """Whether ``value`` holds ``content``; with ``normalize``, also when it is written otherwise but normalizes
        to it (a version registered before without normalize)."""
        if _content(value) == content:
            return True
        if not normalize or (value.schema_type, value.references) != (content.schema_type, content.references):
            return False
        return self._parsed_of(value).normalized() == content.schema

    def _choose_id(self, content: Content, wanted: int | None) -> int:
        found = self._content_id(content)
        if wanted is None:
            return found if found is not None else self._id_floor
        if wanted < 1:
            raise errors.unprocessable(f"schema id {wanted} is not a positive number")
        holders = self._by_id(wanted)
        if holders and _content(holders[0]) != content:
            raise errors.operation_not_permitted(f"Overwrite new schema with id {wanted} is not permitted.")
        return wanted

    @staticmethod
    def _choose_version(subject: str, state: _Subject | None, wanted: int | None) -> int:
        latest = max(state.versions) if state is not None and state.versions else 0
        if wanted is None:
            return latest + 1
        if not 1 <= wanted <= MAX_VERSION:
            raise errors.invalid_version(str(wanted))
        if state is not None and wanted in state.versions:
            raise errors.operation_not_permitted(f"Version {wanted} of subject {subject} already exists")
        return wanted

    def delete_version(self, subject: str, version: int, permanent: bool = False) -> Write[int]:
        """Soft delete (the version is hidden, its id still answers) or, once soft-deleted, hard delete."""
        self._writable(subject)
        # An explicit version is found even when soft-deleted, so a second soft delete says so (40406); "latest" is
        # the latest live version, or for a permanent delete the latest of all.
        value = self.version(subject, version, deleted=permanent or version != LATEST)
        if permanent:
            if not value.deleted:
                raise errors.version_not_soft_deleted(subject, value.version)
            records: tuple[Record, ...] = ((SchemaKey(subject, value.version), None), (IdFloorKey(), self._id_floor))
            return Write(value.version, records)
        if value.deleted:
            raise errors.version_soft_deleted(subject, value.version)
        self._not_referenced(subject, [value])
        return Write(value.version, ((SchemaKey(subject, value.version), replace(value, deleted=True)),))

    def delete_subject(self, subject: str, permanent: bool = False) -> Write[list[int]]:
        self._writable(subject)
        state = self._subjects.get(subject)
        if state is None:
            raise errors.subject_not_found(subject)
        live = state.live()
        if permanent:
            if live:
                raise errors.subject_not_soft_deleted(subject)
            versions = [v.version for v in state.all()]
            records: list[Record] = [(SchemaKey(subject, v), None) for v in versions]
            records.append((IdFloorKey(), self._id_floor))
            if subject in self._configs:
                records.append((ConfigKey(subject), None))
            if subject in self._modes:
                records.append((ModeKey(subject), None))
            return Write(versions, tuple(records))
        if not live:
            raise errors.subject_soft_deleted(subject)
        self._not_referenced(subject, live)
        return Write(
            [v.version for v in live], tuple((SchemaKey(subject, v.version), replace(v, deleted=True)) for v in live)
        )

    def set_config(self, subject: str | None, level: object) -> Write[str]:
        name = check_level(level)
        return Write(name, ((ConfigKey(subject), name),))

    def delete_config(self, subject: str | None) -> Write[str]:
        """Drop a subject's level (40401 for an unknown subject), or reset the global one to the default; the
        answer is the level it had."""
        if subject is not None and subject not in self._subjects:
            raise errors.subject_not_found(subject)
        previous = self.config(subject, default_to_global=True)
        return Write(previous, ((ConfigKey(subject), None),))

    def set_mode(self, subject: str | None, mode: object, force: bool = False) -> Write[str]:
        name = check_mode(mode)
        if name == "IMPORT" and not force:
            populated = self.subjects() if subject is None else [s for s in self.subjects() if s == subject]
            if populated:
                raise errors.operation_not_permitted(
                    "Cannot import since found existing subjects (set force=true to override)"
                )
        return Write(name, ((ModeKey(subject), name),))

    def delete_mode(self, subject: str) -> Write[str]:
        if subject not in self._subjects and subject not in self._modes:
            raise errors.subject_not_found(subject)
        previous = self.mode(subject, default_to_global=True)
        return Write(previous, ((ModeKey(subject), None),))

    # -- helpers -------------------------------------------------------------------------------------------------

    def _writable(self, subject: str) -> None:
        if self._effective_mode(subject) == "READONLY":
            raise errors.operation_not_permitted(f"Subject {subject} is in read-only mode")

    def _not_referenced(self, subject: str, targets: list[SchemaValue]) -> None:
        versions = {v.version for v in targets}
        for value in self._values():
            if value.deleted or (value.subject == subject and value.version in versions):
                continue
            for ref in value.references:
                if ref.subject == subject and ref.version in versions:
                    raise errors.reference_exists(
                        f"One or more references exist to the schema {{subject={subject},version={ref.version}}}"
                    )

    def _parse_input(self, given: SchemaInput) -> ParsedSchema:
        check_type(given.schema_type)
        return self._parse_text(given.schema_type, given.schema, given.references)

    def _parse_text(self, schema_type: str, text: str, references: tuple[Reference, ...]) -> ParsedSchema:
        """Parsed with its references; from the cache of stored schemas when it is one (a request's schema is not
        cached: the registry's memory follows what it stores, not what it is asked)."""
        cached = self._parsed.get(Content(schema_type.upper(), text, references))
        if cached is not None:
            return cached
        return parse(schema_type, text, self._reference_texts(references))

    def _parsed_of(self, value: SchemaValue) -> ParsedSchema:
        content = _content(value)
        cached = self._parsed.get(content)
        if cached is None:
            cached = self._parsed[content] = self._parse_text(value.schema_type, value.schema, value.references)
        return cached

    def _reference_texts(self, references: tuple[Reference, ...]) -> list[tuple[str, str]]:
        """The (name, text) of ``references`` and of what they reference in turn, dependencies first, each once."""
        out: list[tuple[str, str]] = []
        seen: set[tuple[str, int]] = set()

        def visit(ref: Reference, depth: int) -> None:
            if depth > 100:
                raise errors.invalid_schema("references nest too deep (a cycle?)")
            try:
                value = self.version(ref.subject, ref.version)
            except errors.RegistryError:
                raise errors.invalid_schema(
                    f"reference {ref.name} to subject {ref.subject} version {ref.version} not found"
                ) from None
            if (value.subject, value.version) in seen:
                return
            seen.add((value.subject, value.version))
            for inner in value.references:
                visit(inner, depth + 1)
            out.append((ref.name, value.schema))

        for ref in references:
            visit(ref, 0)
        return out


def _content(value: SchemaValue) -> Content:
    return Content(value.schema_type, value.schema, value.references)


def _registered(value: SchemaValue) -> Registered:
    return Registered(value.subject, value.version, value.id, value.schema_type, value.schema, value.references)

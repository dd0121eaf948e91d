"""The registry core, driven as its shell drives it: each write's records are encoded, decoded and applied (as the
topic would replay them) before the next request. Deterministic: no I/O, no clock."""

from __future__ import annotations

import json
from typing import TypeVar

import pytest

from odradek.broker.schema_registry.core import LATEST, Content, RegistryCore, SchemaInput, Write, parse_version
from odradek.broker.schema_registry.errors import RegistryError
from odradek.broker.schema_registry.records import Reference, SchemaValue, decode, encode_key, encode_value

T = TypeVar("T")


def record(name: str, fields: list[dict[str, object]], namespace: str = "") -> str:
    schema: dict[str, object] = {"type": "record", "name": name, "fields": fields}
    if namespace:
        schema["namespace"] = namespace
    return json.dumps(schema)


V1 = record("User", [{"name": "name", "type": "string"}])
V2 = record("User", [{"name": "name", "type": "string"}, {"name": "age", "type": "int", "default": 0}])
V3_NO_DEFAULT = record("User", [{"name": "name", "type": "string"}, {"name": "email", "type": "string"}])


def commit(core: RegistryCore, write: Write[T]) -> T:
    """Append and replay: through the topic's codec, as every broker's copy sees the records."""
    for key, value in write.records:
        decoded = decode(encode_key(key), encode_value(key, value))
        assert decoded is not None
        core.apply(*decoded)
    return write.result


def code_of(call: object) -> int:
    assert isinstance(call, RegistryError)
    return call.code


def error(fn, *args, **kwargs) -> RegistryError:  # type: ignore[no-untyped-def]
    with pytest.raises(RegistryError) as info:
        fn(*args, **kwargs)
    return info.value


def test_registering_gives_versions_and_global_ids_and_is_idempotent() -> None:
    core = RegistryCore()
    a1 = commit(core, core.register("a-value", SchemaInput(V1)))
    assert (a1.version, a1.id) == (1, 1)
    again = core.register("a-value", SchemaInput(V1))
    assert again.records == () and again.result.id == 1 and again.result.version == 1
    a2 = commit(core, core.register("a-value", SchemaInput(V2)))
    assert (a2.version, a2.id) == (2, 2)
    # The same schema under another subject is the same id; a new one gets the next.
    b1 = commit(core, core.register("b-value", SchemaInput(V1)))
    assert (b1.version, b1.id) == (1, 1)
    assert core.subjects() == ["a-value", "b-value"]
    assert core.versions("a-value") == [1, 2]
    assert core.version("a-value", LATEST).id == 2
    assert core.schema(2).schema == json.dumps(json.loads(V2), separators=(",", ":"))
    assert core.subjects_of(1) == [("a-value", 1), ("b-value", 1)]


def test_an_incompatible_schema_is_refused_with_409_and_writes_nothing() -> None:
    core = RegistryCore()
    commit(core, core.register("s", SchemaInput(V1)))
    e = error(core.register, "s", SchemaInput(V3_NO_DEFAULT))
    assert (e.status, e.code) == (409, 409)
    assert "email" in e.message
    commit(core, core.set_config("s", "NONE"))
    assert commit(core, core.register("s", SchemaInput(V3_NO_DEFAULT))).version == 2


def test_soft_then_hard_delete_of_a_version_and_ids_are_never_reused() -> None:
    core = RegistryCore()
    commit(core, core.register("s", SchemaInput(V1)))
    commit(core, core.register("s", SchemaInput(V2)))
    assert code_of(error(core.delete_version, "s", 2, permanent=True)) == 40407
    assert commit(core, core.delete_version("s", 2)) == 2
    assert core.versions("s") == [1] and core.versions("s", deleted=True) == [1, 2]
    assert code_of(error(core.version, "s", 2)) == 40402
    assert core.version("s", 2, deleted=True).deleted
    assert core.schema(2).id == 2  # a soft-deleted version's id still answers (deserializers need it)
    assert code_of(error(core.delete_version, "s", 2)) == 40406
    assert commit(core, core.delete_version("s", 2, permanent=True)) == 2
    assert code_of(error(core.schema, 2)) == 40403
    # The highest id is gone from every version: the floor record keeps it from being given again.
    fresh = commit(core, core.register("t", SchemaInput(record("Other", [{"name": "x", "type": "long"}]))))
    assert fresh.id == 3


def test_rebuilding_from_the_records_gives_the_same_state_and_next_id() -> None:
    core = RegistryCore()
    log = []
    for write in (
        core.register("s", SchemaInput(V1)),
        None,
        core.set_config(None, "FULL"),
        core.set_mode("s", "READWRITE"),
    ):
        if write is not None:
            log += list(write.records)
            commit(core, write)
    w = core.register("s", SchemaInput(V2))
    log += list(w.records)
    commit(core, w)
    copy = RegistryCore()
    for key, value in log:
        copy.apply(key, value)
    assert copy.versions("s") == core.versions("s") and copy.next_id == core.next_id == 3
    assert copy.config(None) == "FULL" and copy.mode("s") == "READWRITE"


def test_subject_delete_soft_then_permanent_and_its_errors() -> None:
    core = RegistryCore()
    commit(core, core.register("s", SchemaInput(V1)))
    commit(core, core.set_config("s", "FULL"))
    assert code_of(error(core.delete_subject, "missing")) == 40401
    assert code_of(error(core.delete_subject, "s", permanent=True)) == 40405
    assert commit(core, core.delete_subject("s")) == [1]
    assert core.subjects() == [] and core.subjects(deleted=True) == ["s"]
    assert code_of(error(core.versions, "s")) == 40401
    assert code_of(error(core.delete_subject, "s")) == 40404
    assert commit(core, core.delete_subject("s", permanent=True)) == [1]
    assert core.subjects(deleted=True) == []
    assert code_of(error(core.config, "s")) == 40408  # the subject's config went with it


def test_re_registering_a_soft_deleted_schema_makes_a_new_version_with_the_same_id() -> None:
    core = RegistryCore()
    commit(core, core.register("s", SchemaInput(V1)))
    commit(core, core.delete_subject("s"))
    again = commit(core, core.register("s", SchemaInput(V1)))
    assert (again.version, again.id) == (2, 1)


def test_lookup_finds_the_version_and_normalize_ignores_how_it_is_written() -> None:
    core = RegistryCore()
    commit(core, core.register("s", SchemaInput(record("User", [{"name": "n", "type": "string"}], "com.example"))))
    spaced = json.dumps(json.loads(record("User", [{"name": "n", "type": "string"}], "com.example")), indent=2)
    assert core.lookup("s", SchemaInput(spaced)).version == 1  # the same JSON, other whitespace
    full_name = json.dumps(
        {"type": "record", "name": "com.example.User", "fields": [{"type": {"type": "string"}, "name": "n"}]}
    )
    assert code_of(error(core.lookup, "s", SchemaInput(full_name))) == 40403
    assert core.lookup("s", SchemaInput(full_name), normalize=True).version == 1
    assert code_of(error(core.lookup, "nope", SchemaInput(V1))) == 40401
    assert code_of(error(core.lookup, "s", SchemaInput("{not json"))) == 42201


def test_registering_with_normalize_finds_a_version_written_otherwise() -> None:
    core = RegistryCore()
    first = commit(core, core.register("s", SchemaInput(record("User", [{"name": "n", "type": "string"}], "ex"))))
    other = json.dumps({"type": "record", "name": "ex.User", "fields": [{"type": "string", "name": "n"}]})
    again = core.register("s", SchemaInput(other), normalize=True)
    assert again.records == () and (again.result.id, again.result.version) == (first.id, 1)


def test_config_levels_modes_and_their_refusals() -> None:
    core = RegistryCore()
    assert core.config(None) == "BACKWARD" and core.mode(None) == "READWRITE"
    assert code_of(error(core.set_config, None, "SIDEWAYS")) == 42203
    assert code_of(error(core.set_mode, None, "WRITEONLY")) == 42204
    assert commit(core, core.set_config(None, "full_transitive")) == "FULL_TRANSITIVE"
    assert core.config("s", default_to_global=True) == "FULL_TRANSITIVE"
    assert code_of(error(core.mode, "s")) == 40409
    commit(core, core.register("s", SchemaInput(V1)))
    assert commit(core, core.delete_config(None)) == "FULL_TRANSITIVE"
    assert core.config(None) == "BACKWARD"
    # READONLY refuses registrations and deletes; IMPORT needs an empty registry unless forced.
    commit(core, core.set_mode("s", "READONLY"))
    assert code_of(error(core.register, "s", SchemaInput(V2))) == 42205
    assert code_of(error(core.delete_subject, "s")) == 42205
    assert code_of(error(core.set_mode, None, "IMPORT")) == 42205
    assert commit(core, core.delete_mode("s")) == "READONLY"
    assert commit(core, core.register("s", SchemaInput(V2))).version == 2


def test_import_mode_keeps_the_given_ids_and_versions() -> None:
    core = RegistryCore()
    assert code_of(error(core.register, "s", SchemaInput(V1, id=100))) == 42205  # not in IMPORT mode
    commit(core, core.set_mode(None, "IMPORT"))
    assert code_of(error(core.register, "s", SchemaInput(V1))) == 42205  # IMPORT takes only given ids
    got = commit(core, core.register("s", SchemaInput(V1, id=100, version=7)))
    assert (got.id, got.version) == (100, 7)
    assert code_of(error(core.register, "t", SchemaInput(V2, id=100, version=1))) == 42205  # id taken
    commit(core, core.set_mode(None, "READWRITE"))
    assert commit(core, core.register("s", SchemaInput(V2))).id == 101


def test_references_resolve_named_types_and_protect_what_they_reference() -> None:
    core = RegistryCore()
    address = record("Address", [{"name": "city", "type": "string"}], "com.example")
    commit(core, core.register("address", SchemaInput(address)))
    ref = (Reference("com.example.Address", "address", 1),)
    person = record("Person", [{"name": "home", "type": "com.example.Address"}], "com.example")
    assert code_of(error(core.register, "person", SchemaInput(person))) == 42201  # unknown type without it
    got = commit(core, core.register("person", SchemaInput(person, references=ref)))
    assert got.id == 2 and core.schema(2).references == ref
    assert core.referenced_by("address", 1) == [2]
    assert code_of(error(core.delete_version, "address", 1)) == 42206
    missing = (Reference("com.example.Address", "address", 9),)
    assert code_of(error(core.register, "other", SchemaInput(person, references=missing))) == 42201


def test_compatibility_checks_against_one_version_or_the_level() -> None:
    core = RegistryCore()
    commit(core, core.register("s", SchemaInput(V1)))
    assert core.check_compatibility("s", LATEST, SchemaInput(V2)) == []
    assert core.check_compatibility("s", 1, SchemaInput(V3_NO_DEFAULT)) != []
    assert core.check_compatibility("new", None, SchemaInput(V3_NO_DEFAULT)) == []
    assert code_of(error(core.check_compatibility, "s", 5, SchemaInput(V2))) == 40402
    assert code_of(error(core.check_compatibility, "nope", LATEST, SchemaInput(V2))) == 40401


@pytest.mark.parametrize("seed", range(5))
def test_the_id_indexes_match_a_scan_of_every_version(seed: int) -> None:
    """Random registrations, soft and hard deletes over a few subjects and schemas: after each, the core's indexes
    (the versions of an id, the id of a schema) are what a scan of every version gives."""
    import random

    rng = random.Random(seed)
    core = RegistryCore()
    commit(core, core.set_config(None, "NONE"))
    schemas = [record(f"R{i}", [{"name": "a", "type": "int"}]) for i in range(4)]
    for _ in range(200):
        subject = rng.choice(["a", "b", "c"])
        action = rng.random()
        try:
            if action < 0.5:
                commit(core, core.register(subject, SchemaInput(rng.choice(schemas))))
            elif action < 0.7:
                commit(core, core.delete_version(subject, rng.choice(core.versions(subject, deleted=True))))
            elif action < 0.85:
                commit(core, core.delete_version(subject, rng.choice(core.versions(subject, deleted=True)), True))
            else:
                commit(core, core.delete_subject(subject, permanent=rng.random() < 0.5))
        except RegistryError:
            pass
        every = [
            v for s in core.subjects(deleted=True) for v in (core.version(s, n, True) for n in core.versions(s, True))
        ]
        for schema_id in {v.id for v in every} | {1, 2, 3, 4, 5}:
            scanned = sorted((v.subject, v.version) for v in every if v.id == schema_id)
            if scanned:
                assert core.subjects_of(schema_id, deleted=True) == scanned
            else:
                assert code_of(error(core.schema, schema_id)) == 40403
        ids = {(v.schema_type, v.schema, v.references): v.id for v in every}
        for v in every:
            assert core._content_id(_content_of(v)) == ids[(v.schema_type, v.schema, v.references)]


def _content_of(v: SchemaValue) -> Content:
    return Content(v.schema_type, v.schema, v.references)


def test_version_parameters() -> None:
    assert parse_version("latest") == parse_version("-1") == LATEST
    assert parse_version("3") == 3
    for bad in ("0", "-2", "x", str(2**31)):
        assert code_of(error(parse_version, bad)) == 42202


def test_unsupported_formats_are_refused_not_pretended() -> None:
    core = RegistryCore()
    e = error(core.register, "s", SchemaInput('edition = "2023"; message M {}', "PROTOBUF"))
    assert e.code == 42201 and "not supported yet" in e.message
    assert code_of(error(core.register, "s", SchemaInput("x", "XML"))) == 42201

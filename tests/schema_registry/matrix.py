"""What the compatibility matrices of every format share: the verdict a level gives from the two directions, and
registering a schema through the registry core (True if accepted, False if refused as incompatible)."""

from __future__ import annotations

from odradek.broker.schema_registry.core import RegistryCore, SchemaInput
from odradek.broker.schema_registry.errors import RegistryError


def expected(level: str, backward: bool, forward: bool) -> bool:
    """Whether ``level`` accepts a new version that is ``backward`` and ``forward`` compatible with the old one
    (a transitive level decides as its base level for a single earlier version)."""
    base = level.removesuffix("_TRANSITIVE")
    return {"NONE": True, "BACKWARD": backward, "FORWARD": forward, "FULL": backward and forward}[base]


def register_input(core: RegistryCore, subject: str, schema: SchemaInput) -> bool:
    """Register ``schema`` under ``subject`` and apply its records; False when refused as incompatible (409)."""
    try:
        write = core.register(subject, schema)
    except RegistryError as e:
        assert e.code == 409, e.message
        return False
    for key, value in write.records:
        core.apply(key, value)
    return True


def matrix_core(level: str) -> RegistryCore:
    """A registry core whose subject ``s`` is at compatibility ``level``."""
    core = RegistryCore()
    core.apply(*core.set_config("s", level).records[0])
    return core

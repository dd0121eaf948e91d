"""Confluent's compatibility levels: which earlier versions a new schema is checked against, and in which
direction. BACKWARD: the new schema reads data written with the latest (consumers upgrade first); FORWARD: the
latest reads data written with the new one (producers upgrade first); FULL: both. The ``_TRANSITIVE`` levels check
every earlier (not deleted) version instead of the latest only; NONE checks nothing."""

from __future__ import annotations

from collections.abc import Sequence

from odradek.broker.schema_registry.errors import invalid_compatibility_level
from odradek.broker.schema_registry.formats import ParsedSchema

LEVELS = (
    "NONE",
    "BACKWARD",
    "BACKWARD_TRANSITIVE",
    "FORWARD",
    "FORWARD_TRANSITIVE",
    "FULL",
    "FULL_TRANSITIVE",
)
DEFAULT_LEVEL = "BACKWARD"  # Confluent's default


def check_level(level: object) -> str:
    """The level named by ``level`` (any case), or RegistryError 42203."""
    name = level.upper() if isinstance(level, str) else None
    if name not in LEVELS:
        raise invalid_compatibility_level(level)
    return name


def incompatibilities(level: str, new: ParsedSchema, earlier: Sequence[ParsedSchema]) -> list[str]:
    """Why ``new`` may not follow ``earlier`` (oldest first) under ``level``; empty when it may."""
    if level == "NONE" or not earlier:
        return []
    targets = list(earlier) if level.endswith("_TRANSITIVE") else [earlier[-1]]
    base = level.removesuffix("_TRANSITIVE")
    out: list[str] = []
    for old in reversed(targets):
        if base in ("BACKWARD", "FULL"):
            out += [
                f"{base}: the new schema cannot read data written with an earlier one: {m}" for m in new.can_read(old)
            ]
        if base in ("FORWARD", "FULL"):
            out += [
                f"{base}: an earlier schema cannot read data written with the new one: {m}" for m in old.can_read(new)
            ]
    return out

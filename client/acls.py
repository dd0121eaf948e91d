"""ACL bindings and filters as the admin client takes and returns them: plain strings for the enums, so that an
application needs none of the server's types.

Names are Kafka's, upper case with underscores (``TOPIC``, ``TRANSACTIONAL_ID``, ``LITERAL``, ``PREFIXED``,
``READ``, ``IDEMPOTENT_WRITE``, ``ALLOW``); they are parsed case-insensitively with or without ``-``/``_``, so
``IdempotentWrite`` and ``idempotent-write`` work too. The wire carries Kafka's numeric codes, and odradek's own
for SUBJECT (a schema registry subject: docs/schema-registry.md).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass

from odradek.client.errors import InvalidRequestError

RESOURCE_TYPES: Mapping[str, int] = {
    "ANY": 1,
    "TOPIC": 2,
    "GROUP": 3,
    "CLUSTER": 4,
    "TRANSACTIONAL_ID": 5,
    "SUBJECT": 100,  # odradek's: a schema registry subject
}
PATTERN_TYPES: Mapping[str, int] = {"ANY": 1, "MATCH": 2, "LITERAL": 3, "PREFIXED": 4}
OPERATIONS: Mapping[str, int] = {
    "ANY": 1,
    "ALL": 2,
    "READ": 3,
    "WRITE": 4,
    "CREATE": 5,
    "DELETE": 6,
    "ALTER": 7,
    "DESCRIBE": 8,
    "CLUSTER_ACTION": 9,
    "DESCRIBE_CONFIGS": 10,
    "ALTER_CONFIGS": 11,
    "IDEMPOTENT_WRITE": 12,
}
PERMISSIONS: Mapping[str, int] = {"ANY": 1, "DENY": 2, "ALLOW": 3}
CLUSTER_NAME = "kafka-cluster"
"""The one name of the CLUSTER resource."""

# Kafka's AclEntry.supportedOperations plus ALL: the operations that mean something on each resource type (the
# server refuses the others; kafka-acls.sh checks this table before sending, and so does ``check_binding``).
SUPPORTED_OPERATIONS: Mapping[str, frozenset[str]] = {
    "TOPIC": frozenset(
        {"READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE", "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "ALL"}
    ),
    "GROUP": frozenset({"READ", "DESCRIBE", "DELETE", "ALL"}),
    "CLUSTER": frozenset(
        {"CREATE", "CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE", "ALTER", "DESCRIBE"}
        | {"ALL"}
    ),
    "TRANSACTIONAL_ID": frozenset({"DESCRIBE", "WRITE", "ALL"}),
    "SUBJECT": frozenset({"READ", "WRITE", "DELETE", "DESCRIBE", "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "ALL"}),
}

_KINDS: dict[str, Mapping[str, int]] = {
    "resource type": RESOURCE_TYPES,
    "pattern type": PATTERN_TYPES,
    "operation": OPERATIONS,
    "permission": PERMISSIONS,
}


def _key(text: str) -> str:
    return text.strip().upper().replace("-", "").replace("_", "")


def canonical(kind: str, text: str, *, allow_any: bool = True) -> str:
    """The canonical name for ``text`` among ``kind``'s names (``resource type``, ``pattern type``,
    ``operation``, ``permission``); InvalidRequestError naming the valid ones otherwise. ANY (and MATCH) only
    where ``allow_any``: they select bindings, they are not values a binding can have."""
    names = [n for n in _KINDS[kind] if allow_any or n not in ("ANY", "MATCH")]
    for name in names:
        if _key(name) == _key(text):
            return name
    raise InvalidRequestError(f"unknown {kind} {text!r}; valid: {', '.join(names)} (case-insensitive)")


def code(kind: str, name: str) -> int:
    return _KINDS[kind][name]


def name_of(kind: str, number: int) -> str:
    """The canonical name of a wire code; ``UNKNOWN`` for one this client does not know."""
    return next((n for n, c in _KINDS[kind].items() if c == number), "UNKNOWN")


@dataclass(frozen=True, kw_only=True)
class AclBinding:
    """One ACL: ``permission`` (ALLOW or DENY) for ``principal`` (``User:name``, ``User:*`` for everyone) to perform
    ``operation`` from ``host`` (``*`` or an IP address) on the resources of ``resource_type`` whose name is
    ``resource_name`` (LITERAL; ``*`` for all of them) or starts with it (PREFIXED)."""

    resource_type: str
    resource_name: str
    principal: str
    operation: str
    permission: str = "ALLOW"
    pattern_type: str = "LITERAL"
    host: str = "*"

    def __post_init__(self) -> None:
        object.__setattr__(self, "resource_type", canonical("resource type", self.resource_type, allow_any=False))
        object.__setattr__(self, "pattern_type", canonical("pattern type", self.pattern_type, allow_any=False))
        object.__setattr__(self, "operation", canonical("operation", self.operation, allow_any=False))
        object.__setattr__(self, "permission", canonical("permission", self.permission, allow_any=False))


@dataclass(frozen=True, kw_only=True)
class AclBindingFilter:
    """Selects bindings: a field left None matches every value. ``pattern_type`` MATCH with a ``resource_name``
    selects every binding that applies to that resource (literal, ``*`` and matching prefixes); ANY or None
    compares names exactly."""

    resource_type: str | None = None
    resource_name: str | None = None
    pattern_type: str | None = None
    principal: str | None = None
    host: str | None = None
    operation: str | None = None
    permission: str | None = None

    def __post_init__(self) -> None:
        for field_name, kind in (
            ("resource_type", "resource type"),
            ("pattern_type", "pattern type"),
            ("operation", "operation"),
            ("permission", "permission"),
        ):
            value = getattr(self, field_name)
            if value is not None:
                object.__setattr__(self, field_name, canonical(kind, value))

    @property
    def is_match_all(self) -> bool:
        """True when the filter selects every binding."""
        return all(
            getattr(self, f) in (None, "ANY")
            for f in ("resource_type", "resource_name", "pattern_type", "principal", "host", "operation", "permission")
        )


def check_binding(b: AclBinding) -> None:
    """InvalidRequestError for what the server would refuse in a binding, worded for the user: an empty resource
    name, a CLUSTER name other than ``kafka-cluster``, a principal not of the form ``Type:name``, an operation that
    does not apply to the resource type, a host that is not ``*`` or an IP address in canonical text."""
    if not b.resource_name:
        raise InvalidRequestError("the resource name of an ACL must not be empty")
    if b.resource_type == "CLUSTER" and b.resource_name != CLUSTER_NAME:
        raise InvalidRequestError(f"the only name of the CLUSTER resource is {CLUSTER_NAME}")
    kind, colon, name = b.principal.partition(":")
    if not (kind and colon and name):
        raise InvalidRequestError(f"principal {b.principal!r} is not of the form Type:name (e.g. User:alice, User:*)")
    if b.host != "*":
        try:
            canonical_host = str(ipaddress.ip_address(b.host))
        except ValueError:
            raise InvalidRequestError(f"host {b.host!r} is neither '*' nor an IP address") from None
        if canonical_host != b.host:
            raise InvalidRequestError(f"host {b.host!r} is not in canonical form; write {canonical_host}")
    supported = SUPPORTED_OPERATIONS[b.resource_type]
    if b.operation not in supported:
        valid = ", ".join(sorted(supported))
        raise InvalidRequestError(
            f"operation {b.operation} does not apply to {b.resource_type} resources (valid: {valid})"
        )

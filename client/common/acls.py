"""ACLs with Kafka's semantics, sans I/O: the bindings, their filters and the authorizer that answers from them.

A binding says "principal P is allowed/denied operation O from host H on resources of type T matching pattern R".
The rules, as Kafka's ``StandardAuthorizer`` applies them:

- A super user (``super.users``) is allowed everything, whatever the bindings say.
- The bindings that apply to resource (T, N) are the LITERAL ones named N, the LITERAL ones named ``*`` (every
  resource of type T) and the PREFIXED ones whose name N starts with.
- Of those, a binding matches a request when its principal is the request's or ``User:*``, its host is the
  request's (an IP address in canonical text) or ``*``, and its operation covers the requested one.
- A DENY covers its own operation only (and ALL covers everything): denying READ does not deny DESCRIBE.
- An ALLOW covers its own operation, ALL covers everything, and READ, WRITE, DELETE and ALTER each imply DESCRIBE,
  ALTER_CONFIGS implies DESCRIBE_CONFIGS.
- Any matching DENY wins; otherwise any matching ALLOW allows.
- If no binding at all applies to the resource (whoever it names), the answer is ``allow.everyone.if.no.acl.found``;
  if some binding applies but none matches, the request is denied.

``Authorizer.authorize_by_resource_type`` is KIP-679's question "may the principal perform O on some resource of
type T?" (an idempotent producer without cluster IdempotentWrite needs WRITE on some topic): it looks at ALLOW and
DENY bindings for exactly O or ALL (no implied operations, as in Kafka) and answers yes when an allowed literal name
or prefix is not covered by a denied literal name, a denied prefix of it or a denied ``*``.

The enums carry Kafka's wire codes, which the Kafka listener's CreateAcls, DescribeAcls and DeleteAcls use as they are.
One resource type is odradek's own: SUBJECT, a schema registry subject (docs/schema-registry.md), with a code far
from Kafka's (0-7 so far) that still fits Kafka's INT8 field; ``KAFKA_RESOURCE_TYPES`` are the ones Kafka knows.
"""

from __future__ import annotations

import ipaddress
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from enum import IntEnum
from typing import Self

WILDCARD_RESOURCE = "*"
WILDCARD_PRINCIPAL = "User:*"
WILDCARD_HOST = "*"
CLUSTER_RESOURCE_NAME = "kafka-cluster"


def _normalized(text: str) -> str:
    return text.strip().lower().replace("-", "").replace("_", "")


class _KafkaEnum(IntEnum):
    """Wire codes as values; names parsed the way the CLI takes them (``read``, ``IdempotentWrite``,
    ``idempotent-write``, ``IDEMPOTENT_WRITE`` are all one)."""

    @classmethod
    def parse(cls, text: str) -> Self:
        """The member named by ``text``, case-insensitive, with or without ``-``/``_`` between words. UNKNOWN is
        not a name one can give."""
        key = _normalized(text)
        for member in cls:
            if member.name != "UNKNOWN" and _normalized(member.name) == key:
                return member
        choices = ", ".join(member.display_name for member in cls if member.name != "UNKNOWN")
        raise ValueError(f"unknown {_KIND[cls]} {text!r}; valid: {choices} (case-insensitive)")

    @classmethod
    def from_code(cls, code: int) -> Self:
        """The member with wire code ``code``, UNKNOWN (0) for a code this version does not know, as Kafka's
        ``fromCode`` does; validation then refuses it where a concrete value is needed."""
        try:
            return cls(code)
        except ValueError:
            return cls(0)

    @property
    def display_name(self) -> str:
        """Kafka's spelling in kafka-acls.sh and its docs: ``IdempotentWrite``, ``TransactionalId``."""
        return "".join(word.capitalize() for word in self.name.split("_"))


class ResourceType(_KafkaEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    SUBJECT = 100  # odradek's: a schema registry subject


KAFKA_RESOURCE_TYPES = frozenset(
    {ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER, ResourceType.TRANSACTIONAL_ID}
)
"""The concrete resource types Kafka's protocol knows (a Kafka listener's ACL filter for ANY type leaves the others
out: Kafka's clients cannot read a code they do not know)."""


class PatternType(_KafkaEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(_KafkaEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12


class AclPermissionType(_KafkaEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


_KIND: dict[type[_KafkaEnum], str] = {
    ResourceType: "resource type",
    PatternType: "resource pattern type",
    AclOperation: "operation",
    AclPermissionType: "permission type",
}

_Op = AclOperation

# Kafka's AclEntry.supportedOperations, plus ALL everywhere (kafka-acls.sh enforces this table; brokers do not).
SUPPORTED_OPERATIONS: dict[ResourceType, frozenset[AclOperation]] = {
    ResourceType.TOPIC: frozenset(
        {_Op.READ, _Op.WRITE, _Op.CREATE, _Op.DELETE, _Op.ALTER, _Op.DESCRIBE, _Op.DESCRIBE_CONFIGS}
        | {_Op.ALTER_CONFIGS, _Op.ALL}
    ),
    ResourceType.GROUP: frozenset({_Op.READ, _Op.DESCRIBE, _Op.DELETE, _Op.ALL}),
    ResourceType.CLUSTER: frozenset(
        {_Op.CREATE, _Op.CLUSTER_ACTION, _Op.DESCRIBE_CONFIGS, _Op.ALTER_CONFIGS, _Op.IDEMPOTENT_WRITE}
        | {_Op.ALTER, _Op.DESCRIBE, _Op.ALL}
    ),
    ResourceType.TRANSACTIONAL_ID: frozenset({_Op.DESCRIBE, _Op.WRITE, _Op.ALL}),
    # odradek's: READ (a subject's versions, lookups, compatibility checks, the ids it holds), WRITE (register),
    # DELETE, DESCRIBE (listed), DESCRIBE_CONFIGS and ALTER_CONFIGS (its compatibility level and mode).
    ResourceType.SUBJECT: frozenset(
        {_Op.READ, _Op.WRITE, _Op.DELETE, _Op.DESCRIBE, _Op.DESCRIBE_CONFIGS, _Op.ALTER_CONFIGS, _Op.ALL}
    ),
}

# Operations an ALLOW binding grants beyond its own (ALLOW ALL grants everything; DENY never implies).
_IMPLIED_BY: dict[AclOperation, frozenset[AclOperation]] = {
    _Op.DESCRIBE: frozenset({_Op.READ, _Op.WRITE, _Op.DELETE, _Op.ALTER}),
    _Op.DESCRIBE_CONFIGS: frozenset({_Op.ALTER_CONFIGS}),
}


@dataclass(frozen=True, slots=True, order=True)
class AclBinding:
    """One ACL: a resource pattern and an access control entry. ``principal`` is ``Type:name`` (``User:*`` for
    every principal), ``host`` an IP address in canonical text or ``*``."""

    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission: AclPermissionType


def normalize_host(host: str) -> str:
    """``*`` or the canonical text of an IP address (``::1``, not ``0:0::1``): the form bindings hold and requests
    are compared in. Raises ValueError for anything else."""
    if host == WILDCARD_HOST:
        return host
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        raise ValueError(f"host {host!r} is neither {WILDCARD_HOST!r} nor an IP address") from None


def validate_principal(principal: str) -> None:
    """``Type:name`` with both parts non-empty (Kafka only requires the colon; odradek also refuses an empty type
    or name, which no authenticator produces)."""
    principal_type, colon, name = principal.partition(":")
    if not colon:
        raise ValueError(f"principal {principal!r} is not of the form Type:name (e.g. User:alice, User:*)")
    if not principal_type or not name:
        raise ValueError(f"principal {principal!r} has an empty type or name (expected e.g. User:alice, User:*)")


def validate_binding(binding: AclBinding) -> None:
    """Raise ValueError for a binding that cannot be stored. Kafka's brokers refuse ANY/MATCH/UNKNOWN values, an
    empty resource name, a principal without a colon and a CLUSTER name other than ``kafka-cluster``. odradek is
    stricter in three ways: an operation that does not apply to the resource type (which only kafka-acls.sh checks
    in Kafka, so a broker there stores bindings that never match a request), a host that is not ``*`` or an IP in
    canonical text (Kafka stores any string, which then never matches), and an empty principal type or name."""
    if binding.resource_type not in SUPPORTED_OPERATIONS:
        raise ValueError(f"invalid resource type {binding.resource_type.name} in an ACL binding")
    if binding.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise ValueError(f"invalid pattern type {binding.pattern_type.name} in an ACL binding (LITERAL or PREFIXED)")
    if binding.operation in (AclOperation.ANY, AclOperation.UNKNOWN):
        raise ValueError(f"invalid operation {binding.operation.name} in an ACL binding")
    if binding.permission not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
        raise ValueError(f"invalid permission type {binding.permission.name} in an ACL binding (ALLOW or DENY)")
    if not binding.resource_name:
        raise ValueError("empty resource name in an ACL binding")
    if binding.resource_type is ResourceType.CLUSTER and binding.resource_name != CLUSTER_RESOURCE_NAME:
        raise ValueError(f"the only valid name for the CLUSTER resource is {CLUSTER_RESOURCE_NAME}")
    validate_principal(binding.principal)
    if normalize_host(binding.host) != binding.host:
        raise ValueError(f"host {binding.host!r} is not in canonical form; write {normalize_host(binding.host)}")
    supported = SUPPORTED_OPERATIONS[binding.resource_type]
    if binding.operation not in supported:
        names = ", ".join(sorted(op.display_name for op in supported))
        raise ValueError(
            f"operation {binding.operation.display_name} does not apply to {binding.resource_type.display_name}"
            f" resources (valid: {names})"
        )


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """Selects bindings for DescribeAcls and DeleteAcls, as Kafka's AclBindingFilter. None (or ANY) matches every
    value. On the pattern type: a concrete type or ANY compares names exactly (ANY in both literal and prefixed
    bindings); MATCH selects every binding that would apply to the named resource: literal on the name, literal
    ``*`` and prefixed on a prefix of the name. Principal and host compare exactly (``User:*`` selects the
    bindings written for ``User:*``, not every principal's)."""

    resource_type: ResourceType | None = None
    resource_name: str | None = None
    pattern_type: PatternType | None = None
    principal: str | None = None
    host: str | None = None
    operation: AclOperation | None = None
    permission: AclPermissionType | None = None

    def matches(self, binding: AclBinding) -> bool:
        return self._matches_pattern(binding) and self._matches_entry(binding)

    def _matches_pattern(self, binding: AclBinding) -> bool:
        if self.resource_type not in (None, ResourceType.ANY, binding.resource_type):
            return False
        pattern_type = PatternType.ANY if self.pattern_type is None else self.pattern_type
        if pattern_type not in (PatternType.ANY, PatternType.MATCH, binding.pattern_type):
            return False
        if self.resource_name is None:
            return True
        if pattern_type is not PatternType.MATCH:
            return self.resource_name == binding.resource_name
        if binding.pattern_type is PatternType.LITERAL:
            return binding.resource_name in (self.resource_name, WILDCARD_RESOURCE)
        return self.resource_name.startswith(binding.resource_name)

    def _matches_entry(self, binding: AclBinding) -> bool:
        return (
            self.principal in (None, binding.principal)
            and self.host in (None, binding.host)
            and self.operation in (None, AclOperation.ANY, binding.operation)
            and self.permission in (None, AclPermissionType.ANY, binding.permission)
        )


MATCH_ALL = AclBindingFilter()


def validate_filter(acl_filter: AclBindingFilter) -> None:
    """Raise ValueError for a filter with an UNKNOWN value (Kafka answers such a DeleteAcls/DescribeAcls filter with
    INVALID_REQUEST rather than matching nothing)."""
    for kind, value in (
        ("resource type", acl_filter.resource_type),
        ("pattern type", acl_filter.pattern_type),
        ("operation", acl_filter.operation),
        ("permission type", acl_filter.permission),
    ):
        if value is not None and value.name == "UNKNOWN":
            raise ValueError(f"unknown {kind} in an ACL filter")


# Principal -> the bindings for that principal on one resource pattern.
_Entries = dict[str, set[AclBinding]]


def _check_request(operation: AclOperation, resource_type: ResourceType) -> None:
    if resource_type not in SUPPORTED_OPERATIONS:
        raise ValueError(f"cannot authorize on resource type {resource_type.name}")
    if operation in (AclOperation.ANY, AclOperation.UNKNOWN):
        raise ValueError(f"cannot authorize operation {operation.name}")


def _allow_covers(granted: AclOperation, requested: AclOperation) -> bool:
    return granted in (AclOperation.ALL, requested) or granted in _IMPLIED_BY.get(requested, ())


def _host_matches(binding: AclBinding, host: str) -> bool:
    return binding.host in (WILDCARD_HOST, host)


class Authorizer:
    """The bindings, indexed for per-request checks, and the two settings that decide beyond them.

    Literal bindings are found by (type, name), the ``*`` ones by (type, ``*``); prefixed bindings by (type, prefix)
    for each length some prefix of that type has, so a check does a handful of dict lookups rather than a scan.
    Within a pattern, bindings are grouped by principal so that only the requester's and ``User:*`` are read.
    """

    def __init__(
        self,
        bindings: Iterable[AclBinding] = (),
        *,
        super_users: Iterable[str] = (),
        allow_everyone_if_no_acl_found: bool = False,
    ) -> None:
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self._bindings: set[AclBinding] = set()
        self._literal: dict[tuple[ResourceType, str], _Entries] = {}
        self._prefixed: dict[tuple[ResourceType, str], _Entries] = {}
        # Per resource type: how many prefixed patterns have each length, and those lengths in ascending order.
        self._prefix_length_counts: dict[ResourceType, Counter[int]] = {}
        self._prefix_lengths: dict[ResourceType, tuple[int, ...]] = {}
        self._by_type_and_principal: dict[tuple[ResourceType, str], set[AclBinding]] = {}
        self.add(bindings)

    @property
    def super_users(self) -> frozenset[str]:
        """Principals (``User:admin``) allowed everything; Kafka's ``super.users``."""
        return self._super_users

    @super_users.setter
    def super_users(self, principals: Iterable[str]) -> None:
        principals = frozenset(principals)
        for principal in principals:
            validate_principal(principal)
        self._super_users = principals

    def __len__(self) -> int:
        return len(self._bindings)

    def __contains__(self, binding: object) -> bool:
        return binding in self._bindings

    def add(self, bindings: Iterable[AclBinding]) -> list[AclBinding]:
        """Store ``bindings`` (all or none: each is validated first) and return those that were not stored already;
        adding an existing binding changes nothing."""
        bindings = list(bindings)
        for binding in bindings:
            validate_binding(binding)
        added = []
        for binding in bindings:
            if binding not in self._bindings:
                self._insert(binding)
                added.append(binding)
        return added

    def remove(self, acl_filter: AclBindingFilter) -> list[AclBinding]:
        """Remove and return (sorted) every binding ``acl_filter`` matches."""
        removed = self.describe(acl_filter)
        for binding in removed:
            self._delete(binding)
        return removed

    def describe(self, acl_filter: AclBindingFilter = MATCH_ALL) -> list[AclBinding]:
        """Every binding ``acl_filter`` matches, sorted (by resource type, name, pattern type, principal, ...)."""
        validate_filter(acl_filter)
        return sorted(binding for binding in self._bindings if acl_filter.matches(binding))

    def authorize(
        self,
        principal: str,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        resource_name: str,
    ) -> bool:
        """May ``principal``, connected from ``host`` (canonical IP text), perform ``operation`` on the resource?"""
        _check_request(operation, resource_type)
        if principal in self._super_users:
            return True
        principals = self._matching_principals(principal)
        any_acl = False
        allowed = False
        for entries in self._applicable(resource_type, resource_name):
            any_acl = True
            for candidate in principals:
                for binding in entries.get(candidate, ()):
                    if not _host_matches(binding, host):
                        continue
                    if binding.permission is AclPermissionType.DENY:
                        if binding.operation in (AclOperation.ALL, operation):
                            return False
                    elif _allow_covers(binding.operation, operation):
                        allowed = True
        if not any_acl:
            return self.allow_everyone_if_no_acl_found
        return allowed

    def authorize_by_resource_type(
        self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType
    ) -> bool:
        """Is there any resource of ``resource_type`` on which ``principal`` may perform ``operation`` (KIP-679)?

        Only bindings for exactly ``operation`` or ALL count, as in Kafka. With ``allow_everyone_if_no_acl_found``
        the answer is yes unless a literal ``*`` binding of the type (anyone's) leaves no resource without ACLs:
        Kafka asks the same of one made-up name, ``hardcode``; odradek asks of a name no binding applies to.
        """
        _check_request(operation, resource_type)
        if principal in self._super_users:
            return True
        if self.allow_everyone_if_no_acl_found and (resource_type, WILDCARD_RESOURCE) not in self._literal:
            return True
        allow_literals: set[str] = set()
        allow_prefixes: set[str] = set()
        deny_literals: set[str] = set()
        deny_prefixes: set[str] = set()
        for candidate in self._matching_principals(principal):
            for binding in self._by_type_and_principal.get((resource_type, candidate), ()):
                if not _host_matches(binding, host) or binding.operation not in (AclOperation.ALL, operation):
                    continue
                literal = binding.pattern_type is PatternType.LITERAL
                if binding.permission is AclPermissionType.DENY:
                    (deny_literals if literal else deny_prefixes).add(binding.resource_name)
                else:
                    (allow_literals if literal else allow_prefixes).add(binding.resource_name)
        if WILDCARD_RESOURCE in deny_literals:
            return False
        if WILDCARD_RESOURCE in allow_literals:
            return True

        def denied_by_prefix(name: str) -> bool:
            return any(name[:length] in deny_prefixes for length in range(1, len(name) + 1))

        # An allowed literal name is usable unless denied by name or by a prefix of it; an allowed prefix is usable
        # unless a denied prefix is a prefix of it (longer denied prefixes and denied names leave other names free).
        return any(name not in deny_literals and not denied_by_prefix(name) for name in allow_literals) or any(
            not denied_by_prefix(prefix) for prefix in allow_prefixes
        )

    @staticmethod
    def _matching_principals(principal: str) -> tuple[str, ...]:
        return (principal,) if principal == WILDCARD_PRINCIPAL else (principal, WILDCARD_PRINCIPAL)

    def _applicable(self, resource_type: ResourceType, resource_name: str) -> Iterator[_Entries]:
        """The entries of every pattern that applies to the resource: literal, literal ``*``, prefixed."""
        literal = self._literal.get((resource_type, resource_name))
        if literal is not None:
            yield literal
        if resource_name != WILDCARD_RESOURCE:
            wildcard = self._literal.get((resource_type, WILDCARD_RESOURCE))
            if wildcard is not None:
                yield wildcard
        for length in self._prefix_lengths.get(resource_type, ()):
            if length > len(resource_name):
                break
            prefixed = self._prefixed.get((resource_type, resource_name[:length]))
            if prefixed is not None:
                yield prefixed

    def _pattern_index(self, binding: AclBinding) -> dict[tuple[ResourceType, str], _Entries]:
        return self._literal if binding.pattern_type is PatternType.LITERAL else self._prefixed

    def _insert(self, binding: AclBinding) -> None:
        self._bindings.add(binding)
        key = (binding.resource_type, binding.resource_name)
        index = self._pattern_index(binding)
        if binding.pattern_type is PatternType.PREFIXED and key not in index:
            counts = self._prefix_length_counts.setdefault(binding.resource_type, Counter())
            counts[len(binding.resource_name)] += 1
            self._prefix_lengths[binding.resource_type] = tuple(sorted(counts))
        index.setdefault(key, {}).setdefault(binding.principal, set()).add(binding)
        self._by_type_and_principal.setdefault((binding.resource_type, binding.principal), set()).add(binding)

    def _delete(self, binding: AclBinding) -> None:
        self._bindings.discard(binding)
        key = (binding.resource_type, binding.resource_name)
        index = self._pattern_index(binding)
        entries = index[key]
        entries[binding.principal].discard(binding)
        if not entries[binding.principal]:
            del entries[binding.principal]
        if not entries:
            del index[key]
            if binding.pattern_type is PatternType.PREFIXED:
                counts = self._prefix_length_counts[binding.resource_type]
                counts[len(binding.resource_name)] -= 1
                if not counts[len(binding.resource_name)]:
                    del counts[len(binding.resource_name)]
                self._prefix_lengths[binding.resource_type] = tuple(sorted(counts))
        by_principal = self._by_type_and_principal[(binding.resource_type, binding.principal)]
        by_principal.discard(binding)
        if not by_principal:
            del self._by_type_and_principal[(binding.resource_type, binding.principal)]

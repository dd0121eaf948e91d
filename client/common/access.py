"""A node's authorization: whether a caller may perform an operation on a resource, answered from the ACLs of the
metadata image, and the audit line for each denial.

Without an authorizer (``authorizer.class.name`` empty, the default) every request is allowed, as in Kafka. With
one, the services ask :meth:`AccessControl.allows` before acting; the bindings are those of the current metadata
image, re-indexed only when the image's ACLs change (the image hands out a new mapping then, the same one
otherwise), so every broker and controller enforces what the metadata log says as soon as it has applied it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from odradek.client.common.acls import CLUSTER_RESOURCE_NAME, AclBinding, AclOperation, Authorizer, ResourceType
from odradek.client.common.caller import Caller
from odradek.client.errors import ErrorCode, OdradekError, error_for_code

__all__ = [
    "AUTHORIZER_NAMES",
    "OPEN",
    "AccessControl",
    "AuthorizerSettings",
    "denial",
    "denial_code",
    "parse_super_users",
]

audit = logging.getLogger("odradek.audit")

AUTHORIZER_NAMES = frozenset({"odradek", "org.apache.kafka.metadata.authorizer.StandardAuthorizer"})
"""Values of ``authorizer.class.name`` that enable odradek's ACL authorizer (Kafka's StandardAuthorizer's name
is accepted so that a Kafka broker's config keeps its meaning)."""


@dataclass(frozen=True, slots=True)
class AuthorizerSettings:
    super_users: frozenset[str] = frozenset()
    allow_everyone_if_no_acl_found: bool = False


def parse_super_users(value: str) -> frozenset[str]:
    """Kafka's ``super.users``: principals separated by ``;`` (``User:admin;User:CN=node-1,O=odradek``; a DN's
    commas are why the separator is not a comma)."""
    return frozenset(p.strip() for p in value.split(";") if p.strip())


class AccessControl:
    """``settings`` None: no authorizer, everything is allowed. ``bindings``: the current image's ACLs."""

    def __init__(
        self,
        settings: AuthorizerSettings | None,
        bindings: Callable[[], Mapping[bytes, AclBinding]] = dict,
    ) -> None:
        self.settings = settings
        self._bindings = bindings
        self._seen: Mapping[bytes, AclBinding] | None = None
        self._authorizer: Authorizer | None = None

    @property
    def enabled(self) -> bool:
        return self.settings is not None

    def _current(self, settings: AuthorizerSettings) -> Authorizer:
        bindings = self._bindings()
        if self._authorizer is None or bindings is not self._seen:
            self._authorizer = Authorizer(
                bindings.values(),
                super_users=settings.super_users,
                allow_everyone_if_no_acl_found=settings.allow_everyone_if_no_acl_found,
            )
            self._seen = bindings
        return self._authorizer

    def allows(
        self,
        caller: Caller,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
        *,
        api: str = "",
        audit_denial: bool = True,
    ) -> bool:
        """May ``caller`` perform ``operation`` on the resource? A denial is logged on the ``odradek.audit``
        logger unless ``audit_denial`` is false (a listing that leaves out what the caller may not see is not a
        refused request)."""
        settings = self.settings
        if settings is None:
            return True
        allowed = self._current(settings).authorize(caller.principal, caller.host, operation, resource_type, name)
        if not allowed and audit_denial:
            _log_denial(caller, operation, resource_type, name, api)
        return allowed

    def allows_cluster(
        self, caller: Caller, operation: AclOperation, *, api: str = "", audit_denial: bool = True
    ) -> bool:
        return self.allows(
            caller, operation, ResourceType.CLUSTER, CLUSTER_RESOURCE_NAME, api=api, audit_denial=audit_denial
        )

    def allows_some(self, caller: Caller, operation: AclOperation, resource_type: ResourceType) -> bool:
        """May ``caller`` perform ``operation`` on some resource of the type (KIP-679's question)?"""
        settings = self.settings
        if settings is None:
            return True
        return self._current(settings).authorize_by_resource_type(
            caller.principal, caller.host, operation, resource_type
        )

    def denied(
        self,
        caller: Caller,
        operation: AclOperation,
        resource_type: ResourceType,
        names: Iterable[str],
        *,
        api: str,
        audit_denial: bool = True,
    ) -> set[str]:
        """The names among ``names`` the caller may not perform ``operation`` on (each distinct name checked once)."""
        if self.settings is None:
            return set()
        return {
            n
            for n in set(names)
            if not self.allows(caller, operation, resource_type, n, api=api, audit_denial=audit_denial)
        }


_DENIAL_CODES = {
    ResourceType.TOPIC: ErrorCode.TOPIC_AUTHORIZATION_FAILED,
    ResourceType.GROUP: ErrorCode.GROUP_AUTHORIZATION_FAILED,
    ResourceType.CLUSTER: ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
    ResourceType.TRANSACTIONAL_ID: ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
}


def denial_code(resource_type: ResourceType) -> int:
    """Kafka's error code for a request refused on a resource of this type (TOPIC_AUTHORIZATION_FAILED, ...)."""
    return _DENIAL_CODES[resource_type]


def denial(caller: Caller, operation: AclOperation, resource_type: ResourceType, name: str) -> OdradekError:
    """The typed error of a refused request, saying who was refused what."""
    what = "the cluster" if resource_type is ResourceType.CLUSTER else f"{resource_type.display_name} {name!r}"
    return error_for_code(
        denial_code(resource_type), f"{caller.principal} is not authorized to {operation.display_name} {what}"
    )


def _log_denial(caller: Caller, operation: AclOperation, resource_type: ResourceType, name: str, api: str) -> None:
    audit.info(
        "denied %s from %s: %s on %s:%s%s",
        caller.principal,
        caller.host,
        operation.display_name,
        resource_type.display_name,
        name,
        f" ({api})" if api else "",
    )


OPEN = AccessControl(None)
"""No authorizer: what services built without one (unit tests, tools) use."""

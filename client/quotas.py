"""Client quota entities, their keys, validation and the 8-level precedence that picks a client's quota.

A quota entity names who a quota is for: a user, a client id, or both, where either may be the *default*
(every user, or every client id, without a quota of its own). Kafka stores them as ``/config/users/<user>`` and
``/config/clients/<client-id>`` paths; odradek stores them as ``ClientQuotaRecord`` entries in the metadata log
with the same meaning. For a client connected as ``(user, client_id)`` each quota key is resolved on its own, from
the first of these entities that sets it (highest precedence first)::

    1. /config/users/<user>/clients/<client-id>
    2. /config/users/<user>/clients/<default>
    3. /config/users/<user>
    4. /config/users/<default>/clients/<client-id>
    5. /config/users/<default>/clients/<default>
    6. /config/users/<default>
    7. /config/clients/<client-id>
    8. /config/clients/<default>

Which entity matched also decides who shares the quota: the clients whose *measurement key* is equal. A quota set
for ``/config/users/alice`` is shared by all of alice's clients; one from ``/config/users/<default>`` applies to
each user separately; one from ``/config/clients/<default>`` to each client id separately.

The user is the name of the client's authenticated principal (``ANONYMOUS`` for a client that did not
authenticate); the resolution takes it as input.
This module is shared by the controller (validation), the brokers (resolution) and the CLI (describe).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, NamedTuple

from odradek.client.errors import InvalidRequestError

ANONYMOUS = "ANONYMOUS"

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
QUOTA_KEYS = (PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE, REQUEST_PERCENTAGE)
_WHOLE_KEYS = frozenset((PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE))
MAX_QUOTA_VALUE = float(2**63 - 1)


class QuotaEntity(NamedTuple):
    """Who a quota is for; equal to the metadata image's ``(user, user_default, client_id, client_id_default)``
    key. A component is absent (``None`` and not default), named, or the default (``None`` and default)."""

    user: str | None = None
    user_default: bool = False
    client_id: str | None = None
    client_id_default: bool = False

    @property
    def has_user(self) -> bool:
        return self.user is not None or self.user_default

    @property
    def has_client_id(self) -> bool:
        return self.client_id is not None or self.client_id_default

    def path(self) -> str:
        """The entity as Kafka's configuration path, e.g. ``/config/users/<default>/clients/app``."""
        parts = ["/config"]
        if self.has_user:
            parts.append("users/" + ("<default>" if self.user_default else str(self.user)))
        if self.has_client_id:
            parts.append("clients/" + ("<default>" if self.client_id_default else str(self.client_id)))
        return "/".join(parts)

    def to_dict(self) -> dict[str, str | None]:
        """The entity for JSON output: each present component by name, ``None`` for its default."""
        out: dict[str, str | None] = {}
        if self.has_user:
            out["user"] = None if self.user_default else self.user
        if self.has_client_id:
            out["client_id"] = None if self.client_id_default else self.client_id
        return out


def entity(
    user: str | None = None, client_id: str | None = None, *, user_default: bool = False, client_default: bool = False
) -> QuotaEntity:
    """A validated entity: at least one component, a name or the default for each, never an empty name."""
    if user is not None and user_default:
        raise InvalidRequestError("a quota entity names a user or the default user, not both")
    if client_id is not None and client_default:
        raise InvalidRequestError("a quota entity names a client id or the default client id, not both")
    if user == "" or client_id == "":
        raise InvalidRequestError("a quota entity's user and client id must not be empty (use the default instead)")
    e = QuotaEntity(user, user_default, client_id, client_default)
    if not e.has_user and not e.has_client_id:
        raise InvalidRequestError("empty quota entity: name a user, a client id, or a default")
    return e


def precedence(user: str, client_id: str) -> tuple[QuotaEntity, ...]:
    """The 8 entities that may hold the quota of a client ``(user, client_id)``, highest precedence first."""
    return (
        QuotaEntity(user, False, client_id, False),
        QuotaEntity(user, False, None, True),
        QuotaEntity(user, False, None, False),
        QuotaEntity(None, True, client_id, False),
        QuotaEntity(None, True, None, True),
        QuotaEntity(None, True, None, False),
        QuotaEntity(None, False, client_id, False),
        QuotaEntity(None, False, None, True),
    )


class ResolvedQuota(NamedTuple):
    """One key's quota for a client: the bound, the entity it came from, and the measurement key the clients
    sharing it have in common (``(user or "", client_id or "")``)."""

    value: float
    entity: QuotaEntity
    sharing_key: tuple[str, str]


def resolve(quotas: Mapping[Any, Mapping[str, float]], user: str, client_id: str, key: str) -> ResolvedQuota | None:
    """The quota ``key`` of the client ``(user, client_id)``, or None when no entity sets it (unlimited).
    ``quotas`` maps entities (or the metadata image's equal tuples) to their keys' values."""
    for e in precedence(user, client_id):
        values = quotas.get(e)
        if values is not None and key in values:
            return ResolvedQuota(values[key], e, (user if e.has_user else "", client_id if e.has_client_id else ""))
    return None


def validate_value(key: str, value: object) -> float:
    """The value of quota ``key`` as a float, or InvalidRequestError naming what is wrong with it."""
    if key not in QUOTA_KEYS:
        raise InvalidRequestError(f"unknown quota key {key!r} (known: {', '.join(QUOTA_KEYS)})")
    if isinstance(value, bool):
        raise InvalidRequestError(f"quota {key} must be a number, not {value!r}")
    if isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            raise InvalidRequestError(f"quota {key} must be a number, not {value!r}") from None
    elif isinstance(value, int | float):
        number = float(value)
    else:
        raise InvalidRequestError(f"quota {key} must be a number, not {value!r}")
    if not math.isfinite(number) or number <= 0 or number > MAX_QUOTA_VALUE:
        raise InvalidRequestError(f"quota {key} must be a positive finite number, not {value!r}")
    if key in _WHOLE_KEYS and not number.is_integer():
        raise InvalidRequestError(f"quota {key} is a whole number of bytes per second, not {value!r}")
    return number

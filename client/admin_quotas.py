"""The admin client's client-quota requests (Kafka's Admin alterClientQuotas and describeClientQuotas, KIP-546),
and the effective quota of a client as the brokers resolve it.

Quotas are stored in the metadata log: a change goes to the active controller (any node forwards it) and reaches
every broker as the brokers replay the log. A describe is answered from the answering node's own image, so right
after a change a node may briefly show the previous values. The server validates every change (unknown keys,
non-positive or non-finite values, fractional byte rates, empty or unknown entities) and refuses it with
InvalidRequestError naming what is wrong; only a value that is not a number at all is refused here, as the wire
carries numbers.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, TypeVar

from odradek.client.errors import ErrorCode, InvalidRequestError, error_for_code, error_name
from odradek.client.quotas import QUOTA_KEYS, QuotaEntity, resolve
from odradek.proto import admin_pb2 as pb

if TYPE_CHECKING:
    from odradek.proto.admin_pb2_grpc import AdminAsyncStub

R = TypeVar("R")

USER, CLIENT_ID = "user", "client-id"


def _components(e: QuotaEntity) -> list[pb.QuotaEntityComponent]:
    out = []
    if e.has_user:
        out.append(pb.QuotaEntityComponent(entity_type=USER, name=e.user or "", is_default=e.user_default))
    if e.has_client_id:
        out.append(
            pb.QuotaEntityComponent(entity_type=CLIENT_ID, name=e.client_id or "", is_default=e.client_id_default)
        )
    return out


def _entity(components: Iterable[pb.QuotaEntityComponent]) -> QuotaEntity:
    user: str | None = None
    client_id: str | None = None
    user_default = client_default = False
    for c in components:
        if c.entity_type == USER:
            user, user_default = (None, True) if c.is_default else (c.name, False)
        elif c.entity_type == CLIENT_ID:
            client_id, client_default = (None, True) if c.is_default else (c.name, False)
    return QuotaEntity(user, user_default, client_id, client_default)


def _number(key: str, value: object) -> float:
    """``value`` as the wire's double; InvalidRequestError when it is not a number at all (the server judges the
    rest, such as negative values)."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise InvalidRequestError(f"quota {key} must be a number, not {value!r}")
    try:
        number = float(value)
    except ValueError:
        raise InvalidRequestError(f"quota {key} must be a number, not {value!r}") from None
    if isinstance(value, str) and not math.isfinite(number):
        raise InvalidRequestError(f"quota {key} must be a finite number, not {value!r}")
    return number


class QuotaAdmin:
    """The client-quota requests; ``AsyncAdmin`` inherits them. Needs ``_call`` and ``_timeout`` of its host."""

    _timeout: float

    if TYPE_CHECKING:

        async def _call(self, invoke: Callable[[AdminAsyncStub], Awaitable[R]]) -> R: ...

    async def alter_client_quotas(
        self,
        entity: QuotaEntity,
        set: Mapping[str, float | str] | None = None,
        remove: Iterable[str] = (),
        validate_only: bool = False,
    ) -> None:
        """Set and remove quota keys of one entity (``odradek.client.quotas.entity`` builds one), all or none.
        Removing a key the entity does not set is fine. A bad change raises InvalidRequestError naming it and
        nothing is stored; ``validate_only`` checks without storing."""
        ops = [pb.QuotaAlterOp(key=k, value=_number(k, v)) for k, v in (set or {}).items()]
        ops += [pb.QuotaAlterOp(key=k, remove=True) for k in remove]
        request = pb.AlterClientQuotasRequest(
            entries=[pb.QuotaAlteration(entity=_components(entity), ops=ops)], validate_only=validate_only
        )
        r = await self._call(lambda s: s.AlterClientQuotas(request, timeout=self._timeout))
        if r.error != ErrorCode.NONE:
            raise error_for_code(r.error, error_name(r.error))
        [result] = r.entries
        if result.error != ErrorCode.NONE:
            raise error_for_code(result.error, result.error_message or error_name(result.error))

    async def describe_client_quotas(
        self,
        user: str | None = None,
        client_id: str | None = None,
        user_default: bool = False,
        client_default: bool = False,
        strict: bool = False,
    ) -> list[tuple[QuotaEntity, dict[str, float]]]:
        """The stored quota entities with their values, ordered by path. A user or client id given (or its
        default) must match; a component not given matches anything, or, with ``strict``, only its absence."""
        components = []
        for entity_type, name, default in ((USER, user, user_default), (CLIENT_ID, client_id, client_default)):
            if name is not None and default:
                raise InvalidRequestError(f"describe a {entity_type} or its default, not both")
            if default:
                components.append(pb.QuotaFilterComponent(entity_type=entity_type, match_type=pb.QUOTA_MATCH_DEFAULT))
            elif name is not None:
                if not name:
                    raise InvalidRequestError(f"the {entity_type} to describe must not be empty")
                components.append(
                    pb.QuotaFilterComponent(entity_type=entity_type, match_type=pb.QUOTA_MATCH_EXACT, match=name)
                )
        request = pb.DescribeClientQuotasRequest(components=components, strict=strict)
        r = await self._call(lambda s: s.DescribeClientQuotas(request, timeout=self._timeout))
        if r.error != ErrorCode.NONE:
            raise error_for_code(r.error, r.error_message or error_name(r.error))
        return [(_entity(e.entity), {v.key: v.value for v in e.values}) for e in r.entries]

    async def effective_client_quotas(self, user: str, client_id: str) -> dict[str, tuple[float, QuotaEntity]]:
        """The quotas a client ``(user, client_id)`` gets, as the brokers resolve them (the 8-level precedence of
        ``odradek.client.quotas``): per key set anywhere, its value and the entity it comes from. A key absent is
        unlimited. Until authentication exists every client's user is ``odradek.client.quotas.ANONYMOUS``."""
        stored = dict(await self.describe_client_quotas())
        out = {}
        for key in QUOTA_KEYS:
            found = resolve(stored, user, client_id, key)
            if found is not None:
                out[key] = (found.value, found.entity)
        return out

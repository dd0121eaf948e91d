"""The ``RequestContext`` of a gRPC call, read from its servicer context: what both roles' gRPC adapters need, so
it lives below them (the broker's ``grpc_auth.grpc_request_context`` is this).

The context is read by duck typing (no grpc import): ``principal`` as the node's interceptors established it
(``User:ANONYMOUS`` where none did), ``peer()``, the client id of the call's metadata (``invocation_metadata()``)
``quotas_apply`` and ``time_remaining()``; a part missing (or no context at all, a test's in-process call) reads as
its default.
"""

from __future__ import annotations

import time
from typing import Any

from odradek.client.common.caller import ANONYMOUS
from odradek.client.common.request_context import GRPC, RequestContext
from odradek.client.connection import CLIENT_ID_KEY

__all__ = ["principal_of", "request_context_of"]


def principal_of(context: Any) -> str:
    """The principal of the call ``context`` serves: ``User:<name>`` on a SASL or mTLS listener (the interceptor has
    refused calls without one before they reach a service), ``User:ANONYMOUS`` on a listener without either."""
    principal = getattr(context, "principal", ANONYMOUS)
    return principal if isinstance(principal, str) else ANONYMOUS


def request_context_of(context: Any) -> RequestContext:
    """Who makes the gRPC call ``context`` serves, as the services take it: the principal the interceptors
    established, the peer, the client id of the call's metadata, whether quotas apply to it, and its deadline."""
    metadata = getattr(context, "invocation_metadata", None)
    client_id = next((v for k, v in (metadata() if metadata is not None else None) or () if k == CLIENT_ID_KEY), "")
    peer = getattr(context, "peer", None)
    return RequestContext(
        principal=principal_of(context),
        client_id=client_id if isinstance(client_id, str) else "",
        peer=(peer() if peer is not None else "") or "",
        listener=GRPC,
        quotas_apply=bool(getattr(context, "quotas_apply", True)),
        deadline=_deadline(context),
    )


def _deadline(context: Any) -> float | None:
    """The call's deadline on ``time.monotonic()``'s clock, from gRPC's ``time_remaining()`` (None: no deadline)."""
    time_remaining = getattr(context, "time_remaining", None)
    remaining = time_remaining() if time_remaining is not None else None
    return None if remaining is None else time.monotonic() + remaining

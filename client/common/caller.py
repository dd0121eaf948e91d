"""Who is calling: the principal and host a request is authorized as, the same on both listeners.

A connection's principal is established by its listener (SASL on a SASL listener, the client certificate on a TLS
listener that requires one, ``User:ANONYMOUS`` otherwise) and bound to the task serving each request with
:func:`bind_principal`: the gRPC listener's interceptors bind it per call, the Kafka listener's dispatcher per
request. The services then read it with :func:`caller_of` from the servicer context they already take, so one
check serves both listeners.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass
from typing import Protocol

__all__ = ["ANONYMOUS", "Caller", "Peer", "bind_principal", "caller_of", "current_principal", "peer_host"]

ANONYMOUS = "User:ANONYMOUS"
UNKNOWN_HOST = "*"

_principal: ContextVar[str] = ContextVar("odradek_principal", default=ANONYMOUS)


@dataclass(frozen=True, slots=True)
class Caller:
    """A request's identity for authorization: ``User:<name>`` and the client's IP address in canonical text."""

    principal: str
    host: str


class Peer(Protocol):
    """The part of a servicer context (gRPC's, or the Kafka listener's stand-in) that names the client."""

    def peer(self) -> str: ...


def bind_principal(principal: str) -> None:
    """Make ``principal`` the current request's (the binding lasts for the task serving it)."""
    _principal.set(principal)


def current_principal() -> str:
    return _principal.get()


def peer_host(peer: str) -> str:
    """The host of a gRPC peer string: ``ipv4:10.0.0.1:5000`` -> ``10.0.0.1``, ``ipv6:[::1]:5000`` -> ``::1``;
    a peer without an IP address (a Unix socket) gives ``*``, which only host-``*`` bindings match."""
    kind, _, address = peer.partition(":")
    if kind == "ipv4":
        return address.rpartition(":")[0] or UNKNOWN_HOST
    if kind == "ipv6" and address.startswith("["):
        return address[1 : address.find("]")] or UNKNOWN_HOST
    return UNKNOWN_HOST


def caller_of(context: Peer) -> Caller:
    """The caller of the request ``context`` serves."""
    return Caller(_principal.get(), peer_host(context.peer()))

"""Who is calling: the principal and host a request is authorized as, the same on both listeners.

A connection's principal is established by its listener (SASL on a SASL listener, the client certificate on a TLS
listener that requires one, ``User:ANONYMOUS`` otherwise). The services take it in their ``RequestContext``
(``request_context.py``); a gRPC interceptor reads it from the call context the node's interceptors hand inward
(:func:`caller_of`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

__all__ = ["ANONYMOUS", "Caller", "Peer", "caller_of", "peer_host"]

ANONYMOUS = "User:ANONYMOUS"
UNKNOWN_HOST = "*"


@dataclass(frozen=True, slots=True)
class Caller:
    """A request's identity for authorization: ``User:<name>`` and the client's IP address in canonical text."""

    principal: str
    host: str


class Peer(Protocol):
    """The part of a gRPC servicer context that names the client. Its ``principal`` attribute, where the node's
    interceptors established one, names whom it authenticated."""

    def peer(self) -> str: ...


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
    """The caller of the request ``context`` serves: its principal (``User:ANONYMOUS`` when the listener established
    none), from the address it called from."""
    principal = getattr(context, "principal", ANONYMOUS)
    return Caller(principal if isinstance(principal, str) else ANONYMOUS, peer_host(context.peer()))

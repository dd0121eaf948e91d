"""The HTTP API's TLS (``https://`` in ``http.listeners``): the node's certificate and key (its ssl.* files, reloaded
when they change, as on its other listeners), client certificates asked for as ``http.ssl.client.auth`` (else
``ssl.client.auth``) says, and the principal a verified client certificate stands for (``ssl.principal.mapping.rules``,
as on the Kafka listener).

A request one broker forwards to another carries the caller's principal and address (``PRINCIPAL_HEADER``,
``CLIENT_HOST_HEADER``), over TLS presenting the forwarding node's certificate; the broker forwarded to believes them
only from a forwarder whose verified certificate's principal may ClusterAction on the cluster (a node: Kafka trusts
only such a principal's forwarded requests). That is how a caller known by its certificate alone is forwarded, since
it has no credentials to pass on.
"""

from __future__ import annotations

import hashlib
import ssl
from collections.abc import Callable
from dataclasses import dataclass

from odradek.broker.config import ConfigError, NodeConfig
from odradek.broker.security.tls import ServerTls
from odradek.client.tls import TlsFileError, TlsFiles

PRINCIPAL_HEADER = "x-odradek-principal"  # on a forwarded request: the caller's principal
CLIENT_HOST_HEADER = "x-odradek-client-host"  # and its address


@dataclass(frozen=True)
class HttpSecurity:
    """``tls``: the server context for each new connection (None: plain HTTP); ``forward_tls``: the client context
    requests are forwarded to other brokers' https listeners with; ``certificates``: a verified client certificate
    (DER) to its principal (None: certificates are not asked for); raises ValueError when no mapping rule fits."""

    tls: Callable[[], ssl.SSLContext] | None = None
    forward_tls: Callable[[], ssl.SSLContext] | None = None
    certificates: Callable[[bytes], str] | None = None

    @property
    def scheme(self) -> str:
        return "http" if self.tls is None else "https"


PLAIN = HttpSecurity()


def security_of(config: NodeConfig, files: TlsFiles, certificate_principal: Callable[[bytes], str]) -> HttpSecurity:
    """The listener's TLS from the node's ``config`` and TLS ``files``; a missing or bad file stops the node at start,
    naming it."""
    if not config.http_tls:
        return PLAIN
    client_auth = config.http_client_auth
    server = ServerTls(files, client_auth)
    try:
        server.current()
    except TlsFileError as e:
        raise ConfigError(f"TLS for http.listeners: {e}") from None
    return HttpSecurity(
        tls=server.current,
        forward_tls=files.client_context,
        certificates=certificate_principal if client_auth != "none" else None,
    )


def fingerprint(certificate: bytes) -> str:
    """A client certificate's SHA-256 (a console session opened with one is bound to it); "" for none."""
    return hashlib.sha256(certificate).hexdigest() if certificate else ""

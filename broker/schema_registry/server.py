"""The registry's HTTP/1.1 listener (``schema.registry.listeners``), on the brokers' shared HTTP listener
(broker/http_server.py), so this module only maps requests: a request goes through routes.py to the service, and
its answer or refusal goes back as Confluent's JSON. A write this broker is not the writer for is forwarded to the
writer's listener and the writer's answer relayed, as Confluent's followers do, once this broker's own copy holds
the write (so that a client reads its writes from the broker it wrote through).

Who calls (``Security``): on ``https://`` the listener serves TLS with the node's certificate, asking for client
certificates as configured; with ``basic`` authentication a request needs HTTP Basic credentials of a SCRAM user
(checked as the HTTP API checks them, broker/rest/auth.py) or a client certificate the handshake verified, and is
refused with 401 (40101) otherwise; without, the caller is its certificate's principal or User:ANONYMOUS. Basic
credentials, when given, name the caller before a certificate does. The service then checks the caller's ACLs.

A forwarded write carries the caller's Basic credentials and its principal and address (``PRINCIPAL_HEADER``,
``CLIENT_HOST_HEADER``), over TLS to an https writer, verifying the writer's certificate against the cluster's CA
and presenting this node's. The writer takes the principal from those headers only from a forwarder its handshake
verified whose certificate's principal may CLUSTER_ACTION on the cluster (a node, as Kafka trusts only such a
principal's forwarded requests; without an authorizer any verified certificate, since principals then grant
nothing); otherwise it authenticates the request itself.
"""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
from collections.abc import Callable
from dataclasses import dataclass, replace
from urllib.parse import urlsplit

import h11

from odradek.broker import http_server, http_types
from odradek.broker.http_login import BasicLogin
from odradek.broker.http_server import HttpListener
from odradek.broker.http_types import HttpError, HttpReply, HttpRequest
from odradek.broker.rest.errors import unauthenticated
from odradek.broker.schema_registry import errors
from odradek.broker.schema_registry.requests import WRITES
from odradek.broker.schema_registry.routes import route
from odradek.broker.schema_registry.service import Answer, Forward, RegistryService
from odradek.client.common.acls import AclOperation
from odradek.client.common.caller import ANONYMOUS, UNKNOWN_HOST, Caller

logger = logging.getLogger(__name__)

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
FORWARDED_HEADER = b"x-odradek-forwarded"
PRINCIPAL_HEADER = b"x-odradek-principal"  # on a forwarded write: the caller's principal
CLIENT_HOST_HEADER = b"x-odradek-client-host"  # and its address
# On the writer's answer to a write: the offset of _schemas its copy had applied when it answered. The broker that
# forwarded the write waits for its own copy to reach it before answering, so a client reads its writes there.
OFFSET_HEADER = b"x-odradek-registry-offset"
MAX_BODY_BYTES = 16 * 1024 * 1024  # a schema request body; larger ones are answered 413 and the connection closed
FORWARD_TIMEOUT_S = 30.0
READY_WAIT_S = 10.0

Reply = HttpReply


@dataclass(frozen=True)
class Security:
    """How the listener knows its callers. ``tls``: the server context for each connection (None: plain HTTP);
    ``forward_tls``: the client context a write is forwarded with to an https writer; ``login``: HTTP Basic
    (None: authentication none); ``certificates``: a verified client certificate (DER) to its principal (None:
    certificates are not asked for); ``ready``: set once the broker has caught up with the metadata log (its SCRAM
    credentials and ACLs are the cluster's then)."""

    tls: Callable[[], ssl.SSLContext] | None = None
    forward_tls: Callable[[], ssl.SSLContext] | None = None
    login: BasicLogin | None = None
    certificates: Callable[[bytes], str] | None = None
    ready: asyncio.Event | None = None


OPEN = Security()


def error_reply(e: HttpError) -> Reply:
    return http_types.error_reply(e, CONTENT_TYPE)


def answer_reply(a: Answer) -> Reply:
    if a.raw and isinstance(a.body, str):
        return Reply(a.status, CONTENT_TYPE, a.body.encode())
    return Reply(a.status, CONTENT_TYPE, json.dumps(a.body).encode())


def offset_of(reply: Reply) -> int | None:
    """The _schemas offset a writer's answer names (OFFSET_HEADER), None without one."""
    found = reply.header(OFFSET_HEADER.decode())
    return int(found) if found is not None and found.isdigit() else None


class RegistryListener(HttpListener):
    """Serves ``service`` on host:port. ``on_request(kind, status)`` counts each answered request (metrics)."""

    def __init__(
        self,
        host: str,
        port: int,
        service: RegistryService,
        on_request: Callable[[str, int], None] = lambda _kind, _status: None,
        security: Security = OPEN,
    ) -> None:
        super().__init__(
            host,
            port,
            self._reply,
            setting="schema.registry.listeners",
            what="schema registry",
            content_type=CONTENT_TYPE,
            tls=security.tls,
        )
        self.service = service
        self.on_request = on_request
        self.security = security

    def max_body_bytes(self) -> int:
        return MAX_BODY_BYTES

    async def _reply(self, request: HttpRequest) -> Reply:
        method, target, body = request.method, request.target, request.body
        kind = "unrouted"
        try:
            caller = await self._caller(request)
            routed = route(method, target, body)
            kind = type(routed).__name__
            try:
                reply = answer_reply(await self.service.handle(routed, caller))
                if isinstance(routed, WRITES):
                    reply = replace(reply, headers=((OFFSET_HEADER.decode(), str(self.service.store.applied)),))
            except Forward as f:
                if request.header(FORWARDED_HEADER) is not None:
                    raise errors.forwarding_failed(
                        "the broker this request was forwarded to is not the writer"
                    ) from None
                reply = await forward(f.url, request, caller, self.security.forward_tls)
                offset = offset_of(reply)
                if reply.status == 200 and offset is not None:
                    await self.service.store.caught_up(offset)
        except HttpError as e:
            reply = error_reply(e)
        except Exception as e:
            logger.exception("schema registry request %s %s failed", method, target)
            reply = error_reply(errors.store_error(str(e) or type(e).__name__))
        self.on_request(kind, reply.status)
        return reply

    async def _caller(self, request: HttpRequest) -> Caller:
        """Who sent ``request`` (see the module doc); 401 when it is not known."""
        security = self.security
        if security.ready is not None and not security.ready.is_set():
            try:
                async with asyncio.timeout(READY_WAIT_S):
                    await security.ready.wait()
            except TimeoutError:
                raise errors.operation_timeout("the broker has not caught up with the metadata log yet") from None
        host = request.peer_host or UNKNOWN_HOST
        certified = self._certificate_principal(request)
        if certified is not None:
            forwarded = request.header(PRINCIPAL_HEADER)
            if forwarded is not None and self._trusted_forwarder(Caller(certified, host)):
                return Caller(forwarded, request.header(CLIENT_HOST_HEADER) or UNKNOWN_HOST)
        if security.login is None:
            return Caller(certified or ANONYMOUS, host)
        header = request.header(b"authorization")
        if header is None and certified is not None:
            return Caller(certified, host)
        return Caller(await security.login.principal(header), host)

    def _certificate_principal(self, request: HttpRequest) -> str | None:
        certificates = self.security.certificates
        if not request.peer_certificate or certificates is None:
            return None
        try:
            return certificates(request.peer_certificate)
        except ValueError as e:  # no ssl.principal.mapping.rules rule maps its subject
            raise unauthenticated(f"the client certificate gives no principal: {e}") from None

    def _trusted_forwarder(self, forwarder: Caller) -> bool:
        access = self.service.access
        if not access.enabled:
            return True
        return access.allows_cluster(forwarder, AclOperation.CLUSTER_ACTION, audit_denial=False)


async def forward(
    url: str, request: HttpRequest, caller: Caller, tls: Callable[[], ssl.SSLContext] | None = None
) -> Reply:
    """Send the request to the writer's listener, for ``caller``, and return its answer (50003 when it cannot be
    reached). An https writer is reached over TLS with ``tls()``."""
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    headers = [
        ("content-type", CONTENT_TYPE),
        (FORWARDED_HEADER.decode(), "1"),
        (PRINCIPAL_HEADER.decode(), caller.principal),
        (CLIENT_HOST_HEADER.decode(), caller.host),
    ]
    credentials = request.header(b"authorization")
    if credentials is not None:
        headers.append(("authorization", credentials))
    context = tls() if tls is not None and parts.scheme == "https" else None
    if parts.scheme == "https" and context is None:
        return error_reply(errors.forwarding_failed(f"{url}: this broker has no TLS settings to reach it"))
    try:
        return await http_server.exchange(
            host, port, request.method, request.target, request.body, headers, FORWARD_TIMEOUT_S, context
        )
    except (OSError, TimeoutError, h11.ProtocolError) as e:
        return error_reply(errors.forwarding_failed(f"{url}: {e or type(e).__name__}"))

"""A broker's HTTP API, assembled: the listener on ``http.listeners`` (the brokers' shared HTTP listener), who each
request is from, the router, the service, and forwarding to the broker a request belongs to. The node builds it
when ``http.listeners`` is set and serves it with its other listeners.

Each request, in order: wait (bounded) until the broker has caught up with the metadata log (its ACLs and SCRAM
credentials are the cluster's then); establish the caller (``http.authentication``: HTTP Basic checked against the
SCRAM credentials, a console session's cookie, or User:ANONYMOUS; on https a verified client certificate's
principal where no credentials are sent, and a forwarding node's word for the caller, security.py); refuse a
state-changing request another site made (session.py); route it; check the path's cluster id; serve it, within the
caller's byte-rate quotas (quotas.py). Every refusal is Confluent's error shape; nothing is written for a request
refused before the service runs it, nor for one the service refuses. Every request that may change something is
written to the ``odradek.audit`` log with its caller and outcome.

The web console (console.py, docs/console.md) is served on the same listener under ``/ui/``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import secrets
import time
from collections import Counter
from collections.abc import Iterator

import h11
from prometheus_client.core import CounterMetricFamily

from odradek.broker import http_server
from odradek.broker.config import Endpoint
from odradek.broker.http_login import BasicLogin
from odradek.broker.http_server import HttpListener
from odradek.broker.http_types import HttpReply, HttpRequest, error_reply, json_reply
from odradek.broker.rest import auth, console, errors, openapi, session
from odradek.broker.rest import requests as rq
from odradek.broker.rest.console_service import ConsoleService
from odradek.broker.rest.errors import RestError
from odradek.broker.rest.resources import Links
from odradek.broker.rest.routes import route
from odradek.broker.rest.security import CLIENT_HOST_HEADER, PLAIN, PRINCIPAL_HEADER, HttpSecurity
from odradek.broker.rest.service import Answer, Call, RestService, Services
from odradek.client.common.acls import AclOperation
from odradek.client.common.caller import ANONYMOUS, UNKNOWN_HOST, Caller
from odradek.client.common.request_context import HTTP, RequestContext
from odradek.client.common.scram import Mechanism

logger = logging.getLogger(__name__)
audit = logging.getLogger("odradek.audit")

LISTENER_NAME = "HTTP"  # the HTTP API listener's name in broker registrations
CLIENT_ID = "odradek-http"  # the client id the services see (quotas, group members' hosts)
FORWARDED_HEADER = "x-odradek-forwarded"  # on a request one broker forwards to another
SCOPE_HEADER = "x-odradek-scope"  # "local": the group listing of the broker asked alone (a fan-out's part)
FORWARDED_HOST_HEADER = "x-forwarded-host"  # where the client reached the API, for the answer's URLs
FORWARD_TIMEOUT_S = 60.0  # a forwarded produce waits for acks=all, a read for its timeout_ms
READY_WAIT_S = 10.0
_PASSED_ON = (b"authorization", b"content-type")
_READS = frozenset({"searchOdradekRecords"})  # POST routes that change nothing (not audited)

CredentialLookup = auth.CredentialLookup


class HttpApi:
    """``credentials(user, mechanism)``: the user's SCRAM credential; ``ready``: set once the broker has caught up
    with the metadata log."""

    def __init__(
        self,
        services: Services,
        endpoint: Endpoint,
        authentication: str,
        credentials: CredentialLookup,
        mechanisms: tuple[Mechanism, ...],
        failed_authentication_delay_ms: int,
        ready: asyncio.Event,
        security: HttpSecurity = PLAIN,
    ) -> None:
        self.services = services
        self.security = security
        self.service = RestService(services)
        self.console_service = ConsoleService(self.service)
        self.basic = authentication == "basic"
        self._login = BasicLogin(credentials, mechanisms, failed_authentication_delay_ms)
        self._ready = ready
        self.sessions = session.Sessions(lambda: int(time.monotonic() * 1000), lambda: secrets.token_urlsafe(32))
        transport = console.Transport(self._certified, security.tls is not None)
        self.console = console.Console(self._login if self.basic else None, self.sessions, self._wait_ready, transport)
        self._document = json_reply(200, openapi.document(basic_auth=self.basic))
        self.requests: Counter[tuple[str, int]] = Counter()
        self.listener = HttpListener(
            endpoint.host, endpoint.port, self.handle, setting="http.listeners", what="HTTP API", tls=security.tls
        )

    async def serve(self) -> None:
        """Bind the listener (with the node's other listeners: a port in use stops the node)."""
        await self.listener.start()

    async def stop(self) -> None:
        await self.listener.stop()
        await self.service.close()
        await self.console_service.close()

    def metrics(self) -> Iterator[CounterMetricFamily]:
        requests = CounterMetricFamily(
            "odradek_http_requests", "HTTP API requests answered", labels=["operation", "status"]
        )
        for (operation, status), count in sorted(self.requests.items()):
            requests.add_metric([operation, str(status)], count)
        yield requests

    async def handle(self, http: HttpRequest) -> HttpReply:
        if console.is_console(http.target):
            return await self._console(http)
        operation = "unrouted"
        found = None
        if http.header(b"authorization") is None:
            found = self.sessions.find(http.header(b"cookie"), http.peer_certificate)
        principal = found.principal if found is not None else ANONYMOUS  # as audited if refused before the end
        try:
            await self._wait_ready()
            principal, http = await self._authenticate(http, found)
            routed = route(http.method, http.target, http.body)
            operation = routed.route.operation
            if routed.cluster_id is not None and routed.cluster_id != self.services.cluster_id:
                raise errors.resource_not_found(f"Cluster {routed.cluster_id}")
            if isinstance(routed.request, rq.OpenApi):
                reply = self._document
            else:
                serve = (
                    self.console_service.serve
                    if isinstance(routed.request, rq.CONSOLE_REQUESTS)
                    else self.service.serve
                )
                answer = await serve(routed.request, self._call(http, principal))
                reply = answer if isinstance(answer, HttpReply) else _reply(answer)
        except RestError as e:
            reply = error_reply(e)
        except Exception as e:
            logger.exception("HTTP API request %s %s failed", http.method, http.target)
            reply = error_reply(errors.internal(str(e) or type(e).__name__))
        self.requests[(operation, reply.status)] += 1
        if http.method not in session.SAFE_METHODS and operation not in _READS:
            self._audit(http, principal, operation, reply)
        return reply

    async def _console(self, http: HttpRequest) -> HttpReply:
        try:
            reply = await self.console.handle(http)
        except RestError as e:
            reply = console.refused(e)
        except Exception as e:
            logger.exception("console request %s %s failed", http.method, http.target)
            reply = console.refused(errors.internal(str(e) or type(e).__name__))
        self.requests[("console", reply.status)] += 1
        return reply

    def _audit(self, http: HttpRequest, principal: str, operation: str, reply: HttpReply) -> None:
        """One line per request that may change something: who, from where, what, and how it ended (a refusal's
        message too)."""
        path = http.target.split("?", 1)[0]
        if operation == "unrouted":  # refused before routing (cross-site, no credentials): what it asked for
            with contextlib.suppress(RestError):
                operation = route(http.method, http.target, http.body).route.operation
        forwarded = http.header(FORWARDED_HEADER.encode())
        outcome = str(reply.status)
        if reply.status >= 400:
            outcome += " " + reply.body.decode(errors="replace")[:300]
        audit.info(
            "http %s from %s: %s %s %s -> %s%s",
            principal,
            http.peer_host,
            operation,
            http.method,
            path,
            outcome,
            f" (forwarded by broker {forwarded})" if forwarded else "",
        )

    async def _wait_ready(self) -> None:
        if self._ready.is_set():
            return
        try:
            async with asyncio.timeout(READY_WAIT_S):
                await self._ready.wait()
        except TimeoutError:
            node = self.services.node_id
            raise errors.unavailable(
                f"broker {node} is starting: it has not caught up with the metadata log yet"
            ) from None

    async def _authenticate(self, http: HttpRequest, found: session.Session | None) -> tuple[str, HttpRequest]:
        """The caller's principal, and the request as it is served and forwarded. A state-changing request from
        another site is refused first (session.py). A request without credentials but with a console session's
        cookie (``found``, the session it names) is the session's, and must carry its CSRF token to change
        anything; it goes on with the session's credentials in place of the cookie. A request forwarded by a node
        (its verified certificate's principal may ClusterAction) is the caller's it names, from the address it
        names. Otherwise HTTP Basic credentials, when sent and with basic, name the caller; else a verified client
        certificate's principal; else, without authentication, User:ANONYMOUS (credentials sent anyway are not
        looked at); with basic, a request without valid credentials is refused (401), after
        connection.failed.authentication.delay.ms for wrong ones, and nothing tells whether the user exists."""
        origin, fetch_site = http.header(b"origin"), http.header(b"sec-fetch-site")
        session.check_origin(http.method, origin, fetch_site, console.request_host(http))
        if found is not None:
            session.check_csrf(http.method, found, http.header(session.CSRF_HEADER.encode()))
            headers = tuple((k, v) for k, v in http.headers if k != b"cookie")
            if found.authorization is not None:
                headers += ((b"authorization", found.authorization.encode()),)
            return found.principal, dataclasses.replace(http, headers=headers)
        certified = self._certified(http)
        if certified is not None:
            forwarded = http.header(PRINCIPAL_HEADER.encode())
            if forwarded is not None and self._trusted_forwarder(Caller(certified, http.peer_host or UNKNOWN_HOST)):
                client = http.header(CLIENT_HOST_HEADER.encode()) or ""
                return forwarded, dataclasses.replace(http, peer_host=client, peer_port=0)
        authorization = http.header(b"authorization")
        if self.basic and authorization is not None:
            return await self._login.principal(authorization), http
        if certified is not None:
            return certified, http
        if not self.basic:
            return ANONYMOUS, http
        return await self._login.principal(authorization), http

    def _certified(self, http: HttpRequest) -> str | None:
        """The principal of the client certificate the handshake verified (None without one); 401 when no
        ssl.principal.mapping.rules rule maps its subject."""
        certificates = self.security.certificates
        if not http.peer_certificate or certificates is None:
            return None
        try:
            return certificates(http.peer_certificate)
        except ValueError as e:
            raise errors.unauthenticated(f"the client certificate gives no principal: {e}") from None

    def _trusted_forwarder(self, forwarder: Caller) -> bool:
        """Whether a forwarder may speak for its caller: a node (ClusterAction on the cluster); without an
        authorizer any verified certificate, since principals then grant nothing."""
        access = self.services.access
        if not access.enabled:
            return True
        return access.allows_cluster(forwarder, AclOperation.CLUSTER_ACTION, audit_denial=False)

    def _call(self, http: HttpRequest, principal: str) -> Call:
        host = http.header(FORWARDED_HOST_HEADER.encode()) or http.header(b"host")
        scheme = self.security.scheme
        base = f"{scheme}://{host}" if host else f"{scheme}://{self.listener.host}:{self.listener.port}"
        return Call(
            http,
            Links(base, self.services.cluster_id),
            RequestContext(principal, CLIENT_ID, _peer(http.peer_host, http.peer_port), HTTP),
            forwarded=http.header(FORWARDED_HEADER.encode()) is not None,
            local_only=http.header(SCOPE_HEADER.encode()) == "local",
            forward=lambda broker, extra: self._forward(http, principal, broker, extra),
            fan_out=lambda: self._fan_out(http, principal),
        )

    def _address(self, broker: int) -> tuple[str, int] | None:
        registered = self.services.image().brokers.get(broker)
        return None if registered is None or registered.fenced else registered.endpoint(LISTENER_NAME)

    async def _forward(
        self, http: HttpRequest, principal: str, broker: int, extra: tuple[tuple[str, str], ...]
    ) -> HttpReply:
        """The answer of ``broker``'s HTTP API to this request (with the caller's credentials: it authenticates and
        authorizes the caller itself; over https, with the caller's principal and address too, which it believes
        from this node's certificate)."""
        address = self._address(broker)
        if address is None:
            raise errors.unavailable(f"broker {broker} serves this request but has no HTTP API listener registered")
        headers = [(k.decode(), v.decode("latin-1")) for k, v in http.headers if k in _PASSED_ON]
        headers += [(FORWARDED_HEADER, str(self.services.node_id)), *extra]
        forward_tls = self.security.forward_tls
        if forward_tls is not None:
            headers += [(PRINCIPAL_HEADER, principal), (CLIENT_HOST_HEADER, http.peer_host or UNKNOWN_HOST)]
        client_host = http.header(FORWARDED_HOST_HEADER.encode()) or http.header(b"host")
        if client_host:
            headers.append((FORWARDED_HOST_HEADER, client_host))
        try:
            return await http_server.exchange(
                address[0],
                address[1],
                http.method,
                http.target,
                http.body,
                headers,
                FORWARD_TIMEOUT_S,
                forward_tls() if forward_tls is not None else None,
            )
        except (OSError, TimeoutError, h11.ProtocolError) as e:
            raise errors.retriable(f"forwarding to broker {broker} failed: {e or type(e).__name__}") from None

    async def _fan_out(self, http: HttpRequest, principal: str) -> list[tuple[int, HttpReply]]:
        """This request asked of every other live broker, for its own part alone."""
        others = [b for b in sorted(self.services.image().brokers) if b != self.services.node_id]
        live = [b for b in others if self._address(b) is not None]
        scope = ((SCOPE_HEADER, "local"),)
        replies = await asyncio.gather(*(self._forward(http, principal, b, scope) for b in live))
        return list(zip(live, replies, strict=True))


def _peer(host: str, port: int) -> str:
    """The client's address as the services key quota mutes and group members' hosts on (gRPC's peer names:
    ``ipv4:10.0.0.1:5000``, ``ipv6:[::1]:5000``), as on the other listeners."""
    return f"ipv6:[{host}]:{port}" if ":" in host else f"ipv4:{host}:{port}"


def _reply(answer: Answer) -> HttpReply:
    if answer.body is None:
        return HttpReply(answer.status, http_server.JSON, b"")
    return json_reply(answer.status, answer.body)

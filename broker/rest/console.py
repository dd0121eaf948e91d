"""The web console's own paths on the HTTP API's listener (docs/console.md): its single-page app under ``/ui/`` (plain
HTML, CSS and JavaScript shipped in the package, served from memory) and ``/ui/session``, where a browser signs in
(a session cookie, session.py) and out. Everything else the console does goes through the HTTP API's routes.

Sign-in takes a SCRAM user's name and password as HTTP Basic does (``http.authentication=basic``); without
authentication it opens an anonymous session (User:ANONYMOUS), which the console needs only for its CSRF token. On
https, a browser presenting a client certificate the handshake verified signs in as the certificate's principal
with an empty body, without a password; that session is bound to the certificate (session.py).
The session keeps the Basic credentials it signed in with, in this broker's memory alone, because a request that
belongs to another broker is forwarded to it with the caller's credentials (api.py), as a Basic caller's is.
Sign-ins, refusals and sign-outs are written to the ``odradek.audit`` log.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from importlib import resources
from urllib.parse import urlsplit

from odradek.broker.http_login import BasicLogin
from odradek.broker.http_types import JSON, HttpReply, HttpRequest, json_reply
from odradek.broker.rest import bodies, errors, session
from odradek.broker.rest.session import Sessions

logger = logging.getLogger(__name__)
audit = logging.getLogger("odradek.audit")

PREFIX = "/ui"
SESSION_PATH = PREFIX + "/session"
ASSET_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".svg": "image/svg+xml",
}
# Every console answer: only this origin's scripts, styles and connections, never framed, types as sent.
SECURITY_HEADERS = (
    (
        "content-security-policy",
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
        "base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
    ),
    ("x-content-type-options", "nosniff"),
    ("x-frame-options", "DENY"),
    ("referrer-policy", "same-origin"),
)
_NO_STORE = (("cache-control", "no-store"),)


def is_console(target: str) -> bool:
    path = urlsplit(target).path
    return path == PREFIX or path.startswith(PREFIX + "/")


def load_assets() -> dict[str, tuple[bytes, str]]:
    """The console's files (package data of ``odradek.broker.rest``, folder ``ui``) by name, with their types; none
    where the install lacks them (the HTTP API is served all the same, and ``/ui/`` says why it is not)."""
    folder = resources.files("odradek.broker.rest").joinpath("ui")
    out = {}
    try:
        for entry in folder.iterdir():
            kind = next((t for suffix, t in ASSET_TYPES.items() if entry.name.endswith(suffix)), None)
            if kind is not None:
                out[entry.name] = (entry.read_bytes(), kind)
    except FileNotFoundError:
        pass
    if "index.html" not in out:
        logger.warning("the web console's files are not installed (odradek/broker/rest/ui/): /ui/ is not served")
        return {}
    return out


@dataclass(frozen=True)
class Transport:
    """What the console needs of the listener's TLS: ``certified(request)`` is the principal of the client
    certificate the connection presented (None without one); ``secure``: https, so cookies are ``Secure``."""

    certified: Callable[[HttpRequest], str | None] = lambda _request: None
    secure: bool = False


class Console:
    """``login`` None: the listener does not authenticate (every session is User:ANONYMOUS, or a certificate's
    principal); ``ready`` waits until the broker has the cluster's credentials."""

    def __init__(
        self,
        login: BasicLogin | None,
        sessions: Sessions,
        ready: Callable[[], Awaitable[None]],
        transport: Transport = Transport(),
    ) -> None:
        self._login = login
        self._sessions = sessions
        self._ready = ready
        self._transport = transport
        self._assets = load_assets()

    async def handle(self, http: HttpRequest) -> HttpReply:
        path = urlsplit(http.target).path
        if path == SESSION_PATH:
            return await self._session(http)
        if not self._assets:
            raise errors.unavailable("the web console's files are not installed with this broker (broker/rest/ui/)")
        name = "index.html" if path in (PREFIX, PREFIX + "/") else path[len(PREFIX) + 1 :]
        asset = self._assets.get(name)
        if asset is None:
            raise errors.not_found(path)
        if http.method != "GET":
            raise errors.method_not_allowed(http.method, path)
        body, kind = asset
        return HttpReply(200, kind, body, (*SECURITY_HEADERS, ("cache-control", "no-cache")))

    async def _session(self, http: HttpRequest) -> HttpReply:
        mode = "basic" if self._login is not None else "none"
        found = self._sessions.find(http.header(b"cookie"), http.peer_certificate)
        secure = self._transport.secure
        if http.method == "GET":
            if found is None:
                answer: dict[str, object] = {"signed_in": False, "authentication": mode}
                certified = self._transport.certified(http)
                if certified is not None:  # the console signs in with it, without a password
                    answer["certificate_principal"] = certified
                return _answer(200, answer)
            return _answer(200, _signed_in(found, mode))
        session.check_origin(http.method, http.header(b"origin"), http.header(b"sec-fetch-site"), request_host(http))
        if http.method == "DELETE":
            if found is None:
                return HttpReply(204, JSON, b"", (*SECURITY_HEADERS, *_NO_STORE, session.clear_cookie(secure)))
            session.check_csrf(http.method, found, http.header(session.CSRF_HEADER.encode()))
            self._sessions.close(found.token)
            audit.info("console sign-out %s from %s", found.principal, http.peer_host)
            return HttpReply(204, JSON, b"", (*SECURITY_HEADERS, *_NO_STORE, session.clear_cookie(secure)))
        if http.method != "POST":
            raise errors.method_not_allowed(http.method, SESSION_PATH)
        if (http.header(b"content-type") or "").split(";")[0].strip().lower() != JSON:
            # A form of another site can post only form and text types: a sign-in must be JSON.
            raise errors.bad_request('a sign-in is a JSON body: {"user": ..., "password": ...}')
        await self._ready()
        opened = await self._open(http)
        audit.info("console sign-in %s from %s", opened.principal, http.peer_host)
        return _answer(200, _signed_in(opened, mode), (session.set_cookie(opened.token, secure),))

    async def _open(self, http: HttpRequest) -> session.Session:
        obj = bodies.json_object(http.body)
        certified = self._transport.certified(http)
        if not obj and certified is not None:
            return self._sessions.open(certified, None, lambda: True, http.peer_certificate)
        if self._login is None:
            if obj:
                raise errors.bad_request("this listener does not authenticate: sign in with an empty object {}")
            return self._sessions.open("User:ANONYMOUS", None, lambda: True)
        user, password = obj.get("user"), obj.get("password")
        if set(obj) - {"user", "password"} or not isinstance(user, str) or not isinstance(password, str):
            raise errors.bad_request('a sign-in takes {"user": <name>, "password": <password>}')
        try:
            login = await self._login.login(user, password)
        except errors.RestError:
            audit.info("console sign-in refused for user %r from %s", user, http.peer_host)
            raise
        authorization = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
        checker = self._login
        return self._sessions.open(login.principal, authorization, lambda: checker.still_valid(login))


def request_host(http: HttpRequest) -> str | None:
    """Where the browser reached the listener (through a proxy that says so, or directly)."""
    return http.header(b"x-forwarded-host") or http.header(b"host")


def _signed_in(found: session.Session, mode: str) -> dict[str, object]:
    return {"signed_in": True, "authentication": mode, "principal": found.principal, "csrf_token": found.csrf}


def _answer(status: int, body: object, headers: tuple[tuple[str, str], ...] = ()) -> HttpReply:
    return json_reply(status, body, headers=(*SECURITY_HEADERS, *_NO_STORE, *headers))


def refused(e: errors.RestError) -> HttpReply:
    """A console path's refusal, with the console's headers."""
    return _answer(e.status, e.body(), e.headers)

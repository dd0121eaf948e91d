"""The web console's sign-in sessions and the checks that keep other sites from acting through a signed-in browser,
without I/O (the clock and the token source are passed in).

A session is a random token in a cookie (``HttpOnly``: scripts cannot read it; ``SameSite=Strict``: the browser
sends it only with requests this site starts) naming who signed in. Every state-changing request (any method but
GET and HEAD) is checked, whatever authenticates it:

- its ``Origin``, when sent, must be this listener's (the ``Host`` the request names): browsers send it with every
  cross-site POST, PUT, PATCH and DELETE, so a page elsewhere cannot post to the API, cookie or cached Basic
  credentials alike; ``Sec-Fetch-Site: cross-site`` is refused too;
- with a session cookie, it must carry the session's CSRF token in ``X-Odradek-CSRF``: a cross-site form cannot
  set a header, and a cross-site script cannot read the token (it is only answered to same-origin requests, and
  the listener allows no cross-origin reads).

A session ends after ``IDLE_MS`` without a request, after ``MAX_AGE_MS`` in any case, at sign-out, and when the
user's SCRAM credential changes (its ``valid`` check). One opened with a client certificate (on https) is found only
on connections presenting that certificate, so its cookie alone is worth nothing elsewhere.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

from odradek.broker.rest import errors
from odradek.broker.rest.security import fingerprint

COOKIE = "odradek_session"
CSRF_HEADER = "x-odradek-csrf"
IDLE_MS = 30 * 60 * 1000
MAX_AGE_MS = 12 * 60 * 60 * 1000
MAX_SESSIONS = 10_000  # past this, the least recently used session ends
SAFE_METHODS = frozenset({"GET", "HEAD"})
CROSS_SITE = 40303  # odradek's: a state-changing request from another site, or without its session's CSRF token


@dataclass(slots=True)
class Session:
    """``authorization``: the Basic header the session's requests are forwarded to other brokers with (None when
    the listener does not authenticate, or for a certificate's session); ``valid``: whether the credential signed in
    with is still the user's; ``certificate``: the fingerprint of the client certificate it was opened with ("")."""

    token: str
    csrf: str
    principal: str
    authorization: str | None
    valid: Callable[[], bool]
    created_ms: int
    used_ms: int
    certificate: str = ""


class Sessions:
    """The sessions of one broker's listener (a browser signs in on the broker it loaded the console from)."""

    def __init__(self, now_ms: Callable[[], int], token: Callable[[], str], limit: int = MAX_SESSIONS) -> None:
        self._now = now_ms
        self._token = token
        self._limit = limit
        self._sessions: dict[str, Session] = {}

    def __len__(self) -> int:
        return len(self._sessions)

    def open(
        self, principal: str, authorization: str | None, valid: Callable[[], bool], certificate: bytes = b""
    ) -> Session:
        now = self._now()
        self._expire(now)
        while len(self._sessions) >= self._limit:
            oldest = min(self._sessions.values(), key=lambda s: s.used_ms)
            del self._sessions[oldest.token]
        session = Session(
            self._token(), self._token(), principal, authorization, valid, now, now, fingerprint(certificate)
        )
        self._sessions[session.token] = session
        return session

    def find(self, cookie_header: str | None, certificate: bytes = b"") -> Session | None:
        """The live session the request's cookie names (its use noted), or None; a certificate's session only with
        that ``certificate`` (the connection's)."""
        token = cookie(cookie_header, COOKIE)
        if token is None:
            return None
        session = self._sessions.get(token)
        if session is None or (session.certificate and session.certificate != fingerprint(certificate)):
            return None
        now = self._now()
        if _expired(session, now) or not session.valid():
            del self._sessions[token]
            return None
        session.used_ms = now
        return session

    def close(self, token: str) -> None:
        self._sessions.pop(token, None)

    def _expire(self, now: int) -> None:
        for token in [t for t, s in self._sessions.items() if _expired(s, now)]:
            del self._sessions[token]


def _expired(session: Session, now: int) -> bool:
    return now - session.used_ms >= IDLE_MS or now - session.created_ms >= MAX_AGE_MS


def cookie(header: str | None, name: str) -> str | None:
    """The value of cookie ``name`` in a ``Cookie`` header."""
    for part in (header or "").split(";"):
        key, equals, value = part.strip().partition("=")
        if equals and key == name and value:
            return value
    return None


def set_cookie(token: str, secure: bool = False) -> tuple[str, str]:
    """The header that keeps a session in the browser: for this listener's every path, not readable by scripts,
    sent only with requests this site makes, and on an https listener only over https (``Secure``)."""
    return "set-cookie", f"{COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict{'; Secure' if secure else ''}"


def clear_cookie(secure: bool = False) -> tuple[str, str]:
    return "set-cookie", f"{COOKIE}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0{'; Secure' if secure else ''}"


def check_origin(method: str, origin: str | None, fetch_site: str | None, host: str | None) -> None:
    """Refuse (403) a state-changing request another site's page made (see the module's doc)."""
    if method in SAFE_METHODS:
        return
    if fetch_site is not None and fetch_site.strip().lower() == "cross-site":
        raise errors.RestError(403, CROSS_SITE, "Refused: a cross-site request may not change anything")
    if origin is None:
        return
    found = urlsplit(origin.strip())
    if found.scheme not in ("http", "https") or not found.netloc or found.netloc.lower() != (host or "").lower():
        raise errors.RestError(
            403, CROSS_SITE, f"Refused: the request's origin {origin!r} is not this listener's ({host or 'unknown'})"
        )


def check_csrf(method: str, session: Session, token: str | None) -> None:
    """Refuse (403) a state-changing request of a session without the session's CSRF token."""
    if method in SAFE_METHODS:
        return
    if token is None or not hmac.compare_digest(token.encode(), session.csrf.encode()):
        raise errors.RestError(
            403, CROSS_SITE, f"Refused: a console request that changes something must carry the session's {CSRF_HEADER}"
        )

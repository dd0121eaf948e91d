"""The console's sessions and its defences against other sites, without a cluster (broker/rest/session.py and
console.py): sessions expire, are bounded and end with the credential they were opened with; a state-changing
request from another origin, or a session's request without its CSRF token, is refused (403, 40303); the sign-in
takes only JSON, checks the password as HTTP Basic does, and sets an HttpOnly, SameSite=Strict cookie; the
console's files are served with a strict content security policy."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from odradek.broker.http_login import BasicLogin
from odradek.broker.http_types import HttpRequest
from odradek.broker.rest import console, session
from odradek.broker.rest.errors import RestError
from odradek.client.common.scram import Mechanism, ScramCredential, make_credential


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


def tokens() -> Callable[[], str]:
    count = iter(range(1_000_000))
    return lambda: f"token-{next(count)}"


def test_a_session_is_found_by_its_cookie_until_it_expires_or_its_credential_changes() -> None:
    clock = Clock()
    sessions = session.Sessions(clock, tokens())
    valid = [True]
    opened = sessions.open("User:alice", "Basic YWxpY2U6cHc=", lambda: valid[0])
    assert opened.token != opened.csrf
    assert sessions.find(f"theme=dark; {session.COOKIE}={opened.token}") is opened
    assert sessions.find(None) is None and sessions.find(f"{session.COOKIE}=forged") is None
    clock.now += session.IDLE_MS - 1
    assert sessions.find(f"{session.COOKIE}={opened.token}") is opened  # used: idle time starts again
    clock.now += session.IDLE_MS - 1
    assert sessions.find(f"{session.COOKIE}={opened.token}") is opened
    clock.now += session.IDLE_MS
    assert sessions.find(f"{session.COOKIE}={opened.token}") is None and len(sessions) == 0
    second = sessions.open("User:alice", None, lambda: valid[0])
    valid[0] = False
    assert sessions.find(f"{session.COOKIE}={second.token}") is None
    third = sessions.open("User:bob", None, lambda: True)
    for _ in range(session.MAX_AGE_MS // (session.IDLE_MS // 2)):
        clock.now += session.IDLE_MS // 2
        if sessions.find(f"{session.COOKIE}={third.token}") is None:
            break
    assert clock.now - third.created_ms >= session.MAX_AGE_MS  # ended by its age, however busy
    sessions.close("unknown")


def test_sessions_are_bounded_and_the_least_recently_used_goes_first() -> None:
    clock = Clock()
    sessions = session.Sessions(clock, tokens(), limit=2)
    first = sessions.open("User:a", None, lambda: True)
    clock.now += 1
    second = sessions.open("User:b", None, lambda: True)
    clock.now += 1
    sessions.find(f"{session.COOKIE}={first.token}")
    sessions.open("User:c", None, lambda: True)
    assert sessions.find(f"{session.COOKIE}={second.token}") is None
    assert sessions.find(f"{session.COOKIE}={first.token}") is first and len(sessions) == 2


def test_cross_site_state_changes_are_refused() -> None:
    host = "broker-1:8082"
    for method in ("GET", "HEAD"):
        session.check_origin(method, "http://evil.example", "cross-site", host)
    session.check_origin("POST", None, None, host)  # a client that is not a browser
    session.check_origin("POST", "http://broker-1:8082", "same-origin", host)
    session.check_origin("DELETE", "http://BROKER-1:8082", None, host)
    for origin, site in (
        ("http://evil.example", None),
        ("http://broker-1:8083", None),
        ("https://broker-1", None),
        ("null", None),
        (None, "cross-site"),
    ):
        with pytest.raises(RestError) as refused:
            session.check_origin("POST", origin, site, host)
        assert (refused.value.status, refused.value.code) == (403, session.CROSS_SITE)


def test_a_sessions_changes_need_its_csrf_token() -> None:
    opened = session.Sessions(Clock(), tokens()).open("User:a", None, lambda: True)
    session.check_csrf("GET", opened, None)
    session.check_csrf("PATCH", opened, opened.csrf)
    for token in (None, "", opened.token, opened.csrf + "x", "é"):
        with pytest.raises(RestError) as refused:
            session.check_csrf("POST", opened, token)
        assert refused.value.code == session.CROSS_SITE


def test_the_cookie_cannot_be_read_by_scripts_nor_sent_by_other_sites() -> None:
    name, value = session.set_cookie("abc")
    assert name == "set-cookie" and value == "odradek_session=abc; Path=/; HttpOnly; SameSite=Strict"
    assert session.clear_cookie()[1].endswith("Max-Age=0")
    assert session.cookie("a=1; odradek_session=xyz; b=2", session.COOKIE) == "xyz"
    assert session.cookie("odradek_session=", session.COOKIE) is None


# ---- the sign-in and the files, through console.Console ----

ALICE = make_credential(Mechanism.SCRAM_SHA_256, "alice-secret")


def request(method: str, target: str, body: bytes = b"", **headers: str) -> HttpRequest:
    return HttpRequest(
        method,
        target,
        tuple((k.replace("_", "-").encode(), v.encode()) for k, v in headers.items()),
        body,
        "10.0.0.9",
        5000,
    )


def make_console(credentials: dict[str, ScramCredential] | None) -> tuple[console.Console, session.Sessions]:
    sessions = session.Sessions(Clock(), tokens())

    async def ready() -> None:
        return None

    login = (
        None
        if credentials is None
        else BasicLogin(lambda user, mechanism: credentials.get(user), [Mechanism.SCRAM_SHA_256], 0)
    )
    return console.Console(login, sessions, ready), sessions


async def test_signing_in_sets_the_cookie_and_answers_the_csrf_token(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("INFO", logger="odradek.audit")
    served, sessions = make_console({"alice": ALICE})
    signed_out = await served.handle(request("GET", "/ui/session"))
    assert json.loads(signed_out.body) == {"signed_in": False, "authentication": "basic"}
    good = json.dumps({"user": "alice", "password": "alice-secret"}).encode()
    reply = await served.handle(
        request("POST", "/ui/session", good, content_type="application/json", origin="http://b:1", host="b:1")
    )
    answer = json.loads(reply.body)
    assert reply.status == 200 and answer["principal"] == "User:alice" and answer["signed_in"]
    cookie = reply.header("set-cookie")
    assert cookie is not None and "HttpOnly" in cookie and "SameSite=Strict" in cookie
    token = session.cookie(cookie.split(";")[0], session.COOKIE)
    found = sessions.find(f"{session.COOKIE}={token}")
    assert found is not None and found.csrf == answer["csrf_token"]
    assert found.authorization == "Basic YWxpY2U6YWxpY2Utc2VjcmV0"  # what forwarded requests carry
    again = await served.handle(request("GET", "/ui/session", cookie=f"{session.COOKIE}={token}"))
    assert json.loads(again.body)["csrf_token"] == answer["csrf_token"]
    assert reply.header("cache-control") == "no-store"
    # Signing out needs the token too.
    with pytest.raises(RestError):
        await served.handle(request("DELETE", "/ui/session", cookie=f"{session.COOKIE}={token}"))
    out = await served.handle(
        request("DELETE", "/ui/session", cookie=f"{session.COOKIE}={token}", x_odradek_csrf=answer["csrf_token"])
    )
    assert out.status == 204 and sessions.find(f"{session.COOKIE}={token}") is None
    assert [r.getMessage() for r in caplog.records] == [
        "console sign-in User:alice from 10.0.0.9",
        "console sign-out User:alice from 10.0.0.9",
    ]


async def test_a_sign_in_is_refused_without_json_from_another_site_or_with_a_wrong_password() -> None:
    served, sessions = make_console({"alice": ALICE})
    good = json.dumps({"user": "alice", "password": "alice-secret"}).encode()
    cases = [
        (request("POST", "/ui/session", good, content_type="text/plain"), 400),
        (request("POST", "/ui/session", good, content_type="application/json", origin="http://evil"), 403),
        (request("POST", "/ui/session", b'{"user": "alice", "password": "no"}', content_type="application/json"), 401),
        (request("POST", "/ui/session", b'{"user": "bob", "password": "no"}', content_type="application/json"), 401),
        (request("POST", "/ui/session", b'{"user": "alice"}', content_type="application/json"), 400),
        (request("POST", "/ui/session", b"[]", content_type="application/json"), 400),
        (request("PUT", "/ui/session"), 405),
    ]
    for sent, status in cases:
        with pytest.raises(RestError) as refused:
            await served.handle(sent)
        assert refused.value.status == status, sent
    assert len(sessions) == 0


async def test_without_authentication_the_session_is_anonymous() -> None:
    served, sessions = make_console(None)
    reply = await served.handle(request("POST", "/ui/session", b"{}", content_type="application/json"))
    answer = json.loads(reply.body)
    assert (answer["principal"], answer["authentication"]) == ("User:ANONYMOUS", "none")
    found = sessions.find(reply.header("set-cookie"))
    assert found is not None and found.authorization is None
    with pytest.raises(RestError):
        await served.handle(request("POST", "/ui/session", b'{"user": "a"}', content_type="application/json"))


async def test_the_files_are_served_with_a_strict_policy() -> None:
    served, _ = make_console(None)
    for path in ("/ui", "/ui/", "/ui/index.html"):
        page = await served.handle(request("GET", path))
        assert page.status == 200 and page.content_type.startswith("text/html") and b"/ui/console.js" in page.body
    script = await served.handle(request("GET", "/ui/console.js"))
    assert script.content_type.startswith("text/javascript")
    policy = script.header("content-security-policy")
    assert policy is not None and "script-src 'self'" in policy and "frame-ancestors 'none'" in policy
    assert script.header("x-content-type-options") == "nosniff"
    for path, status in (("/ui/nothing.js", 404), ("/ui/../api.py", 404)):
        with pytest.raises(RestError) as refused:
            await served.handle(request("GET", path))
        assert refused.value.status == status
    with pytest.raises(RestError) as refused:
        await served.handle(request("POST", "/ui/console.js"))
    assert refused.value.status == 405
    assert console.is_console("/ui/x?y=1") and console.is_console("/ui") and not console.is_console("/uix")
    assert not console.is_console("/v3/clusters")


async def test_without_its_files_the_console_says_so_and_the_rest_goes_on(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """An install that lacks the package data (broker/rest/ui/) still serves the API: /ui/ answers 503, saying why."""
    monkeypatch.setattr(console.resources, "files", lambda package: tmp_path)
    served, _ = make_console(None)
    with pytest.raises(RestError) as refused:
        await served.handle(request("GET", "/ui/"))
    assert refused.value.status == 503 and "not installed" in refused.value.message
    signed_out = await served.handle(request("GET", "/ui/session"))
    assert signed_out.status == 200

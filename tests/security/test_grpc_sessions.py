"""The gRPC listener's session table: SCRAM over two calls, tokens bound to the connection's peer and lifetime."""

from __future__ import annotations

import scramp

from odradek.broker.security.grpc_sessions import MAX_PENDING_EXCHANGES, GrpcAuthAnswer, GrpcSessions
from odradek.client.common.scram import Mechanism, ScramCredential, make_credential
from odradek.client.errors import ErrorCode

PEER = "ipv4:127.0.0.1:50001"
OTHER = "ipv4:127.0.0.1:50002"
STORE = {("alice", m): make_credential(m, "pw") for m in Mechanism}


def lookup(user: str, mechanism: Mechanism) -> ScramCredential | None:
    return STORE.get((user, mechanism))


def login(
    s: GrpcSessions, password: str = "pw", *, peer: str = PEER, final_peer: str | None = None, now: int = 0
) -> GrpcAuthAnswer:
    c = scramp.ScramClient(["SCRAM-SHA-256"], "alice", password)
    first = s.authenticate(peer, "SCRAM-SHA-256", c.get_client_first().encode(), b"", now)
    assert first.error == ErrorCode.NONE and first.exchange
    c.set_server_first(first.auth_bytes.decode())
    return s.authenticate(final_peer or peer, "", c.get_client_final().encode(), first.exchange, now)


def test_a_login_issues_a_token_accepted_on_its_connection_until_it_expires() -> None:
    s = GrpcSessions(tuple(Mechanism), lookup, lifetime_ms=1000)
    answer = login(s)
    assert answer.error == ErrorCode.NONE and answer.session_token and answer.session_lifetime_ms == 1000
    assert s.principal(PEER, answer.session_token, 999) == "User:alice"
    assert s.principal(OTHER, answer.session_token, 0) is None  # replayed from another connection
    assert s.principal(PEER, "forged", 0) is None
    assert s.principal(PEER, answer.session_token, 1000) is None  # expired
    login(s, now=5000)  # a later call sweeps the expired session out
    assert s.session_count == 1


def test_a_wrong_password_gets_no_token() -> None:
    s = GrpcSessions(tuple(Mechanism), lookup)
    answer = login(s, "wrong")
    assert answer.error == ErrorCode.SASL_AUTHENTICATION_FAILED and not answer.session_token
    assert "invalid credentials" in answer.error_message and s.session_count == 0


def test_an_exchange_is_finished_only_from_the_connection_that_started_it_and_only_once() -> None:
    s = GrpcSessions(tuple(Mechanism), lookup)
    assert login(s, final_peer=OTHER).error == ErrorCode.SASL_AUTHENTICATION_FAILED
    c = scramp.ScramClient(["SCRAM-SHA-256"], "alice", "pw")
    first = s.authenticate(PEER, "SCRAM-SHA-256", c.get_client_first().encode(), b"", 0)
    c.set_server_first(first.auth_bytes.decode())
    final = c.get_client_final().encode()
    assert s.authenticate(PEER, "", final, first.exchange, 0).error == ErrorCode.NONE
    assert s.authenticate(PEER, "", final, first.exchange, 0).error == ErrorCode.SASL_AUTHENTICATION_FAILED


def test_an_exchange_left_unfinished_expires_and_their_number_is_bounded() -> None:
    s = GrpcSessions(tuple(Mechanism), lookup, exchange_timeout_ms=100)
    c = scramp.ScramClient(["SCRAM-SHA-256"], "alice", "pw")
    first = s.authenticate(PEER, "SCRAM-SHA-256", c.get_client_first().encode(), b"", 0)
    c.set_server_first(first.auth_bytes.decode())
    late = s.authenticate(PEER, "", c.get_client_final().encode(), first.exchange, 100)
    assert late.error == ErrorCode.SASL_AUTHENTICATION_FAILED and "expired" in late.error_message
    for _ in range(MAX_PENDING_EXCHANGES + 10):
        s.authenticate(PEER, "SCRAM-SHA-256", b"n,,n=alice,r=abcdefgh", b"", 0)
    assert len(s._pending) == MAX_PENDING_EXCHANGES


def test_a_mechanism_not_enabled_is_refused_with_the_enabled_list() -> None:
    s = GrpcSessions((Mechanism.SCRAM_SHA_512,), lookup)
    answer = s.authenticate(PEER, "SCRAM-SHA-256", b"n,,n=alice,r=abc", b"", 0)
    assert answer.error == ErrorCode.UNSUPPORTED_SASL_MECHANISM and answer.mechanisms == ("SCRAM-SHA-512",)

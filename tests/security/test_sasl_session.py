"""A Kafka connection's SASL state, driven with scramp's client: the order of requests Kafka allows, the answers to
SaslHandshake and SaslAuthenticate, and every refusal of the SCRAM exchange."""

from __future__ import annotations

import pytest
import scramp

from odradek.broker.security.sasl_session import (
    ANONYMOUS,
    API_VERSIONS_KEY,
    SASL_AUTHENTICATE_KEY,
    SASL_HANDSHAKE_KEY,
    IllegalSaslState,
    SaslSession,
)
from odradek.client.common.scram import MIN_ITERATIONS, Mechanism, ScramCredential, make_credential
from odradek.client.errors import ErrorCode

METADATA_KEY = 3
STORE = {(user, m): make_credential(m, pw) for user, pw in (("alice", "s3cret"), ("bob", "hunter2")) for m in Mechanism}


def lookup(user: str, mechanism: Mechanism) -> ScramCredential | None:
    return STORE.get((user, mechanism))


def session(*mechanisms: Mechanism) -> SaslSession:
    return SaslSession(mechanisms or tuple(Mechanism), lookup)


def client(mechanism: Mechanism, user: str, password: str) -> scramp.ScramClient:
    return scramp.ScramClient([mechanism.value], user, password)


def login(s: SaslSession, mechanism: Mechanism, user: str, password: str) -> tuple[int, str | None]:
    """Handshake then both SCRAM rounds; the error code and message of the first failing step (or NONE)."""
    assert s.handshake(mechanism.value).error_code == ErrorCode.NONE
    c = client(mechanism, user, password)
    first = s.authenticate(c.get_client_first().encode())
    if first.error_code:
        return first.error_code, first.error_message
    c.set_server_first(first.auth_bytes.decode())
    final = s.authenticate(c.get_client_final().encode())
    if final.error_code:
        return final.error_code, final.error_message
    c.set_server_final(final.auth_bytes.decode())  # the server proved it knows the credential too
    return final.error_code, None


@pytest.mark.parametrize("mechanism", list(Mechanism))
def test_a_correct_password_authenticates_the_connection_as_the_user(mechanism: Mechanism) -> None:
    s = session()
    assert s.principal == ANONYMOUS and not s.authenticated
    assert login(s, mechanism, "alice", "s3cret") == (ErrorCode.NONE, None)
    assert s.authenticated and s.principal == "User:alice" and s.close_reason is None
    s.check(METADATA_KEY, "Metadata")  # anything goes now


def test_before_authentication_only_api_versions_and_the_sasl_apis_pass_in_order() -> None:
    s = session()
    s.check(API_VERSIONS_KEY, "ApiVersions")
    s.check(SASL_HANDSHAKE_KEY, "SaslHandshake")
    with pytest.raises(IllegalSaslState, match="ILLEGAL_SASL_STATE: unexpected Metadata request during the SASL"):
        s.check(METADATA_KEY, "Metadata")
    with pytest.raises(IllegalSaslState):  # SaslAuthenticate before the handshake chose a mechanism
        s.check(SASL_AUTHENTICATE_KEY, "SaslAuthenticate")
    assert s.handshake("SCRAM-SHA-256").error_code == ErrorCode.NONE
    s.check(SASL_AUTHENTICATE_KEY, "SaslAuthenticate")
    for key, name in ((API_VERSIONS_KEY, "ApiVersions"), (SASL_HANDSHAKE_KEY, "SaslHandshake"), (3, "Metadata")):
        with pytest.raises(IllegalSaslState, match="during the SASL authentication"):
            s.check(key, name)
    with pytest.raises(IllegalSaslState):  # a second handshake mid-exchange closes the connection
        s.handshake("SCRAM-SHA-256")


def test_a_mechanism_not_enabled_is_answered_with_the_enabled_list_then_the_connection_closes() -> None:
    s = session(Mechanism.SCRAM_SHA_512)
    for name in ("PLAIN", "GSSAPI", "SCRAM-SHA-256"):
        fresh = session(Mechanism.SCRAM_SHA_512)
        answer = fresh.handshake(name)
        assert answer.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
        assert answer.mechanisms == ("SCRAM-SHA-512",)
        assert fresh.close_reason is not None and name in fresh.close_reason
        with pytest.raises(IllegalSaslState, match="after a failed SASL authentication"):
            fresh.check(API_VERSIONS_KEY, "ApiVersions")
    assert s.handshake("SCRAM-SHA-512") == type(answer)(ErrorCode.NONE, ("SCRAM-SHA-512",))


def test_a_wrong_password_and_an_unknown_user_fail_alike_and_close() -> None:
    answers = []
    for user, password in (("alice", "wrong"), ("mallory", "s3cret")):
        s = session()
        code, message = login(s, Mechanism.SCRAM_SHA_256, user, password)
        assert code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert not s.authenticated and s.principal == ANONYMOUS and s.close_reason is not None
        with pytest.raises(IllegalSaslState):
            s.check(METADATA_KEY, "Metadata")
        answers.append(message)
    assert answers[0] == answers[1]  # no user enumeration
    assert answers[0] is not None and "invalid credentials with SASL mechanism SCRAM-SHA-256" in answers[0]


def test_a_credential_of_the_other_mechanism_does_not_log_in() -> None:
    only_512 = SaslSession(
        tuple(Mechanism), lambda u, m: make_credential(Mechanism.SCRAM_SHA_512, "pw") if u == "carol" else None
    )
    code, _ = login(only_512, Mechanism.SCRAM_SHA_256, "carol", "pw")
    assert code == ErrorCode.SASL_AUTHENTICATION_FAILED


def test_a_client_final_with_another_nonce_is_refused() -> None:
    s = session()
    s.handshake("SCRAM-SHA-256")
    c = client(Mechanism.SCRAM_SHA_256, "alice", "s3cret")
    first = s.authenticate(c.get_client_first().encode())
    c.set_server_first(first.auth_bytes.decode())
    final = c.get_client_final()
    nonce = next(a for a in final.split(",") if a.startswith("r="))
    forged = final.replace(nonce, nonce[:-4] + "AAAA")
    answer = s.authenticate(forged.encode())
    assert answer.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert answer.error_message is not None and "invalid nonce" in answer.error_message
    assert s.close_reason is not None


@pytest.mark.parametrize(
    ("authzid", "expected"),
    [("a=alice", "authorization ids are not supported"), ("a=admin", "different from username")],
)
def test_an_authorization_id_is_refused(authzid: str, expected: str) -> None:
    s = session()
    s.handshake("SCRAM-SHA-256")
    c = client(Mechanism.SCRAM_SHA_256, "alice", "s3cret")
    first = c.get_client_first()
    assert first.startswith("n,,")
    answer = s.authenticate(f"n,{authzid},{first[3:]}".encode())
    assert answer.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert answer.error_message is not None and expected in answer.error_message
    assert not s.authenticated


def test_a_credential_below_the_minimum_iterations_cannot_exist_so_cannot_log_in() -> None:
    with pytest.raises(ValueError, match="between 4096"):
        make_credential(Mechanism.SCRAM_SHA_256, "pw", iterations=MIN_ITERATIONS - 1)
    weak = make_credential(Mechanism.SCRAM_SHA_256, "pw")
    with pytest.raises(ValueError, match="between 4096"):
        ScramCredential(weak.mechanism, weak.salt, 1024, weak.stored_key, weak.server_key)
    # and what the server sends always carries at least the minimum
    s = session()
    s.handshake("SCRAM-SHA-256")
    first = s.authenticate(client(Mechanism.SCRAM_SHA_256, "alice", "s3cret").get_client_first().encode())
    iterations = int(next(a for a in first.auth_bytes.decode().split(",") if a.startswith("i="))[2:])
    assert iterations >= MIN_ITERATIONS


def test_after_success_a_second_handshake_or_authenticate_is_answered_illegal_state() -> None:
    s = session()
    login(s, Mechanism.SCRAM_SHA_512, "bob", "hunter2")
    assert s.handshake("SCRAM-SHA-512").error_code == ErrorCode.ILLEGAL_SASL_STATE
    again = s.authenticate(b"n,,n=bob,r=abc")
    assert again.error_code == ErrorCode.ILLEGAL_SASL_STATE
    assert s.authenticated and s.principal == "User:bob" and s.close_reason is None


def test_malformed_scram_messages_fail_the_exchange() -> None:
    s = session()
    s.handshake("SCRAM-SHA-256")
    answer = s.authenticate(b"\xff\xfe")
    assert answer.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED and s.close_reason is not None


def test_a_session_needs_a_mechanism() -> None:
    with pytest.raises(ValueError, match="at least one"):
        SaslSession((), lookup)

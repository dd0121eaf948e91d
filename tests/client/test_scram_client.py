"""odradek's own SCRAM client (client/scram_client.py): RFC 7677's test vector byte for byte; logins against
odradek's server for both mechanisms, salts of any length, passwords SASLprep would change and user names that need
escaping, with credentials hashed as odradek's admin hashes them; scramp's server and client as differential checks
where scramp allows (salts of 12 bytes and more); and the server messages a client must refuse."""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

import grpc
import pytest
import scramp

from odradek.client import authentication
from odradek.client.admin_security import salted_password
from odradek.client.authentication import SESSION_KEY, ChannelAuthenticator, SaslCredentials
from odradek.client.common import scram as server
from odradek.client.common.scram import Mechanism, ScramAuthenticationError, ScramServerExchange
from odradek.client.errors import AuthenticationFailedError, ErrorCode
from odradek.client.scram_client import MAX_ITERATIONS, MIN_ITERATIONS, ScramClientExchange
from odradek.proto import security_pb2

MECHANISMS = list(Mechanism)
SALT_LENGTHS = [1, 4, 12, 32]
SERVER_NONCE = "fixed-server-nonce"


def credential(mechanism: Mechanism, password: str, salt_length: int, iterations: int = 4096) -> server.ScramCredential:
    """The credential `odradek user create` stores: odradek's admin salts the password (raw UTF-8), the broker keeps
    the keys."""
    salt = bytes(range(7, 7 + salt_length))
    salted = salted_password(mechanism.value, password, salt, iterations)
    return server.credential_from_salted_password(mechanism, salt, iterations, salted)


def login(exchange: ScramServerExchange, user: str, password: str) -> ScramClientExchange:
    """odradek's client through a whole exchange with ``exchange``; raises unless both sides prove themselves."""
    client = ScramClientExchange(exchange.mechanism.value, user, password)
    client.verify(exchange.final(client.final(exchange.first(client.first()))))
    return client


def refusal(call: Callable[[], object]) -> str:
    with pytest.raises(AuthenticationFailedError) as caught:
        call()
    return str(caught.value)


# -- RFC 7677 section 3 -----------------------------------------------------------------------------------------------


def test_rfc_7677s_sha_256_example_byte_for_byte() -> None:
    client = ScramClientExchange("SCRAM-SHA-256", "user", "pencil", nonce="rOprNGfwEbeRWgbNEkqO")
    assert client.first() == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    server_first = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    assert client.final(server_first) == (
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
    )
    client.verify(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
    assert client.complete


# -- against odradek's server ---------------------------------------------------------------------------------------

USERS = [
    ("alice", "s3cret"),
    ("bob", "\ufb01ve"),  # SASLprep (NFKC) would make it "five"
    ("carol", "a\u00a0b"),  # SASLprep would map the no-break space to a space
    ("dave", "pässwörd ☃"),
    ("o=u,x", "pw"),  # sent as n=o=3Du=2Cx
    ("=2C,=3D", "pw"),  # escapes in the name itself are escaped again
]


@pytest.mark.parametrize(("user", "password"), USERS)
@pytest.mark.parametrize("salt_length", SALT_LENGTHS)
@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_logs_in_to_odradeks_server(mechanism: Mechanism, salt_length: int, user: str, password: str) -> None:
    seen: list[str] = []

    def lookup(name: str) -> server.ScramCredential | None:
        seen.append(name)
        return credential(mechanism, password, salt_length) if name == user else None

    exchange = ScramServerExchange(mechanism, lookup)
    assert login(exchange, user, password).complete
    assert exchange.username == user and seen == [user]


def test_user_names_are_escaped_in_the_client_first_message() -> None:
    assert ScramClientExchange("SCRAM-SHA-256", "o=u,x", "pw", nonce="abc").first() == b"n,,n=o=3Du=2Cx,r=abc"


@pytest.mark.parametrize(("stored", "sent"), [("\ufb01ve", "five"), ("a\u00a0b", "a b"), ("five", "\ufb01ve")])
def test_passwords_are_not_normalised(stored: str, sent: str) -> None:
    """The password SASLprep would turn the stored one into is a different password: the server refuses its proof."""
    mechanism = Mechanism.SCRAM_SHA_256
    exchange = ScramServerExchange(mechanism, {"alice": credential(mechanism, stored, 4)}.get)
    with pytest.raises(ScramAuthenticationError, match="invalid credentials"):
        login(exchange, "alice", sent)


@pytest.mark.parametrize("iterations", [MIN_ITERATIONS, MAX_ITERATIONS])
def test_the_iteration_bounds_are_the_brokers(iterations: int) -> None:
    assert (MIN_ITERATIONS, MAX_ITERATIONS) == (server.MIN_ITERATIONS, server.MAX_ITERATIONS)
    mechanism = Mechanism.SCRAM_SHA_512
    exchange = ScramServerExchange(mechanism, {"alice": credential(mechanism, "pw", 4, iterations)}.get)
    assert login(exchange, "alice", "pw").complete


# -- against scramp -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("salt_length", [12, 32])
@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_logs_in_to_scramps_server(mechanism: Mechanism, salt_length: int) -> None:
    stored = credential(mechanism, "s3cret", salt_length)
    theirs = scramp.ScramMechanism(mechanism.value).make_server(
        lambda _user: (stored.salt, stored.stored_key, stored.server_key, stored.iterations)
    )
    client = ScramClientExchange(mechanism.value, "alice", "s3cret")
    theirs.set_client_first(client.first().decode())
    client_final = client.final(theirs.get_server_first().encode())
    theirs.set_client_final(client_final.decode())  # raises unless the proof holds
    client.verify(theirs.get_server_final().encode())
    assert client.complete


@pytest.mark.parametrize("salt_length", [12, 32])
@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_sends_what_scramps_client_sends(mechanism: Mechanism, salt_length: int) -> None:
    """Given the same nonce and the same server-first message, both clients send the same bytes."""
    exchange = ScramServerExchange(
        mechanism, {"alice": credential(mechanism, "s3cret", salt_length)}.get, server_nonce=SERVER_NONCE
    )
    ours = ScramClientExchange(mechanism.value, "alice", "s3cret", nonce="client-nonce")
    theirs = scramp.ScramClient([mechanism.value], "alice", "s3cret", c_nonce="client-nonce")
    client_first = ours.first()
    assert client_first == theirs.get_client_first().encode()
    server_first = exchange.first(client_first)
    theirs.set_server_first(server_first.decode())
    assert ours.final(server_first) == theirs.get_client_final().encode()


# -- refused server messages ----------------------------------------------------------------------------------------

NONCE = "client-nonce"
SALT = base64.b64encode(b"salt").decode()


def after_first(nonce: str = NONCE) -> ScramClientExchange:
    client = ScramClientExchange("SCRAM-SHA-256", "alice", "pw", nonce=nonce)
    client.first()
    return client


def awaiting_final(mechanism: Mechanism) -> tuple[ScramClientExchange, bytes]:
    """A client awaiting the server-final message, and the honest server-final of odradek's server."""
    exchange = ScramServerExchange(mechanism, {"alice": credential(mechanism, "pw", 4)}.get)
    client = ScramClientExchange(mechanism.value, "alice", "pw")
    server_final = exchange.final(client.final(exchange.first(client.first())))
    return client, server_final


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_a_wrong_server_signature_is_refused(mechanism: Mechanism) -> None:
    client, server_final = awaiting_final(mechanism)
    signature = bytearray(base64.b64decode(server_final[2:]))
    signature[-1] ^= 1
    message = refusal(lambda: client.verify(b"v=" + base64.b64encode(bytes(signature))))
    assert "invalid SCRAM server signature" in message
    assert not client.complete
    assert "unexpected" in refusal(lambda: client.verify(server_final))  # over: the honest message comes too late


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_a_truncated_server_signature_is_refused(mechanism: Mechanism) -> None:
    client, _ = awaiting_final(mechanism)
    assert "invalid SCRAM server signature" in refusal(lambda: client.verify(b"v=AAAA"))


@pytest.mark.parametrize("nonce", ["other-nonce-server", "client-nonc", "xclient-nonce"])
def test_a_server_nonce_not_extending_ours_is_refused(nonce: str) -> None:
    client = after_first()
    message = refusal(lambda: client.final(f"r={nonce},s={SALT},i=4096".encode()))
    assert "does not start with the client's nonce" in message


@pytest.mark.parametrize("iterations", [0, 1, MIN_ITERATIONS - 1])
def test_too_few_iterations_are_refused(iterations: int) -> None:
    client = after_first()
    message = refusal(lambda: client.final(f"r={NONCE}srv,s={SALT},i={iterations}".encode()))
    assert message == f"the broker asked for {iterations} SCRAM iterations, fewer than the minimum 4096"


def test_too_many_iterations_are_refused_before_hashing() -> None:
    client = after_first()
    message = refusal(lambda: client.final(f"r={NONCE}srv,s={SALT},i=10000000000".encode()))
    assert message == "the broker asked for 10000000000 SCRAM iterations, more than the maximum 16384"


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_a_server_error_is_refused_with_its_text(mechanism: Mechanism) -> None:
    client, _ = awaiting_final(mechanism)
    message = refusal(lambda: client.verify(b"e=invalid-proof"))
    assert message == "the broker refused the SCRAM login: invalid-proof"
    assert not client.complete


@pytest.mark.parametrize(
    ("server_first", "why"),
    [
        (f"m=ext,r={NONCE}srv,s={SALT},i=4096", "mandatory SCRAM extension"),
        (f"r={NONCE}srv,i=4096", "expected r=nonce,s=salt,i=iterations"),
        (f"s={SALT},r={NONCE}srv,i=4096", "expected r=nonce,s=salt,i=iterations"),
        (f"r={NONCE}srv,s=,i=4096", "the salt s= is empty"),
        (f"r={NONCE}srv,s=not base64!,i=4096", "the salt s= is not base64"),
        (f"r={NONCE}srv,s=ä,i=4096", "the salt s= is not base64"),
        (f"r={NONCE}srv,s={SALT},i=4k", "the iteration count i= is not a number"),
        (f"r={NONCE}srv,s={SALT},i=-4096", "the iteration count i= is not a number"),
        (f"r={NONCE}sr v,s={SALT},i=4096", "the nonce r= must be printable ASCII"),
    ],
)
def test_a_malformed_server_first_message_is_refused(server_first: str, why: str) -> None:
    client = after_first()
    assert why in refusal(lambda: client.final(server_first.encode()))
    assert "unexpected" in refusal(lambda: client.final(f"r={NONCE}srv,s={SALT},i=4096".encode()))


def test_server_first_extensions_are_ignored() -> None:
    client = after_first()
    assert client.final(f"r={NONCE}srv,s={SALT},i=4096,x=ext".encode()).startswith(b"c=biws,r=client-noncesrv,p=")


@pytest.mark.parametrize(
    ("server_final", "why"),
    [
        (b"x=1", "expected v=signature or e=error"),
        (b"", "expected v=signature or e=error"),
        (b"v=not base64!", "the signature v= is not base64"),
        (b"v=\xff", "not UTF-8"),
    ],
)
def test_a_malformed_server_final_message_is_refused(server_final: bytes, why: str) -> None:
    client, _ = awaiting_final(Mechanism.SCRAM_SHA_256)
    assert why in refusal(lambda: client.verify(server_final))


def test_steps_out_of_order_are_refused() -> None:
    client = ScramClientExchange("SCRAM-SHA-256", "alice", "pw")
    assert "unexpected SCRAM client-final step" in refusal(lambda: client.final(b"r=x,s=c2FsdA==,i=4096"))
    client = ScramClientExchange("SCRAM-SHA-256", "alice", "pw")
    client.first()
    assert "unexpected SCRAM client-first step" in refusal(client.first)
    assert "unexpected SCRAM server-final step" in refusal(lambda: client.verify(b"v=AAAA"))


def test_an_unknown_mechanism_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="unknown SCRAM mechanism 'PLAIN'"):
        ScramClientExchange("PLAIN", "alice", "pw")


# -- the channel's login (client/authentication.py) -----------------------------------------------------------------


class FakeAuthenticationStub:
    """The broker's Authentication service reduced to odradek's SCRAM server over one user's credential."""

    def __init__(self, credential: server.ScramCredential) -> None:
        self.credential = credential
        self.exchange: ScramServerExchange | None = None

    async def SaslAuthenticate(
        self, request: security_pb2.SaslAuthenticateRequest, timeout: float | None = None
    ) -> security_pb2.SaslAuthenticateResponse:
        try:
            if not request.exchange:
                self.exchange = ScramServerExchange(Mechanism.parse(request.mechanism), {"bob": self.credential}.get)
                return security_pb2.SaslAuthenticateResponse(
                    auth_bytes=self.exchange.first(request.auth_bytes), exchange=b"1"
                )
            assert self.exchange is not None
            final = self.exchange.final(request.auth_bytes)
            return security_pb2.SaslAuthenticateResponse(auth_bytes=final, session_token="token-1")
        except ScramAuthenticationError as e:
            return security_pb2.SaslAuthenticateResponse(
                error=ErrorCode.SASL_AUTHENTICATION_FAILED, error_message=str(e)
            )


class OkCall:
    async def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.OK


async def call_through(
    credentials: SaslCredentials, stub: FakeAuthenticationStub, monkeypatch: pytest.MonkeyPatch
) -> list[Any]:
    """One call through a channel's authenticator whose channel reaches ``stub``; the metadata the call went with."""
    monkeypatch.setattr(authentication.security_pb2_grpc, "AuthenticationStub", lambda _channel: stub)
    authenticator = ChannelAuthenticator(credentials)
    authenticator.attach(None)  # the stub stands in for the channel
    sent: list[Any] = []

    async def continuation(details: grpc.aio.ClientCallDetails, _request: object) -> OkCall:
        sent.extend(details.metadata or ())
        return OkCall()

    details = grpc.aio.ClientCallDetails("/odradek.v1.Admin/DescribeCluster", 5.0, None, None, None)
    await authenticator.intercept_unary_unary(continuation, details, object())
    return sent


@pytest.mark.parametrize("mechanism", MECHANISMS)
async def test_a_channel_logs_in_with_a_short_salt_and_a_password_saslprep_would_change(
    mechanism: Mechanism, monkeypatch: pytest.MonkeyPatch
) -> None:
    stub = FakeAuthenticationStub(credential(mechanism, "\ufb01ve a\u00a0b", 4))
    sent = await call_through(SaslCredentials(mechanism.value, "bob", "\ufb01ve a\u00a0b"), stub, monkeypatch)
    assert (SESSION_KEY, "token-1") in sent


async def test_a_channel_with_a_wrong_password_fails_with_the_brokers_message(monkeypatch: pytest.MonkeyPatch) -> None:
    stub = FakeAuthenticationStub(credential(Mechanism.SCRAM_SHA_256, "\ufb01ve", 4))
    with pytest.raises(AuthenticationFailedError, match="invalid credentials"):
        await call_through(SaslCredentials("SCRAM-SHA-256", "bob", "five"), stub, monkeypatch)

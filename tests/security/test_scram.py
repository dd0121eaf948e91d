"""SCRAM credentials and the server side of the exchange, driven by real clients: scramp's and kafka-python's, and
RFC 7677's published exchange."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Callable

import pytest
import scramp
from kafka.admin._users import UserScramCredentialUpsertion
from kafka.net.sasl.scram import ScramClient as KafkaPythonScramClient

from odradek.client.common.scram import (
    MAX_ITERATIONS,
    MIN_ITERATIONS,
    Mechanism,
    ScramAuthenticationError,
    ScramCredential,
    ScramServerExchange,
    credential_from_salted_password,
    make_credential,
)

MECHANISMS = list(Mechanism)
Lookup = Callable[[str], ScramCredential | None]


def users(**passwords: str) -> dict[Mechanism, dict[str, ScramCredential]]:
    return {m: {name: make_credential(m, password) for name, password in passwords.items()} for m in Mechanism}


STORE = users(alice="s3cret", bob="hunter2")


def lookup_for(mechanism: Mechanism) -> Lookup:
    return STORE[mechanism].get


def scramp_login(mechanism: Mechanism, user: str, password: str, lookup: Lookup | None = None) -> ScramServerExchange:
    """A whole exchange between scramp's client and the server; returns the finished exchange."""
    exchange = ScramServerExchange(mechanism, lookup or lookup_for(mechanism))
    client = scramp.ScramClient([mechanism.value], user, password)
    client.set_server_first(exchange.first(client.get_client_first().encode()).decode())
    server_final = exchange.final(client.get_client_final().encode())
    client.set_server_final(server_final.decode())  # raises unless the server proved it knows the credential
    return exchange


def kafka_python_login(mechanism: Mechanism, user: str, password: str, lookup: Lookup) -> ScramServerExchange:
    exchange = ScramServerExchange(mechanism, lookup)
    client = KafkaPythonScramClient(user, password, mechanism.value)
    client.process_server_first_message(exchange.first(client.first_message()))
    client.process_server_final_message(exchange.final(client.final_message()))
    return exchange


def first_two(mechanism: Mechanism, user: str, password: str) -> tuple[ScramServerExchange, bytes, bytes]:
    """The exchange after the server-first message, with the server-first and the client's honest client-final."""
    exchange = ScramServerExchange(mechanism, lookup_for(mechanism))
    client = scramp.ScramClient([mechanism.value], user, password)
    server_first = exchange.first(client.get_client_first().encode())
    client.set_server_first(server_first.decode())
    return exchange, server_first, client.get_client_final().encode()


def failure(call: Callable[[], object]) -> str:
    with pytest.raises(ScramAuthenticationError) as caught:
        call()
    return str(caught.value)


# -- successful logins --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_a_full_exchange_with_scramps_client(mechanism: Mechanism) -> None:
    exchange = scramp_login(mechanism, "alice", "s3cret")
    assert exchange.complete
    assert exchange.username == "alice"


def test_rfc_7677_test_vector() -> None:
    """RFC 7677 section 3: user "user", password "pencil"; the server's two messages must be the RFC's."""
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    credential = make_credential(Mechanism.SCRAM_SHA_256, "pencil", iterations=4096, salt=salt)
    exchange = ScramServerExchange(
        Mechanism.SCRAM_SHA_256, {"user": credential}.get, server_nonce="%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
    )
    server_first = exchange.first(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
    assert server_first == b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    server_final = exchange.final(
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
    )
    assert server_final == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    assert exchange.username == "user"


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_kafka_pythons_own_scram_client(mechanism: Mechanism) -> None:
    """kafka-python's client (what its KafkaConsumer/Producer run on SaslAuthenticate) logs in; it checks the
    server's signature itself and raises if it is wrong."""
    exchange = kafka_python_login(mechanism, "bob", "hunter2", lookup_for(mechanism))
    assert exchange.username == "bob"
    with pytest.raises(ScramAuthenticationError, match="invalid credentials"):
        kafka_python_login(mechanism, "bob", "hunter3", lookup_for(mechanism))


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_a_credential_from_alter_user_scram_credentials(mechanism: Mechanism) -> None:
    """KIP-554: the admin client sends salt, iterations and the salted password it computed (here kafka-python's
    upsertion); the credential derived from them accepts the password from either client."""
    upsertion = UserScramCredentialUpsertion("carol", mechanism.code, "p@ss word", iterations=8192)
    credential = credential_from_salted_password(
        Mechanism.from_code(int(upsertion.mechanism)), upsertion.salt, upsertion.iterations, upsertion.salted_password
    )
    assert credential.mechanism is mechanism and credential.iterations == 8192
    store = {"carol": credential}
    assert kafka_python_login(mechanism, "carol", "p@ss word", store.get).username == "carol"
    assert scramp_login(mechanism, "carol", "p@ss word", store.get).username == "carol"


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_make_credential_agrees_with_scramp(mechanism: Mechanism) -> None:
    salt = bytes(range(16))
    ours = make_credential(mechanism, "pencil", iterations=4096, salt=salt)
    _, stored_key, server_key, _ = scramp.ScramMechanism(mechanism.value).make_auth_info("pencil", 4096, salt)
    assert (ours.stored_key, ours.server_key) == (stored_key, server_key)


def test_a_non_ascii_password_works_as_kafka_clients_compute_it() -> None:
    """Kafka hashes the password's UTF-8 bytes without SASLprep; kafka-python does the same."""
    mechanism = Mechanism.SCRAM_SHA_512
    store = {"dora": make_credential(mechanism, "pässwörd ✓")}
    assert kafka_python_login(mechanism, "dora", "pässwörd ✓", store.get).username == "dora"


def test_escaped_user_names_reach_the_lookup_unescaped() -> None:
    seen: list[str] = []
    credential = make_credential(Mechanism.SCRAM_SHA_256, "pw")

    def lookup(name: str) -> ScramCredential | None:
        seen.append(name)
        return credential

    assert scramp_login(Mechanism.SCRAM_SHA_256, "o=u,x", "pw", lookup).username == "o=u,x"
    assert seen == ["o=u,x"]


# -- refusals -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_a_wrong_password_and_an_unknown_user_fail_alike(mechanism: Mechanism) -> None:
    wrong_password = failure(lambda: scramp_login(mechanism, "alice", "guess"))
    unknown_user = failure(lambda: scramp_login(mechanism, "mallory", "guess"))
    assert wrong_password == unknown_user
    assert wrong_password == (
        f"Authentication failed during authentication due to invalid credentials with SASL mechanism {mechanism.value}"
    )


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_an_unknown_user_gets_a_server_first_like_a_real_one(mechanism: Mechanism) -> None:
    """Nothing in the server-first message tells a missing user: same attributes, salt length and iterations, and
    the same salt when asked twice (a real user's salt does not change between attempts either)."""

    def attributes(server_first: bytes) -> dict[str, str]:
        return dict(attr.split("=", 1) for attr in server_first.decode().split(","))

    _, real, _ = first_two(mechanism, "alice", "guess")
    _, ghost, _ = first_two(mechanism, "mallory", "guess")
    _, ghost_again, _ = first_two(mechanism, "mallory", "other")
    real_attrs, ghost_attrs = attributes(real), attributes(ghost)
    assert real_attrs.keys() == ghost_attrs.keys() == {"r", "s", "i"}
    assert ghost_attrs["i"] == real_attrs["i"] == str(MIN_ITERATIONS)
    assert len(base64.b64decode(ghost_attrs["s"])) == len(base64.b64decode(real_attrs["s"]))
    assert attributes(ghost_again)["s"] == ghost_attrs["s"]
    _, other_ghost, _ = first_two(mechanism, "trudy", "guess")
    assert attributes(other_ghost)["s"] != ghost_attrs["s"]


def test_a_credential_of_another_mechanism_fails_like_an_unknown_user() -> None:
    sha512_only = {"erin": make_credential(Mechanism.SCRAM_SHA_512, "pw")}
    message = failure(lambda: scramp_login(Mechanism.SCRAM_SHA_256, "erin", "pw", sha512_only.get))
    assert "invalid credentials" in message


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_a_tampered_nonce_in_the_client_final_is_refused(mechanism: Mechanism) -> None:
    exchange, server_first, client_final = first_two(mechanism, "alice", "s3cret")
    nonce = server_first.split(b",")[0].removeprefix(b"r=")
    tampered = client_final.replace(b"r=" + nonce, b"r=" + nonce[:-1] + (b"x" if nonce[-1:] != b"x" else b"y"))
    assert tampered != client_final
    assert "invalid nonce" in failure(lambda: exchange.final(tampered))
    # The exchange is over: the honest message does not rescue it.
    assert failure(lambda: exchange.final(client_final))
    assert not exchange.complete


def test_a_client_nonce_alone_is_refused() -> None:
    """The client-final must carry the client's and the server's nonce parts, not only its own."""
    exchange = ScramServerExchange(Mechanism.SCRAM_SHA_256, lookup_for(Mechanism.SCRAM_SHA_256))
    exchange.first(b"n,,n=alice,r=abcdef")
    assert "invalid nonce" in failure(lambda: exchange.final(b"c=biws,r=abcdef,p=AAAA"))


def test_a_mismatched_authorization_id_is_refused() -> None:
    exchange = ScramServerExchange(Mechanism.SCRAM_SHA_256, lookup_for(Mechanism.SCRAM_SHA_256))
    message = failure(lambda: exchange.first(b"n,a=bob,n=alice,r=abcdef"))
    assert message == "Authentication failed: Client requested an authorization id that is different from username"
    assert failure(lambda: exchange.first(b"n,,n=alice,r=abcdef"))  # the exchange stays failed


def test_an_authorization_id_equal_to_the_user_is_refused_too() -> None:
    """No Kafka client sends one (Java, librdkafka and kafka-python leave it empty)."""
    exchange = ScramServerExchange(Mechanism.SCRAM_SHA_256, lookup_for(Mechanism.SCRAM_SHA_256))
    assert "authorization ids are not supported" in failure(lambda: exchange.first(b"n,a=alice,n=alice,r=abcdef"))


def test_channel_binding_is_refused() -> None:
    exchange = ScramServerExchange(Mechanism.SCRAM_SHA_256, lookup_for(Mechanism.SCRAM_SHA_256))
    message = failure(lambda: exchange.first(b"p=tls-server-end-point,,n=alice,r=abcdef"))
    assert "channel binding is not supported" in message


def test_kafkas_token_extension_and_other_extensions_are_refused() -> None:
    exchange = ScramServerExchange(Mechanism.SCRAM_SHA_256, lookup_for(Mechanism.SCRAM_SHA_256))
    assert "tokenauth" in failure(lambda: exchange.first(b"n,,n=alice,r=abcdef,tokenauth=true"))
    exchange = ScramServerExchange(Mechanism.SCRAM_SHA_256, lookup_for(Mechanism.SCRAM_SHA_256))
    assert "extensions are not supported" in failure(lambda: exchange.first(b"n,,n=alice,r=abcdef,x=1"))


@pytest.mark.parametrize(
    "client_first",
    [
        b"\xff\xfe",  # not UTF-8
        b"n,,",
        b"n,,r=abcdef,n=alice",  # attributes out of order
        b"x,,n=alice,r=abcdef",  # no such GS2 flag
        b"n,,n=alice,r=abc,def",  # a comma in the nonce
        b"n,,n=,r=abcdef",  # empty user name
        b"n,,n=al=ice,r=abcdef",  # a bare '=' in a saslname
        b"n,b=x,n=alice,r=abcdef",
    ],
)
def test_malformed_client_first_messages(client_first: bytes) -> None:
    seen: list[str] = []

    def lookup(name: str) -> ScramCredential | None:
        seen.append(name)
        return None

    exchange = ScramServerExchange(Mechanism.SCRAM_SHA_256, lookup)
    assert "malformed SCRAM client-first message" in failure(lambda: exchange.first(client_first))
    assert seen == []  # refused before any lookup: nothing to learn about the user


@pytest.mark.parametrize(
    "mangle",
    [
        lambda final, nonce: b"\xff" + final,
        lambda final, nonce: final.split(b",p=")[0],  # no proof
        lambda final, nonce: final.split(b",p=")[0] + b",p=!!notbase64!!",
        lambda final, nonce: b"r=" + nonce + b",c=biws,p=AAAA",  # attributes out of order
        lambda final, nonce: b"c=eSws,r=" + nonce + b"," + final.split(b",")[-1],  # channel-binding data 'y,,'
        lambda final, nonce: b"c=biws,p=AAAA",  # no nonce
    ],
)
def test_malformed_client_final_messages(mangle: Callable[[bytes, bytes], bytes]) -> None:
    exchange, server_first, client_final = first_two(Mechanism.SCRAM_SHA_256, "alice", "s3cret")
    nonce = server_first.split(b",")[0].removeprefix(b"r=")
    assert "malformed SCRAM client-final message" in failure(lambda: exchange.final(mangle(client_final, nonce)))
    assert not exchange.complete


def test_a_lookup_fault_propagates_as_itself() -> None:
    """A store that cannot answer is the broker's fault, not the client's failed login."""

    def broken(name: str) -> ScramCredential | None:
        raise LookupError("metadata not loaded")

    exchange = ScramServerExchange(Mechanism.SCRAM_SHA_256, broken)
    with pytest.raises(LookupError, match="metadata not loaded"):
        exchange.first(b"n,,n=alice,r=abcdef")
    assert failure(lambda: exchange.final(b"c=biws,r=abcdef,p=AAAA"))


def test_calls_out_of_order() -> None:
    mechanism = Mechanism.SCRAM_SHA_256
    assert "before the client-first" in failure(
        lambda: ScramServerExchange(mechanism, lookup_for(mechanism)).final(b"c=biws,r=x,p=AAAA")
    )
    exchange, _, client_final = first_two(mechanism, "alice", "s3cret")
    assert "already started" in failure(lambda: exchange.first(b"n,,n=alice,r=abcdef"))
    assert failure(lambda: exchange.final(client_final))  # failed by the out-of-order call

    done = scramp_login(mechanism, "alice", "s3cret")
    assert "after the exchange ended" in failure(lambda: done.final(b"c=biws,r=x,p=AAAA"))
    assert "already started" in failure(lambda: done.first(b"n,,n=alice,r=abcdef"))


def test_the_user_is_known_only_once_the_exchange_succeeds() -> None:
    exchange, _, client_final = first_two(Mechanism.SCRAM_SHA_256, "alice", "s3cret")
    assert "not completed" in failure(lambda: exchange.username)
    exchange.final(client_final)
    assert exchange.username == "alice"


# -- credentials --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("iterations", [0, 1, MIN_ITERATIONS - 1, MAX_ITERATIONS + 1, 10_000_000])
def test_iterations_outside_kafkas_range_are_refused(iterations: int) -> None:
    with pytest.raises(ValueError, match="iterations"):
        make_credential(Mechanism.SCRAM_SHA_256, "pw", iterations=iterations)
    salted = hashlib.pbkdf2_hmac("sha256", b"pw", b"0123456789abcdef", 1)
    with pytest.raises(ValueError, match="iterations"):
        credential_from_salted_password(Mechanism.SCRAM_SHA_256, b"0123456789abcdef", iterations, salted)


def test_kafkas_range_is_accepted() -> None:
    assert make_credential(Mechanism.SCRAM_SHA_256, "pw", iterations=MIN_ITERATIONS).iterations == 4096
    assert make_credential(Mechanism.SCRAM_SHA_512, "pw", iterations=MAX_ITERATIONS).iterations == 16384


def test_bad_credential_inputs() -> None:
    with pytest.raises(ValueError, match="empty"):
        make_credential(Mechanism.SCRAM_SHA_256, "")
    with pytest.raises(ValueError, match="salt must not be empty"):
        make_credential(Mechanism.SCRAM_SHA_256, "pw", salt=b"")
    with pytest.raises(ValueError, match="salted password"):
        credential_from_salted_password(Mechanism.SCRAM_SHA_512, b"0123456789abcdef", 4096, b"\0" * 32)
    with pytest.raises(ValueError, match="iterations"):
        make_credential(Mechanism.SCRAM_SHA_256, "pw", iterations=True)


@pytest.mark.parametrize("salt", [b"s", b"salt", b"twelve bytes"])
def test_any_non_empty_salt_is_taken_as_kafka_takes_it(salt: bytes) -> None:
    """Kafka sets no floor: the client setting a credential picks the salt (confluent-kafka's tests use 4 bytes)."""
    assert make_credential(Mechanism.SCRAM_SHA_512, "pw", salt=salt).salt == salt
    salted = hashlib.pbkdf2_hmac("sha256", b"pw", salt, 4096)
    assert credential_from_salted_password(Mechanism.SCRAM_SHA_256, salt, 4096, salted).salt == salt


def test_credentials_hold_no_password_and_show_no_keys() -> None:
    credential = make_credential(Mechanism.SCRAM_SHA_256, "correct horse")
    assert len(credential.salt) == 24 and len(credential.stored_key) == len(credential.server_key) == 32
    assert "correct horse" not in repr(credential) and credential.stored_key.hex() not in repr(credential)
    assert make_credential(Mechanism.SCRAM_SHA_256, "correct horse").salt != credential.salt  # a fresh salt each time


def test_mechanisms() -> None:
    assert Mechanism.parse("SCRAM-SHA-256") is Mechanism.SCRAM_SHA_256
    assert Mechanism.parse("SCRAM-SHA-512") is Mechanism.SCRAM_SHA_512
    assert [m.code for m in Mechanism] == [1, 2]
    assert Mechanism.from_code(2) is Mechanism.SCRAM_SHA_512
    for bad in ("scram-sha-256", "SCRAM-SHA-1", "PLAIN", ""):
        with pytest.raises(ValueError, match="SCRAM mechanism"):
            Mechanism.parse(bad)
    with pytest.raises(ValueError, match="code"):
        Mechanism.from_code(0)

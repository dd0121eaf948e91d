"""Who calls the brokers' HTTP listeners (the HTTP API, the schema registry): HTTP Basic credentials checked against
the cluster's SCRAM credentials, the ones its SASL listeners log users in with. A credential stores the salt, the
iteration count and StoredKey, never the password: the password given is salted and hashed as a SCRAM client would
(SaltedPassword = PBKDF2 with the stored salt and iterations, ClientKey = HMAC(SaltedPassword, "Client Key"),
StoredKey = H(ClientKey)) and StoredKey compared in constant time. A password once verified against a credential is
remembered (by its SHA-256, with that credential) so that a client's next requests cost no PBKDF2, until the
credential changes. Pure: broker/http_login.py is the listeners' one shell over these checks (the hashing off the
event loop, the delay after a failed login)."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from collections.abc import Callable

from odradek.broker.rest import errors
from odradek.client.common.scram import Mechanism, ScramCredential, credential_from_salted_password

VERIFIED_CACHE_SIZE = 1024

CredentialLookup = Callable[[str, Mechanism], ScramCredential | None]


def basic_credentials(header: str) -> tuple[str, str]:
    """The user and password of an ``Authorization: Basic ...`` header (RFC 7617, UTF-8)."""
    scheme, _, token = header.strip().partition(" ")
    if scheme.lower() != "basic":
        raise errors.unauthenticated(f"unsupported authorization scheme {scheme!r}: use HTTP Basic")
    try:
        text = base64.b64decode(token.strip(), validate=True).decode("utf-8")
    except (binascii.Error, ValueError):
        raise errors.unauthenticated("the Basic credentials are not base64 of user:password") from None
    user, colon, password = text.partition(":")
    if not colon or not user or not password:
        raise errors.unauthenticated("the Basic credentials are not base64 of user:password")
    return user, password


def password_matches(credential: ScramCredential, password: str) -> bool:
    """Whether ``password`` is the one ``credential`` was made from."""
    mechanism = credential.mechanism
    salted = hashlib.pbkdf2_hmac(mechanism.hash_name, password.encode(), credential.salt, credential.iterations)
    derived = credential_from_salted_password(mechanism, credential.salt, credential.iterations, salted)
    return hmac.compare_digest(derived.stored_key, credential.stored_key)


class VerifiedPasswords:
    """Passwords recently verified, by user and SHA-256 of the password, with the credential they matched."""

    def __init__(self, size: int = VERIFIED_CACHE_SIZE) -> None:
        self._size = size
        self._verified: dict[tuple[str, bytes], ScramCredential] = {}

    @staticmethod
    def _key(user: str, password: str) -> tuple[str, bytes]:
        return user, hashlib.sha256(password.encode()).digest()

    def known(self, user: str, password: str, credential: ScramCredential) -> bool:
        return self._verified.get(self._key(user, password)) == credential

    def add(self, user: str, password: str, credential: ScramCredential) -> None:
        if len(self._verified) >= self._size:
            self._verified.clear()
        self._verified[self._key(user, password)] = credential

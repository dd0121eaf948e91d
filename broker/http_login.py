"""HTTP Basic logins for the brokers' HTTP listeners (the HTTP API, the schema registry): the one shell over the pure
checks of broker/rest/auth.py, which hashes a password off the event loop and answers a failed login only after
``connection.failed.authentication.delay.ms``, as the SASL listeners do."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

from odradek.broker.rest import errors
from odradek.broker.rest.auth import CredentialLookup, VerifiedPasswords, basic_credentials, password_matches
from odradek.client.common.scram import Mechanism, ScramCredential


class BasicLogin:
    """A listener's HTTP Basic logins: ``credentials(user, mechanism)`` is the user's SCRAM credential (the metadata
    image's), tried for each of ``mechanisms``; a failed login answers after ``failed_authentication_delay_ms``."""

    def __init__(
        self, credentials: CredentialLookup, mechanisms: Sequence[Mechanism], failed_authentication_delay_ms: int
    ) -> None:
        self._credentials = credentials
        self._mechanisms = tuple(mechanisms)
        self._failure_delay_s = failed_authentication_delay_ms / 1000
        self._verified = VerifiedPasswords()

    async def principal(self, header: str | None) -> str:
        """``User:<name>`` for valid credentials in an ``Authorization`` header; a refusal (401) otherwise, which
        does not tell whether the user exists."""
        if header is None:
            raise errors.unauthenticated("Authentication is required: send HTTP Basic credentials (a SCRAM user)")
        user, password = basic_credentials(header)
        return (await self.login(user, password)).principal

    async def login(self, user: str, password: str) -> Login:
        """The user's login for a valid password (the console's sign-in form, Basic credentials); a refusal (401)
        otherwise, alike for a wrong password and an unknown user."""
        for mechanism in self._mechanisms:
            credential = self._credentials(user, mechanism)
            if credential is None:
                continue
            if self._verified.known(user, password, credential):
                return Login(user, mechanism, credential)
            if await asyncio.to_thread(password_matches, credential, password):
                self._verified.add(user, password, credential)
                return Login(user, mechanism, credential)
        await asyncio.sleep(self._failure_delay_s)
        raise errors.unauthenticated(f"Authentication failed for user {user!r}: invalid credentials")

    def still_valid(self, login: Login) -> bool:
        """Whether the credential a login was checked against is still the user's (a session ends with it)."""
        return self._credentials(login.user, login.mechanism) == login.credential


@dataclass(frozen=True, slots=True)
class Login:
    user: str
    mechanism: Mechanism
    credential: ScramCredential

    @property
    def principal(self) -> str:
        return f"User:{self.user}"

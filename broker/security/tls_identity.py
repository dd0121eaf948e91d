"""The principal of a TLS client: its verified certificate's subject, mapped by ``ssl.principal.mapping.rules``.

The subject is read in RFC 2253/4514 form, most specific attribute first (``CN=node-1,O=odradek``), the form Kafka's
rules are written against (Java's ``X500Principal.getName()``); the rules (:class:`PrincipalMapper`) turn it into a
name and the principal is ``User:<name>``. Only a certificate the listener verified against ``ssl.ca.location`` is
ever given here: the TLS handshake refuses the others before a request is read.

Parsing a certificate costs far more than a request's other work, and a connection presents the same certificate
for each of its calls, so answers are cached by the certificate's bytes (a bounded cache: the least recently used
entry goes first).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING

from odradek.broker.security.principal_mapping import NoMatchingRule, PrincipalMapper

if TYPE_CHECKING:
    from cryptography import x509

__all__ = ["CertificatePrincipals", "NoMatchingRule", "subject_dn"]

CACHE_SIZE = 1024


def subject_dn(certificate: x509.Certificate) -> str:
    """The certificate's subject as Kafka's rules see it: ``CN=admin,O=odradek``."""
    return certificate.subject.rfc4514_string()


class CertificatePrincipals:
    """Certificate bytes (DER or PEM) to ``User:<name>``; NoMatchingRule when no rule maps the subject (Kafka then
    refuses the connection), ValueError for bytes that are not a certificate."""

    def __init__(self, mapper: PrincipalMapper, cache_size: int = CACHE_SIZE) -> None:
        self.mapper = mapper
        self._cache_size = cache_size
        self._cache: OrderedDict[bytes, str | NoMatchingRule] = OrderedDict()
        self.parsed = 0  # certificates parsed (cache misses), for tests

    def of_der(self, der: bytes) -> str:
        from cryptography import x509  # here: only mTLS listeners read certificates, and it is slow to import

        return self._principal(der, x509.load_der_x509_certificate)

    def of_pem(self, pem: bytes) -> str:
        from cryptography import x509

        return self._principal(pem, x509.load_pem_x509_certificate)

    def _principal(self, data: bytes, load: Callable[[bytes], x509.Certificate]) -> str:
        found = self._cache.get(data)
        if found is None:
            found = self._map(load(data))
            self._cache[data] = found
            if len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        else:
            self._cache.move_to_end(data)
        if isinstance(found, NoMatchingRule):
            raise found
        return found

    def _map(self, certificate: x509.Certificate) -> str | NoMatchingRule:
        self.parsed += 1
        try:
            return f"User:{self.mapper.name(subject_dn(certificate))}"
        except NoMatchingRule as e:
            return e

"""The registry listener's security in one process, over real sockets: https with the node's certificate (client
certificates asked for, or required), HTTP Basic checked against SCRAM credentials, the client certificate's
principal, the authorizer's answers on SUBJECT and cluster ACLs (403 in Confluent's shape, nothing written,
listings filtered), and a write forwarded from a follower to the writer over https carrying the caller."""

from __future__ import annotations

import asyncio
import base64
import json
import ssl
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from odradek.broker.http_login import BasicLogin
from odradek.broker.schema_registry.server import RegistryListener, Security
from odradek.broker.schema_registry.service import RegistryService
from odradek.broker.security.principal_mapping import PrincipalMapper
from odradek.broker.security.tls import ServerTls
from odradek.broker.security.tls_identity import CertificatePrincipals
from odradek.client.common.access import AccessControl, AuthorizerSettings
from odradek.client.common.acls import AclBinding, AclOperation, AclPermissionType, PatternType, ResourceType
from odradek.client.common.scram import Mechanism, ScramCredential, make_credential
from odradek.client.tls import TlsFiles
from odradek.deploy.certs import make_ca, make_leaf

from .test_http import USER, InstantStore

CREDENTIALS = {("alice", Mechanism.SCRAM_SHA_256): make_credential(Mechanism.SCRAM_SHA_256, "alice-secret")}
CREDENTIALS[("admin", Mechanism.SCRAM_SHA_512)] = make_credential(Mechanism.SCRAM_SHA_512, "admin-secret")
ALICE, ADMIN = ("alice", "alice-secret"), ("admin", "admin-secret")
FIRST_CN = "RULE:^CN=([^,]+),.*$/$1/"


def lookup(user: str, mechanism: Mechanism) -> ScramCredential | None:
    return CREDENTIALS.get((user, mechanism))


def acl(principal: str, operation: str, name: str, kind: str = "SUBJECT", pattern: str = "LITERAL") -> AclBinding:
    return AclBinding(
        ResourceType[kind],
        name,
        PatternType[pattern],
        principal,
        "*",
        AclOperation[operation],
        AclPermissionType.ALLOW,
    )


@dataclass
class Acls:
    """The authorizer's bindings, changed by the tests (a new mapping each time, as the metadata image hands out)."""

    bindings: dict[bytes, AclBinding]

    def grant(self, *bindings: AclBinding) -> None:
        self.bindings = {**self.bindings, **{repr(b).encode(): b for b in bindings}}


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("certs")
    ca = make_ca()
    ca.write(out, "ca")
    make_leaf(ca, "node", ["127.0.0.1", "localhost"]).write(out, "node")
    make_leaf(ca, "carol").write(out, "carol")
    other = make_ca("another CA")
    make_leaf(other, "mallory").write(out, "mallory")
    return out


def files(certs: Path) -> TlsFiles:
    return TlsFiles(str(certs / "ca.crt"), str(certs / "node.crt"), str(certs / "node.key"))


class Registry:
    """One secured listener with its store and ACLs; ``call`` sends a request as a client would."""

    def __init__(self, certs: Path, client_auth: str, acls: Acls, writer: str | None = None) -> None:
        self.certs = certs
        self.acls = acls
        self.store = InstantStore(writer)
        access = AccessControl(AuthorizerSettings(frozenset({"User:node", "User:admin"})), lambda: acls.bindings)
        node = files(certs)
        security = Security(
            tls=ServerTls(node, client_auth).current,
            forward_tls=node.client_context,
            login=BasicLogin(lookup, tuple(Mechanism), 0),
            certificates=CertificatePrincipals(PrincipalMapper.parse(FIRST_CN)).of_der,
        )
        self.listener = RegistryListener("127.0.0.1", 0, RegistryService(self.store, access), security=security)

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.listener.port}"

    async def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        user: tuple[str, str] | None = None,
        identity: str | None = None,
        verify: bool = True,
    ) -> tuple[int, Any]:
        context = ssl.create_default_context(cafile=str(self.certs / "ca.crt"))
        if not verify:
            context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
        if identity is not None:
            context.load_cert_chain(self.certs / f"{identity}.crt", self.certs / f"{identity}.key")
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method)
        request.add_header("Content-Type", "application/vnd.schemaregistry.v1+json")
        if user is not None:
            request.add_header("Authorization", "Basic " + base64.b64encode(":".join(user).encode()).decode())

        def send() -> tuple[int, Any]:
            try:
                with urllib.request.urlopen(request, timeout=10, context=context) as response:
                    return response.status, json.loads(response.read())
            except urllib.error.HTTPError as e:
                return e.code, json.loads(e.read())

        return await asyncio.to_thread(send)


@pytest.fixture
def acls() -> Iterator[Acls]:
    yield Acls({})


@pytest.fixture
async def registry(certs: Path, acls: Acls) -> AsyncIterator[Registry]:
    r = Registry(certs, "requested", acls)
    await r.listener.start()
    yield r
    await r.listener.stop()


def refused(answer: tuple[int, Any], status: int, code: int) -> None:
    assert answer[0] == status and answer[1]["error_code"] == code, answer


async def test_without_valid_credentials_every_request_is_401(registry: Registry) -> None:
    refused(await registry.call("GET", "/subjects"), 401, 40101)
    refused(await registry.call("GET", "/subjects", user=("alice", "wrong")), 401, 40101)
    refused(await registry.call("GET", "/subjects", user=("nobody", "x")), 401, 40101)
    refused(await registry.call("POST", "/subjects/s/versions", {"schema": USER}), 401, 40101)
    assert registry.store.core.subjects() == []


async def test_a_plain_http_client_or_an_unknown_certificate_gets_no_answer(registry: Registry) -> None:
    def plain() -> None:
        urllib.request.urlopen(f"http://127.0.0.1:{registry.listener.port}/subjects", timeout=5)

    with pytest.raises(OSError):  # URLError, a reset connection
        await asyncio.to_thread(plain)
    with pytest.raises(OSError):  # a certificate another CA signed fails the handshake
        await registry.call("GET", "/subjects", identity="mallory")


async def test_a_user_without_acls_is_refused_and_nothing_is_written(registry: Registry) -> None:
    refused(await registry.call("POST", "/subjects/s/versions", {"schema": USER}, user=ALICE), 403, 40301)
    assert registry.store.core.subjects() == []
    assert await registry.call("POST", "/subjects/s/versions", {"schema": USER}, user=ADMIN) == (200, {"id": 1})
    assert await registry.call("GET", "/subjects", user=ALICE) == (200, [])  # the listing leaves s out
    for method, path, body in (
        ("GET", "/subjects/s/versions", None),
        ("GET", "/subjects/s/versions/1", None),
        ("POST", "/subjects/s", {"schema": USER}),
        ("POST", "/compatibility/subjects/s/versions/latest", {"schema": USER}),
        ("GET", "/schemas/ids/1", None),
        ("GET", "/schemas/ids/1/subjects", None),
        ("DELETE", "/subjects/s", None),
        ("GET", "/config/s", None),
        ("PUT", "/config/s", {"compatibility": "NONE"}),
        ("GET", "/config", None),
        ("PUT", "/config", {"compatibility": "NONE"}),
        ("PUT", "/mode", {"mode": "READONLY"}),
    ):
        refused(await registry.call(method, path, body, user=ALICE), 403, 40301)
    assert registry.store.core.versions("s") == [1] and registry.store.core.config(None) == "BACKWARD"
    assert registry.store.core.mode(None) == "READWRITE"
    assert (await registry.call("GET", "/schemas/types", user=ALICE))[0] == 200  # nothing beyond authentication


async def test_granted_read_and_write_let_the_user_register_and_read(registry: Registry, acls: Acls) -> None:
    acls.grant(acl("User:alice", "WRITE", "orders-value"), acl("User:alice", "READ", "orders-value"))
    assert await registry.call("POST", "/subjects/orders-value/versions", {"schema": USER}, user=ALICE) == (
        200,
        {"id": 1},
    )
    assert (await registry.call("GET", "/subjects/orders-value/versions/latest", user=ALICE))[1]["id"] == 1
    assert (await registry.call("GET", "/schemas/ids/1", user=ALICE))[0] == 200
    assert await registry.call("GET", "/subjects", user=ALICE) == (200, ["orders-value"])
    refused(await registry.call("DELETE", "/subjects/orders-value", user=ALICE), 403, 40301)
    refused(await registry.call("PUT", "/config/orders-value", {"compatibility": "NONE"}, user=ALICE), 403, 40301)


async def test_a_schema_id_is_readable_through_any_subject_that_holds_it(registry: Registry, acls: Acls) -> None:
    for subject in ("a-value", "b-value"):
        await registry.call("POST", f"/subjects/{subject}/versions", {"schema": USER}, user=ADMIN)
    refused(await registry.call("GET", "/schemas/ids/1", user=ALICE), 403, 40301)
    acls.grant(acl("User:alice", "READ", "b-value"))
    assert (await registry.call("GET", "/schemas/ids/1/schema", user=ALICE))[0] == 200
    assert await registry.call("GET", "/schemas/ids/1/subjects", user=ALICE) == (200, ["b-value"])
    versions = await registry.call("GET", "/schemas/ids/1/versions", user=ALICE)
    assert versions == (200, [{"subject": "b-value", "version": 1}])
    refused(await registry.call("GET", "/schemas/ids/7", user=ALICE), 404, 40403)


async def test_prefixed_acls_cover_the_subjects_they_start(registry: Registry, acls: Acls) -> None:
    acls.grant(acl("User:alice", "ALL", "team-a.", pattern="PREFIXED"))
    for subject in ("team-a.orders", "team-a.users"):
        status, _ = await registry.call("POST", f"/subjects/{subject}/versions", {"schema": USER}, user=ALICE)
        assert status == 200
    refused(await registry.call("POST", "/subjects/team-b.x/versions", {"schema": USER}, user=ALICE), 403, 40301)
    assert await registry.call("PUT", "/config/team-a.orders", {"compatibility": "FULL"}, user=ALICE) == (
        200,
        {"compatibility": "FULL"},
    )
    assert registry.store.core.subjects() == ["team-a.orders", "team-a.users"]


async def test_the_global_config_and_mode_need_cluster_permissions(registry: Registry, acls: Acls) -> None:
    acls.grant(acl("User:alice", "DESCRIBE_CONFIGS", "kafka-cluster", kind="CLUSTER"))
    assert await registry.call("GET", "/config", user=ALICE) == (200, {"compatibilityLevel": "BACKWARD"})
    assert await registry.call("GET", "/mode", user=ALICE) == (200, {"mode": "READWRITE"})
    refused(await registry.call("PUT", "/config", {"compatibility": "NONE"}, user=ALICE), 403, 40301)
    acls.grant(acl("User:alice", "ALTER_CONFIGS", "kafka-cluster", kind="CLUSTER"))
    assert await registry.call("PUT", "/config", {"compatibility": "NONE"}, user=ALICE) == (
        200,
        {"compatibility": "NONE"},
    )


async def test_a_client_certificate_is_its_principal(registry: Registry, acls: Acls) -> None:
    refused(await registry.call("POST", "/subjects/s/versions", {"schema": USER}, identity="carol"), 403, 40301)
    acls.grant(acl("User:carol", "WRITE", "s"))
    assert await registry.call("POST", "/subjects/s/versions", {"schema": USER}, identity="carol") == (200, {"id": 1})
    # Basic credentials, when given, name the caller before the certificate does.
    refused(await registry.call("POST", "/subjects/s/versions", {"schema": USER}, ALICE, "carol"), 403, 40301)


async def test_required_client_certificates_refuse_a_client_without_one(certs: Path, acls: Acls) -> None:
    r = Registry(certs, "required", acls)
    await r.listener.start()
    try:
        with pytest.raises(OSError):  # the handshake fails
            await r.call("GET", "/subjects", user=ADMIN)
        assert await r.call("GET", "/subjects", identity="node") == (200, [])
    finally:
        await r.listener.stop()


async def test_a_write_is_forwarded_over_https_for_its_caller(registry: Registry, certs: Path, acls: Acls) -> None:
    follower_acls = Acls({})
    follower = Registry(certs, "requested", follower_acls, writer=registry.url)
    await follower.listener.start()
    try:
        refused(await follower.call("POST", "/subjects/s/versions", {"schema": USER}, user=ALICE), 403, 40301)
        for both in (acls, follower_acls):
            both.grant(acl("User:carol", "WRITE", "s"))
        # Carol is known by her certificate alone: the writer takes her principal from the node that forwards.
        assert await follower.call("POST", "/subjects/s/versions", {"schema": USER}, identity="carol") == (
            200,
            {"id": 1},
        )
        assert registry.store.core.subjects() == ["s"] and follower.store.core.subjects() == []
        assert await follower.call("DELETE", "/subjects/s", user=ADMIN) == (200, [1])
        # The writer decides again, for the caller: a grant the follower has and the writer does not is refused.
        follower_acls.grant(acl("User:alice", "DELETE", "s"))
        refused(await follower.call("DELETE", "/subjects/s?permanent=true", user=ALICE), 403, 40301)
        assert registry.store.core.versions("s", deleted=True) == [1]
    finally:
        await follower.listener.stop()


async def test_a_claimed_principal_is_ignored_from_a_caller_that_is_not_a_node(registry: Registry, acls: Acls) -> None:
    def send() -> int:
        context = ssl.create_default_context(cafile=str(registry.certs / "ca.crt"))
        context.load_cert_chain(registry.certs / "carol.crt", registry.certs / "carol.key")
        request = urllib.request.Request(
            registry.url + "/subjects/s/versions", data=json.dumps({"schema": USER}).encode(), method="POST"
        )
        request.add_header("Content-Type", "application/json")
        request.add_header("x-odradek-forwarded", "1")
        request.add_header("x-odradek-principal", "User:admin")
        try:
            with urllib.request.urlopen(request, timeout=10, context=context) as response:
                return int(response.status)
        except urllib.error.HTTPError as e:
            return e.code

    assert await asyncio.to_thread(send) == 403  # carol's own ACLs apply, not the super user's she claimed
    assert registry.store.core.subjects() == []


async def test_each_connection_takes_the_current_tls_context(certs: Path, acls: Acls) -> None:
    """Renewed certificate files apply from the next connection on: every handshake asks for the context."""
    r = Registry(certs, "requested", acls)
    current = r.listener.tls
    assert current is not None
    asked: list[int] = []

    def counted() -> ssl.SSLContext:
        asked.append(1)
        return current()

    r.listener.tls = counted
    await r.listener.start()
    try:
        for _ in range(3):
            assert (await r.call("GET", "/schemas/types", user=ADMIN))[0] == 200
        assert len(asked) == 1 + 3  # the listener's first context, then one per connection
    finally:
        await r.listener.stop()

"""Which gRPC calls escape client quotas (broker/throttling.py's ``QuotaInterceptor``): calls shaped as a broker's
(a follower's fetch, the inter-broker mark, the broker-to-broker methods) from a caller that may perform
ClusterAction; with an authorizer, a client that forges those shapes is held by its mute like any other call."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from odradek.broker.quotas.manager import QuotaConfig
from odradek.broker.security.grpc_auth import CallContext
from odradek.broker.throttling import BrokerQuotas, ClientIdentity, QuotaInterceptor
from odradek.client.common.access import OPEN, AccessControl, AuthorizerSettings
from odradek.client.connection import CLIENT_ID_KEY, INTER_BROKER_KEY
from odradek.client.quotas import PRODUCER_BYTE_RATE, entity

PEER = "ipv4:127.0.0.1:40000"
CLIENT = "c1"
NODE = "User:CN=node-4,O=odradek"


class Context:
    def __init__(self, marked: bool) -> None:
        self.metadata = ((CLIENT_ID_KEY, CLIENT),) + (((INTER_BROKER_KEY, "1"),) if marked else ())

    def peer(self) -> str:
        return PEER

    def invocation_metadata(self) -> Any:
        return self.metadata


async def answered_while_muted(access: AccessControl, principal: str, api: str, request: Any, marked: bool) -> bool:
    """Whether the call gets through although its client is muted for a minute (that is: it is exempt)."""
    quota_image = SimpleNamespace(client_quotas={entity(client_id=CLIENT): {PRODUCER_BYTE_RATE: 1000}})
    quotas = BrokerQuotas(QuotaConfig(), lambda: quota_image)  # type: ignore[arg-type,return-value]
    quotas.refresh()
    user = principal.partition(":")[2]
    quotas.mutes.mute(ClientIdentity(PEER, user, CLIENT), quotas.clock() + 60_000)

    async def inner(_request: Any, _context: Any) -> Any:
        return SimpleNamespace(throttle_time_ms=0)

    handle = QuotaInterceptor(quotas, access).wrap(api, inner)
    assert handle is not None

    async def call() -> Any:
        # as the authentication interceptor hands the call inward
        return await handle(request, CallContext(Context(marked), principal=principal))

    task = asyncio.ensure_future(call())
    done, _ = await asyncio.wait([task], timeout=0.3)
    task.cancel()
    return bool(done)


FOLLOWER_FETCH = ("Fetch", SimpleNamespace(replica_id=4), False)
MARKED_METADATA = ("Metadata", SimpleNamespace(), True)
MARKERS = ("WriteTxnMarkers", SimpleNamespace(), False)
SHAPES = [FOLLOWER_FETCH, MARKED_METADATA, MARKERS]


@pytest.mark.parametrize(("api", "request_", "marked"), SHAPES)
async def test_a_node_principal_is_exempt_and_a_client_forging_the_shape_is_held(
    api: str, request_: Any, marked: bool
) -> None:
    access = AccessControl(AuthorizerSettings(super_users=frozenset({NODE})))
    assert await answered_while_muted(access, NODE, api, request_, marked)
    assert not await answered_while_muted(access, "User:mallory", api, request_, marked)


async def test_a_plain_client_call_is_held_even_from_a_node() -> None:
    access = AccessControl(AuthorizerSettings(super_users=frozenset({NODE})))
    assert not await answered_while_muted(access, NODE, "Metadata", SimpleNamespace(), False)


async def test_without_an_authorizer_the_broker_shapes_are_exempt_from_anyone() -> None:
    for api, request_, marked in SHAPES:
        assert await answered_while_muted(OPEN, "User:ANONYMOUS", api, request_, marked)

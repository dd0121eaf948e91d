"""Produce quotas through the Kafka listener's dispatcher and its real Produce handler: an acks=0 producer gets no
answer to read a throttle from, so the throttle must mute it (hold its next request), as Kafka mutes the channel."""

from __future__ import annotations

import asyncio
import struct
import time
from types import SimpleNamespace
from typing import Any

from kafka.protocol.producer import ProduceRequest

from odradek.broker.api.data import ProduceResult
from odradek.broker.kafka.apis import ApiRegistry
from odradek.broker.kafka.data_apis import produce_api
from odradek.broker.kafka.dispatch import KafkaDispatcher, may_release
from odradek.broker.kafka.wire import ConnectionInfo, KafkaContext
from odradek.broker.quotas.manager import QuotaConfig
from odradek.broker.throttling import BrokerQuotas, ClientIdentity, quota_user
from odradek.client.common.access import OPEN
from odradek.client.quotas import ANONYMOUS, PRODUCER_BYTE_RATE, entity
from odradek.client.record.builder import encode_batch

CLIENT = "greedy"
CONNECTION = ConnectionInfo(1, "KAFKA", "127.0.0.1", 50000)
THROTTLE_MS = 200
VERSION = 7  # request header v1


class FakeData:
    """The data service's produce as seen by the handler: every partition appended, the quota's throttle decided."""

    def __init__(self) -> None:
        self.calls: list[float] = []
        self.contexts: list[Any] = []
        self.service = self  # the servicer's data service, as the handler reaches it

    async def produce(self, acks: int, timeout_ms: int, transactional_id: str | None, topics: Any, ctx: Any) -> tuple:
        self.calls.append(time.monotonic())
        self.contexts.append(ctx)
        answers = [(name, [ProduceResult(index, base_offset=0) for index, _ in parts]) for name, parts in topics]
        return answers, THROTTLE_MS


def produce_frame(acks: int, correlation_id: int) -> memoryview:
    topic, partition = ProduceRequest.TopicProduceData, ProduceRequest.TopicProduceData.PartitionProduceData
    body = ProduceRequest[VERSION](
        transactional_id=None,
        acks=acks,
        timeout_ms=1000,
        topic_data=[topic(name="t", partition_data=[partition(index=0, records=encode_batch([b"x"], None, 0))])],
    ).encode(version=VERSION)
    header = struct.pack(">hhih", 0, VERSION, correlation_id, len(CLIENT)) + CLIENT.encode()
    return memoryview(header + body)


def dispatcher(quota: bool = True) -> tuple[KafkaDispatcher, BrokerQuotas, FakeData]:
    data = FakeData()
    registry = ApiRegistry()
    registry.add(*produce_api(SimpleNamespace(data=data, access=OPEN)))  # type: ignore[arg-type]
    configured = {entity(client_id=CLIENT): {PRODUCER_BYTE_RATE: 1000}} if quota else {}
    image = SimpleNamespace(client_quotas=configured)
    quotas = BrokerQuotas(QuotaConfig(), lambda: image)  # type: ignore[arg-type, return-value]
    return KafkaDispatcher(registry, quotas), quotas, data


def test_a_throttled_acks0_produce_sends_nothing_and_mutes_the_client() -> None:
    dispatch, quotas, data = dispatcher()
    who = ClientIdentity(KafkaContext(CONNECTION, CLIENT).peer, ANONYMOUS, CLIENT)

    async def scenario() -> None:
        assert await dispatch(CONNECTION, produce_frame(0, 1)) is None
        assert quotas.mutes.remaining_ms(who, quotas.clock()) > THROTTLE_MS // 2
        # The client's next request waits for the mute before it is handled.
        await dispatch(CONNECTION, produce_frame(0, 2))
        assert data.calls[1] - data.calls[0] >= 0.9 * THROTTLE_MS / 1000

    asyncio.run(asyncio.wait_for(scenario(), 10))


def test_a_throttled_acks1_produce_answers_with_the_throttle() -> None:
    dispatch, _, _ = dispatcher()

    async def scenario() -> None:
        response = await dispatch(CONNECTION, produce_frame(1, 1))
        assert response is not None and response.throttle_ms == THROTTLE_MS

    asyncio.run(asyncio.wait_for(scenario(), 10))


def test_the_quota_user_is_the_connections_authenticated_principal() -> None:
    """The client a produce is charged to names the SASL-authenticated user of its connection (a /config/users/
    quota applies to it), and ANONYMOUS on a connection without authentication."""
    dispatch, _, data = dispatcher()
    seen: list[str] = []
    produce = data.produce

    async def charged_to(*args: Any) -> tuple:
        ctx = args[4]
        assert ctx.quotas_apply
        seen.append(quota_user(ctx.principal))
        return await produce(*args)

    data.produce = charged_to  # type: ignore[method-assign]
    alice = ConnectionInfo(2, "SASL_PLAINTEXT", "127.0.0.1", 50001)
    alice.state.sasl = SimpleNamespace(  # type: ignore[assignment]
        principal="User:alice", authenticated=True, check=lambda *_: None, close_reason=None
    )

    async def scenario() -> None:
        await dispatch(alice, produce_frame(1, 1))
        await dispatch(CONNECTION, produce_frame(1, 2))

    asyncio.run(asyncio.wait_for(scenario(), 10))
    assert seen == ["alice", ANONYMOUS]


def test_quota_user_takes_the_name_of_a_user_principal() -> None:
    assert quota_user("User:alice") == "alice"
    assert quota_user("User:CN=broker-1,O=odradek") == "CN=broker-1,O=odradek"
    assert quota_user("User:ANONYMOUS") == ANONYMOUS
    assert quota_user("Group:admins") == ANONYMOUS


def test_a_registry_given_as_a_callable_is_built_once_at_the_first_request() -> None:
    """Nodes pass the API catalog as a callable: kafka-python's message definitions load only when a Kafka client
    first talks to the listener."""
    data = FakeData()
    built: list[ApiRegistry] = []

    def build() -> ApiRegistry:
        registry = ApiRegistry()
        registry.add(*produce_api(SimpleNamespace(data=data, access=OPEN)))  # type: ignore[arg-type]
        built.append(registry)
        return registry

    dispatch = KafkaDispatcher(build)
    assert built == []

    async def scenario() -> None:
        for correlation_id in (1, 2):
            response = await dispatch(CONNECTION, produce_frame(1, correlation_id))
            assert response is not None

    asyncio.run(asyncio.wait_for(scenario(), 10))
    assert len(built) == 1 and len(data.calls) == 2


def test_a_produce_may_release_its_connection_only_where_no_quota_applies() -> None:
    """The listener's release reaches the data service (called once the batches are appended) only when no client
    quota is configured: a throttled client is muted after its answer, so its next request must wait for it."""
    released: list[int] = []

    async def scenario(quota: bool) -> Any:
        dispatch, _, data = dispatcher(quota)
        await dispatch(CONNECTION, produce_frame(-1, 1), lambda: released.append(1))
        [ctx] = data.contexts
        return ctx.appended

    assert asyncio.run(scenario(quota=True)) is None
    appended = asyncio.run(scenario(quota=False))
    assert appended is not None
    appended()
    assert released == [1]


def test_only_produce_requests_may_release_their_connection() -> None:
    fetch = struct.pack(">hhih", 1, 12, 1, len(CLIENT)) + CLIENT.encode()
    assert may_release(bytearray(produce_frame(-1, 1)))
    assert not may_release(bytearray(fetch))

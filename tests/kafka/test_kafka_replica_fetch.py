"""Followers fetching over the Kafka listener (``replica.fetch.protocol = kafka``).

The codec: the replica Fetch v16 a follower encodes decodes, with the listener's own decoder, to the same replica id,
broker epoch and positions; the leader's answer with odradek's tags decodes to the same values; kafka-python still
reads such an answer (it skips unknown tags); malformed answers raise only ProtocolError.

The leader: a real leader partition behind a real BrokerService, a real KafkaListener and the real Fetch handler.
For the same request, the Kafka path gives the follower exactly the values the gRPC path gives (records, offsets,
divergence, errors, a stale broker epoch), and a follower's fetcher over the Kafka path catches up byte for byte.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.protocol.consumer import FetchResponse
from kafka_harness import CONTEXT, mangle

from odradek.broker.dataplane import BrokerService
from odradek.broker.fetch_response import (
    FetchedPartition,
    FetchFailedError,
    FetchRefusedError,
    PartitionFetch,
    ReplicaFetchRequest,
)
from odradek.broker.fetcher import FetcherConfig, ReplicaFetcherManager, fetch_request_proto
from odradek.broker.kafka.apis import ApiRegistry
from odradek.broker.kafka.data_apis import fetch_api
from odradek.broker.kafka.dispatch import KafkaDispatcher
from odradek.broker.kafka.fetch_codec import (
    FetchPartitionResult,
    FetchTopicResult,
    decode_fetch_request,
    encode_fetch_response,
)
from odradek.broker.kafka.header import read_request_header
from odradek.broker.kafka.replica_connection import KafkaTransport
from odradek.broker.kafka.replica_fetch import (
    REPLICA_FETCH_VERSION,
    decode_replica_fetch_response,
    encode_replica_fetch,
)
from odradek.broker.kafka.server import KafkaListener
from odradek.broker.kafka.wire import ProtocolError, RequestHeader
from odradek.broker.log.log import Log
from odradek.broker.partition import Divergence, Partition
from odradek.client.common.access import OPEN
from odradek.client.common.metadata_image import PartitionRegistration
from odradek.client.errors import ErrorCode
from odradek.client.record.builder import encode_batch

untimed = settings(deadline=None, max_examples=60)

I16 = st.integers(-(2**15), 2**15 - 1)
I32 = st.integers(-(2**31), 2**31 - 1)
I64 = st.integers(-(2**63), 2**63 - 1)
NAMES = st.text(min_size=1, max_size=12)
IDS = st.binary(min_size=16, max_size=16)
LEADER, FOLLOWER, EPOCH, BROKER_EPOCH = 1, 2, 3, 10
TOPIC_ID = b"\x07" * 16
MAX_BYTES = 1 << 20


# ---- the codec ----


@st.composite
def replica_requests(draw: st.DrawFn) -> tuple[ReplicaFetchRequest, dict[str, bytes]]:
    names = draw(st.lists(NAMES, max_size=3, unique=True))
    ids = {name: draw(IDS) for name in names}
    topics = [
        (name, draw(st.lists(st.builds(PartitionFetch, I32, I32, I64, I32, I64, I32, I64), max_size=3)))
        for name in names
    ]
    request = ReplicaFetchRequest(draw(st.integers(0, 2**31 - 1)), draw(I64), draw(I32), draw(I32), draw(I32), topics)
    return request, ids


@untimed
@given(drawn=replica_requests(), correlation=st.integers(0, 2**31 - 1))
def test_the_replica_request_decodes_on_the_listener_to_the_same_replica_and_positions(
    drawn: tuple[ReplicaFetchRequest, dict[str, bytes]], correlation: int
) -> None:
    request, ids = drawn
    frame = encode_replica_fetch(request, correlation, "odradek-replica-2", ids.get)
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4
    header = read_request_header(memoryview(frame[4:]), lambda key, version: version >= 12)
    assert (header.api_key, header.api_version, header.correlation_id) == (1, 16, correlation)
    decoded = decode_fetch_request(memoryview(frame[4:])[header.size :], header.api_version)
    assert (decoded.replica_id, decoded.replica_epoch) == (request.replica_id, request.replica_epoch)
    assert (decoded.max_wait_ms, decoded.min_bytes, decoded.max_bytes) == request[2:5]
    assert (decoded.session_id, decoded.session_epoch, decoded.isolation_level) == (0, -1, 0)
    got = [
        (t.topic_id, [PartitionFetch(*(getattr(p, f) for f in PartitionFetch._fields)) for p in t.partitions])
        for t in decoded.topics
    ]
    assert got == [(ids[name], parts) for name, parts in request.topics]


def test_a_topic_the_follower_no_longer_knows_is_left_out_of_the_request() -> None:
    parts = [PartitionFetch(0, 1, 5, 1, 0, 100)]
    request = ReplicaFetchRequest(2, 10, 500, 1, 1000, [("gone", parts), ("t", parts)])
    frame = encode_replica_fetch(request, 1, "r", {"t": TOPIC_ID}.get)
    header = read_request_header(memoryview(frame[4:]), lambda key, version: True)
    decoded = decode_fetch_request(memoryview(frame[4:])[header.size :], 16)
    assert [t.topic_id for t in decoded.topics] == [TOPIC_ID]


@st.composite
def replica_answers(draw: st.DrawFn) -> tuple[dict[bytes, str], list[FetchTopicResult]]:
    names = {draw(IDS): name for name in draw(st.lists(NAMES, max_size=3, unique=True))}
    topics = []
    for topic_id in names:
        parts = []
        for index in draw(st.lists(I32, max_size=3, unique=True)):
            parts.append(
                FetchPartitionResult(
                    index,
                    draw(I16),
                    draw(I64),
                    draw(I64),
                    draw(I64),
                    aborted_transactions=draw(st.none() | st.lists(st.tuples(I64, I64), max_size=2)),
                    records=draw(st.none() | st.binary(max_size=40)),
                    diverging_epoch=draw(st.none() | st.tuples(I32, I64)),
                    current_leader=draw(st.none() | st.tuples(I32, I32)),
                    log_end_offset=draw(I64),
                    all_replicas_offset=draw(I64),
                )
            )
        topics.append(FetchTopicResult("", topic_id, parts))
    return names, topics


def expected(names: dict[bytes, str], topics: list[FetchTopicResult]) -> dict[tuple[str, int], FetchedPartition]:
    out = {}
    for t in topics:
        for p in t.partitions:
            error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if p.error_code == 100 else p.error_code
            diverging = None if p.diverging_epoch is None else Divergence(*p.diverging_epoch)
            records = bytes(p.records) if p.records is not None else b""  # type: ignore[arg-type]
            out[(names[t.topic_id], p.partition_index)] = FetchedPartition(
                error,
                records,
                p.high_watermark,
                p.log_start_offset,
                p.log_end_offset,  # type: ignore[arg-type]
                diverging,
                p.all_replicas_offset,  # type: ignore[arg-type]
            )
    return out


def answer_frame(correlation: int, topics: list[FetchTopicResult], error_code: int = 0) -> bytes:
    """The leader's answer as the listener sends it: response header v1, then the encoded body."""
    body = encode_fetch_response(REPLICA_FETCH_VERSION, topics, 0, error_code)
    return correlation.to_bytes(4, "big") + b"\x00" + b"".join(bytes(c) for c in body)  # type: ignore[arg-type]


@untimed
@given(drawn=replica_answers(), error_code=I16)
def test_the_leaders_answer_decodes_to_the_same_values(
    drawn: tuple[dict[bytes, str], list[FetchTopicResult]], error_code: int
) -> None:
    names, topics = drawn
    answer = decode_replica_fetch_response(answer_frame(9, topics, error_code), 9, names.get)
    assert answer.error_code == error_code
    assert answer.partitions == expected(names, topics)


def test_a_partition_of_an_unknown_topic_id_is_dropped_and_another_requests_answer_is_refused() -> None:
    part = FetchPartitionResult(0, 0, 5, 5, 0, records=b"", log_end_offset=5, all_replicas_offset=5)
    frame = answer_frame(4, [FetchTopicResult("", TOPIC_ID, [part]), FetchTopicResult("", b"\x01" * 16, [part])])
    assert set(decode_replica_fetch_response(frame, 4, {TOPIC_ID: "t"}.get).partitions) == {("t", 0)}
    with pytest.raises(ProtocolError, match="request 4, not 5"):
        decode_replica_fetch_response(frame, 5, {TOPIC_ID: "t"}.get)


def test_an_answer_without_odradeks_follower_values_is_refused() -> None:
    """Without the leader's log end offset an out-of-range answer would truncate to -1: no such answer is used."""
    part = FetchPartitionResult(0, ErrorCode.OFFSET_OUT_OF_RANGE, -1, -1, 0)
    with pytest.raises(ProtocolError, match="lacks the leader's log end"):
        decode_replica_fetch_response(answer_frame(1, [FetchTopicResult("", TOPIC_ID, [part])]), 1, {TOPIC_ID: "t"}.get)


@untimed
@given(drawn=replica_answers())
def test_kafka_python_reads_a_replica_answer_and_skips_odradeks_tags(
    drawn: tuple[dict[bytes, str], list[FetchTopicResult]],
) -> None:
    _, topics = drawn
    body = b"".join(bytes(c) for c in encode_fetch_response(REPLICA_FETCH_VERSION, topics))  # type: ignore[arg-type]
    decoded = FetchResponse.decode(body, version=REPLICA_FETCH_VERSION)
    got = [
        (
            bytes(16) if t.topic_id is None else t.topic_id.bytes,
            [(p.partition_index, p.high_watermark, p.records) for p in t.partitions],
        )
        for t in decoded.responses
    ]
    assert got == [
        # no records go out as an empty set
        (t.topic_id, [(p.partition_index, p.high_watermark, p.records or b"") for p in t.partitions])
        for t in topics
    ]


@untimed
@given(drawn=replica_answers(), data=st.data())
def test_a_malformed_answer_raises_only_protocol_error(
    drawn: tuple[dict[bytes, str], list[FetchTopicResult]], data: st.DataObject
) -> None:
    names, topics = drawn
    frame = mangle(answer_frame(3, topics), data)
    with contextlib.suppress(ProtocolError):
        decode_replica_fetch_response(frame, 3, names.get)


# ---- the leader's handler and a follower's connection, against a real leader ----


class Replicas:
    """The slice of ReplicaManager that BrokerService uses: one leader replica of t-0, and the image."""

    def __init__(self, leader: Partition, image: Any) -> None:
        self.partitions = {("t", 0): leader}
        self.image = image

    def get(self, topic: str, partition: int) -> Partition:
        from odradek.client.errors import UnknownTopicOrPartitionError

        found = self.partitions.get((topic, partition))
        if found is None:
            raise UnknownTopicOrPartitionError(f"{topic}-{partition}")
        return found


def registration(epoch: int = EPOCH) -> PartitionRegistration:
    return PartitionRegistration(TOPIC_ID, 0, (LEADER, FOLLOWER), (LEADER, FOLLOWER), LEADER, epoch, 0)


class Leader:
    """Broker 1 leading t-0 (offsets 0..101 at epoch 3), serving Fetch over gRPC (the servicer) and its Kafka
    listener."""

    def __init__(self, root: Path) -> None:
        self.partition = Partition("t", 0, Log.open(root / "leader" / "t-0"), LEADER)
        self.partition.update(registration(), 1, 0)
        self.partition.append_as_leader(encode_batch([b"x"] * 100, timestamps=1_000))
        self.partition.append_as_leader(encode_batch([b"tail-0", b"tail-1"], timestamps=1_000))
        self.image = SimpleNamespace(
            brokers={
                FOLLOWER: SimpleNamespace(epoch=BROKER_EPOCH),
                LEADER: SimpleNamespace(host="127.0.0.1", port=1, listeners=(), epoch=1),
            },
            topics={TOPIC_ID: SimpleNamespace(name="t")},
            topic_ids={"t": TOPIC_ID},
        )
        self.service = BrokerService(LEADER, "c", Replicas(self.partition, self.image))  # type: ignore[arg-type]
        registry = ApiRegistry()
        registry.add(
            *fetch_api(SimpleNamespace(data=self.service, image=lambda: self.image, access=OPEN, fetch_sessions=None))  # type: ignore[arg-type]
        )
        self.listener = KafkaListener(
            "127.0.0.1", 0, "KAFKA", KafkaDispatcher(registry), max_request_bytes=1 << 20, idle_timeout_ms=60_000
        )
        self.registry = registry

    async def start(self) -> None:
        await self.listener.start()
        self.image.brokers[LEADER].listeners = (("KAFKA", "127.0.0.1", self.listener.port),)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.listener.port}"

    async def close(self) -> None:
        await self.listener.stop()
        self.partition.log.close()


@pytest.fixture
async def leader(tmp_path: Path) -> AsyncIterator[Leader]:
    leader = Leader(tmp_path)
    await leader.start()
    yield leader
    await leader.close()


@pytest.fixture
def follower_log(tmp_path: Path) -> Iterator[Partition]:
    p = Partition("t", 0, Log.open(tmp_path / "follower" / "t-0"), FOLLOWER)
    p.update(registration(), 1, 0)
    yield p
    p.log.close()


def one(
    fetch_offset: int, last_fetched_epoch: int = EPOCH, leader_epoch: int = EPOCH, broker_epoch: int = BROKER_EPOCH
) -> ReplicaFetchRequest:
    part = PartitionFetch(0, leader_epoch, fetch_offset, last_fetched_epoch, 0, MAX_BYTES)
    return ReplicaFetchRequest(FOLLOWER, broker_epoch, 0, 1, 10 * MAX_BYTES, [("t", [part])])


async def over_grpc(leader: Leader, request: ReplicaFetchRequest) -> tuple[int, dict]:
    call = SimpleNamespace(peer=lambda: "ipv4:127.0.0.1:50000", invocation_metadata=lambda: ())
    response = await leader.service.Fetch(fetch_request_proto(request), call)  # type: ignore[arg-type]
    return response.error, {
        (t.name, r.partition): FetchedPartition.from_proto(r) for t in response.topics for r in t.partitions
    }


async def over_kafka(transport: KafkaTransport, request: ReplicaFetchRequest) -> tuple[int, dict]:
    try:
        return 0, await transport.send(request, 5)
    except FetchRefusedError as e:
        return e.code, {}


@pytest.mark.parametrize(
    "request_",
    [
        pytest.param(one(0, -1), id="from the start"),
        pytest.param(one(100), id="mid-log"),
        pytest.param(one(102), id="at the end"),
        pytest.param(one(50, last_fetched_epoch=2), id="diverging"),
        pytest.param(one(500), id="out of range"),
        pytest.param(one(0, -1, leader_epoch=2), id="fenced leader epoch"),
        pytest.param(one(0, -1, leader_epoch=4), id="unknown leader epoch"),
        pytest.param(one(0, -1, broker_epoch=BROKER_EPOCH - 1), id="stale broker epoch"),
    ],
)
async def test_the_kafka_path_gives_the_follower_what_the_grpc_path_gives(
    leader: Leader, request_: ReplicaFetchRequest
) -> None:
    transport = KafkaTransport(leader.address, FOLLOWER, lambda: leader.image)  # type: ignore[arg-type,return-value]
    try:
        grpc_answer = await over_grpc(leader, request_)
        kafka_answer = await over_kafka(transport, request_)
    finally:
        await transport.close()
    assert kafka_answer == grpc_answer
    assert grpc_answer[0] or grpc_answer[1]  # every case has something to compare


async def test_a_replica_fetch_reaches_the_data_service_with_the_replicas_id_and_epoch_as_file_slices(
    leader: Leader, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[tuple[Any, bool]] = []
    real = leader.service.service.fetch

    async def fetch(request: Any, ctx: Any, as_file: bool = False, session: Any = None) -> Any:
        calls.append((request, as_file))
        return await real(request, ctx, as_file, session)

    monkeypatch.setattr(leader.service.service, "fetch", fetch)
    transport = KafkaTransport(leader.address, FOLLOWER, lambda: leader.image)  # type: ignore[arg-type,return-value]
    try:
        await transport.send(one(0, -1), 5)
    finally:
        await transport.close()
    [(request, as_file)] = calls
    assert as_file and (request.replica_id, request.replica_epoch) == (FOLLOWER, BROKER_EPOCH)
    part = request.topics[0].partitions[0]
    assert (request.topics[0].name, part.partition, part.fetch_offset, part.last_fetched_epoch) == ("t", 0, 0, -1)
    assert leader.partition.log.high_watermark == 0  # the follower's progress (offset 0) was recorded: HW at 0


@pytest.mark.parametrize("path", ["grpc", "kafka"])
async def test_the_followers_durable_offset_reaches_the_leaders_tombstone_horizon(leader: Leader, path: str) -> None:
    """A follower that appended up to 102 but fsynced only up to 40 holds durably only that much: the leader's
    horizon, and the offset its answer tells the follower, stop there."""
    leader.partition.log.flush()  # the leader's own log is fsynced to its end
    part = PartitionFetch(0, EPOCH, 102, EPOCH, 0, MAX_BYTES, 40)
    request = ReplicaFetchRequest(FOLLOWER, BROKER_EPOCH, 0, 1, 10 * MAX_BYTES, [("t", [part])])
    transport = KafkaTransport(leader.address, FOLLOWER, lambda: leader.image)  # type: ignore[arg-type,return-value]
    try:
        error, answers = await (over_grpc(leader, request) if path == "grpc" else over_kafka(transport, request))
    finally:
        await transport.close()
    assert not error and answers[("t", 0)].all_replicas_offset == 40
    assert (leader.partition.log.high_watermark, leader.partition.tombstone_horizon()) == (102, 40)


def empty_fetch(version: int, replica_id: int) -> Any:
    """kafka-python's Fetch request of no partitions, from a replica (``replica_id`` >= 0) or a consumer (-1)."""
    from kafka.protocol.consumer import FetchRequest

    return FetchRequest[version](
        replica_id=replica_id,
        max_wait_ms=0,
        min_bytes=1,
        max_bytes=MAX_BYTES,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=[],
        forgotten_topics_data=[],
        rack_id="",
    )


async def test_a_replica_fetch_below_v15_has_no_broker_epoch_and_is_refused(leader: Leader) -> None:

    _, handle = leader.registry.get(1)  # type: ignore[misc]
    for version in (12, 14):
        body = empty_fetch(version, FOLLOWER).encode(version=version)
        with pytest.raises(ProtocolError, match="v15"):
            await handle(CONTEXT, RequestHeader(1, version, 1, "r", 0), memoryview(body))


# The held consumer fetch is cancelled during its mute: its handler coroutine is closed, never left un-awaited.
@pytest.mark.filterwarnings("error")
async def test_a_replica_fetch_is_exempt_from_client_quotas_as_on_grpc(leader: Leader) -> None:
    """A muted client's requests are held; a follower's fetch, from the very same identity, is not."""

    from odradek.broker.quotas.manager import QuotaConfig
    from odradek.broker.throttling import BrokerQuotas, ClientIdentity
    from odradek.client.quotas import ANONYMOUS, PRODUCER_BYTE_RATE, entity

    client = "odradek-replica-2"
    quota_image = SimpleNamespace(client_quotas={entity(client_id=client): {PRODUCER_BYTE_RATE: 1000}})
    quotas = BrokerQuotas(QuotaConfig(), lambda: quota_image)  # type: ignore[arg-type,return-value]
    dispatch = KafkaDispatcher(leader.registry, quotas)
    connection = CONTEXT.connection
    quotas.refresh()
    peer = type(CONTEXT)(connection, client).peer
    quotas.mutes.mute(ClientIdentity(peer, ANONYMOUS, client), quotas.clock() + 60_000)

    replica_frame = encode_replica_fetch(one(0, -1), 1, client, leader.image.topic_ids.get)[4:]
    async with asyncio.timeout(5):
        answered = await dispatch(connection, memoryview(replica_frame))
    assert answered is not None

    consumer = empty_fetch(12, -1)
    consumer.with_header(correlation_id=2, client_id=client)
    held = asyncio.ensure_future(dispatch(connection, memoryview(consumer.encode(header=True))))
    done, _ = await asyncio.wait([held], timeout=0.5)
    held.cancel()
    assert not done  # the mute (60 s) holds the client's own fetch


@pytest.mark.filterwarnings("error")
async def test_with_an_authorizer_only_a_node_principal_escapes_quotas_with_a_replica_fetch(leader: Leader) -> None:
    """A client that shapes its fetch as a follower's is held by its mute like any of its requests; the same
    fetch from a principal that may perform ClusterAction (a node, a super user here) is not."""

    from odradek.broker.kafka.wire import ConnectionState
    from odradek.broker.quotas.manager import QuotaConfig
    from odradek.broker.throttling import BrokerQuotas, ClientIdentity
    from odradek.client.common.access import AccessControl, AuthorizerSettings
    from odradek.client.quotas import PRODUCER_BYTE_RATE, entity

    client = "odradek-replica-2"
    quota_image = SimpleNamespace(client_quotas={entity(client_id=client): {PRODUCER_BYTE_RATE: 1000}})
    quotas = BrokerQuotas(QuotaConfig(), lambda: quota_image)  # type: ignore[arg-type,return-value]
    access = AccessControl(AuthorizerSettings(super_users=frozenset({"User:node-1"})))
    dispatch = KafkaDispatcher(leader.registry, quotas, access=access)
    quotas.refresh()
    frame = encode_replica_fetch(one(0, -1), 1, client, leader.image.topic_ids.get)[4:]
    for user, exempt in (("mallory", False), ("node-1", True)):
        base = CONTEXT.connection
        connection = type(base)(
            base.connection_id, base.listener, base.peer_host, base.peer_port, ConnectionState(None, f"User:{user}")
        )
        peer = type(CONTEXT)(connection, client).peer
        quotas.mutes.mute(ClientIdentity(peer, user, client), quotas.clock() + 60_000)
        fetched = asyncio.ensure_future(dispatch(connection, memoryview(frame)))
        done, _ = await asyncio.wait([fetched], timeout=0.5 if not exempt else 5)
        fetched.cancel()
        assert bool(done) is exempt, user


async def test_the_connection_reconnects_after_the_leader_closed_it(leader: Leader) -> None:
    transport = KafkaTransport(leader.address, FOLLOWER, lambda: leader.image)  # type: ignore[arg-type,return-value]
    try:
        await transport.send(one(0, -1), 5)
        await leader.listener.stop()  # closes every connection
        with pytest.raises(FetchFailedError):
            await transport.send(one(0, -1), 5)
        await leader.listener.start()  # on the same port
        assert (await transport.send(one(0, -1), 5))[("t", 0)].error == ErrorCode.NONE
        assert transport.connects == 2
    finally:
        await transport.close()


async def test_an_answer_size_past_the_fetch_bound_fails_the_fetch_without_allocating_it() -> None:
    """A corrupt size prefix (here 1 GiB) fails the fetch and drops the connection; nothing that large is read."""

    async def lying_leader(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        (size,) = struct.unpack(">i", await reader.readexactly(4))
        await reader.readexactly(size)
        writer.write(struct.pack(">i", 1 << 30) + b"x" * 100)
        await writer.drain()

    server = await asyncio.start_server(lying_leader, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    image = SimpleNamespace(topic_ids={}, topics={})
    transport = KafkaTransport(f"127.0.0.1:{port}", FOLLOWER, lambda: image)  # type: ignore[arg-type,return-value]
    try:
        with pytest.raises(FetchFailedError, match="answer of size 1073741824"):
            await transport.send(ReplicaFetchRequest(FOLLOWER, BROKER_EPOCH, 0, 1, MAX_BYTES, []), 5)
        assert transport._streams is None
    finally:
        await transport.close()
        server.close()
        await server.wait_closed()


async def test_a_follower_with_replica_fetch_protocol_kafka_catches_up_over_the_kafka_listener(
    leader: Leader, follower_log: Partition
) -> None:
    config = FetcherConfig(max_wait_ms=50, backoff_ms=50, protocol="kafka")
    manager = ReplicaFetcherManager(FOLLOWER, lambda: BROKER_EPOCH, lambda: leader.image, config)  # type: ignore[arg-type,return-value]
    try:
        assert manager.target_of(LEADER) == ("kafka", leader.address)
        manager.assign(follower_log)
        # The leader's gRPC address (port 1) has no server: catching up proves the Kafka path.
        async with asyncio.timeout(10):
            while follower_log.log.high_watermark < 102:  # appended, reported, and the leader's HW taken back
                await asyncio.sleep(0.02)
    finally:
        await manager.close()
    leader_bytes = bytes(leader.partition.log.read(0, MAX_BYTES).records)
    assert bytes(follower_log.log.read(0, MAX_BYTES).records) == leader_bytes
    assert leader.partition.log.high_watermark == 102
    assert leader.listener.connection_count <= 1


def test_a_leader_without_a_kafka_listener_is_fetched_from_over_grpc(caplog: pytest.LogCaptureFixture) -> None:
    image = SimpleNamespace(brokers={LEADER: SimpleNamespace(host="h", port=7, listeners=(("OTHER", "h", 8),))})
    manager = ReplicaFetcherManager(FOLLOWER, lambda: 1, lambda: image, FetcherConfig(protocol="kafka"))  # type: ignore[arg-type,return-value]
    with caplog.at_level("INFO"):
        assert manager.target_of(LEADER) == ("grpc", "h:7")
        assert manager.target_of(LEADER) == ("grpc", "h:7")
    assert sum("advertises no Kafka listener" in r.getMessage() for r in caplog.records) == 1  # once per leader
    image.brokers[LEADER].listeners = (("KAFKA", "h", 9),)
    assert manager.target_of(LEADER) == ("kafka", "h:9")
    grpc_only = ReplicaFetcherManager(FOLLOWER, lambda: 1, lambda: image, FetcherConfig())  # type: ignore[arg-type,return-value]
    assert grpc_only.target_of(LEADER) == ("grpc", "h:7")


def test_an_unknown_protocol_is_refused() -> None:
    with pytest.raises(ValueError, match=r"replica\.fetch\.protocol"):
        FetcherConfig(protocol="http")

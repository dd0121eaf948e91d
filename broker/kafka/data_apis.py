"""Produce and Fetch on the Kafka listener: the hot path, with hand-written codecs and no copy of record data.

A produce request's record batches are memoryview slices of the request frame, appended as they are by the
broker's one produce implementation (``BrokerService.produce``). A fetch is served by the broker's one fetch
implementation (``BrokerService.fetch``) asked for file slices of the segments, which the listener sends with
sendfile. What these handlers add is only the translation: Kafka's versions, record formats before v2 refused
with UNSUPPORTED_FOR_MESSAGE_FORMAT, topic ids (Fetch v13+), and leader hints with the leader's Kafka address
(KIP-951) so clients re-route without a metadata round trip.

Followers may fetch here too (``replica.fetch.protocol = kafka``, from Fetch v15): the same ``BrokerService.fetch``
serves them; their requests carry their recovery point, and their answers the leader's log end offset and
all-replicas offset, in tags of odradek's own (replica_fetch.py).

Fetch sessions (KIP-227) from v7: the handler only maps the request onto the session cache (fetch_session.py) and
its shell (fetch_sessions.py): a full request with epoch 0 gets a session created from its answer, an incremental
one continues its session, whose round reads and waits in BrokerService.fetch in place of the per-partition long
poll and answers only the partitions with news.
"""

from __future__ import annotations

from collections.abc import Callable

from odradek.broker.api.data import FetchAnswer, FetchRequest, FetchTopic, LeaderHint, ProduceResult
from odradek.broker.fetch_session import (
    FETCH_SESSION_TOPIC_ID_ERROR,
    INITIAL_EPOCH,
    FetchSession,
    PartitionRead,
    Seen,
    SessionError,
)
from odradek.broker.fetch_sessions import seen_of
from odradek.broker.kafka.apis import ApiRegistry, ApiSpec
from odradek.broker.kafka.backend import KafkaBackend
from odradek.broker.kafka.fetch_codec import (
    FETCH_FLEXIBLE_FROM,
    FETCH_KEY,
    FETCH_MAX_VERSION,
    FETCH_MIN_VERSION,
    NO_TOPIC_ID,
    FetchPartitionResult,
    FetchRequestData,
    FetchTopicResult,
    decode_fetch_request,
    encode_fetch_response,
)
from odradek.broker.kafka.primitives import NodeEndpoint
from odradek.broker.kafka.produce_codec import (
    PRODUCE_FLEXIBLE_FROM,
    PRODUCE_KEY,
    PRODUCE_MAX_VERSION,
    PRODUCE_MIN_VERSION,
    ProducePartitionResult,
    decode_produce_request,
    encode_produce_response,
)
from odradek.broker.kafka.replica_fetch import REPLICA_FETCH_MIN_VERSION
from odradek.broker.kafka.wire import Handler, KafkaContext, NoResponse, ProtocolError, Reply, RequestHeader
from odradek.client.common.file_slice import Chunk, close_chunks
from odradek.client.errors import ErrorCode, error_name

MAGIC_OFFSET = 16  # a record batch's magic byte (a legacy message set has its magic at the same place)
RECORD_FORMAT_VERSION = 2
FIRST_V2_PRODUCE_VERSION = 3  # Produce v0-v2 carry legacy message sets only
NODE_ENDPOINTS_FETCH_VERSION = 16
NODE_ENDPOINTS_PRODUCE_VERSION = 10
UNKNOWN_TOPIC_ID = 100  # Kafka's error for a topic id the broker does not know (Fetch v13+)


class _Hints:
    """Leader hints for re-routing answers, and the Kafka addresses of the leaders they name."""

    def __init__(self, backend: KafkaBackend) -> None:
        self.backend = backend
        self.nodes: dict[int, NodeEndpoint] = {}

    def leader(self, hint: LeaderHint | None) -> tuple[int, int] | None:
        if hint is None or hint.leader_id < 0:
            return None
        found = self.backend.endpoint(hint.leader_id)
        if found is None:
            return None
        broker = self.backend.image().brokers.get(hint.leader_id)
        self.nodes[hint.leader_id] = (hint.leader_id, found[0], found[1], (broker.rack or None) if broker else None)
        return hint.leader_id, hint.leader_epoch

    def endpoints(self) -> list[NodeEndpoint]:
        return [self.nodes[n] for n in sorted(self.nodes)]


class _Encoded:
    """A reply encoded once the final throttle (this handler's and the request quota's) is known."""

    __slots__ = ("_encode", "throttle_ms")

    def __init__(self, throttle_ms: int, encode: Callable[[int], list[Chunk]]) -> None:
        self.throttle_ms = throttle_ms
        self._encode = encode

    def encode(self, throttle_ms: int) -> list[Chunk]:
        return self._encode(max(throttle_ms, self.throttle_ms))


# ---- Produce ----


def _produce_result(r: ProduceResult, topic: str, backend: KafkaBackend, hints: _Hints) -> ProducePartitionResult:
    e = r.error
    if e is None:
        return ProducePartitionResult(r.partition, 0, r.base_offset, r.log_append_time_ms, r.log_start_offset)
    leader = hints.leader(backend.data.service.leader_hint(topic, r.partition, e))
    return ProducePartitionResult(r.partition, e.code, -1, -1, -1, error_message=str(e), current_leader=leader)


def _legacy_format(records: memoryview | None) -> bool:
    return records is not None and len(records) > MAGIC_OFFSET and records[MAGIC_OFFSET] != RECORD_FORMAT_VERSION


def produce_api(backend: KafkaBackend) -> tuple[ApiSpec, Handler]:
    """Produce v0-v11. v0-v2 are advertised because librdkafka enables compression only for brokers that list
    them; their legacy message sets are refused per partition, as are legacy sets in later versions."""
    spec = ApiSpec(PRODUCE_KEY, "Produce", PRODUCE_MIN_VERSION, PRODUCE_MAX_VERSION, PRODUCE_FLEXIBLE_FROM)

    async def handle(ctx: KafkaContext, header: RequestHeader, body: memoryview) -> Reply:
        version = header.api_version
        request = decode_produce_request(body, version)
        refused: dict[tuple[str, int], ProducePartitionResult] = {}
        topics: list[tuple[str, list[tuple[int, memoryview]]]] = []
        for t in request.topics:
            parts: list[tuple[int, memoryview]] = []
            for p in t.partitions:
                if version < FIRST_V2_PRODUCE_VERSION or _legacy_format(p.records):
                    code = ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT
                    refused[(t.name, p.index)] = ProducePartitionResult(
                        p.index, code, -1, error_message="only record batches (magic 2) are supported"
                    )
                elif p.records is None:
                    refused[(t.name, p.index)] = ProducePartitionResult(
                        p.index, ErrorCode.INVALID_RECORD, -1, error_message="no records"
                    )
                else:
                    parts.append((p.index, p.records))
            topics.append((t.name, parts))
        answers, throttle = await backend.data.service.produce(
            request.acks, request.timeout_ms, request.transactional_id, topics, ctx.request_context
        )
        hints = _Hints(backend)
        results: list[tuple[str, list[ProducePartitionResult]]] = []
        failed: list[str] = []
        for (name, answered), t in zip(answers, request.topics, strict=True):
            by_index = {r.partition: _produce_result(r, name, backend, hints) for r in answered}
            out = []
            for p in t.partitions:
                result = refused.get((name, p.index)) or by_index[p.index]
                if result.error_code:
                    failed.append(f"{name}-{p.index}: {error_name(result.error_code)}")
                out.append(result)
            results.append((name, out))
        if request.acks == 0:
            if failed:
                # No answer can carry the error: close the connection, so the client refreshes its metadata.
                raise ProtocolError(f"acks=0 produce failed ({', '.join(failed[:3])}); closing the connection")
            return NoResponse(throttle)  # no answer to carry the throttle: the client is muted instead
        endpoints = hints.endpoints() if version >= NODE_ENDPOINTS_PRODUCE_VERSION else []
        return _Encoded(throttle, lambda ms: [encode_produce_response(version, results, ms, endpoints)])

    return spec, handle


# ---- Fetch ----


def _fetch_results(
    backend: KafkaBackend, answer: FetchAnswer, read_committed: bool, hints: _Hints
) -> dict[str, list[FetchPartitionResult]]:
    out: dict[str, list[FetchPartitionResult]] = {}
    for name, outcomes in answer.outcomes:
        results = out.setdefault(name, [])
        for o in outcomes:
            read, e = o.read, o.error
            if read is None:
                assert e is not None
                leader = hints.leader(backend.data.service.fetch_leader_hint(name, o.partition, e))
                results.append(FetchPartitionResult(o.partition, e.code, -1, -1, -1, current_leader=leader))
                continue
            assert read.data is not None
            lso = read.high_watermark if read.last_stable_offset < 0 else read.last_stable_offset
            aborted = None
            if read_committed:
                aborted = [(txn.producer_id, txn.first_offset) for txn in read.aborted or ()]
            records = read.data.records
            results.append(
                FetchPartitionResult(
                    o.partition,
                    0,
                    read.high_watermark,
                    lso,
                    read.log_start_offset,
                    aborted,
                    records=records if len(records) else b"",
                )
            )
    return out


def _replica_results(backend: KafkaBackend, answer: FetchAnswer) -> dict[str, list[FetchPartitionResult]]:
    """A follower's answer: the values the gRPC Fetch gives a follower, field for field, with the leader's log end
    offset and all-replicas offset in odradek's own tags (replica_fetch.py)."""
    out: dict[str, list[FetchPartitionResult]] = {}
    for name, outcomes in answer.outcomes:
        results = out.setdefault(name, [])
        for o in outcomes:
            read, e = o.read, o.error
            if read is None:
                assert e is not None
                log_start, log_end = backend.data.service.replica_error_bounds(name, o.partition, e)
                results.append(
                    FetchPartitionResult(
                        o.partition, e.code, -1, -1, log_start, log_end_offset=log_end, all_replicas_offset=0
                    )
                )
                continue
            lso = read.high_watermark if read.last_stable_offset < 0 else read.last_stable_offset
            diverging = None if read.diverging is None else (read.diverging.epoch, read.diverging.end_offset)
            records: Chunk = b""
            if diverging is None:
                assert read.data is not None
                records = read.data.records if len(read.data.records) else b""
            results.append(
                FetchPartitionResult(
                    o.partition,
                    0,
                    read.high_watermark,
                    lso,
                    read.log_start_offset,
                    records=records,
                    diverging_epoch=diverging,
                    log_end_offset=read.log_end_offset,
                    all_replicas_offset=read.all_replicas_offset,
                )
            )
    return out


def _close_outcomes(answer: FetchAnswer) -> None:
    for _, outcomes in answer.outcomes:
        for o in outcomes:
            if o.read is not None and o.read.data is not None:
                close_chunks([o.read.data.records])


def _from_a_replica(version: int, body: memoryview) -> bool:
    """A follower's fetch (v15+: below, the handler refuses it), exempt from client quotas as on gRPC. Decodes the
    request a second time, which only happens while client quotas are set."""
    return version >= REPLICA_FETCH_MIN_VERSION and decode_fetch_request(body, version).replica_id >= 0


def _forgotten(request: FetchRequestData, session: FetchSession) -> list[tuple[str, int]]:
    """The partitions an incremental request forgets, by name (by id from v13: the ids the session was given)."""
    out: list[tuple[str, int]] = []
    for f in request.forgotten_topics:
        name = session.topic_names.get(f.topic_id) if f.topic_id != NO_TOPIC_ID else f.topic
        if name is not None:
            out.extend((name, p) for p in f.partitions)
    return out


def _session_partitions(
    topics: list[FetchTopic], ids: dict[str, bytes], answer: FetchAnswer
) -> list[tuple[str, bytes, PartitionRead, Seen]]:
    """A full answer's partitions, as a new session holds them: the position asked for and what was answered."""
    seen = {(name, o.partition): seen_of(o) for name, outcomes in answer.outcomes for o in outcomes}
    return [
        (t.name, ids.get(t.name, NO_TOPIC_ID), p, found)
        for t in topics
        for p in t.partitions
        if (found := seen.get((t.name, p.partition))) is not None
    ]


def fetch_api(backend: KafkaBackend) -> tuple[ApiSpec, Handler]:
    """Fetch v4-v16, for consumers and, from v15 (whose ReplicaState carries the broker epoch that fences a
    restarted follower's old incarnation), for followers (replica_fetch.py) through the same BrokerService.fetch
    the gRPC Fetch serves them with."""
    spec = ApiSpec(
        FETCH_KEY, "Fetch", FETCH_MIN_VERSION, FETCH_MAX_VERSION, FETCH_FLEXIBLE_FROM, inter_broker=_from_a_replica
    )

    async def handle(ctx: KafkaContext, header: RequestHeader, body: memoryview) -> Reply:
        version = header.api_version
        request: FetchRequestData = decode_fetch_request(body, version)
        replica = request.replica_id >= 0
        if replica and version < REPLICA_FETCH_MIN_VERSION:
            raise ProtocolError(f"a replica fetch needs Fetch v{REPLICA_FETCH_MIN_VERSION}+ (its broker epoch)")
        sessions = backend.fetch_sessions if version >= 7 else None
        replica_id = request.replica_id if replica else -1
        image = backend.image()
        unknown: list[FetchTopicResult] = []
        topics: list[FetchTopic] = []
        ids: dict[str, bytes] = {}
        for t in request.topics:
            name = t.topic
            if version >= 13:
                found = image.topics.get(t.topic_id)
                if found is None:
                    missing = [FetchPartitionResult(p.partition, UNKNOWN_TOPIC_ID, -1) for p in t.partitions]
                    unknown.append(FetchTopicResult("", t.topic_id, missing))
                    continue
                name = found.name
                ids[name] = t.topic_id
            topics.append(FetchTopic(name, t.partitions))
        session: FetchSession | None = None
        if sessions is not None and request.session_epoch > 0:
            # Incremental: a topic id this broker does not know cannot be kept in the session (its partitions
            # would never be answered again): the client starts over with a full request, answered sessionless
            # until the id is known.
            got = sessions.continue_session(request.session_id, request.session_epoch, version >= 13, replica_id)
            error = got.code if isinstance(got, SessionError) else FETCH_SESSION_TOPIC_ID_ERROR if unknown else 0
            if error:
                return _Encoded(0, lambda ms: encode_fetch_response(version, [], ms, error_code=error))
            assert isinstance(got, FetchSession)
            session = got
            sessions.update(
                session,
                ((t.name, ids.get(t.name, NO_TOPIC_ID), p) for t in topics for p in t.partitions),
                _forgotten(request, session),
            )
            if session.closed:  # it forgot every partition: nothing left to fetch, and no session
                return _Encoded(0, lambda ms: encode_fetch_response(version, [], ms))
            ids = {**session.topic_ids, **ids}  # answered partitions the request does not list
        elif sessions is not None and request.session_id:
            sessions.close(request.session_id)  # a full request closes the session it names
        fetch = FetchRequest(
            replica_id,
            request.replica_epoch if replica else -1,
            request.max_wait_ms,
            request.min_bytes,
            request.max_bytes,
            request.isolation_level,
            [] if session is not None else topics,
        )
        answer = await backend.data.service.fetch(
            fetch,
            ctx.request_context,
            as_file=True,
            session=None if session is None or sessions is None else sessions.round(session),
        )
        if answer.stale_epoch or answer.error:  # a follower's stale broker epoch, or not authorized to replicate
            if not replica:
                raise ProtocolError("unexpected stale broker epoch on a consumer fetch")
            error = ErrorCode.STALE_BROKER_EPOCH if answer.stale_epoch else answer.error
            return _Encoded(answer.throttle_ms, lambda ms: encode_fetch_response(version, [], ms, error_code=error))
        hints = _Hints(backend)
        try:
            if replica:
                by_topic = _replica_results(backend, answer)
            else:
                by_topic = _fetch_results(backend, answer, request.isolation_level == 1, hints)
        except BaseException:
            _close_outcomes(answer)
            raise
        session_id = 0
        if session is not None:
            session_id = session.id
        elif sessions is not None and request.session_epoch == INITIAL_EPOCH and not unknown and answer.outcomes:
            session_id = sessions.create(replica_id, version >= 13, _session_partitions(topics, ids, answer))
        results = [FetchTopicResult(name, ids.get(name, NO_TOPIC_ID), parts) for name, parts in by_topic.items()]
        endpoints = hints.endpoints() if version >= NODE_ENDPOINTS_FETCH_VERSION else []
        topics_out = results + unknown
        return _Encoded(
            answer.throttle_ms,
            lambda ms: encode_fetch_response(version, topics_out, ms, session_id=session_id, node_endpoints=endpoints),
        )

    return spec, handle


def register(registry: ApiRegistry, backend: KafkaBackend) -> None:
    for spec, handler in (produce_api(backend), fetch_api(backend)):
        registry.add(spec, handler)

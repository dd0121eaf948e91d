"""The HTTP API's routes for the web console (docs/console.md), served as the other routes are (service.py): by the
broker's own typed services with the caller's ``RequestContext``, so that every ACL check is the one the other
listeners make.

What belongs to other brokers is reached in one of two ways. A search runs where the data is: the partitions led
by another broker are searched by that broker (the request forwarded to its HTTP listener with the caller's
credentials, naming its partitions and its share of the scan) and the pages merged here. A topic's sizes and the
metrics are each broker's own, asked of every broker (``Call.fan_out``). Republishing and resetting a group's
offsets read, write and look up offsets of partitions led elsewhere over the brokers' own channel (as the
coordinator's lag poller does), once this broker has checked the caller's ACL for each: Read of the source and
Write of the destination topic, Describe of the topics whose offsets are looked up; the group's commit itself is
the coordinator's, under the caller's principal.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import hashlib
import json
import secrets
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import grpc
import h11

from odradek.broker import http_server
from odradek.broker.groups.requests import (
    GROUP_KEY,
    CommitPartition,
    CommitTopic,
    DescribeGroups,
    FindCoordinator,
    OffsetCommit,
    OffsetFetch,
)
from odradek.broker.http_types import HttpReply
from odradek.broker.quotas.manager import QuotaKind
from odradek.broker.rest import decoding, errors, offsets, republish, resources, search, throughput
from odradek.broker.rest import requests as rq
from odradek.broker.rest.resources import JsonObject, collection
from odradek.broker.rest.service import (
    Answer,
    Appended,
    Call,
    Fetched,
    Reply,
    RestService,
    _check,
    appended,
    consumer_fetch,
    fetched_of,
    list_offsets_request,
    listed_offset,
)
from odradek.client.common.acls import CLUSTER_RESOURCE_NAME, AclOperation, ResourceType
from odradek.client.common.admin.cluster import DescribeQuorum, ReplicaState
from odradek.client.common.admin.quotas import (
    AlterClientQuotas,
    DescribeClientQuotas,
    EntityComponent,
    QuotaAlteration,
    QuotaAlterOp,
)
from odradek.client.common.admin.scram import (
    AlterScramCredentials,
    DescribeScramCredentials,
    ScramDeletion,
    ScramUpsertion,
)
from odradek.client.common.admin.topics import CreatePartitions, CreatePartitionsTopic, PartitionDescription
from odradek.client.common.scram import SALT_BYTES, Mechanism
from odradek.client.connection import ChannelPool
from odradek.client.errors import ErrorCode
from odradek.client.record.batch import Record
from odradek.client.structs import TopicPartition
from odradek.proto import broker_pb2 as bpb
from odradek.proto import broker_pb2_grpc

if TYPE_CHECKING:
    from odradek.proto.broker_pb2_grpc import BrokerAsyncStub

CHUNK_BYTES = 4 * 1024 * 1024  # one fetch of a search or republish
OTHER_BROKER_TIMEOUT_S = 30.0
REGISTRY_TIMEOUT_S = 10.0
SCHEMA_CACHE = 256  # schemas by (caller, id): ids never change meaning, but who may read them can
MAX_PROBLEMS = 200  # the overview's partitions without a leader or short of replicas
EARLIEST, LATEST = offsets.EARLIEST_TIMESTAMP, offsets.LATEST_TIMESTAMP
COORDINATOR_WAIT_S = 10.0
_COORDINATOR_PENDING = frozenset({ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS})
# What a simple commit is answered while the group has members (Kafka's admin client reads them so too).
_MEMBERS_BACK = frozenset({ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION, ErrorCode.REBALANCE_IN_PROGRESS})


class ConsoleService:
    """The console's routes over ``rest``'s services (and its checks and forwarding)."""

    def __init__(self, rest: RestService) -> None:
        self.rest = rest
        self.s = rest.s
        self._pool: ChannelPool | None = None
        self._schemas: dict[tuple[str, int], decoding.Schema] = {}
        self.handlers: dict[type, Callable[[Any, Call], Awaitable[Reply]]] = {
            rq.GetOverview: self._overview,
            rq.GetTopicDetails: self._topic_details,
            rq.AddPartitions: self._add_partitions,
            rq.SearchRecords: self._search,
            rq.RepublishRecords: self._republish,
            rq.ResetGroupOffsets: self._reset,
            rq.ListScramUsers: self._scram_users,
            rq.UpsertScramUser: self._upsert_scram_user,
            rq.DeleteScramUser: self._delete_scram_user,
            rq.ListClientQuotas: self._quotas,
            rq.AlterClientQuota: self._alter_quota,
            rq.GetBrokerMetrics: self._metrics,
        }

    async def close(self) -> None:
        if self._pool is not None:
            await self._pool.close()

    async def serve(self, request: rq.Request, call: Call) -> Reply:
        return await self.handlers[type(request)](request, call)

    # ---- other brokers ----

    def _stub(self, broker: int) -> BrokerAsyncStub:
        registered = self.s.image().brokers.get(broker)
        if registered is None or registered.fenced:
            raise errors.unavailable(f"broker {broker} is not available")
        if self._pool is None:
            self._pool = ChannelPool(inter_broker=True)
        stub: BrokerAsyncStub = broker_pb2_grpc.BrokerStub(self._pool.get(f"{registered.host}:{registered.port}"))
        return stub

    def _leader(self, topic: str, partition: int) -> int:
        return self.rest._leader(topic, partition)[1]

    async def _fetch(self, call: Call, topic: str, partition: int, offset: int) -> Fetched:
        """Up to ``CHUNK_BYTES`` of whole batches from ``offset`` (a consumer's read, up to the high watermark), from
        the partition's leader: this broker's data service, or the leader's gRPC Fetch."""
        leader = self._leader(topic, partition)
        if leader == self.s.node_id:
            request = consumer_fetch(topic, partition, offset, CHUNK_BYTES, max_wait_ms=0, min_bytes=0)
            return fetched_of(await self.s.data.fetch(request, call.request_context))
        wanted = bpb.FetchPartition(
            partition=partition, current_leader_epoch=-1, fetch_offset=offset, partition_max_bytes=CHUNK_BYTES
        )
        message = bpb.FetchRequest(
            replica_id=-1,
            max_wait_ms=0,
            min_bytes=0,
            max_bytes=CHUNK_BYTES,
            isolation_level=bpb.READ_UNCOMMITTED,
            topics=[bpb.FetchTopic(name=topic, partitions=[wanted])],
        )
        answer = await self._other(leader, self._stub(leader).Fetch(message, timeout=OTHER_BROKER_TIMEOUT_S))
        _check(answer.error)
        p = answer.topics[0].partitions[0]
        return Fetched(p.error, p.high_watermark, p.log_start_offset, p.records)

    async def _other(self, broker: int, pending: Awaitable[Any]) -> Any:
        try:
            return await pending
        except grpc.aio.AioRpcError as e:
            raise errors.retriable(f"broker {broker} did not answer: {e.code().name} {e.details()}") from None

    async def _list_offsets(
        self, call: Call, partitions: Iterable[TopicPartition], timestamp: int
    ) -> dict[TopicPartition, int]:
        """Each partition's offset for ``timestamp`` (earliest, latest: the high watermark, or a time; -1 for a
        time after the last record), asked of its leader."""
        by_leader: dict[int, list[TopicPartition]] = {}
        for tp in partitions:
            by_leader.setdefault(self._leader(tp.topic, tp.partition), []).append(tp)

        async def ask(leader: int, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
            topics: dict[str, list[int]] = {}
            for tp in tps:
                topics.setdefault(tp.topic, []).append(tp.partition)
            listed: list[tuple[str, int, int, int]] = []  # (topic, partition, error, offset)
            if leader == self.s.node_id:
                request = list_offsets_request(list(topics.items()), timestamp)
                for name, offsets in await self.s.data.list_offsets(request, call.request_context):
                    listed += [(name, o.partition, *listed_offset(o)) for o in offsets]
            else:
                message = bpb.ListOffsetsRequest(
                    replica_id=-1,
                    topics=[
                        bpb.ListOffsetsTopic(
                            name=t,
                            partitions=[
                                bpb.ListOffsetsPartition(partition=p, timestamp=timestamp, current_leader_epoch=-1)
                                for p in ps
                            ],
                        )
                        for t, ps in topics.items()
                    ],
                )
                answer = await self._other(leader, self._stub(leader).ListOffsets(message, timeout=10))
                listed = [(t.name, p.partition, p.error, p.offset) for t in answer.topics for p in t.partitions]
            out = {}
            for name, partition, error, offset in listed:
                _check(error, "", topic=name)
                out[TopicPartition(name, partition)] = offset
            return out

        found: dict[TopicPartition, int] = {}
        for part in await asyncio.gather(*(ask(leader, tps) for leader, tps in by_leader.items())):
            found.update(part)
        return found

    # ---- the cluster ----

    async def _overview(self, r: rq.GetOverview, call: Call) -> Reply:
        d = await self.rest._describe_cluster(call)
        quorum: JsonObject
        q = await self.s.admin.describe_quorum(DescribeQuorum(), call.request_context)
        if q.error == ErrorCode.CLUSTER_AUTHORIZATION_FAILED:
            quorum = {"error": f"{call.caller.principal} is not authorized to Describe the cluster"}
        elif q.error != ErrorCode.NONE:
            quorum = {"error": errors.for_kafka_code(q.error).message}
        else:
            quorum = {
                "leader_id": q.leader_id,
                "leader_epoch": q.leader_epoch,
                "high_watermark": q.high_watermark,
                "voters": [_replica_state(v, q.high_watermark) for v in q.voters],
                "observers": [_replica_state(o, q.high_watermark) for o in q.observers],
            }
        topics = await self.rest._describe_all(call)
        partitions = [(t.name, p) for t in topics for p in t.partitions]
        offline = [(n, p) for n, p in partitions if p.leader < 0]
        short = [(n, p) for n, p in partitions if p.leader >= 0 and len(p.isr) < len(p.replicas)]
        problems = [_partition_state(n, p) for n, p in (offline + short)[:MAX_PROBLEMS]]
        return Answer(
            200,
            {
                "kind": "OdradekOverview",
                "cluster_id": call.links.cluster_id,
                "principal": call.caller.principal,
                "controller_id": d.controller_id,
                "controllers": [{"node_id": c.node_id, "host": c.host, "port": c.port} for c in d.controllers],
                "quorum": quorum,
                "brokers": [
                    {
                        "broker_id": b.node_id,
                        "host": b.host,
                        "port": b.port,
                        "rack": b.rack or None,
                        "fenced": b.fenced,
                        "in_controlled_shutdown": b.in_controlled_shutdown,
                    }
                    for b in d.brokers
                ],
                "topics_count": len(topics),
                "partitions_count": len(partitions),
                "offline_count": len(offline),
                "under_replicated_count": len(short),
                "problems": problems,
                "schema_registry": self.s.config.schema_registry_listener is not None,
            },
        )

    async def _topic_details(self, r: rq.GetTopicDetails, call: Call) -> Reply:
        """The partitions as the metadata has them, and each replica's size and offsets as its broker has them
        (each broker asked for its own; sizes need cluster Describe, and are left out without it)."""
        local = await self._replica_sizes(r.topic, call)
        if call.local_only:
            return Answer(200, local)
        t = await self.rest._describe(r.topic, call)
        parts = [local]
        for broker, reply in await call.fan_out():
            if reply.status == 200:
                parts.append(json.loads(reply.body))
            else:
                parts.append({"error": f"broker {broker}: {reply.body.decode(errors='replace')}", "replicas": []})
        replicas: dict[int, dict[int, JsonObject]] = {}
        for part in parts:
            for x in part["replicas"]:
                replicas.setdefault(x["partition_id"], {})[x["broker_id"]] = x
        out = []
        for p in sorted(t.partitions, key=lambda p: p.partition):
            state = _partition_state(t.name, p)
            sizes = replicas.get(p.partition, {})
            on_leader = sizes.get(p.leader)
            state.update(
                log_start_offset=on_leader["log_start_offset"] if on_leader else None,
                log_end_offset=on_leader["log_end_offset"] if on_leader else None,
                size_bytes=on_leader["size_bytes"] if on_leader else None,
                replica_sizes={str(b): x["size_bytes"] for b, x in sorted(sizes.items())},
            )
            out.append(state)
        problems = [str(part["error"]) for part in parts if part.get("error")]
        return Answer(
            200,
            {
                "kind": "OdradekTopicDetails",
                "cluster_id": call.links.cluster_id,
                "topic_name": t.name,
                "is_internal": t.is_internal,
                "partitions": out,
                "sizes_error": "; ".join(problems) or None,
            },
        )

    async def _replica_sizes(self, topic: str, call: Call) -> JsonObject:
        answer = await self.s.replicas.describe_log_dirs([topic], call.request_context)
        if answer.error != ErrorCode.NONE:
            return {"error": errors.for_kafka_code(answer.error).message, "replicas": []}
        return {
            "replicas": [
                {
                    "partition_id": x.partition,
                    "broker_id": self.s.node_id,
                    "size_bytes": x.size_bytes,
                    "log_start_offset": x.log_start_offset,
                    "log_end_offset": x.log_end_offset,
                }
                for d in answer.dirs
                for x in d.replicas
                if x.topic == topic and not x.is_future
            ]
        }

    async def _add_partitions(self, r: rq.AddPartitions, call: Call) -> Reply:
        request = CreatePartitions((CreatePartitionsTopic(r.topic, r.count),), timeout_ms=30_000)
        answer = await self.s.admin.create_partitions(request, call.request_context)
        result = answer.topics[0] if answer.topics else None
        if result is None:
            raise errors.unknown_topic(r.topic)
        _check(result.error, result.error_message, topic=r.topic)
        return Answer(200, resources.described_topic(call.links, await self.rest._describe(r.topic, call)))

    # ---- records ----

    async def _search(self, r: rq.SearchRecords, call: Call) -> Reply:
        """Search the partitions this broker leads, forward the others' share to their leaders, merge the pages."""
        self.rest._allowed(call, AclOperation.READ, ResourceType.TOPIC, r.topic)
        started = time.monotonic()
        scope = search.scope_of(
            call.http.header(search.PARTITIONS_HEADER.encode()), call.http.header(search.BUDGET_HEADER.encode())
        )
        if call.forwarded and scope is not None:
            partitions, budget = scope
            for p in partitions:
                if self._leader(r.topic, p) != self.s.node_id:
                    raise errors.retriable(f"broker {self.s.node_id} no longer leads partition {p} of {r.topic}")
            return Answer(200, await self._scan(r, call, partitions, budget, started))
        numbers = self._searched(r)
        budgets = dict(zip(numbers, search.shares(r.max_scanned, len(numbers)), strict=True))
        by_leader: dict[int, list[int]] = {}
        for p in numbers:
            by_leader.setdefault(self._leader(r.topic, p), []).append(p)
        mine = by_leader.pop(self.s.node_id, [])

        async def local() -> JsonObject:
            return await self._scan(r, call, mine, sum(budgets[p] for p in mine), started)

        async def remote(leader: int, ps: list[int]) -> JsonObject:
            headers = search.forwarded_scope(ps, sum(budgets[p] for p in ps))
            reply = await self.rest._elsewhere(call, leader, AclOperation.READ, ResourceType.TOPIC, r.topic, headers)
            if reply.status != 200:
                raise _relayed(reply)
            page: JsonObject = json.loads(reply.body)
            return page

        jobs = ([local()] if mine else []) + [remote(leader, ps) for leader, ps in sorted(by_leader.items())]
        merged = search.merge(await asyncio.gather(*jobs), r.max_matches)
        if r.decode:
            await self._decode(merged["data"], call)
        return Answer(200, merged)

    def _searched(self, r: rq.SearchRecords) -> list[int]:
        """The partitions a page searches: the cursor's, those asked for, or all."""
        found = self.s.image().topic(r.topic)
        if found is None:
            raise errors.unknown_topic(r.topic)
        if r.cursor:
            numbers = sorted({p for p, _ in r.cursor})
        elif r.partitions is not None:
            numbers = sorted(set(r.partitions))
        else:
            numbers = sorted(found.partitions)
        for p in numbers:
            if p not in found.partitions:
                raise errors.partition_not_found(r.topic, p)
        if not numbers:
            raise errors.bad_request("a search needs at least one partition")
        return numbers

    async def _scan(
        self, r: rq.SearchRecords, call: Call, partitions: Sequence[int], budget: int, started: float
    ) -> JsonObject:
        """Scan this broker's ``partitions`` a chunk at a time, in turn, until each reaches the high watermark it
        had when the page began, or a bound: ``max_matches`` in all, its share of ``budget`` records, the time. The
        chunks are the caller's fetches: while its fetch quota holds it, the scan waits (within the time)."""
        deadline = started + r.timeout_ms / 1000
        states = await self._starts(r, call, partitions)
        left = dict(zip(partitions, search.shares(budget, len(partitions)), strict=True))
        match = search.matcher(r.filter)
        found: list[JsonObject] = []
        stopped = "end"
        throttled = 0.0
        active = [p for p in partitions if not states[p].done]
        while active:
            if time.monotonic() >= deadline:
                stopped = "timeout"
                break
            for p in list(active):
                held = self.rest.quotas.held_ms(QuotaKind.FETCH, call.request_context)
                if held > 0:
                    wait = min(held / 1000, deadline - time.monotonic())
                    if wait > 0:
                        await asyncio.sleep(wait)
                        throttled += wait
                    break  # the time is checked again before the next chunk
                state = states[p]
                fetched = await self._fetch(call, r.topic, p, state.next_offset)
                if fetched.error == ErrorCode.OFFSET_OUT_OF_RANGE and fetched.log_start_offset > state.next_offset:
                    states[p] = dataclasses.replace(state, next_offset=fetched.log_start_offset)
                    continue
                _check(fetched.error, "", topic=r.topic)
                wanted = r.max_matches - len(found)
                scanned = await asyncio.to_thread(
                    search.scan, fetched.records, state.next_offset, state.end_offset, match, wanted, left[p]
                )
                next_offset = scanned.next_offset if fetched.records else state.end_offset
                states[p] = dataclasses.replace(state, next_offset=next_offset, scanned=state.scanned + scanned.scanned)
                left[p] -= scanned.scanned
                found += [search.found_record(p, x) for x in scanned.matches]
                if states[p].done or left[p] <= 0:
                    active.remove(p)
                if len(found) >= r.max_matches:
                    break
            if len(found) >= r.max_matches:
                stopped = "max_matches"
                break
        if stopped == "end" and any(not s.done for s in states.values()):
            stopped = "max_scanned"
        elapsed = int((time.monotonic() - started) * 1000)
        return search.page(
            r.topic, call.links.cluster_id, states.values(), found, stopped, elapsed, int(throttled * 1000)
        )

    async def _starts(
        self, r: rq.SearchRecords, call: Call, partitions: Sequence[int]
    ) -> dict[int, search.PartitionScan]:
        """Where each partition's scan starts and ends (its high watermark now)."""
        tps = [TopicPartition(r.topic, p) for p in partitions]
        ends = await self._list_offsets(call, tps, LATEST)
        firsts = await self._list_offsets(call, tps, EARLIEST)
        cursor = dict(r.cursor)
        at_time = await self._list_offsets(call, tps, r.timestamp_ms) if r.start == "timestamp" and not cursor else {}
        out = {}
        for tp in tps:
            first, end = firsts[tp], ends[tp]
            if cursor:
                start = cursor[tp.partition]
            elif r.start == "earliest":
                start = first
            elif r.start == "end":
                start = end - r.tail
            elif r.start == "offset":
                start = r.offset
            else:
                start = end if at_time[tp] < 0 else at_time[tp]
            at = min(max(start, first), end)
            out[tp.partition] = search.PartitionScan(tp.partition, at, end, start_offset=at)
        return out

    async def _decode(self, found: Sequence[JsonObject], call: Call) -> None:
        """Decode each match's key and value framed for the schema registry (with the caller's credentials)."""
        registry = self.s.config.schema_registry_listener
        for record in found:
            for part in ("key", "value"):
                text = record[part]
                frame = decoding.framed(None if text is None else base64.b64decode(text))
                if frame is None:
                    continue
                schema_id, payload = frame
                out: JsonObject = {"schema_id": schema_id}
                try:
                    if registry is None:
                        raise decoding.DecodingError("this broker serves no schema registry")
                    schema = await self._schema(call, schema_id)
                    out["type"] = schema.type
                    out["data"] = decoding.decode(schema, payload)
                except decoding.DecodingError as e:
                    out["error"] = str(e)
                record[f"{part}_decoded"] = out

    async def _schema(self, call: Call, schema_id: int) -> decoding.Schema:
        key = (call.caller.principal, schema_id)
        cached = self._schemas.get(key)
        if cached is not None:
            return cached
        registry = self.s.config.schema_registry_listener
        assert registry is not None
        if self.s.config.schema_registry_tls:
            raise decoding.DecodingError("the console reads schemas from a plain-HTTP schema registry only")
        host = "127.0.0.1" if registry.host in ("0.0.0.0", "::", "") else registry.host
        authorization = call.http.header(b"authorization")
        headers = [("authorization", authorization)] if authorization else []
        try:
            reply = await http_server.exchange(
                host,
                registry.port,
                "GET",
                f"/schemas/ids/{schema_id}?format=serialized",
                b"",
                headers,
                REGISTRY_TIMEOUT_S,
            )
        except (OSError, TimeoutError, h11.ProtocolError) as e:
            raise decoding.DecodingError(f"the schema registry did not answer: {e or type(e).__name__}") from None
        if reply.status != 200:
            raise decoding.DecodingError(f"schema {schema_id}: {reply.body.decode(errors='replace')}")
        schema = decoding.schema_of(json.loads(reply.body))
        if len(self._schemas) >= SCHEMA_CACHE:
            self._schemas.clear()
        self._schemas[key] = schema
        return schema

    async def _republish(self, r: rq.RepublishRecords, call: Call) -> Reply:
        """Read the chosen records from their leaders, then append them to the destination partitions' leaders, in
        batches, acks=all; what one destination partition received is kept if a later one fails (the answer says
        which)."""
        self.rest._allowed(call, AclOperation.READ, ResourceType.TOPIC, r.topic)
        self.rest._allowed(call, AclOperation.WRITE, ResourceType.TOPIC, r.destination)
        quotas, charged = self.rest.quotas, call.request_context
        quotas.admit(charged, QuotaKind.FETCH, QuotaKind.PRODUCE)  # refused before anything is read or written
        # Read and written uncharged wherever the leaders are (the brokers' channel is not charged), and charged here.
        call = dataclasses.replace(call, request_context=dataclasses.replace(charged, quotas_apply=False))
        image = self.s.image()
        source, target = image.topic(r.topic), image.topic(r.destination)
        if source is None:
            raise errors.unknown_topic(r.topic)
        if target is None:
            raise errors.unknown_topic(r.destination)
        ranges = republish.plan(r)
        found: dict[int, list[Record]] = {}
        for part in ranges:
            if part.partition not in source.partitions:
                raise errors.partition_not_found(r.topic, part.partition)
            found[part.partition], size = await self._read_range(call, r.topic, part)
            quotas.charge(QuotaKind.FETCH, charged, size)
        routed = republish.route(
            ((p, x) for p in sorted(found) for x in found[p]), len(target.partitions), r.same_partition, self.rest.pick
        )
        written: list[JsonObject] = []
        now = self.s.wall_ms()
        for partition, records in sorted(routed.items()):
            first = -1
            for batch in republish.batches(records, now, r.keep_timestamps):
                try:
                    offset = await self._append(call, r.destination, partition, batch)
                    quotas.charge(QuotaKind.PRODUCE, charged, len(batch))
                except errors.RestError as e:
                    done = sum(int(w["count"]) for w in written)
                    raise errors.RestError(
                        e.status, e.code, f"{e.message} (after {done} records were republished: {written})"
                    ) from None
                first = offset if first < 0 else first
            written.append({"partition_id": partition, "base_offset": first, "count": len(records)})
        return Answer(
            200,
            {
                "kind": "OdradekRepublish",
                "cluster_id": call.links.cluster_id,
                "topic_name": r.topic,
                "destination": r.destination,
                "republished": sum(int(w["count"]) for w in written),
                "missing": [{"partition_id": p, "offset": o} for p, o in republish.missing(ranges, found)],
                "partitions": written,
            },
        )

    async def _read_range(self, call: Call, topic: str, part: republish.SourceRange) -> tuple[list[Record], int]:
        """The records of a source range, and the bytes read for them."""
        out: list[Record] = []
        size = 0
        position = part.start
        while position < part.end:
            fetched = await self._fetch(call, topic, part.partition, position)
            if fetched.error == ErrorCode.OFFSET_OUT_OF_RANGE and fetched.log_start_offset > position:
                position = fetched.log_start_offset
                continue
            _check(fetched.error, "", topic=topic)
            size += len(fetched.records)
            scanned = await asyncio.to_thread(
                search.scan, fetched.records, position, part.end, None, republish.MAX_RECORDS + 1, part.end - position
            )
            out += [x for x in scanned.matches if part.keeps(x.offset)]
            if not fetched.records or scanned.next_offset <= position:
                break
            position = scanned.next_offset
        return out, size

    async def _append(self, call: Call, topic: str, partition: int, batch: bytes) -> int:
        """Append one batch to the partition's leader with acks=all; its first offset."""
        leader = self._leader(topic, partition)
        result: Appended
        if leader == self.s.node_id:
            topics = [(topic, [(partition, batch)])]
            answers, _ = await self.s.data.produce(-1, 30_000, None, topics, call.request_context)
            result = appended(answers[0][1][0])
        else:
            produce = bpb.ProduceTopic(
                name=topic, partitions=[bpb.ProducePartition(partition=partition, records=batch)]
            )
            message = bpb.ProduceRequest(acks=-1, timeout_ms=30_000, topics=[produce])
            answer = await self._other(leader, self._stub(leader).Produce(message, timeout=OTHER_BROKER_TIMEOUT_S))
            p = answer.topics[0].partitions[0]
            result = Appended(p.error, p.error_message, p.base_offset, p.log_append_time_ms)
        _check(result.error, result.error_message, topic=topic)
        return int(result.base_offset)

    # ---- consumer groups ----

    async def _reset(self, r: rq.ResetGroupOffsets, call: Call) -> Reply:
        """On the group's coordinator: refuse a group with members, then commit each partition's new offset."""
        coordinator = await self._coordinator(r.group, call)
        if coordinator != self.s.node_id:
            return await self.rest._elsewhere(call, coordinator, AclOperation.READ, ResourceType.GROUP, r.group)
        described = await self.s.groups.describe_groups(DescribeGroups((r.group,)), call.request_context)
        g = described.groups[0]
        _check(g.error)
        if g.members:
            raise errors.for_kafka_code(
                ErrorCode.NON_EMPTY_GROUP,
                f"group {r.group} has {len(g.members)} active members ({g.group_state}): stop them before resetting "
                "its offsets",
            )
        fetch = await self.s.groups.offset_fetch(OffsetFetch(r.group, None), call.request_context)
        _check(fetch.error)
        committed = {
            TopicPartition(t.name, p.partition): p.committed_offset
            for t in fetch.topics
            for p in t.partitions
            if p.error == ErrorCode.NONE and p.committed_offset >= 0
        }
        image = self.s.image()
        names = set(r.topics) | {tp.topic for tp in committed}
        partitions_of = {n: len(t.partitions) for n in names if (t := image.topic(n)) is not None}
        covered = offsets.covered(r, committed, partitions_of)
        for topic in sorted({tp.topic for tp in covered}):
            self.rest._allowed(call, AclOperation.DESCRIBE, ResourceType.TOPIC, topic)
        starts = await self._list_offsets(call, covered, EARLIEST)
        ends = await self._list_offsets(call, covered, LATEST)
        at = offsets.lookup_timestamp(r)
        at_time = await self._list_offsets(call, covered, at) if at is not None else {}
        targets = offsets.targets(r, covered, starts, ends, at_time)
        if not r.dry_run:
            await self._commit(r.group, targets, call)
        data = [
            {
                "topic_name": tp.topic,
                "partition_id": tp.partition,
                "previous_offset": committed.get(tp),
                "offset": offset,
                "log_start_offset": starts[tp],
                "log_end_offset": ends[tp],
            }
            for tp, offset in sorted(targets.items())
        ]
        return Answer(
            200,
            {
                "kind": "OdradekOffsetReset",
                "cluster_id": call.links.cluster_id,
                "consumer_group_id": r.group,
                "dry_run": r.dry_run,
                "data": data,
            },
        )

    async def _coordinator(self, group: str, call: Call) -> int:
        """The group's coordinator; for a group never used in a cluster where none ever was, once the offsets topic
        its first lookup creates is ready (a reset may give a new group its first offsets)."""
        deadline = time.monotonic() + COORDINATOR_WAIT_S
        while True:
            request = FindCoordinator(GROUP_KEY, (group,))
            found = (await self.s.groups.find_coordinator(request, call.request_context)).coordinators[0]
            if found.error not in _COORDINATOR_PENDING or time.monotonic() >= deadline:
                _check(found.error, found.error_message or "")
                return int(found.node_id)
            await asyncio.sleep(0.2)

    async def _commit(self, group: str, targets: Mapping[TopicPartition, int], call: Call) -> None:
        topics: dict[str, list[CommitPartition]] = {}
        for tp, offset in sorted(targets.items()):
            topics.setdefault(tp.topic, []).append(CommitPartition(tp.partition, offset))
        request = OffsetCommit(
            group_id=group,
            generation_id=-1,
            member_id="",
            group_instance_id=None,
            topics=tuple(CommitTopic(t, tuple(ps)) for t, ps in topics.items()),
        )
        answer = await self.s.groups.offset_commit(request, call.request_context)
        for t in answer.topics:
            for p in t.partitions:
                if p.error in _MEMBERS_BACK:
                    raise errors.for_kafka_code(ErrorCode.NON_EMPTY_GROUP, f"group {group} has active members again")
                _check(p.error, f"committing {t.name}-{p.partition} for group {group}", topic=t.name)

    # ---- security ----

    async def _scram_users(self, r: rq.ListScramUsers, call: Call) -> Reply:
        answer = await self.s.admin.describe_user_scram_credentials(DescribeScramCredentials(), call.request_context)
        _check(answer.error, answer.error_message)
        data = [
            {
                "kind": "OdradekScramUser",
                "user": u.user,
                "credentials": [{"mechanism": c.mechanism, "iterations": c.iterations} for c in u.credentials],
            }
            for u in sorted(answer.results, key=lambda u: u.user)
            if u.error == ErrorCode.NONE
        ]
        return Answer(200, collection("ScramUser", call.links.url("user-scram-credentials"), data))

    async def _upsert_scram_user(self, r: rq.UpsertScramUser, call: Call) -> Reply:
        salt = secrets.token_bytes(SALT_BYTES)
        hash_name = Mechanism.parse(r.mechanism).hash_name
        salted = await asyncio.to_thread(hashlib.pbkdf2_hmac, hash_name, r.password.encode(), salt, r.iterations)
        upsertion = ScramUpsertion(r.user, r.mechanism, r.iterations, salt, salted)
        await self._alter_credentials(AlterScramCredentials(upsertions=(upsertion,)), call)
        return Answer(201, {"kind": "OdradekScramUser", "user": r.user, "mechanism": r.mechanism})

    async def _delete_scram_user(self, r: rq.DeleteScramUser, call: Call) -> Reply:
        deletion = ScramDeletion(r.user, r.mechanism)
        await self._alter_credentials(AlterScramCredentials(deletions=(deletion,)), call)
        return Answer(204)

    async def _alter_credentials(self, request: AlterScramCredentials, call: Call) -> None:
        answer = await self.s.admin.alter_user_scram_credentials(request, call.request_context)
        _check(answer.error)
        for result in answer.results:
            _check(result.error, result.error_message)

    async def _quotas(self, r: rq.ListClientQuotas, call: Call) -> Reply:
        answer = await self.s.admin.describe_client_quotas(DescribeClientQuotas(), call.request_context)
        _check(answer.error, answer.error_message)
        data = [
            {
                "kind": "OdradekClientQuota",
                "entity": [{"entity_type": c.entity_type, "name": c.name} for c in e.entity],
                "values": dict(e.values),
            }
            for e in answer.entries
        ]
        return Answer(200, collection("ClientQuota", call.links.url("client-quotas"), data))

    async def _alter_quota(self, r: rq.AlterClientQuota, call: Call) -> Reply:
        entity = tuple(EntityComponent(kind, name) for kind, name in r.entity)
        ops = tuple(QuotaAlterOp(k, v) for k, v in r.set) + tuple(QuotaAlterOp(k, remove=True) for k in r.remove)
        request = AlterClientQuotas((QuotaAlteration(entity, ops),))
        answer = await self.s.admin.alter_client_quotas(request, call.request_context)
        _check(answer.error)
        for result in answer.entries:
            _check(result.error, result.error_message)
        return Answer(204)

    # ---- metrics ----

    async def _metrics(self, r: rq.GetBrokerMetrics, call: Call) -> Reply:
        """Each broker's counters, from its own registry (cluster Describe: they name every topic and group)."""
        self.rest._allowed(call, AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_RESOURCE_NAME)
        mine = throughput.summary(self.s.node_id, self.s.wall_ms(), self.s.data.metrics.registry.collect())
        data = [mine]
        if not call.local_only:
            for broker, reply in await call.fan_out():
                if reply.status != 200:
                    raise errors.retriable(f"broker {broker} did not answer its metrics: {reply.body.decode()}")
                data += json.loads(reply.body)["data"]
        data.sort(key=lambda b: int(b["broker_id"]))
        return Answer(200, {"kind": "OdradekBrokerMetrics", "data": data})


def _relayed(reply: HttpReply) -> errors.RestError:
    """Another broker's refusal, as this broker's."""
    try:
        body = json.loads(reply.body)
        return errors.RestError(reply.status, int(body["error_code"]), str(body["message"]))
    except (ValueError, KeyError, TypeError):
        return errors.retriable(f"another broker answered {reply.status}: {reply.body[:200].decode(errors='replace')}")


def _replica_state(r: ReplicaState, high_watermark: int) -> JsonObject:
    return {
        "node_id": r.node_id,
        "log_end_offset": r.log_end_offset,
        "lag": max(0, high_watermark - r.log_end_offset),
        "last_fetch_timestamp_ms": r.last_fetch_timestamp_ms,
        "last_caught_up_timestamp_ms": r.last_caught_up_timestamp_ms,
    }


def _partition_state(topic: str, p: PartitionDescription) -> JsonObject:
    return {
        "topic_name": topic,
        "partition_id": p.partition,
        "leader": p.leader if p.leader >= 0 else None,
        "leader_epoch": p.leader_epoch,
        "replicas": list(p.replicas),
        "isr": list(p.isr),
        "elr": list(p.eligible_leader_replicas),
        "last_known_elr": list(p.last_known_elr),
        "adding_replicas": list(p.adding_replicas),
        "removing_replicas": list(p.removing_replicas),
        "offline": p.leader < 0,
        "under_replicated": p.leader >= 0 and len(p.isr) < len(p.replicas),
    }

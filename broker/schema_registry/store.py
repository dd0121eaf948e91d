"""The registry's storage: the asyncio shell between its core and the compacted topic ``_schemas`` (one partition).

Every broker that serves the registry reads ``_schemas`` from its start with odradek's own consumer, through the
cluster like any client (a broker need not host a replica of it), and applies each record to its ``RegistryCore``:
that is its copy, which it serves reads from once it has read to the end it found at start. A restarted or new
broker rebuilds the same way.

Writes have one writer: the broker leading ``_schemas`` partition 0. Under a lock it waits until its copy has read
everything in its log (so a new writer, elected after a failover, has seen every id given out before it), lets the
core decide, appends the core's records to its local partition as a leader append with acks=all, and answers once
the records are committed and its own copy has applied them. A broker that is not the writer forwards writes to
the writer's registry listener, whose address it finds in the metadata image: each broker registers its registry
listener as ``SCHEMA_REGISTRY`` beside its Kafka listener.

On a TLS broker listener the reader and the admin client connect with the node's own certificate
(``client_security``), and so act as the node's principal, as the brokers' calls to each other do.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterator, Mapping
from typing import TypeVar

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from odradek.broker.metrics import gauge
from odradek.broker.partition import Partition
from odradek.broker.schema_registry import errors
from odradek.broker.schema_registry.core import RegistryCore, Write
from odradek.broker.schema_registry.records import SCHEMAS_TOPIC, Record, RecordError, decode, encode_key, encode_value
from odradek.client.admin import AsyncAdmin
from odradek.client.common.metadata_image import MetadataImage
from odradek.client.consumer.consumer import AsyncConsumer
from odradek.client.errors import ErrorCode, OdradekError
from odradek.client.record.builder import BatchBuilder
from odradek.client.structs import TopicPartition

logger = logging.getLogger(__name__)

LISTENER_NAME = "SCHEMA_REGISTRY"  # the registry listener's name in broker registrations
PARTITION = TopicPartition(SCHEMAS_TOPIC, 0)
READY_WAIT_S = 10.0  # a request waits this long for a starting broker's copy before 50002
WRITE_TIMEOUT_S = 10.0  # catching up, the commit of the append, and applying it
RETRY_S = 1.0
WARN_AFTER_FAILURES = 30

T = TypeVar("T")


def topic_problem(partitions: int, cleanup_policy: str) -> str | None:
    """Why an existing ``_schemas`` cannot hold the registry (as Confluent refuses it): more than one partition
    would order writes per partition only, and a policy other than compact would let retention delete schemas."""
    if partitions != 1:
        return f"{SCHEMAS_TOPIC} has {partitions} partitions: it must have exactly one"
    if cleanup_policy != "compact":
        return (
            f"{SCHEMAS_TOPIC} has cleanup.policy={cleanup_policy}: it must be compact (retention would delete "
            "schemas); alter its cleanup.policy to compact"
        )
    return None


def encode_batch(records: tuple[Record, ...], timestamp_ms: int) -> bytes:
    """One uncompressed batch of ``records``: a write is appended whole or not at all."""
    builder = BatchBuilder()
    for key, value in records:
        builder.append(timestamp_ms, encode_key(key), encode_value(key, value))
    return builder.build()


class RegistryStore:
    """``bootstrap``: this broker's own gRPC listener (its consumer and admin client connect there, with the
    ``client_security`` settings); ``partition(tp)``: the local replica, if hosted; ``image()``: the metadata image;
    ``scheme``: the registry listeners' (http or https: every broker's is of one kind)."""

    def __init__(
        self,
        node_id: int,
        bootstrap: str,
        image: Callable[[], MetadataImage],
        partition: Callable[[TopicPartition], Partition | None],
        replication_factor: int,
        clock_ms: Callable[[], int],
        client_security: Mapping[str, str] | None = None,
        scheme: str = "http",
    ) -> None:
        self.core = RegistryCore()
        self.client_security = dict(client_security or {})
        self.scheme = scheme
        self.node_id = node_id
        self.bootstrap = bootstrap
        self._image = image
        self._partition = partition
        self.replication_factor = replication_factor
        self._clock_ms = clock_ms
        self.applied = 0  # the next offset of _schemas to apply
        self.skipped = 0  # records this codec could not read
        self.writes = 0
        self.problem = "the registry is reading _schemas"  # why it is not ready, for answers
        self._ready = asyncio.Event()
        self._progress = asyncio.Condition()
        self._lock = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="schema-registry-reader")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    @property
    def ready(self) -> bool:
        return self._ready.is_set()

    async def wait_ready(self) -> None:
        if self._ready.is_set():
            return
        try:
            await asyncio.wait_for(self._ready.wait(), READY_WAIT_S)
        except TimeoutError:
            raise errors.operation_timeout(self.problem) from None

    # -- the writer ----------------------------------------------------------------------------------------------

    def writer_url(self) -> str | None:
        """None when this broker leads ``_schemas`` partition 0 (it writes); else the writer's registry URL, from
        the metadata image (RegistryError 50003 when there is no writer to forward to)."""
        image = self._image()
        topic = image.topic(SCHEMAS_TOPIC)
        state = None if topic is None else topic.partitions.get(0)
        if state is None:
            raise errors.store_error(f"{SCHEMAS_TOPIC} does not exist yet")
        if state.leader == self.node_id:
            return None
        broker = image.brokers.get(state.leader)
        if broker is None or broker.fenced:
            raise errors.forwarding_failed(f"{SCHEMAS_TOPIC} has no leader (the writer) at the moment")
        endpoint = broker.endpoint(LISTENER_NAME)
        if endpoint is None:
            raise errors.forwarding_failed(
                f"broker {state.leader} leads {SCHEMAS_TOPIC} (it is the writer) but serves no schema registry "
                "listener: set schema.registry.listeners on every broker"
            )
        return f"{self.scheme}://{endpoint[0]}:{endpoint[1]}"

    async def write(self, decide: Callable[[RegistryCore], Write[T]]) -> T:
        """One write at a time: catch up with the log, let the core decide, append its records (acks=all), and
        return the answer once they are committed and applied here."""
        async with self._lock:
            partition = self._partition(PARTITION)
            if partition is None or not partition.is_leader:
                raise errors.forwarding_failed(f"broker {self.node_id} no longer leads {SCHEMAS_TOPIC}")
            await self._wait_applied(partition.log.log_end_offset, "catching up with the log before a write")
            write = decide(self.core)
            if not write.records:
                return write.result
            try:
                info = partition.append_as_leader(encode_batch(write.records, self._clock_ms()), acks=-1)
                code = await asyncio.wait_for(partition.wait_for_commit(info.last_offset + 1), WRITE_TIMEOUT_S)
            except OdradekError as e:
                raise errors.store_error(f"appending to {SCHEMAS_TOPIC}: {e}") from None
            except TimeoutError:
                raise errors.operation_timeout(f"the write to {SCHEMAS_TOPIC} was not replicated in time") from None
            if code != ErrorCode.NONE:
                raise errors.store_error(f"appending to {SCHEMAS_TOPIC}: {ErrorCode.Name(code)}")
            await self._wait_applied(info.last_offset + 1, "applying the write")
            self.writes += 1
            return write.result

    async def caught_up(self, offset: int) -> bool:
        try:
            await self._wait_applied(offset, "catching up")
        except errors.RegistryError:
            return False
        return True

    async def _wait_applied(self, offset: int, what: str) -> None:
        try:
            async with self._progress:
                await asyncio.wait_for(self._progress.wait_for(lambda: self.applied >= offset), WRITE_TIMEOUT_S)
        except TimeoutError:
            raise errors.operation_timeout(
                f"{what}: read {self.applied} of {offset} offsets of {SCHEMAS_TOPIC}"
            ) from None

    # -- the reader ----------------------------------------------------------------------------------------------

    async def _run(self) -> None:
        """Create the topic if need be, then read it for ever; any failure starts again from where it stopped."""
        failing, progress = 0, -1
        while True:
            try:
                await self._ensure_topic()
                await self._read()
            except asyncio.CancelledError:
                raise
            except Exception as e:
                # At a cluster's start the topic cannot be created until enough brokers have registered: said once
                # at INFO, and as a warning only if it lasts.
                self.problem = f"the registry cannot read {SCHEMAS_TOPIC} yet: {e}"
                failing = 1 if self.applied != progress else failing + 1
                progress = self.applied
                if failing == 1 or failing == WARN_AFTER_FAILURES:
                    level = logging.INFO if failing == 1 else logging.WARNING
                    logger.log(level, "schema registry: %s (retrying every %.0f s)", self.problem, RETRY_S)
                await asyncio.sleep(RETRY_S)

    async def _ensure_topic(self) -> None:
        """``_schemas``, compacted, one partition, replication factor ``default.replication.factor``: created if
        missing, and refused (the registry stays unready, saying why) if it exists otherwise."""
        async with AsyncAdmin({"bootstrap.servers": self.bootstrap, **self.client_security}) as admin:
            if self._image().topic(SCHEMAS_TOPIC) is None:
                try:
                    await admin.create_topic(SCHEMAS_TOPIC, 1, self.replication_factor, {"cleanup.policy": "compact"})
                    logger.info("created %s (replication factor %d)", SCHEMAS_TOPIC, self.replication_factor)
                except OdradekError as e:
                    if e.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                        raise
            info = await admin.describe_topic(SCHEMAS_TOPIC)
            policy = next(
                (c.value for c in await admin.describe_configs(SCHEMAS_TOPIC) if c.name == "cleanup.policy"), ""
            )
            problem = topic_problem(len(info.partitions), policy)
            if problem is not None:
                raise errors.store_error(problem)

    async def _read(self) -> None:
        config = {
            "bootstrap.servers": self.bootstrap,
            "client.id": f"schema-registry-{self.node_id}",
            "auto.offset.reset": "earliest",
            **self.client_security,
        }
        async with AsyncConsumer(config) as consumer:
            consumer.assign([PARTITION])
            consumer.seek(PARTITION, self.applied)
            end = None if self._ready.is_set() else (await consumer.end_offsets([PARTITION]))[PARTITION]
            while True:
                records = await consumer.poll(timeout_ms=500)
                for r in records:
                    try:
                        decoded = None if r.key is None else decode(r.key, r.value)
                    except RecordError as e:
                        decoded = None
                        logger.warning("%s offset %d skipped: %s", SCHEMAS_TOPIC, r.offset, e)
                    if decoded is None:
                        self.skipped += 1
                    else:
                        self.core.apply(*decoded)
                    self.applied = r.offset + 1
                # The position passes offsets compaction removed and batches without records for us.
                self.applied = max(self.applied, await consumer.position(PARTITION))
                if end is not None and self.applied >= end:
                    end = None
                    self._ready.set()
                    logger.info("schema registry ready: %s read to offset %d", SCHEMAS_TOPIC, self.applied)
                async with self._progress:
                    self._progress.notify_all()

    # -- metrics -------------------------------------------------------------------------------------------------

    def gauges(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        for name, doc, value in (
            (
                "odradek_schema_registry_ready",
                "1 once this broker's registry copy has read _schemas to its end",
                int(self.ready),
            ),
            (
                "odradek_schema_registry_applied_offset",
                "the next offset of _schemas this broker's copy applies",
                self.applied,
            ),
            ("odradek_schema_registry_subjects", "subjects with live versions", len(self.core.subjects())),
            ("odradek_schema_registry_next_schema_id", "the id the next new schema gets", self.core.next_id),
        ):
            g = gauge(name, doc)
            g.add_metric([], value)
            yield g
        writes = CounterMetricFamily(
            "odradek_schema_registry_writes", "writes this broker appended to _schemas as the writer"
        )
        writes.add_metric([], self.writes)
        yield writes
        skipped = CounterMetricFamily("odradek_schema_registry_skipped_records", "_schemas records that did not decode")
        skipped.add_metric([], self.skipped)
        yield skipped

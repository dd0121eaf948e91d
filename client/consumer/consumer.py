"""The consumer: ``AsyncConsumer`` and the synchronous ``Consumer`` facade, with manual assignment.

Group membership (``subscribe``, ``commit``) comes with the group coordinator; until then ``group.id`` is refused.
Like Kafka's, a consumer is used from one thread at a time.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from typing import Any

from odradek.client.background import BackgroundLoop
from odradek.client.config import ConsumerConfig
from odradek.client.connection import DEFAULT_MAX_MESSAGE_BYTES, ChannelPool
from odradek.client.consumer.fetcher import Fetcher, wait_for_position
from odradek.client.metadata import Metadata
from odradek.client.offsets import EARLIEST, LATEST, list_offsets, list_offsets_and_timestamps
from odradek.client.structs import ConsumerRecord, OffsetAndTimestamp, TopicPartition
from odradek.proto import broker_pb2 as pb

PartitionLike = TopicPartition | tuple[str, int]
# A mapping's key type is invariant, so a dict keyed by TopicPartition is no Mapping[PartitionLike, int].
PartitionTimestamps = Mapping[TopicPartition, int] | Mapping[tuple[str, int], int]


def _tp(partition: PartitionLike) -> TopicPartition:
    topic, number = partition
    if not isinstance(topic, str) or not isinstance(number, int) or number < 0:
        raise TypeError(f"a partition is (topic: str, partition: int >= 0), not {partition!r}")
    return TopicPartition(topic, number)


class AsyncConsumer:
    """Create inside a running event loop. ``poll`` returns up to ``max.poll.records`` records, fetching ahead."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        cfg = ConsumerConfig.from_mapping(config)
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            raise RuntimeError("create AsyncConsumer inside a running event loop (or use Consumer)") from None
        self._config = cfg
        self._max_poll_records = cfg.max_poll_records
        self._timeout = cfg.request_timeout_ms / 1000
        self._isolation = pb.READ_COMMITTED if cfg.isolation_level == "read_committed" else pb.READ_UNCOMMITTED
        self._pool = ChannelPool(max(DEFAULT_MAX_MESSAGE_BYTES, cfg.fetch_max_bytes + 1_048_576))
        self._metadata = Metadata(cfg, self._pool)
        self._fetcher = Fetcher(cfg, self._metadata)
        self._closed = False

    async def __aenter__(self) -> AsyncConsumer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def assign(self, partitions: Iterable[PartitionLike]) -> None:
        """Consume exactly these partitions (replacing the previous assignment; kept ones keep their position)."""
        self._fetcher.assign({_tp(p) for p in partitions})

    def assignment(self) -> set[TopicPartition]:
        return self._fetcher.assignment()

    def seek(self, partition: PartitionLike, offset: int) -> None:
        """Make the next poll start at ``offset`` (reset by auto.offset.reset if it is out of range)."""
        self._fetcher.seek(_tp(partition), offset)

    def seek_to_beginning(self, *partitions: PartitionLike) -> None:
        """Move to the log start of these partitions (all assigned ones if none given), looked up lazily."""
        for tp in self._targets(partitions):
            self._fetcher.seek(tp, None, EARLIEST)

    def seek_to_end(self, *partitions: PartitionLike) -> None:
        """Move to the end (high watermark) of these partitions (all assigned ones if none given), lazily."""
        for tp in self._targets(partitions):
            self._fetcher.seek(tp, None, LATEST)

    def _targets(self, partitions: tuple[PartitionLike, ...]) -> list[TopicPartition]:
        return [_tp(p) for p in partitions] if partitions else sorted(self.assignment())

    async def position(self, partition: PartitionLike) -> int:
        """The offset of the next record poll() returns for the partition, looking it up if needed."""
        return await wait_for_position(self._fetcher, _tp(partition), self._timeout)

    def pause(self, *partitions: PartitionLike) -> None:
        self._fetcher.set_paused(tuple(_tp(p) for p in partitions), True)

    def resume(self, *partitions: PartitionLike) -> None:
        self._fetcher.set_paused(tuple(_tp(p) for p in partitions), False)

    def paused(self) -> set[TopicPartition]:
        return self._fetcher.paused()

    def highwater(self, partition: PartitionLike) -> int:
        """The partition's high watermark as of the last fetch (-1 before one)."""
        return self._fetcher.high_watermark(_tp(partition))

    async def poll(self, timeout_ms: int = 0) -> list[ConsumerRecord]:
        """Records from the assigned, unpaused partitions, waiting up to ``timeout_ms`` for some. Raises a
        partition's error (e.g. OffsetOutOfRangeError with auto.offset.reset=none) when there are no records."""
        fetcher = self._fetcher
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_ms / 1000
        while True:
            fetcher.data_ready.clear()
            records = fetcher.drain(self._max_poll_records)
            if records:
                return records
            remaining = deadline - loop.time()
            if remaining <= 0:
                await asyncio.sleep(0)  # poll(0) in a loop must still let the fetcher run
                return records
            try:
                async with asyncio.timeout(remaining):
                    await fetcher.data_ready.wait()
            except TimeoutError:
                return fetcher.drain(self._max_poll_records)

    async def partitions_for(self, topic: str) -> list[int]:
        """The topic's partitions (UnknownTopicOrPartitionError if it does not appear within request.timeout.ms)."""
        return list(range(await self._metadata.wait_for_topic(topic, self._timeout)))

    async def beginning_offsets(self, partitions: Iterable[PartitionLike]) -> dict[TopicPartition, int]:
        return await self._list_offsets(partitions, EARLIEST)

    async def end_offsets(self, partitions: Iterable[PartitionLike]) -> dict[TopicPartition, int]:
        """The high watermark (last stable offset with read_committed) of each partition."""
        return await self._list_offsets(partitions, LATEST)

    async def offsets_for_times(
        self, timestamps: PartitionTimestamps
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """For each partition, the earliest offset whose timestamp is at or after the given one (ms since the
        epoch), or None if no record is that recent; named as in kafka-python and confluent-kafka."""
        targets: dict[TopicPartition, int] = {}
        for partition, timestamp in timestamps.items():
            if not isinstance(timestamp, int) or isinstance(timestamp, bool) or timestamp < 0:
                raise ValueError(f"a timestamp is an int of ms since the epoch (>= 0), not {timestamp!r}")
            targets[_tp(partition)] = timestamp
        found = await list_offsets_and_timestamps(
            self._metadata,
            targets,
            timeout=self._timeout,
            backoff=self._config.retry_backoff_ms / 1000,
            isolation_level=self._isolation,
        )
        return {
            tp: OffsetAndTimestamp(offset, timestamp) if offset >= 0 else None
            for tp, (offset, timestamp) in found.items()
        }

    async def _list_offsets(self, partitions: Iterable[PartitionLike], timestamp: int) -> dict[TopicPartition, int]:
        targets = dict.fromkeys((_tp(p) for p in partitions), timestamp)
        return await list_offsets(
            self._metadata,
            targets,
            timeout=self._timeout,
            backoff=self._config.retry_backoff_ms / 1000,
            isolation_level=self._isolation,
        )

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        await self._fetcher.close()
        await self._metadata.close()
        await self._pool.close()


class Consumer:
    """Synchronous facade over ``AsyncConsumer``. ``poll`` takes buffered records on the caller's thread (no thread
    hop while the prefetch keeps up) and only waits through the background loop when the buffer is empty."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self._loop = BackgroundLoop("odradek-consumer")
        try:
            self._core: AsyncConsumer = self._loop.run(self._create(config))
        except BaseException:
            self._loop.stop()
            raise
        self._fetcher = self._core._fetcher
        self._max_poll_records = self._core._max_poll_records
        self._closed = False

    @staticmethod
    async def _create(config: Mapping[str, Any]) -> AsyncConsumer:
        return AsyncConsumer(config)

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def assign(self, partitions: Iterable[PartitionLike]) -> None:
        self._core.assign(partitions)

    def assignment(self) -> set[TopicPartition]:
        return self._core.assignment()

    def seek(self, partition: PartitionLike, offset: int) -> None:
        self._core.seek(partition, offset)

    def seek_to_beginning(self, *partitions: PartitionLike) -> None:
        self._core.seek_to_beginning(*partitions)

    def seek_to_end(self, *partitions: PartitionLike) -> None:
        self._core.seek_to_end(*partitions)

    def position(self, partition: PartitionLike) -> int:
        return self._loop.run(self._core.position(partition))

    def pause(self, *partitions: PartitionLike) -> None:
        self._core.pause(*partitions)

    def resume(self, *partitions: PartitionLike) -> None:
        self._core.resume(*partitions)

    def paused(self) -> set[TopicPartition]:
        return self._core.paused()

    def highwater(self, partition: PartitionLike) -> int:
        return self._core.highwater(partition)

    def poll(self, timeout_ms: int = 0) -> list[ConsumerRecord]:
        records = self._fetcher.drain(self._max_poll_records)
        if records or timeout_ms <= 0:
            return records
        return self._loop.run(self._core.poll(timeout_ms))

    def partitions_for(self, topic: str) -> list[int]:
        return self._loop.run(self._core.partitions_for(topic))

    def beginning_offsets(self, partitions: Iterable[PartitionLike]) -> dict[TopicPartition, int]:
        return self._loop.run(self._core.beginning_offsets(partitions))

    def end_offsets(self, partitions: Iterable[PartitionLike]) -> dict[TopicPartition, int]:
        return self._loop.run(self._core.end_offsets(partitions))

    def offsets_for_times(self, timestamps: PartitionTimestamps) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        return self._loop.run(self._core.offsets_for_times(timestamps))

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self._loop.run(self._core.close())
        finally:
            self._loop.stop()

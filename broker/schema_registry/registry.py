"""A broker's schema registry, assembled: the store (its copy of ``_schemas`` and the writer's appends), the
service over it and the HTTP listener in front, from the node's ``schema.registry.listeners``. The node starts the
listener with its other listeners and the store once the broker role runs."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from odradek.broker.config import Endpoint
from odradek.broker.partition import Partition
from odradek.broker.schema_registry.server import RegistryListener
from odradek.broker.schema_registry.service import RegistryService
from odradek.broker.schema_registry.store import RegistryStore
from odradek.client.structs import TopicPartition
from odradek.controller.metadata.image import MetadataImage


class SchemaRegistry:
    def __init__(
        self,
        node_id: int,
        listener: Endpoint,
        bootstrap: str,
        image: Callable[[], MetadataImage],
        partition: Callable[[TopicPartition], Partition | None],
        replication_factor: int,
        clock_ms: Callable[[], int],
    ) -> None:
        self.store = RegistryStore(node_id, bootstrap, image, partition, replication_factor, clock_ms)
        self.service = RegistryService(self.store)
        self.requests: Counter[tuple[str, int]] = Counter()
        self.listener = RegistryListener(listener.host, listener.port, self.service, self._count)

    def _count(self, kind: str, status: int) -> None:
        self.requests[(kind, status)] += 1

    async def serve(self) -> None:
        """Bind the listener (with the node's other listeners: a port in use stops the node)."""
        await self.listener.start()

    def start(self) -> None:
        """Start reading ``_schemas`` (once the broker role runs: the reader connects to this broker)."""
        self.store.start()

    async def stop(self) -> None:
        await self.listener.stop()
        await self.store.close()

    def metrics(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        yield from self.store.gauges()
        requests = CounterMetricFamily(
            "odradek_schema_registry_requests", "registry HTTP requests answered", labels=["request", "status"]
        )
        for (kind, status), count in sorted(self.requests.items()):
            requests.add_metric([kind, str(status)], count)
        yield requests

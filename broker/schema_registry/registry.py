"""A broker's schema registry, assembled: the store (its copy of ``_schemas`` and the writer's appends), the
service over it and the HTTP listener in front, from the node's ``schema.registry.listeners`` and its security
(``security_of``: TLS from the node's ssl.* files, the SCRAM logins, client certificates, the authorizer). The node
starts the listener with its other listeners and the store once the broker role runs."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from odradek.broker.config import TLS_PROTOCOLS, ConfigError, Endpoint, NodeConfig
from odradek.broker.http_login import BasicLogin
from odradek.broker.partition import Partition
from odradek.broker.rest.auth import CredentialLookup
from odradek.broker.schema_registry.server import OPEN, RegistryListener, Security
from odradek.broker.schema_registry.service import RegistryService
from odradek.broker.schema_registry.store import RegistryStore
from odradek.broker.security.tls import ServerTls
from odradek.client.common.access import OPEN as NO_AUTHORIZER
from odradek.client.common.access import AccessControl
from odradek.client.common.metadata_image import MetadataImage
from odradek.client.common.scram import Mechanism
from odradek.client.structs import TopicPartition
from odradek.client.tls import TlsFileError, TlsFiles


@dataclass(frozen=True)
class RegistrySecurity:
    """The listener's ``Security``, the authorizer the service asks, and the settings its reader and admin client
    reach the broker listener with (the node's TLS files where that listener is TLS)."""

    listener: Security = OPEN
    access: AccessControl = NO_AUTHORIZER
    client: Mapping[str, str] = field(default_factory=dict)
    scheme: str = "http"


def security_of(
    config: NodeConfig,
    files: TlsFiles,
    access: AccessControl,
    credentials: CredentialLookup,
    certificate_principal: Callable[[bytes], str],
    ready: asyncio.Event,
) -> RegistrySecurity:
    """The registry's security on a node with ``config`` (docs/schema-registry.md, "Security")."""
    c = config
    login = None
    if c.schema_registry_authentication == "basic":
        mechanisms = tuple(Mechanism.parse(m) for m in c.sasl_mechanisms)
        login = BasicLogin(credentials, mechanisms, c["connection.failed.authentication.delay.ms"])
    tls, client_auth = c.schema_registry_tls, c.schema_registry_client_auth
    server = ServerTls(files, client_auth) if tls else None
    if server is not None:
        try:
            server.current()  # a missing or bad file stops the node at start, naming it
        except TlsFileError as e:
            raise ConfigError(f"TLS for schema.registry.listeners: {e}") from None
    listener = Security(
        tls=server.current if server is not None else None,
        forward_tls=files.client_context if tls else None,
        login=login,
        certificates=certificate_principal if tls and client_auth != "none" else None,
        ready=ready,
    )
    broker = c.broker_listener
    client: dict[str, str] = {}
    if broker is not None and c.listener_protocol(broker.name) in TLS_PROTOCOLS:
        client = {"security.protocol": "SSL", "ssl.ca.location": files.ca_location}
        if files.certificate_location:
            client |= {"ssl.certificate.location": files.certificate_location, "ssl.key.location": files.key_location}
    return RegistrySecurity(listener, access, client, "https" if tls else "http")


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
        security: RegistrySecurity | None = None,
    ) -> None:
        s = security or RegistrySecurity()
        self.store = RegistryStore(
            node_id, bootstrap, image, partition, replication_factor, clock_ms, s.client, s.scheme
        )
        self.service = RegistryService(self.store, s.access)
        self.requests: Counter[tuple[str, int]] = Counter()
        self.listener = RegistryListener(listener.host, listener.port, self.service, self._count, s.listener)

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

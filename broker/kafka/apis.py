"""The APIs a Kafka listener serves: each one's version range and handler, and the schema-driven codec for the APIs
off the hot path.

Produce and Fetch have hand-written codecs (produce_codec.py, fetch_codec.py) that never copy record data. Every
other API decodes its request and encodes its response with kafka-python's protocol classes, which carry Kafka's
message definitions for every version (flexible versions and tagged fields included); a handler of such an API
takes the decoded request and returns the response object of the same version (``schema_api``).

Only what is registered here is advertised in ApiVersions: a capability odradek has not built is absent, not
answered with a stub.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any

from odradek.broker.kafka.wire import NO_VERSION, Handler, KafkaContext, ProtocolError, Reply, RequestHeader
from odradek.client.common.file_slice import Chunk

API_VERSIONS_KEY = 18


@dataclass(frozen=True, slots=True)
class ApiSpec:
    """One API as this listener serves it."""

    key: int
    name: str
    min_version: int
    max_version: int
    flexible_from: int = NO_VERSION  # the first version with tagged fields (request header v2, response header v1)
    # Whether a request (version, body) is between brokers (a follower's Fetch), exempt from client quotas as on the
    # gRPC listener; asked only while quotas are set. None: never.
    inter_broker: Callable[[int, memoryview], bool] | None = None

    def serves(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version

    def flexible(self, version: int) -> bool:
        return version >= self.flexible_from

    def request_header_version(self, version: int) -> int:
        return 2 if self.flexible(version) else 1

    def response_header_version(self, version: int) -> int:
        # ApiVersions answers with header v0 whatever the version, so a client that sent a version the broker does
        # not know can still read the answer (KIP-511).
        if self.key == API_VERSIONS_KEY:
            return 0
        return 1 if self.flexible(version) else 0


class ApiRegistry:
    """API key -> (spec, handler)."""

    def __init__(self) -> None:
        self._apis: dict[int, tuple[ApiSpec, Handler]] = {}

    def add(self, spec: ApiSpec, handler: Handler) -> None:
        if spec.key in self._apis:
            raise ValueError(f"API {spec.key} ({spec.name}) registered twice")
        self._apis[spec.key] = (spec, handler)

    def get(self, key: int) -> tuple[ApiSpec, Handler] | None:
        return self._apis.get(key)

    def specs(self) -> Iterator[ApiSpec]:
        for key in sorted(self._apis):
            yield self._apis[key][0]


SchemaHandler = Callable[[KafkaContext, int, Any], Awaitable[Any]]
"""(context, version, decoded request) -> the response object (kafka-python class) of that version."""


class SchemaReply:
    """A response object of kafka-python's protocol classes, encoded once the request quota's throttle is known."""

    __slots__ = ("response", "version")

    def __init__(self, response: Any, version: int) -> None:
        self.response = response
        self.version = version

    @property
    def throttle_ms(self) -> int:
        return int(getattr(self.response, "throttle_time_ms", 0) or 0)

    def encode(self, throttle_ms: int) -> list[Chunk]:
        if throttle_ms > self.throttle_ms and hasattr(self.response, "throttle_time_ms"):
            self.response.throttle_time_ms = throttle_ms
        return [bytes(self.response.encode(version=self.version))]


def schema_api(request_cls: Any, min_version: int, max_version: int, handler: SchemaHandler) -> tuple[ApiSpec, Handler]:
    """An API whose request and response go through kafka-python's classes (``request_cls`` is e.g.
    ``kafka.protocol.metadata.MetadataRequest``), served at versions ``min_version``..``max_version``."""
    flexible = request_cls._flexible_versions
    spec = ApiSpec(
        int(request_cls.API_KEY),
        str(request_cls.name).removesuffix("Request"),
        min_version,
        max_version,
        flexible[0] if flexible is not None and flexible[0] >= 0 else NO_VERSION,
    )

    async def handle(ctx: KafkaContext, header: RequestHeader, body: memoryview) -> Reply:
        version = header.api_version
        try:
            request = request_cls.decode(body, version=version)
        except Exception as e:  # kafka-python raises assorted errors on a malformed body
            raise ProtocolError(f"malformed {spec.name} v{version} request: {e!r}") from e
        return SchemaReply(await handler(ctx, version, request), version)

    return spec, handle

"""ApiVersions: the APIs this listener serves, and their version ranges, straight from the registry, so what is
advertised is exactly what has a handler.

A request at a version above the served range cannot be parsed; as KIP-511 has it, the answer is a v0 response
with UNSUPPORTED_VERSION and ApiVersions' own range, from which the client retries at a version it shares."""

from __future__ import annotations

from typing import Any

from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse

from odradek.broker.kafka.apis import API_VERSIONS_KEY, ApiRegistry, ApiSpec, SchemaReply, schema_api
from odradek.broker.kafka.wire import KafkaContext
from odradek.client.errors import ErrorCode

MAX_VERSION = 3


def _entry(spec: ApiSpec) -> Any:
    return ApiVersionsResponse.ApiVersion(api_key=spec.key, min_version=spec.min_version, max_version=spec.max_version)


def register(registry: ApiRegistry) -> None:
    async def api_versions(ctx: KafkaContext, version: int, request: Any) -> Any:
        return ApiVersionsResponse(
            version=version,
            error_code=ErrorCode.NONE,
            api_keys=[_entry(spec) for spec in registry.specs()],
            throttle_time_ms=0,
        )

    registry.add(*schema_api(ApiVersionsRequest, 0, MAX_VERSION, api_versions))


def unsupported_version(spec: ApiSpec) -> SchemaReply:
    """The KIP-511 answer to an ApiVersions request at a version this listener does not know."""
    assert spec.key == API_VERSIONS_KEY
    response = ApiVersionsResponse(
        version=0, error_code=ErrorCode.UNSUPPORTED_VERSION, api_keys=[_entry(spec)], throttle_time_ms=0
    )
    return SchemaReply(response, 0)

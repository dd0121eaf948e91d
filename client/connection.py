"""gRPC channels to odradek nodes: one shared channel per address, sized for large record payloads.

gRPC's default 4 MiB receive limit is raised on both ends; every channel and server in odradek
takes its options from here so the limits cannot drift apart.
"""

from __future__ import annotations

import asyncio

import grpc

DEFAULT_MAX_MESSAGE_BYTES = 64 * 1024 * 1024


def channel_options(max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> list[tuple[str, int]]:
    return [
        ("grpc.max_send_message_length", max_message_bytes),
        ("grpc.max_receive_message_length", max_message_bytes),
        ("grpc.keepalive_time_ms", 30_000),
        ("grpc.keepalive_timeout_ms", 10_000),
        ("grpc.http2.max_pings_without_data", 0),
        ("grpc.keepalive_permit_without_calls", 1),
        # Reconnect quickly after a node restarts: failover time matters more than connection churn here.
        ("grpc.initial_reconnect_backoff_ms", 100),
        ("grpc.min_reconnect_backoff_ms", 100),
        ("grpc.max_reconnect_backoff_ms", 1000),
    ]


def parse_servers(value: str | list[str]) -> list[str]:
    """``host:port,host:port`` -> list, validated."""
    items = value if isinstance(value, list) else value.split(",")
    servers = [s.strip() for s in items if s.strip()]
    for s in servers:
        host, _, port = s.rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"bootstrap server '{s}' is not host:port")
    if not servers:
        raise ValueError("bootstrap.servers is empty")
    return servers


class ChannelPool:
    """Async channels keyed by address, created lazily and closed together."""

    def __init__(self, max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> None:
        self._options = channel_options(max_message_bytes)
        self._channels: dict[str, grpc.aio.Channel] = {}

    def get(self, address: str) -> grpc.aio.Channel:
        channel = self._channels.get(address)
        if channel is None:
            channel = grpc.aio.insecure_channel(address, options=self._options)
            self._channels[address] = channel
        return channel

    async def drop(self, address: str) -> None:
        """Forget a channel (e.g. after the node at that address went away), closing it."""
        channel = self._channels.pop(address, None)
        if channel is not None:
            await channel.close()

    async def close(self) -> None:
        channels, self._channels = list(self._channels.values()), {}
        await asyncio.gather(*(c.close() for c in channels), return_exceptions=True)

"""Bootstrap address parsing: a missing port defaults to 9092 as Kafka's tools do; malformed ones are refused."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from odradek.client.connection import KEEPALIVE_ENV, KEEPALIVE_TIME_MS, channel_options, parse_servers


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("127.0.0.1", ["127.0.0.1:9092"]),
        ("a:1, b", ["a:1", "b:9092"]),
        (["[::1]", "[::1]:19092"], ["[::1]:9092", "[::1]:19092"]),
    ],
)
def test_port_defaults_to_9092(value, expected) -> None:
    assert parse_servers(value) == expected


@pytest.mark.parametrize("value", ["a:x", ":9092", "a:0", "a:70000", "[::1", "[::1]x", ""])
def test_malformed_addresses_are_refused(value) -> None:
    with pytest.raises(ValueError):
        parse_servers(value)


def test_server_policy_accepts_what_clients_send() -> None:
    """The observation: clients pinged every 30 s without calls while servers kept gRPC's default (one ping per
    5 minutes), so after three pings the server sent GOAWAY too_many_pings. Both halves now come from one list."""
    options = dict(channel_options())
    assert options["grpc.keepalive_time_ms"] == KEEPALIVE_TIME_MS
    assert options["grpc.keepalive_permit_without_calls"] == 1
    assert options["grpc.http2.min_ping_interval_without_data_ms"] < options["grpc.keepalive_time_ms"]


def test_keepalive_override_is_validated(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEEPALIVE_ENV, "2000")
    assert dict(channel_options())["grpc.http2.min_ping_interval_without_data_ms"] == 1000
    monkeypatch.setenv(KEEPALIVE_ENV, "soon")
    with pytest.raises(ValueError, match="must be an integer"):
        channel_options()


IDLE_PROBE = """
import asyncio, sys, grpc
from odradek.client.connection import channel_options

async def main():
    async def echo(request, context):
        return request
    handler = grpc.method_handlers_generic_handler("t.T", {"E": grpc.unary_unary_rpc_method_handler(echo)})
    server_options = channel_options(keepalive_ms=300) if sys.argv[1] == "odradek" else []
    server = grpc.aio.server(options=server_options)
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}", options=channel_options(keepalive_ms=300)) as ch:
        echo_call = ch.unary_unary("/t.T/E")
        await echo_call(b"x")
        await asyncio.sleep(5)  # idle with the connection open: over fifteen keepalive intervals
        await echo_call(b"y")
    await server.stop(None)

asyncio.run(main())
"""


@pytest.mark.parametrize("server", ["grpc-default", "odradek"])
def test_idle_connection_gets_no_goaway(server: str) -> None:
    """A live server and channel, idle for over fifteen ping intervals: with gRPC's default server policy the server
    answers too_many_pings (the observed failure, proving the probe can see it); with odradek's it does not."""
    result = subprocess.run(
        [sys.executable, "-c", IDLE_PROBE, server], capture_output=True, text=True, timeout=60, env=os.environ
    )
    if server == "grpc-default":
        assert "too_many_pings" in result.stderr  # and the call after the idle time may fail: "Too many pings"
    else:
        # The call after the idle time succeeded and no GOAWAY named too many pings. (A GOAWAY "Cancelling all
        # calls" may be logged when the server stops at the end while the closed channel's transport winds down.)
        assert result.returncode == 0, result.stderr
        assert "too_many_pings" not in result.stderr, result.stderr

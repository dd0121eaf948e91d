"""The HTTP listener, routes and service over a store that commits at once (no cluster): Confluent's paths, JSON
answers and error bodies as a plain HTTP client (urllib) sees them, and a write forwarded from a broker that is not
the writer to the one that is."""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Callable
from typing import Any, TypeVar

import pytest

from odradek.broker.schema_registry.core import RegistryCore, Write
from odradek.broker.schema_registry.server import RegistryListener
from odradek.broker.schema_registry.service import RegistryService

T = TypeVar("T")

USER = json.dumps({"type": "record", "name": "User", "fields": [{"name": "name", "type": "string"}]})
USER2 = json.dumps(
    {
        "type": "record",
        "name": "User",
        "fields": [{"name": "name", "type": "string"}, {"name": "age", "type": "int", "default": 0}],
    }
)
BREAKING = json.dumps(
    {"type": "record", "name": "User", "fields": [{"name": "name", "type": "string"}, {"name": "x", "type": "int"}]}
)


class InstantStore:
    """The store's contract with the writes applied as they are decided; ``writer`` None: this one writes."""

    def __init__(self, writer: str | None = None) -> None:
        self.core = RegistryCore()
        self.writer = writer
        self.applied = 0
        self.caught_up_to: list[int] = []

    async def caught_up(self, offset: int) -> bool:
        self.caught_up_to.append(offset)
        return True

    async def wait_ready(self) -> None:
        return None

    def writer_url(self) -> str | None:
        return self.writer

    async def write(self, decide: Callable[[RegistryCore], Write[T]]) -> T:
        write = decide(self.core)
        for key, value in write.records:
            self.core.apply(key, value)
            self.applied += 1
        return write.result


class Client:
    def __init__(self, port: int) -> None:
        self.base = f"http://127.0.0.1:{port}"

    async def call(self, method: str, path: str, body: Any = None, raw: bytes | None = None) -> tuple[int, Any]:
        data = raw if raw is not None else None if body is None else json.dumps(body).encode()

        def send() -> tuple[int, Any]:
            request = urllib.request.Request(self.base + path, data=data, method=method)
            request.add_header("Content-Type", "application/vnd.schemaregistry.v1+json")
            try:
                with urllib.request.urlopen(request, timeout=10) as response:
                    text = response.read().decode()
                    status = response.status
            except urllib.error.HTTPError as e:
                text, status = e.read().decode(), e.code
            try:
                return status, json.loads(text)
            except json.JSONDecodeError:
                return status, text

        return await asyncio.to_thread(send)


@pytest.fixture
async def writer() -> AsyncIterator[tuple[Client, InstantStore, int]]:
    store = InstantStore()
    listener = RegistryListener("127.0.0.1", 0, RegistryService(store))
    await listener.start()
    yield Client(listener.port), store, listener.port
    await listener.stop()


async def test_register_read_lookup_and_delete_round_trip(writer: tuple[Client, InstantStore, int]) -> None:
    client, _, _ = writer
    assert await client.call("POST", "/subjects/orders-value/versions", {"schema": USER}) == (200, {"id": 1})
    assert await client.call("POST", "/subjects/orders-value/versions", {"schema": USER}) == (200, {"id": 1})
    assert await client.call("GET", "/subjects") == (200, ["orders-value"])
    assert await client.call("GET", "/subjects/orders-value/versions") == (200, [1])
    status, body = await client.call("GET", "/subjects/orders-value/versions/latest")
    assert status == 200 and body["id"] == 1 and body["version"] == 1 and "schemaType" not in body
    assert json.loads(body["schema"]) == json.loads(USER)
    assert (await client.call("GET", "/schemas/ids/1"))[1] == {"schema": body["schema"]}
    assert await client.call("GET", "/schemas/ids/1/subjects") == (200, ["orders-value"])
    assert await client.call("GET", "/schemas/ids/1/versions") == (200, [{"subject": "orders-value", "version": 1}])
    assert (await client.call("GET", "/subjects/orders-value/versions/1/schema"))[1] == json.loads(USER)
    status, found = await client.call("POST", "/subjects/orders-value", {"schema": USER})
    assert status == 200 and (found["id"], found["version"], found["subject"]) == (1, 1, "orders-value")
    assert await client.call("POST", "/subjects/orders-value/versions", {"schema": USER2}) == (200, {"id": 2})
    assert await client.call("DELETE", "/subjects/orders-value/versions/2") == (200, 2)
    assert await client.call("DELETE", "/subjects/orders-value/versions/2?permanent=true") == (200, 2)
    assert await client.call("DELETE", "/subjects/orders-value") == (200, [1])
    assert await client.call("GET", "/subjects?deleted=true") == (200, ["orders-value"])
    assert await client.call("DELETE", "/subjects/orders-value?permanent=true") == (200, [1])
    assert await client.call("GET", "/subjects?deleted=true") == (200, [])
    assert await client.call("GET", "/schemas/types") == (200, ["AVRO", "JSON", "PROTOBUF"])
    assert await client.call("GET", "/contexts") == (200, ["."])


async def test_compatibility_config_and_mode_endpoints(writer: tuple[Client, InstantStore, int]) -> None:
    client, _, _ = writer
    await client.call("POST", "/subjects/s/versions", {"schema": USER})
    path = "/compatibility/subjects/s/versions/latest"
    assert await client.call("POST", path, {"schema": USER2}) == (200, {"is_compatible": True})
    status, body = await client.call("POST", path + "?verbose=true", {"schema": BREAKING})
    assert status == 200 and body["is_compatible"] is False and body["messages"]
    assert await client.call("GET", "/config") == (200, {"compatibilityLevel": "BACKWARD"})
    assert await client.call("PUT", "/config/s", {"compatibility": "NONE"}) == (200, {"compatibility": "NONE"})
    assert await client.call("GET", "/config/s") == (200, {"compatibilityLevel": "NONE"})
    assert await client.call("POST", "/compatibility/subjects/s/versions", {"schema": BREAKING}) == (
        200,
        {"is_compatible": True},
    )
    assert await client.call("DELETE", "/config/s") == (200, {"compatibilityLevel": "NONE"})
    assert (await client.call("GET", "/config/s"))[1]["error_code"] == 40408
    assert await client.call("GET", "/config/s?defaultToGlobal=true") == (200, {"compatibilityLevel": "BACKWARD"})
    assert await client.call("PUT", "/mode/s", {"mode": "READONLY"}) == (200, {"mode": "READONLY"})
    assert await client.call("GET", "/mode") == (200, {"mode": "READWRITE"})
    assert (await client.call("POST", "/subjects/s/versions", {"schema": USER2}))[1]["error_code"] == 42205
    assert await client.call("DELETE", "/mode/s") == (200, {"mode": "READONLY"})


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "code"),
    [
        ("GET", "/subjects/nope/versions", None, 404, 40401),
        ("GET", "/subjects/s/versions/9", None, 404, 40402),
        ("GET", "/schemas/ids/999", None, 404, 40403),
        ("POST", "/subjects/s", {"schema": USER2}, 404, 40403),
        ("DELETE", "/subjects/s?permanent=true", None, 404, 40405),
        ("DELETE", "/subjects/s/versions/1?permanent=true", None, 404, 40407),
        ("GET", "/config/s", None, 404, 40408),
        ("GET", "/mode/s", None, 404, 40409),
        ("POST", "/subjects/s/versions", {"schema": BREAKING}, 409, 409),
        ("POST", "/subjects/s/versions", {"schema": "{nope"}, 422, 42201),
        ("POST", "/subjects/s/versions", {"schema": 'edition = "2023";', "schemaType": "PROTOBUF"}, 422, 42201),
        ("POST", "/subjects/s/versions", {"schema": '{"type": 5}', "schemaType": "JSON"}, 422, 42201),
        ("POST", "/subjects/s/versions", {"schema": USER, "ruleSet": {"domainRules": []}}, 422, 42201),
        ("GET", "/subjects/s/versions/0", None, 422, 42202),
        ("GET", "/subjects/s/versions/abc", None, 422, 42202),
        ("PUT", "/config", {"compatibility": "SIDEWAYS"}, 422, 42203),
        ("PUT", "/mode", {"mode": "SOMETIMES"}, 422, 42204),
        ("PUT", "/mode", {"mode": "IMPORT"}, 422, 42205),
        ("GET", "/nowhere", None, 404, 404),
        ("PUT", "/subjects", None, 405, 405),
        ("GET", "/schemas/guids/abc", None, 404, 404),
        ("POST", "/subjects/s/versions", None, 422, 422),
    ],
)
async def test_errors_are_confluents_codes_and_bodies(
    writer: tuple[Client, InstantStore, int], method: str, path: str, body: Any, status: int, code: int
) -> None:
    client, _, _ = writer
    assert await client.call("POST", "/subjects/s/versions", {"schema": USER}) == (200, {"id": 1})
    got_status, got = await client.call(method, path, body)
    assert got_status == status and got["error_code"] == code and isinstance(got["message"], str), got


async def test_an_endpoint_not_implemented_says_so(writer: tuple[Client, InstantStore, int]) -> None:
    client, _, _ = writer
    status, body = await client.call("GET", "/associations/resources/topic?resourceNamespace=x")
    assert (status, body["error_code"]) == (404, 404) and "not implemented by odradek" in body["message"]


async def test_a_body_that_is_not_json_is_a_400(writer: tuple[Client, InstantStore, int]) -> None:
    client, _, _ = writer
    status, body = await client.call("POST", "/subjects/s/versions", raw=b"{")
    assert status == 400 and body["error_code"] == 400


async def test_a_write_to_a_broker_that_is_not_the_writer_is_forwarded(
    writer: tuple[Client, InstantStore, int],
) -> None:
    _, writer_store, port = writer
    follower_store = InstantStore(writer=f"http://127.0.0.1:{port}")
    follower = RegistryListener("127.0.0.1", 0, RegistryService(follower_store))
    await follower.start()
    try:
        via = Client(follower.port)
        assert await via.call("POST", "/subjects/s/versions", {"schema": USER}) == (200, {"id": 1})
        assert writer_store.core.subjects() == ["s"] and follower_store.core.subjects() == []
        assert follower_store.caught_up_to == [1]  # it waited for its copy to hold the write before answering
        status, body = await via.call("POST", "/subjects/s/versions", {"schema": BREAKING})
        assert (status, body["error_code"]) == (409, 409)  # the writer's refusal, relayed
    finally:
        await follower.stop()


async def test_forwarding_to_a_writer_that_is_gone_is_50003() -> None:
    store = InstantStore(writer="http://127.0.0.1:1")
    listener = RegistryListener("127.0.0.1", 0, RegistryService(store))
    await listener.start()
    try:
        status, body = await Client(listener.port).call("POST", "/subjects/s/versions", {"schema": USER})
        assert (status, body["error_code"]) == (500, 50003)
    finally:
        await listener.stop()

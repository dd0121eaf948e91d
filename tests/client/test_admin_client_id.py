"""The admin client names itself to the nodes it calls (brokers key client quotas on it), as Kafka's does."""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc
import pytest

from odradek.client.admin import AsyncAdmin
from odradek.proto import admin_pb2 as pb
from odradek.proto import admin_pb2_grpc


class _Admin(admin_pb2_grpc.AdminServicer):
    def __init__(self) -> None:
        self.client_ids: list[str | None] = []

    async def DescribeCluster(self, request, context):
        self.client_ids.append(dict(context.invocation_metadata()).get("client-id"))
        return pb.DescribeClusterResponse(cluster_id="c", controller_id=1)


@pytest.fixture
async def node() -> AsyncIterator[tuple[str, _Admin]]:
    servicer = _Admin()
    server = grpc.aio.server()
    admin_pb2_grpc.add_AdminServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    yield f"127.0.0.1:{port}", servicer
    await server.stop(None)


async def test_the_admin_client_sends_its_client_id_on_every_call(node: tuple[str, _Admin]) -> None:
    address, servicer = node
    async with AsyncAdmin({"bootstrap.servers": address, "client.id": "ops-console"}) as admin:
        await admin.describe_cluster()
        await admin.describe_cluster()
    assert servicer.client_ids == ["ops-console", "ops-console"]
    servicer.client_ids.clear()
    async with (
        AsyncAdmin({"bootstrap.servers": address}) as first,
        AsyncAdmin({"bootstrap.servers": address}) as second,
    ):
        await first.describe_cluster()
        await second.describe_cluster()
    a, b = servicer.client_ids
    assert a is not None and b is not None and a.startswith("adminclient-") and b.startswith("adminclient-") and a != b

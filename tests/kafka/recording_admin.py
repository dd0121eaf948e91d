"""A fake of the Admin service for the Kafka listener's admin API tests: reads go to the real AdminService over a
given image (no controller on this node, none reachable); writes are recorded and answered with
``answers[method]``, or by the real service when none is given (NOT_CONTROLLER)."""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

from google.protobuf.message import Message

from odradek.broker.topic_defaults import topic_defaults
from odradek.client.common.metadata_image import MetadataImage
from odradek.controller.raft import Role
from odradek.controller.services import AdminService


class RecordingAdmin:
    def __init__(self, answers: dict[str, Message], image: Callable[[], MetadataImage]) -> None:
        sm = SimpleNamespace(image=image(), cluster_id="cluster-x", leader=SimpleNamespace(leader_id=9))
        driver = SimpleNamespace(node_id=2, leader=SimpleNamespace(role=Role.FOLLOWER))
        self.real = AdminService(sm, driver, {}, {}, topic_defaults=topic_defaults())  # type: ignore[arg-type]
        self.answers = answers
        self.requests: dict[str, Message] = {}

    def __getattr__(self, method: str) -> Any:
        async def rpc(request: Message, context: Any) -> Message:
            self.requests[method] = request
            if method in self.answers:
                return self.answers[method]
            return await getattr(self.real, method)(request, context)

        return rpc

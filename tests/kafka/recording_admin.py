"""A fake of the admin service for the Kafka listener's admin API tests: reads go to the real typed service
(``NodeAdmin``) over a given image (no controller on this node, none reachable); writes are recorded and answered
with ``answers[method]``, or by the real service when none is given (NOT_CONTROLLER).

Requests are recorded, and answers given, as the gRPC Admin service's messages (``requests["CreateTopics"]`` is an
``apb.CreateTopicsRequest``), through the gRPC adapter's translations: what a handler hands the service is what the
same request would be on the gRPC wire."""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

from google.protobuf.message import Message

from odradek.broker.topic_defaults import topic_defaults
from odradek.client.common.metadata_image import MetadataImage
from odradek.controller.admin import messages as m
from odradek.controller.admin.service import NodeAdmin
from odradek.controller.raft import Role
from odradek.proto import admin_pb2 as apb

# The typed method -> (the gRPC method's name, the typed request as its message, its answer message as typed).
CALLS: dict[str, tuple[str, Callable[[Any], Message], Callable[[Any], Any]]] = {
    "create_topics": ("CreateTopics", m.create_topics_request, m.create_topics_answer_of),
    "delete_topics": ("DeleteTopics", m.delete_topics_request, m.delete_topics_answer_of),
    "create_partitions": ("CreatePartitions", m.create_partitions_request, m.create_partitions_answer_of),
    "describe_topics": ("DescribeTopics", m.describe_topics_request, m.describe_topics_answer_of),
    "describe_configs": ("DescribeConfigs", m.describe_configs_request, m.describe_configs_answer_of),
    "incremental_alter_configs": (
        "IncrementalAlterConfigs",
        m.incremental_alter_configs_request,
        m.incremental_alter_configs_answer_of,
    ),
    "elect_leaders": ("ElectLeaders", m.elect_leaders_request, m.elect_leaders_answer_of),
    "alter_partition_reassignments": (
        "AlterPartitionReassignments",
        m.alter_reassignments_request,
        m.alter_reassignments_answer_of,
    ),
    "describe_cluster": ("DescribeCluster", lambda _r: apb.DescribeClusterRequest(), m.describe_cluster_answer_of),
    "describe_quorum": ("DescribeQuorum", lambda _r: apb.DescribeQuorumRequest(), m.describe_quorum_answer_of),
    "alter_client_quotas": ("AlterClientQuotas", m.alter_client_quotas_request, m.alter_client_quotas_answer_of),
    "describe_client_quotas": (
        "DescribeClientQuotas",
        m.describe_client_quotas_request,
        m.describe_client_quotas_answer_of,
    ),
    "create_acls": ("CreateAcls", m.create_acls_request, m.create_acls_answer_of),
    "describe_acls": ("DescribeAcls", m.describe_acls_request, m.describe_acls_answer_of),
    "delete_acls": ("DeleteAcls", m.delete_acls_request, m.delete_acls_answer_of),
    "alter_user_scram_credentials": (
        "AlterUserScramCredentials",
        m.alter_scram_credentials_request,
        m.alter_scram_credentials_answer_of,
    ),
    "describe_user_scram_credentials": (
        "DescribeUserScramCredentials",
        m.describe_scram_credentials_request,
        m.describe_scram_credentials_answer_of,
    ),
}


class RecordingAdmin:
    def __init__(self, answers: dict[str, Message], image: Callable[[], MetadataImage]) -> None:
        sm = SimpleNamespace(image=image(), cluster_id="cluster-x", leader=SimpleNamespace(leader_id=9))
        driver = SimpleNamespace(node_id=2, leader=SimpleNamespace(role=Role.FOLLOWER))
        self.real = NodeAdmin(sm, driver, {}, {}, topic_defaults=topic_defaults())  # type: ignore[arg-type]
        self.topic_defaults = self.real.topic_defaults
        self.answers = answers
        self.requests: dict[str, Message] = {}

    def __getattr__(self, method: str) -> Any:
        if method not in CALLS:
            raise AttributeError(method)
        name, message_of, answer_of = CALLS[method]

        async def call(request: Any, ctx: Any) -> Any:
            self.requests[name] = message_of(request)
            if name in self.answers:
                return answer_of(self.answers[name])
            return await getattr(self.real, method)(request, ctx)

        return call

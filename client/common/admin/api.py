"""``AdminApi``: the admin service as its adapters see it. Every method takes one typed request and the caller's
``RequestContext`` (whom to authorize, passed explicitly), and answers a typed answer; none raises for a refusal,
which the answer carries as an error code.

Reads are answered from the answering node's metadata image (DescribeQuorum, from the active controller's); writes
are decided and committed by the active controller, to which a node that is not it forwards them (NOT_CONTROLLER
when none is known or reachable).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from odradek.client.common.admin.acls import (
    CreateAcls,
    CreateAclsAnswer,
    DeleteAcls,
    DeleteAclsAnswer,
    DescribeAcls,
    DescribeAclsAnswer,
)
from odradek.client.common.admin.cluster import (
    DescribeCluster,
    DescribeClusterAnswer,
    DescribeQuorum,
    DescribeQuorumAnswer,
)
from odradek.client.common.admin.configs import (
    DescribeConfigs,
    DescribeConfigsAnswer,
    IncrementalAlterConfigs,
    IncrementalAlterConfigsAnswer,
)
from odradek.client.common.admin.partitions import (
    AlterReassignments,
    AlterReassignmentsAnswer,
    ElectLeaders,
    ElectLeadersAnswer,
)
from odradek.client.common.admin.quotas import (
    AlterClientQuotas,
    AlterClientQuotasAnswer,
    DescribeClientQuotas,
    DescribeClientQuotasAnswer,
)
from odradek.client.common.admin.scram import (
    AlterScramCredentials,
    AlterScramCredentialsAnswer,
    DescribeScramCredentials,
    DescribeScramCredentialsAnswer,
)
from odradek.client.common.admin.topics import (
    CreatePartitions,
    CreatePartitionsAnswer,
    CreateTopics,
    CreateTopicsAnswer,
    DeleteTopics,
    DeleteTopicsAnswer,
    DescribeTopics,
    DescribeTopicsAnswer,
)
from odradek.client.common.request_context import RequestContext
from odradek.client.common.topic_rules import TopicDefault


class AdminApi(Protocol):
    @property
    def topic_defaults(self) -> Mapping[str, TopicDefault]:
        """Each topic config's default on this node (its config file's, else odradek's built-in), which
        DescribeConfigs reports under the topics' own."""
        ...

    # -- topics --
    async def create_topics(self, request: CreateTopics, ctx: RequestContext) -> CreateTopicsAnswer:
        """Needs cluster Create, or Create on each topic."""
        ...

    async def delete_topics(self, request: DeleteTopics, ctx: RequestContext) -> DeleteTopicsAnswer:
        """Needs Delete on each topic."""
        ...

    async def create_partitions(self, request: CreatePartitions, ctx: RequestContext) -> CreatePartitionsAnswer:
        """Needs Alter on each topic."""
        ...

    async def describe_topics(self, request: DescribeTopics, ctx: RequestContext) -> DescribeTopicsAnswer:
        """Needs Describe on each topic named; a listing of every topic leaves out those the caller may not
        describe."""
        ...

    # -- configs --
    async def describe_configs(self, request: DescribeConfigs, ctx: RequestContext) -> DescribeConfigsAnswer:
        """Needs DescribeConfigs on each topic and group, and on the cluster for the cluster-wide defaults."""
        ...

    async def incremental_alter_configs(
        self, request: IncrementalAlterConfigs, ctx: RequestContext
    ) -> IncrementalAlterConfigsAnswer:
        """Needs AlterConfigs on each topic and group, and on the cluster for the cluster-wide defaults."""
        ...

    # -- elections and reassignments --
    async def elect_leaders(self, request: ElectLeaders, ctx: RequestContext) -> ElectLeadersAnswer:
        """Needs cluster Alter."""
        ...

    async def alter_partition_reassignments(
        self, request: AlterReassignments, ctx: RequestContext
    ) -> AlterReassignmentsAnswer:
        """Needs cluster Alter."""
        ...

    # -- the cluster --
    async def describe_cluster(self, request: DescribeCluster, ctx: RequestContext) -> DescribeClusterAnswer: ...

    async def describe_quorum(self, request: DescribeQuorum, ctx: RequestContext) -> DescribeQuorumAnswer:
        """Needs cluster Describe."""
        ...

    # -- client quotas --
    async def alter_client_quotas(self, request: AlterClientQuotas, ctx: RequestContext) -> AlterClientQuotasAnswer:
        """Needs cluster AlterConfigs."""
        ...

    async def describe_client_quotas(
        self, request: DescribeClientQuotas, ctx: RequestContext
    ) -> DescribeClientQuotasAnswer:
        """Needs cluster DescribeConfigs."""
        ...

    # -- ACLs --
    async def create_acls(self, request: CreateAcls, ctx: RequestContext) -> CreateAclsAnswer:
        """Needs cluster Alter."""
        ...

    async def describe_acls(self, request: DescribeAcls, ctx: RequestContext) -> DescribeAclsAnswer:
        """Needs cluster Describe."""
        ...

    async def delete_acls(self, request: DeleteAcls, ctx: RequestContext) -> DeleteAclsAnswer:
        """Needs cluster Alter."""
        ...

    # -- SCRAM credentials --
    async def alter_user_scram_credentials(
        self, request: AlterScramCredentials, ctx: RequestContext
    ) -> AlterScramCredentialsAnswer:
        """Needs cluster Alter."""
        ...

    async def describe_user_scram_credentials(
        self, request: DescribeScramCredentials, ctx: RequestContext
    ) -> DescribeScramCredentialsAnswer:
        """Needs cluster Describe."""
        ...

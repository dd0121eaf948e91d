"""The cluster and its metadata quorum: DescribeCluster from this node's image, DescribeQuorum from the Raft core of
the active controller (a node that is not it asks it)."""

from __future__ import annotations

from odradek.client.common import clock
from odradek.client.common.acls import AclOperation
from odradek.client.common.admin.cluster import (
    BrokerInfo,
    ControllerNode,
    DescribeCluster,
    DescribeClusterAnswer,
    DescribeQuorum,
    DescribeQuorumAnswer,
    ReplicaState,
)
from odradek.client.common.request_context import RequestContext
from odradek.controller.admin.base import CLUSTER_DENIED, NOT_CONTROLLER, AdminBase
from odradek.controller.raft import PeerProgress, Role


class ClusterAdmin(AdminBase):
    async def describe_cluster(self, request: DescribeCluster, ctx: RequestContext) -> DescribeClusterAnswer:
        image = self.sm.image
        leader = self.sm.leader.leader_id
        return DescribeClusterAnswer(
            cluster_id=self.sm.cluster_id,
            controller_id=-1 if leader is None else leader,
            brokers=tuple(
                BrokerInfo(
                    node_id=b.broker_id,
                    host=b.host,
                    port=b.port,
                    rack=b.rack,
                    fenced=b.fenced,
                    epoch=b.epoch,
                    in_controlled_shutdown=b.in_controlled_shutdown,
                    listeners=tuple(b.listeners),
                )
                for b in sorted(image.brokers.values(), key=lambda b: b.broker_id)
            ),
            controllers=tuple(
                ControllerNode(node_id=i, host=a.rpartition(":")[0], port=int(a.rpartition(":")[2]))
                for i, a in sorted(self.voters.items())
            ),
        )

    async def describe_quorum(self, request: DescribeQuorum, ctx: RequestContext) -> DescribeQuorumAnswer:
        """Needs cluster Describe."""
        if self.cluster_denied(ctx, AclOperation.DESCRIBE, "DescribeQuorum"):
            return DescribeQuorumAnswer(error=CLUSTER_DENIED)
        if self.driver.leader.role is not Role.LEADER:
            forwarded = await self.forward.describe_quorum(ctx)
            return forwarded if forwarded is not None else DescribeQuorumAnswer(error=NOT_CONTROLLER)
        node = self.driver.node
        if node is None:  # a node serves Admin only once its Raft driver has started
            raise RuntimeError("the Raft driver is not started")
        tick_ms = self.driver.tick_ms
        wall = clock.wall_ms()

        def at(tick: int | None) -> int:
            """A tick of the Raft core as wall-clock ms; -1 for never, Kafka's unknown."""
            return -1 if tick is None else wall - max(0, (node.now - tick) * tick_ms)

        def state(r: PeerProgress) -> ReplicaState:
            return ReplicaState(
                node_id=r.node_id,
                log_end_offset=r.end_offset,
                last_fetch_timestamp_ms=at(r.last_fetch_tick),
                last_caught_up_timestamp_ms=at(r.last_caught_up_tick),
            )

        replicas = node.peer_progress()
        # The leader fetched and caught up now, as Kafka reports it.
        now = node.now
        leader = PeerProgress(node.node_id, True, node.log.end_offset, last_fetch_tick=now, last_caught_up_tick=now)
        return DescribeQuorumAnswer(
            leader_id=node.node_id,
            leader_epoch=node.epoch,
            high_watermark=node.high_watermark,
            voters=(state(leader), *(state(r) for r in replicas if r.voter)),
            observers=tuple(state(r) for r in replicas if not r.voter),
        )

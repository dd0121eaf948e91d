"""Share groups on one broker: the three shells a broker runs for them, put together.

- the **share coordinator** (``state_coordinator``): the durable share-partition states of the
  ``__share_group_state`` partitions this broker leads, served to every broker (ShareCoordinator gRPC service);
- the **partition leader's side** (``leader``): ShareFetch and ShareAcknowledge on the partitions this broker leads,
  reading and writing their state through the share coordinators (``persister``);
- the **share group coordinator** (``group_coordinator``): the membership of the share groups whose
  ``__consumer_offsets`` partition this broker leads, beside the group coordinator.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Mapping
from typing import Any

from odradek.broker.config import NodeConfig
from odradek.broker.groups.coordinator import GroupCoordinator
from odradek.broker.partition import Partition
from odradek.broker.replica_manager import ReplicaManager
from odradek.broker.share.group import ShareGroupConfig
from odradek.broker.share.group_coordinator import ShareGroupCoordinator
from odradek.broker.share.group_offsets import ShareGroupOffsets
from odradek.broker.share.leader import ShareLeader, ShareLeaderConfig
from odradek.broker.share.persister import SharePersister
from odradek.broker.share.service import ShareService
from odradek.broker.share.state_coordinator import ShareCoordinatorService, ShareStateConfig, ShareStateCoordinator
from odradek.client.common.access import OPEN, AccessControl
from odradek.client.common.metadata_image import MetadataImage
from odradek.client.connection import ChannelPool

STATE_RPC_TIMEOUT_S = 10.0


def group_config(c: NodeConfig) -> ShareGroupConfig:
    """The share groups' membership settings (Kafka's names)."""
    return ShareGroupConfig(
        session_timeout_ms=c["group.share.session.timeout.ms"],
        heartbeat_interval_ms=c["group.share.heartbeat.interval.ms"],
        max_size=c["group.share.max.size"],
    )


class ShareBroker:
    """``create_state_topic(partitions, replication_factor)`` asks the active controller for ``__share_group_state``."""

    def __init__(
        self,
        config: NodeConfig,
        image: Callable[[], MetadataImage],
        replicas: ReplicaManager,
        groups: GroupCoordinator,
        create_state_topic: Callable[[int, int], Coroutine[Any, Any, None]],
    ) -> None:
        state_config = ShareStateConfig.from_node(config)
        self.state = ShareStateCoordinator(image, state_config, create_state_topic)
        self._pool = ChannelPool(inter_broker=True)
        # A leader retries a state call for as long as a coordinator's write may take, twice over.
        self.persister = SharePersister(
            config.node_id, self.state, self._pool, STATE_RPC_TIMEOUT_S, 2 * state_config.write_timeout_ms
        )
        self.leader = ShareLeader(replicas, image, self.persister, ShareLeaderConfig.from_node(config))
        self.groups = ShareGroupCoordinator(
            groups, image, group_config(config), self.persister, on_removed=self.leader.members_removed
        )
        self.offsets = ShareGroupOffsets(self.groups, self.persister, image, on_reset=self._offsets_reset)

    def _offsets_reset(self, group: str) -> None:
        """Offsets of the group were altered or deleted: the leader here forgets what it caches, the coordinator
        stores the group's topics with state."""
        self.leader.forget_group(group)
        self.groups.store_consumed(group)

    def on_leadership(self, partitions: Mapping[tuple[str, int], Partition]) -> None:
        self.state.on_leadership(partitions)
        self.leader.on_leadership(partitions)

    def start(self) -> None:
        self.leader.start()

    async def close(self) -> None:
        await self.leader.close()
        await self.state.close()
        await self._pool.close()

    def service(self, access: AccessControl = OPEN) -> ShareService:
        """The share group APIs every listener serves."""
        return ShareService(self.groups, self.leader, access, self.offsets)

    def coordinator_service(self, access: AccessControl = OPEN) -> ShareCoordinatorService:
        """The share coordinator for the other brokers, on the broker listener."""
        return ShareCoordinatorService(self.state, access)

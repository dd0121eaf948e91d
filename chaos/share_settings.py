"""The share group workload's broker settings (``--workload kafka-share``), apart from the workload so that the
runner and the checker read them without loading librdkafka: locks that expire within seconds, members found dead
within seconds, a few ``__share_group_state`` partitions (they all fail over in a run), and a delivery count limit
that records reach soon."""

from __future__ import annotations

LOCK_MS = 3000  # group.share.record.lock.duration.ms
DELIVERY_LIMIT = 3  # group.share.delivery.count.limit
SHARE_NODE_SETTINGS = {
    "group.share.record.lock.duration.ms": LOCK_MS,
    "group.share.delivery.count.limit": DELIVERY_LIMIT,
    "group.share.heartbeat.interval.ms": 1000,
    "group.share.session.timeout.ms": 6000,
    "share.coordinator.state.topic.num.partitions": 3,
}

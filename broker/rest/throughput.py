"""The console's charts' data, without I/O: the few series it draws picked out of a broker's Prometheus metrics (the
families its registry collects), as totals the console turns into rates between two polls: record bytes and
records appended and bytes fetched, by topic, and the lag of each consumer group this broker coordinates."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from prometheus_client.core import Metric

# Metric family name (as collected: counters without their _total) and the answer's field.
COUNTERS = {"odradek_bytes_in": "bytes_in", "odradek_bytes_out": "bytes_out", "odradek_messages_in": "messages_in"}
GROUP_LAG = "odradek_consumer_group_lag_sum"


def summary(broker_id: int, time_ms: int, families: Iterable[Metric]) -> dict[str, Any]:
    out: dict[str, Any] = {"broker_id": broker_id, "time_ms": time_ms, "group_lag": {}}
    out.update({field: {} for field in COUNTERS.values()})
    for family in families:
        if family.name in COUNTERS:
            by_topic = out[COUNTERS[family.name]]
            for sample in family.samples:
                if sample.name.endswith("_total"):
                    topic = sample.labels.get("topic", "")
                    by_topic[topic] = by_topic.get(topic, 0) + sample.value
        elif family.name == GROUP_LAG:
            for sample in family.samples:
                out["group_lag"][sample.labels.get("group", "")] = sample.value
    return out

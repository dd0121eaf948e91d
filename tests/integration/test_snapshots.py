"""Metadata snapshots end to end: the log is trimmed, and nodes rebuild from snapshots after restarts."""

from __future__ import annotations

import shutil
import signal
from pathlib import Path

import pytest

from odradek.client.admin import Admin

from .conftest import start_cluster, wait_for

pytestmark = pytest.mark.integration


def test_snapshot_transfer_to_an_empty_observer_and_reload_on_restart(tmp_path: Path) -> None:
    cluster = start_cluster(tmp_path, **{"metadata.log.max.snapshot.interval.records": 5})
    try:
        with Admin({"bootstrap.servers": cluster.admin_servers, "request.timeout.ms": 10000}) as admin:
            cluster.signal(6, signal.SIGKILL)
            wait_for(lambda: next(b for b in admin.describe_cluster().brokers if b.node_id == 6).fenced, 10)
            shutil.rmtree(cluster.node(6).directory / "data" / "__raft")  # the broker forgets all metadata
            names = [f"snap-{i}" for i in range(12)]
            for name in names:
                admin.create_topic(name, 1, 2)
            leader = admin.describe_quorum().leader_id
            snapshots = list((cluster.node(leader).directory / "data" / "__raft" / "snapshots").glob("*.checkpoint"))
            assert snapshots, "the leader took no snapshot"
            assert min(int(p.name.split("-")[0]) for p in snapshots) > 0

            cluster.start(6)
            wait_for(lambda: not next(b for b in admin.describe_cluster().brokers if b.node_id == 6).fenced, 20)
        with Admin({"bootstrap.servers": f"127.0.0.1:{cluster.node(6).broker_port}"}) as broker6:
            assert set(names) <= set(broker6.list_topics())

        follower = next(n for n in (1, 2, 3) if n != leader)
        cluster.signal(follower, signal.SIGKILL)
        wait_for(lambda: cluster.status()[follower - 1]["state"] == "stopped", 10)
        cluster.start(follower)
        with Admin({"bootstrap.servers": f"127.0.0.1:{cluster.node(follower).controller_port}"}) as restarted:
            wait_for(lambda: set(names) <= set(restarted.list_topics()), 20, 0.2, "the restarted controller")
            # the brokers' registered Kafka listeners came back with the snapshot
            kafka = {n.node_id: [("KAFKA", n.host, n.kafka_port)] for n in cluster.nodes if n.kafka_port}
            registered = {
                b.node_id: [(li.name, li.host, li.port) for li in b.listeners]
                for b in restarted.describe_cluster().brokers
            }
            assert registered == kafka
    finally:
        cluster.stop_all(timeout=10)

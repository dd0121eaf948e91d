"""Followers replicating over each transport (``replica.fetch.protocol``: ``kafka``, the default, and ``grpc``), with
real processes: an acks=all load on an RF=3 topic (min ISR 2), the followers catching up, the leader SIGKILLed
mid-load and restarted. No acknowledged record may be lost, the ISR must be whole again, and every replica must
reach the same log end. With ``kafka`` no broker may have served a single gRPC Fetch before the records are read
back: replication, including the restarted broker's truncation and catch-up, went over the Kafka listeners; with
``grpc`` no follower fetched over a Kafka listener and the leaders served the followers' gRPC Fetches."""

from __future__ import annotations

import re
import signal
import urllib.request
from typing import Any

import pytest

from odradek.client import Admin
from odradek.deploy.local import DevCluster

from .conftest import FAST, wait_for
from .test_replication import ContinuousProducer, check_acked, read_all

BROKERS = (2, 3, 4)  # node 1 is the controller
NODE = {
    **FAST,
    "replica.lag.time.max.ms": 3000,
    "replica.fetch.wait.max.ms": 200,
    "replica.fetch.backoff.ms": 200,
}
TOPIC = "kafka-replicated"
pytestmark = [
    pytest.mark.integration,
    pytest.mark.odradek_cluster(controllers=1, brokers=3, config=NODE, shared=False),
]
# The default transport (no key set: kafka) and gRPC, each on its own cluster.
TRANSPORTS = pytest.mark.parametrize(
    ("odradek_cluster", "protocol"),
    [({"config": NODE}, "kafka"), ({"config": {**NODE, "replica.fetch.protocol": "grpc"}}, "grpc")],
    indirect=["odradek_cluster"],
    ids=["kafka-default", "grpc"],
)
GRPC_FETCH = re.compile(r'^odradek_requests_total\{api="Fetch",outcome="\w+"\} (\S+)$', re.M)


def grpc_fetches(cluster: DevCluster, node_id: int) -> float:
    """Fetch RPCs the node's gRPC listener has served (consumers' and followers')."""
    url = f"http://127.0.0.1:{cluster.node(node_id).metrics_port}/metrics"
    text = urllib.request.urlopen(url, timeout=5).read().decode()
    return sum(float(v) for v in GRPC_FETCH.findall(text))


def log_ends(admin: Admin) -> dict[int, int]:
    """Each broker's log end offset of the topic's replica."""
    out = {}
    for broker in admin.describe_log_dirs(BROKERS, [TOPIC]):
        for d in broker.log_dirs:
            for r in d.replicas:
                if r.topic == TOPIC:
                    out[broker.broker_id] = r.log_end_offset
    return out


def kafka_fetch_lines(cluster: DevCluster, node_id: int) -> list[str]:
    text = (cluster.node(node_id).directory / "node.log").read_text(errors="replace")
    return re.findall(r"fetching from broker (\d+) over its Kafka listener", text)


@TRANSPORTS
def test_followers_lose_no_acknowledged_record_across_a_leader_sigkill(odradek_cluster: Any, protocol: str) -> None:
    cluster: DevCluster = odradek_cluster
    with Admin({"bootstrap.servers": cluster.admin_servers, "request.timeout.ms": 10000}) as admin:
        admin.create_topic(TOPIC, 1, 3, {"min.insync.replicas": "2"})
        old = wait_for(lambda: (p := admin.describe_topic(TOPIC).partitions[0]).leader > 0 and p, 15, what="a leader")
        with ContinuousProducer(cluster.bootstrap_servers, TOPIC) as producer:
            wait_for(lambda: len(producer.acked()) > 300, 20, what="acknowledged records before the kill")
            ends = log_ends(admin)
            assert len(ends) == 3 and min(ends.values()) > 0, ends  # every follower holds records
            if protocol == "kafka":
                for follower in set(BROKERS) - {old.leader}:
                    assert str(old.leader) in kafka_fetch_lines(cluster, follower)
            else:
                assert grpc_fetches(cluster, old.leader) > 0  # the followers' fetches (no consumer has read yet)
            cluster.signal(old.leader, signal.SIGKILL)
            new = wait_for(
                lambda: (p := admin.describe_topic(TOPIC).partitions[0]).leader not in (-1, old.leader) and p,
                20,
                what="a new leader",
            )
            acked_at_kill = len(producer.acked())
            wait_for(lambda: len(producer.acked()) > acked_at_kill + 200, 20, what="acks from the new leader")
            cluster.start(old.leader)
            wait_for(
                lambda: sorted(admin.describe_topic(TOPIC).partitions[0].isr) == sorted(BROKERS),
                25,
                what="the restarted broker back in the ISR",
            )
        acked = producer.acked()
        # The load is over: every replica reaches the leader's log end.
        final = wait_for(lambda: len(set((e := log_ends(admin)).values())) == 1 and len(e) == 3 and e, 15)
        if protocol == "kafka":
            assert str(new.leader) in kafka_fetch_lines(cluster, old.leader)  # the restarted broker's catch-up
            assert all(grpc_fetches(cluster, b) == 0 for b in BROKERS)  # nothing fetched over gRPC so far
        else:
            assert all(kafka_fetch_lines(cluster, b) == [] for b in BROKERS)
            assert grpc_fetches(cluster, new.leader) > 0  # the restarted broker's catch-up
        end = next(iter(final.values()))
        check_acked(read_all(cluster.bootstrap_servers, TOPIC, end), acked)
        assert grpc_fetches(cluster, new.leader) > 0  # the metric does count gRPC fetches (the read just now)

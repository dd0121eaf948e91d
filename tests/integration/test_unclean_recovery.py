"""Every replica of a partition stops uncleanly, one after another: unclean recovery brings it back without loss.

RF=3, min.insync.replicas=2. Each broker is SIGKILLed in turn and fenced, so the ISR empties into the ELR; each
then restarts without a clean-shutdown marker and leaves the ELR for the last known ELR. No replica is known to
hold everything committed, yet a killed process loses nothing it wrote. With ``unclean.recovery.strategy=balanced``
(the default) the controller compares the returned replicas' logs and elects the most complete one by itself;
with ``manual`` the partition waits for the operator's ``leader elect --unclean``, which makes the same choice.
Either way every acknowledged record is read back.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

from odradek.client import Admin, Producer
from odradek.deploy.local import DevCluster, process_state

from .conftest import start_cluster, wait_for
from .test_replication import read_all

RECORDS = 200


def leaderless(admin: Admin, topic: str) -> bool:
    p = admin.describe_topic(topic).partitions[0]
    return p.leader == -1 and not p.isr


def test_balanced_recovery_and_the_operators_unclean_election_lose_no_acknowledged_record(tmp_path: Path) -> None:
    cluster: DevCluster = start_cluster(tmp_path / "c", controllers=1)
    try:
        admin = Admin({"bootstrap.servers": cluster.admin_servers, "request.timeout.ms": 10000})
        topics = {"auto": "balanced", "manual": "manual"}
        for name, strategy in topics.items():
            admin.create_topic(name, 1, 3, {"min.insync.replicas": "2", "unclean.recovery.strategy": strategy})
        wait_for(lambda: all(len(admin.describe_topic(t).partitions[0].isr) == 3 for t in topics), 30, what="ISRs")
        with Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "linger.ms": 5}) as producer:
            futures = [producer.send(t, b"%s-%05d" % (t.encode(), i)) for t in topics for i in range(RECORDS)]
            producer.flush(60)
        assert all(f.result(0).offset >= 0 for f in futures)

        brokers = sorted(n.node_id for n in cluster.nodes if n.broker_port)
        for b in brokers:  # one at a time, each fenced before the next dies
            cluster.signal(b, signal.SIGKILL)
            wait_for(lambda b=b: process_state(cluster.node(b).pid) == "stopped", 20, what=f"broker {b} to exit")
            wait_for(
                lambda b=b: all(b not in admin.describe_topic(t).partitions[0].isr for t in topics),
                30,
                what=f"broker {b} to leave the ISRs",
            )
        assert all(leaderless(admin, t) for t in topics)
        elr = admin.describe_topic("auto").partitions[0].elr
        assert len(elr) == 2, elr  # the last two to die held everything committed

        for b in brokers:
            cluster.start(b)
        wait_for(lambda: admin.describe_topic("auto").partitions[0].leader != -1, 60, what="auto's recovery")
        assert read_all(cluster.bootstrap_servers, "auto", RECORDS) == [b"auto-%05d" % i for i in range(RECORDS)]
        controller_log = cluster.node(1).log_file
        assert "unclean recovery of auto-0: elected" in controller_log.read_text()

        # The manual topic waited (its replicas were active all along); the operator recovers it.
        time.sleep(2)  # two recovery rounds of the controller
        assert leaderless(admin, "manual")
        [result] = wait_for(
            lambda: [r for r in admin.elect_leaders("unclean", [("manual", 0)]) if r.error is None],
            30,
            what="the operator's unclean election",
        )
        assert result.leader in brokers
        assert read_all(cluster.bootstrap_servers, "manual", RECORDS) == [b"manual-%05d" % i for i in range(RECORDS)]
        assert "operator's unclean recovery of manual-0: elected" in controller_log.read_text()
    finally:
        cluster.stop_all(timeout=10)

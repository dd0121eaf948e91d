"""Log dir failure with real processes: a broker whose log dir fails keeps serving its other dir, leadership of the
failed replicas moves to another broker with no acknowledged record lost, and a broker with every dir failed stops.

The failure is injected with ``unsafe.testing.log.dir.failure.file``: a file of that name in a log dir makes the
broker fail the dir as an EIO in one of its logs would (the same path as a real I/O error from there on)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
import tomli_w

from odradek.broker.config import NodeConfig
from odradek.broker.storage import format_storage
from odradek.client import Admin, Producer
from odradek.deploy.local import DevCluster, process_state

from .conftest import FAST, start_created, wait_for
from .test_replication import ContinuousProducer, check_acked, describe, read_all, wait_acked_progress

pytestmark = pytest.mark.integration

TRIGGER = "FAIL_THIS_LOG_DIR"
SETTINGS = {
    "replica.lag.time.max.ms": 3000,
    "replica.fetch.backoff.ms": 200,
    "replica.fetch.wait.max.ms": 200,
    "unsafe.testing.log.dir.failure.file": TRIGGER,
}


def start_two_dir_cluster(directory: Path) -> DevCluster:
    """One controller, three brokers each with log dirs ``extra`` then ``data`` (the metadata log's dir), so a
    broker's first partition is placed in ``extra`` and its second in ``data``."""
    cluster = DevCluster.create(directory, 1, 3, overrides={**FAST, **SETTINGS})
    for n in cluster.nodes:
        if "broker" not in n.roles:
            continue
        props = tomllib.loads(Path(n.config).read_text())
        props["log.dirs"] = f"{n.directory / 'extra'},{n.directory / 'data'}"
        props["metadata.log.dir"] = str(n.directory / "data")
        Path(n.config).write_text(tomli_w.dumps(props))
        format_storage(NodeConfig.load(n.config), cluster.cluster_id, ignore_formatted=True)
    return start_created(cluster)


@pytest.fixture
def cluster(tmp_path: Path):
    c = start_two_dir_cluster(tmp_path)
    yield c
    c.stop_all(timeout=10)


def test_a_failed_log_dir_moves_leadership_and_a_broker_without_dirs_stops(cluster: DevCluster) -> None:
    admin = Admin({"bootstrap.servers": cluster.admin_servers, "request.timeout.ms": 10000})
    config = {"min.insync.replicas": "2"}
    admin.create_topic("a", 1, 3, config)  # in every broker's "extra" dir
    wait_for(lambda: describe(admin, "a").leader > 0, 10, what="a leader for a")
    admin.create_topic("b", 1, 3, config)  # in every broker's "data" dir
    wait_for(lambda: describe(admin, "b").leader > 0, 10, what="a leader for b")
    old = describe(admin, "a")
    victim = cluster.node(old.leader)
    assert (victim.directory / "extra" / "a-0").is_dir() and (victim.directory / "data" / "b-0").is_dir()

    with ContinuousProducer(cluster.bootstrap_servers, "a") as producer:
        wait_for(lambda: len(producer.acked()) > 300, 20, what="records acknowledged before the failure")
        (victim.directory / "extra" / TRIGGER).touch()
        new = wait_for(
            lambda: (d := describe(admin, "a")).leader not in (-1, old.leader) and victim.node_id not in d.isr and d,
            15,
            what="leadership of a to move off the failed replica",
        )
        assert new.leader in old.isr
        wait_acked_progress(producer, 15)  # acks=all produce works through the new leader
        acked_at_failover = len(producer.acked())
        wait_for(lambda: len(producer.acked()) > acked_at_failover + 300, 20, what="more records acknowledged")

    # The broker lives on and serves its other dir: b keeps it in the ISR while taking acks=all writes.
    assert process_state(victim.pid) == "running"
    with Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"}) as p:
        for i in range(20):
            p.send("b", b"b-%d" % i).result(15)
    assert victim.node_id in describe(admin, "b").isr

    d = describe(admin, "a")
    values = read_all(cluster.bootstrap_servers, "a", d.high_watermark)
    check_acked(values, producer.acked())

    # Its last dir (also the metadata log's) fails: the process exits non-zero with one clear line.
    (victim.directory / "data" / TRIGGER).touch()
    wait_for(lambda: cluster.exit_status(victim.node_id) is not None, 15, what="the broker to stop")
    assert cluster.exit_status(victim.node_id) == 1
    assert f"broker {victim.node_id} stops: log dirs offline" in victim.log_file.read_text()
    wait_for(lambda: victim.node_id not in describe(admin, "b").isr, 15, what="the stopped broker to leave b's ISR")
    admin.close()

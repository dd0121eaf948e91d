"""The deployment on several hosts (issue 9): 3 controllers and 3 brokers, each in its own network namespace with
its own address, configured by the generator and started as their systemd units start them (deploy/vms.py).

From outside the namespaces: produce on one VM and consume on another; restart all six nodes one at a time while
a producer writes with acks=all, and read everything back; then the two procedures of docs/deploy.md, adding a
broker (and moving a partition onto it) and replacing a dead controller whose disk is gone.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from odradek.chaos.netns import NetnsNetwork
from odradek.client import errors
from odradek.deploy.vms import VmCluster, produce_and_consume_across_hosts, rolling_restart_under_load

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not NetnsNetwork.available(), reason="needs root and iproute2 for network namespaces"),
]


@pytest.fixture(scope="module")
def vms(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VmCluster]:
    cluster = VmCluster(tmp_path_factory.mktemp("vms"), properties={"broker.session.timeout.ms": 6000}, spare_hosts=1)
    try:
        cluster.start_all()
        cluster.wait_ready()
        yield cluster
    finally:
        cluster.close()


def test_nodes_run_on_distinct_hosts_from_generated_configs(vms: VmCluster) -> None:
    hosts = [n.host for n in vms.spec.nodes]
    assert len(set(hosts)) == 6 and len(vms.spec.controllers) == 3 and len(vms.spec.brokers) == 3
    brokers = vms.cli_json("broker", "list")
    expected = {(n.node_id, n.host, 9092) for n in vms.spec.brokers}
    assert {(b["node_id"], b["host"], b["port"]) for b in brokers} == expected
    assert {b["rack"] for b in brokers} == {"rack-0", "rack-1", "rack-2"}
    quorum = vms.cli_json("cluster", "quorum")
    assert {v["node_id"] for v in quorum["voters"]} == {1, 2, 3}
    for n in vms.spec.nodes:  # started with the unit's environment, not the re-exec that sets it otherwise
        environ = Path(f"/proc/{vms.procs[n.node_id].pid}/environ").read_bytes().split(b"\0")
        assert b"MALLOC_MMAP_THRESHOLD_=67108864" in environ


def test_produce_on_one_vm_and_consume_on_another(vms: VmCluster) -> None:
    assert produce_and_consume_across_hosts(vms) == [f"hello from vm {i}" for i in range(10)]


def test_rolling_restart_under_acks_all_load_loses_nothing(vms: VmCluster) -> None:
    report = rolling_restart_under_load(vms, max_records=200_000, rate=2000)
    assert [r["node_id"] for r in report["restarts"]] == [1, 2, 3, 4, 5, 6]
    assert all(r["stop_s"] < 30 for r in report["restarts"]), report["restarts"]  # graceful, not SIGKILLed
    assert report["acked_during_restarts"] > 5000
    assert report["lost"] == 0 and report["moved"] == 0 and report["duplicated"] == 0, report
    assert report["application_error_count"] == 0, report["application_errors"]
    for name in report["producer_retries"]:  # what the producer absorbed: retriable errors only
        assert getattr(errors, name)().retriable, name


def test_adding_a_broker_as_documented(vms: VmCluster) -> None:
    before = {n: path.read_text() for n, path in vms.configs.items()}
    vms.cli("topic", "create", "grow", "--partitions", "1", "--replication-factor", "3")
    node = vms.add_broker(rack="rack-0")
    assert {n: vms.configs[n].read_text() for n in before} == before  # the running nodes' configs are unchanged
    vms.wait(lambda: node.node_id in {b["node_id"] for b in vms.cli_json("broker", "list")}, 60, "registered")
    vms.cli(
        "partition",
        "reassign",
        "--topic",
        "grow",
        "--partition",
        "0",
        "--replicas",
        f"{node.node_id},5,6",
        "--wait",
        "--timeout",
        "60",
    )
    (partition,) = vms.cli_json("topic", "describe", "grow")["partitions"]
    assert partition["replicas"] == [node.node_id, 5, 6] and node.node_id in partition["isr"]
    vms.wait(vms.healthy, 60, "healthy with the new broker")


def test_replacing_a_dead_controller_as_documented(vms: VmCluster) -> None:
    leader = vms.cli_json("cluster", "quorum")["leader_id"]
    victim = next(n.node_id for n in vms.spec.controllers if n.node_id != leader)
    vms.replace_controller(victim)  # killed, its disk wiped, then the replacement VM formatted and started

    def caught_up() -> bool:
        quorum = vms.cli_json("cluster", "quorum")
        voter = next(v for v in quorum["voters"] if v["node_id"] == victim)
        return voter["lag"] == 0 and voter["log_end_offset"] >= quorum["high_watermark"] > 0

    vms.wait(caught_up, 90, f"controller {victim} rebuilt from the leader")
    vms.wait(vms.healthy, 60, "healthy after the replacement")

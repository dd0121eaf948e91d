"""The local cluster library and its pytest plugin: topic specs, options and errors are checked before any process
starts; one real cluster checks that a shared cluster is restored between tests and that ``running_cluster``
cleans up (tests/integration/test_clients.py and examples/ run real clusters through the fixture)."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from odradek.broker.config import NodeConfig
from odradek.deploy import pytest_plugin
from odradek.deploy.local import (
    DevCluster,
    LocalClusterError,
    TopicSpec,
    process_state,
    run_sync,
    running_cluster,
    topic_specs,
)


def test_topics_are_given_as_counts_specs_or_mappings() -> None:
    specs = topic_specs({"a": 3, "b": TopicSpec(2, 1), "c": {"partitions": 4, "configs": {"cleanup.policy": "delete"}}})
    assert specs == {
        "a": TopicSpec(3),
        "b": TopicSpec(2, 1),
        "c": TopicSpec(4, -1, {"cleanup.policy": "delete"}),
    }


@pytest.mark.parametrize(
    ("topics", "message"),
    [
        ({"a": 0}, "at least one partition"),
        ({"a": {"partition": 3}}, "unknown keys"),
        ({"a": "3"}, "expected a partition count"),
        ({"a": True}, "expected a partition count"),
    ],
)
def test_a_bad_topic_fails_before_any_process_starts(tmp_path: Path, topics: dict, message: str) -> None:
    with pytest.raises(LocalClusterError, match=message), running_cluster(topics=topics, directory=tmp_path / "c"):
        pytest.fail("a cluster started")
    assert not (tmp_path / "c").exists()


@pytest.mark.parametrize(("controllers", "brokers"), [(0, 1), (1, -1)])
def test_a_cluster_without_controllers_or_with_negative_brokers_is_refused(
    tmp_path: Path, controllers: int, brokers: int
) -> None:
    with pytest.raises(LocalClusterError):
        DevCluster.create(tmp_path, controllers, brokers)
    assert not (tmp_path / "cluster.json").exists()


@pytest.mark.parametrize("combined", [False, True])
def test_every_dev_broker_gets_a_kafka_listener_on_its_own_port(tmp_path: Path, combined: bool) -> None:
    cluster = DevCluster.create(tmp_path, 2, 2, combined)
    configs = {n.node_id: NodeConfig.load(n.config) for n in cluster.nodes}
    kafka = {i: c.kafka_listener for i, c in configs.items() if c.is_broker}
    assert len(kafka) == 2 and all(e is not None for e in kafka.values())
    assert all(c.kafka_listener is None for c in configs.values() if not c.is_broker)
    ports = [p for n in cluster.nodes for p in (n.broker_port, n.controller_port, n.metrics_port, n.kafka_port) if p]
    assert len(ports) == len(set(ports))  # its own port, apart from every other listener of every node
    assert cluster.kafka_bootstrap_servers == ",".join(f"127.0.0.1:{e.port}" for e in kafka.values())  # type: ignore[union-attr]
    assert all(
        s["kafka"] == (f"127.0.0.1:{n.kafka_port}" if n.kafka_port else None)
        for n, s in zip(cluster.nodes, cluster.status())
    )
    assert DevCluster.load(tmp_path).kafka_bootstrap_servers == cluster.kafka_bootstrap_servers  # saved


@pytest.mark.parametrize(
    ("combined", "first", "controllers", "brokers"), [(False, 0, [0], [1, 2]), (True, 5, [5, 6], [5, 6])]
)
def test_node_ids_count_from_the_first_id_controllers_first(
    tmp_path: Path, combined: bool, first: int, controllers: list[int], brokers: list[int]
) -> None:
    cluster = DevCluster.create(tmp_path, len(controllers), 2, combined, first_id=first)
    configs = {n.node_id: NodeConfig.load(n.config) for n in cluster.nodes}
    assert sorted(i for i, c in configs.items() if c.is_controller) == controllers
    assert sorted(i for i, c in configs.items() if c.is_broker) == brokers
    assert all(c.node_id == i for i, c in configs.items())
    with pytest.raises(LocalClusterError, match="negative"):
        DevCluster.create(tmp_path / "bad", 1, 1, first_id=-1)


async def test_run_sync_works_inside_a_running_event_loop() -> None:
    async def answer() -> int:
        await asyncio.sleep(0)
        return 42

    assert run_sync(answer()) == 42


def request(marker_kwargs: dict | None = None, param: dict | None = None, marker_args: tuple = ()) -> SimpleNamespace:
    marker = None if marker_kwargs is None else SimpleNamespace(args=marker_args, kwargs=marker_kwargs)
    node = SimpleNamespace(get_closest_marker=lambda name: marker if name == pytest_plugin.MARKER else None)
    return SimpleNamespace(node=node, **({"param": param} if param is not None else {}))


def test_the_fixture_reads_the_marker_and_an_indirect_parameter_overrides_it() -> None:
    assert pytest_plugin.cluster_options(request()) == {}
    assert pytest_plugin.cluster_options(request({"brokers": 3, "shared": False}, {"brokers": 2})) == {
        "brokers": 2,
        "shared": False,
    }
    assert pytest_plugin.shape({"config": {"num.partitions": 3}}) == {
        "controllers": 1,
        "brokers": 1,
        "combined": False,
        "overrides": {"num.partitions": 3},
        "tls": False,
    }
    assert pytest_plugin.shape(pytest_plugin.cluster_options(request({"tls": True})))["tls"] is True


@pytest.mark.parametrize(
    "bad",
    [request({"broker": 3}), request({}, {"topic": {}}), request({}, marker_args=(3,)), request(None, param=[3])],
)
def test_unknown_fixture_options_are_usage_errors(bad: SimpleNamespace) -> None:
    with pytest.raises(pytest.UsageError):
        pytest_plugin.cluster_options(bad)


@pytest.mark.integration
def test_a_shared_cluster_gets_back_the_nodes_a_test_stopped_or_paused(tmp_path: Path) -> None:
    """What the plugin does before handing a shared cluster to the next test; and ``running_cluster`` cleans up."""
    with running_cluster(controllers=1, brokers=2, config={"broker.session.timeout.ms": 3000}) as cluster:
        root = cluster.directory
        broker, other = (n.node_id for n in cluster.nodes if "broker" in n.roles)
        cluster.signal(broker, signal.SIGKILL)
        cluster.signal(other, signal.SIGSTOP)
        deadline = time.monotonic() + 10  # signals take effect once the kernel schedules their targets
        while (process_state(cluster.node(broker).pid), process_state(cluster.node(other).pid)) != (
            "stopped",
            "paused",
        ):
            assert time.monotonic() < deadline, "the nodes never stopped"
            time.sleep(0.01)
        pytest_plugin.restore(cluster)
        assert {n.node_id: process_state(n.pid) for n in cluster.nodes} == dict.fromkeys((1, broker, other), "running")
        run_sync(cluster.wait_ready(10))
        pids = [n.pid for n in cluster.nodes]
    assert not root.exists()
    assert [process_state(pid) for pid in pids] == ["stopped"] * 3


def test_free_ports_are_distinct() -> None:
    """A local cluster's nodes get their ports in one batch: none may be handed out twice (a node then fails to
    start with EADDRINUSE)."""
    from odradek.deploy.process import free_ports

    ports = free_ports(60)
    assert len(set(ports)) == 60 and all(p > 0 for p in ports)


def test_ports_come_from_odradek_port_range_when_it_is_set(monkeypatch: pytest.MonkeyPatch) -> None:
    """With a range, every port is inside it, distinct, and not one something already listens on; a range that
    cannot hold the request, or a malformed one, is an error."""
    import socket

    from odradek.deploy.process import free_ports, port_range

    # A window of this test process's own ports: under xdist its worker's block, which no other process binds in
    # (around a kernel-chosen port, other processes' outgoing connections took ports of the window now and then).
    own = port_range()
    taken = socket.socket()
    taken.bind(("127.0.0.1", free_ports(1)[0]))
    taken.listen()
    port = taken.getsockname()[1]
    try:
        low = max(1024, port - 5) if own is None else min(max(own[0], port - 5), own[1] - 10)
        monkeypatch.setenv("ODRADEK_PORT_RANGE", f"{low}-{low + 10}")
        ports = free_ports(10)
        assert len(set(ports)) == 10 and all(low <= p <= low + 10 for p in ports) and port not in ports
        with pytest.raises(OSError, match="fewer than 11 free ports"):
            free_ports(11)
    finally:
        taken.close()
    for bad in ("9000", "a-b", "70000-70010", "2000-1000", "80-90"):
        monkeypatch.setenv("ODRADEK_PORT_RANGE", bad)
        with pytest.raises(ValueError, match="ODRADEK_PORT_RANGE must be LOW-HIGH"):
            free_ports(1)


def test_each_xdist_worker_gets_ports_of_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """Under pytest-xdist the plugin gives worker gwN the Nth of equal blocks below the ephemeral range."""
    blocks = []
    for worker in range(4):
        monkeypatch.delenv("ODRADEK_PORT_RANGE", raising=False)
        monkeypatch.setenv("PYTEST_XDIST_WORKER", f"gw{worker}")
        monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "4")
        pytest_plugin.give_worker_its_ports()
        low, high = map(int, os.environ["ODRADEK_PORT_RANGE"].split("-"))
        blocks.append((low, high))
    ephemeral_low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    assert all(high - low > 1000 and high < ephemeral_low for low, high in blocks)
    assert all(blocks[i][1] < blocks[i + 1][0] for i in range(3))
    monkeypatch.setenv("ODRADEK_PORT_RANGE", "40000-40100")  # an explicit range wins
    pytest_plugin.give_worker_its_ports()
    assert os.environ["ODRADEK_PORT_RANGE"] == "40000-40100"


def test_the_pool_runs_at_most_two_shared_clusters_and_stops_the_least_recently_used(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Asking for a third shape stops the shared cluster used least recently; a shape asked for again is reused
    while it runs, and started anew once stopped."""
    from odradek.deploy import local

    events: list[str] = []

    class FakeCluster:
        def __init__(self, brokers: int) -> None:
            self.brokers = brokers
            self.nodes = [SimpleNamespace(node_id=1, pid=os.getpid())]  # "running" to restore()

        def start_all_and_wait(self) -> None:
            events.append(f"start {self.brokers}")

        def stop_all(self, timeout: float) -> None:
            events.append(f"stop {self.brokers}")

    create = staticmethod(lambda directory, **args: FakeCluster(args["brokers"]))
    monkeypatch.setattr(local.DevCluster, "create", create)
    pool = pytest_plugin.ClusterPool(tmp_path_factory)
    one = pool.get({"brokers": 1})
    assert pool.get({"brokers": 2}) is not one
    assert pool.get({"brokers": 1}) is one  # reused, and now the most recently used
    pool.get({"brokers": 3})  # the third shape: brokers=2 was used least recently
    assert events == ["start 1", "start 2", "stop 2", "start 3"]
    assert pool.get({"brokers": 1}) is one
    pool.get({"brokers": 2})
    assert events[-2:] == ["stop 3", "start 2"]
    pool.close()
    assert sorted(events[-2:]) == ["stop 1", "stop 2"]

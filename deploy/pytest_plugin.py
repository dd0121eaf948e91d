"""pytest plugin: an ``odradek_cluster`` fixture that gives a test a real cluster of ``odradek server`` processes.

Installed with odradek and registered through the ``pytest11`` entry point, so any project that depends on
odradek has the fixture without configuration (``-p odradek.deploy.pytest_plugin`` loads it explicitly). The
cluster's shape comes from the ``odradek_cluster`` marker, or from an indirect parameter (a dict of the same keys),
which takes precedence::

    @pytest.mark.odradek_cluster(brokers=1, topics={"orders": 3})
    def test_orders(odradek_cluster):
        producer = Producer({"bootstrap.servers": odradek_cluster.bootstrap_servers})

Keys: ``controllers`` (1), ``brokers`` (1), ``combined`` (False), ``config`` (properties for every node),
``tls`` (False: True gives every listener TLS with the cluster's own CA and client certificates required; connect
with ``odradek_cluster.client_config()``, which carries the CA and the admin client certificate), ``topics``
(``{name: partitions}``, ``{name: TopicSpec}`` or ``{name: {"partitions", "replication_factor", "configs"}}``,
created when missing) and ``shared`` (True). A shared cluster serves every test asking for the same
shape during the session and stops when the session ends, as a started Kafka container does, or earlier when
two others were asked for more recently (``POOL_SIZE``: idle nodes still cost CPU); a test that stops,
pauses or reconfigures nodes asks for ``shared=False`` and gets a cluster of its own, stopped after the test.

This module imports odradek only when a fixture runs, so loading the plugin costs other test runs nothing.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from odradek.deploy.local import DevCluster

MARKER = "odradek_cluster"
SHAPE_KEYS = {"controllers", "brokers", "combined", "config", "tls"}
KEYS = SHAPE_KEYS | {"topics", "shared"}
POOL_SIZE = 2  # shared clusters running at once


def pytest_configure(config: pytest.Config) -> None:
    give_worker_its_ports()
    config.addinivalue_line(
        "markers",
        f"{MARKER}(controllers=1, brokers=1, combined=False, config=None, tls=False, topics=None, shared=True): "
        "the local odradek cluster the odradek_cluster fixture gives this test",
    )


def give_worker_its_ports() -> None:
    """Under pytest-xdist, give this worker a block of ports of its own (``$ODRADEK_PORT_RANGE``, which the
    clusters it starts and their nodes inherit), below the kernel's ephemeral range: a port one worker chose for a
    node that is still starting is then never chosen by another worker, nor taken by an outgoing connection."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if not worker.startswith("gw") or os.environ.get("ODRADEK_PORT_RANGE"):
        return
    index, workers = int(worker[2:]), int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    try:
        ephemeral_low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        ephemeral_low = 32768
    low = 20000 if ephemeral_low > 24000 else 10000
    size = (min(ephemeral_low, 65536) - low) // max(workers, 1)
    if size < 100:  # an unusual ephemeral range leaves no room below it: keep the kernel's choice
        return
    os.environ["ODRADEK_PORT_RANGE"] = f"{low + index * size}-{low + (index + 1) * size - 1}"


def cluster_options(request: pytest.FixtureRequest) -> dict[str, Any]:
    """The marker's keywords, overridden by an indirect parameter; unknown keys are a usage error."""
    marker = request.node.get_closest_marker(MARKER)
    if marker is not None and marker.args:
        raise pytest.UsageError(f"@pytest.mark.{MARKER} takes keywords only ({', '.join(sorted(KEYS))})")
    options = dict(marker.kwargs) if marker is not None else {}
    param = getattr(request, "param", None)
    if param is not None:
        if not isinstance(param, Mapping):
            raise pytest.UsageError(f"an indirect {MARKER} parameter is a dict of {', '.join(sorted(KEYS))}")
        options.update(param)
    unknown = set(options) - KEYS
    if unknown:
        raise pytest.UsageError(f"{MARKER}: unknown keys {sorted(unknown)} (known: {', '.join(sorted(KEYS))})")
    return options


def shape(options: Mapping[str, Any]) -> dict[str, Any]:
    """The arguments of ``DevCluster.create`` (the key under which a shared cluster is reused)."""
    return {
        "controllers": int(options.get("controllers", 1)),
        "brokers": int(options.get("brokers", 1)),
        "combined": bool(options.get("combined", False)),
        "overrides": dict(options.get("config") or {}),
        "tls": bool(options.get("tls", False)),
    }


class ClusterPool:
    """The session's shared clusters, one per shape, started on first use. At most ``size`` run at once: asking for
    another shape stops the one used least recently (an idle cluster still costs its nodes' CPU and memory, and a
    suite's tests of one shape usually run together); the rest stop at the end of the session."""

    def __init__(self, factory: pytest.TempPathFactory, size: int = POOL_SIZE) -> None:
        self._factory = factory
        self._size = size
        self._clusters: dict[str, DevCluster] = {}  # least recently used first

    def get(self, options: Mapping[str, Any]) -> DevCluster:
        from odradek.deploy.local import DevCluster

        args = shape(options)
        key = json.dumps(args, sort_keys=True, default=str)
        cluster = self._clusters.pop(key, None)
        if cluster is None:
            while len(self._clusters) >= self._size:
                oldest = next(iter(self._clusters))
                self._clusters.pop(oldest).stop_all(timeout=10)
            cluster = DevCluster.create(self._factory.mktemp("odradek"), **args)
            cluster.start_all_and_wait()  # stops the nodes again if the cluster never gets ready
        else:
            restore(cluster)
        self._clusters[key] = cluster
        return cluster

    def close(self) -> None:
        for cluster in self._clusters.values():
            cluster.stop_all(timeout=10)
        self._clusters.clear()


def restore(cluster: DevCluster) -> None:
    """Resume paused nodes and restart stopped ones a previous test left behind, and wait until all are back."""
    from odradek.deploy.local import process_state, run_sync

    states = {n.node_id: process_state(n.pid) for n in cluster.nodes}
    if all(state == "running" for state in states.values()):
        return
    paused = [n for n in cluster.nodes if states[n.node_id] == "paused"]
    for n in paused:
        cluster.signal(n.node_id, signal.SIGCONT)
    deadline = time.monotonic() + 5  # SIGCONT is delivered at once, but /proc says so once the node is scheduled
    while any(process_state(n.pid) == "paused" for n in paused) and time.monotonic() < deadline:
        time.sleep(0.01)
    restarted = {node_id for node_id, state in states.items() if state == "stopped"}
    epochs = run_sync(cluster.broker_epochs()) if restarted else {}
    cluster.start_all()
    run_sync(cluster.wait_ready(newer_than={n: e for n, e in epochs.items() if n in restarted}))


@pytest.fixture(scope="session")
def odradek_cluster_pool(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterPool]:
    """The shared clusters of this session (stopped when it ends)."""
    pool = ClusterPool(tmp_path_factory)
    yield pool
    pool.close()


@pytest.fixture
def odradek_cluster(
    request: pytest.FixtureRequest, odradek_cluster_pool: ClusterPool, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[DevCluster]:
    """A ready local cluster of real processes shaped by the ``odradek_cluster`` marker (see the module doc)."""
    from odradek.deploy.local import run_sync, running_cluster, topic_specs

    options = cluster_options(request)
    topics = topic_specs(options.get("topics"))  # a bad topic fails before any process starts
    if options.get("shared", True):
        cluster = odradek_cluster_pool.get(options)
        if topics:
            run_sync(cluster.create_topics(topics))
        yield cluster
        return
    args = shape(options)
    with running_cluster(
        args["controllers"],
        args["brokers"],
        combined=args["combined"],
        config=args["overrides"],
        topics=topics,
        directory=tmp_path_factory.mktemp("odradek"),
        tls=args["tls"],
    ) as cluster:
        yield cluster

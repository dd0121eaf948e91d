"""Real clusters of ``odradek server`` processes on 127.0.0.1 for integration tests."""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from odradek.client.admin import Admin
from odradek.deploy.local import DevCluster

# Short timeouts so failure detection fits in a test, still well above a loaded 2-core machine's hiccups.
FAST = {
    "broker.heartbeat.interval.ms": 500,
    "broker.session.timeout.ms": 3000,
}


def start_cluster(
    directory: Path,
    controllers: int = 3,
    brokers: int = 3,
    tls: bool = False,
    schema_registry: bool = False,
    **overrides,
) -> DevCluster:
    return start_created(
        DevCluster.create(
            directory, controllers, brokers, overrides={**FAST, **overrides}, tls=tls, schema_registry=schema_registry
        )
    )


def start_created(cluster: DevCluster) -> DevCluster:
    """Start every node of a created cluster and wait until it is ready (stopping it again if it never is)."""
    cluster.start_all_and_wait(60)
    return cluster


def wait_for(condition: Callable[[], object], timeout: float, interval: float = 0.1, what: str = "condition"):
    """Poll until ``condition()`` is truthy; return its value, or fail the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        try:
            value = condition()
            if value:
                return value
        except Exception as e:  # the cluster may be mid-failover: keep polling
            last_error = e
        time.sleep(interval)
    pytest.fail(f"timed out after {timeout}s waiting for {what} (last error: {last_error})")


def namespaces() -> set[str]:
    """The network namespaces this test process made (the chaos runner names them ``odr<pid><letters>-...``): other
    processes' runs, e.g. other pytest-xdist workers', may come and go meanwhile."""
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    own = re.compile(rf"odr{os.getpid()}[a-z]+-")
    return {line.split()[0] for line in out.splitlines() if own.match(line)}


def leftovers(before: set[str], directory: Path) -> list[str]:
    """What a chaos run left behind: its namespaces, and its directory."""
    return sorted(namespaces() - before) + ([str(directory)] if directory.exists() else [])


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevCluster]:
    c = start_cluster(tmp_path_factory.mktemp("cluster"))
    yield c
    c.stop_all(timeout=10)


@pytest.fixture(scope="module")
def admin(cluster: DevCluster) -> Iterator[Admin]:
    a = Admin({"bootstrap.servers": cluster.admin_servers, "request.timeout.ms": 10000})
    yield a
    a.close()


@pytest.fixture
def kafka_admin(odradek_cluster: DevCluster) -> Iterator[Any]:
    """kafka-python's KafkaAdminClient on the test's ``odradek_cluster``'s Kafka listener."""
    from kafka import KafkaAdminClient

    a = KafkaAdminClient(bootstrap_servers=odradek_cluster.kafka_bootstrap_servers, request_timeout_ms=10000)
    yield a
    a.close()

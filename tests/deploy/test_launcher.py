"""The node launcher (deploy/launcher.py, client/cli/launcher.py): a local cluster's nodes are forked from a process
that imported their code once. Each forked node must behave as a node started on its own: its own command line,
session, log, environment and exit status; a failure to start says so in its log as ``odradek server`` does; a
launcher that died, or an environment it was not started with, gets a new launcher."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from odradek.deploy import launcher
from odradek.deploy.local import DevCluster, process_state


def wait_until(predicate, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def ppid(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[1])


@pytest.fixture
def one_controller(tmp_path: Path):
    cluster = DevCluster.create(tmp_path / "c", 1, 0)
    yield cluster
    cluster.stop_all()


def test_a_forked_node_runs_as_its_own_process_and_reports_its_exit(
    one_controller: DevCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ODRADEK_LAUNCHER_TEST_MARK", "one")
    node = one_controller.start(1)
    assert node.log_file.exists()  # opened before the fork, as a started node's log is opened by its starter
    shared = launcher.current()
    assert shared is not None and shared.launched(node.pid)
    assert ppid(node.pid) != os.getpid()  # forked by the launcher, not a child of this process
    # ps and pgrep see the node's own command line (set just after the fork).
    wait_until(lambda: f"server --config {node.config}" in Path(f"/proc/{node.pid}/cmdline").read_bytes().decode())
    assert os.getsid(node.pid) == node.pid  # a session of its own, as a started node has
    assert shared._env["ODRADEK_LAUNCHER_TEST_MARK"] == "one"  # the environment the node was asked for
    assert Path(f"/proc/{node.pid}/cwd").resolve() == node.directory.resolve()
    wait_until(lambda: "started with roles controller" in node.log_file.read_text())
    assert one_controller.exit_status(1) is None
    os.kill(node.pid, signal.SIGKILL)
    wait_until(lambda: one_controller.exit_status(1) is not None)
    assert one_controller.exit_status(1) == -signal.SIGKILL
    assert process_state(node.pid) == "stopped"


def test_a_node_that_cannot_start_exits_1_with_one_error_line(one_controller: DevCluster) -> None:
    node = one_controller.node(1)
    Path(node.config).write_text(Path(node.config).read_text() + '\nno.such.key = "x"\n')
    one_controller.start(1)
    wait_until(lambda: one_controller.exit_status(1) is not None)
    assert one_controller.exit_status(1) == 1
    lines = node.log_file.read_text().splitlines()
    assert [line for line in lines if line.startswith("error:")] and "Traceback" not in node.log_file.read_text()


def test_another_environment_or_a_dead_launcher_gets_a_new_launcher(
    one_controller: DevCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ODRADEK_LAUNCHER_TEST_MARK", "before")
    first = one_controller.start(1).pid
    shared = launcher.shared()
    starter = shared._process
    assert starter is not None
    one_controller.stop_all()
    monkeypatch.setenv("ODRADEK_LAUNCHER_TEST_MARK", "after")
    second = one_controller.start(1).pid
    assert second != first and shared._env["ODRADEK_LAUNCHER_TEST_MARK"] == "after"
    assert shared._process is not starter  # settings read at import cannot change in a running launcher
    one_controller.stop_all()
    assert shared._process is not None
    shared._process.kill()
    shared._process.wait()
    log = one_controller.node(1).log_file
    before = len(log.read_text())
    third = one_controller.start(1).pid
    wait_until(lambda: "started with roles controller" in log.read_text()[before:])
    assert process_state(third) == "running" and shared.launched(third)


def test_with_the_launcher_off_a_node_is_a_child_of_its_starter(
    one_controller: DevCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(launcher.ENABLE_ENV, "0")
    node = one_controller.start(1)
    assert ppid(node.pid) == os.getpid()
    os.kill(node.pid, signal.SIGKILL)
    wait_until(lambda: one_controller.exit_status(1) is not None)
    assert one_controller.exit_status(1) == -signal.SIGKILL


@pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("ip"), reason="creating a network namespace needs root and ip"
)
def test_a_node_in_a_network_namespace_is_forked_into_it(tmp_path: Path) -> None:
    """The chaos harness's nodes run in network namespaces: forked, a node enters its namespace (as ``ip netns
    exec`` puts it there) and serves on that namespace's loopback."""
    name = f"odr-launch-{os.getpid()}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        subprocess.run(["ip", "netns", "exec", name, "ip", "link", "set", "lo", "up"], check=True)
        cluster = DevCluster.create(tmp_path / "c", 1, 0, hosts=lambda _: ("127.0.0.1", name))
        try:
            node = cluster.start(1)
            assert launcher.shared().launched(node.pid)
            wait_until(lambda: "started with roles controller" in node.log_file.read_text())
            assert os.stat(f"/proc/{node.pid}/ns/net").st_ino == os.stat(f"/run/netns/{name}").st_ino
            assert os.stat(f"/proc/{node.pid}/ns/net").st_ino != os.stat("/proc/self/ns/net").st_ino
            # Its controller listens in the namespace, not here.
            probe = [
                "python3",
                "-c",
                f"import socket; socket.create_connection(('127.0.0.1', {node.controller_port}), 5)",
            ]
            assert subprocess.run(["ip", "netns", "exec", name, *probe]).returncode == 0
        finally:
            cluster.stop_all()
        # A namespace that does not exist is the launcher's error: the node is started as its own process instead
        # (through ip netns exec, which says so in the node's log and exits non-zero).
        missing = DevCluster.create(tmp_path / "m", 1, 0, hosts=lambda _: ("127.0.0.1", f"{name}-missing"))
        pid = missing.start(1).pid
        assert not launcher.shared().launched(pid)
        wait_until(lambda: missing.exit_status(1) is not None, 15)
        assert missing.exit_status(1) != 0 and f"{name}-missing" in missing.node(1).log_file.read_text()
    finally:
        subprocess.run(["ip", "netns", "delete", name], check=False)

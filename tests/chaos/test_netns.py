"""Network namespaces as hosts: reachability under isolate/partition/bridge/slow, and nothing left behind."""

from __future__ import annotations

import errno
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import closing

import pytest

from odradek.chaos.netns import NetnsNetwork, NotSupported

pytestmark = pytest.mark.skipif(
    not NetnsNetwork.available(), reason="network namespaces unavailable here (needs root, iproute2, veth/bridge)"
)

PORT = 7000
ECHO = """
import socket, sys, threading
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", int(sys.argv[1])))
s.listen(16)
print("ready", flush=True)
def serve(c):
    with c:
        while data := c.recv(4096):
            c.sendall(data)
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
"""


def _leftovers(prefix: str) -> str:
    """Namespaces and root-namespace links whose name starts with prefix, as text for the assertion message."""
    names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    return "".join(line + "\n" for line in (names + links).splitlines() if prefix + "-" in line)


@pytest.fixture(scope="module")
def net() -> Iterator[NetnsNetwork]:
    with NetnsNetwork(hosts=3, attach_root=True) as n:
        servers = [n.popen(i, [sys.executable, "-c", ECHO, str(PORT)], stdout=subprocess.PIPE) for i in range(3)]
        for proc in servers:
            assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
        yield n
    for proc in servers:
        assert proc.poll() is not None
        proc.stdout.close()  # type: ignore[union-attr]
    assert _leftovers(n.prefix) == ""


@pytest.fixture(autouse=True)
def healed(net: NetnsNetwork) -> Iterator[None]:
    yield
    net.heal()


def reach(net: NetnsNetwork, src: int, dst: int, timeout: float = 3.0) -> bool:
    """True if an echo round trip from host src to host dst's server completes within timeout."""
    try:
        with net.connect(src, (net.host_ip(dst), PORT), timeout) as sock:
            sock.sendall(b"ping")
            return sock.recv(4) == b"ping"
    except OSError:
        return False


def cut(net: NetnsNetwork, src: int, dst: int) -> bool:
    """True if the echo round trip fails: a short timeout, since a cut link never answers."""
    return not reach(net, src, dst, timeout=0.5)


def root_reach(net: NetnsNetwork, dst: int) -> bool:
    """Echo from the test process itself (root namespace, attached to the bridge) to host dst."""
    with socket.create_connection((net.host_ip(dst), PORT), 1) as sock:
        sock.sendall(b"root")
        return sock.recv(4) == b"root"


def test_hosts_reach_each_other_and_processes_run_inside(net: NetnsNetwork) -> None:
    assert len({net.host_ip(i) for i in range(3)}) == 3
    assert all(reach(net, a, b) for a in range(3) for b in range(3) if a != b)
    client = f"import socket; s = socket.create_connection(({net.host_ip(0)!r}, {PORT}), 2); s.sendall(b'hi'); "
    client += "print(s.recv(2).decode())"
    out = subprocess.run(net.exec_argv(1, [sys.executable, "-c", client]), capture_output=True, text=True, timeout=20)
    assert out.stdout.strip() == "hi", out.stderr


def test_isolate_cuts_one_host_both_ways(net: NetnsNetwork) -> None:
    net.isolate(0)
    net.isolate(0)  # idempotent
    assert net.faults == [{"kind": "isolate", "host": 0}]
    assert net.blocked == [(0, 1), (0, 2), (1, 0), (2, 0)]
    started = time.monotonic()
    assert cut(net, 1, 0)
    assert time.monotonic() - started < 1.5
    assert cut(net, 0, 2)
    assert reach(net, 1, 2)
    # The harness's own root attachment is not a cluster host: faults never cut it.
    assert root_reach(net, 0)
    net.heal()
    assert net.faults == [] and net.blocked == []
    assert reach(net, 1, 0) and reach(net, 0, 2)


def test_established_connection_stalls_then_resumes_after_heal(net: NetnsNetwork) -> None:
    with net.connect(1, (net.host_ip(0), PORT), 3) as sock:
        net.isolate(0)
        sock.sendall(b"held")
        sock.settimeout(0.3)
        with pytest.raises(TimeoutError):
            sock.recv(4)  # "drop" mode: silence, no error, as in a real partition
        net.heal()
        sock.settimeout(5)
        assert sock.recv(4) == b"held"  # TCP retransmitted it once the path was back


def test_partition_groups(net: NetnsNetwork) -> None:
    net.partition([[0], [1, 2]])
    assert reach(net, 1, 2) and reach(net, 2, 1)
    assert cut(net, 0, 1)
    assert cut(net, 1, 0)
    assert net.blocked == [(0, 1), (0, 2), (1, 0), (2, 0)]


def test_bridge_connects_halves_only_through_the_middle(net: NetnsNetwork) -> None:
    net.bridge()  # 3 hosts: [0] - 1 - [2]
    assert net.faults == [{"kind": "bridge", "left": [0], "middle": 1, "right": [2]}]
    assert reach(net, 0, 1) and reach(net, 1, 0) and reach(net, 2, 1) and reach(net, 1, 2)
    assert cut(net, 0, 2)
    assert cut(net, 2, 0)


def test_faults_compose_and_validate(net: NetnsNetwork) -> None:
    net.block(1, 2)
    net.partition([[0, 1], [2]])
    assert net.blocked == [(0, 2), (1, 2), (2, 0), (2, 1)]
    with pytest.raises(ValueError):
        net.partition([[0, 1], [1, 2]])
    with pytest.raises(ValueError):
        net.isolate(3)


def test_slow_link(net: NetnsNetwork) -> None:
    if NetnsNetwork.netem_available():
        net.slow(1, delay_ms=100)
        started = time.monotonic()
        assert reach(net, 1, 0, timeout=3)
        assert time.monotonic() - started >= 0.4  # handshake + echo: two round trips of >= 200 ms
    else:
        with pytest.raises(NotSupported, match="netem"):
            net.slow(1, delay_ms=100)
        net.slow(1, loss_pct=100)  # loss works without netem (htb + BPF); all of it makes the link dead
        assert net.faults[-1]["impl"] == "htb+bpf"
        assert cut(net, 1, 0)
        assert reach(net, 2, 0)
    net.heal()
    assert net.faults == []
    assert reach(net, 1, 0)


@pytest.mark.parametrize(("mode", "err"), [("reject", errno.EHOSTUNREACH), ("blackhole", errno.EINVAL)])
def test_route_modes_fail_fast(mode: str, err: int) -> None:
    with NetnsNetwork(hosts=2, mode=mode) as n, closing(n.host_socket(0)) as listener:  # type: ignore[arg-type]
        listener.bind((n.host_ip(0), PORT))
        listener.listen()
        n.connect(1, (n.host_ip(0), PORT), 3).close()
        n.isolate(1)
        started = time.monotonic()
        with pytest.raises(OSError) as failure:
            n.connect(1, (n.host_ip(0), PORT), timeout=2)
        assert failure.value.errno == err
        assert time.monotonic() - started < 0.5
        n.heal()
        n.connect(1, (n.host_ip(0), PORT), 3).close()


def test_close_removes_everything_even_when_the_body_raises() -> None:
    with pytest.raises(RuntimeError, match="boom"), NetnsNetwork(hosts=2, attach_root=True) as n:
        proc = n.popen(0, ["sleep", "60"])
        n.isolate(0)
        assert n.prefix + "-h0" in _leftovers(n.prefix)
        raise RuntimeError("boom")
    assert proc.wait(5) is not None
    assert _leftovers(n.prefix) == ""
    n.close()  # idempotent


def test_cleanup_stale_removes_what_a_killed_run_left() -> None:
    crash = (
        "import os, subprocess; from odradek.chaos.netns import NetnsNetwork; "
        "n = NetnsNetwork(hosts=2, attach_root=True); "
        "n.popen(1, ['sleep', '60'], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL); "
        "print(n.prefix, flush=True); os._exit(1)"  # no close(), no atexit: as after SIGKILL
    )
    out = subprocess.run([sys.executable, "-c", crash], capture_output=True, text=True, timeout=30)
    prefix = out.stdout.strip()
    assert prefix.startswith("odr"), out.stderr
    try:
        assert f"{prefix}-h1" in _leftovers(prefix)
        with NetnsNetwork(hosts=1) as alive:  # a live run's namespaces are kept
            removed = NetnsNetwork.cleanup_stale()
            assert alive.prefix + "-h0" in _leftovers(alive.prefix)
        assert {f"{prefix}-br", f"{prefix}-h0", f"{prefix}-h1"} <= set(removed)
        assert _leftovers(prefix) == ""
    finally:
        NetnsNetwork.cleanup_stale(prefix)

"""Running odradek nodes as operating-system processes: the command and environment a node starts with, fresh
cluster ids and ports, and a process's state as /proc reports it.

The local cluster (``deploy/local.py``), the VM rehearsal (``deploy/vms.py``), the chaos harness and ``odradek
server`` itself share these, so a node runs the same way whoever starts it.
"""

from __future__ import annotations

import base64
import contextlib
import itertools
import os
import random
import socket
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

# glibc malloc returns large payload buffers to the OS and re-faults them on every RPC unless these are raised;
# measured 1.5-3.8x on 1 MiB RPCs. They must be set before the process starts (``odradek server`` re-execs).
MALLOC_ENV = {"MALLOC_MMAP_THRESHOLD_": str(64 * 1024 * 1024), "MALLOC_TRIM_THRESHOLD_": str(256 * 1024 * 1024)}


def random_cluster_id() -> str:
    """A URL-safe 22-character id, as Kafka's ``kafka-storage random-uuid`` (never starting with '-', which a
    command line would take for an option)."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if cluster_id[0] != "-":
            return cluster_id


def tuned_environment(env: dict[str, str] | None = None) -> dict[str, str]:
    """``env`` (default: this process's) with the malloc settings a node runs with, unless already set."""
    out = dict(os.environ if env is None else env)
    for key, value in MALLOC_ENV.items():
        out.setdefault(key, value)
    return out


def server_argv(config: str | Path) -> list[str]:
    """The command that runs one node from its TOML config with this interpreter (``odradek server``)."""
    return [sys.executable, "-m", "odradek.client.cli.main", "server", "--config", str(config)]


PORT_RANGE_ENV = "ODRADEK_PORT_RANGE"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now (see ``free_ports``)."""
    return free_ports(1)[0]


def free_ports(count: int) -> list[int]:
    """``count`` distinct free ports, all held open at once while chosen, since the kernel may hand out a port it
    just gave (and that was closed again) to the next bind.

    By default the kernel chooses, from its ephemeral range. With ``$ODRADEK_PORT_RANGE`` (``LOW-HIGH``) set, the
    ports come from that range instead: a firewall's opening, or a block of its own for each of several test
    processes on one machine, so that a port one of them has chosen for a node that is still starting is never
    handed to another (nor taken by an outgoing connection, when the range lies below the ephemeral one).
    """
    span = port_range()
    with contextlib.ExitStack() as stack:
        sockets = []
        for port in _candidates(span, count):
            s = socket.socket()
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                s.close()
                continue
            sockets.append(stack.enter_context(s))
            if len(sockets) == count:
                return [s.getsockname()[1] for s in sockets]
        raise OSError(f"fewer than {count} free ports in {PORT_RANGE_ENV}={os.environ[PORT_RANGE_ENV]}")


def port_range() -> tuple[int, int] | None:
    """``$ODRADEK_PORT_RANGE`` as (low, high), both included, or None when unset."""
    text = os.environ.get(PORT_RANGE_ENV, "").strip()
    if not text:
        return None
    low, sep, high = text.partition("-")
    try:
        span = (int(low), int(high)) if sep else (-1, -1)
    except ValueError:
        span = (-1, -1)
    if not 1024 <= span[0] <= span[1] <= 65535:
        raise ValueError(f"{PORT_RANGE_ENV} must be LOW-HIGH within 1024-65535, not {text!r}")
    return span


_next_port: dict[tuple[int, int], int] = {}


def _candidates(span: tuple[int, int] | None, count: int) -> Iterator[int]:
    """Ports to try: the kernel's choice (0) without a range; else the range once round, from where this process
    left off (a random place at first, so that two processes sharing a range rarely try the same ports)."""
    if span is None:
        yield from itertools.repeat(0, count)
        return
    low, high = span
    size = high - low + 1
    start = _next_port.get(span, low + random.randrange(size))
    for i in range(size):
        port = low + (start - low + i) % size
        _next_port[span] = low + (port - low + 1) % size
        yield port


def process_state(pid: int) -> str:
    """running, paused or stopped (zombies count as stopped)."""
    if pid <= 0:
        return "stopped"
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return "stopped"
    state = stat.rpartition(")")[2].split()[0]
    if state in ("Z", "X"):
        return "stopped"
    return "paused" if state in ("T", "t") else "running"

"""Running odradek nodes as operating-system processes: the command and environment a node starts with, fresh
cluster ids and ports, and a process's state as /proc reports it.

The local cluster (``deploy/local.py``), the VM rehearsal (``deploy/vms.py``), the chaos harness and ``odradek
server`` itself share these, so a node runs the same way whoever starts it.
"""

from __future__ import annotations

import base64
import contextlib
import os
import socket
import sys
import uuid
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


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now (the kernel's choice)."""
    return free_ports(1)[0]


def free_ports(count: int) -> list[int]:
    """``count`` distinct free ports: all held open at once while chosen, since the kernel may hand out a port it
    just gave (and that was closed again) to the next bind."""
    with contextlib.ExitStack() as stack:
        sockets = [stack.enter_context(socket.socket()) for _ in range(count)]
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]


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

"""Starting local nodes by forking a process that has imported a node's code already.

Importing a node's modules costs about 0.8 s of CPU, two thirds of a broker's start, and a local cluster, the test
suite or a chaos run starts nodes by the dozen. A launcher is a child process (``python -m
odradek.client.cli.launcher``) that imports them once, single-threaded, and then forks one node per request: each node
is a process of its own (its own session, working directory, log file and environment, as ``odradek server`` would
be), started without paying for the import again. This module is the starter's side; the launcher process is
``odradek.client.cli.launcher``. Nothing in it runs before the fork but imports: no thread, no
event loop, no gRPC channel, so the fork copies no lock held by another thread.

The launcher answers on its stdout, one JSON line per request line on its stdin; it reaps its children and keeps
their exit statuses; it exits when its stdin closes (its starter has ended), and the nodes live on. A launcher is
started with one environment and forks nodes only with that environment (a request with another one starts a new
launcher), since settings read at import, such as ``ODRADEK_NO_EXTENSIONS``, cannot change after it.
``ODRADEK_NODE_LAUNCHER=0`` turns it off: every node is then started as its own ``odradek server`` process.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

ENABLE_ENV = "ODRADEK_NODE_LAUNCHER"


def enabled() -> bool:
    return os.environ.get(ENABLE_ENV, "1") != "0"


class LauncherError(RuntimeError):
    """The launcher could not start a node (its process has died, or the fork failed)."""


class NodeLauncher:
    """The starter's side: one launcher process, started at the first request, restarted when the environment
    asked for differs from the one it has or when it has died. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._process: subprocess.Popen[str] | None = None
        self._env: dict[str, str] = {}
        self._launched: set[int] = set()

    def start(self, config: Path, cwd: Path, log: Path, env: Mapping[str, str], netns: str = "") -> int:
        """Fork a node running ``odradek server --config <config>`` (in network namespace ``netns``, as ``ip netns
        exec`` runs it, if given); its pid."""
        wanted = dict(env)
        request = {
            "op": "start",
            "config": str(config),
            "cwd": str(cwd),
            "log": str(log),
            "env": wanted,
            "netns": netns,
        }
        with self._lock:
            if self._process is None or self._process.poll() is not None or self._env != wanted:
                self._spawn(wanted)
            answer = self._ask(request)
            if "pid" not in answer:
                raise LauncherError(f"the node launcher could not start {config}: {answer.get('error')}")
            pid = int(answer["pid"])
            self._launched.add(pid)
            return pid

    def launched(self, pid: int) -> bool:
        return pid in self._launched

    def exit_status(self, pid: int) -> int | None:
        """A node's exit code (negative: the signal that ended it) once the launcher has reaped it, else None."""
        with self._lock:
            if self._process is None or self._process.poll() is not None:
                return None
            status = self._ask({"op": "status", "pid": pid}).get("status")
            return None if status is None else int(status)

    def children_cpu_seconds(self) -> float:
        """CPU seconds of the nodes this launcher has forked and reaped (they are not its starter's children)."""
        with self._lock:
            if self._process is None or self._process.poll() is not None:
                return 0.0
            return float(self._ask({"op": "rusage"}).get("cpu_s", 0.0))

    def close(self) -> None:
        with self._lock:
            if self._process is not None:
                _stop(self._process)
                self._process = None

    def _spawn(self, env: dict[str, str]) -> None:
        if self._process is not None:
            _stop(self._process)
        self._process = subprocess.Popen(
            [sys.executable, "-m", "odradek.client.cli.launcher"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            text=True,
            start_new_session=True,  # as the nodes: a terminal's Ctrl-C to the starter does not reach it
        )
        self._env = env
        ready = self._read()
        if not ready.get("ready"):
            raise LauncherError(f"the node launcher did not start: {ready}")

    def _ask(self, request: dict[str, Any]) -> dict[str, Any]:
        assert self._process is not None and self._process.stdin is not None
        try:
            self._process.stdin.write(json.dumps(request) + "\n")
            self._process.stdin.flush()
        except OSError as e:
            raise LauncherError(f"the node launcher has gone: {e}") from None
        return self._read()

    def _read(self) -> dict[str, Any]:
        assert self._process is not None and self._process.stdout is not None
        line = self._process.stdout.readline()
        if not line:
            raise LauncherError(f"the node launcher has gone (exit {self._process.poll()})")
        answer: dict[str, Any] = json.loads(line)
        return answer


def _stop(process: subprocess.Popen[str]) -> None:
    if process.stdin is not None:
        with contextlib.suppress(OSError):
            process.stdin.close()
    try:
        process.wait(5)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


_shared: NodeLauncher | None = None
_shared_lock = threading.Lock()


def shared() -> NodeLauncher:
    """This process's launcher (every local cluster it runs shares one)."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = NodeLauncher()
        return _shared


def current() -> NodeLauncher | None:
    """This process's launcher if one was started, else None."""
    return _shared

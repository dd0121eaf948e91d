"""The node launcher's process (started by ``odradek.deploy.launcher.NodeLauncher``, which describes it): imports a
node's code once, then forks one node per request read on stdin, answering on stdout, one JSON line each."""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import json
import os
import resource
import signal
import sys
import traceback
from typing import IO, Any

import setproctitle

from odradek.deploy.process import server_argv

# What a node imports before it reads its config: its command, the node and its event loop.
PRELOAD = ("odradek.client.cli.main", "odradek.client.cli.server", "odradek.broker.node", "uvloop")


class _Children:
    """Exit statuses of the forked nodes, collected as SIGCHLD arrives (the launcher's loop is blocked reading)."""

    def __init__(self) -> None:
        self.statuses: dict[int, int] = {}

    def reap(self, *_: object) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            self.statuses[pid] = os.waitstatus_to_exitcode(status)


CLONE_NEWNET = 0x40000000


def _enter_netns(namespace: int) -> None:
    """Move this (single-threaded) process into the network namespace open as ``namespace``, as ``ip netns exec``
    does for the network; every thread and socket the node makes later is in it."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(namespace, CLONE_NEWNET) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"setns: {os.strerror(errno)}")


def _run_node(request: dict[str, Any], log: int, namespace: int | None) -> None:
    """In the forked child: become the node, logging to ``log`` (a descriptor), in the network namespace open as
    ``namespace`` if one was asked for, and never return to the launcher's loop."""
    code = 1
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)  # the launcher ignores it; a node does not
        os.setsid()
        if namespace is not None:
            _enter_netns(namespace)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.closerange(3, 256)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        argv = ["server", "--config", request["config"]]
        sys.argv = [sys.executable, *argv]
        # ps and pgrep show the command a started node would have, config path and all, not the launcher's.
        setproctitle.setproctitle(" ".join(server_argv(request["config"])))
        from odradek.client.cli.main import main

        code = main(argv)
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(code)


def _serve(requests: IO[str], answers: IO[str]) -> None:
    children = _Children()
    signal.signal(signal.SIGCHLD, children.reap)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    answers.write(json.dumps({"ready": True}) + "\n")
    answers.flush()
    for line in requests:
        request = json.loads(line)
        op = request.get("op")
        if op == "start":
            # The log is opened before the fork, as a started node's is by its starter: it exists once the pid is
            # answered, and a log that cannot be opened is the starter's error, not a node that dies at once.
            # So is the network namespace: one that does not exist is an error answer, not a node that dies.
            namespace: int | None = None
            try:
                log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
                try:
                    if request.get("netns"):
                        namespace = os.open(f"/run/netns/{request['netns']}", os.O_RDONLY)
                    pid = os.fork()
                    if pid == 0:
                        _run_node(request, log, namespace)
                finally:
                    os.close(log)
                    if namespace is not None:
                        os.close(namespace)
            except OSError as e:
                answer: dict[str, Any] = {"error": str(e)}
            else:
                answer = {"pid": pid}
        elif op == "status":
            children.reap()
            answer = {"status": children.statuses.get(int(request["pid"]))}
        elif op == "rusage":
            children.reap()
            usage = resource.getrusage(resource.RUSAGE_CHILDREN)
            answer = {"cpu_s": usage.ru_utime + usage.ru_stime}
        else:
            answer = {"error": f"unknown request {op!r}"}
        answers.write(json.dumps(answer) + "\n")
        answers.flush()


def main() -> None:
    setproctitle.getproctitle()  # takes over the argv and environ memory now, while both are still as exec left them
    for module in PRELOAD:
        importlib.import_module(module)
    threads = len(os.listdir("/proc/self/task")) if os.path.isdir("/proc/self/task") else 1
    if threads != 1:  # a fork would copy locks other threads may hold: refuse, the starter runs nodes itself
        print(json.dumps({"ready": False, "error": f"{threads} threads after the imports"}), flush=True)
        return
    _serve(sys.stdin, sys.stdout)


if __name__ == "__main__":
    main()
